r"""Gradient-based tuning of periodic orbits.

Minimises a scalar objective $J(\text{orbit}(p), p)$ over some parameters $\theta$
of the PyTree $p$, by an optimistix minimiser (BFGS by default) stepped one
evaluation at a time on the host (the documented interactive use of optimistix's
solvers), so that each step can warm-start the next orbit solve from the last
one found, print its progress and be recorded. The gradient comes from the
orbit's implicit-function derivative (see [`hybrax.find_periodic_orbit`][]), in
reverse or forward mode. The objective, its gradient and the orbit are one
compiled program, evaluated where the minimiser's step will evaluate; the step's
own program then holds no orbit solve (see `problem.Evaluated`).
"""

import dataclasses
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from .._compile import announcing_progress
from .._continuation_parameter import AbstractParameter, as_parameter
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._misc import canonical_params, check_float64
from .._periodic import (
    PeriodicOrbit,
    PoincareSection,
)
from .._settings import (
    Settings,
    Shooting,
    resolve_options,
    resolve_settings,
    resolve_shooting,
)
from .._solution import RESULTS, status_name
from .problem import (
    Evaluated,
    ForwardProblem,
    _evaluated,
    _host,
    _Problem,
    _Seek,
    _seek_evaluated,
    evaluated_structs,
    evaluates_once,
    evaluation_at,
    minimiser_init,
    minimiser_step,
    minimiser_terminate,
)
from .results import TuneResult, TuneSettings, TuneStep


def tune(
    system: HybridSystem,
    section: PoincareSection,
    u_guess,
    params: Params,
    objective: Callable[[PeriodicOrbit, Params], Any] | None = None,
    *,
    vary: Sequence[AbstractParameter | str],
    constraints: Sequence[tuple[Callable[[PeriodicOrbit, Params], Any], float]] = (),
    scale: Sequence[float] | None = None,
    max_multiplier: float | None = None,
    tune_settings: TuneSettings | None = None,
    shooting: Shooting | None = None,
    settings: Settings | None = None,
    progress: bool = False,
    callback: Callable[[TuneStep], None] | None = None,
) -> TuneResult:
    r"""Minimise an objective of a periodic orbit over chosen parameters, by gradient.

    $$\min_\theta\ J(\text{orbit}, p)/J_0 + \sum_i \Big(\frac{c_i(\text{orbit}, p)}
    {\tau_i}\Big)^2 + w\max(0, \rho - \rho_{max})^2,\qquad p = p(\theta),$$

    with $J$ = `objective`, equality constraints $c_i = 0$ to tolerances
    $\tau_i$ (`constraints`), and $\rho$ the orbit's spectral radius (largest
    nontrivial multiplier modulus) kept below $\rho_{max}$ = `max_multiplier` by a
    penalty of weight $w$ = `stability_weight` on its excess over $0.999
    \rho_{max}$. The constraints' penalties are tightened in three stages
    (tolerances $100\tau_i$, $10\tau_i$, $\tau_i$), each warm-started from the
    last, which keeps the early landscape well conditioned. Existence is a
    constraint of its own: where no orbit is found the objective is NaN, which the
    minimiser's line search rejects,
    stepping back towards the last point with an orbit. Each orbit solve starts
    from the last orbit found (warm start). The parameters are varied in the
    scaled coordinates $\theta_i / s_i$.

    The gradient is the orbit's implicit-function derivative: in reverse mode
    (`TuneSettings(mode="reverse")`, one transposed derivative whatever the
    number of parameters; with no more varied parameters than the section has
    coordinates plus one, the transpose is evaluated by forward lanes) or in
    forward mode (`"forward"`, one tangent per parameter). `"auto"` (the
    default) takes reverse: it compiles faster, and runs as fast once compiled.
    The objective, its gradient and the orbit are one compiled program: the
    minimiser's steps take their value and gradient from its evaluations and
    compile no orbit solve of their own (see [`hybrax.TuneSettings`][]).

    **Arguments:**

    - `system`, `section`, `u_guess`: as for [`hybrax.find_periodic_orbit`][]
      (`u_guess` must find the orbit at the starting parameters).
    - `params`: the starting parameter PyTree.
    - `objective`: `J(orbit, params) -> scalar`, differentiable (for example
      `lambda orbit, p: orbit.spectral_radius`); `None` for none.
    - `vary`: the parameters to tune: names of fields, or
      [`hybrax.AbstractParameter`][]s (e.g. the hopper's `D_G` in scaled units).
    - `constraints`: pairs `(c, tolerance)` with `c(orbit, params) -> scalar` to
      bring to zero (e.g. an apex height minus its target, to 1e-3 m). A
      [`hybrax.QuantityTarget`][] holds its target as an array, so that tuning
      to another target compiles nothing.
    - `scale`: a typical size of each varied parameter (default: its starting
      magnitude, 1 if 0).
    - `max_multiplier`: the bound $\rho_{max}$ of the stability penalty above.
    - `tune_settings`: a [`hybrax.TuneSettings`][]: the minimiser, its step limit,
      the derivative's mode, the penalties' weights and the existence stage
      (default: `TuneSettings()`).
    - `shooting`, `settings`: for each orbit solve (see
      [`hybrax.find_periodic_orbit`][]).
    - `progress`: print one line per evaluation to stderr.
    - `callback`: called with each [`hybrax.TuneStep`][].
    **Returns:** a [`hybrax.TuneResult`][] with the history.

    **Raises:** `ValueError` for bad arguments, or when no orbit is found at the
    starting parameters (or, with `seek_steps`, by the existence stage).

    !!! example

        The hopper's (d_G, k) whose upper mass hops to 1.15 m, to 1 mm, with the
        smallest nontrivial multiplier:

        ```python
        params = models.hopper.make_params()

        def apex_error(orbit, p):
            return orbit.cycle.phase_observables["apex_upper"][0] - 1.15

        result = hybrax.tune(
            models.hopper.minimal()[0], models.hopper.section(),
            models.hopper.orbit_guess(params), params,
            lambda orbit, p: orbit.spectral_radius,
            vary=["d_G", "k"], constraints=[(apex_error, 1e-3)],
        )
        ```
    """
    check_float64("tune")
    how = resolve_options(tune_settings, TuneSettings, "tune_settings")
    problem, fn, names, start, scale, mode = _checked_problem(
        system,
        section,
        params,
        objective,
        vary,
        constraints,
        scale,
        max_multiplier,
        how,
        shooting,
        settings,
    )
    minimiser = how.minimiser or optx.BFGS(rtol=1e-8, atol=1e-8)
    seek_steps = int(how.seek_steps)

    # With `progress`, the compilations are announced before the first line.
    with announcing_progress(progress):
        y = jnp.asarray(start / scale)
        u = jnp.atleast_1d(jnp.asarray(u_guess, dtype=y.dtype))
        widths = (100.0, 10.0, 1.0) if problem.constraints else (1.0,)
        began = time.perf_counter()
        forward = mode == "forward"
        # Widths as arrays of y's dtype everywhere (a weakly typed one would compile
        # `_evaluated` again).
        first, _, _ = _evaluated(
            problem, y, (u, jnp.asarray(widths[0], y.dtype)), forward
        )
        first_value, (_, diagnostics) = first
        u_first, first_result = diagnostics.u, diagnostics.result
        first_raw = diagnostics.raw
        # The objective's output structure for the minimiser's state.
        structs = evaluated_structs((y, first[0], None, first[1]))
        history: list[TuneStep] = []
        seek_run_time = 0.0
        sought = not math.isfinite(float(first_value)) and seek_steps > 0
        if sought:
            y, u, first_value, u_first, first_result, seek_run_time = _seek(
                problem,
                problem.settings,
                y,
                u,
                names,
                scale,
                seek_steps,
                float(how.seek_tol),
                widths[0],
                forward,
                history,
                progress,
                callback,
            )
        if not math.isfinite(float(first_value)):
            raise ValueError(
                "no periodic orbit at the starting parameters from `u_guess` "
                f"({status_name(first_result)[0]}): give a guess that finds one"
                + (", or more `seek_steps`." if seek_steps > 0 else ".")
            )
        u = u_first
        if how.objective_scale == "start":
            # The objective's own size at the first orbit: from the first
            # evaluation, or after the existence stage one warm evaluation more.
            # A run-time value: nothing compiles again.
            if sought:
                (_, aux), _, _ = _evaluated(
                    problem, y, (u, jnp.asarray(widths[0], y.dtype)), forward
                )
                first_raw = _host(aux)[1].raw
            size = abs(float(first_raw))
            problem = eqx.tree_at(
                lambda p: p.objective_scale,
                problem,
                np.asarray(size if size > 0 and math.isfinite(size) else 1.0),
            )
            fn = problem if mode == "reverse" else ForwardProblem(problem)
        y, u, result_name, broken, run_time, last = _minimise(
            problem,
            fn,
            minimiser,
            y,
            u,
            widths,
            structs,
            names,
            scale,
            int(how.max_steps),
            forward,
            history,
            progress,
            callback,
        )
        return _tuned(
            problem,
            y,
            u,
            names,
            scale,
            widths[-1],
            forward,
            max_multiplier,
            history,
            result_name,
            broken,
            mode,
            began,
            run_time + seek_run_time,
            last,
        )


def _checked_problem(
    system,
    section,
    params,
    objective,
    vary,
    constraints,
    scale,
    max_multiplier,
    how: TuneSettings,
    shooting,
    settings,
):
    """The checked arguments of [`hybrax.tune`][] as its objective:
    `(problem, fn, names, start, scale, mode)`, with `fn` the problem in the
    derivative's mode (for a minimiser that evaluates it in its own steps) and
    `start` the varied parameters' starting values; a `ValueError` naming the
    argument otherwise."""
    if max_multiplier is not None and not max_multiplier > 0:
        raise ValueError(f"`max_multiplier` must be positive; got {max_multiplier}.")
    if objective is not None and not callable(objective):
        raise ValueError("`objective` must be callable as J(orbit, params), or None.")
    constraints = tuple(constraints)
    for item in constraints:
        if not (
            isinstance(item, tuple)
            and len(item) == 2
            and callable(item[0])
            and float(item[1]) > 0
        ):
            raise ValueError(
                "`constraints` must be pairs (c(orbit, params), tolerance > 0); got "
                f"{item!r}."
            )
    if objective is None and not constraints and max_multiplier is None:
        raise ValueError("Give an `objective`, `constraints` or `max_multiplier`.")
    vary = tuple(as_parameter(parameter, params, "vary") for parameter in vary)
    if not vary:
        raise ValueError("`vary` must name at least one parameter.")
    names = [parameter.name for parameter in vary]
    if len(set(names)) != len(names):
        raise ValueError(f"`vary` names a parameter twice: {names}.")
    params = canonical_params(params)
    start = np.array([float(parameter.get(params)) for parameter in vary])
    if scale is None:
        scale = np.where(start != 0, np.abs(start), 1.0)
    scale = np.asarray(scale, dtype=float)
    if scale.shape != start.shape or not np.all(np.isfinite(scale) & (scale > 0)):
        raise ValueError(
            f"`scale` must hold one positive number per varied parameter; got {scale}."
        )
    mode = how.mode
    if mode == "auto":
        mode = "reverse"
    settings = resolve_settings(settings)
    adjoint = (
        dfx.ForwardMode() if mode == "forward" else dfx.RecursiveCheckpointAdjoint()
    )
    settings = eqx.tree_at(
        lambda s: s.adjoint, settings, adjoint, is_leaf=lambda x: x is None
    )
    objective_scale = how.objective_scale
    problem = _Problem(
        system,
        section,
        params,
        vary,
        jnp.asarray(scale),
        objective,
        tuple(c for c, _ in constraints),
        jnp.asarray([float(t) for _, t in constraints] or [1.0]),
        None if max_multiplier is None else np.asarray(max_multiplier, dtype=float),
        np.asarray(how.stability_weight, dtype=float),
        np.asarray(1.0 if objective_scale == "start" else objective_scale, float),
        settings,
        resolve_shooting(shooting),
    )
    fn = problem if mode == "reverse" else ForwardProblem(problem)
    return problem, fn, names, start, scale, mode


def _minimise(
    problem,
    fn,
    minimiser,
    y,
    u,
    widths,
    structs,
    names,
    scale,
    max_steps: int,
    forward: bool,
    history: list,
    progress: bool,
    callback,
):
    """The minimiser's steps, one evaluation at a time, through the stages of
    tightening penalties `widths`: each step records a [`hybrax.TuneStep`][] and
    warm-starts the next orbit solve from the last orbit found. A minimiser that
    evaluates once per step ([`hybrax._tune.problem.evaluates_once`][]) steps on
    the objective program's evaluation at its next point; another evaluates `fn`
    inside its own step. Returns `(y, u, the minimiser's status name, the broken
    parameter rule or None, the steps' run time, the last evaluation)`, the last
    as `(y, width, _evaluated's output)` (or None)."""
    f_struct, aux_struct = structs
    tags = frozenset()
    result_name = "max_steps_reached"
    broken = None
    run_time = 0.0
    once = evaluates_once(minimiser)
    pressed = None  # the last rule a trial point broke
    step_fn = Evaluated() if once else fn
    last = None

    def step_args(at, args, previous=None):
        # What the step evaluates: the objective at `at` by its own program, or
        # the warm start for `fn`. The last evaluation is kept: where the
        # minimiser ends on it, it is the result's (nothing is solved again).
        if not once:
            return args

        def evaluate(y_):
            nonlocal last
            output = _evaluated(problem, y_, args, forward)
            last = (np.asarray(y_), float(args[1]), output)
            return output

        return evaluation_at(evaluate, at, previous)

    for stage, width in enumerate(widths):
        if broken is not None:
            break
        args = (u, jnp.asarray(width, y.dtype))
        evaluation = step_args(y, args)
        state = minimiser_init(
            minimiser, step_fn, y, evaluation, f_struct, aux_struct, tags
        )
        best = math.inf
        while len(history) < max_steps:
            t0 = time.perf_counter()
            at = state.y_eval if once else y
            # A trial point outside the parameters' rules evaluates to the
            # status `parameters_out_of_domain` (no orbit), so the minimiser
            # steps back; where it then ends without converging, it was pressing
            # against that rule (reported below).
            trial_rule = _broken_rule(problem.with_values(at)) if once else None
            pressed = trial_rule or pressed
            evaluation = step_args(at, args, evaluation)
            y_next, state, aux = minimiser_step(
                minimiser, step_fn, y, evaluation, state, tags
            )
            done, result = minimiser_terminate(
                minimiser, step_fn, y_next, evaluation, state, tags
            )
            f_value, diagnostics = _host(aux)
            u_new, rho = diagnostics.u, diagnostics.spectral_radius
            multipliers, orbit_result = diagnostics.multipliers, diagnostics.result
            if history:  # (`_host` waits for the step's results)
                run_time += time.perf_counter() - t0
            found = status_name(orbit_result)[0] == "successful"
            improved = found and float(f_value) < best
            if improved:
                best = float(f_value)
            if found:
                u = jnp.asarray(u_new)
                args = (u, jnp.asarray(width, y.dtype))
            record = TuneStep(
                step=len(history),
                values={n: float(v) for n, v in zip(names, np.asarray(y) * scale)},
                objective=float(f_value),
                spectral_radius=float(rho),
                multipliers=np.asarray(multipliers),
                orbit_found=found,
                result=orbit_result,
                best=improved,
                u=np.asarray(u_new),
            )
            history.append(record)
            if progress:
                _print_step(record, stage, len(widths))
            if callback is not None:
                callback(record)
            broken = _broken_rule(problem.with_values(y_next))
            if broken is not None:
                # Tuning never writes parameters outside their rules: it ends
                # at the last point inside them.
                result_name = "parameter_rule"
                break
            y = y_next
            if bool(done):
                result_name = (
                    "successful"
                    if bool(result == optx.RESULTS.successful)
                    else optx.RESULTS[result]
                )
                break
        else:
            result_name = "max_steps_reached"
            break
    if broken is None and pressed is not None and result_name != "successful":
        # It ended at the last point inside the rules that its trials left.
        result_name, broken = "parameter_rule", pressed
    return y, u, result_name, broken, run_time, last


def _tuned(
    problem,
    y,
    u,
    names,
    scale,
    width,
    forward: bool,
    max_multiplier,
    history,
    result_name: str,
    broken,
    mode: str,
    began: float,
    run_time: float,
    last=None,
) -> TuneResult:
    """The [`hybrax.TuneResult`][] at the minimiser's last point: its orbit from
    the `last` evaluation where that was there (at the final width), else solved
    again by the objective's own program; the constraints read to their
    tolerances, and the outcome."""
    final_params = problem.with_values(y)
    if last is not None and last[1] == width and np.array_equal(last[0], y):
        (value, _), _, orbit = last[2]
    else:
        (value, _), _, orbit = _evaluated(
            problem, y, (u, jnp.asarray(width, y.dtype)), forward
        )
    value = float(value)
    rho = float(orbit.spectral_radius)
    found = bool(orbit.succeeded)
    bound = 1.0 if max_multiplier is None else min(1.0, float(max_multiplier))
    # Each constraint at the result, to its own tolerance (NaN fails).
    met = found and all(
        bool(jnp.all(jnp.abs(jnp.asarray(c(orbit, final_params))) <= tol))
        for c, tol in zip(problem.constraints, problem.tolerances)
    )
    if not found:
        outcome = orbit.result
    elif not met:
        outcome = RESULTS.targets_not_met
    elif result_name == "successful":
        outcome = RESULTS.successful
    else:
        outcome = RESULTS.targets_met
    wall_time = time.perf_counter() - began
    return TuneResult(
        params=final_params,
        values={n: float(v) for n, v in zip(names, np.asarray(y) * scale)},
        objective=value,
        orbit=orbit,
        result=outcome,
        orbit_found=found,
        targets_met=met,
        stable=found and rho < bound,
        history=history,
        n_evaluations=len(history) + 1,
        wall_time=wall_time,
        compile_time=wall_time - run_time,
        minimiser_result=result_name,
        mode=str(mode),
        problem=problem,
        rule=broken,
    )


def orbit_from(result: TuneResult, u_guess) -> PeriodicOrbit:
    """The periodic orbit at a tuning result's parameters found from `u_guess`, by
    the tuning's own objective program (so that nothing compiles again): for
    checks of the result from other starts."""
    problem = result.problem
    y = jnp.asarray(
        np.asarray(list(result.values.values())) / np.asarray(problem.scale)
    )
    u = jnp.atleast_1d(jnp.asarray(u_guess, dtype=y.dtype))
    _, _, orbit = _evaluated(
        problem, y, (u, jnp.ones((), y.dtype)), result.mode == "forward"
    )
    return orbit


def _broken_rule(params) -> str | None:
    """The message of the rule of `params`' class that its (concrete) values
    break (the class's own checks, run again by rebuilding it), else `None`;
    also `None` for parameters without such a class."""
    if not dataclasses.is_dataclass(params) or isinstance(params, type):
        return None
    try:
        dataclasses.replace(params)
    except ValueError as error:
        return str(error)
    except Exception:  # a class that cannot be rebuilt field by field: no rules
        return None
    return None


def _seek(
    problem,
    settings,
    y,
    u,
    names,
    scale,
    max_steps,
    tol,
    width,
    forward: bool,
    history,
    progress,
    callback,
):
    """The existence stage (see [`hybrax.tune`][]): Levenberg-Marquardt steps on
    [`hybrax._tune._Seek`][] until an orbit is found from a point whose
    periodicity defect is below `tol`. Each step steps on the residual's program's
    evaluation at its next point (see `problem.Evaluated`). Returns `(y, u, value,
    u_orbit, result, run_time)`: the tuning's first evaluation there (NaN value
    if none was found) and the seconds of the steps after the first (run time,
    not compiling)."""
    seek = _Seek(
        problem,
        eqx.tree_at(lambda s: s.adjoint, settings, dfx.ForwardMode()),
        int(u.shape[0]),
    )
    solver = optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)
    z = jnp.concatenate([u, y])
    width = jnp.asarray(width, z.dtype)
    # The points evaluated, by their bytes: the current point is always one
    # (the start, or a point that a step evaluated and accepted).
    evaluations = {}

    def evaluated(at):
        key = np.asarray(at).tobytes()
        if key not in evaluations:
            residual, jacobian, aux = _seek_evaluated(seek, at, width)
            evaluations[key] = (at, residual, jacobian, aux)
        return evaluations[key]

    evaluation = evaluated(z)
    f_struct, aux_struct = evaluated_structs(evaluation)
    step_fn, tags = Evaluated(), frozenset()
    state = minimiser_init(solver, step_fn, z, evaluation, f_struct, aux_struct, tags)
    k = int(u.shape[0])
    value, u_orbit, result = jnp.asarray(jnp.nan), u, RESULTS.shooting_failed
    run_time = 0.0
    for index in range(max_steps):
        t0 = time.perf_counter()
        evaluation = evaluated(state.y_eval)
        z_next, state, _ = minimiser_step(solver, step_fn, z, evaluation, state, tags)
        _, residual, _, (defect, cycle_result) = jax.device_get(evaluated(z))
        found = False
        if float(defect) < tol:
            (value, (_, diagnostics)), _, _ = _evaluated(
                problem, z[k:], (z[:k], width), forward
            )
            u_orbit, result = diagnostics.u, diagnostics.result
            found = math.isfinite(float(value))
        record = TuneStep(
            step=len(history),
            values={n: float(v) for n, v in zip(names, np.asarray(z[k:]) * scale)},
            objective=float(np.sum(np.asarray(residual) ** 2)),
            spectral_radius=math.nan,
            multipliers=np.full(k, np.nan + 0j),
            orbit_found=found,
            result=cycle_result,
            best=False,
            u=np.asarray(z[:k]),
            stage="seek",
        )
        history.append(record)
        if progress:
            _print_step(record, -1, 0)
        if callback is not None:
            callback(record)
        if index:
            run_time += time.perf_counter() - t0
        if found:
            return z[k:], z[:k], value, u_orbit, result, run_time
        z = z_next
    return z[k:], z[:k], value, u_orbit, result, run_time


def _print_step(record: TuneStep, stage: int, n_stages: int) -> None:
    values = ", ".join(f"{k}={v:.6g}" for k, v in record.values.items())
    mark = "*" if record.best else " "
    if record.stage == "seek":
        values = ", ".join(f"{k}={v:.6g}" for k, v in record.values.items())
        print(
            f"  seek step {record.step:3d}  |defect|^2 + penalties = "
            f"{record.objective:.6g}  {values}  ({status_name(record.result)[0]}"
            + (", orbit found)" if record.orbit_found else ")"),
            file=sys.stderr,
            flush=True,
        )
        return
    print(
        f"{mark} stage {stage + 1}/{n_stages} step {record.step:3d}  "
        f"J = {record.objective:.8g}  "
        f"rho = {record.spectral_radius:.4f}  {values}  "
        f"({status_name(record.result)[0]})",
        file=sys.stderr,
        flush=True,
    )
