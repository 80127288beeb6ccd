"""The functions of a mode, tabled for the compiled event loop."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._hybrid import HybridSystem, signed_guard
from .._misc import trace_once


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
        r"""Arming values ($> 0$: armed); `+inf` for transitions without one. A
        transition that waits for its guard (`armed_outside="wait"`) is armed
        once its arming condition holds and its guard is inside: its value is
        $\min(a, h)$, $h$ the sign-normalised guard, so that the arming
        instant is the guard's return where it was past its crossing (and
        meanwhile the mode's other guards and the horizon stay visible)."""

        def value(tr, t, x, params):
            arm = jnp.asarray(trace_once(tr.arm)(t, x, params)).astype(x.dtype)
            if tr.armed_outside == "wait":
                return jnp.minimum(arm, signed_guard(tr, t, x, params).astype(x.dtype))
            return arm

        def make(m):
            def arming_of(t, x, params):
                inf = jnp.full((), jnp.inf, x.dtype)
                values = [
                    value(tr, t, x, params)
                    if self.system.sources[j] == m and tr.arm is not None
                    else inf
                    for j, tr in enumerate(self.system.transitions)
                ]
                return jnp.stack(values) if values else jnp.zeros((0,), x.dtype)

            return arming_of

        per_mode = [make(m) for m in range(len(self.system.modes))]
        return self._dispatch(per_mode, mode, t, x, params)

    def guard_at_start(self, mode, t, x, params):
        """The smallest sign-normalised guard of the transitions armed at
        `(t, x)` in `mode` (`+inf` where none is): negative where a phase
        would start beyond its guard, zero where it starts on it."""
        armed = self.arming(mode, t, x, params) > 0
        guards = jnp.where(armed, self.guards(mode, t, x, params), jnp.inf)
        if guards.shape[0] == 0:
            return jnp.full((), jnp.inf, x.dtype)
        return jnp.min(guards)

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
