"""Start checks and event classification."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from .._solution import RESULTS


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
