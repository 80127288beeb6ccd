"""One phase: the mode's flow until its first armed guard crossing."""

from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jaxtyping import Array

from .._dips import PhaseStepController, fastest_rate
from .._hybrid import HybridSystem
from .._misc import trace_once
from .._settings import Settings
from .._solution import RESULTS
from .checks import _grazing, check_phase_start
from .fields import (
    _FAR,
    _GuardRate,
    _identity,
    _PhaseCondition,
    _PhaseField,
    _state_of_augmented,
)
from .observables import _event_observables, _phase_observables
from .tables import Tables


class PhaseOutcome(eqx.Module):
    """What one phase did (internal): its end and the event that ended it."""

    result: RESULTS
    cause: Array
    ran: Array  # the phase started (its start checks passed)
    event: Array  # an event fired (possibly grazing or out of sequence)
    t_event: Array
    x_minus: Array
    x_plus: Array
    extra_plus: Any
    extra_record: Any
    transition: Array
    next_mode: Array
    crossing_rate: Array
    guard_at_start: Array
    observables: dict
    t_phase: Array
    x_phase: Array
    phase_observables: dict


class PhaseSpec(NamedTuple):
    """What every phase of one event loop shares (internal; static): the
    augmentation carried beside the state (`None`: none), the samples to record
    per phase (`n_save`), the shapes of the event observables and the names of
    the phase observables to record, and whether to `diagnose` (see
    [`run_phase`][])."""

    augmentation: Any
    n_save: int
    observable_shapes: dict
    phase_keys: tuple[str, ...]
    diagnose: bool


class PhaseEntry(NamedTuple):
    """Where a phase starts (internal): its `mode` (traced, or the index known
    when tracing), time `t`, state `x` and the augmentation's state `extra`
    (`None` without one)."""

    mode: Any
    t: Array
    x: Array
    extra: Any


def run_phase(
    system: HybridSystem,
    spec: PhaseSpec,
    entry: PhaseEntry,
    params,
    settings: Settings,
    adjoint,
    *,
    static_mode: int | None,
    active,
    initial,
    expected: int | None = None,
) -> PhaseOutcome:
    """Run one phase from `entry`: start checks, one diffrax solve per
    stage (`_run_stages`), the event and its reset (`_reset`), the crossing's
    classification (`_classify_crossing`), the phase's status (`_phase_result`)
    and its records (`_samples`). `static_mode` is the mode where it is known
    when tracing (else `None`); `expected` the transition a declared sequence
    expects. Lanes with `active` false do no work (their solves run from `t` to
    `t`). With `spec.diagnose` false the checks (constraints and viability at
    the start, dips inside steps, grazing at the event) and the guards at the
    next start and crossing rates are skipped: for the inner iterations of a
    solver whose result a final diagnosed pass checks (under forward-mode AD the
    dip check makes a cycle much costlier, and all of it costs compile time)."""
    mode, t, x, extra = entry
    augmentation, n_save, observable_shapes, phase_keys, diagnose = spec
    tables = Tables(system, static_mode)
    augmented = augmentation is not None
    state_of = _state_of_augmented if augmented else _identity

    start = check_phase_start(tables, mode, t, x, params, settings, initial, diagnose)
    run = active & (start.result == RESULTS.successful)
    stages = _run_stages(
        system,
        tables,
        mode,
        t,
        x if not augmented else (x, extra),
        params,
        settings,
        adjoint,
        start.armed,
        run,
        augmentation=augmentation,
        dense=n_save > 0 or bool(phase_keys),
        detect_dips=diagnose and settings.dip_tol is not None,
    )
    x_minus = state_of(stages.y)
    t_event = stages.t
    k = expected if expected is not None else stages.fired
    x_plus, next_mode_value = _reset(system, k, t_event, x_minus, params)
    next_mode = jnp.asarray(next_mode_value, jnp.int32)
    extra_plus, extra_record = None, None
    if augmented:
        extra_plus, extra_record = augmentation.at_event(
            system, k, t_event, x_minus, stages.y[1], params
        )
    observables = _event_observables(
        system, observable_shapes, k, t_event, x_minus, x_plus, params
    )
    rate, grazing, guard_at_start = _classify_crossing(
        system,
        tables,
        mode,
        stages,
        t_event,
        x_minus,
        x_plus,
        params,
        settings.guard_tol,
        next_mode_value if isinstance(k, int) else None,
        next_mode,
        diagnose,
    )
    finite = jnp.all(jnp.isfinite(x_plus)) & jnp.isfinite(t_event)
    result, cause = _phase_result(system, start, stages, finite, grazing, expected)
    t_phase, x_phase, phase_obs = _samples(
        system,
        stages.solves,
        state_of,
        mode,
        static_mode,
        t,
        t_event,
        x,
        params,
        n_save,
        phase_keys,
    )
    return PhaseOutcome(
        result=result,
        cause=cause,
        ran=run,
        event=active & stages.hit & finite,
        t_event=t_event,
        x_minus=x_minus,
        x_plus=x_plus,
        extra_plus=extra_plus,
        extra_record=extra_record,
        transition=jnp.asarray(stages.fired, jnp.int32),
        next_mode=next_mode,
        crossing_rate=rate,
        guard_at_start=guard_at_start,
        observables=observables,
        t_phase=t_phase,
        x_phase=x_phase,
        phase_observables=phase_obs,
    )


class _Stages(eqx.Module):
    """Where the stages of a phase ended (internal): the state `y` (augmented with
    the variational part where asked) at time `t`, the transition `fired`,
    whether a real event was `hit`, why the stages failed where they did
    (`result`, `cause`), and each stage's solve with its time span (for the dense
    output)."""

    y: Any
    t: Array
    fired: Array
    hit: Array
    result: RESULTS
    cause: Array
    solves: list


def _stage_controller(settings, tables, augmented, detect_dips, state_of, start):
    """The step-size controller of a phase's solves: an adaptive one from the
    settings is wrapped, so that it controls the state alone (a variational part
    follows, unless `settings.control_tangents`), never takes steps the
    linearised flow cannot follow (the derivatives take the same steps), and,
    with `detect_dips`, catches guard dips inside a step. `start = (mode, t, x,
    params)`: where the phase starts, at which its linearised flow's fastest
    oscillation is estimated."""
    controller = settings.stepsize_controller
    if augmented and settings.control_tangents:
        state_of = _identity  # the variational part's error is controlled too
    if isinstance(controller, dfx.AbstractAdaptiveStepSizeController):
        mode, t, x, params = start
        scale = controller.atol + controller.rtol * jnp.abs(x)
        rate = fastest_rate(lambda z: tables.field(mode, t, z, params), x, scale)
        controller = PhaseStepController(
            controller,
            _GuardRate(tables, augmented) if detect_dips else None,
            state_of,
            settings.dip_tol if detect_dips else 0.0,
            rate,
        )
    return controller


def _run_stages(
    system,
    tables,
    mode,
    t,
    y,
    params,
    settings,
    adjoint,
    armed,
    run,
    *,
    augmentation,
    dense: bool,
    detect_dips: bool,
) -> _Stages:
    """The phase's flow, one diffrax solve per stage: a stage ends at the first
    crossing of an armed guard (the event) or of an arming surface (which arms its
    guard, and the next stage goes on), or fails (no event before `t_max`, a
    failed root find, a strict arming past its guard)."""
    tol = settings.guard_tol
    augmented = augmentation is not None
    state_of = _state_of_augmented if augmented else _identity
    t_end = jnp.asarray(settings.t_max, state_of(y).dtype)
    term = dfx.ODETerm(_PhaseField(tables, augmentation))
    event = dfx.Event(
        _PhaseCondition(tables, augmented),
        root_finder=settings.event_root_finder,
        direction=False,
    )
    start = (mode, t, state_of(y), params)
    controller = _stage_controller(
        settings, tables, augmented, detect_dips, state_of, start
    )
    finished = jnp.logical_not(run)
    fired = jnp.zeros((), jnp.int32)
    stage_result = RESULTS.successful
    stage_cause = jnp.asarray(-1, jnp.int32)
    # (Static: the arming check is traced only where a transition asks for it.)
    strict_arms = any(
        strict and tr.arm is not None
        for strict, tr in zip(system.strict_arming, system.transitions)
    )
    hit = jnp.zeros((), bool)
    t_cur = t
    solves = []
    for _ in range(tables.n_stages()):
        c_start = tables.condition(mode, t_cur, state_of(y), params, armed)
        on_surface = (c_start <= 0) & (c_start >= -tol)
        running = jnp.logical_not(finished)
        stage_args = (params, mode, armed, t_cur, on_surface, t_end)
        sol = dfx.diffeqsolve(
            term,
            settings.solver,
            # A lane with nothing left to do runs a solve of zero length.
            t0=jnp.where(running, t_cur, _FAR),
            t1=_FAR,
            dt0=None,
            y0=y,
            args=stage_args,
            saveat=dfx.SaveAt(t1=True, dense=dense),
            event=event,
            stepsize_controller=controller,
            max_steps=settings.max_steps,
            adjoint=adjoint,
            throw=False,
        )
        t_hit = sol.ts[-1]
        y_hit = jtu.tree_map(lambda a: a[-1], sol.ys)
        solves.append((sol, t_cur, t_hit))
        occurred = sol.result == dfx.RESULTS.event_occurred
        entries = tables.entries(
            mode, t_hit, jax.lax.stop_gradient(state_of(y_hit)), params, armed
        )
        j = jnp.argmin(entries).astype(jnp.int32) if entries.shape[0] else fired
        arming_event = jnp.logical_not(armed[j]) if entries.shape[0] else False
        root_find_failed = (sol.result == dfx.RESULTS.nonlinear_max_steps_reached) | (
            sol.result == dfx.RESULTS.nonlinear_divergence
        )
        # The horizon, not a guard, ended the stage (a guard at the same instant
        # wins).
        nearest_guard = jnp.min(entries) if entries.shape[0] else jnp.inf
        at_horizon = jax.lax.stop_gradient(t_end - t_hit) < nearest_guard
        occurred = occurred & jnp.logical_not(at_horizon)
        real_event = running & occurred & jnp.logical_not(arming_event)
        failed = running & jnp.logical_not(occurred)
        step_result = RESULTS.where(
            root_find_failed,
            RESULTS.event_location_failed,
            RESULTS.where(
                (sol.result == dfx.RESULTS.successful)
                | (sol.result == dfx.RESULTS.event_occurred),
                RESULTS.event_not_reached,
                RESULTS.promote(sol.result),
            ),
        )
        stage_result = RESULTS.where(failed, step_result, stage_result)
        if entries.shape[0]:
            arms_now = running & occurred & arming_event
            if strict_arms:
                # Armed with its guard already past the crossing: the crossing
                # came before the arming and would be missed (and, read through
                # the minimum of the entries, it would hide every other guard's
                # crossing).
                guards_now = tables.guards(
                    mode, t_hit, jax.lax.stop_gradient(state_of(y_hit)), params
                )
                strict = jnp.asarray(system.strict_arming)[j]
                missed = arms_now & strict & (guards_now[j] < -tol)
                stage_result = RESULTS.where(
                    missed, RESULTS.armed_beyond_guard, stage_result
                )
                stage_cause = jnp.where(missed, j, stage_cause)
                failed = failed | missed
            armed = jnp.where(arms_now, armed.at[j].set(True), armed)
        fired = jnp.where(real_event, j, fired)
        hit = hit | real_event
        t_cur = jnp.where(running, t_hit, t_cur)
        y = jtu.tree_map(lambda new, old: jnp.where(running, new, old), y_hit, y)
        finished = finished | real_event | failed
    stage_result = RESULTS.where(
        jnp.logical_not(finished), RESULTS.event_not_reached, stage_result
    )
    return _Stages(y, t_cur, fired, hit, stage_result, stage_cause, solves)


def _reset(system, k, t_event, x_minus, params):
    """The state after the event of transition `k` (an index known when tracing,
    or traced: then every reset is traced once and switched) and the next mode."""
    if isinstance(k, int):
        reset = trace_once(system.transitions[k].reset)
        return reset(t_event, x_minus, params), system.targets[k]
    resets = [trace_once(tr.reset) for tr in system.transitions]
    x_plus = jax.lax.switch(k, resets, t_event, x_minus, params)
    return x_plus, jnp.asarray(system.targets, jnp.int32)[k]


def _classify_crossing(
    system,
    tables,
    mode,
    stages,
    t_event,
    x_minus,
    x_plus,
    params,
    tol,
    static_next_mode,
    next_mode,
    diagnose: bool,
):
    """`(crossing rate, grazing, guard at the next start)` of the event (status
    only: no derivatives flow); NaN, False and NaN without `diagnose`."""
    dtype = x_minus.dtype
    if not diagnose:
        nan = jnp.full((), jnp.nan, dtype)
        return nan, jnp.zeros((), bool), nan
    t_s, x_s, p_s = jax.lax.stop_gradient((t_event, x_minus, params))
    _, h1, h2 = tables.guard_derivatives(mode, t_s, x_s, p_s)
    rate, curvature = h1[stages.fired], h2[stages.fired]
    grazing = stages.hit & _grazing(rate, curvature, tol)
    guard_at_start = Tables(system, static_next_mode).guard_at_start(
        next_mode, t_s, jax.lax.stop_gradient(x_plus), p_s
    )
    return rate, grazing, guard_at_start


def _phase_result(system, start, stages, finite, grazing, expected):
    """The phase's status and its cause (the transition concerned, or -1): the
    start's failure, else the event's class (terminal, non-finite, grazing, out
    of the expected sequence), else the stages' failure."""
    fired, hit = stages.fired, stages.hit
    # A terminal transition (a fall) ends the run whichever transition was due.
    if any(system.terminals):
        terminal = hit & jnp.asarray(system.terminals)[fired]
    else:
        terminal = jnp.zeros((), bool)
    in_sequence = jnp.asarray(True) if expected is None else fired == expected
    event_result = RESULTS.where(
        terminal,
        RESULTS.terminal_event,
        RESULTS.where(
            finite,
            RESULTS.where(
                grazing,
                RESULTS.grazing_event,
                RESULTS.where(
                    in_sequence, RESULTS.successful, RESULTS.wrong_event_sequence
                ),
            ),
            RESULTS.nonfinite_state,
        ),
    )
    result = RESULTS.where(
        start.result != RESULTS.successful,
        start.result,
        RESULTS.where(hit, event_result, stages.result),
    )
    cause = jnp.where(
        start.result != RESULTS.successful,
        start.cause,
        jnp.where(grazing | terminal, fired, stages.cause),
    ).astype(jnp.int32)
    return result, cause


def _samples(
    system,
    solves,
    state_of,
    mode,
    static_mode,
    t,
    t_event,
    x,
    params,
    n_save: int,
    phase_keys,
):
    """`(t_phase, x_phase, phase observables)` on the stages' dense output: `n_save`
    evenly spaced samples of the phase and the observables `phase_keys`."""
    dtype = x.dtype

    def within(s, t_a, t_b):
        # Not `jnp.clip`: at a tie (the phase's ends, where the observables'
        # grid starts and stops) its derivative splits between the arguments,
        # which halved the state's rate there.
        return jnp.where(s < t_a, t_a, jnp.where(s > t_b, t_b, s))

    def x_of(s):
        first, t_a, t_b = solves[0]
        value = state_of(first.evaluate(within(s, t_a, t_b)))
        for sol, t_a, t_b in solves[1:]:
            later = state_of(sol.evaluate(within(s, t_a, t_b)))
            value = jnp.where(s > t_a, later, value)
        return value

    if n_save > 0:
        grid = jnp.linspace(0.0, 1.0, n_save, dtype=dtype)
        t_phase = t + (t_event - t) * grid
        x_phase = jax.vmap(x_of)(t_phase)
    else:
        t_phase = jnp.zeros((0,), dtype)
        x_phase = jnp.zeros((0, x.shape[0]), dtype)
    phase_obs = (
        _phase_observables(
            system, phase_keys, mode, static_mode, t, t_event, x_of, params
        )
        if phase_keys
        else {}
    )
    return t_phase, x_phase, phase_obs
