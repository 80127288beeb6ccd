"""`hybrax orbit <model>`: find a periodic orbit, its Floquet multipliers by both
monodromy routes, and write its summary, JSON and figures."""

import argparse
import concurrent.futures
import contextvars
import importlib
import importlib.metadata
import sys
from typing import Any, NamedTuple

import numpy as np

from .common import (
    SOLVER_OPTIONS,
    _add_common_model_args,
    _add_form_arg,
    _first_period,
    _for_command,
    _form_name,
    _format_complex,
    _format_matrix,
    _load_model,
    _make_params,
    _matrix,
    _number,
    _pairs,
    _params_dict,
    _params_lines,
    _parse_sets,
    _stick_outputs,
    _write_json,
    add_solver_args,
    solver_record,
    solver_settings,
)
from .params_files import _params_file_vector


# The dense simulations from the orbit: periods for the phase portraits and energy
# figures, and samples per phase (one compiled shape also serves the apex search
# and the perturbed trajectories, which use the first period only).
_ORBIT_PERIODS = 3


_ORBIT_SAMPLES = 400


def _add_orbit(subparsers) -> None:
    parser = subparsers.add_parser(
        "orbit",
        help="find a periodic orbit and its Floquet multipliers",
        description=(
            "Find the periodic orbit of a model by shooting on its Poincaré section "
            "from the model's guess, print its summary (phase durations and the "
            "model's quantities, e.g. the hopper's apex heights and energy split; "
            "reduced Jacobian, monodromy matrix by autodiff and by saltation "
            "product, Floquet multipliers), and write figures (and optionally "
            "JSON). Exits 1 if no orbit was found."
        ),
    )
    _add_common_model_args(parser)
    _add_form_arg(parser)
    add_solver_args(
        parser,
        tol=1e-12,
        why="--tol 1e-12 here, at which the monodromy by autodiff and by "
        "saltation agree to 1e-8",
    )
    parser.add_argument(
        "--no-homotopy",
        dest="homotopy",
        action="store_false",
        help="where shooting from the model's guess finds no orbit at parameters "
        "set by --set or --params, do not follow the orbit from the model's "
        "defaults to them (by default it is followed by pseudo-arclength "
        "continuation along the straight path in parameter space, which says "
        "where the family ends if it does)",
    )
    parser.set_defaults(run=_run_orbit, command_parser=parser)


def _homotopy_record(search) -> dict | None:
    """The JSON's record of the homotopy that `search` (an
    [`hybrax.OrbitSearch`][]) tried from the model's defaults (`None`: none
    tried), having said on the console what it found."""
    from .._solution import status_name

    if search.known is None:
        return None
    print(
        "no orbit from the model's guess; following the orbit from the model's "
        "defaults ...",
        file=sys.stderr,
    )
    if not search.known:
        print("  (no orbit at the model's defaults either)", file=sys.stderr)
        return None
    homotopy = search.homotopy
    message = homotopy.message.replace("`params_from`", "the model's defaults")
    print(f"  {message}", file=sys.stderr if search.route != "homotopy" else None)
    return {
        "from": "the model's defaults",
        "status": status_name(homotopy.result)[0],
        "reached": homotopy.reached,
        "end": homotopy.end,
        "continuation_points": len(homotopy.branch.parameter),
        "message": message,
    }


class _OrbitProblem(NamedTuple):
    """What an orbit search needs: the model, the chosen formulation (its name,
    system and section), the parameters and the guess of the orbit."""

    model: Any
    form_name: str
    form: Any
    system: Any
    section: Any
    params: Any
    guess: Any


class _Stability(NamedTuple):
    """The converged orbit's linearisation in the model's minimal coordinates:
    reduced Jacobian, monodromy matrices and nontrivial multipliers by autodiff
    and by saltation product."""

    jacobian: np.ndarray
    monodromy_ad: np.ndarray
    monodromy_saltation: np.ndarray
    multipliers_ad: np.ndarray
    multipliers_saltation: np.ndarray
    max_discrepancy: float
    stable: bool


def _run_orbit(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    problem = _orbit_problem(args, parser)
    model, form, system = problem.model, problem.form, problem.system
    sequence = tuple(system.transition_index(k) for k in problem.section.sequence)
    n_cycle = len(sequence)
    periods_program = _prepare_periods(args, problem, sequence)
    sensitivity_programs = _prepare_gait_sensitivity(args, problem)
    orbit, homotopy, hint = _search_orbit(args, problem)
    payload = _orbit_payload(args, problem, orbit, homotopy)
    _print_params(args, problem)
    if not bool(orbit.succeeded):
        return _report_no_orbit(args, problem, orbit, payload, hint)

    state = _to_minimal(form, orbit.state)
    # One compiled simulation: the orbit over several periods, and from the
    # perturbed starts (their first period is drawn).
    trajectory, solution, sim_status = _simulate_periods(
        periods_program, problem, state
    )
    summary, summary_lines = _model_summary(model, orbit, solution, problem.params)
    stability = _stability(form, orbit, len(model.state_names))
    payload.update(_orbit_values(orbit, state, summary, stability))
    _print_orbit(problem, orbit, state, sequence, summary_lines)
    _print_stability(problem, orbit, stability, sequence)
    if model.disturbances:
        for thread in sensitivity_programs:
            thread.join()
        payload["gait_sensitivity"] = _gait_sensitivity(args, problem, orbit)

    simulated = bool(solution.succeeded)
    if simulated and args.figures:
        _write_orbit_figures(args, problem, periods_program, state, trajectory, n_cycle)
    elif not simulated:
        print(
            f"note: the simulation of {_ORBIT_PERIODS} periods from the orbit "
            f"failed ({sim_status}); no figures written.",
            file=sys.stderr,
        )
    if args.json is not None:
        _write_json(args.json, payload, "orbit", generic=summary)
        print(f"wrote {args.json}")
    return 0


def _orbit_problem(
    args: argparse.Namespace, parser: argparse.ArgumentParser
) -> _OrbitProblem:
    """The model, formulation, parameters and orbit guess that the command line
    asks for (a usage error where the model or formulation has no orbits)."""
    import jax
    import jax.numpy as jnp

    from .._misc import canonical_params

    model = _load_model(parser, args.model)
    if not model.has_orbits:
        parser.error(f"argument model: no periodic orbits for {args.model!r}")
    form_name = _form_name(parser, model, args)
    # Array leaves once, so that `--set` values reuse one compilation.
    params = canonical_params(
        _make_params(parser, model, _parse_sets(parser, model, args.set, args.params))
    )
    form = model.forms[form_name]
    system = form.system()
    if form.section is None:
        parser.error(f"argument --form: no Poincaré section for {form_name!r}")
    section = form.section()
    # From NumPy parameters: no program per operation.
    guess = jnp.asarray(model.orbit_guess(jax.device_get(params)), dtype=float)
    stored = _params_file_vector(args.params, "u", guess.shape[0], model)
    if stored is not None and form_name == model.default_form:
        guess = jnp.asarray(stored)  # a tuned gait's orbit
    return _OrbitProblem(model, form_name, form, system, section, params, guess)


def _prepare_periods(
    args: argparse.Namespace, problem: _OrbitProblem, sequence: tuple
) -> concurrent.futures.Future:
    """Start compiling the dense simulation of the orbit's periods (for the
    figures and the model's summary) in a second thread; its future program."""
    import jax.numpy as jnp

    from .._simulate import simulate
    from .._simulate.entry import compile_simulation

    system, params = problem.system, problem.params
    # The dense simulation of the orbit (figures, apexes) compiles in a second
    # thread while the orbit search does: XLA releases the interpreter while it
    # compiles, and the machine has a core for each.
    mode0 = system.targets[sequence[-1]]
    settings = solver_settings(args)
    options = dict(
        n_events=_ORBIT_PERIODS * len(sequence),
        settings=settings,
        mode0=mode0,
        n_save=_ORBIT_SAMPLES,
    )

    def compile_periods():
        # Only the start's shape matters.
        x = np.zeros((system.n_states,), jnp.result_type(float))
        compile_simulation(system, x, params, **options)
        return lambda x, p: simulate(system, x, p, **options)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    periods_program = pool.submit(contextvars.copy_context().run, compile_periods)
    # The plotting code (matplotlib, slow to import) is imported by that thread
    # once its program is compiled, while XLA still compiles the orbit search: off
    # the critical path.
    pool.submit(importlib.import_module, "hybrax.plot")
    pool.shutdown(wait=False)
    return periods_program


def _search_orbit(args: argparse.Namespace, problem: _OrbitProblem):
    """Shoot for the orbit from the guess, and where that fails, follow it from
    the model's defaults (unless `--no-homotopy` or the model says no orbit
    exists). Returns `(orbit, homotopy record or None, the model's hint or None)`."""
    import jax
    import jax.numpy as jnp

    from .._homotopy import find_periodic_orbit_or_follow
    from .._misc import canonical_params
    from .._periodic import find_periodic_orbit

    model, system, section, params = (
        problem.model,
        problem.system,
        problem.section,
        problem.params,
    )
    settings = solver_settings(args)
    # Newton on the variational return map: its last iteration holds the orbit's
    # cycle, apexes and saltation monodromy, so the program needs no further
    # pass (the smallest program, compiled once).
    shooting = dict(settings=settings, phase_observables=False)
    no_orbit_hint = model.presentation.no_orbit_hint
    hint = None if no_orbit_hint is None else no_orbit_hint(params)
    # Where the model knows no orbit exists, no family leads there either.
    if not args.homotopy or hint is not None:
        orbit = find_periodic_orbit(system, section, problem.guess, params, **shooting)
        return orbit, None, hint
    defaults = canonical_params(model.make_params())
    search = find_periodic_orbit_or_follow(
        system,
        section,
        problem.guess,
        params,
        known_guess=jnp.asarray(model.orbit_guess(jax.device_get(defaults)), float),
        known_params=defaults,
        **shooting,
    )
    orbit, homotopy = search.orbit, _homotopy_record(search)
    return orbit, homotopy, hint


def _orbit_payload(
    args: argparse.Namespace, problem: _OrbitProblem, orbit, homotopy
) -> dict[str, Any]:
    """The JSON's entries common to found and failed orbits: the inputs and how
    the search ended."""
    from .._solution import status_message, status_name

    return {
        "model": args.model,
        "form": problem.form_name,
        "params": _params_dict(problem.params),
        "state_names": list(problem.model.state_names),
        "settings": solver_record(args),
        "converged": bool(orbit.succeeded),
        "status": status_name(orbit.result)[0],
        "status_message": status_message(orbit.result)[0],
        "newton_iterations": int(orbit.n_steps),
        "residual_norm": _number(float(orbit.residual_norm)),
        "homotopy": homotopy,
    }


def _model_summary(model, orbit, solution, params):
    """The model's declared quantities of the orbit (NaN where there is no orbit),
    JSON-safe, and its lines for the summary: `(values, lines)`."""
    values, lines = model.orbit_summary(orbit, params, solution)
    # The period is the summary's own entry (as for a model without quantities).
    kept = [
        (name, line)
        for name, line in zip(values, lines, strict=True)
        if name not in _GENERIC_ENTRIES
    ]
    json_values = {}
    for name, _ in kept:
        value = values[name]
        known = value is None or isinstance(value, bool)  # a condition
        json_values[name] = value if known else _number(value)
    return json_values, [line for _, line in kept]


#: Entries every orbit's summary and JSON have, whichever quantities the model
#: declares under the same names.
_GENERIC_ENTRIES = ("period",)


def _report_no_orbit(
    args: argparse.Namespace,
    problem: _OrbitProblem,
    orbit,
    payload: dict[str, Any],
    hint,
) -> int:
    """Say why no orbit was found and write the JSON with the orbit's entries
    empty and the best iterate; exit status 1."""
    keys = (
        "state period phase_durations reduced_jacobian "
        "reduced_jacobian_eigenvalues monodromy_ad monodromy_saltation "
        "max_discrepancy multipliers_ad multipliers_saltation "
        "trivial_multiplier_ad trivial_multiplier_saltation "
        "conserved_multipliers_ad conserved_multipliers_saltation stable"
    ).split()
    payload.update(dict.fromkeys(keys))
    # The model's quantities by name, each null (no orbit to evaluate them on).
    summary = [n for n in problem.model.quantities or {} if n not in _GENERIC_ENTRIES]
    payload.update(dict.fromkeys(summary))
    best = orbit.restart.safeguard
    payload["best_iterate"] = [_number(v) for v in np.asarray(best.best_iterate)]
    payload["best_residual_norm"] = _number(float(best.best_defect))
    sys.stdout.flush()
    # Where the model knows that no orbit can exist (a wheel on level
    # ground), that comes first: it is the cause, the failure its symptom.
    if hint is not None:
        print(f"note: {hint}.", file=sys.stderr)
    # Where it does, a limit hit on the way (a wheel rocking back for ever
    # until the step limit) is no reason to raise that limit.
    violations = orbit.boundary_violations(problem.system)
    if violations:
        # An orbit of the equations that the model's own boundaries rule out:
        # name each one and its value (no solver advice can change that).
        payload["boundary_violations"] = violations
        print(
            "no admissible periodic orbit: the orbit found breaks the model's "
            f"boundaries ({'; '.join(violations)})",
            file=sys.stderr,
        )
    else:
        advice = _for_command(payload["status_message"], SOLVER_OPTIONS, hint is None)
        print(
            f"no periodic orbit found: {orbit.describe_failure()}. {advice}",
            file=sys.stderr,
        )
    if args.json is not None:
        _write_json(args.json, payload, "orbit", generic=summary)
        print(f"wrote {args.json}")
    return 1


def _print_params(args: argparse.Namespace, problem: _OrbitProblem) -> None:
    """The summary's heading: the model, its formulation and its parameters."""
    print(f"{args.model} ({problem.form_name}), parameters:")
    print(_params_lines(_params_dict(problem.params)))
    print()


def _to_minimal(form, x) -> np.ndarray:
    """`x` in the model's minimal coordinates, in which states and monodromy
    matrices are shown."""
    import jax.numpy as jnp

    if form.to_minimal is None:
        return np.asarray(x)
    return np.asarray(form.to_minimal(jnp.asarray(x)))


def _simulate_periods(periods_program, problem: _OrbitProblem, x_min):
    """The compiled simulation of `_ORBIT_PERIODS` periods from the minimal state
    `x_min`: `(trajectory, solution, status name)`."""
    import jax.numpy as jnp

    from .._solution import status_name
    from ..plot import Trajectory

    form = problem.form
    full = x_min if form.from_minimal is None else form.from_minimal(x_min)
    solution = periods_program.result()(jnp.asarray(full, dtype=float), problem.params)
    trajectory = Trajectory.from_solution(
        solution, problem.system, to_minimal=form.to_minimal
    )
    return trajectory, solution, status_name(solution.result)[0]


def _stability(form, orbit, n_min: int) -> _Stability:
    """The reduced Jacobian, the monodromy matrices in minimal coordinates and the
    nontrivial multipliers of the converged `orbit`; stable where every
    multiplier lies inside the unit circle by both routes."""
    floquet = orbit.floquet
    mono_ad = form.minimal_monodromy(floquet.monodromy_ad, n_min)
    mono_s = form.minimal_monodromy(floquet.monodromy_saltation, n_min)
    mult_ad = np.asarray(floquet.multipliers_ad)
    mult_s = np.asarray(floquet.multipliers_saltation)
    return _Stability(
        jacobian=np.asarray(orbit.reduced_jacobian, dtype=float),
        monodromy_ad=mono_ad,
        monodromy_saltation=mono_s,
        multipliers_ad=mult_ad,
        multipliers_saltation=mult_s,
        max_discrepancy=float(np.max(np.abs(mono_ad - mono_s))),
        stable=bool(np.all(np.abs(mult_ad) < 1) and np.all(np.abs(mult_s) < 1)),
    )


def _orbit_values(orbit, state, summary, stability: _Stability) -> dict[str, Any]:
    """The JSON's entries of a converged orbit: its state, durations, the model's
    quantities and its stability by both routes."""
    floquet = orbit.floquet
    M = stability.jacobian
    return dict(
        state=[float(v) for v in state],
        period=float(orbit.period),
        phase_durations=[
            float(v) for v in np.asarray(orbit.phase_durations, dtype=float)
        ],
        **summary,
        reduced_jacobian=_matrix(M),
        reduced_jacobian_eigenvalues=_pairs(np.linalg.eigvals(M)),
        monodromy_ad=_matrix(stability.monodromy_ad),
        monodromy_saltation=_matrix(stability.monodromy_saltation),
        max_discrepancy=stability.max_discrepancy,
        max_discrepancy_full_state=float(floquet.max_discrepancy),
        multipliers_ad=_pairs(stability.multipliers_ad),
        multipliers_saltation=_pairs(stability.multipliers_saltation),
        trivial_multiplier_ad=_pairs(floquet.trivial_ad)[0],
        trivial_multiplier_saltation=_pairs(floquet.trivial_saltation)[0],
        conserved_multipliers_ad=_pairs(floquet.conserved_ad),
        conserved_multipliers_saltation=_pairs(floquet.conserved_saltation),
        stable=stability.stable,
    )


def _print_orbit(problem: _OrbitProblem, orbit, state, sequence, summary_lines):
    """The summary of a converged orbit: the search, the state on the section,
    the phase durations and the period, and the model's quantities."""
    from .._solution import status_name
    from .._units import plain_text

    system = problem.system
    names = ", ".join(problem.model.state_names)
    print(f"periodic orbit: converged ({status_name(orbit.result)[0]})")
    print(f"  Newton iterations       {int(orbit.n_steps)}")
    print(f"  residual max|F|         {float(orbit.residual_norm):.3e}")
    first = system.transitions[sequence[-1]].name
    on_section = "[" + ", ".join(f"{v:+.10f}" for v in state) + "]"
    print(f"  state after {first:<11} {on_section}")
    print(f"                          ({names})")
    time = plain_text(problem.model.presentation.units.time)
    durations = np.asarray(orbit.phase_durations, dtype=float)
    for k, duration in enumerate(durations):
        mode = system.modes[system.sources[sequence[k]]].name
        label = f"  phase {k + 1} ({mode})"
        print(f"{label:<25} {duration:.10f} {time}")
    print(f"  period                  {float(orbit.period):.10f} {time}")
    if summary_lines:
        print("the model's quantities:")
        for line in summary_lines:
            print(line)
    print()


def _print_stability(problem: _OrbitProblem, orbit, stability: _Stability, sequence):
    """The reduced Jacobian, both monodromy matrices and the Floquet multipliers
    of the converged orbit, with the verdict."""
    floquet = orbit.floquet
    names = ", ".join(problem.model.state_names)
    first = problem.system.transitions[sequence[-1]].name
    M = stability.jacobian
    print(f"reduced Jacobian M (unknowns after {first}):")
    print("\n".join(_format_matrix(M)))
    eig_M = ", ".join(_format_complex(v) for v in np.linalg.eigvals(M))
    print(f"  eigenvalues: {eig_M}")
    for label, matrix in (
        ("autodiff", stability.monodromy_ad),
        ("saltation product", stability.monodromy_saltation),
    ):
        print(f"monodromy by {label} ({names}):")
        print("\n".join(_format_matrix(matrix)))
    print(f"  max |AD - saltation| = {stability.max_discrepancy:.3e}", end="")
    if problem.form.to_minimal is not None:
        print(f" (full state: {float(floquet.max_discrepancy):.3e})", end="")
    print()
    print()
    mult_ad = stability.multipliers_ad
    mult_s = stability.multipliers_saltation
    print("Floquet multipliers (nontrivial, by decreasing modulus):")
    print(f"  autodiff:  {', '.join(_format_complex(v) for v in mult_ad)}")
    print(f"  saltation: {', '.join(_format_complex(v) for v in mult_s)}")
    print(
        f"  trivial:   {_format_complex(floquet.trivial_ad)} (autodiff), "
        f"{_format_complex(floquet.trivial_saltation)} (saltation)"
    )
    for name, ad, salt in zip(
        (invariant.__name__ for invariant in problem.section.invariants),
        np.asarray(floquet.conserved_ad),
        np.asarray(floquet.conserved_saltation),
    ):
        print(
            f"  conserved ({name}): {_format_complex(ad)} (autodiff), "
            f"{_format_complex(salt)} (saltation)"
        )
    leading = float(np.max(np.abs(mult_ad))) if mult_ad.size else 0.0
    verdict = "stable" if stability.stable else "unstable"
    print(f"  {verdict}: largest nontrivial |multiplier| = {leading:.10f}")
    print()


def _gait_indicators(model) -> dict:
    return {name: model.quantity(name) for name in model.gait_indicators}


def _prepare_gait_sensitivity(args: argparse.Namespace, problem: _OrbitProblem):
    """Start compiling the gait sensitivity of the declared disturbances (one
    program for all) in a thread of its own, while the orbit search traces and
    compiles (the search spends most of its time in XLA, which leaves the
    interpreter free)."""
    from .._robustness import compile_gait_sensitivity

    model = problem.model
    if not model.disturbances:
        return []
    return [
        compile_gait_sensitivity(
            problem.system,
            problem.section,
            problem.guess,
            problem.params,
            dict(model.disturbances),
            _gait_indicators(model),
            settings=solver_settings(args),
        )
    ]


def _gait_sensitivity(args: argparse.Namespace, problem: _OrbitProblem, orbit):
    """The gait sensitivity norm of each disturbance the model declares, on its
    gait indicators: printed, and returned as the JSON's entry."""
    from .._robustness import gait_sensitivity
    from .._solution import status_name
    from .._units import plain_text

    model = problem.model
    indicators = _gait_indicators(model)
    print(
        f"gait sensitivity norm (Hobbelen & Wisse 2007) of {', '.join(indicators)}:"
        " their response over all later steps to a unit disturbance in one step"
    )
    entries = {}
    results = gait_sensitivity(
        problem.system,
        problem.section,
        orbit,
        problem.params,
        dict(model.disturbances),
        indicators,
        settings=solver_settings(args),
    )
    for name, disturbance in model.disturbances.items():
        result = results[name]
        norms = np.asarray(result.norms, dtype=float)
        per = plain_text(disturbance.unit)
        parts = []
        for (indicator, quantity), value in zip(indicators.items(), norms):
            unit = "" if quantity.unit == "1" else plain_text(quantity.unit)
            parts.append(f"{indicator} {value:.6g} {unit}/{per}".replace(" /", " 1/"))
        meaning = disturbance.meaning or name
        print(f"  {name} ({meaning}): {float(result.norm):.6g}  ({'; '.join(parts)})")
        entries[name] = {
            "meaning": disturbance.meaning,
            "unit": disturbance.unit,
            "status": status_name(result.result)[0],
            "norm": _number(float(result.norm)),
            "norms": {
                indicator: _number(value) for indicator, value in zip(indicators, norms)
            },
            "indicator_units": {n: q.unit for n, q in indicators.items()},
        }
    print()
    return entries


def _write_orbit_figures(
    args: argparse.Namespace,
    problem: _OrbitProblem,
    periods_program,
    state,
    trajectory,
    n_cycle: int,
) -> None:
    """The model's orbit figures (its first period, and the first periods from the
    model's perturbed starts) and the stick-figure outputs, each path printed."""
    model, params = problem.model, problem.params
    cycle = _first_period(trajectory, n_cycle)
    perturbed, labels = [], []
    for index, size, label in model.presentation.orbit_perturbations:
        start = state.copy()
        start[index] += size
        moved = _simulate_periods(periods_program, problem, start)[0]
        perturbed.append(_first_period(moved, n_cycle))
        labels.append(label)
    for path in model.orbit_figures(
        cycle, perturbed, labels, trajectory, params, args.out
    ):
        print(f"wrote {path}")
    for path in _stick_outputs(
        model, trajectory, params, args.out, args.fps, args.animation
    ):
        print(f"wrote {path}")
