"""`hybrax simulate <model>`: simulate a model from a state and write its event
table, JSON and figures."""

import argparse
import sys

import numpy as np

from .common import (
    _GUARD_NOTE_TOL,
    MAX_COUNT,
    SOLVER_OPTIONS,
    _add_common_model_args,
    _add_form_arg,
    _event_table,
    _folded,
    _for_command,
    _form_name,
    _format_state,
    _load_model,
    _make_params,
    _number,
    _params_dict,
    _params_lines,
    _parse_sets,
    _parse_state,
    _status,
    _stick_outputs,
    _write_json,
    add_solver_args,
    bounded_int,
    solver_record,
    solver_settings,
)
from .params_files import _params_file_vector


def _add_simulate(subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a model through a number of cycles",
        description=(
            "Simulate a model from an initial state through --cycles cycles of its "
            "event sequence (for the hopper a hop: a touchdown and a lift-off), "
            "print the event table, and write figures (and optionally JSON)."
        ),
    )
    _add_common_model_args(parser)
    parser.add_argument(
        "--x0",
        default=None,
        metavar="X1,X2,...",
        help=(
            "initial state in the model's minimal coordinates (default: the "
            "model's; for the hopper zU,zL,vU,vL with both masses at rest and the "
            "foot 0.15 m up, where it lands with the ground pushing)"
        ),
    )
    parser.add_argument(
        "--cycles",
        "--hops",
        dest="cycles",
        type=bounded_int(1, MAX_COUNT),
        default=None,
        metavar="N",
        help="number of cycles of the model's event sequence (hops of the hopper: "
        "2N events; one event each for a model with one transition) "
        "(default: the model's, 5 for most)",
    )
    _add_form_arg(parser)
    add_solver_args(parser)
    parser.set_defaults(run=_run_simulate, command_parser=parser)


def _explain_stop(model, system, solution, params) -> str | None:
    """What happened, in the model's words where it has them, when a run stopped on
    a degenerate event (a mode that cannot start, Zeno, grazing)."""
    status, _ = _status(solution.result)
    cause = int(np.asarray(solution.cause_transition))
    if cause < 0:
        return None
    transition = system.transitions[cause].name
    mode = system.modes[int(np.asarray(solution.mode_final))].name
    t = float(np.asarray(solution.t_final))
    explain = model.presentation.explain
    hint = None if explain is None else explain(status, mode, transition, params)
    if status == "mode_not_viable":
        text = (
            f"the {mode} mode cannot start at t = {t:.6f} s: the {transition} guard "
            "fires at the instant it begins (events would pile up at one instant)"
        )
    elif status == "zeno":
        text = (
            f"{transition} events accumulate (Zeno) at t = "
            f"{float(np.asarray(solution.zeno_time)):.9f} s (extrapolated)"
        )
    elif status == "grazing_event":
        text = f"the {transition} guard was met tangentially (grazing) at t = {t:.6f} s"
    elif status == "infeasible_initial_state":
        text = f"the initial state is already past the {transition} guard"
    elif status == "armed_beyond_guard":
        text = (
            f"the {transition} guard was already past its crossing when it became "
            f"armed, in the phase that began at t = {t:.6f} s (a missed crossing)"
        )
    elif status == "terminal_event":
        text = f"the run ended on the terminal {transition} event at t = {t:.6f} s"
    else:
        return None
    return text + ("" if hint is None else f"; {hint}")


def _boundary_violations(model, system, solution, params, n_done: int) -> list[dict]:
    """The declared boundaries that the run's `n_done` events and their phases
    break ([`hybrax.boundary_violations`][], the library's judgement, as
    `hybrax orbit` judges an orbit's), for the JSON and the notes: each a dict
    with its `kind`, the `event` (1-based, as the event table counts) and its
    `event_kind`, the `mode` of the phase concerned, the observable's `name`
    (`None` for a guard), its `value` and a `text` in the model's words where
    it has them (`ModelPresentation.describe_boundary`)."""
    from .._simulate import boundary_violations

    kinds = [
        system.transitions[int(index)].name
        for index in np.asarray(solution.transitions)[:n_done]
    ]
    describe = model.presentation.describe_boundary
    generic = {
        "force_reversal": "the phase starts past its guard (signed guard {:+.3g})",
        "release_reversal": "the released contact would stay ({name} = {:+.3g})",
        "clearance": "{name} = {:+.3g} < 0 in the phase",
    }
    where = {"clearance": "before", "release_reversal": "at"}
    found = []
    for violation in boundary_violations(system, solution, _GUARD_NOTE_TOL):
        kind, k, mode, name, value = violation
        if k >= n_done:
            continue
        words = None if describe is None else describe(kind, mode, value, params)
        if words is None:
            words = generic[kind].format(value, name=name)
        # `touchdown 2`: the event's kind and its count among those events.
        ordinal = f"{kinds[k]} {kinds[: k + 1].count(kinds[k])}"
        found.append(
            {
                "kind": kind,
                "event": k + 1,
                "event_kind": kinds[k],
                "mode": mode,
                "name": name,
                "value": value,
                "text": f"{where.get(kind, 'after')} {ordinal}: {words}",
            }
        )
    return found


def _run_simulate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import jax
    import jax.numpy as jnp

    from .._simulate import simulate
    from .._simulate.entry import check_domain
    from .._solution import RESULTS
    from ..plot import Trajectory

    model = _load_model(parser, args.model)
    form_name = _form_name(parser, model, args)
    if args.cycles is None:
        args.cycles = model.presentation.simulate_cycles
    params = _make_params(
        parser, model, _parse_sets(parser, model, args.set, args.params)
    )
    stored = _params_file_vector(args.params, "state", len(model.state_names), model)
    if args.x0 is None and stored is not None:
        x0 = stored  # a tuned gait's state, where its orbit starts
    elif args.x0 is None:
        x0 = np.asarray(model.default_state(params), dtype=float)
    else:
        x0 = _parse_state(parser, model, args.x0)
    form = model.forms[form_name]
    system = form.system()
    # Events per cycle: the section's sequence where the model declares one.
    per_cycle = 1 if form.section is None else len(form.section().sequence)
    n_events = per_cycle * args.cycles
    # Python floats would be static under `eqx.filter_jit`: one compilation per
    # parameter value. As arrays, one compilation (and cache entry) serves them all.
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype=float), params)
    state0 = x0 if form.from_minimal is None else form.from_minimal(x0)

    try:
        # The start against its mode's domain before any compilation: a bad
        # `--x0` is a usage error, not a run that failed.
        check_domain(system, 0, 0.0, np.asarray(state0, dtype=float), params)
        solution = simulate(
            system,
            jnp.asarray(state0, dtype=float),
            params,
            n_events=n_events,
            settings=solver_settings(args),
            n_save=200,
        )
    except ValueError as error:  # a state outside its mode's declared domain
        source = "--x0" if args.x0 is not None else "--set"
        parser.error(f"argument {source}: {str(error).replace('`x0`', 'the state')}")
    trajectory = Trajectory.from_solution(solution, system, to_minimal=form.to_minimal)
    status, message = _status(solution.result)
    succeeded = bool(solution.result == RESULTS.successful)

    print(f"{args.model} ({form_name}), parameters:")
    print(_params_lines(_params_dict(params)))
    print(
        _folded(
            f"x0 = {_format_state(x0)}  ({', '.join(model.state_names)})",
            indent=7,
        )
    )
    print()
    if trajectory.event_kinds:
        for line in _event_table(trajectory):
            print(line)
    else:
        print("no events")
    n_done = len(trajectory.t_events)
    guards = np.asarray(solution.guard_at_start, dtype=float)[:n_done]
    # The model's declared boundaries (as `hybrax orbit` judges an orbit): a
    # phase that starts past its own guard (after a touchdown: the ground would
    # already have to pull) runs until the guard has come back and crossed
    # again, which a complementarity model would not do; such a run is not
    # admissible, whatever its status.
    violations = _boundary_violations(model, system, solution, params, n_done)
    for violation in violations:
        note = f"note: not admissible {violation['text']}"
        if violation["kind"] == "force_reversal":
            note += "; the phase runs until its guard re-crosses"
        print(note)
    cause = _explain_stop(model, system, solution, params)
    if cause is not None:
        print(f"note: {cause}")
    print()
    summary = (
        f"status: {status} ({n_done} of {n_events} events, "
        f"t = {float(solution.t_final):.6f} s)"
    )
    if violations:
        more = len(violations) - 1
        summary = (
            summary[:-1]
            + f"; inadmissible {violations[0]['text']}"
            + (f"; and {more} more)" if more else ")")
        )
    if succeeded:
        print(summary)
    else:
        sys.stdout.flush()  # keep the table before the failure in a shared terminal
        print(f"{summary}: {_for_command(message, SOLVER_OPTIONS)}", file=sys.stderr)

    if args.figures and trajectory.t_phase.shape[0] > 0:
        for path in model.simulate_figures(trajectory, params, args.out):
            print(f"wrote {path}")
        for path in _stick_outputs(
            model, trajectory, params, args.out, args.fps, args.animation
        ):
            print(f"wrote {path}")
    if args.json is not None:
        events = []
        for k, kind in enumerate(trajectory.event_kinds):
            event = {
                "t": float(trajectory.t_events[k]),
                "kind": kind,
                "state_before": [float(v) for v in trajectory.x_before[k]],
                "state_after": [float(v) for v in trajectory.x_after[k]],
                "T_c": _number(trajectory.T_c[k]),
                "T_a": _number(trajectory.T_a[k]),
                "guard_after": _number(guards[k]),
            }
            events.append(event)
        payload = {
            "model": args.model,
            "form": form_name,
            "params": _params_dict(params),
            "x0": [float(v) for v in x0],
            "state_names": list(model.state_names),
            "cycles": args.cycles,
            "hops": args.cycles,  # (the hopper's word for a cycle)
            "settings": solver_record(args),
            "status": status,
            "status_message": message,
            # Whether the run keeps every boundary its model declares, and each
            # one it breaks (the note lines' words, with kind, event and value).
            "admissible": not violations,
            "boundary_violations": violations,
            "t_final": float(solution.t_final),
            "events": events,
        }
        _write_json(args.json, payload, "simulate")
        print(f"wrote {args.json}")
    return 0 if succeeded else 1
