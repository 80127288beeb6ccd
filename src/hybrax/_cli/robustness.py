"""`hybrax robustness <model> --terrain sigma=S1,S2,...`: how robust the model's
gait is to a disturbance in every step: its gait sensitivity norm, and its mean
first-passage time on stochastic terrain by Monte Carlo walks and by the Markov
chain on a mesh, for each roughness.

Registered by `hybrax._cli` through `add_parser(subparsers)`. Finds the model's
orbit by shooting from its guess, then for each roughness $\\sigma$ (the
disturbance's standard deviation, normal and independent per step) runs
[`hybrax.first_passage_walks`][] and [`hybrax.first_passage_mesh`][]. Writes
`robustness.csv` (one row per roughness) and the figure `mfpt.png` (the mean
first-passage time against the roughness, both methods).
"""

import argparse
import math
import sys
import time

import numpy as np

from .._io import write_figure, write_file
from . import common
from .sweep import _parse_grid


# The default mesh of a section of one unknown, from half to 1.5 times the
# orbit's value. Sections of more unknowns get a mesh only where --mesh gives
# one: on the simplest walker (2 unknowns) and the compass gait (3), boxes of
# +-15-50% around the orbit with 9-41 values per axis gave chains 3-30 times off
# the walks (interpolation onto a box spreads the walk's states into the box's
# failing corners; the walks' states lie near a thinner set).
_DEFAULT_MESH = {1: 201}


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "robustness",
        help="gait sensitivity norm and mean first-passage time on rough terrain",
        description=(
            "Find the model's periodic orbit, report the gait sensitivity norm of "
            "each disturbance the model declares (Hobbelen & Wisse 2007), then for "
            "each roughness sigma (the standard deviation of the disturbance, "
            "drawn independently for every step, e.g. the slope of each step) "
            "estimate the mean first-passage time (the expected steps before a "
            "fall; Byl & Tedrake 2009) two ways that check each other: batched "
            "Monte Carlo walks from the orbit with a 95% interval, and the Markov "
            "chain of the return map on a mesh of section states. Writes "
            "robustness.csv and the figure mfpt.png. Models that declare "
            "disturbances: hopper, rimless-wheel, simplest-walker, compass-gait, "
            "biped5."
        ),
    )
    common._add_common_model_args(parser)
    parser.add_argument(
        "--terrain",
        required=True,
        metavar="sigma=S1,S2,...",
        help="the roughness levels: standard deviations of the disturbance, in its "
        "unit (e.g. sigma=0.01,0.015,0.02 rad of slope)",
    )
    parser.add_argument(
        "--disturbance",
        default=None,
        metavar="NAME",
        help="which declared disturbance (default: the model's first)",
    )
    parser.add_argument(
        "--walkers",
        type=common.bounded_int(1, 10_000_000),
        default=1000,
        metavar="N",
        help="Monte Carlo walks per roughness (default: %(default)s)",
    )
    parser.add_argument(
        "--lanes",
        type=common.bounded_int(1, 10_000_000),
        default=None,
        metavar="N",
        help="walks run N at a time, a lane taking the next walk as its walk "
        "ends (default: 64 on a CPU, 65536 on an accelerator)",
    )
    parser.add_argument(
        "--max-steps",
        type=common.bounded_int(1, 1_000_000),
        default=1000,
        metavar="N",
        help="the most steps of a walk (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=common.bounded_int(0, 2**31 - 1),
        default=0,
        help="the seed of the walks' disturbances (default: %(default)s)",
    )
    parser.add_argument(
        "--mesh",
        action="append",
        default=[],
        metavar="NAME=START:STOP:COUNT",
        help="a mesh axis of the chain method over the section unknown NAME, one "
        "per unknown; or reachable=SPACING alone: the states the walks reach, one "
        "per cell of SPACING standard deviations of the linearised walk's "
        "stationary spread (hybrax.ReachableMesh; at 0.5 the simplest walker's "
        "mesh has 5129 states at sigma=0.001). Default, for a section of one "
        "unknown: 201 values from half to 1.5 times the orbit's; a section of "
        "more unknowns gets a chain "
        "estimate only with --mesh, and a note where it leaves the walks' "
        "interval",
    )
    parser.add_argument(
        "--bins",
        type=common.bounded_int(3, 100_001),
        default=201,
        metavar="N",
        help="the disturbance's quadrature intervals over +-5 sigma in the chain "
        "method (default: %(default)s)",
    )
    common._add_form_arg(parser)
    common.add_solver_args(parser)
    parser.set_defaults(run=_run_robustness, command_parser=parser)


def _roughness(parser, text: str) -> list[float]:
    """`sigma=S1,S2,...` as a list of positive numbers (a usage error else)."""
    name, sep, values = text.partition("=")
    if not sep or name.strip() != "sigma":
        parser.error(f"argument --terrain: expected sigma=S1,S2,..., got {text!r}")
    try:
        sigmas = [float(v) for v in values.split(",")]
    except ValueError:
        parser.error(f"argument --terrain: not numbers: {values!r}")
    if not sigmas or not all(math.isfinite(s) and s > 0 for s in sigmas):
        parser.error("argument --terrain: each sigma must be a positive number")
    return sorted(set(sigmas))


def _mesh_axes(parser, names, u, grids):
    """The chain method's mesh: `[values per unknown]`, a
    `hybrax.ReachableMesh`, or `None` (no mesh)."""
    if any(g.partition("=")[0].strip() == "reachable" for g in grids):
        return _reachable_mesh(parser, grids)
    if grids:
        axes = dict(
            _parse_grid(parser, names, g, "section coordinate", "--mesh") for g in grids
        )
        missing = [n for n in names if n not in axes]
        if missing or len(grids) != len(names):
            parser.error(
                "argument --mesh: give one axis for each section unknown "
                f"({', '.join(names)}); missing: {', '.join(missing) or 'none'}"
            )
        for name, values in axes.items():
            if values.size < 2 or not np.all(np.diff(values) > 0):
                parser.error(
                    f"argument --mesh: {name}: START < STOP and COUNT >= 2 needed"
                )
        return [axes[n] for n in names]
    count = _DEFAULT_MESH.get(len(names))
    if count is None:
        return None
    axes = []
    for value in np.asarray(u, dtype=float):
        low, high = sorted((0.5 * value, 1.5 * value))
        if low == high:
            low, high = low - 0.5, high + 0.5
        axes.append(np.linspace(low, high, count))
    return axes


def _reachable_mesh(parser, grids):
    """`--mesh reachable=SPACING` (alone) as a `hybrax.ReachableMesh`."""
    from .._first_passage import ReachableMesh

    if len(grids) != 1:
        parser.error("argument --mesh: reachable=SPACING takes no other --mesh")
    text = grids[0].partition("=")[2]
    try:
        return ReachableMesh(spacing=float(text))
    except ValueError:
        parser.error(
            f"argument --mesh: reachable=SPACING needs a positive number; got {text!r}"
        )


def _mesh_record(names, mesh):
    """The JSON's `mesh`: each unknown's values, `{"reachable": spacing}`, or
    `None`."""
    from .._first_passage import ReachableMesh

    if mesh is None:
        return None
    if isinstance(mesh, ReachableMesh):
        return {"reachable": mesh.spacing}
    return {n: v.tolist() for n, v in zip(names, mesh)}


def _cycle_unknowns(model, section, disturbance, guess, params) -> tuple[str, ...]:
    """The names of the unknowns of the section the disturbed cycles run on: the
    model's section unknowns, or the state's names on a disturbance's own
    full-state section."""
    if disturbance.section is None:
        return model.section_unknowns(int(guess.shape[0]))
    k = int(np.shape(disturbance.start(section, guess, params))[0])
    if model.state_names is not None and len(model.state_names) == k:
        return tuple(model.state_names)
    return tuple(f"u{i}" for i in range(k))


def _run_robustness(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:

    from .._first_passage import first_passage_mesh, first_passage_walks
    from .._robustness import gait_sensitivity
    from .._solution import status_name

    model = common._load_model(parser, args.model)
    if not model.has_orbits or not model.disturbances:
        parser.error(
            f"argument model: {args.model!r} declares no disturbances "
            "(`ModelBundle.disturbances`)"
        )
    sigmas = _roughness(parser, args.terrain)
    name = args.disturbance or next(iter(model.disturbances))
    if name not in model.disturbances:
        parser.error(
            f"argument --disturbance: {name!r} is not declared; the model's: "
            f"{', '.join(model.disturbances)}"
        )
    disturbance = model.disturbances[name]
    problem = common.section_problem(parser, model, args)
    form_name, system, section, params, guess = problem
    names = _cycle_unknowns(model, section, disturbance, guess, params)
    if args.mesh:  # a bad --mesh is a usage error before any computation
        _mesh_axes(parser, names, guess, args.mesh)
    settings = common.solver_settings(args)
    start = time.perf_counter()
    orbit = problem.point_orbit(settings)
    if not bool(orbit.succeeded):
        print(
            f"hybrax robustness: no periodic orbit of {args.model} from its guess "
            f"({status_name(orbit.result)[0]}): {orbit.describe_failure()}",
            file=sys.stderr,
        )
        return 1
    # The mesh chain runs on the disturbance's own section where it names one
    # (a step height: the full state after heel strike), from the same state.
    cycle_start = np.asarray(disturbance.start(section, orbit.u, params))
    mesh = _mesh_axes(parser, names, cycle_start, args.mesh)
    unit = disturbance.unit
    print(
        f"{args.model} ({form_name}): disturbance {name} "
        f"({disturbance.meaning or name}, {unit}); orbit "
        + ", ".join(
            f"{n} = {v:.8g}"
            for n, v in zip(
                model.section_unknowns(int(orbit.u.shape[0])), np.asarray(orbit.u)
            )
        )
        + f"; spectral radius {float(orbit.spectral_radius):.4g}"
    )
    indicators = {n: model.quantity(n) for n in model.gait_indicators}
    sensitivity = gait_sensitivity(
        system, section, orbit, params, disturbance, indicators, settings=settings
    )
    print(
        f"  gait sensitivity norm of {', '.join(indicators)}: "
        f"{float(sensitivity.norm):.6g} per {unit}"
    )
    if mesh is None:
        print(
            "note: no mesh chain for a section of more than one unknown without "
            "--mesh: the Monte Carlo walks only (give --mesh for each unknown to "
            "add the chain)",
            file=sys.stderr,
        )
    rows = []
    for sigma in sigmas:
        walks = first_passage_walks(
            system,
            section,
            orbit,
            params,
            disturbance,
            sigma,
            walkers=args.walkers,
            lanes=args.lanes,
            max_steps=args.max_steps,
            seed=args.seed,
            settings=settings,
            progress=not args.quiet,
        )
        row = {
            "sigma": sigma,
            "mfpt_walks": walks.mfpt,
            "mfpt_low": walks.interval[0],
            "mfpt_high": walks.interval[1],
            "falls": walks.falls,
            "steps_walked": walks.steps_walked,
            "walks_ended_otherwise": walks.ended,
            "mfpt_mesh": None,
            "mfpt_metastable": None,
            "mesh_outside": None,
            "mesh_states": None,
            "mesh_ended": None,
            "methods_agree": None,
        }
        if walks.ended:
            print(
                f"note: at sigma = {sigma:g}, {walks.ended} walks ended in a "
                f"failure that is no fall ({status_name(walks.result)[0]}); they "
                "count as walked to their last step",
                file=sys.stderr,
            )
        if mesh is not None:
            chain = first_passage_mesh(
                system,
                section,
                params,
                disturbance,
                sigma,
                mesh,
                start=cycle_start,
                bins=args.bins,
                settings=settings,
            )
            # Within the walks' interval's width (about four standard errors).
            width = walks.interval[1] - walks.interval[0]
            agree = bool(abs(chain.mfpt - walks.mfpt) <= width)
            row.update(
                mfpt_mesh=chain.mfpt,
                mfpt_metastable=chain.metastable_mfpt,
                mesh_outside=chain.outside,
                mesh_states=int(chain.states.shape[0]),
                mesh_ended=chain.ended,
                methods_agree=agree,
            )
            if chain.ended > 0.01:
                print(
                    f"note: at sigma = {sigma:g}, up to {chain.ended:.2g} of a mesh "
                    "state's next step ended in a failure that is no fall; the "
                    "chain counts it as a fall",
                    file=sys.stderr,
                )
            if not agree:
                print(
                    f"note: at sigma = {sigma:g} the mesh chain ({chain.mfpt:.4g} "
                    f"steps) and the walks ({walks.mfpt:.4g}) disagree by more than "
                    "the walks' interval: refine the mesh or cover the walks' "
                    f"states with it (its largest share not covered: "
                    f"{chain.outside:.2g})",
                    file=sys.stderr,
                )
        rows.append(row)
        mesh_text = (
            ""
            if row["mfpt_mesh"] is None
            else f"; chain {row['mfpt_mesh']:.4g} (metastable "
            f"{row['mfpt_metastable']:.4g})"
        )
        print(
            f"  sigma = {sigma:g} {unit}: walks {walks.mfpt:.4g} steps "
            f"[{walks.interval[0]:.4g}, {walks.interval[1]:.4g}] ({walks.falls} "
            f"falls of {args.walkers}){mesh_text}"
        )
        sys.stdout.flush()
    seconds = time.perf_counter() - start
    print(f"  {len(sigmas)} roughness levels in {seconds:.1f} s")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    _write_table(out, rows)
    if args.figures:
        _write_figure(out, args.model, name, disturbance, rows)
    if args.json is not None:
        common._write_json(
            args.json,
            {
                "model": common.model_record(model),
                "form": form_name,
                "params": common._params_dict(params),
                "disturbance": name,
                "unit": unit,
                "orbit": [float(v) for v in np.asarray(orbit.u)],
                "gait_sensitivity": common._number(float(sensitivity.norm)),
                "walkers": args.walkers,
                "max_steps": args.max_steps,
                "seed": args.seed,
                "mesh": _mesh_record(names, mesh),
                "bins": args.bins,
                "solver": common.solver_record(args),
                "rows": [
                    {
                        k: common._number(v) if type(v) is float else v
                        for k, v in r.items()
                    }
                    for r in rows
                ],
                "seconds": seconds,
            },
            "robustness",
        )
        print(f"wrote {args.json}")
    return 0


def _write_table(out, rows) -> None:
    header = list(rows[0])
    lines = [",".join(header)]
    for row in rows:
        lines.append(",".join(_cell(row[k]) for k in header))
    text = "\n".join(lines) + "\n"
    path = write_file(
        out / "robustness.csv", lambda temporary: temporary.write_text(text)
    )
    print(f"wrote {path}")


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:.12g}"


def _write_figure(out, model_name, name, disturbance, rows) -> None:
    from ..plot import mfpt_figure

    figure = mfpt_figure(
        np.array([r["sigma"] for r in rows]),
        np.array([r["mfpt_walks"] for r in rows]),
        np.array([[r["mfpt_low"], r["mfpt_high"]] for r in rows]),
        np.array([np.nan if r["mfpt_mesh"] is None else r["mfpt_mesh"] for r in rows]),
        xlabel=f"roughness: std. dev. of the {disturbance.meaning or name} "
        f"[{disturbance.unit}]",
        title=f"{model_name}: mean first-passage time",
    )
    path = write_figure(out / "mfpt.png", figure)
    print(f"wrote {path}")
