r"""Event-driven simulation of a hybrid system on diffrax.

Each phase is one `diffrax.diffeqsolve` of the current mode's vector field, stopped by
a `diffrax.Event` whose condition is the smallest sign-normalised guard of the
transitions leaving that mode, so the earliest crossing wins whatever the order the
transitions are listed in. The event time is root-found on the dense interpolant
(optimistix Newton) and differentiated by the implicit function theorem, so Jacobians
of the state after $N$ events include the event-time sensitivity (the saltation
terms).
"""

import warnings

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Float, Int

from ._custom_types import ModeIndex, Params, RealScalarLike
from ._hybrid import HybridSystem, signed_guard


class RESULTS(dfx.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """Status codes of [`hybrax.simulate`][] and the orbit routines.

    Extends `diffrax.RESULTS` (whose `max_steps_reached` reports a step limit hit).
    """

    event_not_reached = (
        "No transition occurred before `t_max`: a guard was never reached. Increase "
        "`t_max` or check the initial state and parameters."
    )
    infeasible_initial_state = (
        "The initial state lies outside its mode: a guard of a transition leaving the "
        "initial mode is already past its crossing (e.g. a foot below the ground)."
    )
    nonfinite_state = "The state became non-finite (NaN or inf)."
    nonfinite_parameters = "The parameters contain NaN or inf."
    wrong_event_sequence = (
        "The cycle fired a different sequence of transitions than the section "
        "declares (e.g. a foot that never left the ground, or a missed event)."
    )
    shooting_failed = (
        "The shooting solve did not converge to a periodic orbit (residual above "
        "tolerance): no orbit was found from this guess, or none exists."
    )


class HybridSolution(eqx.Module):
    r"""The result of [`hybrax.simulate`][].

    Slots beyond the events that occurred are padded with NaN (times, states) or -1
    (indices), as diffrax pads unused save slots.

    - `t_events`, `x_before`, `x_after`: event times and the states just before and
      just after each reset, shape `(n_events,)` and `(n_events, n)`.
    - `transitions`: index of the transition fired at each event.
    - `modes`: the mode of each phase; phase `k` ends at event `k`.
    - `T_c`, `T_a`: energy lost and kept at each impact (NaN where the reset reports
      none).
    - `guard_at_start`: the smallest sign-normalised guard of each phase's mode right
      after its reset; negative means the phase started beyond one of its guards
      (for a ground phase: the contact force already pulls).
    - `t_phase`, `x_phase`: `n_save` samples of each phase, `(n_events, n_save)` and
      `(n_events, n_save, n)` (empty when `n_save=0`).
    - `t_final`, `x_final`, `mode_final`: where the simulation stopped.
    - `n_events`: how many events occurred; `result`: a [`hybrax.RESULTS`][].
    """

    t_events: Float[Array, " E"]
    x_before: Float[Array, "E n"]
    x_after: Float[Array, "E n"]
    transitions: Int[Array, " E"]
    modes: Int[Array, " E"]
    T_c: Float[Array, " E"]
    T_a: Float[Array, " E"]
    guard_at_start: Float[Array, " E"]
    t_phase: Float[Array, "E s"]
    x_phase: Float[Array, "E s n"]
    t_final: Float[Array, ""]
    x_final: Float[Array, " n"]
    mode_final: Int[Array, ""]
    n_events: Int[Array, ""]
    result: RESULTS

    @property
    def succeeded(self) -> Bool[Array, ""]:
        """Whether the simulation ran all requested events without failure."""
        return self.result == RESULTS.successful


def _default_solver():
    return dfx.Tsit5()


def _check_state(system: HybridSystem, x0) -> Array:
    x0 = jnp.asarray(x0)
    if x0.ndim != 1 or x0.shape[0] != system.n_states:
        raise ValueError(
            f"`x0` must have shape ({system.n_states},); got {tuple(x0.shape)}."
        )
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        x0 = x0.astype(float)
    return x0


def canonical_params(params):
    """Turn Python and NumPy float leaves of `params` into strongly typed JAX arrays
    of the default float dtype.

    `eqx.filter_jit` treats Python floats as static, so each new value would compile
    anew and no gradient could reach it; weak and strong types would also compile
    twice. Integer and boolean leaves are left alone (they may be static choices).
    """
    dtype = jnp.result_type(float)

    def convert(leaf):
        if isinstance(leaf, float | np.floating) or (
            isinstance(leaf, np.ndarray | jax.Array)
            and jnp.issubdtype(leaf.dtype, jnp.floating)
            and not isinstance(leaf, jax.core.Tracer)
        ):
            return jnp.asarray(leaf, dtype=dtype)
        return leaf

    return jax.tree_util.tree_map(convert, params)


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_float64(where: str) -> None:
    """Warn once per call site when JAX runs in float32: analysis needs float64."""
    if not jax.config.jax_enable_x64:
        warnings.warn(
            f"{where} runs in float32 because `jax_enable_x64` is off; event times, "
            "orbits and multipliers need float64. Call "
            "`jax.config.update('jax_enable_x64', True)` before using hybrax.",
            RuntimeWarning,
            stacklevel=3,
        )


def _mode_conds(system: HybridSystem):
    """One event condition per mode: min of its sign-normalised outgoing guards."""

    def make(mode):
        outgoing = system.outgoing(mode)

        def cond(t, y, params):
            if not outgoing:
                return jnp.ones((), y.dtype)
            values = [
                signed_guard(system.transitions[k], t, y, params) for k in outgoing
            ]
            return jnp.min(jnp.stack(values)).astype(y.dtype)

        return cond

    return [make(m) for m in range(len(system.modes))]


def _all_signed_guards(system: HybridSystem, t, y, params) -> Array:
    return jnp.stack(
        [signed_guard(tr, t, y, params).astype(y.dtype) for tr in system.transitions]
    )


def _energy_fns(system: HybridSystem):
    def make(transition):
        split = getattr(transition.reset, "energy_split", None)

        def energies(t, y, params):
            if split is None:
                nan = jnp.full((), jnp.nan, y.dtype)
                return nan, nan
            T_c, T_a = split(t, y, params)
            return jnp.asarray(T_c, y.dtype), jnp.asarray(T_a, y.dtype)

        return energies

    return [make(tr) for tr in system.transitions]


@eqx.filter_jit
def _simulate(
    system: HybridSystem,
    x0,
    params,
    mode0,
    t0,
    t_max,
    n_events: int,
    solver,
    stepsize_controller,
    root_finder,
    adjoint,
    max_steps,
    n_save: int,
    initial_guard_tol,
):
    dtype = x0.dtype
    tiny = jnp.finfo(dtype).tiny
    conds = _mode_conds(system)
    fields = [mode.vector_field for mode in system.modes]
    resets = [tr.reset for tr in system.transitions]
    energy_fns = _energy_fns(system)
    sources = jnp.asarray(system.sources, dtype=jnp.int32)
    targets = jnp.asarray(system.targets, dtype=jnp.int32)
    n_modes = len(system.modes)

    def mode_cond(t, y, mode, p):
        if n_modes == 1:
            return conds[0](t, y, p)
        return jax.lax.switch(mode, conds, t, y, p)

    def vector_field(t, y, args):
        mode, p, _ = args
        if n_modes == 1:
            return fields[0](t, y, p)
        return jax.lax.switch(mode, fields, t, y, p)

    def cond_fn(t, y, args, **kwargs):
        del kwargs
        mode, p, (t_start, on_surface) = args
        value = mode_cond(t, y, mode, p)
        return jnp.where(on_surface & (t <= t_start), tiny, value)

    event = dfx.Event(cond_fn, root_finder=root_finder, direction=False)
    term = dfx.ODETerm(vector_field)
    saveat = dfx.SaveAt(t1=True, dense=n_save > 0)

    params_finite = jnp.all(
        jnp.stack(
            [
                jnp.all(jnp.isfinite(leaf))
                for leaf in jax.tree_util.tree_leaves(params)
                if eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.inexact)
            ]
            or [jnp.array(True)]
        )
    )
    start_guard = mode_cond(t0, x0, mode0, params)
    result0 = RESULTS.where(
        params_finite,
        RESULTS.where(
            jnp.all(jnp.isfinite(x0)),
            RESULTS.where(
                start_guard >= -initial_guard_tol,
                RESULTS.successful,
                RESULTS.infeasible_initial_state,
            ),
            RESULTS.nonfinite_state,
        ),
        RESULTS.nonfinite_parameters,
    )

    def phase(carry, _):
        t, x, mode, count, result, done = carry
        t_end = jnp.where(done, t, t_max)
        # A phase that starts on its guard surface, or a rounding error past it
        # (z_L = -1e-17 after the previous root find), must still see that guard
        # positive at its start: diffrax only fires on a sign change from > 0 to <= 0,
        # and would otherwise miss the next crossing when one large step spans both
        # the rise and the return. The condition is therefore read as +tiny at the
        # phase's start time only; the surface itself is not moved.
        c0 = mode_cond(t, x, mode, params)
        on_surface = (c0 <= 0) & (c0 >= -initial_guard_tol)
        sol = dfx.diffeqsolve(
            term,
            solver,
            t0=t,
            t1=t_end,
            dt0=None,
            y0=x,
            args=(mode, params, (t, on_surface)),
            saveat=saveat,
            event=event,
            stepsize_controller=stepsize_controller,
            max_steps=max_steps,
            adjoint=adjoint,
            throw=False,
        )
        t_hit = sol.ts[-1]
        x_hit = sol.ys[-1]
        fired_event = sol.result == dfx.RESULTS.event_occurred
        guards = _all_signed_guards(system, t_hit, x_hit, params)
        guards = jnp.where(sources == mode, guards, jnp.inf)
        fired = jnp.argmin(guards).astype(jnp.int32)
        x_plus = jax.lax.switch(fired, resets, t_hit, x_hit, params)
        T_c, T_a = jax.lax.switch(fired, energy_fns, t_hit, x_hit, params)
        new_mode = targets[fired]
        next_guard = mode_cond(t_hit, x_plus, new_mode, params)

        phase_failed = jnp.logical_not(fired_event)
        step_result = RESULTS.where(
            sol.result == dfx.RESULTS.successful,
            RESULTS.event_not_reached,
            RESULTS.promote(sol.result),
        )
        finite = jnp.all(jnp.isfinite(x_plus)) & jnp.isfinite(t_hit)
        new_result = RESULTS.where(
            phase_failed,
            step_result,
            RESULTS.where(finite, RESULTS.successful, RESULTS.nonfinite_state),
        )
        ok = jnp.logical_not(phase_failed) & finite
        accept = jnp.logical_not(done) & ok
        result = RESULTS.where(done, result, new_result)
        count = count + accept.astype(count.dtype)
        new_done = done | jnp.logical_not(ok) | (count >= n_events)

        nan = jnp.full((), jnp.nan, dtype)
        record = dict(
            t=jnp.where(accept, t_hit, nan),
            x_before=jnp.where(accept, x_hit, nan),
            x_after=jnp.where(accept, x_plus, nan),
            transition=jnp.where(accept, fired, -1),
            mode=jnp.where(accept, mode, -1),
            T_c=jnp.where(accept, T_c, nan),
            T_a=jnp.where(accept, T_a, nan),
            guard=jnp.where(accept, next_guard, nan),
        )
        if n_save > 0:
            # Sample the phase on its own dense interpolant; a phase that ended in
            # failure is sampled up to where diffrax stopped.
            grid = jnp.linspace(0.0, 1.0, n_save, dtype=dtype)
            ts = t + (t_hit - t) * grid
            xs = jax.vmap(sol.evaluate)(ts)
            show = jnp.logical_not(done)
            record["ts"] = jnp.where(show, ts, nan)
            record["xs"] = jnp.where(show, xs, nan)
        t = jnp.where(accept, t_hit, t)
        x = jnp.where(accept, x_plus, x)
        mode = jnp.where(accept, new_mode, mode)
        return (t, x, mode, count, result, new_done), record

    carry0 = (
        jnp.asarray(t0, dtype),
        x0,
        jnp.asarray(mode0, jnp.int32),
        jnp.zeros((), jnp.int32),
        result0,
        result0 != RESULTS.successful,
    )
    (t, x, mode, count, result, _), rec = jax.lax.scan(
        phase, carry0, None, length=n_events
    )
    if n_save > 0:
        t_phase, x_phase = rec["ts"], rec["xs"]
    else:
        t_phase = jnp.zeros((n_events, 0), dtype)
        x_phase = jnp.zeros((n_events, 0, x0.shape[0]), dtype)
    return HybridSolution(
        t_events=rec["t"],
        x_before=rec["x_before"],
        x_after=rec["x_after"],
        transitions=rec["transition"],
        modes=rec["mode"],
        T_c=rec["T_c"],
        T_a=rec["T_a"],
        guard_at_start=rec["guard"],
        t_phase=t_phase,
        x_phase=x_phase,
        t_final=t,
        x_final=x,
        mode_final=mode,
        n_events=count,
        result=result,
    )


def _variational_field(field):
    r"""The vector field of $(x, \Phi)$: $(f(t, x), f_x(t, x)\Phi)$."""

    def augmented(t, y, args):
        x, Phi = y
        p = args[0]
        fx, jvp_fn = jax.linearize(lambda z: field(t, z, p), x)
        return fx, jax.vmap(jvp_fn, in_axes=1, out_axes=1)(Phi)

    return augmented


def _on_state(cond_fn):
    def cond(t, y, args, **kwargs):
        return cond_fn(t, y[0], args, **kwargs)

    return cond


def _start_guarded_cond(cond, tiny):
    """Event condition that reads as +tiny at the phase's start time when the phase
    starts on its guard surface (see `_simulate`)."""

    def cond_fn(t, y, args, **kwargs):
        del kwargs
        p, (t_start, flag) = args
        return jnp.where(flag & (t <= t_start), tiny, cond(t, y, p))

    return cond_fn


@eqx.filter_jit
def _simulate_sequence(
    system: HybridSystem,
    x0,
    params,
    t0,
    t_max,
    sequence: tuple[int, ...],
    solver,
    stepsize_controller,
    root_finder,
    adjoint,
    max_steps,
    initial_guard_tol,
    variational: bool = False,
):
    from ._saltation import saltation_parts

    r"""Like `_simulate`, for a static, known sequence of transitions: every phase's
    mode is known at trace time, so each phase solves its own mode's vector field
    with its own guards (no `lax.switch` in the right-hand side). Used by the orbit
    routines, whose cycle is declared by the Poincaré section.

    With `variational=True` each phase also integrates the first variational
    equation $\dot\Phi = f_x\Phi$ (Zana et al. 2018 eq. 35; step size controlled
    on the state alone) and applies the saltation matrix at each event, and the
    function returns `(solution, monodromy, dt_dx0)`: the fixed-duration flow
    Jacobian $\tilde\Phi = S_N\Phi_N\cdots S_1\Phi_1$ and the gradient of the last
    event time, $\partial t_e/\partial x_0 = -h_x\Phi^- / (h_x f^- + h_t)$."""
    dtype = x0.dtype
    tiny = jnp.finfo(dtype).tiny
    nan = jnp.full((), jnp.nan, dtype)
    conds = _mode_conds(system)
    energy_fns = _energy_fns(system)
    t = jnp.asarray(t0, dtype)
    x = x0
    Phi = jnp.eye(x0.shape[0], dtype=dtype)
    dt_dx0 = jnp.zeros(x0.shape, dtype)
    result = RESULTS.successful
    records = []
    if variational:
        # Control the step size on the state alone: the variational part follows.
        stepsize_controller = eqx.tree_at(
            lambda c: c.norm,
            stepsize_controller,
            lambda y: optx.rms_norm(y[0]),
        )
    for index, k in enumerate(sequence):
        mode = system.sources[k]
        field = system.modes[mode].vector_field
        cond = conds[mode]
        outgoing = system.outgoing(mode)
        c0 = cond(t, x, params)
        if index == 0:
            result = RESULTS.where(
                c0 >= -initial_guard_tol, result, RESULTS.infeasible_initial_state
            )
        on_surface = (c0 <= 0) & (c0 >= -initial_guard_tol)

        cond_fn = _start_guarded_cond(cond, tiny)
        if variational:
            term = dfx.ODETerm(_variational_field(field))
            cond_fn = _on_state(cond_fn)
            y0 = (x, Phi)
        else:
            term = dfx.ODETerm(lambda t_, y, args, field=field: field(t_, y, args[0]))
            y0 = x

        sol = dfx.diffeqsolve(
            term,
            solver,
            t0=t,
            t1=t_max,
            dt0=None,
            y0=y0,
            args=(params, (t, on_surface)),
            saveat=dfx.SaveAt(t1=True),
            event=dfx.Event(cond_fn, root_finder=root_finder, direction=False),
            stepsize_controller=stepsize_controller,
            max_steps=max_steps,
            adjoint=adjoint,
            throw=False,
        )
        if variational:
            t_hit = sol.ts[-1]
            x_hit, Phi_minus = sol.ys[0][-1], sol.ys[1][-1]
            S, h_x, h_t, f_minus = saltation_parts(system, k, t_hit, x_hit, params)
            dt_dx0 = -(h_x @ Phi_minus) / (h_x @ f_minus + h_t)
            Phi = S @ Phi_minus
        else:
            t_hit, x_hit = sol.ts[-1], sol.ys[-1]
        if len(outgoing) > 1:
            values = jnp.stack(
                [
                    signed_guard(system.transitions[j], t_hit, x_hit, params)
                    for j in outgoing
                ]
            )
            fired_right = jnp.asarray(outgoing)[jnp.argmin(values)] == k
        else:
            fired_right = jnp.asarray(True)
        x_plus = system.transitions[k].reset(t_hit, x_hit, params)
        T_c, T_a = energy_fns[k](t_hit, x_hit, params)
        next_mode = system.targets[k]
        next_guard = conds[next_mode](t_hit, x_plus, params)
        phase_result = RESULTS.where(
            sol.result == dfx.RESULTS.event_occurred,
            RESULTS.where(
                fired_right,
                RESULTS.where(
                    jnp.all(jnp.isfinite(x_plus)),
                    RESULTS.successful,
                    RESULTS.nonfinite_state,
                ),
                RESULTS.wrong_event_sequence,
            ),
            RESULTS.where(
                sol.result == dfx.RESULTS.successful,
                RESULTS.event_not_reached,
                RESULTS.promote(sol.result),
            ),
        )
        result = RESULTS.where(result == RESULTS.successful, phase_result, result)
        records.append((t_hit, x_hit, x_plus, k, mode, T_c, T_a, next_guard))
        t, x = t_hit, x_plus
    ok = result == RESULTS.successful
    stack = [jnp.stack(list(r)) for r in zip(*records)]

    def mask(a):
        return jnp.where(ok, a, nan) if jnp.issubdtype(a.dtype, jnp.floating) else a

    n = x0.shape[0]
    solution = HybridSolution(
        t_events=mask(stack[0]),
        x_before=mask(stack[1]),
        x_after=mask(stack[2]),
        transitions=stack[3].astype(jnp.int32),
        modes=stack[4].astype(jnp.int32),
        T_c=mask(stack[5]),
        T_a=mask(stack[6]),
        guard_at_start=mask(stack[7]),
        t_phase=jnp.zeros((len(sequence), 0), dtype),
        x_phase=jnp.zeros((len(sequence), 0, n), dtype),
        t_final=mask(t),
        x_final=mask(x),
        mode_final=jnp.asarray(system.targets[sequence[-1]], jnp.int32),
        n_events=jnp.where(ok, len(sequence), 0).astype(jnp.int32),
        result=result,
    )
    if variational:
        return solution, jnp.where(ok, Phi, nan), jnp.where(ok, dt_dx0, nan)
    return solution


def simulate(
    system: HybridSystem,
    x0: Float[Array, " n"],
    params: Params,
    *,
    n_events: int,
    t_max: RealScalarLike,
    mode0: ModeIndex | str = 0,
    t0: RealScalarLike = 0.0,
    solver: dfx.AbstractAdaptiveSolver | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    stepsize_controller: dfx.AbstractStepSizeController | None = None,
    root_finder: optx.AbstractRootFinder | None = None,
    adjoint: dfx.AbstractAdjoint | None = None,
    max_steps: int = 4096,
    n_save: int = 0,
    initial_guard_tol: float = 1e-9,
    throw: bool = False,
) -> HybridSolution:
    r"""Simulate a hybrid system through `n_events` transitions.

    Each phase integrates $\dot x = f_{m}(t, x, p)$ of the current mode $m$ with
    diffrax until the earliest guard crossing among the transitions leaving $m$; the
    crossing time is root-found (not stepped over), the reset $x^+ = g(t, x^-, p)$ is
    applied and the target mode starts. The run succeeds when `n_events` events occur
    before `t_max`.

    Works under `jax.jit`, `jax.vmap` and autodiff. For `jax.jacfwd`/`jax.jvp` pass
    `adjoint=diffrax.ForwardMode()`; the default `RecursiveCheckpointAdjoint` serves
    reverse mode (`jax.grad`). Event times are differentiated by the implicit function
    theorem, so derivatives include the saltation terms (Leine 2000; Hiskens & Pai
    2000).

    **Arguments:**

    - `system`: a [`hybrax.HybridSystem`][].
    - `x0`: the initial state, shape `(system.n_states,)`.
    - `params`: the parameter PyTree passed to every vector field, guard and reset.
    - `n_events`: how many transitions to run (static: it fixes output shapes).
    - `t_max`: give up (status `event_not_reached`) if the events are not done by then.
    - `mode0`: the initial mode (index or name).
    - `t0`: the initial time.
    - `solver`: a diffrax adaptive solver; default `Tsit5` (its dense output is as
      accurate as its steps, which the event root-finding relies on).
    - `rtol`, `atol`: tolerances of the default `PIDController`.
    - `stepsize_controller`: overrides the default `PIDController(rtol, atol)`.
    - `root_finder`: event root finder; default `optimistix.Newton(1e-12, 1e-12)`.
    - `adjoint`: a diffrax adjoint (see above).
    - `max_steps`: step limit per phase; hitting it gives status `max_steps_reached`.
    - `n_save`: samples per phase kept for plotting (0 keeps none).
    - `initial_guard_tol`: how far past a guard the initial state may lie before the
      status is `infeasible_initial_state`.
    - `throw`: raise on failure instead of returning the status (not under `vmap`).

    **Returns:** a [`hybrax.HybridSolution`][].

    **Raises:** `ValueError` for a state of the wrong shape or bad static arguments;
    with `throw=True`, an error carrying the failure message.
    """
    x0 = _check_state(system, x0)
    if int(n_events) < 1:
        raise ValueError(f"`n_events` must be a positive integer; got {n_events}.")
    if int(n_save) < 0:
        raise ValueError(f"`n_save` must be non-negative; got {n_save}.")
    if int(max_steps) < 1:
        raise ValueError(f"`max_steps` must be a positive integer; got {max_steps}.")
    if _is_concrete(t_max) and _is_concrete(t0) and not float(t_max) > float(t0):
        raise ValueError(f"`t_max` must exceed `t0`; got t0={t0}, t_max={t_max}.")
    mode0 = system.mode_index(mode0) if isinstance(mode0, str | int) else mode0
    if solver is None:
        solver = _default_solver()
    if stepsize_controller is None:
        stepsize_controller = dfx.PIDController(rtol=rtol, atol=atol)
    if root_finder is None:
        root_finder = optx.Newton(rtol=1e-12, atol=1e-12)
    if adjoint is None:
        adjoint = dfx.RecursiveCheckpointAdjoint()
    dtype = jnp.result_type(float)
    solution = _simulate(
        system,
        x0.astype(dtype),
        canonical_params(params),
        mode0,
        jnp.asarray(t0, dtype),
        jnp.asarray(t_max, dtype),
        int(n_events),
        solver,
        stepsize_controller,
        root_finder,
        adjoint,
        int(max_steps),
        int(n_save),
        initial_guard_tol,
    )
    if throw:
        solution = eqx.tree_at(
            lambda s: s.x_final,
            solution,
            solution.result.error_if(
                solution.x_final, solution.result != RESULTS.successful
            ),
        )
    return solution


def status_message(result) -> list[str]:
    """Human-readable messages of a (possibly batched) [`hybrax.RESULTS`][]: one per
    element, `"successful"` for success."""
    codes = np.atleast_1d(np.asarray(result._value))
    messages = RESULTS._index_to_message
    names = {int(item._value): name for name, item in RESULTS._name_to_item.items()}
    return [messages[int(c)] or names[int(c)] for c in codes]


def status_name(result) -> list[str]:
    """Names (e.g. `"event_not_reached"`) of a (possibly batched) status."""
    codes = np.atleast_1d(np.asarray(result._value))
    names = {int(item._value): name for name, item in RESULTS._name_to_item.items()}
    return [names[int(c)] for c in codes]
