"""Derivatives of periodic orbits with respect to parameters, in reverse and forward
mode, against central differences of converged orbits and the rimless wheel's
closed form; batches, failed elements, and gradient-based tuning."""

import json

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models
from hybrax._cli import main


GRADIENT_RTOL = 1e-6  # derivatives against central differences (relative)
TOL = 1e-12  # integration tolerance: the differences resolve 1e-6 of the slopes
NAMES = ("d_G", "k", "d_F", "mu")
PARAMS = hx.canonical_params(models.hopper_params())
THETA = jnp.array([getattr(PARAMS, n) for n in NAMES])


def _quantities(system, section, form, adjoint):
    """period, spectral radius, T_c/T at touchdown and upper apex of the orbit, as
    a function of (d_G, k, d_F, mu)."""
    settings = hx.Settings(rtol=TOL, atol=TOL, adjoint=adjoint)

    def quantities(theta):
        p = eqx.tree_at(
            lambda q: tuple(getattr(q, n) for n in NAMES), PARAMS, tuple(theta)
        )
        orbit, _ = hx.find_periodic_orbit(
            system, section, models.orbit_guess(p), p, settings=settings, analyse=False
        )
        apex = orbit.cycle.phase_observables["apex_upper"][0]
        share = orbit.T_c[0] / (orbit.T_c[0] + orbit.T_a[0])
        return jnp.stack([orbit.period, orbit.spectral_radius, share, apex])

    return quantities


def _central_differences(fn, theta, h=1e-5):
    """Central differences in each parameter, relative step h."""
    columns = []
    for i in range(theta.shape[0]):
        step = h * abs(float(theta[i]))
        plus = np.asarray(fn(theta.at[i].add(step)))
        minus = np.asarray(fn(theta.at[i].add(-step)))
        columns.append((plus - minus) / (2 * step))
    return np.stack(columns, axis=1)


@pytest.fixture(scope="module", params=["minimal", "constrained"])
def hopper_derivatives(request):
    form = request.param
    if form == "minimal":
        system, section = models.minimal_hopper(), models.hopper_section()
    else:
        system, section = models.constrained_hopper(), models.hopper_section(form)
    value = jax.jit(_quantities(system, section, form, None))
    fd = _central_differences(value, THETA)
    return form, system, section, value(THETA), fd


def test_reverse_mode_gradient(hopper_derivatives):
    """jax.grad of a random combination of the four quantities (one backward pass
    for all four parameters) against the differences."""
    form, system, section, _, fd = hopper_derivatives
    quantities = _quantities(system, section, form, None)
    weights = jnp.array([0.7, -1.3, 2.1, 0.4])
    gradient = jax.jit(jax.grad(lambda th: weights @ quantities(th)))(THETA)
    np.testing.assert_allclose(gradient, weights @ fd, rtol=GRADIENT_RTOL)


def test_forward_mode_jacobian(hopper_derivatives):
    """jax.jacfwd (ForwardMode settings) of the four quantities in the four
    parameters against the differences."""
    form, system, section, _, fd = hopper_derivatives
    if form == "constrained":
        pytest.skip("forward mode is checked on the minimal form (compile time)")
    quantities = _quantities(system, section, form, dfx.ForwardMode())
    jacobian = jax.jit(jax.jacfwd(quantities))(THETA)
    np.testing.assert_allclose(jacobian, fd, rtol=GRADIENT_RTOL, atol=1e-12)


# --- the rimless wheel: closed forms ------------------------------------------


WHEEL = models.rimless_wheel()
WHEEL_SECTION = hx.PoincareSection(
    ("heelstrike",),
    chart=lambda u, p: jnp.stack([p.gamma - p.alpha, u[0]]),
    coordinates=lambda x, p: x[1:2],
)


def _wheel_orbit(gamma, alpha):
    """The wheel's speed after heel strike on its orbit and its multiplier."""
    p = eqx.tree_at(
        lambda q: (q.gamma, q.alpha),
        hx.canonical_params(models.RimlessWheelParams()),
        (gamma, alpha),
    )
    orbit, _ = hx.find_periodic_orbit(
        WHEEL,
        WHEEL_SECTION,
        jnp.array([1.0]),
        p,
        analyse=False,
        phase_observables=False,
    )
    return jnp.stack([orbit.u[0], orbit.spectral_radius])


def _wheel_closed_form(gamma, alpha, g=9.81, l=1.0):  # noqa: E741
    c2 = np.cos(2 * alpha) ** 2
    u = 4 * g / l * np.sin(alpha) * np.sin(gamma) * c2 / (1 - c2)
    omega = np.sqrt(u)
    d_omega_d_gamma = omega * np.cos(gamma) / (2 * np.sin(gamma))
    d_nu_d_alpha = -4 * np.cos(2 * alpha) * np.sin(2 * alpha)
    return omega, c2, d_omega_d_gamma, d_nu_d_alpha


@pytest.fixture(scope="module")
def wheel_gradient():
    return jax.jit(jax.vmap(jax.jacrev(_wheel_orbit, argnums=(0, 1))))


def test_rimless_wheel_gradients_are_the_closed_form(wheel_gradient):
    """d(omega*)/d(gamma) and d(nu)/d(alpha) (nu = cos^2 2 alpha) in closed form;
    d(nu)/d(gamma) = 0. A batch with one failed element (a wheel on a slope of
    -0.05 rad rolls back: no orbit) equals a loop, its own row is NaN."""
    gammas = jnp.array([0.08, 0.05, -0.05])
    alphas = jnp.array([np.pi / 8, 0.3, np.pi / 8])
    (d_gamma, d_alpha) = wheel_gradient(gammas, alphas)
    for i in range(2):
        omega, nu, d_omega, d_nu = _wheel_closed_form(
            float(gammas[i]), float(alphas[i])
        )
        np.testing.assert_allclose(d_gamma[i, 0], d_omega, rtol=1e-7)
        # The multiplier's derivatives are third derivatives of the flow; their
        # discretisation noise was measured at 2e-9 to 5e-6 (tolerance 1e-12),
        # against derivatives of order 1 (d nu / d alpha = -2 at pi/8).
        np.testing.assert_allclose(d_gamma[i, 1], 0.0, atol=1e-5)
        np.testing.assert_allclose(d_alpha[i, 1], d_nu, rtol=1e-5)
    # The failed element: NaN derivatives, no exception, the others untouched.
    assert np.all(np.isnan(d_gamma[2])) and np.all(np.isnan(d_alpha[2]))
    single = jax.jacrev(_wheel_orbit, argnums=(0, 1))(gammas[1], alphas[1])
    np.testing.assert_allclose(d_gamma[1], single[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d_alpha[1], single[1], rtol=1e-10, atol=1e-12)


def test_forward_mode_at_a_failed_point_gives_nan_not_an_exception():
    """jax.linearize (forward mode) at parameters without an orbit: NaN tangents
    and status, no runtime error from the implicit-function solve."""
    p = hx.canonical_params(models.RimlessWheelParams(gamma=-0.05))
    settings = hx.Settings(adjoint=dfx.ForwardMode())

    def speed(gamma):
        q = eqx.tree_at(lambda s: s.gamma, p, gamma)
        orbit, _ = hx.find_periodic_orbit(
            WHEEL,
            WHEEL_SECTION,
            jnp.array([1.0]),
            q,
            settings=settings,
            analyse=False,
            phase_observables=False,
        )
        return orbit.u[0]

    value, linear = jax.linearize(speed, jnp.asarray(-0.05))
    assert np.isnan(float(value)) and np.isnan(float(linear(jnp.asarray(1.0))))


# --- tuning ----------------------------------------------------------------------


def test_tune_command_meets_the_apex_target(tmp_path):
    """`hybrax tune hopper`: the (d_G, k) whose upper mass hops to 1.15 m (to 1 mm)
    with the smallest multiplier, from the paper's parameters. The result is a
    stable orbit, found again from scratch, and a constrained minimum: by central
    differences there, the gradients of the multiplier and of the apex are
    parallel (first-order optimality on the target curve)."""
    code = main(
        ["tune", "hopper", "--vary", "d_G,k", "--target", "apex_upper=1.15"]
        + ["--minimize", "multiplier", "--no-progress", "--out", str(tmp_path)]
        + ["--json", str(tmp_path / "tune.json")]
    )
    assert code == 0
    data = json.loads((tmp_path / "tune.json").read_text())
    final = data["final"]
    assert final["converged"] and final["stable"] and final["targets_met"]
    assert abs(final["apex_upper"] - 1.15) < 1e-3
    assert data["history"] and {"objective", "values", "multipliers"} <= set(
        data["history"][0]
    )
    assert (tmp_path / "tune_path.png").is_file()
    # Re-found from scratch at the tuned parameters, and first-order optimal.
    system, section = models.minimal_hopper(), models.hopper_section()

    @jax.jit
    def apex_and_radius(theta):
        p = eqx.tree_at(lambda q: (q.d_G, q.k), PARAMS, tuple(theta))
        orbit, _ = hx.find_periodic_orbit(
            system, section, models.scan_orbit_guess(p), p, analyse=False
        )
        apex = orbit.cycle.phase_observables["apex_upper"][0]
        return jnp.stack([apex, orbit.spectral_radius])

    theta = jnp.array([final["values"]["d_G"], final["values"]["k"]])
    np.testing.assert_allclose(
        apex_and_radius(theta), [final["apex_upper"], final["multiplier"]], atol=1e-6
    )
    gradients = _central_differences(apex_and_radius, theta, h=1e-4)
    scaled = gradients * np.abs(np.asarray(theta))  # per relative change
    cross = scaled[0, 0] * scaled[1, 1] - scaled[0, 1] * scaled[1, 0]
    norms = np.linalg.norm(scaled[0]) * np.linalg.norm(scaled[1])
    assert abs(cross) / norms < 1e-2
