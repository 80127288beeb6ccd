"""Two-parameter continuation of bifurcations (`hx.continue_bifurcation_curve`)
against closed forms: the Hénon map's fold and period-doubling curves with their
1:1 and 1:2 resonances, a Neimark-Sacker curve with both resonances, and a fold
curve through a cusp."""

import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx


B0 = 0.3


def henon(u, a, b, args):
    """The Hénon map (x, y) -> (1 - a x^2 + y, b x). Its fixed point has the
    multipliers nu_1 nu_2 = -b; it folds at a = -(1 - b)^2/4 (nu = 1, the other
    -b) and period-doubles at a = 3 (1 - b)^2/4 (nu = -1, the other b)."""
    del args
    return jnp.array([1 - a * u[0] ** 2 + u[1], b * u[0]])


def henon_at_b0(u, a, args):
    return henon(u, a, B0, args)


@pytest.fixture(scope="module")
def henon_points():
    """The period doubling (a = 0.3675) and the fold (a = -0.1225) of the
    fixed points at b = 0.3, from one-parameter branches."""
    doubling = hx.continue_fixed_points(
        henon_at_b0, jnp.array([0.6, 0.2]), 0.2, stop=0.5
    ).period_doublings[0]
    fold = hx.continue_fixed_points(
        henon_at_b0, jnp.array([1.0, 0.3]), 0.5, stop=-0.5
    ).folds[0]
    np.testing.assert_allclose(doubling.parameter, 3 * (1 - B0) ** 2 / 4, atol=1e-12)
    np.testing.assert_allclose(fold.parameter, -((1 - B0) ** 2) / 4, atol=1e-12)
    return doubling, fold


def test_henon_period_doubling_curve_and_its_1_2_resonance(henon_points):
    """Along b from 0.3 to -1.5 every point has a = 3 (1 - b)^2 / 4 to 1e-10, and
    its multiplier matrix is the map's Jacobian [[-2 a x, 1], [b, 0]] with
    det(M + I) = 0 (a multiplier -1; by the determinant, as the eigenvalues of the
    double -1 are only accurate to the root of rounding); at b = -1 the other
    multiplier (= b) is -1 too: a 1:2 resonance at (a, b) = (3, -1)."""
    doubling, _ = henon_points
    curve = hx.continue_bifurcation_curve(henon, doubling, B0, stop=-1.5)
    assert curve.succeeded and curve.kind == "period_doubling"
    assert curve.mu[0] == pytest.approx(B0) and curve.mu[-1] == pytest.approx(-1.5)
    np.testing.assert_allclose(curve.lam, 3 * (1 - curve.mu) ** 2 / 4, atol=1e-10)
    M = curve.branch.multiplier_matrix
    x, a, b = curve.u[:, 0], curve.lam, curve.mu
    jacobian = np.stack(
        [np.stack([-2 * a * x, np.ones_like(x)], -1), np.stack([b, 0 * x], -1)], -2
    )
    np.testing.assert_allclose(M, jacobian, atol=1e-12)
    assert np.max(np.abs(np.linalg.det(M + np.eye(2)))) < 1e-10
    (resonance,) = curve.special_points
    assert resonance.kind == "resonance_1_2" and resonance.located
    np.testing.assert_allclose(resonance.parameter, -1.0, atol=1e-9)  # b
    np.testing.assert_allclose(resonance.u[-1], 3.0, atol=1e-9)  # a


def test_henon_fold_curve_and_its_1_1_resonance(henon_points):
    """Along b from 0.3 to -1.5, a = -(1 - b)^2 / 4 to 1e-10; at b = -1 the
    other multiplier (= -b) reaches +1: a 1:1 resonance at (a, b) = (-1, -1)."""
    _, fold = henon_points
    curve = hx.continue_bifurcation_curve(
        henon, fold, B0, stop=-1.5, parameter_names=("a", "b")
    )
    assert curve.parameter_names == ("a", "b")
    np.testing.assert_allclose(curve.lam, -((1 - curve.mu) ** 2) / 4, atol=1e-10)
    (resonance,) = curve.special_points
    assert resonance.kind == "resonance_1_1" and resonance.located
    np.testing.assert_allclose(resonance.parameter, -1.0, atol=1e-9)
    np.testing.assert_allclose(resonance.u[-1], -1.0, atol=1e-9)


def rotation(u, lam, mu, args):
    """u -> (1 + lam) [[0, -1], [1, mu]] u + (0, u_0^3): the fixed point 0 has
    multipliers with product (1 + lam)^2 and sum (1 + lam) mu, so a Neimark-Sacker
    curve lam = 0 for |mu| < 2, the pair e^{+-i theta} with cos theta = mu / 2;
    1:1 resonance at mu = 2, 1:2 resonance at mu = -2."""
    del args
    A = (1 + lam) * jnp.array([[0.0, -1.0], [1.0, mu]])
    return A @ u + jnp.array([0.0, u[0] ** 3])


def test_neimark_sacker_curve_and_both_resonances():
    branch = hx.continue_fixed_points(
        lambda u, lam, args: rotation(u, lam, 0.5, args),
        jnp.zeros(2),
        -0.2,
        stop=0.2,
    )
    (torus,) = branch.neimark_sackers
    np.testing.assert_allclose(torus.parameter, 0.0, atol=1e-12)
    for stop, kind in ((2.5, "resonance_1_1"), (-2.5, "resonance_1_2")):
        curve = hx.continue_bifurcation_curve(rotation, torus, 0.5, stop=stop)
        np.testing.assert_allclose(curve.lam, 0.0, atol=1e-10)
        (point,) = curve.special_points
        assert point.kind == kind and point.located
        np.testing.assert_allclose(point.parameter, np.sign(stop) * 2.0, atol=1e-9)


def cusp_map(u, lam, mu, args):
    """(x, y) -> (x + lam + mu x - x^3, y / 2 + x^2): fixed points where
    lam + mu x - x^3 = 0, multipliers 1 + mu - 3 x^2 and 1/2. Its fold curve is
    mu = 3 x^2, lam = -2 x^3, which reverses in the (lam, mu) plane at its cusp
    (0, 0), where the fold's quadratic coefficient -3 x vanishes."""
    del args
    x, y = u
    return jnp.array([x + lam + mu * x - x**3, 0.5 * y + x**2])


def test_fold_curve_through_a_cusp():
    """From the fold at mu = 0.75 (x = 1/2, lam = -1/4) the fold curve runs down
    to the cusp and back up the other fold (x = -1/2, lam = 1/4): every point
    is (lam, mu) = (-2 x^3, 3 x^2) to 1e-10, and the cusp is located at (0, 0)
    to 1e-9, the curve's one codimension-two point."""
    folds = hx.continue_fixed_points(
        lambda u, lam, args: cusp_map(u, lam, 0.75, args),
        jnp.array([1.1, 2.42]),
        0.5,
        stop=-0.5,
    ).folds
    np.testing.assert_allclose([p.parameter for p in folds], [-0.25, 0.25], atol=1e-12)
    fold = folds[0]
    curve = hx.continue_bifurcation_curve(cusp_map, fold, 0.75, stop=-0.5)
    assert curve.result == hx.RESULTS.reached_bound
    x = curve.u[:, 0]
    np.testing.assert_allclose(curve.lam, -2 * x**3, atol=1e-10)
    np.testing.assert_allclose(curve.mu, 3 * x**2, atol=1e-10)
    np.testing.assert_allclose(x[[0, -1]], [0.5, -0.5], atol=1e-10)
    (cusp,) = curve.special_points
    assert cusp.kind == "cusp" and cusp.located
    np.testing.assert_allclose(cusp.parameter, 0.0, atol=1e-9)  # mu
    np.testing.assert_allclose(cusp.u, [0.0, 0.0, 0.0], atol=1e-9)  # x, y, lam


def test_curve_argument_errors(henon_points):
    doubling, _ = henon_points
    with pytest.raises(ValueError, match="point"):
        hx.continue_bifurcation_curve(henon, "fold", B0, stop=1.0)
    with pytest.raises(ValueError, match="fn"):
        hx.continue_bifurcation_curve(
            lambda u, a, b, args: u[:1], doubling, B0, stop=1.0
        )
    with pytest.raises(ValueError, match="mu0"):
        hx.continue_bifurcation_curve(henon, doubling, B0, stop=(0.5, 1.0))
    with pytest.raises(ValueError, match="parameter_names"):
        hx.continue_bifurcation_curve(
            henon, doubling, B0, stop=1.0, parameter_names=("a",)
        )
