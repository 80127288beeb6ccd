"""A conservative model's multipliers: the spring-mass runner of `slip_model`
(no losses; its energy a declared invariant of the apex section). Its full-state
monodromy has a defective unit pair (the flow and the energy), which the Floquet
analysis deflates with their eigenvectors: the one nontrivial multiplier is
checked against the section's reduced Jacobian (the apex-height map on the
energy level, by the variational Newton) and against central differences of the
return map."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
import slip_model


@pytest.mark.slow
def test_the_nontrivial_multiplier_keeps_its_index_across_a_sweep():
    """Sweeping the touchdown angle through the period doubling of the low
    running gait (nu from -2.9 to 0.65): at every angle `multipliers_ad[0]` and
    `multipliers_saltation[0]` are nu (the reduced Jacobian's eigenvalue, and the
    return map's derivative by central differences), real, with the structural 0
    of the forgotten horizontal position after it; the flow's and the energy's
    multipliers are 1 and reported apart. An eigenvalue routine alone put a unit
    multiplier first where |nu| < 1 and second where |nu| > 1."""
    system, params = slip_model.slip()
    section = slip_model.section()
    angles = np.linspace(0.355, 0.41, 12)
    batch = eqx.tree_at(lambda p: p.alpha, params, jnp.asarray(angles))
    sweep = hx.sweep_orbits(
        system, section, jnp.array([0.94]), batch, analyse=True, phase_observables=False
    )
    assert sweep.succeeded.all(), sweep.status_names
    floquet = sweep.floquet
    # A periodic forward-running gait: the apex height and speed come back.
    np.testing.assert_allclose(
        np.asarray(sweep.orbit.cycle.x_after)[:, -1, 1:],
        np.asarray(sweep.orbit.state)[:, 1:],
        atol=1e-8,
    )
    nu = np.asarray(sweep.orbit.reduced_jacobian)[:, 0, 0]
    assert nu.min() < -1 < 0 < nu.max() < 1  # through the period doubling
    for key in ("multipliers_ad", "multipliers_saltation"):
        values = np.asarray(getattr(floquet, key))
        assert values.shape == (len(angles), 2)
        np.testing.assert_allclose(values[:, 0], nu, atol=1e-6)
        np.testing.assert_allclose(values[:, 1], 0.0, atol=1e-6)
        assert np.all(np.imag(values) == 0)
    for key in ("trivial_ad", "trivial_saltation"):
        np.testing.assert_allclose(getattr(floquet, key), 1.0, atol=1e-6)
    for key in ("conserved_ad", "conserved_saltation"):
        values = np.asarray(getattr(floquet, key))
        assert values.shape == (len(angles), 1)
        np.testing.assert_allclose(values, 1.0, atol=1e-6)
    # The apex-height map's derivative by central differences, at three angles.
    step = 1e-6

    @jax.jit
    def height(u, p):
        return hx.poincare_map(system, section, u, p)[0][0]

    for i in (0, 5, 11):
        p = eqx.tree_at(lambda q: q.alpha, params, jnp.asarray(angles[i]))
        u = sweep.orbit.u[i]
        central = (height(u + step, p) - height(u - step, p)) / (2 * step)
        assert abs(float(central) - np.real(floquet.multipliers_ad[i, 0])) < 1e-6
