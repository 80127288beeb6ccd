"""The event loop."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu

from .._hybrid import HybridSystem
from .._params import params_in_domain
from .._settings import Settings
from .._solution import RESULTS, HybridSolution
from .observables import _event_observable_shapes, phase_observable_keys
from .phase import PhaseEntry, PhaseSpec, run_phase


def _params_finite(params):
    flags = [
        jnp.all(jnp.isfinite(leaf))
        for leaf in jtu.tree_leaves(params)
        if eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.inexact)
    ]
    return jnp.all(jnp.stack(flags)) if flags else jnp.asarray(True)


def _loop_seed(x0, params):
    """Zero, with the tangents of `x0` and of the parameters when differentiated,
    and batched where they are.

    JAX differentiates (and batches) a loop by transforming its body until the set
    of carries with tangents (or batched) stops growing, transforming it again each
    time it grows. The event loop's time, mode, counters and Zeno history gain
    tangents, and a batch axis, only at its first event, so forward-mode AD
    through the scanned cycle had transformed the body three times; seeded with
    this zero, they hold them from the start and one pass suffices, and the AD
    monodromy traces faster. Zero also where an input is not finite (that run
    fails at its start).

    Its tangents are kept for forward mode only (`run_events(seed_tangents=True)`;
    otherwise the loop adds it under `lax.stop_gradient`, for the batch axis
    alone): in reverse mode through a loop seeded with tangents, XLA at
    `--xla_backend_optimization_level=0` with its classic emitters and
    multi-kernel loops (the test suite's fast-compile options) gave the bouncing
    ball's apex derivative 1.7e-6 off its closed form, exact at XLA's default
    level."""
    total = sum(
        jnp.sum(leaf)
        for leaf in [x0, *jtu.tree_leaves(params)]
        if eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.floating)
    )
    return jnp.where(jnp.isfinite(total), 0 * total, 0).astype(x0.dtype)


def run_events(
    system: HybridSystem,
    x0,
    params,
    settings: Settings,
    adjoint,
    *,
    mode0,
    t0,
    n_events: int | None = None,
    sequence: tuple[int, ...] | None = None,
    augmentation=None,
    extra0=None,
    n_save: int = 0,
    phase_observables: bool | str = True,
    diagnose: bool = True,
    seed_tangents: bool = False,
):
    """The one event loop: a `lax.scan` over one traced phase, for `n_events`
    phases with modes chosen at run time, or for the phases of a declared
    `sequence` of transitions (each phase must fire its declared transition). The
    modes' functions are selected by the mode index (`lax.switch`), so a cycle of
    k phases traces one diffrax solve, not k: the program's size barely grows
    with the number of phases, and simulation, shooting, the return maps and
    their derivatives all run this one body.
    Returns `(solution, extra, records)`: a [`hybrax.HybridSolution`][], the
    augmentation's state after the last event and what its `at_event` recorded at
    each event (`None` without an augmentation).

    An augmentation (internal; see `Variational` in the periodic layer) carries
    extra states through the phases: `field(f, t, (x, z))` is the augmented right
    side, `at_event(system, k, t, x_minus, z_minus, params)` returns
    `(z_plus, record)`. Step sizes are controlled on `x` alone.

    `seed_tangents`: the loop's time and history carry the tangents of `x0` and
    `params` from the start (see `_loop_seed`), for forward-mode AD through a
    scanned loop: one transformation of its body instead of three. Its carries
    are batched from the start wherever `x0` or `params` are (`jax.vmap`).

    It is one function because it is one loop body: every step reads and writes the same
    carry (time, state, mode, counters, Zeno watch, augmentation), traced once."""
    dtype = x0.dtype
    nan = jnp.full((), jnp.nan, dtype)
    t0 = jnp.asarray(t0, dtype)
    t_max = jnp.asarray(settings.t_max, dtype)
    observable_shapes = _event_observable_shapes(system, x0, params)
    phase_keys = phase_observable_keys(system, phase_observables)
    spec = PhaseSpec(augmentation, n_save, observable_shapes, phase_keys, diagnose)

    # The parameters' declared domain, for traced values (concrete ones were
    # checked when built; `eqx.tree_at` and a continuation's setter bypass that).
    result0 = RESULTS.where(
        _params_finite(params),
        RESULTS.where(
            params_in_domain(params),
            RESULTS.where(
                jnp.all(jnp.isfinite(x0)),
                RESULTS.where(
                    t_max > t0, RESULTS.successful, RESULTS.invalid_time_span
                ),
                RESULTS.nonfinite_state,
            ),
            RESULTS.parameters_out_of_domain,
        ),
        RESULTS.nonfinite_parameters,
    )
    zero = _loop_seed(x0, params)
    seed = zero if seed_tangents else jax.lax.stop_gradient(zero)
    index_zero = jax.lax.stop_gradient(zero).astype(jnp.int32)
    t, history, zeno_time = t0 + seed, jnp.full((3,), jnp.nan, dtype) + seed, nan + seed
    carry = dict(
        t=t,
        x=x0,
        extra=jtu.tree_map(lambda leaf: leaf + seed.astype(leaf.dtype), extra0),
        mode=jnp.asarray(mode0, jnp.int32) + index_zero,
        count=jnp.zeros((), jnp.int32) + index_zero,
        result=result0,
        done=result0 != RESULTS.successful,
        history=history,
        zeno_time=zeno_time,
        cause=jnp.asarray(-1, jnp.int32) + index_zero,
    )

    def step(carry, static_mode, mode, expected, initial):
        active = jnp.logical_not(carry["done"])
        phase = run_phase(
            system,
            spec,
            PhaseEntry(mode, carry["t"], carry["x"], carry["extra"]),
            params,
            settings,
            adjoint,
            static_mode=static_mode,
            active=active,
            initial=initial,
            expected=expected,
        )
        # Zeno: the mode cannot start again after events whose spacing shrinks.
        history = carry["history"]
        gap_before, gap_last = history[1] - history[0], history[2] - history[1]
        shrinking = (carry["count"] >= 3) & (gap_last < gap_before)
        zeno = (phase.result == RESULTS.mode_not_viable) & shrinking
        # Double `where`: the unused branch must not feed NaN (from the NaN-padded
        # history) into derivatives.
        safe_history = jnp.where(zeno, history, jnp.array([0.0, 2.0, 3.0], dtype))
        gap_before = safe_history[1] - safe_history[0]
        gap_last = safe_history[2] - safe_history[1]
        aitken = safe_history[2] - gap_last**2 / (gap_last - gap_before)
        zeno_time = jnp.where(zeno, aitken, carry["zeno_time"])
        phase_result = RESULTS.where(zeno, RESULTS.zeno, phase.result)

        accept = active & phase.event
        ok = phase_result == RESULTS.successful
        result = RESULTS.where(active, phase_result, carry["result"])
        count = carry["count"] + accept.astype(jnp.int32)
        done = carry["done"] | jnp.logical_not(ok)
        if n_events is not None:
            done = done | (count >= n_events)

        def keep(new, old):
            return jnp.where(accept, new, old)

        new_carry = dict(
            t=keep(phase.t_event, carry["t"]),
            x=keep(phase.x_plus, carry["x"]),
            extra=None
            if augmentation is None
            else jtu.tree_map(keep, phase.extra_plus, carry["extra"]),
            mode=keep(phase.next_mode, carry["mode"]),
            count=count,
            result=result,
            done=done,
            history=jnp.where(
                accept,
                jnp.concatenate([history[1:], phase.t_event[None]]),
                history,
            ),
            zeno_time=zeno_time,
            cause=jnp.where(active & ~ok, phase.cause, carry["cause"]),
        )

        def record(value, fill):
            return jnp.where(accept, value, fill)

        shown = active & phase.ran
        rec = dict(
            t=record(phase.t_event, nan),
            x_before=record(phase.x_minus, nan),
            x_after=record(phase.x_plus, nan),
            transition=record(phase.transition, -1),
            mode=record(mode, -1).astype(jnp.int32),
            observables={k: record(v, nan) for k, v in phase.observables.items()},
            crossing_rate=record(phase.crossing_rate, nan),
            guard_at_start=record(phase.guard_at_start, nan),
            t_phase=jnp.where(shown, phase.t_phase, nan),
            x_phase=jnp.where(shown, phase.x_phase, nan),
            phase_observables={
                k: record(v, nan) for k, v in phase.phase_observables.items()
            },
            augmentation=jtu.tree_map(lambda v: record(v, nan), phase.extra_record),
        )
        return new_carry, rec

    if sequence is None:
        if n_events is None or n_events < 1:
            raise ValueError("`n_events` must be a positive integer.")
        n_phases = n_events

        def phase(carry, index):
            return None, carry["mode"], None

    else:
        # Phase i's mode and transition are known from i alone (a lane that
        # fires another transition is done), so under `vmap` the dispatch on
        # them stays a conditional, not a `select` of every mode.
        n_phases = len(sequence)
        sources = tuple(system.sources[k] for k in sequence)
        static_mode = sources[0] if len(set(sources)) == 1 else None
        static_expected = sequence[0] if len(set(sequence)) == 1 else None
        modes = jnp.asarray(sources, jnp.int32)
        expected = jnp.asarray(sequence, jnp.int32)

        def phase(carry, index):
            return (
                static_mode,
                modes[index] if static_mode is None else static_mode,
                expected[index] if static_expected is None else static_expected,
            )

    def body(carry, index):
        return step(carry, *phase(carry, index), index == 0)

    carry, records = jax.lax.scan(body, carry, jnp.arange(n_phases))

    solution = HybridSolution(
        t_events=records["t"],
        x_before=records["x_before"],
        x_after=records["x_after"],
        transitions=records["transition"],
        modes=records["mode"],
        observables=records["observables"],
        crossing_rate=records["crossing_rate"],
        guard_at_start=records["guard_at_start"],
        t_phase=records["t_phase"],
        x_phase=records["x_phase"],
        phase_observables=records["phase_observables"],
        t_final=carry["t"],
        x_final=carry["x"],
        mode_final=carry["mode"],
        n_events=carry["count"],
        zeno_time=carry["zeno_time"],
        cause_transition=carry["cause"],
        result=carry["result"],
    )
    return solution, carry["extra"], records["augmentation"]
