"""The energy-loss eigen-analysis of an impact (Kövecses & Font-Llagunes 2009)
against a closed form and against the plastic impact itself.

A free rod (mass m, length L, centroidal inertia m L^2 / 12) whose lower end meets
the ground at angle theta while translating vertically keeps the fraction
3 cos^2(theta) / (1 + 3 cos^2(theta)) of its kinetic energy: the effective mass of
the end point in the normal direction is m / (1 + 3 cos^2 theta), and the impulse
removes the normal momentum of that mass."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax.models import compass_gait as cg


class FreeRod(hx.AbstractLagrangianModel):
    """q = (x, y, theta): centre of mass and angle from the horizontal."""

    def mass_matrix(self, q, params):
        m, L = params
        return jnp.diag(jnp.array([m, m, m * L**2 / 12]))

    def forces(self, q, qd, params, t=0.0):
        return jnp.zeros_like(q)

    def constraints(self, q, params):
        m, L = params
        return {
            "end_normal": q[1:2] - 0.5 * L * jnp.sin(q[2:3]),
            "end_tangent": q[0:1] - 0.5 * L * jnp.cos(q[2:3]),
            "rotation": q[2:3],
            "horizontal": q[0:1],
        }


ROD = FreeRod()
PARAMS = (2.0, 1.5)


@pytest.mark.parametrize("theta", [0.0, 0.4, 1.1])
def test_rod_dropped_flat_or_tilted_is_the_closed_form(theta):
    q = jnp.array([0.3, 0.75 * math.sin(theta), theta])
    lost = 1 / (1 + 3 * math.cos(theta) ** 2)
    # Only vertical translation before the impact: one direction, one fraction.
    one = hx.impact_energy_modes(
        ROD, ("end_normal",), q, PARAMS, before=("rotation", "horizontal")
    )
    np.testing.assert_allclose(one.fractions, [lost], rtol=1e-12)
    np.testing.assert_allclose(
        jnp.abs(one.directions[:, 0]), [0, 2**-0.5, 0], atol=1e-12
    )
    # Any translation: a sliding motion loses nothing.
    two = hx.impact_energy_modes(ROD, ("end_normal",), q, PARAMS, before=("rotation",))
    np.testing.assert_allclose(two.fractions, [0.0, lost], atol=1e-12)
    # Free motion and a normal impact: rank one, the largest fraction is all of it.
    free = hx.impact_energy_modes(ROD, ("end_normal",), q, PARAMS)
    np.testing.assert_allclose(free.fractions, [0.0, 0.0, 1.0], atol=1e-12)


def test_directions_are_mass_orthonormal_and_stick_removes_two_of_three():
    q = jnp.array([0.0, 0.5, 0.7])
    modes = hx.impact_energy_modes(ROD, ("end_normal", "end_tangent"), q, PARAMS)
    M = ROD.mass_matrix(q, PARAMS)
    D = modes.directions
    np.testing.assert_allclose(D.T @ M @ D, np.eye(3), atol=1e-12)
    # Pinning the end keeps only the rotation about it.
    np.testing.assert_allclose(modes.fractions, [0.0, 1.0, 1.0], atol=1e-12)


def test_heel_strike_losses_lie_between_the_extreme_fractions():
    """Compass gait at heel strike (both feet on the slope): for random pre-impact
    motions with the stance foot still, the plastic impact's T_c / T^- lies between
    the smallest and largest eigenvalue, and the eigen-directions attain them."""
    params = cg.CompassGaitParams()
    alpha = 0.27
    # Both feet on the slope: the legs straddle the slope normal, which leans
    # downhill by the slope angle, at +-alpha.
    q = jnp.array([0.0, 0.0, alpha + params.slope, alpha - params.slope])
    mechanics = cg.mechanics()
    modes = hx.impact_energy_modes(mechanics, ("swing",), q, params, before=("stance",))
    assert modes.fractions.shape == (2,)
    assert 0 <= modes.fractions[0] <= modes.fractions[1] <= 1

    def lost_fraction(qd):
        impact = hx.plastic_impact(mechanics, ("swing",), q, qd, params)
        return impact.T_c / (impact.T_c + impact.T_a)

    rates = jax.random.normal(jax.random.PRNGKey(0), (64, 2))
    qd = jnp.concatenate([jnp.zeros((64, 2)), rates], axis=1)
    fractions = jax.vmap(lost_fraction)(qd)
    assert np.all(fractions >= modes.fractions[0] - 1e-12)
    assert np.all(fractions <= modes.fractions[1] + 1e-12)
    for i in range(2):
        np.testing.assert_allclose(
            lost_fraction(modes.directions[:, i]), modes.fractions[i], rtol=1e-10
        )


def test_no_impact_constraints_is_an_error():
    with pytest.raises(ValueError, match="`impact`"):
        hx.impact_energy_modes(ROD, (), jnp.zeros(3), PARAMS)


def test_fraction_is_differentiable():
    """d/dtheta of the rod's fraction 1/(1 + 3 cos^2 theta) by jax.grad and
    jax.jacfwd equals the closed-form derivative 6 sin cos / (1 + 3 cos^2)^2, and
    central differences of the library function."""

    def fraction(theta):
        q = jnp.stack([0.0, 0.75 * jnp.sin(theta), theta])
        modes = hx.impact_energy_modes(
            ROD, ("end_normal",), q, PARAMS, before=("rotation", "horizontal")
        )
        return modes.fractions[0]

    theta = 0.4
    c, s = math.cos(theta), math.sin(theta)
    exact = 6 * s * c / (1 + 3 * c**2) ** 2
    np.testing.assert_allclose(jax.grad(fraction)(theta), exact, rtol=1e-10)
    np.testing.assert_allclose(jax.jacfwd(fraction)(theta), exact, rtol=1e-10)
    h = 1e-5
    central = (fraction(theta + h) - fraction(theta - h)) / (2 * h)
    np.testing.assert_allclose(central, exact, rtol=1e-8)
