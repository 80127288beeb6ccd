"""`hybrax basin <model> --grid NAME=START:STOP:COUNT ...`: the basin of attraction
of a model's periodic orbit over a grid of section states.

Registered by `hybrax._cli` through `add_parser(subparsers)`. Finds the model's
orbit by shooting from its guess (without the homotopy from the defaults that
`hybrax orbit` falls back on; without an orbit the starts are classified without
one and the command exits 1), then runs [`hybrax.basin`][] over the grid (one or
two of the section's unknowns; the others at the orbit's values): every start
iterated for `--steps` cycles in one compiled `vmap`, in chunks, on every local
device, and classified. Writes `basin.csv`, `basin.npz` and the map
`basin_map.png` (classes coloured, the orbit starred). Ctrl-C keeps the slices of
starts that finished: the tables of those (the others `not_run`) and
`basin_partial.npz`, which `--resume` finishes.
"""

import argparse
import math
import pathlib
import sys
import time

import numpy as np

from .._io import write_figure, write_file
from . import common
from .sweep import _parse_grid


# The most starts of one basin (its table stays within a few hundred MB).
_MAX_POINTS = 4_000_000
# The default grid of a model without its own: each of the first two unknowns
# from half to 1.5 times the orbit's value, this many values each.
_DEFAULT_COUNT = 41
# The longest period identified by default: lower where --steps leaves fewer
# cycles to read a period off.
_DEFAULT_MAX_PERIOD = 8


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "basin",
        help="the basin of attraction of the model's orbit over a grid of starts",
        description=(
            "Find the model's periodic orbit, then iterate its return map for "
            "--steps cycles from every point of a grid of section states (one or "
            "two of the section's unknowns; the others at the orbit's values), all "
            "in one batched, compiled computation, and classify each start: it "
            "reaches the orbit, settles on another periodic orbit (its period "
            "found), falls, is unsettled after the cycles, or its run failed. "
            "Writes basin.csv, basin.npz and the map basin_map.png. Default "
            "grid: the model's (simplest-walker: --grid theta=0.1:0.3:100 --grid "
            "theta_dot=-0.35:-0.05:100)."
        ),
    )
    common._add_common_model_args(parser)
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="NAME=START:STOP:COUNT",
        help=(
            "a grid axis: COUNT values of the section coordinate NAME from START "
            "to STOP (one or two axes; the others at the orbit's values; a wrong "
            "NAME is an error that lists them)"
        ),
    )
    parser.add_argument(
        "--steps",
        type=common.bounded_int(2, 100_000),
        default=20,
        metavar="N",
        help="cycles run from every start (default: %(default)s)",
    )
    parser.add_argument(
        "--settle-tol",
        type=common._positive_float,
        default=1e-4,
        metavar="TOL",
        help="distance to the orbit (max norm of the unknowns) within which a start "
        "has reached it, and within which a settled start repeats "
        "(default: %(default)g)",
    )
    parser.add_argument(
        "--max-period",
        type=common.bounded_int(1, 1000),
        default=None,
        metavar="P",
        help="the longest period, in cycles, identified; must be below --steps "
        f"(default: {_DEFAULT_MAX_PERIOD}, or --steps - 1 where that is lower)",
    )
    parser.add_argument(
        "--chunk",
        type=common.bounded_int(1, _MAX_POINTS),
        default=None,
        metavar="N",
        help="at most N starts per compiled call (default: 256, fewer to give "
        "every CPU core a chunk)",
    )
    parser.add_argument(
        "--resume",
        type=pathlib.Path,
        default=None,
        metavar="FILE",
        help="finish the interrupted basin saved in FILE (the basin_partial.npz "
        "that Ctrl-C writes): its finished starts are kept, the others go on from "
        "where they stopped (the same model, --grid and options; anything else is "
        "an error that names it)",
    )
    common._add_form_arg(parser)
    common.add_solver_args(parser)
    parser.set_defaults(run=_run_basin, command_parser=parser)


def _basin_axes(parser, model, orbit_guess, grids):
    """The grid axes `[(name, values), ...]` over the section's unknowns, and
    the unknowns' names."""
    k = int(np.shape(orbit_guess)[0])
    names = model.section_unknowns(k)
    if not grids:
        grids = model.presentation.basin_grids
    if not grids:
        centre = np.asarray(orbit_guess, dtype=float)
        axes = []
        for i in range(min(2, k)):
            low, high = sorted((0.5 * centre[i], 1.5 * centre[i]))
            if low == high:
                low, high = low - 0.5, high + 0.5
            axes.append((names[i], np.linspace(low, high, _DEFAULT_COUNT)))
        return axes, names
    axes = [_parse_grid(parser, names, g, "section coordinate") for g in grids]
    grid_names = [name for name, _ in axes]
    if len(axes) > 2:
        parser.error("argument --grid: give one or two axes")
    if len(set(grid_names)) < len(grid_names):
        parser.error("argument --grid: a coordinate is given twice")
    n_points = math.prod(len(values) for _, values in axes)
    if n_points > _MAX_POINTS:
        parser.error(
            f"argument --grid: the grid has {n_points} starts; at most {_MAX_POINTS}"
        )
    return axes, names


def _starts(axes, names, point) -> np.ndarray:
    """The grid's starts `(n_1[, n_2], k)`: the orbit's point with the grid's
    unknowns replaced."""
    index = [names.index(name) for name, _ in axes]
    mesh = np.meshgrid(*[values for _, values in axes], indexing="ij")
    starts = np.broadcast_to(np.asarray(point, float), mesh[0].shape + (len(names),))
    starts = starts.copy()
    for i, values in zip(index, mesh):
        starts[..., i] = values
    return starts


def _run_basin(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:

    from .._basin import BASIN_OUTCOMES, basin
    from .._solution import RESULTS, Interrupted, status_code, status_name

    model = common._load_model(parser, args.model)
    if not model.has_orbits:
        parser.error(f"argument model: no periodic orbits for {args.model!r}")
    if args.max_period is None:
        # A period is read off the last cycles: a short run (a valid --steps
        # below the default's) identifies shorter periods, never an error
        # about an option that was not given.
        args.max_period = min(_DEFAULT_MAX_PERIOD, args.steps - 1)
    elif args.max_period >= args.steps:
        parser.error(
            f"argument --max-period: must be below --steps ({args.steps}): a period "
            "is read off the last cycles"
        )
    problem = common.section_problem(parser, model, args)
    form_name, system, section, params, guess = problem
    axes, names = _basin_axes(parser, model, guess, args.grid)
    settings = common.solver_settings(args)

    start = time.perf_counter()
    orbit = problem.point_orbit(settings)
    found = bool(orbit.succeeded)
    point = np.asarray(orbit.u) if found else np.asarray(guess)
    starts = _starts(axes, names, point)
    grid_text = " x ".join(
        f"{name} ({len(v)} in [{v[0]:g}, {v[-1]:g}])" for name, v in axes
    )
    print(
        f"{args.model} ({form_name}): basin over {grid_text} = "
        f"{math.prod(starts.shape[:-1])} starts, {args.steps} cycles each"
    )
    if found:
        print(
            "  the orbit: "
            + ", ".join(f"{n} = {v:.10g}" for n, v in zip(names, point))
            + f"; spectral radius {float(orbit.spectral_radius):.4g}"
        )
    else:
        print(
            f"note: no orbit found from the model's guess "
            f"({status_name(orbit.result)[0]}); the starts are classified without "
            "one (the other unknowns at the guess's values)",
            file=sys.stderr,
        )
    sys.stdout.flush()
    resume = None
    if args.resume is not None:
        resume = common.load_resume(parser, args.resume, "Basin", "basin")
    interrupted = False
    try:
        result = basin(
            system,
            section,
            starts,
            params,
            orbit=orbit if found else None,
            n_cycles=args.steps,
            tolerance=args.settle_tol,
            max_period=args.max_period,
            settings=settings,
            chunk_size=args.chunk,
            progress=not args.quiet,
            resume=resume,
        )
    except Interrupted as stop:
        if stop.partial is None:  # nothing finished: `main`'s one line
            raise KeyboardInterrupt from None
        result, interrupted = stop.partial, True
    except ValueError as error:
        if resume is None or not str(error).startswith("`resume` "):
            raise
        parser.error(common.resume_error(args.resume, error))
    seconds = time.perf_counter() - start
    counts = result.counts()
    total = sum(counts.values())
    print(f"  {total} starts in {seconds:.1f} s (orbit, compilation and cycles):")
    for name in BASIN_OUTCOMES:
        if counts[name]:
            share = 100 * counts[name] / total
            print(f"    {name:<10} {counts[name]:>8}  ({share:.1f} %)")
    not_run = int(np.sum(status_code(result.result) == status_code(RESULTS.not_run)))
    if not_run:
        print(f"    (of the failed, not run (interrupted): {not_run})")
    periods = sorted(set(np.asarray(result.period)[np.asarray(result.outcome) == 1]))
    if periods:
        print(f"  other periodic orbits of period {', '.join(map(str, periods))}")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    _write_tables(out, axes, names, result)
    if args.figures:
        _write_map(out, model, axes, names, result, found, args)
    if args.json is not None:
        common._write_json(
            args.json,
            {
                "model": common.model_record(model),
                "form": form_name,
                "params": common._params_dict(params),
                "grid": {name: values.tolist() for name, values in axes},
                "steps": args.steps,
                "settle_tol": args.settle_tol,
                "max_period": args.max_period,
                "solver": common.solver_record(args),
                "orbit": point.tolist() if found else None,
                "orbit_status": status_name(orbit.result)[0],
                "counts": counts,
                "not_run": not_run,
                # Whether the basin ran to the end; `status` says the same in
                # the words of older files (`finished` is no library status).
                "complete": not interrupted,
                "status": "interrupted" if interrupted else "finished",
                "seconds": seconds,
            },
            "basin",
        )
        print(f"wrote {args.json}")
    if interrupted:
        return common.keep_partial(
            out / "basin_partial.npz",
            result,
            f"hybrax basin: interrupted with {not_run} of {total} starts still "
            "moving; wrote the others, those with the status `not_run`",
        )
    return 0 if found else 1


def _write_tables(out: pathlib.Path, axes, names, result) -> None:
    """`basin.csv` (one row per start) and `basin.npz` (the arrays)."""
    from .._basin import BASIN_OUTCOMES
    from .._solution import status_name

    starts = np.asarray(result.starts).reshape(-1, len(names))
    outcome = np.asarray(result.outcome).ravel()
    statuses = status_name(result.result)
    final = np.asarray(result.final).reshape(-1, len(names))
    header = [
        *names,
        "outcome",
        "period",
        "cycles",
        "status",
        *[f"final_{n}" for n in names],
    ]
    lines = [",".join(header)]
    for i in range(outcome.size):
        row = [
            *(f"{v:.12g}" for v in starts[i]),
            BASIN_OUTCOMES[outcome[i]],
            str(int(np.ravel(result.period)[i])),
            str(int(np.ravel(result.cycles)[i])),
            statuses[i],
            *(f"{v:.12g}" for v in final[i]),
        ]
        lines.append(",".join(row))
    text = "\n".join(lines) + "\n"
    path = write_file(out / "basin.csv", lambda temporary: temporary.write_text(text))
    print(f"wrote {path}")
    arrays = {
        "starts": np.asarray(result.starts),
        "outcome": np.asarray(result.outcome),
        "period": np.asarray(result.period),
        "cycles": np.asarray(result.cycles),
        "final": np.asarray(result.final),
        "distance": np.asarray(result.distance),
        "orbit": np.asarray(result.orbit),
        "outcome_names": np.asarray(BASIN_OUTCOMES),
        **{f"grid_{name}": values for name, values in axes},
    }
    path = write_file(
        out / "basin.npz", lambda temporary: np.savez(temporary, **arrays)
    )
    print(f"wrote {path}")


def _write_map(out, model, axes, names, result, found, args) -> None:
    from ..plot import basin_map

    labels = [model.label(name) for name, _ in axes]
    index = [names.index(name) for name, _ in axes]
    orbit = tuple(np.asarray(result.orbit)[index]) if found else None
    figure = basin_map(
        axes[0][1],
        axes[1][1] if len(axes) > 1 else None,
        np.asarray(result.outcome),
        xlabel=labels[0],
        ylabel=labels[1] if len(labels) > 1 else None,
        period=np.asarray(result.period),
        orbit=orbit,
        title=f"{args.model}: basin of attraction ({args.steps} cycles)",
    )
    path = write_figure(out / "basin_map.png", figure)
    print(f"wrote {path}")
