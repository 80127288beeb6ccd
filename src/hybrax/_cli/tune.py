"""`hybrax tune <model> --vary NAME,... --target Q=V ... --minimize Q`: tune
parameters by gradient (`hybrax tune <model>` alone: the model's own tuning
problem, [`hybrax.TuneDefaults`][]).

Registered by `hybrax._cli` through `add_parser(subparsers)`. Finds the orbit at
the starting parameters, then runs [`hybrax.tune`][]: the quantities named by
`--target` are brought to their values (to `--tolerance`) and the one named by
`--minimize` is made as small as possible, optionally with every nontrivial
multiplier below `--max-multiplier`. Writes the history as JSON, a figure of
the path over a contour map of the objective (two varied parameters) or of the
objective per evaluation (more), and the multipliers over the iterations in the
complex plane. With `--verify-steps N` the result is checked: the orbit is found
again from cold starts (not the tuning's last orbit), and a forward simulation
from a disturbed start walks N steps and comes back to it as the multipliers
predict (a model with a stick figure also writes the tuned motion's animation).
"""

import argparse
import math
import pathlib
import sys
from typing import Any, NamedTuple

import numpy as np

from .._io import write_figure
from . import common, params_files


# Grid of the contour map, per axis.
_GRID = 15


def add_parser(subparsers) -> None:
    """Register `hybrax tune`."""
    parser = subparsers.add_parser(
        "tune",
        help="tune parameters by gradient for target orbit quantities",
        description=(
            "Tune the parameters named by --vary, by gradient through the periodic "
            "orbit (implicit-function derivatives, BFGS): bring each --target "
            "quantity to its value (to --tolerance) and make the --minimize "
            "quantity as small as possible, optionally keeping every nontrivial "
            "multiplier below --max-multiplier. Quantities: the model's orbit "
            "quantities (`hybrax models` lists them; the hopper's: period, "
            "t_flight, t_ground, apex_upper, apex_lower, Tc_over_T, multiplier, "
            "min_ground_force). Exits 1 if the result is not a stable orbit "
            "meeting the targets."
        ),
    )
    common._add_common_model_args(parser)
    parser.add_argument(
        "--vary",
        default=None,
        metavar="NAME[,NAME...]",
        help="the parameters to tune (any of the model's, e.g. d_G,k); without "
        "it, the model's own tuning problem (its start, parameters, targets, "
        "objective and multiplier bound; `hybrax models` shows which have one)",
    )
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="QUANTITY=VALUE",
        help="a quantity to bring to a value (repeatable)",
    )
    parser.add_argument(
        "--minimize",
        default=None,
        metavar="QUANTITY",
        help="a quantity to make as small as possible",
    )
    parser.add_argument(
        "--tolerance",
        type=common._positive_float,
        default=None,
        metavar="TOL",
        help="tolerance of every target (default: 1e-3, or the model's)",
    )
    parser.add_argument(
        "--max-multiplier",
        type=common._positive_float,
        default=None,
        metavar="RHO",
        help="keep every nontrivial |multiplier| below RHO",
    )
    parser.add_argument(
        "--max-steps",
        type=common.bounded_int(1, common.MAX_COUNT),
        default=None,
        metavar="N",
        help="most evaluations (default: 200, or the model's)",
    )
    parser.add_argument(
        "--seek-steps",
        type=common.bounded_int(0, common.MAX_COUNT),
        default=None,
        metavar="N",
        help="where no orbit exists at the start, the most steps of a first "
        "stage that finds one (Levenberg-Marquardt on the periodicity defect, "
        "over the orbit and the parameters; default: 0, or the model's)",
    )
    parser.add_argument(
        "--verify-steps",
        type=common.bounded_int(0, common.MAX_COUNT),
        default=None,
        metavar="N",
        help="check the result: find the orbit again from cold starts and walk N "
        "steps from a disturbed start (default: 0, or the model's)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="do not print each evaluation"
    )
    common.add_solver_args(parser)
    parser.set_defaults(run=_run_tune, command_parser=parser)


def _parse_targets(parser, names, items) -> dict[str, float]:
    targets: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            parser.error(f"argument --target: expected QUANTITY=VALUE, got {item!r}")
        if name not in names:
            parser.error(
                f"argument --target: unknown quantity {name!r}; known: "
                f"{', '.join(names)}"
            )
        try:
            value = float(text)
        except ValueError:
            parser.error(f"argument --target: {name} needs a number, got {text!r}")
        if not math.isfinite(value):
            parser.error(f"argument --target: {name} must be finite, got {text!r}")
        targets[name] = value
    return targets


class _TuneProblem(NamedTuple):
    """A tuning problem as the command line gives it (with the model's own
    problem filled in where `--vary` is absent)."""

    model: Any
    quantities: dict[str, Any]
    targets: dict[str, float]
    vary_names: list[str]
    vary: list[Any]
    params: Any
    # The model's tuning defaults; `own`: its own problem is the one tuned.
    defaults: Any
    own: bool


def _apply_tune_defaults(args: argparse.Namespace, parser, model) -> tuple[Any, bool]:
    """Fill the options that the command line leaves out from the model's own
    tuning problem (without `--vary`) or the command's defaults, in `args`;
    returns `(the model's defaults, whether its own problem is tuned)`."""
    defaults = model.presentation.tune
    own = args.vary is None
    if own and defaults is None:
        parser.error(
            f"argument --vary: required for {args.model!r} (it has no tuning "
            "problem of its own)"
        )
    if own:  # the model's problem, where the options do not say otherwise
        args.vary = ",".join(defaults.vary)
        if not args.target:
            args.target = [f"{k}={v}" for k, v in defaults.targets.items()]
        if args.minimize is None:
            args.minimize = defaults.minimize
            # The model's own objective comes with its weighting.
            args.objective_scale = 1.0
        if args.max_multiplier is None:
            args.max_multiplier = defaults.max_multiplier
    pick = lambda given, own_value, fallback: (  # noqa: E731
        given if given is not None else own_value if own else fallback
    )
    args.tolerance = pick(args.tolerance, getattr(defaults, "tolerance", None), 1e-3)
    args.max_steps = pick(args.max_steps, getattr(defaults, "max_steps", None), 200)
    args.seek_steps = pick(args.seek_steps, getattr(defaults, "seek_steps", None), 0)
    args.verify_steps = pick(
        args.verify_steps, getattr(defaults, "verify_steps", None), 0
    )
    return defaults, own


def _tune_problem(args: argparse.Namespace, parser) -> _TuneProblem:
    """Read the model, targets, objective, varied parameters and starting
    parameters of the command line, checking them (exit 2 on an error)."""
    model = common._load_model(parser, args.model)
    if not (model.has_orbits and model.quantities):
        parser.error(f"argument model: no orbit quantities to tune for {args.model!r}")
    # A yes/no condition (such as "the trailing foot leaves") has no gradient.
    quantities = {
        name: model.quantity(name)
        for name in model.quantities
        if not model.quantity(name).is_condition
    }
    defaults, own = _apply_tune_defaults(args, parser, model)
    for text in args.target or ():
        common.refuse_condition(parser, model, text.split("=")[0].strip(), "--target")
    common.refuse_condition(parser, model, args.minimize, "--minimize")
    targets = _parse_targets(parser, list(quantities), args.target)
    if args.minimize is not None and args.minimize not in quantities:
        parser.error(
            f"argument --minimize: unknown quantity {args.minimize!r}; known: "
            f"{', '.join(quantities)}"
        )
    if not targets and args.minimize is None and args.max_multiplier is None:
        parser.error("give --target, --minimize or --max-multiplier")
    vary_names = [n.strip() for n in args.vary.split(",") if n.strip()]
    if not vary_names or len(set(vary_names)) != len(vary_names):
        parser.error(f"argument --vary: expected distinct names, got {args.vary!r}")
    vary = [
        common.model_parameter(parser, model, name, "--vary") for name in vary_names
    ]
    values = common._parse_sets(parser, model, args.set, args.params)
    start = dict(defaults.start) if own else {}
    params = common._make_params(parser, model, {**start, **values})

    from .._misc import canonical_params

    return _TuneProblem(
        model,
        quantities,
        targets,
        vary_names,
        vary,
        canonical_params(params),
        defaults,
        own,
    )


def _tune_terms(args: argparse.Namespace, problem: _TuneProblem):
    """The tuning's `(constraints, objective, scale)`: a `QuantityTarget` per
    `--target`, the `--minimize` quantity and the model's parameter scale."""
    from .._tune import QuantityTarget

    quantities = problem.quantities
    # The targets' values as arrays: one compiled tuning program serves them all.
    constraints = [
        (
            QuantityTarget(quantities[name], np.asarray(value, dtype=float)),
            args.tolerance,
        )
        for name, value in problem.targets.items()
    ]
    objective = None if args.minimize is None else quantities[args.minimize]

    scale = None
    if problem.own and problem.defaults.scale is not None:
        scale = np.broadcast_to(
            np.asarray(problem.defaults.scale, dtype=float),
            (len(problem.vary_names),),
        )
    return constraints, objective, scale


def _print_tune_plan(
    args: argparse.Namespace, vary_names: list[str], targets: dict[str, float]
) -> None:
    """Print one line: what is tuned, for which targets, objective and bound."""
    print(f"{args.model}: tuning {', '.join(vary_names)}", end="")
    if targets:
        print(
            "; targets " + ", ".join(f"{k}={v:g}" for k, v in targets.items()), end=""
        )
    if args.minimize:
        print(f"; minimizing {args.minimize}", end="")
    if args.max_multiplier:
        print(f"; |multiplier| < {args.max_multiplier:g}", end="")
    print()
    sys.stdout.flush()


def _print_tune_result(
    args: argparse.Namespace,
    result,
    targets: dict[str, float],
    final_quantities: dict[str, float | None],
) -> None:
    """Print the tuning's outcome: its status, the tuned values, every quantity of
    the final orbit (marking the targets and the objective) and its multipliers."""
    from .._solution import status_name

    print()
    print(
        f"result: {status_name(result.result)[0]} (the minimiser's status: "
        f"{result.minimiser_result}) after "
        f"{result.n_evaluations} evaluations "
        f"({result.wall_time:.1f} s, of which {result.compile_time:.1f} s compiling; "
        f"{result.mode}-mode gradients)"
    )
    if result.rule is not None:
        print(
            "  stopped at the last point inside the parameters' rules; the next "
            f"step broke one: {result.rule}"
        )
    for name, value in result.values.items():
        print(f"  {name:<18} {value:.10g}")
    for name, value in final_quantities.items():
        mark = ""
        if name in targets:
            mark = f"  (target {targets[name]:g})"
        elif name == args.minimize:
            mark = "  (minimized)"
        text = "nan" if value is None else f"{value:.10g}"
        print(f"  {name:<18} {text}{mark}")
    print(
        "  multipliers        "
        + ", ".join(
            common._format_complex(v) for v in np.asarray(result.orbit.multipliers)
        )
    )
    print(
        f"  orbit found {result.orbit_found}, stable {result.stable}, targets met "
        f"{result.targets_met}"
    )


def _verify_and_draw(
    args: argparse.Namespace, model, system, section, result, vary_names
) -> tuple[dict | None, list[pathlib.Path]]:
    """Verify the tuned orbit (with `--verify-steps`) and write the figures (with
    `--figures`); returns `(the verification's record or None, files written)`."""
    verification = None
    trajectory = None
    if args.verify_steps and result.orbit_found:
        verification, trajectory = _verify(model, system, section, result, args)
    written = _figures(args, model, result, vary_names) if args.figures else []
    if trajectory is not None and args.figures:
        # The tuned motion: the last steps of the verifying walk, on the orbit.
        last = min(6, len(trajectory.t_events))
        written += common._stick_outputs(
            model,
            common._events_slice(trajectory, slice(-last, None)),
            result.params,
            args.out,
            args.fps,
            args.animation,
        )
    return verification, written


def _tune_record(
    args: argparse.Namespace,
    problem: _TuneProblem,
    result,
    verification: dict | None,
    final_quantities: dict[str, float | None],
) -> dict[str, Any]:
    """The `--json` record: the problem, the settings, the history, the
    verification and the final point (parameters, orbit and quantities)."""
    from .._solution import status_name

    orbit = result.orbit
    return {
        "model": args.model,
        "vary": problem.vary_names,
        "targets": problem.targets,
        "minimize": args.minimize,
        "tolerance": args.tolerance,
        "max_multiplier": args.max_multiplier,
        "settings": common.solver_record(args),
        "mode": result.mode,
        "status": status_name(result.result)[0],
        "minimiser_result": result.minimiser_result,
        "rule": result.rule,
        "n_evaluations": result.n_evaluations,
        "wall_time": result.wall_time,
        "compile_time": result.compile_time,
        "history": _history_json(result.history),
        "verification": verification,
        "final": {
            "params": common._params_dict(result.params),
            "values": result.values,
            "objective": common._number(result.objective),
            "multipliers": common._pairs(np.asarray(orbit.multipliers)),
            "orbit_found": result.orbit_found,
            "stable": result.stable,
            "targets_met": result.targets_met,
            "u": [float(v) for v in np.asarray(orbit.u)],
            "state": [float(v) for v in np.asarray(orbit.state)],
            **final_quantities,
        },
    }


def _run_tune(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    problem = _tune_problem(args, parser)
    model, params = problem.model, problem.params

    from .._tune import TuneSettings, tune

    system = model.forms[model.default_form].system()
    section = model.forms[model.default_form].section()
    constraints, objective, scale = _tune_terms(args, problem)
    _print_tune_plan(args, problem.vary_names, problem.targets)
    steps = []
    try:
        guess = np.asarray(model.orbit_guess(params), dtype=float)
        stored = params_files._params_file_vector(
            args.params, "u", guess.shape[0], model
        )
        result = tune(
            system,
            section,
            guess if stored is None else stored,  # a tuned gait's orbit
            params,
            objective,
            vary=problem.vary,
            constraints=constraints,
            max_multiplier=args.max_multiplier,
            tune_settings=TuneSettings(
                max_steps=args.max_steps,
                objective_scale=getattr(args, "objective_scale", "start"),
                seek_steps=args.seek_steps,
            ),
            progress=not args.no_progress,
            scale=scale,
            # A quantity the user chose is weighed by its size at the first
            # orbit, whatever its units (an effort of 1e4 N^2 m^2 s would
            # swamp the targets' penalties, a cost of transport of 4e-3 vanish).
            settings=common.solver_settings(args),
            callback=steps.append,
        )
    except KeyboardInterrupt:
        return _keep_interrupted(args, params, problem.vary, problem.vary_names, steps)
    except ValueError as error:  # no orbit at the start
        print(f"error: {error}", file=sys.stderr)
        return 1

    final_quantities = {
        name: common._number(fn(result.orbit, result.params))
        for name, fn in problem.quantities.items()
    }
    _print_tune_result(args, result, problem.targets, final_quantities)
    verification, written = _verify_and_draw(
        args, model, system, section, result, problem.vary_names
    )
    for path in written:
        print(f"wrote {path}")
    if args.json is not None:
        payload = _tune_record(args, problem, result, verification, final_quantities)
        final = ("tune: final", tuple(final_quantities))
        common._write_json(args.json, payload, "tune", records={"final": final})
        print(f"wrote {args.json}")
    verified = verification is None or verification["passed"]
    met = result.targets_met
    return 0 if (result.orbit_found and result.stable and met and verified) else 1


def _history_json(steps) -> list[dict]:
    from .._solution import status_name

    return [
        {
            "step": step.step,
            "values": step.values,
            "objective": common._number(step.objective),
            "spectral_radius": common._number(step.spectral_radius),
            "multipliers": common._pairs(step.multipliers),
            "orbit_found": step.orbit_found,
            "status": status_name(step.result)[0],
            "best": step.best,
            "stage": step.stage,
        }
        for step in steps
    ]


def _keep_interrupted(args, params, vary, vary_names, steps) -> int:
    """Ctrl-C during the tuning: the history so far and its best point (the
    lowest objective among the evaluations with an orbit, its parameters and
    orbit unknowns under `final`, which `--params` reads: a re-run resumes from
    there) go to `--json`, else `tune.json` in `--out`; exit 130."""
    found = [s for s in steps if s.orbit_found and math.isfinite(s.objective)]
    if not found:
        print(
            f"hybrax tune: interrupted after {len(steps)} evaluation(s), none with "
            "an orbit; no output of this run was written",
            file=sys.stderr,
        )
        return 130
    best = min(found, key=lambda step: step.objective)
    tuned = params
    for handle, name in zip(vary, vary_names):
        tuned = handle.set(tuned, best.values[name])
    payload = {
        "model": args.model,
        "vary": vary_names,
        "settings": common.solver_record(args),
        "status": "interrupted",
        "n_evaluations": len(steps),
        "history": _history_json(steps),
        "final": {
            "params": common._params_dict(tuned),
            "values": best.values,
            "objective": common._number(best.objective),
            "step": best.step,
            "u": [float(v) for v in np.asarray(best.u)],
        },
    }
    path = args.json if args.json is not None else args.out / "tune.json"
    final = ("tune: final", ())
    path = common._write_json(path, payload, "tune", records={"final": final})
    print(
        f"hybrax tune: interrupted after {len(steps)} evaluation(s); wrote the "
        f"history and the best point so far (evaluation {best.step}) to {path} "
        f"(resume with --params {path})",
        file=sys.stderr,
    )
    return 130


# An orbit found again is the tuned one when their unknowns agree to this.
_SAME_ORBIT = 1e-7


def _verify(model, system, section, result, args):
    """Check the tuned orbit two ways. From scratch, not from the tuning's last
    orbit: Newton at the tuned parameters from where a walk of `--verify-steps`
    cycles from the model's default initial state ends (if it walks), from the
    first gait of the tuning (found at other parameters), from the model's own
    guess and, last, from the disturbed state below: is one of them the tuned
    orbit? (The JSON says which.) Stability: walk
    `--verify-steps` cycles from the orbit's state disturbed as the model's first
    `"orbit_perturbations"` (else 1e-2 on the first coordinate): every cycle must
    succeed and the distance to the orbit must shrink as the multipliers predict,
    $\rho^{N-1}$ (to a factor 10; by half at least). Prints the
    checks; returns `(dict, trajectory of the disturbed walk)`."""
    import jax
    import jax.numpy as jnp

    from .._simulate import simulate
    from .._solution import status_name
    from .._tune.driver import orbit_from
    from ..plot import Trajectory

    params = result.params
    orbit = result.orbit
    state = np.asarray(orbit.state, dtype=float)
    per_cycle = len(section.sequence)

    @jax.jit
    def walk(x0, p):
        return simulate(
            system, x0, p, n_events=per_cycle * args.verify_steps, n_save=20
        )

    def find(u):
        # Ten return-map iterations before Newton, so that a cold start reaches
        # the basin of an attracting gait: the first ten steps of a walk (the
        # walk's compiled program; the last step that completed).
        steps = walk(section.chart(u, params), params)
        completed = min(10, int(np.asarray(steps.n_events)) // per_cycle)
        if completed:
            u = section.coordinates(steps.x_after[per_cycle * completed - 1], params)
        # The tuning's own objective program (its orbit solve, with the tuning's
        # settings): the command compiles no other orbit search.
        return orbit_from(result, u)

    # From scratch: the walk from the default start, then the orbit from its end.
    scratch = walk(jnp.asarray(model.default_state(params), dtype=float), params)
    scratch_status = status_name(scratch.result)[0]
    candidates = [("the model's guess", jnp.asarray(model.orbit_guess(params), float))]
    first = next(
        (s for s in result.history if s.stage == "tune" and s.orbit_found), None
    )
    if first is not None:  # the first gait of the tuning, at the start's parameters
        candidates.insert(0, ("the tuning's first gait", jnp.asarray(first.u)))
    if scratch_status == "successful":
        end = section.coordinates(scratch.x_after[-1], params)
        candidates.insert(0, ("the end of a walk from the default start", end))
    # Last resort: the disturbed state of the walk below (not the tuning's orbit).
    perturbations = model.presentation.orbit_perturbations or ((0, 1e-2, "x0 + 0.01"),)
    index, size, label = perturbations[0]
    start = state.copy()
    start[index] += size
    candidates.append(
        (
            f"the disturbed state ({label})",
            section.coordinates(jnp.asarray(start), params),
        )
    )
    refound, distance, where = _refind(find, candidates, orbit.u)

    # Stability: the walk from the disturbed orbit.
    solution = walk(jnp.asarray(start), params)
    status = status_name(solution.result)[0]
    cycles, gaps, back = _back_on_orbit(
        solution, state, per_cycle, float(orbit.spectral_radius)
    )
    passed = refound and status == "successful" and back
    print()
    print("verification:")
    print(
        f"  walk from the default start: {scratch_status}; the tuned orbit found "
        f"again: {refound}"
        + (
            ""
            if where is None
            else f" (from {where}, max |u - u_tuned| = {distance:.1e})"
        )
    )
    print(
        f"  walk from the orbit disturbed by {label}: {cycles} of "
        f"{args.verify_steps} cycles ({status}); distance to the orbit "
        f"{gaps[0]:.2e} after the first, {gaps[-1]:.2e} after the last"
    )
    print(f"  passed: {passed}")
    trajectory = Trajectory.from_solution(solution, system)
    return (
        {
            "walk_from_default_start": scratch_status,
            "orbit_refound": refound,
            "refound_from": where,
            "refound_distance": common._number(distance),
            "steps": args.verify_steps,
            "steps_completed": cycles,
            "status": status,
            "disturbance": label,
            "distance_to_orbit": [common._number(g) for g in gaps],
            "back_on_orbit": back,
            "passed": passed,
        },
        trajectory,
    )


def _refind(find, candidates, u_tuned) -> tuple[bool, float, str | None]:
    """Find the orbit from each `(origin, u)` of `candidates` in turn until one is
    the tuned orbit; returns `(found it, the least distance, from where)`."""
    refound, distance, where = False, float("inf"), None
    for origin, u in candidates:
        again = find(u)
        if bool(again.succeeded):
            gap = float(np.max(np.abs(np.asarray(again.u) - np.asarray(u_tuned))))
            if gap < distance:
                distance, where = gap, origin
            if gap < _SAME_ORBIT:
                refound = True
                break
    return refound, distance, where


def _back_on_orbit(
    solution, state: np.ndarray, per_cycle: int, rho: float
) -> tuple[int, np.ndarray, bool]:
    """`(cycles, gaps, back)`: the cycles that a walk completed, its distance to
    the orbit's state after each, and whether it came back to the orbit."""
    cycles = int(np.asarray(solution.n_events)) // per_cycle
    gaps = np.max(
        np.abs(np.asarray(solution.x_after)[per_cycle - 1 :: per_cycle] - state),
        axis=-1,
    )
    # Back on the orbit: the distance shrinks at least as the multipliers predict
    # (rho^(N - 1), to a factor 10) and by half at least.
    predicted = 10.0 * rho ** (len(gaps) - 1)
    back = bool(np.isfinite(gaps[-1]) and gaps[-1] < min(0.5, predicted) * gaps[0])
    return cycles, gaps, back


def _figures(args, model, result, names) -> list[pathlib.Path]:
    """Write `tune_multipliers.png` (where an evaluation found an orbit) and
    `tune_path.png`: the path over the objective's map in the two varied
    parameters, each axis labelled with the model's label and unit, or the
    history of the objective and the spectral radius for more parameters;
    returns the paths written."""
    from .. import plot

    args.out.mkdir(parents=True, exist_ok=True)
    tuned = [s for s in result.history if s.stage == "tune" and s.orbit_found]
    written = []
    if tuned:
        figure = plot.multiplier_history_figure(
            [s.multipliers for s in tuned],
            final=np.asarray(result.orbit.multipliers),
            bound=args.max_multiplier,
        )
        written.append(write_figure(args.out / "tune_multipliers.png", figure))
    path = args.out / "tune_path.png"
    history = [step for step in result.history if step.orbit_found]
    if len(names) == 2 and history and len(history) == len(result.history):
        points = np.array([[s.values[n] for n in names] for s in history])
        points = np.concatenate([points, [[result.values[n] for n in names]]])
        low, high = points.min(axis=0), points.max(axis=0)
        pad = 0.25 * np.maximum(high - low, 1e-6 * np.maximum(np.abs(high), 1.0))
        x = np.linspace(low[0] - pad[0], high[0] + pad[0], _GRID)
        y = np.linspace(low[1] - pad[1], high[1] + pad[1], _GRID)
        grid = np.stack(np.meshgrid(x, y, indexing="ij"), axis=-1).reshape(-1, 2)
        z = result.objective_at(grid).reshape(_GRID, _GRID)
        figure = plot.tune_path_figure(
            x,
            y,
            z,
            points,
            xlabel=model.label(names[0]),
            ylabel=model.label(names[1]),
            title="tuning path",
        )
    else:
        figure = plot.tune_history_figure(
            np.array([s.objective for s in result.history]),
            np.array([s.spectral_radius for s in result.history]),
            title="tuning history",
        )
    return [write_figure(path, figure), *written]
