r"""The event engine: one phase primitive, one event loop, and `simulate`.

A phase integrates the current mode's vector field with one `diffrax.diffeqsolve`
per stage, stopped by a `diffrax.Event` whose condition is the smallest
sign-normalised guard of the armed transitions leaving the mode (so the earliest
crossing wins whatever order the transitions are listed in), or the arming
condition of a transition not yet armed (an arming instant ends a stage and the
next stage continues the phase). Event times are root-found on the dense
interpolant (optimistix) and differentiated by the implicit function theorem, so
Jacobians of the state after $N$ events include the event-time sensitivity (the
saltation terms).

Before a phase runs, its start is checked: the mode's constraints, a start beyond a
guard, and viability (a guard at zero that the flow leaves at once, read off its
first two time derivatives $\dot h$, $\ddot h$ along the flow); during the phase a
step-size controller catches guard dips inside one step; at each event the
crossing is classified transversal or grazing. The same phase primitive serves the
general loop (`lax.scan` over events, modes chosen at run time) and the declared
event sequence of a periodic orbit (a `lax.scan` whose phase i has the sequence's
i-th mode, or a Python loop over static modes).
"""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array, Float

from ._custom_types import ModeIndex, Params
from ._dips import DipDetectingController, hermite_minimum
from ._hybrid import HybridSystem, Integral, signed_guard
from ._misc import canonical_params, is_concrete, trace_once
from ._programs import compiled, system_label
from ._settings import Settings, resolve_settings
from ._solution import RESULTS, HybridSolution


# ---------------------------------------------------------------------------
# The functions of a mode
# ---------------------------------------------------------------------------


class Tables(eqx.Module):
    """The vector field, guards, arming conditions and constraints of the mode
    `mode` of `system`, as functions of `(mode, t, x, params)`: with `static_mode`
    set, that mode's own functions (the `mode` argument is ignored); otherwise a
    `lax.switch` on the traced `mode`. Guard vectors have one entry per transition
    of the system, `+inf` for transitions that do not leave the mode."""

    system: HybridSystem
    static_mode: int | None = eqx.field(static=True)

    def _dispatch(self, per_mode, mode, *operands):
        if self.static_mode is not None:
            return per_mode[self.static_mode](*operands)
        if len(per_mode) == 1:
            return per_mode[0](*operands)
        return jax.lax.switch(mode, per_mode, *operands)

    @property
    def n_transitions(self) -> int:
        return len(self.system.transitions)

    def field(self, mode, t, x, params):
        per_mode = [trace_once(m.vector_field) for m in self.system.modes]
        return self._dispatch(per_mode, mode, t, x, params)

    def guards(self, mode, t, x, params) -> Float[Array, " T"]:
        """Sign-normalised guards (positive inside the mode)."""

        def make(m):
            def guards_of(t, x, params):
                inf = jnp.full((), jnp.inf, x.dtype)
                values = [
                    signed_guard(tr, t, x, params).astype(x.dtype)
                    if self.system.sources[j] == m
                    else inf
                    for j, tr in enumerate(self.system.transitions)
                ]
                return jnp.stack(values) if values else jnp.zeros((0,), x.dtype)

            return guards_of

        per_mode = [make(m) for m in range(len(self.system.modes))]
        return self._dispatch(per_mode, mode, t, x, params)

    def arming(self, mode, t, x, params) -> Float[Array, " T"]:
        """Arming values ($> 0$: armed); `+inf` for transitions without one."""

        def make(m):
            def arming_of(t, x, params):
                inf = jnp.full((), jnp.inf, x.dtype)
                values = [
                    jnp.asarray(trace_once(tr.arm)(t, x, params)).astype(x.dtype)
                    if self.system.sources[j] == m and tr.arm is not None
                    else inf
                    for j, tr in enumerate(self.system.transitions)
                ]
                return jnp.stack(values) if values else jnp.zeros((0,), x.dtype)

            return arming_of

        per_mode = [make(m) for m in range(len(self.system.modes))]
        return self._dispatch(per_mode, mode, t, x, params)

    def entries(self, mode, t, x, params, armed):
        """Event-condition entries: the guard of an armed transition, minus the
        arming value of one not yet armed (it fires when it becomes armed)."""
        return jnp.where(
            armed,
            self.guards(mode, t, x, params),
            -self.arming(mode, t, x, params),
        )

    def condition(self, mode, t, x, params, armed):
        entries = self.entries(mode, t, x, params, armed)
        if entries.shape[0] == 0:
            return jnp.ones((), x.dtype)
        return jnp.min(entries)

    def violation(self, mode, t, x, params):
        """$\\max|c(t, x)|$ of the mode's constraints (0 without constraints)."""

        def make(m):
            constraints = self.system.modes[m].constraints

            def violation_of(t, x, params):
                if constraints is None:
                    return jnp.zeros((), x.dtype)
                c = jnp.atleast_1d(jnp.asarray(constraints(t, x, params)))
                return jnp.max(jnp.abs(c)).astype(x.dtype)

            return violation_of

        per_mode = [make(m) for m in range(len(self.system.modes))]
        return self._dispatch(per_mode, mode, t, x, params)

    def domain(self, mode, t, x, params):
        """The smallest of the mode's `domain` conditions (`+inf` without any):
        positive inside the mode."""

        def make(m):
            conditions = tuple(self.system.modes[m].domain.values())

            def domain_of(t, x, params):
                if not conditions:
                    return jnp.full((), jnp.inf, x.dtype)
                values = [jnp.asarray(d(t, x, params)) for d in conditions]
                return jnp.min(jnp.stack(values)).astype(x.dtype)

            return domain_of

        if not any(mode.domain for mode in self.system.modes):
            return jnp.full((), jnp.inf, x.dtype)
        per_mode = [make(m) for m in range(len(self.system.modes))]
        return self._dispatch(per_mode, mode, t, x, params)

    def guard_derivatives(self, mode, t, x, params):
        r"""The guards and their first two time derivatives along the flow,
        $(h, \dot h, \ddot h)$, each of shape `(T,)`."""

        def along_flow(fn):
            def derivative(t, x):
                f = self.field(mode, t, x, params)
                return jax.jvp(fn, (t, x), (jnp.ones_like(t), f))[1]

            return derivative

        def h0(t, x):
            return self.guards(mode, t, x, params)

        h1 = along_flow(h0)
        h2 = along_flow(h1)
        return h0(t, x), h1(t, x), h2(t, x)

    def n_stages(self) -> int:
        """Stages of a phase: one, plus one per transition with an arming
        condition leaving the mode (the most over all modes when traced)."""

        def arms(m):
            return sum(
                1
                for j, tr in enumerate(self.system.transitions)
                if self.system.sources[j] == m and tr.arm is not None
            )

        if self.static_mode is not None:
            return 1 + arms(self.static_mode)
        return 1 + max(arms(m) for m in range(len(self.system.modes)))


# ---------------------------------------------------------------------------
# The pieces handed to diffrax
# ---------------------------------------------------------------------------


def _state_of_augmented(y):
    return y[0]


def _identity(y):
    return y


class _PhaseField(eqx.Module):
    """The right-hand side of one phase; `args = (params, mode, armed, t_start,
    on_surface)`. With an augmentation, `y = (x, extra)`."""

    tables: Tables
    augmentation: Any

    def __call__(self, t, y, args):
        params, mode = args[0], args[1]

        def field(t_, x_):
            return self.tables.field(mode, t_, x_, params)

        if self.augmentation is None:
            return field(t, y)
        return self.augmentation.field(field, t, y)


# The `t1` of every phase's solve: a constant, beyond any horizon. The horizon
# (`Settings.t_max`, a run-time value) is an entry of the event condition
# instead, and a lane with nothing left to do starts its solve at `t1`. diffrax
# rounds a traced `t1` down by 100 ULPs, one `nextafter` after another, in every
# solve: 600 operations of each solve's program, and 1.8 s of the analysed
# hopper orbit's 9.1 s compile (trace 0.3 s, XLA 1.5 s).
_FAR = 1e30


class _PhaseCondition(eqx.Module):
    """The event condition of one stage: the smallest entry of the mode's guards
    (see `Tables.entries`) and of the horizon, $t_\text{end} - t$. A phase that
    starts on its guard surface, or a rounding error past it (a foot at -1e-17 m
    after the previous root find), must still see that guard positive at its
    start: diffrax only fires on a sign change from > 0 to <= 0, and would
    otherwise miss the next crossing when one large step spans both the rise and
    the return. The condition is therefore read as +tiny at the stage's start
    time only; the surface itself is not moved."""

    tables: Tables
    augmented: bool = eqx.field(static=True)

    def __call__(self, t, y, args, **kwargs):
        del kwargs
        params, mode, armed, t_start, on_surface, horizon = args
        x = y[0] if self.augmented else y
        value = jnp.minimum(
            self.tables.condition(mode, t, x, params, armed),
            (horizon - t).astype(x.dtype),
        )
        tiny = jnp.finfo(value.dtype).tiny
        return jnp.where(on_surface & (t <= t_start), tiny, value)


class _GuardRate(eqx.Module):
    """The stage's event-condition entries and their rates along the flow, for
    the dip detecting step-size controller."""

    tables: Tables
    augmented: bool = eqx.field(static=True)

    def __call__(self, t, y, args):
        params, mode, armed = args[0], args[1], args[2]
        x = y[0] if self.augmented else y
        f = self.tables.field(mode, t, x, params)
        return jax.jvp(
            lambda s, z: self.tables.entries(mode, s, z, params, armed),
            (t, x),
            (jnp.ones_like(t), f),
        )


# ---------------------------------------------------------------------------
# Observables
# ---------------------------------------------------------------------------


def _event_observable_shapes(system: HybridSystem, x, params):
    """Keys and shapes of the union of the transitions' event observables; a
    `ValueError` if two transitions disagree on a key's shape."""
    shapes: dict[str, tuple[int, ...]] = {}
    t = jnp.zeros((), x.dtype)
    for tr in system.transitions:
        if tr.observe is None:
            continue
        out = jax.eval_shape(tr.observe, t, x, x, params)
        if not isinstance(out, dict):
            raise ValueError(
                f"`observe` of transition {tr.name!r} must return a dict of arrays; "
                f"got {type(out).__name__}."
            )
        for key, value in out.items():
            shape = tuple(jnp.shape(value))
            if shapes.setdefault(key, shape) != shape:
                raise ValueError(
                    f"Event observable {key!r} has shape {shape} for transition "
                    f"{tr.name!r} but {shapes[key]} for another transition."
                )
    return shapes


def _event_observables(system, shapes, k, t, x_minus, x_plus, params):
    """The observables of transition `k` (static int or traced), every key of
    `shapes` present (NaN where transition `k` does not define it)."""
    dtype = x_minus.dtype

    def make(j):
        observe = system.transitions[j].observe

        def observables_of(t, x_minus, x_plus, params):
            values = {} if observe is None else observe(t, x_minus, x_plus, params)
            return {
                key: jnp.asarray(values[key]).astype(dtype)
                if key in values
                else jnp.full(shape, jnp.nan, dtype)
                for key, shape in shapes.items()
            }

        return observables_of

    if not shapes:
        return {}
    if isinstance(k, int):
        return make(k)(t, x_minus, x_plus, params)
    per_transition = [make(j) for j in range(len(system.transitions))]
    return jax.lax.switch(k, per_transition, t, x_minus, x_plus, params)


def _phase_observable_keys(system: HybridSystem) -> tuple[str, ...]:
    keys: list[str] = []
    for mode in system.modes:
        keys.extend(k for k in mode.observables if k not in keys)
    return tuple(keys)


# Gauss-Legendre's 4 nodes on [0, 1] and their weights (exact for degree 7).
_GAUSS_NODES = 0.5 + 0.5 * np.array(
    [-0.8611363115940526, -0.3399810435848563, 0.3399810435848563, 0.8611363115940526]
)
_GAUSS_WEIGHTS = 0.5 * np.array(
    [0.3478548451374538, 0.6521451548625461, 0.6521451548625461, 0.3478548451374538]
)


def _integral(integral, t_start, t_end, x_of, params, dtype):
    r"""$\int_{t_{start}}^{t_{end}} g\,dt$ along `x_of` by composite
    Gauss-Legendre quadrature, `n_panels` panels of 4 nodes (error $O(h^8)$ in the
    panel width for a smooth $g$); differentiable, its ends included."""
    panels = jnp.linspace(0.0, 1.0, integral.n_panels + 1, dtype=dtype)
    width = (t_end - t_start) * (panels[1] - panels[0])
    nodes = panels[:-1, None] + (panels[1] - panels[0]) * _GAUSS_NODES[None, :]
    times = (t_start + (t_end - t_start) * nodes).reshape(-1)

    def value(t):
        return jnp.asarray(integral.function(t, x_of(t), params)).astype(dtype)

    values = jax.vmap(value)(times).reshape(nodes.shape)
    return width * jnp.sum(values @ jnp.asarray(_GAUSS_WEIGHTS, dtype))


def _extrema(extrema, t_start, t_end, x_of, params, dtype):
    r"""The largest (or smallest) values of the `extrema` over
    $[t_{start}, t_{end}]$ along `x_of`: on a grid of `n_grid` times, $g$ and its
    time derivative along the dense output; between each pair of grid points the
    cubic Hermite interpolant through both, maximised in closed form (the same
    cubic as the dip detection). Its error is $O(h^4)$ in the grid spacing $h$
    (1e-10 for a hopper flight at the default 256 points) and it is
    differentiable: no iterative solver, and at an interior extremum the value's
    derivative is that of $g$ at fixed time (envelope theorem)."""
    n_grid = max(e.n_grid for e in extrema)
    grid = t_start + (t_end - t_start) * jnp.linspace(0.0, 1.0, n_grid)
    # The states and their rates on the grid, once for all the mode's extrema.
    xs, rates = jax.vmap(lambda t: jax.jvp(x_of, (t,), (jnp.ones_like(t),)))(grid)
    step = grid[1:] - grid[:-1]
    values = []
    for e in extrema:
        sign = 1.0 if e.kind == "max" else -1.0

        def value_and_rate(t, x, xdot, e=e):
            return jax.jvp(
                lambda s, z: (
                    -sign * jnp.asarray(e.function(s, z, params)).astype(dtype)
                ),
                (t, x),
                (jnp.ones_like(t), xdot),
            )

        g, g_rate = jax.vmap(value_and_rate)(grid, xs, rates)
        lowest, _ = jax.vmap(hermite_minimum)(
            g[:-1], g_rate[:-1], g[1:], g_rate[1:], step
        )
        lowest = jnp.where(jnp.isnan(lowest), jnp.inf, lowest)
        values.append(-sign * jnp.min(lowest))
    return jnp.stack(values)


def _phase_values(observables, t_start, t_end, x_of, params, dtype):
    """The values of the phase observables `observables` (in order)."""
    extrema = [o for o in observables if not isinstance(o, Integral)]
    values = list(
        _extrema(extrema, t_start, t_end, x_of, params, dtype) if extrema else []
    )
    out = []
    for o in observables:
        if isinstance(o, Integral):
            out.append(_integral(o, t_start, t_end, x_of, params, dtype))
        else:
            out.append(values.pop(0))
    return jnp.stack(out)


def _phase_observables(system, keys, mode, static_mode, t_start, t_end, x_of, params):
    """Phase observables of the union `keys`, NaN for keys the mode lacks."""
    if not keys:
        return {}

    def make(m):
        observables = system.modes[m].observables

        def observables_of(t_start, t_end, params):
            dtype = t_end.dtype
            names = [key for key in keys if key in observables]
            values = (
                _phase_values(
                    [observables[k] for k in names], t_start, t_end, x_of, params, dtype
                )
                if names
                else None
            )
            return {
                key: values[names.index(key)]
                if key in names
                else jnp.full((), jnp.nan, dtype)
                for key in keys
            }

        return observables_of

    if static_mode is not None:
        return make(static_mode)(t_start, t_end, params)
    per_mode = [make(m) for m in range(len(system.modes))]
    return jax.lax.switch(mode, per_mode, t_start, t_end, params)


# ---------------------------------------------------------------------------
# Start checks and event classification
# ---------------------------------------------------------------------------


def _viable(h0, h1, h2, tol):
    r"""Whether a guard at $|h| \le$ `tol` at a phase start lets the phase get going:
    its quadratic model $h + \dot h s + \ddot h s^2/2$ must rise above `tol` before
    (or without) falling below `-tol`."""
    concave = h2 < 0
    convex = h2 > 0
    safe_concave = jnp.where(concave, -h2, 1.0)
    safe_convex = jnp.where(convex, h2, 1.0)
    peak = h0 + h1**2 / (2 * safe_concave)
    trough = h0 - h1**2 / (2 * safe_convex)
    return jnp.where(
        concave,
        (h1 > 0) & (peak > tol),
        jnp.where(convex, (h1 >= 0) | (trough > -tol), h1 >= 0),
    )


def _grazing(h1, h2, tol):
    r"""Whether a crossing with rate $\dot h$ and curvature $\ddot h$ is tangential:
    the guard would come back above zero after a dip no deeper than `tol`."""
    convex = h2 > 0
    safe = jnp.where(convex, h2, 1.0)
    return (h1 >= 0) | (convex & (h1**2 <= 2 * safe * tol))


def _first_index(mask):
    index = jnp.argmax(mask)
    return jnp.where(jnp.any(mask), index, -1).astype(jnp.int32)


class PhaseStart(eqx.Module):
    result: RESULTS
    cause: Array
    armed: Array
    guard_min: Array


def check_phase_start(
    tables, mode, t, x, params, settings, initial, viability
) -> PhaseStart:
    """A start beyond a guard (an error only for the initial phase) and, with
    `viability`, the mode's constraints and whether it can start at all. Status
    only: no derivatives flow."""
    t, x, params = jax.lax.stop_gradient((t, x, params))
    tol = settings.guard_tol
    armed = tables.arming(mode, t, x, params) > 0
    if viability:
        h0, h1, h2 = tables.guard_derivatives(mode, t, x, params)
    else:
        h0 = tables.guards(mode, t, x, params)
    h0 = jnp.where(armed, h0, jnp.inf)
    beyond = armed & (h0 < -tol)
    if viability:
        band = armed & (jnp.abs(h0) <= tol)
        not_viable = band & jnp.logical_not(_viable(h0, h1, h2, tol))
    else:
        not_viable = jnp.zeros_like(armed)
    if viability:
        violated = tables.violation(mode, t, x, params) > settings.constraint_tol
        # A vector field that is not finite where the phase starts (a singular
        # mass matrix or KKT system) would be rejected step after step until
        # the step limit: named at once instead.
        singular = jnp.all(jnp.isfinite(x)) & jnp.logical_not(
            jnp.all(jnp.isfinite(tables.field(mode, t, x, params)))
        )
    else:
        violated = singular = jnp.zeros((), bool)
    # The mode's declared geometry (a run that starts outside it is no run).
    outside = initial & jnp.logical_not(tables.domain(mode, t, x, params) > 0)
    initial_beyond = beyond & initial
    result = RESULTS.where(
        jnp.any(not_viable), RESULTS.mode_not_viable, RESULTS.successful
    )
    result = RESULTS.where(
        jnp.any(initial_beyond) | outside, RESULTS.infeasible_initial_state, result
    )
    result = RESULTS.where(violated, RESULTS.constraint_violated, result)
    result = RESULTS.where(singular, RESULTS.singular_dynamics, result)
    cause = jnp.where(
        jnp.any(initial_beyond), _first_index(initial_beyond), _first_index(not_viable)
    )
    guard_min = jnp.min(h0) if h0.shape[0] else jnp.full((), jnp.inf, x.dtype)
    return PhaseStart(result=result, cause=cause, armed=armed, guard_min=guard_min)


# ---------------------------------------------------------------------------
# One phase
# ---------------------------------------------------------------------------


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


def run_phase(
    system: HybridSystem,
    static_mode: int | None,
    mode,
    t,
    x,
    extra,
    params,
    settings: Settings,
    adjoint,
    *,
    active,
    initial,
    expected: int | None = None,
    augmentation=None,
    n_save: int = 0,
    observable_shapes: dict,
    phase_keys: tuple[str, ...],
    diagnose: bool = True,
) -> PhaseOutcome:
    """Run one phase of `mode` from `(t, x)`: start checks, one diffrax solve per
    stage, the event, the reset and its records. Lanes with `active` false do no
    work (their solves run from `t` to `t`). With `diagnose` false the checks
    (constraints and viability at the start, dips inside steps, grazing at the
    event) and the guards at the next start and crossing rates are skipped: for
    the inner iterations of a solver whose result a final diagnosed pass checks (under
    forward-mode AD the dip check costs 70% more per cycle, and all of it costs
    compile time)."""
    dtype = x.dtype
    tol = settings.guard_tol
    tables = Tables(system, static_mode)
    augmented = augmentation is not None
    state_of = _state_of_augmented if augmented else _identity
    t_end = jnp.asarray(settings.t_max, dtype)

    start = check_phase_start(tables, mode, t, x, params, settings, initial, diagnose)
    run = active & (start.result == RESULTS.successful)
    phase_observables_wanted = bool(phase_keys)
    dense = n_save > 0 or phase_observables_wanted

    term = dfx.ODETerm(_PhaseField(tables, augmentation))
    event = dfx.Event(
        _PhaseCondition(tables, augmented),
        root_finder=settings.event_root_finder,
        direction=False,
    )
    controller = settings.stepsize_controller
    detect_dips = diagnose and settings.dip_tol is not None
    if isinstance(controller, dfx.AbstractAdaptiveStepSizeController) and (
        detect_dips or augmented
    ):
        # Steps are controlled on the state alone (the variational part follows),
        # and guard dips inside a step are caught.
        controller = DipDetectingController(
            controller,
            _GuardRate(tables, augmented) if detect_dips else None,
            state_of,
            settings.dip_tol if detect_dips else 0.0,
        )

    y = x if not augmented else (x, extra)
    armed = start.armed
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
    stages = []
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
        stages.append((sol, t_cur, t_hit))
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

    # The event.
    x_minus = state_of(y)
    t_event = t_cur
    k = expected if expected is not None else fired
    if isinstance(k, int):
        reset = trace_once(system.transitions[k].reset)
        x_plus = reset(t_event, x_minus, params)
        next_mode_value = system.targets[k]
    else:
        resets = [trace_once(tr.reset) for tr in system.transitions]
        x_plus = jax.lax.switch(k, resets, t_event, x_minus, params)
        next_mode_value = jnp.asarray(system.targets, jnp.int32)[k]
    next_mode = jnp.asarray(next_mode_value, jnp.int32)
    extra_plus, extra_record = None, None
    if augmented:
        extra_plus, extra_record = augmentation.at_event(
            system, k, t_event, x_minus, y[1], params
        )
    observables = _event_observables(
        system, observable_shapes, k, t_event, x_minus, x_plus, params
    )

    # Classify the crossing (status only: no derivatives flow).
    t_s, x_s, p_s = jax.lax.stop_gradient((t_event, x_minus, params))
    if diagnose:
        _, h1, h2 = tables.guard_derivatives(mode, t_s, x_s, p_s)
        rate, curvature = h1[fired], h2[fired]
        grazing = hit & _grazing(rate, curvature, tol)
    else:
        rate, grazing = jnp.full((), jnp.nan, dtype), jnp.zeros((), bool)
    if diagnose:
        next_tables = Tables(system, next_mode_value if isinstance(k, int) else None)
        x_plus_s = jax.lax.stop_gradient(x_plus)
        next_armed = next_tables.arming(next_mode, t_s, x_plus_s, p_s) > 0
        next_guards = jnp.where(
            next_armed, next_tables.guards(next_mode, t_s, x_plus_s, p_s), jnp.inf
        )
        guard_at_start = (
            jnp.min(next_guards)
            if next_guards.shape[0]
            else jnp.full((), jnp.inf, dtype)
        )
    else:
        guard_at_start = jnp.full((), jnp.nan, dtype)

    finite = jnp.all(jnp.isfinite(x_plus)) & jnp.isfinite(t_event)
    # A terminal transition (a fall) ends the run whichever transition was due.
    if any(system.terminals):
        terminal = hit & jnp.asarray(system.terminals)[fired]
    else:
        terminal = jnp.zeros((), bool)
    result = RESULTS.where(
        start.result != RESULTS.successful,
        start.result,
        RESULTS.where(
            hit,
            RESULTS.where(
                terminal,
                RESULTS.terminal_event,
                RESULTS.where(
                    finite,
                    RESULTS.where(
                        grazing,
                        RESULTS.grazing_event,
                        RESULTS.where(
                            jnp.asarray(True)
                            if expected is None
                            else fired == expected,
                            RESULTS.successful,
                            RESULTS.wrong_event_sequence,
                        ),
                    ),
                    RESULTS.nonfinite_state,
                ),
            ),
            stage_result,
        ),
    )
    cause = jnp.where(
        start.result != RESULTS.successful,
        start.cause,
        jnp.where(grazing | terminal, fired, stage_cause),
    ).astype(jnp.int32)
    event_recorded = active & hit & finite

    # Samples and phase observables on the dense output of the stages.
    def within(s, t_a, t_b):
        # Not `jnp.clip`: at a tie (the phase's ends, where the observables'
        # grid starts and stops) its derivative splits between the arguments,
        # which halved the state's rate there.
        return jnp.where(s < t_a, t_a, jnp.where(s > t_b, t_b, s))

    def x_of(s):
        value = state_of(stages[0][0].evaluate(within(s, stages[0][1], stages[0][2])))
        for sol, t_a, t_b in stages[1:]:
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
    if phase_observables_wanted:
        phase_obs = _phase_observables(
            system, phase_keys, mode, static_mode, t, t_event, x_of, params
        )
    else:
        phase_obs = {}

    return PhaseOutcome(
        result=result,
        cause=cause,
        ran=run,
        event=event_recorded,
        t_event=t_event,
        x_minus=x_minus,
        x_plus=x_plus,
        extra_plus=extra_plus,
        extra_record=extra_record,
        transition=jnp.asarray(fired, jnp.int32),
        next_mode=next_mode,
        crossing_rate=rate,
        guard_at_start=guard_at_start,
        observables=observables,
        t_phase=t_phase,
        x_phase=x_phase,
        phase_observables=phase_obs,
    )


# ---------------------------------------------------------------------------
# The event loop
# ---------------------------------------------------------------------------


def _params_finite(params):
    flags = [
        jnp.all(jnp.isfinite(leaf))
        for leaf in jtu.tree_leaves(params)
        if eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.inexact)
    ]
    return jnp.all(jnp.stack(flags)) if flags else jnp.asarray(True)


def _tangent_seed(x0, params):
    """Zero, with the tangents of `x0` and of the parameters when differentiated.

    JAX differentiates (and batches) a loop by transforming its body until the set
    of carries with tangents stops growing, tracing the body again each time it
    grows. The event loop's time and Zeno history gain tangents only at its first
    event, so forward-mode AD through the scanned cycle had transformed the body
    three times; seeded with this zero, they hold tangents from the start and one
    pass suffices (the AD monodromy's trace took 1.4 s against 1.9 s on the
    hopper). Zero also where an input is not finite (that run fails at its start).

    Used for forward mode only (`run_events(seed_tangents=True)`): in reverse mode
    through a seeded loop, XLA at `--xla_backend_optimization_level=0` with its
    classic emitters and multi-kernel loops (the test suite's fast-compile
    options) gave the bouncing ball's apex derivative 1.7e-6 off its closed form,
    exact at XLA's default level."""
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
    phase_observables: bool = True,
    diagnose: bool = True,
    unroll: bool = False,
    seed_tangents: bool = False,
):
    """The one event loop: `n_events` phases with modes chosen at run time
    (`lax.scan`), or the phases of a declared `sequence` of transitions (each
    phase must fire its declared transition): a `lax.scan` over one traced phase,
    or with `unroll` a Python loop with each phase traced apart with its static
    mode (a longer compile, no dispatch on the mode inside the solver's steps).
    Returns `(solution, extra, records)`: a [`hybrax.HybridSolution`][], the
    augmentation's state after the last event and what its `at_event` recorded at
    each event (`None` without an augmentation).

    An augmentation (internal; see `Variational` in the periodic layer) carries
    extra states through the phases: `field(f, t, (x, z))` is the augmented right
    side, `at_event(system, k, t, x_minus, z_minus, params)` returns
    `(z_plus, record)`. Step sizes are controlled on `x` alone.

    `seed_tangents`: the loop's time and history carry the tangents of `x0` and
    `params` from the start (see `_tangent_seed`), for forward-mode AD through a
    scanned loop: one transformation of its body instead of three."""
    dtype = x0.dtype
    nan = jnp.full((), jnp.nan, dtype)
    t0 = jnp.asarray(t0, dtype)
    t_max = jnp.asarray(settings.t_max, dtype)
    observable_shapes = _event_observable_shapes(system, x0, params)
    phase_keys = _phase_observable_keys(system) if phase_observables else ()

    result0 = RESULTS.where(
        _params_finite(params),
        RESULTS.where(
            jnp.all(jnp.isfinite(x0)),
            RESULTS.where(t_max > t0, RESULTS.successful, RESULTS.invalid_time_span),
            RESULTS.nonfinite_state,
        ),
        RESULTS.nonfinite_parameters,
    )
    t, history, zeno_time = t0, jnp.full((3,), jnp.nan, dtype), nan
    if seed_tangents:
        seed = _tangent_seed(x0, params)
        t, history, zeno_time = t + seed, history + seed, zeno_time + seed
    carry = dict(
        t=t,
        x=x0,
        extra=extra0,
        mode=jnp.asarray(mode0, jnp.int32),
        count=jnp.zeros((), jnp.int32),
        result=result0,
        done=result0 != RESULTS.successful,
        history=history,
        zeno_time=zeno_time,
        cause=jnp.asarray(-1, jnp.int32),
    )

    def step(carry, static_mode, mode, expected, initial):
        active = jnp.logical_not(carry["done"])
        phase = run_phase(
            system,
            static_mode,
            mode,
            carry["t"],
            carry["x"],
            carry["extra"],
            params,
            settings,
            adjoint,
            active=active,
            initial=initial,
            expected=expected,
            augmentation=augmentation,
            n_save=n_save,
            observable_shapes=observable_shapes,
            phase_keys=phase_keys,
            diagnose=diagnose,
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

    if sequence is not None and unroll:
        records_list = []
        for index, k in enumerate(sequence):
            mode = system.sources[k]
            carry, rec = step(carry, mode, mode, k, index == 0)
            records_list.append(rec)
        records = jtu.tree_map(lambda *r: jnp.stack(r), *records_list)
    else:
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


# ---------------------------------------------------------------------------
# simulate
# ---------------------------------------------------------------------------


def check_state(system: HybridSystem, x0, name: str = "x0") -> Array:
    x0 = jnp.asarray(x0)
    if x0.ndim != 1 or x0.shape[0] != system.n_states:
        raise ValueError(
            f"`{name}` must have shape ({system.n_states},); got {tuple(x0.shape)}."
        )
    return x0.astype(jnp.result_type(float))


def check_domain(system: HybridSystem, mode, t, x, params, name: str = "x0") -> None:
    """Eagerly, where `x`, `t` and `params` are concrete: a `ValueError` naming
    the first `domain` condition of `mode` that `x` fails."""
    if not isinstance(mode, int) or not all(
        is_concrete(leaf) for leaf in jtu.tree_leaves((t, x, params))
    ):
        return
    mode_ = system.modes[mode]
    for condition, function in mode_.domain.items():
        value = np.asarray(function(t, x, params), dtype=float)
        if not np.all(value > 0):
            raise ValueError(
                f"`{name}` lies outside mode {mode_.name!r}: it needs {condition} "
                f"(the condition reads {float(np.min(value)):.3g}, not > 0)."
            )


@compiled("the simulation", label=lambda system, *args: system_label(system))
def _simulate(
    system, x0, params, mode0, t0, settings, adjoint, n_events, n_save, phases
):
    solution, _, _ = run_events(
        system,
        x0,
        params,
        settings,
        adjoint,
        mode0=mode0,
        t0=t0,
        n_events=n_events,
        n_save=n_save,
        phase_observables=phases,
    )
    return solution


def simulate(
    system: HybridSystem,
    x0: Float[Array, " n"],
    params: Params,
    *,
    n_events: int,
    settings: Settings | None = None,
    mode0: ModeIndex | str = 0,
    t0: float | Float[Array, ""] = 0.0,
    n_save: int = 0,
    phase_observables: bool = True,
    throw: bool = False,
) -> HybridSolution:
    r"""Simulate a hybrid system through `n_events` transitions.

    Each phase integrates $\dot x = f_{m}(t, x, p)$ of the current mode $m$ with
    diffrax until the earliest crossing among the armed guards of the transitions
    leaving $m$; the crossing time is root-found (not stepped over), the reset
    $x^+ = g(t, x^-, p)$ is applied and the target mode starts. The run succeeds
    when `n_events` events occur before `settings.t_max`.

    It never reports a degenerate run as successful; each has its own status in
    [`hybrax.RESULTS`][]: a start outside the initial mode
    (`infeasible_initial_state`, `constraint_violated`), a phase that would end
    the instant it starts (`mode_not_viable`: events piling up at one instant), an
    accumulation of events (`zeno`, with `zeno_time`), a tangential crossing
    (`grazing_event`), a horizon before the start (`invalid_time_span`), besides
    `event_not_reached`, `max_steps_reached` and non-finite values. Guard dips
    inside one integrator step are found (see [`hybrax.Settings`][]).

    Works under `jax.jit`, `jax.vmap` and autodiff. For `jax.jacfwd`/`jax.jvp` use
    `Settings(adjoint=diffrax.ForwardMode())`; the default
    `diffrax.RecursiveCheckpointAdjoint()` serves reverse mode (`jax.grad`). Event
    times are differentiated by the implicit function theorem, so derivatives
    include the saltation terms (Leine 2000; Hiskens & Pai 2000).

    **Arguments:**

    - `system`: a [`hybrax.HybridSystem`][].
    - `x0`: the initial state, shape `(system.n_states,)`.
    - `params`: the parameter PyTree passed to every vector field, guard and reset.
    - `n_events`: how many transitions to run (static: it fixes output shapes).
    - `settings`: a [`hybrax.Settings`][] (solver, tolerances, `t_max`, ...).
    - `mode0`: the initial mode (index or name).
    - `t0`: the initial time.
    - `n_save`: samples per phase kept for plotting (0 keeps none).
    - `phase_observables`: evaluate the modes' phase observables (e.g. apex
      heights, `Mode(observables=...)`); `False` saves their cost (they need each
      phase's dense output). Event observables are always recorded.
    - `throw`: raise an error carrying the status message when the run fails
      (under `jax.vmap`: when any element fails) instead of returning the status.

    **Returns:** a [`hybrax.HybridSolution`][].

    **Raises:** `ValueError` for a state of the wrong shape, a concrete state
    outside its mode's `domain`, or bad static arguments;
    with `throw=True`, an `equinox.EquinoxRuntimeError` carrying the status message.
    """
    settings = resolve_settings(settings)
    x0 = check_state(system, x0)
    if isinstance(n_events, bool) or int(n_events) < 1:
        raise ValueError(f"`n_events` must be a positive integer; got {n_events}.")
    if int(n_save) < 0:
        raise ValueError(f"`n_save` must be non-negative; got {n_save}.")
    if is_concrete(t0) and is_concrete(settings.t_max):
        if not float(settings.t_max) > float(t0):
            raise ValueError(
                f"`settings.t_max` must exceed `t0`; got t0={float(t0)}, "
                f"t_max={float(settings.t_max)}."
            )
    mode0 = system.mode_index(mode0) if isinstance(mode0, str | int) else mode0
    if params is None:
        raise ValueError("`params` must be the model's parameters; got None.")
    check_domain(system, mode0, t0, x0, canonical_params(params))
    adjoint = (
        dfx.RecursiveCheckpointAdjoint()
        if settings.adjoint is None
        else settings.adjoint
    )
    dtype = jnp.result_type(float)
    solution = _simulate(
        system,
        x0,
        canonical_params(params),
        mode0,
        jnp.asarray(t0, dtype),
        settings,
        adjoint,
        int(n_events),
        int(n_save),
        bool(phase_observables),
    )
    if throw:
        solution = raise_if_failed(solution, solution.result)
    return solution


def raise_if_failed(tree, result: RESULTS):
    """`tree` unchanged, with a runtime error carrying the status message attached
    wherever `result` is not `successful` (under `vmap`: any element)."""
    leaves, treedef = jtu.tree_flatten(tree)
    index = next(
        i
        for i, leaf in enumerate(leaves)
        if eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.inexact)
    )
    leaves[index] = result.error_if(leaves[index], result != RESULTS.successful)
    return jtu.tree_unflatten(treedef, leaves)
