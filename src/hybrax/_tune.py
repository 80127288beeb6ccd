r"""Gradient-based tuning of periodic orbits.

Minimises a scalar objective $J(\text{orbit}(p), p)$ over some parameters $\theta$
of the PyTree $p$, by an optimistix minimiser (BFGS by default) stepped one
evaluation at a time on the host (the documented interactive use of optimistix's
solvers), so that each step can warm-start the next orbit solve from the last
one found, print its progress and be recorded. The gradient comes from the
orbit's implicit-function derivative (see [`hybrax.find_periodic_orbit`][]), in
reverse mode or, for one or two parameters, forward mode.
"""

import dataclasses
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import ArrayLike

from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import canonical_params, check_float64
from ._parameters import AbstractParameter, as_parameter
from ._periodic import (
    PeriodicOrbit,
    PoincareSection,
    ShootingSafeguard,
    ShootingStart,
    cycle,
    find_periodic_orbit,
    resolve_sequence,
)
from ._programs import announcing_progress, compiled
from ._settings import (
    Settings,
    Shooting,
    resolve_options,
    resolve_settings,
    resolve_shooting,
)
from ._solution import RESULTS, masked_nan, status_name


class TuneStep(eqx.Module):
    """One evaluation of the objective during [`hybrax.tune`][] (host values).

    - `step`: its index; `values`: the varied parameters, by name.
    - `objective`: $J$ there (NaN where no orbit was found).
    - `spectral_radius`, `multipliers`: of the orbit there.
    - `orbit_found`: whether an orbit was found; `result`: the orbit's status, a
      [`hybrax.RESULTS`][] member.
    - `best`: whether this evaluation improved on every earlier one.
    - `u`: the orbit's reduced unknowns (a warm start for nearby points).
    - `stage`: `"seek"` for a step of the existence stage (no orbit yet: the
      objective is the squared periodicity defect and constraints,
      `orbit_found` says whether an orbit was found there), `"tune"` after.
    """

    step: int
    values: dict[str, float]
    objective: float
    spectral_radius: float
    multipliers: np.ndarray
    orbit_found: bool
    result: RESULTS
    best: bool
    u: np.ndarray
    stage: str = "tune"


class TuneResult(eqx.Module):
    r"""The result of [`hybrax.tune`][].

    - `params`: the tuned parameter PyTree; `values`: the varied ones, by name.
    - `objective`: $J$ at the result; `orbit`: its [`hybrax.PeriodicOrbit`][].
    - `result`: what the result is, a [`hybrax.RESULTS`][] member:
      - `successful`: an orbit, every constraint within its tolerance, and the
        minimiser met its own tolerance (a constrained minimum);
      - `targets_met`: an orbit with every constraint within its tolerance, but
        the minimiser stopped short of its tolerance (`minimiser_result` says
        why, e.g. `"max_steps_reached"`): a feasible point, not a minimum;
      - `targets_not_met`: an orbit, some constraint outside its tolerance;
      - otherwise why no orbit was found at the result (the orbit's own
        `result`, e.g. `shooting_failed`).
      None of them says the orbit is stable: `stable` does. `succeeded`: the
      targets are met (`successful` or `targets_met`).
    - `orbit_found`: an orbit exists at the result; `targets_met`: it meets every
      constraint to its tolerance, $|c_i| \le \tau_i$ (true where there are
      none); `stable`: its spectral radius is below 1 (and below
      `max_multiplier` if one was given).
    - `history`: every evaluation, a list of [`hybrax.TuneStep`][].
    - `n_evaluations`: orbit solves with their gradients; `wall_time`: seconds in
      all; `compile_time`: of those, the ones outside the minimiser's warm steps
      (tracing and compiling its programs, once each, with the first step and the
      start and final solves); the rest is run time.
    - `minimiser_result`: the minimiser's own status name (`"successful"` when it
      met its tolerance), or `"parameter_rule"`: its next step would have left the
      parameters' rules (their class's checks, e.g. a slope inside
      $(-\pi/2, \pi/2)$), so the result is the last point inside them and
      `rule` says which rule; `mode`: `"reverse"` or `"forward"`.
    """

    params: Params
    values: dict[str, float]
    objective: float
    orbit: PeriodicOrbit
    result: RESULTS
    orbit_found: bool
    targets_met: bool
    stable: bool
    history: list[TuneStep]
    n_evaluations: int
    wall_time: float
    compile_time: float
    minimiser_result: str
    mode: str
    problem: Any = eqx.field(repr=False, default=None, metadata={"archive": False})
    rule: str | None = None

    @property
    def succeeded(self) -> bool:
        """Whether the targets are met at an orbit (`result` is `successful` or
        `targets_met`)."""
        return bool(
            (self.result == RESULTS.successful) | (self.result == RESULTS.targets_met)
        )

    def objective_at(self, values) -> np.ndarray:
        """The penalised objective (final stage) at a batch of values of the
        varied parameters, shape `(N, P)` in `values`' order: for contour maps.
        Each point's orbit is sought from the nearest evaluated one's; NaN where
        none is found. The orbits come from one [`hybrax.sweep_orbits`][] (its
        compaction keeps points without an orbit from holding up the others)."""
        values = np.atleast_2d(np.asarray(values, dtype=float))
        problem = self.problem
        scale = np.asarray(problem.scale)
        y = values / scale
        found = [step for step in self.history if step.orbit_found]
        if not found:
            guesses = np.broadcast_to(np.asarray(self.orbit.u), (len(y), 1))
        else:
            names = list(self.values)
            known = np.array([[s.values[n] for n in names] for s in found]) / scale
            nearest = np.argmin(
                np.sum((y[:, None, :] - known[None, :, :]) ** 2, axis=-1), axis=1
            )
            guesses = np.stack([found[i].u for i in nearest])
        from ._sweep import sweep_orbits

        params = _batched_values(problem, jnp.asarray(y))
        orbits = sweep_orbits(
            problem.system,
            problem.section,
            guesses,
            params,
            settings=problem.settings,
            shooting=problem.shooting,
            phase_observables=True,
        ).orbit
        return np.asarray(_values_of(problem, orbits, params))


class QuantityTarget(eqx.Module):
    """The constraint `quantity(orbit, params) - value` of [`hybrax.tune`][] with
    `value` an array: a run-time input of the compiled tuning program, so that
    another target compiles nothing (a target captured by a lambda is a
    constant of the program: each value compiles its own)."""

    quantity: Callable[[PeriodicOrbit, Params], Any]
    value: ArrayLike

    def __call__(self, orbit, params):
        return self.quantity(orbit, params) - self.value


class _Problem(eqx.Module):
    """The objective of [`hybrax.tune`][] as a function `f(y, args) -> (J, aux)`
    of the scaled values `y` of the varied parameters; `args` is the warm start.
    """

    system: HybridSystem
    section: PoincareSection
    params: Params
    vary: tuple[AbstractParameter, ...]
    scale: jax.Array
    objective: Callable[[PeriodicOrbit, Params], Any] | None
    constraints: tuple[Callable[[PeriodicOrbit, Params], Any], ...]
    tolerances: jax.Array
    # Run-time values: another bound, weight or iteration count compiles nothing.
    max_multiplier: ArrayLike | None
    stability_weight: ArrayLike
    objective_scale: ArrayLike
    settings: Settings
    shooting: Shooting

    def with_values(self, y):
        params = self.params
        for i, parameter in enumerate(self.vary):
            params = parameter.set(params, y[i] * self.scale[i])
        return params

    def value_of(self, orbit, params, widen):
        """The objective (over `objective_scale`) with its penalties, the
        constraints' violations and the objective itself, of a found `orbit` at
        `params`."""
        dtype = orbit.u.dtype
        if self.objective is None:
            raw = jnp.zeros((), dtype)
        else:
            raw = jnp.asarray(self.objective(orbit, params), dtype=dtype)
        value = raw / self.objective_scale
        violations = jnp.stack(
            [jnp.asarray(c(orbit, params), dtype=dtype) for c in self.constraints]
            or [jnp.zeros((), dtype)]
        )
        if self.constraints:
            value = value + jnp.sum((violations / (widen * self.tolerances)) ** 2)
        if self.max_multiplier is not None:
            # Aim a hair inside the bound (0.1%), so that the balance of the
            # penalty against the objective leaves the result strictly below it.
            bound = self.max_multiplier * (1 - 1e-3)
            excess = jnp.maximum(orbit.spectral_radius - bound, 0.0)
            value = value + self.stability_weight * excess**2
        return value, violations, raw

    def evaluate(self, y, args):
        u_guess, widen = args
        params = self.with_values(y)
        orbit = find_periodic_orbit(
            self.system,
            self.section,
            u_guess,
            params,
            shooting=self.shooting,
            settings=self.settings,
            analyse=False,
        )
        value, violations, raw = self.value_of(orbit, params, widen)
        aux = (
            orbit.u,
            orbit.spectral_radius,
            orbit.multipliers,
            orbit.result,
            violations,
            raw,
        )
        return value, jax.lax.stop_gradient((value, aux))

    def __call__(self, y, args):
        return self.evaluate(y, args)


@eqx.filter_custom_vjp
def _forward_gradient(y, args, problem):
    return problem.evaluate(y, args)


@_forward_gradient.def_fwd
def _forward_gradient_fwd(perturbed, y, args, problem):
    del perturbed

    def value(y_):
        f, aux = problem.evaluate(y_, args)
        return f, (f, aux)

    gradient, (f, aux) = jax.jacfwd(value, has_aux=True)(y)
    return (f, aux), gradient


@_forward_gradient.def_bwd
def _forward_gradient_bwd(gradient, grad_out, perturbed, y, args, problem):
    del perturbed, y, args, problem
    g_value = grad_out[0]
    return jnp.zeros_like(gradient) if g_value is None else g_value * gradient


class ForwardProblem(eqx.Module):
    """The same objective whose gradient is taken in forward mode (one tangent per
    varied parameter), presented to the minimiser as a reverse-mode rule."""

    problem: _Problem

    def __call__(self, y, args):
        return _forward_gradient(y, args, self.problem)


class _Seek(eqx.Module):
    r"""The existence stage of [`hybrax.tune`][]: the residual
    $r(u, y) = \big(P(u; p(y)) - u,\ c_i/\tau_i\big)$ of the periodicity defect
    and the constraints (read on the open cycle from $u$), for
    `optimistix.LevenbergMarquardt` over the unknowns and the varied parameters
    together; NaN where the cycle fails (the solver's trust region then
    shrinks)."""

    problem: _Problem
    settings: Settings
    n_unknowns: int = eqx.field(static=True)

    def __call__(self, z, width):
        problem = self.problem
        u, y = z[: self.n_unknowns], z[self.n_unknowns :]
        params = problem.with_values(y)
        sequence, _ = resolve_sequence(problem.system, problem.section)
        state = problem.section.chart(u, params)
        sol, _ = cycle(
            problem.system, state, params, sequence, self.settings, dfx.ForwardMode()
        )
        ok = sol.result == RESULTS.successful
        u_next = problem.section.coordinates(sol.x_after[-1], params)
        defect = u_next - u
        # The cycle as an open orbit, for the constraints' quantities (those of
        # the multipliers are NaN: there is no periodic orbit yet).
        open_orbit = PeriodicOrbit(
            u=u,
            u_next=u_next,
            state=state,
            cycle=sol,
            phase_durations=sol.t_events
            - jnp.concatenate([jnp.zeros(1, z.dtype), sol.t_events[:-1]]),
            period=sol.t_events[-1],
            reduced_jacobian=jnp.full((u.shape[0],) * 2, jnp.nan, z.dtype),
            residual_norm=jnp.max(jnp.abs(defect)),
            n_steps=jnp.zeros((), jnp.int32),
            result=sol.result,
            restart=ShootingStart(u, safeguard=ShootingSafeguard.fresh(u)),
        )
        violations = [
            jnp.asarray(c(open_orbit, params), dtype=z.dtype) / (width * tol)
            for c, tol in zip(problem.constraints, problem.tolerances)
        ]
        residual = (
            jnp.concatenate([defect, jnp.stack(violations)]) if violations else defect
        )
        residual = masked_nan(residual, ok)
        aux = (jnp.max(jnp.abs(defect)), sol.result)
        return residual, jax.lax.stop_gradient(aux)


class TuneSettings(eqx.Module):
    r"""How [`hybrax.tune`][] minimises: the minimiser and its step limit, the
    derivative's mode, the weights of the penalised objective, and the existence
    stage. Checked where it is built (a `ValueError` naming the field).

    - `minimiser`: any `optimistix.AbstractMinimiser`; default
      `optimistix.BFGS(rtol=1e-8, atol=1e-8)`.
    - `max_steps`: the most evaluations, all stages together (default 100).
    - `mode`: `"auto"` (default), `"reverse"` or `"forward"`: the gradient's mode
      (see [`hybrax.tune`][]).
    - `stability_weight`: $w$, the weight of the stability penalty (default
      1e3; see [`hybrax.tune`][]).
    - `objective_scale`: $J_0$, a typical size of the objective, so that it
      weighs against the penalties whatever its units (default 1); `"start"`:
      its magnitude at the first orbit (after the existence stage). The
      history's and the result's `objective` are the minimised, scaled value.
    - `seek_steps`: where no orbit is found at the start, the most steps of an
      existence stage before the tuning (0: none; [`hybrax.tune`][] then raises
      a `ValueError`). It
      minimises $|P(u; p) - u|^2 + \sum_i (c_i/\tau_i)^2$ over the unknowns $u$
      and the varied parameters together by `optimistix.LevenbergMarquardt`
      (forward-mode Jacobians; the constraints read on the open cycle from $u$),
      and ends where the periodicity defect $\max|P(u) - u|$ is below
      `seek_tol` (default 0.1) and an orbit is found from there. A controller
      whose walker falls has no orbit to differentiate; this stage gives it one.
    """

    minimiser: optx.AbstractMinimiser | None = eqx.field(static=True, default=None)
    max_steps: int = eqx.field(static=True, default=100)
    mode: str = eqx.field(static=True, default="auto")
    stability_weight: float = eqx.field(static=True, default=1e3)
    objective_scale: float | Literal["start"] = eqx.field(static=True, default=1.0)
    seek_steps: int = eqx.field(static=True, default=0)
    seek_tol: float = eqx.field(static=True, default=0.1)

    def __check_init__(self):
        if self.mode not in ("auto", "reverse", "forward"):
            raise ValueError(
                f"`mode` must be 'auto', 'reverse' or 'forward'; got {self.mode!r}."
            )
        if isinstance(self.max_steps, bool) or int(self.max_steps) < 1:
            raise ValueError(
                f"`max_steps` must be a positive integer; got {self.max_steps}."
            )
        if not self.stability_weight >= 0:
            raise ValueError(
                f"`stability_weight` must be non-negative; got {self.stability_weight}."
            )
        scale = self.objective_scale
        if scale != "start" and not (
            isinstance(scale, int | float | np.floating)
            and not isinstance(scale, bool)
            and 0 < scale < math.inf
        ):
            raise ValueError(
                "`objective_scale` must be a positive number or 'start'; got "
                f"{scale!r}."
            )
        if isinstance(self.seek_steps, bool) or int(self.seek_steps) < 0:
            raise ValueError(f"`seek_steps` must be >= 0; got {self.seek_steps}.")
        if not self.seek_tol > 0:
            raise ValueError(f"`seek_tol` must be positive; got {self.seek_tol}.")
        if self.minimiser is not None and not isinstance(
            self.minimiser, optx.AbstractMinimiser
        ):
            raise ValueError(
                "`minimiser` must be an optimistix minimiser; got "
                f"{type(self.minimiser).__name__}."
            )


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
    (`TuneSettings(mode="reverse")`, one backward pass whatever the number of
    parameters) or in forward mode (`"forward"`, one tangent per parameter);
    `"auto"` (the default) takes forward
    for up to two parameters, reverse otherwise (the forward program compiles
    faster: tuning the hopper's `d_G, k`, 27 s against 35 s, with 0.7 s more
    run time).

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
    mode, max_steps, minimiser = how.mode, how.max_steps, how.minimiser
    seek_steps, seek_tol = how.seek_steps, how.seek_tol
    stability_weight, objective_scale = how.stability_weight, how.objective_scale
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
    if mode == "auto":
        mode = "forward" if len(vary) <= 2 else "reverse"
    settings = resolve_settings(settings)
    adjoint = (
        dfx.ForwardMode() if mode == "forward" else dfx.RecursiveCheckpointAdjoint()
    )
    settings = eqx.tree_at(
        lambda s: s.adjoint, settings, adjoint, is_leaf=lambda x: x is None
    )
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
        np.asarray(stability_weight, dtype=float),
        np.asarray(1.0 if objective_scale == "start" else objective_scale, float),
        settings,
        resolve_shooting(shooting),
    )
    fn = problem if mode == "reverse" else ForwardProblem(problem)
    if minimiser is None:
        minimiser = optx.BFGS(rtol=1e-8, atol=1e-8)

    # With `progress`, the compilations are announced before the first line.
    with announcing_progress(progress):
        y = jnp.asarray(start / scale)
        u = jnp.atleast_1d(jnp.asarray(u_guess, dtype=y.dtype))
        widths = (100.0, 10.0, 1.0) if constraints else (1.0,)
        began = time.perf_counter()
        # Widths as arrays of y's dtype everywhere (a weakly typed one would compile
        # `_value` again).
        first = _value(problem, y, (u, jnp.asarray(widths[0], y.dtype)))
        first_value, (_, (u_first, _, _, first_result, _, first_raw)) = first
        # The objective's output structure for the minimiser's state, read off
        # this evaluation (`jax.eval_shape` would trace the objective again, in
        # every process: seconds, where the compiled programs load from the cache).
        f_struct, aux_struct = jax.tree.map(
            lambda leaf: jax.ShapeDtypeStruct(jnp.shape(leaf), jnp.result_type(leaf)),
            first,
        )
        tags = frozenset()
        history: list[TuneStep] = []
        seek_run_time = 0.0
        sought = not math.isfinite(float(first_value)) and int(seek_steps) > 0
        if sought:
            y, u, first_value, u_first, first_result, seek_run_time = _seek(
                problem,
                settings,
                y,
                u,
                names,
                scale,
                int(seek_steps),
                float(seek_tol),
                widths[0],
                history,
                progress,
                callback,
            )
        if not math.isfinite(float(first_value)):
            raise ValueError(
                "no periodic orbit at the starting parameters from `u_guess` "
                f"({status_name(first_result)[0]}): give a guess that finds one"
                + (", or more `seek_steps`." if int(seek_steps) > 0 else ".")
            )
        u = u_first
        if objective_scale == "start":
            # The objective's own size at the first orbit: from the first
            # evaluation, or after the existence stage one warm evaluation more.
            # A run-time value: nothing compiles again.
            if sought:
                _, aux = _value(problem, y, (u, jnp.asarray(widths[0], y.dtype)))
                first_raw = _host(aux)[1][5]
            size = abs(float(first_raw))
            problem = eqx.tree_at(
                lambda p: p.objective_scale,
                problem,
                np.asarray(size if size > 0 and math.isfinite(size) else 1.0),
            )
            fn = problem if mode == "reverse" else ForwardProblem(problem)
        result_name = "max_steps_reached"
        broken = None
        # (The existence stage's steps after its first are run time too.)
        run_time = seek_run_time
        for stage, width in enumerate(widths):
            if broken is not None:
                break
            args = (u, jnp.asarray(width, y.dtype))
            state = minimiser_init(minimiser, fn, y, args, f_struct, aux_struct, tags)
            best = math.inf
            while len(history) < int(max_steps):
                t0 = time.perf_counter()
                y_next, state, aux = minimiser_step(minimiser, fn, y, args, state, tags)
                done, result = minimiser_terminate(
                    minimiser, fn, y_next, args, state, tags
                )
                f_value, (u_new, rho, multipliers, orbit_result, _, _) = _host(aux)
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
        final_params = problem.with_values(y)
        forward = eqx.tree_at(lambda s: s.adjoint, settings, dfx.ForwardMode())
        orbit = find_periodic_orbit(
            system,
            section,
            u,
            final_params,
            shooting=problem.shooting,
            settings=forward,
            analyse=False,
        )
        value = float(_value(problem, y, (u, jnp.asarray(widths[-1], y.dtype)))[0])
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
            mode=mode,
            problem=problem,
            rule=broken,
        )


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
    history,
    progress,
    callback,
):
    """The existence stage (see [`hybrax.tune`][]): Levenberg-Marquardt steps on
    [`hybrax._tune._Seek`][] until an orbit is found from a point whose
    periodicity defect is below `tol`. Returns `(y, u, value, u_orbit, result,
    run_time)`: the tuning's first evaluation there (NaN value if none was found)
    and the seconds of the steps after the first (run time, not compiling)."""
    seek = _Seek(
        problem,
        eqx.tree_at(lambda s: s.adjoint, settings, dfx.ForwardMode()),
        int(u.shape[0]),
    )
    solver = optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)
    z = jnp.concatenate([u, y])
    width = jnp.asarray(width, z.dtype)
    f_struct, aux_struct = jax.eval_shape(lambda: seek(z, width))
    state = minimiser_init(solver, seek, z, width, f_struct, aux_struct, frozenset())
    k = int(u.shape[0])
    value, u_orbit, result = jnp.asarray(jnp.nan), u, RESULTS.shooting_failed
    run_time = 0.0
    for index in range(max_steps):
        t0 = time.perf_counter()
        z_next, state, _ = minimiser_step(solver, seek, z, width, state, frozenset())
        residual, (defect, cycle_result) = jax.device_get(_seek_value(seek, z, width))
        found = False
        if float(defect) < tol:
            value, (_, (u_orbit, _, _, result, _, _)) = _value(
                problem, z[k:], (z[:k], width)
            )
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


@compiled("the orbit seek step")
def _seek_value(seek, z, width):
    return seek(z, width)


@compiled("the tuning start values")
def _batched_values(problem, y):
    return jax.vmap(problem.with_values)(y)


@compiled("the tuning values")
def _values_of(problem, orbits, params):
    def one(orbit, params_):
        return problem.value_of(orbit, params_, jnp.ones((), orbit.u.dtype))[0]

    return jax.vmap(one)(orbits, params)


def _host(aux):
    f, (u, rho, multipliers, result, violations, raw) = aux
    return (
        np.asarray(f),
        (
            np.asarray(u),
            np.asarray(rho),
            np.asarray(multipliers),
            result,
            np.asarray(violations),
            np.asarray(raw),
        ),
    )


@compiled("the tuning objective")
def _value(problem, y, args):
    return problem.evaluate(y, args)


@compiled("the tuning start")
def minimiser_init(minimiser, fn, y, args, f_struct, aux_struct, tags):
    """The minimiser's initial state (one compiled program, as optimistix's loop
    would build it; the host loop of `tune` and of the jumper's best jump steps
    it one evaluation at a time)."""
    return minimiser.init(fn, y, args, {}, f_struct, aux_struct, tags)


@compiled("the tuning step")
def minimiser_step(minimiser, fn, y, args, state, tags):
    """One step of the minimiser (compiled once per problem)."""
    return minimiser.step(fn, y, args, {}, state, tags)


@compiled("the tuning stop test")
def minimiser_terminate(minimiser, fn, y, args, state, tags):
    """The minimiser's stop test after a step (compiled once per problem)."""
    return minimiser.terminate(fn, y, args, {}, state, tags)


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
