"""Every public routine that returns numbers composes with JAX's transformations.

The matrix: each routine under `jax.jit` with its inputs passed as arguments and
closed over, under `jax.vmap`, `jax.grad` and `jax.jacfwd`. Values are checked
against the untransformed call (to `VALUE_TOL`), derivatives against central finite
differences of the untransformed call (to `FD_RTOL`). The models are the cheapest
of the zoo: the bouncing ball (polynomial flights, so finite differences are exact
up to rounding) and the rimless wheel (one mode, one transition). Where a
combination is not offered, the test pins the error that names the transformation.
Each compiled program is built once per module (module-scoped fixtures)."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from helpers import FD_RTOL, central_jacobian
from hybrax import models


# Transformed against untransformed values: the same program up to XLA's fusion
# choices, so agreement to rounding.
VALUE_TOL = 1e-12
# The wheel's flow is not polynomial: integrate tightly so that central
# differences (step 1e-5) resolve derivatives to about 1e-7.
WHEEL_SETTINGS = hx.Settings(rtol=1e-12, atol=1e-12)
WHEEL_FORWARD = hx.Settings(rtol=1e-12, atol=1e-12, adjoint=dfx.ForwardMode())
FORWARD = hx.Settings(adjoint=dfx.ForwardMode())

BALL, BALL_PARAMS = models.bouncing_ball.bouncing_ball()
WHEEL, WHEEL_PARAMS = models.rimless_wheel.rimless_wheel()
WHEEL_SECTION = models.rimless_wheel.section()


def _close(a, b, tol=VALUE_TOL):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _jacobian_close(ad, fd, atol=1e-8):
    np.testing.assert_allclose(np.asarray(ad), fd, rtol=FD_RTOL, atol=atol)


# --- hx.simulate: the ball from height h, speed v0, restitution e ---------------


def _ball(theta, settings=None):
    """Three impacts of the ball from `[h, v0]` with restitution `e`: their
    times and the speeds after them."""
    p = eqx.tree_at(lambda q: q.e, hx.canonical_params(BALL_PARAMS), theta[2])
    sol = hx.simulate(
        BALL, theta[:2], p, n_events=3, settings=settings, phase_observables=False
    )
    return jnp.concatenate([sol.t_events, sol.x_after[:, 1]])


BALL_THETA = np.array([1.0, 0.5, 0.8])
BALL_THETAS = np.array([[1.0, 0.5, 0.8], [2.0, -1.0, 0.6], [0.5, 0.0, 0.9]])
# Weights of the scalar that jax.grad differentiates.
BALL_WEIGHTS = np.array([1.0, -0.5, 0.25, 2.0, 0.3, -1.5])


@pytest.fixture(scope="module")
def ball_eager():
    return np.asarray(_ball(jnp.asarray(BALL_THETA)))


@pytest.fixture(scope="module")
def ball_fd():
    return central_jacobian(lambda th: _ball(jnp.asarray(th)), BALL_THETA)


# Slow: 10-20 s cold, over the fast set's share (run by .ci/run).
@pytest.mark.slow
def test_simulate_under_jit(ball_eager):
    """Inputs as arguments and closed over give the eager values, and so does the
    once-failing program whose state and parameters are closed over (the eager
    domain check then ran on tracers)."""
    _close(jax.jit(_ball)(jnp.asarray(BALL_THETA)), ball_eager)
    _close(jax.jit(lambda: _ball(jnp.asarray(BALL_THETA)))(), ball_eager)
    x0 = jnp.array([1.0, 0.0])
    p = hx.canonical_params(BALL_PARAMS)
    eager = hx.simulate(BALL, x0, p, n_events=4).t_events
    scaled = jax.jit(lambda k: hx.simulate(BALL, x0, p, n_events=4).t_events * k)
    _close(scaled(1.0), eager)
    _close(scaled(2.0), 2 * eager)


def test_simulate_under_vmap():
    batched = jax.vmap(_ball)(jnp.asarray(BALL_THETAS))
    for i, theta in enumerate(BALL_THETAS):
        _close(batched[i], _ball(jnp.asarray(theta)))


def test_simulate_under_grad(ball_fd):
    grad = jax.grad(lambda th: BALL_WEIGHTS @ _ball(th))(jnp.asarray(BALL_THETA))
    _jacobian_close(grad, BALL_WEIGHTS @ ball_fd)


def test_simulate_under_jacfwd(ball_fd):
    """Forward mode with `Settings(adjoint=diffrax.ForwardMode())`; the default
    adjoint is reverse-only and JAX says so (documented in `hx.simulate`)."""
    theta = jnp.asarray(BALL_THETA)
    _jacobian_close(jax.jacfwd(lambda th: _ball(th, FORWARD))(theta), ball_fd)
    with pytest.raises(TypeError, match="forward-mode autodiff"):
        jax.jacfwd(_ball)(theta)


# --- hx.poincare_map: the wheel's step map in (u, gamma) ------------------------


def _wheel_params(gamma):
    return eqx.tree_at(lambda q: q.gamma, hx.canonical_params(WHEEL_PARAMS), gamma)


def _step(theta, settings=WHEEL_SETTINGS):
    """The wheel's speed after the next heel strike from speed `u` on slope
    `gamma`, and the strike's time."""
    u_next, sol = hx.poincare_map(
        WHEEL, WHEEL_SECTION, theta[:1], _wheel_params(theta[1]), settings=settings
    )
    return jnp.concatenate([u_next, sol.t_events])


STEP_THETA = np.array([1.2, 0.08])
STEP_THETAS = np.array([[1.2, 0.08], [1.0, 0.05], [1.5, 0.1]])


@pytest.fixture(scope="module")
def step_eager():
    return np.asarray(_step(jnp.asarray(STEP_THETA)))


@pytest.fixture(scope="module")
def step_fd():
    return central_jacobian(lambda th: _step(jnp.asarray(th)), STEP_THETA, h=1e-5)


def test_poincare_map_under_jit(step_eager):
    _close(jax.jit(_step)(jnp.asarray(STEP_THETA)), step_eager)
    _close(jax.jit(lambda: _step(jnp.asarray(STEP_THETA)))(), step_eager)


def test_poincare_map_under_vmap():
    batched = jax.vmap(_step)(jnp.asarray(STEP_THETAS))
    for i, theta in enumerate(STEP_THETAS):
        _close(batched[i], _step(jnp.asarray(theta)))


def test_poincare_map_under_jacfwd(step_fd):
    theta = jnp.asarray(STEP_THETA)
    _jacobian_close(jax.jacfwd(lambda th: _step(th, WHEEL_FORWARD))(theta), step_fd)
    with pytest.raises(TypeError, match="forward-mode autodiff"):
        jax.jacfwd(_step)(theta)


@pytest.mark.slow
def test_poincare_map_under_grad(step_fd):
    grad = jax.grad(lambda th: _step(th)[0])(jnp.asarray(STEP_THETA))
    _jacobian_close(grad, step_fd[0])


# --- hx.find_periodic_orbit: the wheel's gait in (gamma, alpha) ---------------


def _orbit(theta):
    """The wheel's period, speed after heel strike and multiplier on its orbit."""
    p = eqx.tree_at(
        lambda q: (q.gamma, q.alpha),
        hx.canonical_params(WHEEL_PARAMS),
        (theta[0], theta[1]),
    )
    orbit = hx.find_periodic_orbit(
        WHEEL,
        WHEEL_SECTION,
        jnp.array([1.0]),
        p,
        settings=WHEEL_SETTINGS,
        analyse=False,
        phase_observables=False,
    )
    return jnp.stack([orbit.period, orbit.u[0], orbit.spectral_radius])


ORBIT_THETA = np.array([0.08, np.pi / 8])
ORBIT_THETAS = np.array([[0.08, np.pi / 8], [0.05, 0.3], [0.1, 0.35]])


@pytest.fixture(scope="module")
def orbit_eager():
    return np.asarray(_orbit(jnp.asarray(ORBIT_THETA)))


@pytest.fixture(scope="module")
def orbit_fd():
    return central_jacobian(lambda th: _orbit(jnp.asarray(th)), ORBIT_THETA, h=1e-5)


@pytest.mark.slow
def test_find_periodic_orbit_under_jit(orbit_eager):
    """Also against the closed forms: the speed and the multiplier cos^2(2 alpha)."""
    p = eqx.tree_at(lambda q: q.gamma, hx.canonical_params(WHEEL_PARAMS), 0.08)
    _close(orbit_eager[1], models.rimless_wheel.fixed_point(p), tol=1e-8)
    _close(orbit_eager[2], np.cos(np.pi / 4) ** 2, tol=1e-6)
    _close(jax.jit(_orbit)(jnp.asarray(ORBIT_THETA)), orbit_eager)
    _close(jax.jit(lambda: _orbit(jnp.asarray(ORBIT_THETA)))(), orbit_eager)


@pytest.mark.slow
def test_find_periodic_orbit_under_vmap():
    batched = jax.vmap(_orbit)(jnp.asarray(ORBIT_THETAS))
    for i, theta in enumerate(ORBIT_THETAS):
        _close(batched[i], _orbit(jnp.asarray(theta)), tol=1e-10)


@pytest.mark.slow
def test_find_periodic_orbit_under_grad_and_jacfwd(orbit_fd):
    """Both modes with the default settings. The multiplier's derivatives are
    third derivatives of the flow: noise of a few 1e-6 in central differences
    (see tests/test_wheel_gradients.py), hence its absolute tolerance."""
    theta = jnp.asarray(ORBIT_THETA)
    jacobian = jax.jacfwd(_orbit)(theta)
    _jacobian_close(jacobian[:2], orbit_fd[:2])
    _jacobian_close(jacobian[2], orbit_fd[2], atol=1e-5)
    for row in range(3):
        grad = jax.grad(lambda th, row=row: _orbit(th)[row])(theta)
        _close(grad, jacobian[row], tol=1e-9)


# --- hx.monodromy: one wheel step from a section state, in (state, gamma) -------


def _monodromy(theta):
    analysis = hx.monodromy(
        WHEEL,
        WHEEL_SECTION,
        theta[:2],
        _wheel_params(theta[2]),
        settings=WHEEL_SETTINGS,
    )
    return jnp.concatenate(
        [analysis.monodromy_ad.ravel(), analysis.monodromy_saltation.ravel()]
    )


MONODROMY_THETA = np.array([0.08 - np.pi / 8, 1.1, 0.08])
MONODROMY_THETAS = np.array([[0.08 - np.pi / 8, 1.1, 0.08], [-0.3, 1.3, 0.05]])


@pytest.mark.slow
def test_monodromy_under_transformations():
    """jit, vmap and jacfwd; reverse mode is not offered (`hx.monodromy` is
    differentiable in forward mode only) and JAX names it."""
    theta = jnp.asarray(MONODROMY_THETA)
    eager = np.asarray(_monodromy(theta))
    _close(eager[:4], eager[4:], tol=1e-7)  # AD and saltation routes agree
    _close(jax.jit(_monodromy)(theta), eager)
    _close(jax.jit(lambda: _monodromy(jnp.asarray(MONODROMY_THETA)))(), eager)
    batched = jax.vmap(_monodromy)(jnp.asarray(MONODROMY_THETAS))
    for i, th in enumerate(MONODROMY_THETAS):
        _close(batched[i], _monodromy(jnp.asarray(th)), tol=1e-10)
    fd = central_jacobian(lambda th: _monodromy(jnp.asarray(th)), MONODROMY_THETA, 1e-5)
    _jacobian_close(jax.jacfwd(_monodromy)(theta), fd, atol=1e-6)
    with pytest.raises(ValueError, match="Reverse-mode differentiation"):
        jax.grad(lambda th: _monodromy(th)[0])(theta)


# --- hx.saltation_matrix: the ball's impact, in (x_before, e) -------------------


def _saltation(theta):
    p = eqx.tree_at(lambda q: q.e, hx.canonical_params(BALL_PARAMS), theta[2])
    return hx.saltation_matrix(BALL, "impact", 0.3, theta[:2], p).ravel()


SALTATION_THETA = np.array([0.0, -3.0, 0.8])
SALTATION_THETAS = np.array([[0.0, -3.0, 0.8], [0.0, -1.0, 0.5], [1e-3, -2.0, 0.9]])


def test_saltation_matrix_under_transformations():
    """jit (arguments, closed over), vmap, grad and jacfwd; the closed form
    $S = [[-e, 0], [(1 + e) g / v, -e]]$ of the ball's impact at speed $v < 0$."""
    theta = jnp.asarray(SALTATION_THETA)
    eager = np.asarray(_saltation(theta))
    e, v, g = 0.8, -3.0, 9.81
    _close(eager, [-e, 0.0, -(1 + e) * g / v, -e], tol=1e-14)
    _close(jax.jit(_saltation)(theta), eager)
    _close(jax.jit(lambda: _saltation(jnp.asarray(SALTATION_THETA)))(), eager)
    batched = jax.vmap(_saltation)(jnp.asarray(SALTATION_THETAS))
    for i, th in enumerate(SALTATION_THETAS):
        _close(batched[i], _saltation(jnp.asarray(th)))
    fd = central_jacobian(lambda th: _saltation(jnp.asarray(th)), SALTATION_THETA)
    _jacobian_close(jax.jacfwd(_saltation)(theta), fd)
    _jacobian_close(jax.grad(lambda th: _saltation(th)[2])(theta), fd[2])


# --- hx.floquet_multipliers: moduli of a monodromy's multipliers ----------------


def _multipliers(matrix):
    trivial, _, nontrivial = hx.floquet_multipliers(matrix.reshape(2, 2))
    return jnp.abs(jnp.concatenate([trivial[None], nontrivial]))


MONODROMY = np.array([0.5, 0.1, 0.2, 0.9])


def test_floquet_multipliers_under_transformations():
    matrix = jnp.asarray(MONODROMY)
    eager = np.asarray(_multipliers(matrix))
    _close(np.sort(eager), np.sort(np.abs(np.linalg.eigvals(MONODROMY.reshape(2, 2)))))
    _close(jax.jit(_multipliers)(matrix), eager)
    _close(jax.jit(lambda: _multipliers(jnp.asarray(MONODROMY)))(), eager)
    batch = jnp.stack([matrix, 0.5 * matrix, matrix.at[1].set(-0.3)])
    batched = jax.vmap(_multipliers)(batch)
    for i in range(3):
        _close(batched[i], _multipliers(batch[i]))
    fd = central_jacobian(lambda m: _multipliers(jnp.asarray(m)), MONODROMY)
    _jacobian_close(jax.jacfwd(_multipliers)(matrix), fd)
    _jacobian_close(jax.grad(lambda m: _multipliers(m)[1])(matrix), fd[1])


# --- hx.phase_fundamental_matrix: the wheel's stance flow, in (x0, l) ----------


def _fundamental(theta):
    p = eqx.tree_at(lambda q: q.l, hx.canonical_params(WHEEL_PARAMS), theta[2])
    return hx.phase_fundamental_matrix(
        WHEEL, "stance", 0.0, theta[:2], 0.3, p, settings=WHEEL_SETTINGS
    ).ravel()


FUNDAMENTAL_THETA = np.array([-0.3, 1.0, 1.0])
FUNDAMENTAL_THETAS = np.array([[-0.3, 1.0, 1.0], [-0.2, 1.5, 0.8], [0.0, 0.5, 1.2]])


def test_phase_fundamental_matrix_under_transformations():
    """jit and vmap (jacfwd: slow, below); reverse mode is not offered (the
    fundamental matrix is a forward-mode derivative through the solve) and JAX
    names it."""
    theta = jnp.asarray(FUNDAMENTAL_THETA)
    eager = np.asarray(_fundamental(theta))
    _close(jax.jit(_fundamental)(theta), eager)
    _close(jax.jit(lambda: _fundamental(jnp.asarray(FUNDAMENTAL_THETA)))(), eager)
    batched = jax.vmap(_fundamental)(jnp.asarray(FUNDAMENTAL_THETAS))
    for i, th in enumerate(FUNDAMENTAL_THETAS):
        _close(batched[i], _fundamental(jnp.asarray(th)))
    with pytest.raises(ValueError, match="Reverse-mode differentiation"):
        jax.grad(lambda th: _fundamental(th)[0])(theta)


@pytest.mark.slow
def test_phase_fundamental_matrix_under_jacfwd():
    """A second derivative of the flow (forward over forward)."""
    fd = central_jacobian(
        lambda th: _fundamental(jnp.asarray(th)), FUNDAMENTAL_THETA, h=1e-5
    )
    jacobian = jax.jacfwd(_fundamental)(jnp.asarray(FUNDAMENTAL_THETA))
    _jacobian_close(jacobian, fd, atol=1e-7)


# --- hx.sweep: an eager driver, not a traceable function -------------------------


def test_sweep_is_a_loop_of_vmap_and_refuses_tracers():
    """`hx.sweep` equals `jax.vmap` of its function; under a transformation it
    says it is an eager driver (before: a bare `TracerArrayConversionError`)."""
    batch = jnp.asarray(SALTATION_THETAS)
    _close(hx.sweep(_saltation, batch), jax.vmap(_saltation)(batch))
    for transform in (jax.jit, jax.vmap, jax.grad):
        with pytest.raises(ValueError, match="eager driver"):
            transform(lambda b: hx.sweep(jnp.sin, b).sum())(jnp.arange(3.0))
