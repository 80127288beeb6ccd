r"""Gait controllers: Bézier virtual constraints tracked by saturated PD torques.

A virtual constraint (Westervelt, Grizzle, Chevallereau, Choi & Morris 2007,
*Feedback Control of Dynamic Bipedal Robot Locomotion*, ch. 6) asks the actuated
joint angles $y = S\theta$ to follow references $h(s)$ of a monotone phase
variable $s$ (for a walker, the stance leg's angle normalised over the step);
the references are Bézier polynomials, whose coefficients are the controller's
parameters. A PD law drives the outputs $e = y - h(s)$ to zero,

$$\tau = \operatorname{clip}\big(-K_p e - K_d \dot e,\ -\tau_{max},\
\tau_{max}\big), \qquad \dot e = \dot y - h'(s)\,\dot s,$$

every number of it a leaf of the model's parameter PyTree (so `jax.grad` reaches
all of them). The walker then walks on whatever gait the references and the
impacts leave it; its period-one orbit and multipliers come from
[`hybrax.find_periodic_orbit`][], and [`hybrax.tune`][] shapes the references.
"""

import math

import jax.numpy as jnp


def _as_coefficients(coefficients):
    if isinstance(coefficients, (tuple, list)):
        return jnp.stack([jnp.asarray(c) for c in coefficients], axis=-1)
    return jnp.asarray(coefficients)


def bezier(coefficients, s):
    r"""A Bézier polynomial $h(s) = \sum_{k=0}^{M} \alpha_k \binom{M}{k}
    s^k (1 - s)^{M - k}$ (Westervelt et al. 2007 eq. 6.16).

    **Arguments:**

    - `coefficients`: the $\alpha_k$, a sequence of $M + 1$ scalars or an array
      whose last axis holds them.
    - `s`: the phase, usually in $[0, 1]$ ($h(0) = \alpha_0$, $h(1) = \alpha_M$).

    **Returns:** $h(s)$, shaped as one coefficient.
    """
    coefficients = _as_coefficients(coefficients)
    degree = coefficients.shape[-1] - 1
    basis = jnp.stack(
        [
            math.comb(degree, k) * s**k * (1 - s) ** (degree - k)
            for k in range(degree + 1)
        ]
    )
    return jnp.sum(coefficients * basis.astype(coefficients.dtype), axis=-1)


def bezier_rate(coefficients, s):
    r"""$h'(s) = M \sum_{k=0}^{M-1} (\alpha_{k+1} - \alpha_k) \binom{M-1}{k} s^k
    (1 - s)^{M-1-k}$: the derivative of [`hybrax.bezier`][] in $s$.

    **Arguments:**

    - `coefficients`: the $\alpha_k$, a sequence of $M + 1$ scalars or an array
      whose last axis holds them (as for [`hybrax.bezier`][]).
    - `s`: the phase.

    **Returns:** $h'(s)$, shaped as one coefficient (zero for $M = 0$).
    """
    coefficients = _as_coefficients(coefficients)
    degree = coefficients.shape[-1] - 1
    if degree == 0:
        return jnp.zeros_like(coefficients[..., 0] * s)
    return degree * bezier(coefficients[..., 1:] - coefficients[..., :-1], s)


def saturate(x, limit, band=0.0):
    r"""$x$ saturated at $\pm$`limit`, with the corners rounded over a band of
    half-width `band` (`band = 0`: the hard clip $\min(\max(x, -L), L)$).

    With $L$ = `limit`, $w$ = `band` $> 0$ and $a = L - w$, the saturation is
    $x$ for $|x| \le a$, $\pm L$ for $|x| \ge L + w$, and in between
    $\operatorname{sign}(x)\,(a + 2w\,g(u))$, $u = (|x| - a)/(2w)$, with the
    quartic $g(u) = u - u^3 + u^4/2$: $g(0) = 0$, $g'(0) = 1$,
    $g''(0) = 0$, $g(1) = 1/2$, $g'(1) = g''(1) = 0$ and
    $g' = (1 - u)^2(1 + 2u) \ge 0$. It is monotone and twice continuously
    differentiable.

    Why: a vector field with a hard clip is continuous but its Jacobian jumps
    where the clip engages. The flow is then once differentiable across the
    switch, and a second derivative by automatic differentiation (a Hessian, the
    Jacobian row of a fold or period-doubling curve's corrector, the gradient of
    a multiplier) misses the term of the switching time, which moves with the
    state: AD differentiates each side of the corner apart. On a twice
    differentiable field it does not (the AD second derivative of
    $\dot y = \min(y, 1)$ through a step-size-controlled solve is 0 where the
    exact one is $-1/y_0^2$). The band should span a few of the integrator's
    steps: their size is chosen for the state, not for the second-order
    tangents, and a band they step over gives second derivatives off by up to
    about 1%.

    **Arguments:**

    - `x`: the values, any shape.
    - `limit`: $L > 0$, broadcast against `x`.
    - `band`: $w \ge 0$, less than $L$, broadcast against `x`.

    **Returns:** the saturated values, shaped as `x`.
    """
    x = jnp.asarray(x)
    clipped = jnp.clip(x, -limit, limit)
    if isinstance(band, int | float) and band == 0:
        return clipped
    # (A traced band may be 0: the rounded branch then divides by a stand-in,
    # so that neither branch's derivative is NaN.)
    rounding = band > 0
    width = jnp.where(rounding, band, 1.0)
    magnitude = jnp.abs(x)
    start = limit - width
    u = jnp.clip((magnitude - start) / (2 * width), 0.0, 1.0)
    rounded = jnp.where(
        magnitude <= start, x, jnp.sign(x) * (start + 2 * width * (u - u**3 + u**4 / 2))
    )
    return jnp.where(rounding, rounded, clipped)


def virtual_constraint_torques(
    outputs,
    output_rates,
    coefficients,
    phase,
    phase_rate,
    kp,
    kd,
    torque_limit,
    saturation_band=0.0,
):
    r"""Saturated PD torques on virtual constraints $y = h(s)$ with Bézier
    references (Westervelt et al. 2007, *Feedback Control of Dynamic Bipedal
    Robot Locomotion*, ch. 6):

    $$s_c = \min(\max(s, 0), 1),\quad e = y - h(s_c),\quad \dot e = \dot y -
    h'(s_c)\,\dot s,$$
    $$\tau = \operatorname{clip}(-K_p e - K_d\dot e, -\tau_{max}, \tau_{max}).$$

    Before the phase starts ($s < 0$) and after it ends ($s > 1$) the references
    hold their end values, and their rates keep their end slopes $h'(0)\dot s$,
    $h'(1)\dot s$: the torques are then continuous in the state (a jump where $s$
    leaves $[0, 1]$ would be a discontinuity of the vector field, which the
    variational equations, and so the orbit's Jacobian, do not see). Their
    Jacobian still jumps where $s$ leaves $[0, 1]$ with nonzero shape offsets
    (a corner, as the hard clip's): second derivatives of the flow across that
    instant miss its switching-time term (see [`hybrax.saturate`][]).

    **Arguments:**

    - `outputs`, `output_rates`: $y$ and $\dot y$, shape `(n,)`.
    - `coefficients`: the references' Bézier coefficients, shape `(n, M + 1)`.
    - `phase`, `phase_rate`: $s$ and $\dot s$ (scalars).
    - `kp`, `kd`: gains, scalars or shape `(n,)`.
    - `torque_limit`: $\tau_{max} > 0$, scalar or shape `(n,)`.
    - `saturation_band`: where positive, the half-width of the band over which
      the torques saturate smoothly ([`hybrax.saturate`][]: twice
      continuously differentiable, so that second derivatives of the flow are
      right where an orbit saturates); 0 (the default): the hard clip, whose
      flow is only once differentiable where the torques reach the limit.

    **Returns:** the torques $\tau$, shape `(n,)`.
    """
    s = jnp.clip(phase, 0.0, 1.0)
    reference = bezier(coefficients, s)
    reference_rate = bezier_rate(coefficients, s) * phase_rate
    error = outputs - reference
    error_rate = output_rates - reference_rate
    torque = -kp * error - kd * error_rate
    return saturate(torque, torque_limit, saturation_band)
