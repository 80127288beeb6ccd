r"""The step-size controller of a phase: it keeps steps that the linearised flow
can follow (`linearised_error_floor`), and finds guard dips inside one step.

diffrax tests the sign of an event condition at step ends only, so a guard that
dips below zero and comes back within one step (a shallow crossing) goes unnoticed.
This controller wraps the user's one: after each step it fits the cubic Hermite
interpolant of the guard $h$ through its values and rates $\dot h = h_t + h_x f$ at
both step ends and, if that cubic dips below $-\epsilon$ while both ends are
positive, rejects the step and retries it ending on the cubic's falling side. There
the guard is negative, diffrax sees the sign change and root-finds the crossing as
usual. A step that ends past its crossing with the guard already rising again
(below zero at its end, with a positive rate) is retried the same way: diffrax
starts the event root find at the step's end, from where Newton's iterate
would leave the step. The rate costs one vector-field evaluation per step.
"""

import math
from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp


def _cubic(h0, r0, h1, r1, dt):
    r"""The coefficients `(m0, b, a)` of the cubic Hermite interpolant on a step
    of length `dt` with end values `h0`, `h1` and end slopes `r0`, `r1`, as a
    function of the fraction $s \in [0, 1]$ of the step:
    $p(s) = h_0 + m_0 s + b s^2 + a s^3$."""
    m0, m1 = r0 * dt, r1 * dt
    a = 2 * h0 + m0 - 2 * h1 + m1
    b = -3 * h0 - 2 * m0 + 3 * h1 - m1
    return m0, b, a


def _stationary_points(m0, b, a):
    r"""The roots of $p'(s) = 3a s^2 + 2b s + m_0$, `(2,)`: the second is the one
    with $p''(s) = \sqrt{\text{disc}} \ge 0$ (both $-m_0/2b$ when $p$ is
    quadratic); and the discriminant."""
    disc = (2 * b) ** 2 - 12 * a * m0
    # Double `where`: the square root's derivative must not see a zero it would
    # turn into inf (then NaN on a zero cotangent).
    positive = disc > 0
    sqrt_disc = jnp.where(positive, jnp.sqrt(jnp.where(positive, disc, 1.0)), 0.0)
    quadratic = jnp.abs(a) > 1e-300
    safe_a = jnp.where(quadratic, a, 1.0)
    roots_quadratic = jnp.stack(
        [(-2 * b - sqrt_disc) / (6 * safe_a), (-2 * b + sqrt_disc) / (6 * safe_a)]
    )
    safe_b = jnp.where(jnp.abs(b) > 1e-300, b, 1.0)
    root_linear = -m0 / (2 * safe_b)
    roots = jnp.where(quadratic, roots_quadratic, jnp.stack([root_linear, root_linear]))
    return roots, disc


def hermite_minimum(h0, r0, h1, r1, dt):
    r"""The smallest value of the cubic Hermite interpolant on $[0, \Delta t]$ with
    end values `h0`, `h1` and end slopes `r0`, `r1`, and where (as a fraction
    $s \in [0, 1]$ of the step) it is reached. NaN-safe."""
    m0, b, a = _cubic(h0, r0, h1, r1, dt)
    roots, disc = _stationary_points(m0, b, a)
    valid = (disc >= 0) & (roots > 0) & (roots < 1)
    s = jnp.concatenate([jnp.where(valid, roots, 0.0), jnp.array([0.0, 1.0])])
    values = h0 + s * (m0 + s * (b + s * a))
    values = jnp.where(jnp.isfinite(values), values, jnp.inf)
    index = jnp.argmin(values)
    return values[index], s[index]


def hermite_interior_minimum(h0, r0, h1, r1, dt):
    r"""The smallest local minimum of the cubic Hermite interpolant of
    [`hermite_minimum`][] at a stationary point in $[0, \Delta t]$ with positive
    curvature, $p'(s) = 0 < p''(s)$, and where (as a fraction $s$) it lies;
    `inf` where the cubic has none. NaN-safe and differentiable: at the
    minimum $p'(s) = 0$, so the value's derivative is the cubic's at fixed $s$."""
    m0, b, a = _cubic(h0, r0, h1, r1, dt)
    roots, disc = _stationary_points(m0, b, a)
    root = roots[1]
    curvature = 2 * b + 6 * a * root
    valid = (disc > 0) & (root >= 0) & (root <= 1) & (curvature > 0)
    s = jnp.where(valid, root, 0.0)
    value = h0 + s * (m0 + s * (b + s * a))
    value = jnp.where(valid & jnp.isfinite(value), value, jnp.inf)
    return value, s


def _falling_side(h0, r0, h1, r1, dt, depth, s_min):
    r"""Where to end a step retried for a dip to `depth` < 0 at `s_min`: on the
    cubic's falling side, about halfway down ($p(s) \approx$ `depth`/2 on its
    quadratic model $p''(s_{\min})$ there), rather than at the minimum itself,
    whose zero rate would send the event root finder's first Newton step out of
    the step."""
    _, b, a = _cubic(h0, r0, h1, r1, dt)
    curvature = 2 * b + 6 * a * s_min
    usable = (depth < 0) & (curvature > 0)
    offset = jnp.sqrt(jnp.where(usable, -depth / jnp.where(usable, curvature, 1.0), 0))
    return jnp.where(usable, jnp.clip(s_min - offset, 0.5 * s_min, s_min), s_min)


def linearised_error_floor(dt, rate, error_order, rtol):
    r"""The scaled local error that a step of length `dt` makes on the linearised
    flow $\dot{\delta x} = J \delta x$ oscillating at `rate` $\omega$:
    $(\Delta t\,\omega)^{q} / q!$ for an error estimate of order $q$, relative to
    $\sqrt{\text{rtol}}$ (the derivatives' relative accuracy where the state's own
    estimate says nothing: $10^{-5}$ at the default `rtol`. On the zoo's orbits
    the state's estimate is almost always the larger: their periods and
    multipliers move by less than 1e-12).

    Why: diffrax controls the steps on the state's error estimate only, and
    forward- and reverse-mode derivatives (and a variational solve's extra part)
    follow the same steps uncontrolled. Where the state's own flow is integrated
    exactly (a free fall with a relaxed spring is a parabola, which a fifth-order
    Runge-Kutta step reproduces exactly), its error estimate is zero and the steps
    grow tenfold each time, while the perturbed motion (the spring's oscillation)
    is not resolved at all: derivatives wrong by orders of magnitude, reported as
    successful. Floored by this estimate, no step exceeds what the linearised
    flow allows (Hairer, Norsett & Wanner 1993, *Solving Ordinary Differential
    Equations I*, sec. II.4: an order-$p$ method's local error on a linear problem
    is $O((\Delta t \lambda)^{p+1})$)."""
    if isinstance(error_order, int):  # (diffrax's solvers: a Python integer)
        factorial = math.factorial(error_order)
    else:
        factorial = jnp.exp(jax.scipy.special.gammaln(error_order + 1.0))
    return (jnp.abs(dt) * rate) ** error_order / (factorial * jnp.sqrt(rtol))


class PhaseStepController(dfx.AbstractAdaptiveStepSizeController):
    """Wraps an adaptive diffrax step-size controller: steps are chosen by `inner` on
    the state part of `y`, with its error estimate floored by the linearised
    flow's (`linearised_error_floor`), and a step inside which the guard dips
    below `-tol` is retried, ending at the dip (see the module docstring). Its
    `rtol`, `atol` and `norm` are the inner controller's (diffrax hands them to
    implicit solvers).

    - `inner`: the user's controller.
    - `guard_and_rate`: `(t, y, args) -> (h, dh/dt)` of the current event
      condition's entries (a vector, one per guard) along the flow; `None`
      turns dip detection off (the wrapper then only hands the inner controller
      the state part).
    - `state_of`: extracts the state from `y` (identity, or the first part of an
      augmented solve); the inner controller sees only the state.
    - `tol`: how far below zero a step may start and still be checked (the
      rounding of a guard on its surface after a reset), and how far below its
      start value a minimum must lie to count.
    - `oscillation_rate`: the rate of the fastest oscillation of the linearised
      flow where the phase starts (`fastest_rate`), which floors the error
      estimate.
    """

    inner: dfx.AbstractAdaptiveStepSizeController
    guard_and_rate: Callable[[Any, Any, Any], tuple[Any, Any]] | None
    state_of: Callable[[Any], Any] = eqx.field(static=True)
    tol: Any
    oscillation_rate: Any
    rtol: Any
    atol: Any
    norm: Callable = eqx.field(static=True)

    def __init__(self, inner, guard_and_rate, state_of, tol, oscillation_rate):
        self.inner = inner
        self.guard_and_rate = guard_and_rate
        self.state_of = state_of
        self.tol = tol
        self.oscillation_rate = oscillation_rate
        self.rtol = inner.rtol
        self.atol = inner.atol
        self.norm = inner.norm

    def wrap(self, direction):
        return PhaseStepController(
            self.inner.wrap(direction),
            self.guard_and_rate,
            self.state_of,
            self.tol,
            self.oscillation_rate,
        )

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t_next, inner_state = self.inner.init(
            terms, t0, t1, y0, dt0, args, func, error_order
        )
        if self.guard_and_rate is None:
            return t_next, (inner_state, None, None)
        h0, r0 = self._probe(t0, y0, args)
        return t_next, (inner_state, h0, r0)

    def _floored(self, t0, t1, y0, y1_candidate, y_error, error_order):
        """The state's error estimate, or where its scaled norm lies below the
        linearised flow's (`linearised_error_floor`), that floor spread evenly
        over the state in units of the tolerance $atol + rtol |y|$. The estimate
        is replaced whole, never raised entry by entry: where it is the larger,
        the steps are exactly those of the state's control alone (an entry held
        by a constraint, with an error of exactly zero, would otherwise always
        take the floor)."""
        if y_error is None:
            return None
        floor = linearised_error_floor(
            jax.lax.stop_gradient(t1 - t0),
            self.oscillation_rate,
            error_order,
            self.rtol,
        )
        scale = jax.tree_util.tree_map(
            lambda start, end: jax.lax.stop_gradient(
                self.atol + self.rtol * jnp.maximum(jnp.abs(start), jnp.abs(end))
            ),
            y0,
            y1_candidate,
        )
        scaled = jax.tree_util.tree_map(lambda e, s: e / s, y_error, scale)
        below = jax.lax.stop_gradient(self.norm(scaled)) < floor
        return jax.tree_util.tree_map(
            lambda e, s: jnp.where(below, floor * s, e), y_error, scale
        )

    def _probe(self, t, y, args):
        h, r = self.guard_and_rate(
            jax.lax.stop_gradient(t), jax.lax.stop_gradient(y), args
        )
        return jax.lax.stop_gradient(h), jax.lax.stop_gradient(r)

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        inner_state, h0, r0 = controller_state
        x0, x1 = self.state_of(y0), self.state_of(y1_candidate)
        x_error = None if y_error is None else self.state_of(y_error)
        x_error = self._floored(t0, t1, x0, x1, x_error, error_order)
        keep, next_t0, next_t1, made_jump, new_inner, result = (
            self.inner.adapt_step_size(
                t0, t1, x0, x1, args, x_error, error_order, inner_state
            )
        )
        if self.guard_and_rate is None:
            return keep, next_t0, next_t1, made_jump, (new_inner, None, None), result
        h1, r1 = self._probe(t1, y1_candidate, args)
        dt = jax.lax.stop_gradient(t1 - t0)
        # Each entry of the condition apart: the minimum over them switches
        # branches, and a dip of one entry under the others' minimum at both
        # ends (an arming condition crossed and recrossed within a step) would
        # not show in the minimum's own cubic.
        depth, s_min = jax.vmap(hermite_minimum, in_axes=(0, 0, 0, 0, None))(
            h0, r0, h1, r1, dt
        )
        s_end = _falling_side(h0, r0, h1, r1, dt, depth, s_min)
        # A minimum close to zero, and below the step's start by more than the
        # tolerance (a guard that starts on its surface after a reset, at -1e-16
        # with a rate of -1e-15, does not dip). Entries of other modes are +inf.
        finite = jnp.isfinite(h0) & jnp.isfinite(h1)
        close = (depth < 1e-3 * jnp.maximum(h0, h1)) & (depth < h0 - self.tol)
        # A step that ends past its crossing with the guard rising again is
        # retried the same way: the event root finder starts at the step's end,
        # where Newton's first iterate would leave the step and stay clipped to
        # its end (the upstream report in the robustness guide).
        returning = (h1 <= 0) & (r1 > 0)
        ends = (h1 > 0) | returning
        dips = finite & (h0 > -self.tol) & ends & close & (s_min > 0) & (s_min < 1)
        dip = keep & jnp.any(dips)
        s_end = jnp.min(jnp.where(dips, s_end, 1.0), initial=1.0)
        keep = keep & jnp.logical_not(dip)
        next_t0 = jnp.where(dip, t0, next_t0)
        next_t1 = jnp.where(dip, t0 + s_end * dt, next_t1)
        new_inner = jax.tree_util.tree_map(
            lambda new, old: jnp.where(dip, old, new), new_inner, inner_state
        )
        h = jnp.where(keep, h1, h0)
        r = jnp.where(keep, r1, r0)
        return keep, next_t0, next_t1, made_jump, (new_inner, h, r), result


def fastest_rate(field, x, scale):
    r"""The rate $\omega$ of the fastest oscillation of the linearised flow
    $\dot{\delta x} = J \delta x$, $J = \partial f / \partial x$ at `x`, from two
    Jacobian-vector products from the tolerance-scaled direction $v$ = `scale`:
    $\omega^2 = \max(0, -\langle v, J^2 v\rangle / \langle v, v \rangle)$ in
    the scaled norm. For a mechanical state $x = (q, \dot q)$ oscillating at
    $\omega$, $J^2 \approx -\omega^2 I$ whatever the units of $q$ and $\dot q$.
    Decaying or growing real modes give $J^2$ a positive quotient and no floor: a
    stiff damped mode's local error does not accumulate (and the state's own
    error estimate already limits its steps to the stable ones). Zero on a free
    flight, whose linearised flow is polynomial and integrated exactly."""
    x, scale = jax.lax.stop_gradient((x, scale))
    jacobian_times = jax.linearize(field, x)[1]
    quotient = jnp.mean(jacobian_times(jacobian_times(scale)) / scale)
    rate = jnp.sqrt(jnp.maximum(-quotient, 0.0))
    return jax.lax.stop_gradient(jnp.where(jnp.isfinite(rate), rate, 0.0))
