"""Torque saturation (`hx.saturate`): the rounded saturation is the identity
inside its band and the limit beyond it, monotone and twice continuously
differentiable (values and first and second derivatives agree from both sides
of each band edge); and why it matters: through a step-size-controlled solve
of $\\dot y = \\min(y, 1)$ the AD second derivative of the flow misses the
switching-time term (0 where the closed form is $-1/y_0^2$), while with the
rounded corner it equals central differences of the AD first derivative, near
the closed form of the hard clip."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx


LIMIT, BAND = 400.0, 1.0


def _derivatives(x):
    f = lambda y: hx.saturate(y, LIMIT, BAND)  # noqa: E731
    return np.array([f(x), jax.grad(f)(x), jax.grad(jax.grad(f))(x)], dtype=float)


def test_rounded_saturation_is_identity_inside_limit_beyond_and_c2_between():
    x = jnp.linspace(-600.0, 600.0, 24001)
    y = np.asarray(hx.saturate(x, LIMIT, BAND))
    inside = np.abs(np.asarray(x)) <= LIMIT - BAND
    np.testing.assert_array_equal(y[inside], np.asarray(x)[inside])
    beyond = np.abs(np.asarray(x)) >= LIMIT + BAND
    np.testing.assert_array_equal(y[beyond], np.sign(np.asarray(x))[beyond] * LIMIT)
    assert np.all(np.diff(y) >= 0)  # monotone
    assert np.all(np.abs(y) <= LIMIT)
    # Values, slopes and curvatures meet at both edges of both bands.
    for edge in (LIMIT - BAND, LIMIT + BAND, -(LIMIT - BAND), -(LIMIT + BAND)):
        below, above = _derivatives(edge - 1e-7), _derivatives(edge + 1e-7)
        np.testing.assert_allclose(below, above, atol=1e-6, err_msg=f"at {edge}")
    # Half-way, the closed form a + 2w g(1/2), g(u) = u - u^3 + u^4/2.
    u = 0.5
    np.testing.assert_allclose(
        float(hx.saturate(LIMIT, LIMIT, BAND)),
        LIMIT - BAND + 2 * BAND * (u - u**3 + u**4 / 2),
        rtol=1e-15,
    )


def test_a_band_of_zero_is_the_hard_clip_also_traced():
    x = jnp.linspace(-600.0, 600.0, 101)
    np.testing.assert_array_equal(
        hx.saturate(x, LIMIT, 0.0), jnp.clip(x, -LIMIT, LIMIT)
    )
    traced = jax.jit(lambda b: hx.saturate(x, LIMIT, b))(0.0)
    np.testing.assert_array_equal(traced, jnp.clip(x, -LIMIT, LIMIT))
    # Its derivative in the band is finite (the rounded branch is not NaN).
    gradient = jax.grad(lambda b: jnp.sum(hx.saturate(x, LIMIT, b)))(0.0)
    assert np.isfinite(float(gradient))


def _flow(y0, band):
    """y(2) of y' = saturate(y, 1, band) (= min(y, 1) for the positive y
    here, corner rounded), by a step-size-controlled Tsit5 solve (hybrax's
    default solver)."""
    field = lambda t, y, args: hx.saturate(y, 1.0, band)  # noqa: E731
    solution = dfx.diffeqsolve(
        dfx.ODETerm(field),
        dfx.Tsit5(),
        0.0,
        2.0,
        None,
        y0,
        stepsize_controller=dfx.PIDController(rtol=1e-10, atol=1e-10),
        adjoint=dfx.ForwardMode(),
        max_steps=100_000,
    )
    return solution.ys[-1]


@pytest.mark.slow  # two second-order programs compile (about 20 s)
@pytest.mark.parametrize("band", [0.0, 0.3])
def test_second_derivative_through_a_saturated_flow(band):
    """y0 = 0.5: y grows as y0 e^t until y = 1 (t_s = -ln y0), then at rate 1,
    so y(2) = 3 + ln y0 and d2y/dy0^2 = -1/y0^2 = -4 for the hard clip."""
    first = eqx.filter_jit(jax.jacfwd(_flow))
    second = eqx.filter_jit(jax.jacfwd(jax.jacfwd(_flow)))
    # (Differences of the hard clip's first derivative take a step that spans
    # the switch: the step containing the corner makes the first derivative
    # good to about 1e-6 only.)
    y0, h = 0.5, 1e-2 if band == 0.0 else 1e-3
    ad = float(second(y0, band))
    differences = (float(first(y0 + h, band)) - float(first(y0 - h, band))) / (2 * h)
    if band == 0.0:
        # The corner's term is missing from AD; the differences see it.
        assert abs(ad) < 1e-6
        assert differences == pytest.approx(-4.0, rel=5e-3)
    else:
        # The rounded corner's flow is twice differentiable: AD equals the
        # differences, and the band moves the second derivative little.
        assert ad == pytest.approx(differences, rel=1e-4)
        assert ad == pytest.approx(-4.0, rel=1e-3)
