"""The constrained-mechanics core against closed forms."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models
from hybrax._mechanics import symmetric_solve


class CartesianPendulum(hx.AbstractLagrangianModel):
    """A point mass on a rod of length l in Cartesian coordinates (x, y up), with the
    nonlinear constraint (x^2 + y^2 - l^2)/2 = 0."""

    def mass_matrix(self, q, params):
        return params["m"] * jnp.eye(2)

    def forces(self, q, qd, params, t=0.0):
        return jnp.array([0.0, params["m"] * params["g"]])

    def constraints(self, q, params):
        return {"rod": jnp.atleast_1d(0.5 * (q @ q - params["l"] ** 2))}


class PlanarBody(hx.AbstractLagrangianModel):
    """A rigid body (x, y, theta) touching the ground at a point r below its centre,
    with a tangential and a normal contact constraint."""

    def mass_matrix(self, q, params):
        return jnp.diag(jnp.array([params["m"], params["m"], params["I"]]))

    def forces(self, q, qd, params, t=0.0):
        return jnp.array([0.0, params["m"] * params["g"], 0.0])

    def constraints(self, q, params):
        r = params["r"]
        return {
            "tangential": jnp.atleast_1d(q[0] + r * jnp.sin(q[2])),
            "normal": jnp.atleast_1d(q[1] - r * jnp.cos(q[2])),
        }


PEND = {"m": 2.0, "g": 9.81, "l": 1.5}


def test_pendulum_accelerations_and_tension():
    # theta measured from the downward vertical: x = l sin th, y = -l cos th.
    th, om = 0.7, -1.3
    l, g, m = PEND["l"], PEND["g"], PEND["m"]
    q = jnp.array([l * np.sin(th), -l * np.cos(th)])
    qd = jnp.array([l * np.cos(th) * om, l * np.sin(th) * om])
    qdd, lam = hx.constrained_accelerations(CartesianPendulum(), ("rod",), q, qd, PEND)
    th_dd = -g / l * np.sin(th)  # the pendulum equation
    expected = np.array(
        [
            l * (np.cos(th) * th_dd - np.sin(th) * om**2),
            l * (np.sin(th) * th_dd + np.cos(th) * om**2),
        ]
    )
    np.testing.assert_allclose(qdd, expected, atol=1e-12)
    # lambda = m (|v|^2 - g y) / l^2 (rod tension per unit length)
    v2 = (l * om) ** 2
    np.testing.assert_allclose(lam[0], m * (v2 - g * q[1]) / l**2, rtol=1e-12)


def test_convective_term_matches_second_derivative():
    q = jnp.array([0.3, -1.2])
    qd = jnp.array([0.8, 0.5])
    # gamma = (|q|^2 - l^2)/2 -> d2/dt2 along qd with qdd = 0 is |qd|^2.
    ct = hx.convective_term(CartesianPendulum(), ("rod",), q, qd, PEND)
    np.testing.assert_allclose(ct[0], qd @ qd, rtol=1e-14)


@pytest.fixture(scope="module")
def hopper_state():
    params = models.hopper.HopperParams()
    q = jnp.array([1.02, 1.02, 0.0, 0.0])
    qd = jnp.array([-1.1, -1.1, -0.75, -0.75])
    return params, q, qd


def test_projectors(hopper_state):
    params, q, qd = hopper_state
    model = models.hopper.HopperMechanics("ground")
    P_a, P_c = hx.admissible_projector(model, ("body", "ground"), q, params)
    H = model.mass_matrix(q, params)
    np.testing.assert_allclose(P_a @ P_a, P_a, atol=1e-14)
    np.testing.assert_allclose(P_c @ P_c, P_c, atol=1e-14)
    np.testing.assert_allclose(P_a + P_c, np.eye(4), atol=1e-14)
    np.testing.assert_allclose(P_a.T @ H @ P_c, np.zeros((4, 4)), atol=1e-12)
    impact = hx.plastic_impact(model, ("body", "ground"), q, qd, params)
    T = 0.5 * qd @ H @ qd
    np.testing.assert_allclose(impact.T_a + impact.T_c, T, rtol=1e-14)
    # The lower pair stops, the upper pair keeps its velocity.
    np.testing.assert_allclose(impact.qd_plus, [-1.1, -1.1, 0.0, 0.0], atol=1e-14)
    np.testing.assert_allclose(impact.T_c, 0.5 * params.m_L * 0.75**2, rtol=1e-13)
    # Seed 004: H (v+ - v-) = G^T impulse.
    G = hx.constraint_jacobian(model, ("body", "ground"), q, params)
    np.testing.assert_allclose(
        H @ (impact.qd_plus - qd), G.T @ impact.impulse, atol=1e-12
    )
    # The ground impulse is upward and equals m_L |v_L|.
    np.testing.assert_allclose(impact.impulse[-1], params.m_L * 0.75, rtol=1e-13)


def test_projector_on_nonlinear_constraint():
    q = jnp.array([0.6, -1.2])
    qd = jnp.array([1.0, 2.0])
    P_a, P_c = hx.admissible_projector(CartesianPendulum(), ("rod",), q, PEND)
    # The admissible velocity is the component tangent to the circle.
    impact = hx.plastic_impact(CartesianPendulum(), ("rod",), q, qd, PEND)
    np.testing.assert_allclose(impact.qd_plus @ q, 0.0, atol=1e-14)
    np.testing.assert_allclose(P_a @ qd, impact.qd_plus, atol=1e-14)
    radial = (qd @ q) / (q @ q) * q
    np.testing.assert_allclose(
        impact.T_c, 0.5 * PEND["m"] * radial @ radial, rtol=1e-13
    )


def test_ground_multiplier_matches_eq62(hopper_state):
    params, _, _ = hopper_state
    zU, vU = 1.013, 0.4
    q = jnp.array([zU, zU, 0.0, 0.0])
    qd = jnp.array([vU, vU, 0.0, 0.0])
    _, lam = hx.constrained_accelerations(
        models.hopper.HopperMechanics("ground"), ("body", "ground"), q, qd, params
    )
    expected = params.k * (zU - params.L0) + params.d_G * vU - params.m_L * params.g
    np.testing.assert_allclose(lam[-1], expected, rtol=1e-12)
    x_min = jnp.array([zU, 0.0, vU, 0.0])
    np.testing.assert_allclose(models.hopper.ground_multiplier(x_min, params), expected)


def test_critical_friction_closed_form():
    params = {"m": 3.0, "I": 0.2, "g": 9.81, "r": 0.4}
    th = 0.35
    q = jnp.array([0.0, params["r"] * np.cos(th), th])
    kappa = hx.critical_friction(PlanarBody(), "tangential", "normal", q, params)
    r, m, inertia = params["r"], params["m"], params["I"]
    w_nt = r**2 * np.sin(th) * np.cos(th) / inertia
    w_nn = 1 / m + r**2 * np.sin(th) ** 2 / inertia
    np.testing.assert_allclose(kappa, abs(w_nt) / w_nn, rtol=1e-13)


def test_mechanics_is_differentiable(hopper_state):
    params, q, qd = hopper_state

    def t_c(k):
        p = eqx.tree_at(lambda s: s.mu, params, k)
        return hx.plastic_impact(
            models.hopper.HopperMechanics("ground"), ("body", "ground"), q, qd, p
        ).T_c

    # T_c = 0.5 m (1 - mu) v_L^2 -> dT_c/dmu = -0.5 m v_L^2
    np.testing.assert_allclose(
        jax.grad(t_c)(0.8), -0.5 * params.m * 0.75**2, rtol=1e-12
    )


def test_unknown_constraint_group(hopper_state):
    params, q, qd = hopper_state
    with pytest.raises(ValueError, match="active"):
        hx.constrained_accelerations(
            models.hopper.HopperMechanics("ground"), ("floor",), q, qd, params
        )


def _kkt_matrix(rng, n, m):
    """A random KKT matrix [[H, G^T], [G, 0]]: H symmetric positive definite with a
    spread of scales (masses and inertias), G of full row rank."""
    B = rng.normal(size=(n, n))
    H = B @ B.T + np.diag(np.geomspace(0.05, 20.0, n))
    G = rng.normal(size=(m, n))
    return np.block([[H, G.T], [G, np.zeros((m, m))]])


@pytest.mark.parametrize("n,m", [(4, 0), (4, 3), (7, 2), (10, 4)])
def test_symmetric_solve_matches_pivoted_lu(n, m):
    # The unpivoted elimination (orders up to 12) and its fallback (order 14)
    # against LAPACK's pivoted LU through NumPy.
    rng = np.random.default_rng(n + 10 * m)
    A = _kkt_matrix(rng, n, m)
    b = rng.normal(size=n + m)
    expected = np.linalg.solve(A, b)
    np.testing.assert_allclose(symmetric_solve(A, b), expected, rtol=1e-11, atol=1e-12)
    batch = rng.normal(size=(3, n + m))
    np.testing.assert_allclose(
        jax.vmap(symmetric_solve, in_axes=(None, 0))(A, batch),
        np.linalg.solve(A, batch.T).T,
        rtol=1e-11,
        atol=1e-12,
    )


def test_symmetric_solve_derivatives_match_central_differences():
    # x(s) = A(s)^{-1} b(s) along a symmetric direction: forward and reverse mode
    # against central differences, and against the closed form
    # dx/ds = A^{-1}(db - dA x).
    rng = np.random.default_rng(3)
    A0 = _kkt_matrix(rng, 5, 2)
    dA = rng.normal(size=A0.shape)
    dA = np.block(
        [[dA[:5, :5] + dA[:5, :5].T, dA[:5, 5:]], [dA[:5, 5:].T, 0 * A0[5:, 5:]]]
    )
    b0, db = rng.normal(size=7), rng.normal(size=7)
    weights = rng.normal(size=7)

    def x_of(s):
        return symmetric_solve(A0 + s * dA, b0 + s * db)

    h = 1e-6
    central = (np.asarray(x_of(h)) - np.asarray(x_of(-h))) / (2 * h)
    x0 = np.linalg.solve(A0, b0)
    closed = np.linalg.solve(A0, db - dA @ x0)
    np.testing.assert_allclose(jax.jacfwd(x_of)(0.0), closed, rtol=1e-10)
    np.testing.assert_allclose(closed, central, rtol=1e-7, atol=1e-9)
    grad = jax.grad(lambda s: weights @ x_of(s))(0.0)
    np.testing.assert_allclose(grad, weights @ closed, rtol=1e-10)
