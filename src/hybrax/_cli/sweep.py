"""`hybrax sweep <model> --grid NAME=START:STOP:COUNT ...`: periodic orbits and their
stability over a parameter grid.

Registered by `hybrax._cli` through `add_parser(subparsers)`. Every grid point is
one element of [`hybrax.sweep_orbits`][] (all points in one compiled `vmap`, cut into
chunks, sharded over the local devices), with its defaults: Newton from the model's
orbit guess, then from the nearest converged points' orbits, then after return-map
iterations; the reduced Jacobian $M$ and its eigenvalues. Writes the table as
`sweep.csv` and `sweep.npz` and, for a 2-D grid, `sweep_heatmap.png`: the leading
nontrivial multiplier's magnitude with the stability boundary $|\\nu| = 1$ contoured and
the points without an orbit hatched grey (never coloured as values).
"""

import argparse
import csv
import dataclasses
import itertools
import math
import pathlib
import sys
import time
from typing import Any, NamedTuple

import numpy as np

from .._io import write_file
from .._sweep_defaults import (
    SWEEP_JACOBIAN,
    SWEEP_MAP_ITERATIONS,
    SWEEP_MAX_ITERATIONS,
    SWEEP_NEIGHBOURS,
    SWEEP_STRATEGIES,
    SWEEP_T_MAX,
)
from . import common
from .sweep_map import read_curves, write_heatmap


# The largest chunk (elements per compiled call); chunks are balanced to it.
_CHUNK = 256
# The most grid points of one sweep (and the largest chunk): its table and the
# orbits' arrays stay within a few GB.
_MAX_POINTS = 1_000_000
# The guard of the ground phase right after touchdown is -lambda_g / (m g) (O(1));
# below minus this the ground would have to pull: not admissible.
_PULL_TOL = 1e-9


def _sweep_options(
    *,
    tol: float = common.TOL,
    t_max: float = SWEEP_T_MAX,
    max_ode_steps: int = common.MAX_ODE_STEPS,
    max_iterations: int = SWEEP_MAX_ITERATIONS,
    map_iterations: int = SWEEP_MAP_ITERATIONS,
    jacobian: str = SWEEP_JACOBIAN,
) -> dict[str, Any]:
    """The keyword arguments of `sweep_orbits` for these settings (the defaults are
    `sweep_orbits`' own, from `hybrax._sweep_defaults`)."""
    from .._settings import Settings, Shooting

    return dict(
        settings=Settings(
            rtol=float(tol),
            atol=float(tol),
            t_max=float(t_max),
            max_steps=int(max_ode_steps),
        ),
        shooting=Shooting(
            max_iterations=int(max_iterations),
            return_map_iterations=int(map_iterations),
            jacobian=jacobian,
        ),
    )


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="periodic orbits and their stability over a parameter grid",
        description=(
            "Find the periodic orbit and its Floquet multipliers at every point of a "
            "parameter grid (the cartesian product of the --grid axes) in one "
            "batched, compiled computation. Writes sweep.csv, sweep.npz and, for a "
            "2-D grid, the heat map sweep_heatmap.png of the leading nontrivial "
            "multiplier's magnitude with |multiplier| = 1 contoured and the points "
            "without an orbit hatched. Default grid: the model's (hopper: --grid "
            "mu=0.7:0.95:26 --grid D_G=-0.07:0:71). Uses all local JAX "
            "devices; on a CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N "
            "gives N devices."
        ),
    )
    common._add_common_model_args(parser)
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="NAME=START:STOP:COUNT",
        help=(
            "a grid axis: COUNT values of parameter NAME from START to STOP "
            "(linspace; repeatable, the grid is the cartesian product; write "
            "--grid=D_G=-0.07:0:71 or --grid D_G=-0.07:0:71)"
        ),
    )
    parser.add_argument(
        "--chunk",
        type=common.bounded_int(1, _MAX_POINTS),
        default=_CHUNK,
        metavar="N",
        help="at most N points per compiled call, bounds memory (default: %(default)s)",
    )
    common._add_form_arg(parser)
    parser.add_argument(
        "--guess",
        choices=("default", "scan"),
        default="default",
        help=(
            "initial guess per point: the model's orbit guess (default), or a scan "
            "of the return map for a sign change where the model has one (the "
            "hopper's minimal form; robust, ~50 cycles more per point)"
        ),
    )
    parser.add_argument(
        "--map-iterations",
        type=common.bounded_int(0, 10_000),
        default=SWEEP_MAP_ITERATIONS,
        metavar="N",
        help=(
            "return-map iterations from the orbit guess before Newton, the last "
            "strategy at a point where Newton from the guess and from the "
            "neighbours' orbits found none; 0 skips it (default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--neighbours",
        type=common.bounded_int(0, 64),
        default=SWEEP_NEIGHBOURS,
        metavar="N",
        help=(
            "at a point without an orbit from its guess, Newton from the orbit of "
            "each converged point among its N nearest (on a grid, its neighbours; "
            "default: %(default)s)"
        ),
    )
    parser.add_argument(
        "--max-iterations",
        type=common.bounded_int(1, 10_000),
        default=SWEEP_MAX_ITERATIONS,
        metavar="N",
        help="Newton iteration limit per point (default: %(default)s)",
    )
    parser.add_argument(
        "--curves",
        action="append",
        type=pathlib.Path,
        default=[],
        metavar="FILE",
        help=(
            "draw on the heat map the two-parameter curve of a `hybrax continue "
            "--curve ... --json FILE` run over the same two parameters "
            "(repeatable)"
        ),
    )
    parser.add_argument(
        "--quantity",
        metavar="NAME",
        help=(
            "the orbit quantity of the heat map and a column of the table (one of "
            "the model's quantities, e.g. the compass gait's Tc_over_T; default: "
            "the leading multiplier's magnitude)"
        ),
    )
    parser.add_argument(
        "--resume",
        type=pathlib.Path,
        default=None,
        metavar="FILE",
        help="finish the interrupted sweep saved in FILE (the sweep_partial.npz "
        "that Ctrl-C writes): its finished points are kept, the others solved "
        "(the same --grid and options)",
    )
    parser.add_argument(
        "--warm-start",
        action="store_true",
        help=(
            "start each point, once orbits have converged, from the orbit of the "
            "nearest converged point (fewer Newton iterations on fine grids; where "
            "orbits coexist it may find another one)"
        ),
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="do not show the progress bar"
    )
    common.add_solver_args(
        parser,
        t_max=SWEEP_T_MAX,
        why=f"--t-max {SWEEP_T_MAX:g} here: every element of a chunk waits for its "
        "slowest, so a hopeless one must give up early",
    )
    parser.set_defaults(run=_run_sweep, command_parser=parser)


def _parse_grid(
    parser: argparse.ArgumentParser,
    known,
    text: str,
    what: str = "parameter",
    option: str = "--grid",
) -> tuple[str, np.ndarray]:
    """`NAME=START:STOP:COUNT` as `(NAME, linspace)`, NAME among `known` (the
    model's parameters, or what `what` says); a usage error naming `option`
    otherwise."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    parts = spec.split(":")
    if not sep or not name or len(parts) != 3:
        parser.error(f"argument {option}: expected NAME=START:STOP:COUNT, got {text!r}")
    if name not in known:
        parser.error(
            f"argument {option}: unknown {what} {name!r}; known: {', '.join(known)}"
        )
    try:
        start, stop = float(parts[0]), float(parts[1])
        count = int(parts[2])
    except ValueError:
        parser.error(
            f"argument {option}: {name}: START and STOP must be numbers and COUNT an "
            f"integer, got {spec!r}"
        )
    if not (np.isfinite(start) and np.isfinite(stop)):
        parser.error(f"argument {option}: {name}: START and STOP must be finite")
    if not 1 <= count <= _MAX_POINTS:
        parser.error(
            f"argument {option}: {name}: COUNT must be from 1 to {_MAX_POINTS}, got "
            f"{count}"
        )
    return name, np.linspace(start, stop, count)


def _grid_params(parser, model, sets: dict[str, float], axes):
    """The parameters of every grid point (C order: the last axis fastest), as one
    PyTree with leaves of shape `(n_points,)`."""
    import jax.tree_util as jtu

    names = [name for name, _ in axes]
    points = []
    for values in itertools.product(*[v for _, v in axes]):
        point = dict(zip(names, (float(v) for v in values)))
        try:
            points.append(model.make_params(**sets, **point))
        except ValueError as error:
            where = ", ".join(f"{k}={v:g}" for k, v in point.items())
            parser.error(f"argument --grid: at {where}: {error}")
    return jtu.tree_map(lambda *leaves: np.asarray(leaves, dtype=float), *points)


def _balanced_chunk(n: int, most: int, n_devices: int) -> int:
    """The smallest chunk (a multiple of the device count) that covers `n` points in
    as many chunks as `most` would: little padding, and one compilation."""
    chunks = -(-n // max(most, 1))
    size = -(-n // chunks)
    return n_devices * -(-size // n_devices)


def _mode_names(system, section) -> list[str]:
    sequence = [system.transition_index(k) for k in section.sequence]
    return [system.modes[system.sources[k]].name for k in sequence]


def _columns(
    axes, params, out, system, section, flag_name="starts_past_guard", quantities=None
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Per-point columns (flat arrays) of the CSV and NPZ files; `quantities`
    (name -> `q(orbit, params)`) adds a column per model quantity."""
    import equinox as eqx

    from .._solution import status_code

    converged = np.asarray(out.succeeded)
    n = converged.size
    # An orbit that breaks a declared boundary keeps its values (and is flagged).
    inadmissible = np.array(out.status_names) == "inadmissible_orbit"

    def only_converged(values):
        values = np.asarray(values, dtype=float)
        mask = (converged | inadmissible).reshape((n,) + (1,) * (values.ndim - 1))
        return np.where(mask, values, np.nan)

    columns: dict[str, np.ndarray] = {}
    grid_names = [name for name, _ in axes]
    mesh = np.meshgrid(*[v for _, v in axes], indexing="ij")
    for name, values in zip(grid_names, mesh):
        columns[name] = values.ravel()
    # Then every parameter of the model (e.g. d_G next to the grid's D_G).
    for field in dataclasses.fields(params) if dataclasses.is_dataclass(params) else ():
        if field.name not in columns:
            leaf = np.asarray(getattr(params, field.name), dtype=float)
            columns[field.name] = np.broadcast_to(leaf, (n,))
    columns["status"] = np.array(out.status_names)
    columns["status_code"] = status_code(out.result)
    columns["converged"] = converged
    # Which strategy found the orbit (`hybrax.SWEEP_STRATEGIES`; empty for none),
    # and from how many converged neighbours' orbits the point was solved.
    columns["found_by"] = np.array(out.strategy_names)
    columns["neighbour_starts"] = np.asarray(out.neighbour_starts)
    columns["newton_iterations"] = np.asarray(out.orbit.n_steps)
    columns["residual_norm"] = np.asarray(out.orbit.residual_norm, dtype=float)
    columns["period"] = only_converged(out.orbit.period)
    durations = only_converged(out.orbit.phase_durations)
    for i, mode in enumerate(_mode_names(system, section)):
        columns[f"t_{mode}"] = durations[:, i]
    multipliers = np.asarray(out.multipliers)
    for j in range(multipliers.shape[1]):
        suffix = "" if j == 0 else str(j + 1)
        columns[f"multiplier{suffix}_re"] = multipliers[:, j].real
        columns[f"multiplier{suffix}_im"] = multipliers[:, j].imag
        if j == 0:
            columns["multiplier_abs"] = np.abs(multipliers[:, 0])
    leading = np.abs(multipliers[:, 0])
    columns["stable"] = converged & (np.nan_to_num(leading, nan=np.inf) < 1)
    guard = np.asarray(out.orbit.guard_at_start, dtype=float)[:, 0]
    # The cycle's second phase starting past its guard (the hopper: the ground
    # would have to pull right after touchdown): an `inadmissible_orbit`, kept,
    # and flagged.
    columns[flag_name] = inadmissible & (guard < -_PULL_TOL)
    for name, quantity in (quantities or {}).items():
        if name not in columns:
            values = eqx.filter_vmap(quantity)(out.orbit, params)
            columns[name] = only_converged(values)
    return columns, grid_names


def _write_csv(path: pathlib.Path, columns: dict[str, np.ndarray]) -> None:
    def text(value):
        if isinstance(value, bool | np.bool_):
            return "true" if value else "false"
        if isinstance(value, float | np.floating):
            return repr(float(value))
        return str(value)

    names = list(columns)
    n = len(next(iter(columns.values())))

    def write(temporary):
        with temporary.open("w", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow(names)
            for i in range(n):
                writer.writerow([text(columns[name][i]) for name in names])

    return write_file(path, write)


class _SweepProblem(NamedTuple):
    """A sweep as the command line gives it: the model, its form, the fixed
    parameters, the grid axes and the mapped quantities."""

    model: Any
    form_name: str
    form: Any
    sets: dict[str, float]
    axes: list[tuple[str, np.ndarray]]
    quantities: dict[str, Any]
    # (column name, summary text, heat-map label) of the model's flagged orbits.
    flag: tuple[str, str, str]


class _SweepTally(NamedTuple):
    """Per-point outcomes of a sweep (flat boolean arrays) and the count of each
    failure status."""

    converged: np.ndarray
    stable: np.ndarray
    pulling: np.ndarray
    not_run: np.ndarray
    # The name of the strategy that found each orbit ("" for none).
    found_by: np.ndarray
    failures: dict[str, int]

    @property
    def n_converged(self) -> int:
        return int(self.converged.sum())


def _sweep_problem(args: argparse.Namespace, parser) -> _SweepProblem:
    """Read the model, form, `--set` values, grid axes and `--quantity` of the
    command line, checking them (exit 2 on an error)."""
    model = common._load_model(parser, args.model)
    if not model.has_orbits:
        parser.error(f"argument model: no periodic orbits for {args.model!r}")
    form_name = common._form_name(parser, model, args)
    form = model.forms[form_name]
    if form.section is None:
        parser.error(f"argument --form: no Poincaré section for {form_name!r}")
    sets = common._parse_sets(parser, model, args.set, args.params)
    grids = args.grid or model.presentation.sweep_grids
    if not grids:
        parser.error(f"argument --grid: give the grid ({args.model!r} has no default)")
    axes = [_parse_grid(parser, model.parameters, g) for g in grids]
    n_points = math.prod(len(values) for _, values in axes)
    if n_points > _MAX_POINTS:
        parser.error(
            f"argument --grid: the grid has {n_points} points; at most {_MAX_POINTS}"
        )
    grid_names = [name for name, _ in axes]
    for name in grid_names:
        if grid_names.count(name) > 1:
            parser.error(f"argument --grid: parameter {name!r} given twice")
        if name in sets:
            parser.error(f"argument --grid: parameter {name!r} is also given by --set")

    known = dict(model.quantities or {})
    quantities = {}
    if args.quantity is not None:
        if args.quantity not in known:
            parser.error(
                f"argument --quantity: unknown quantity {args.quantity!r}; "
                f"{args.model} has: {', '.join(sorted(known)) or 'none'}"
            )
        common.refuse_condition(parser, model, args.quantity, "--quantity")
        quantities[args.quantity] = known[args.quantity]
    return _SweepProblem(
        model,
        form_name,
        form,
        sets,
        axes,
        quantities,
        model.presentation.sweep_flag,
    )


def _print_sweep_plan(
    args: argparse.Namespace, problem: _SweepProblem, n: int, chunk: int, n_devices
) -> None:
    """Print the grid, the chunking and the solve settings before the sweep."""
    grid_text = " x ".join(
        f"{name} ({len(v)} in [{v[0]:g}, {v[-1]:g}])" for name, v in problem.axes
    )
    print(f"{args.model} ({problem.form_name}): sweep over {grid_text} = {n} points")
    print(
        f"  {-(-n // chunk)} chunk(s) of {chunk} on {n_devices} device(s); "
        f"tol {args.tol:g}, t_max {args.t_max:g}, Newton <= {args.max_iterations}, "
        f"starts: the orbit guess, up to {args.neighbours} converged neighbours' "
        f"orbits, {args.map_iterations} return-map iteration(s) from the guess"
    )
    sys.stdout.flush()


def _sweep_guess(args: argparse.Namespace, parser, problem: _SweepProblem):
    """The orbit guess of every point: the model's, or its return-map scan with
    `--guess scan` (only in the model's default form)."""
    model = problem.model
    if args.guess != "scan":
        return model.orbit_guess
    scan = model.scan_guess
    if scan is None or problem.form_name != model.default_form:
        parser.error(
            f"argument --guess: no scan guess for {args.model!r} ({problem.form_name})"
        )
    return scan


def _load_resume(args: argparse.Namespace, parser, n: int):
    """The interrupted sweep that `--resume` names (None without it); it must be
    an `OrbitSweep` of a grid of `n` points."""
    if args.resume is None:
        return None
    from .._archive import load

    try:
        resume = load(args.resume)
    except FileNotFoundError as error:
        parser.error(
            f"argument --resume: cannot read {str(args.resume)!r}: {error.strerror}"
        )
    except ValueError as error:
        parser.error(f"argument --resume: {error}".replace("`path`: ", "").rstrip("."))
    if type(resume).__name__ != "OrbitSweep" or np.shape(resume.found_by) != (n,):
        parser.error(
            f"argument --resume: {str(args.resume)!r} is not an interrupted "
            f"sweep of this grid ({n} points)"
        )
    return resume


def _solve_sweep(
    args: argparse.Namespace,
    parser,
    system,
    section,
    guess,
    params,
    chunk: int,
    resume,
):
    """Run `sweep_orbits` over the grid; returns `(sweep, interrupted)`, the
    finished part of the sweep where Ctrl-C stopped it. A `--resume` of another
    sweep (other model, form, grid values, parameters or settings) is a usage
    error that names what differs."""
    from .._solution import Interrupted
    from .._sweep import SweepSettings, sweep_orbits

    try:
        out = sweep_orbits(
            system,
            section,
            guess,
            params,
            sweep_settings=SweepSettings(
                chunk_size=chunk,
                warm_start=args.warm_start,
                neighbours=args.neighbours,
            ),
            progress=not (args.no_progress or args.quiet),
            # A mapped quantity may read phase observables (the hopper's apex
            # heights).
            phase_observables=args.quantity is not None,
            resume=resume,
            **_sweep_options(
                tol=args.tol,
                t_max=args.t_max,
                max_ode_steps=args.max_ode_steps,
                max_iterations=args.max_iterations,
                map_iterations=args.map_iterations,
            ),
        )
        return out, False
    except Interrupted as stop:
        if stop.partial is None:  # nothing finished: `main`'s one line
            raise KeyboardInterrupt from None
        return stop.partial, True
    except ValueError as error:
        if resume is None or not str(error).startswith("`resume` "):
            raise
        parser.error(common.resume_error(args.resume, error))


def _tally_sweep(columns: dict[str, np.ndarray], flag_name: str) -> _SweepTally:
    """Count the outcomes in the sweep's table."""
    converged = columns["converged"]
    not_run = columns["status"] == "not_run"
    failures: dict[str, int] = {}
    for name in columns["status"][~converged & ~not_run]:
        failures[str(name)] = failures.get(str(name), 0) + 1
    return _SweepTally(
        converged=converged,
        stable=columns["stable"],
        pulling=columns[flag_name],
        not_run=not_run,
        found_by=columns["found_by"],
        failures=failures,
    )


def _print_sweep_summary(
    tally: _SweepTally, elapsed: float, interrupted: bool, flag_text: str
) -> None:
    """Print the counts of converged, stable, failed and flagged points and the
    time taken."""
    n = tally.converged.size
    n_conv = tally.n_converged
    n_stable = int(tally.stable.sum())
    n_not_run = int(tally.not_run.sum())
    failures = tally.failures
    print(
        f"  converged {n_conv}/{n} (stable {n_stable}, unstable "
        f"{n_conv - n_stable}); no orbit at {n - n_conv - n_not_run}"
        + (
            ": " + ", ".join(f"{k} {v}" for k, v in sorted(failures.items()))
            if failures
            else ""
        )
    )
    if n_conv:
        by = tally.found_by[tally.converged]
        found = ", ".join(
            f"{name.replace('_', ' ')} {int(np.sum(by == name))}"
            for name in SWEEP_STRATEGIES
            if np.any(by == name)
        )
        n_run = n - n_not_run
        print(
            f"  admissible orbits found at {n_conv} of {n_run} points run "
            f"({100 * n_conv / n_run:.1f}%), from: {found}"
        )
    if interrupted:
        print(f"  not run (interrupted) at {n_not_run}")
    if tally.pulling.any():
        print(f"  {int(tally.pulling.sum())} {flag_text}")
    print(f"  time {elapsed:.1f} s ({n / elapsed:.1f} points/s, compilation included)")


def _write_sweep_tables(
    folder: pathlib.Path, columns: dict[str, np.ndarray], axes, out
) -> list[pathlib.Path]:
    """Write `sweep.csv` (one row a point) and `sweep.npz` (the columns in the
    grid's shape, the grid axes and the orbits' arrays); returns their paths."""
    shape = tuple(len(v) for _, v in axes)
    csv_path = folder / "sweep.csv"
    _write_csv(csv_path, columns)

    npz_path = folder / "sweep.npz"
    arrays: dict[str, Any] = {
        f"{name}": np.asarray(v).reshape(shape) for name, v in columns.items()
    }
    arrays.update(
        {f"grid_{name}": values for name, values in axes},
        grid_names=np.array([name for name, _ in axes]),
        multipliers=np.asarray(out.multipliers).reshape(shape + (-1,)),
        u=np.asarray(out.orbit.u).reshape(shape + (-1,)),
        state=np.asarray(out.orbit.state).reshape(shape + (-1,)),
        reduced_jacobian=np.asarray(out.orbit.reduced_jacobian).reshape(
            shape + np.shape(out.orbit.reduced_jacobian)[1:]
        ),
    )
    return [
        csv_path,
        write_file(npz_path, lambda temporary: np.savez(temporary, **arrays)),
    ]


def _write_sweep_json(
    args: argparse.Namespace,
    problem: _SweepProblem,
    tally: _SweepTally,
    interrupted: bool,
    elapsed: float,
    written: list[pathlib.Path],
) -> None:
    """Write the `--json` record: the problem, the settings, the counts of the
    outcomes, the time and the files written."""
    common._write_json(
        args.json,
        {
            "model": args.model,
            "form": problem.form_name,
            "grid": {name: [float(v) for v in values] for name, values in problem.axes},
            "set": problem.sets,
            "points": tally.converged.size,
            "settings": {
                **common.solver_record(args),
                "max_iterations": args.max_iterations,
                "map_iterations": args.map_iterations,
                "neighbours": args.neighbours,
                "jacobian": SWEEP_JACOBIAN,
            },
            "converged": tally.n_converged,
            # Which strategy found each orbit (`hybrax.SWEEP_STRATEGIES`).
            "found_by": {
                name: int(np.sum(tally.found_by[tally.converged] == name))
                for name in SWEEP_STRATEGIES
            },
            "stable": int(tally.stable.sum()),
            "failures": tally.failures,
            "not_run": int(tally.not_run.sum()),
            # Whether the sweep ran to the end; `status` says the same in the
            # words of older files (`finished` is no library status).
            "complete": not interrupted,
            "status": "interrupted" if interrupted else "finished",
            problem.flag[0]: int(tally.pulling.sum()),
            "seconds": elapsed,
            "files": [str(p) for p in written],
        },
        "sweep",
        generic=(problem.flag[0],),
    )
    print(f"wrote {args.json}")


def _run_sweep(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import jax

    problem = _sweep_problem(args, parser)
    axes = problem.axes
    curves = read_curves(args, parser, axes)
    params = _grid_params(parser, problem.model, problem.sets, axes)
    n = int(np.prod(tuple(len(v) for _, v in axes)))
    n_devices = len(jax.local_devices())
    chunk = _balanced_chunk(n, args.chunk, n_devices)
    system = problem.form.system()
    section = problem.form.section()

    _print_sweep_plan(args, problem, n, chunk, n_devices)
    start = time.perf_counter()
    guess = _sweep_guess(args, parser, problem)
    resume = _load_resume(args, parser, n)
    out, interrupted = _solve_sweep(
        args, parser, system, section, guess, params, chunk, resume
    )
    elapsed = time.perf_counter() - start

    flag = problem.flag
    columns, _ = _columns(
        axes, params, out, system, section, flag[0], problem.quantities
    )
    tally = _tally_sweep(columns, flag[0])
    _print_sweep_summary(tally, elapsed, interrupted, flag[1])

    args.out.mkdir(parents=True, exist_ok=True)
    written = _write_sweep_tables(args.out, columns, axes, out)
    if len(axes) == 2 and args.figures:
        written.append(write_heatmap(args, problem, out, columns, tally, curves))
    elif len(axes) != 2:
        print(
            f"note: no heat map for a {len(axes)}-D grid (it needs two --grid axes)",
            file=sys.stderr,
        )
    for path in written:
        print(f"wrote {path}")
    if args.json is not None:
        _write_sweep_json(args, problem, tally, interrupted, elapsed, written)
    if interrupted:
        n_run = n - int(tally.not_run.sum())
        return common.keep_partial(
            args.out / "sweep_partial.npz",
            out,
            f"hybrax sweep: interrupted after {n_run} of {n} points; wrote those, "
            "the others with the status `not_run`",
        )
    return 0
