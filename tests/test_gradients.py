"""Derivatives of the hopper's periodic orbits with respect to parameters, in reverse
and forward mode, against central differences of converged orbits."""

import functools

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models


GRADIENT_RTOL = 1e-6  # derivatives against central differences (relative)
TOL = 1e-12  # integration tolerance: the differences resolve 1e-6 of the slopes
NAMES = ("d_G", "k", "d_F", "mu")
PARAMS = hx.canonical_params(models.hopper.make_params())
THETA = jnp.array([getattr(PARAMS, n) for n in NAMES])


def _quantities(system, section, form, adjoint, names=NAMES):
    """period, spectral radius, T_c/T at touchdown and upper apex of the orbit, as
    a function of the parameters `names` (default (d_G, k, d_F, mu))."""
    settings = hx.Settings(rtol=TOL, atol=TOL, adjoint=adjoint)

    def quantities(theta):
        p = eqx.tree_at(
            lambda q: tuple(getattr(q, n) for n in names), PARAMS, tuple(theta)
        )
        orbit = hx.find_periodic_orbit(
            system,
            section,
            models.hopper.orbit_guess(p),
            p,
            settings=settings,
            analyse=False,
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


@functools.cache
def _derivatives(form):
    """The form's system and section, and central differences of its quantities
    at THETA (computed once per form for the module)."""
    if form == "minimal":
        system, section = models.hopper.minimal()[0], models.hopper.section()
    else:
        system, section = models.hopper.constrained()[0], models.hopper.section(form)
    value = jax.jit(_quantities(system, section, form, None))
    return form, system, section, value(THETA), _central_differences(value, THETA)


# Slow: the reverse-mode program compiles for about 30 s, the differences' for 15 s
# (the fast set checks the same derivative rule in both modes on the rimless wheel,
# `test_wheel_gradients.py`, and through `hx.tune` in reverse mode).
@pytest.fixture(
    scope="module",
    params=[
        pytest.param("minimal", marks=pytest.mark.slow),
        pytest.param("constrained", marks=pytest.mark.slow),
    ],
)
def hopper_derivatives(request):
    return _derivatives(request.param)


def test_reverse_mode_gradient(hopper_derivatives):
    """jax.grad of a random combination of the four quantities (one backward pass
    for all four parameters) against the differences on the minimal form, and
    against jax.grad in one of them, whose transpose is evaluated by the other
    route (forward lanes along the parameter and the section's unit vectors, with
    fewer varied entries than the section's n + 1; the spectral radius takes them
    through the variational pass); on the constrained form (KKT accelerations,
    projection impact), the same rule's forward-mode directional derivative along
    a random direction, with the same default settings (its reverse pass is that
    linear map transposed; one compile less)."""
    form, system, section, _, fd = hopper_derivatives
    weights = jnp.array([0.7, -1.3, 2.1, 0.4])
    if form == "minimal":
        quantities = _quantities(system, section, form, None)
        gradient = jax.jit(jax.grad(lambda th: weights @ quantities(th)))(THETA)
        np.testing.assert_allclose(gradient, weights @ fd, rtol=GRADIENT_RTOL)
        in_k = _quantities(system, section, form, None, names=("k",))
        slope = jax.jit(jax.grad(lambda th: weights @ in_k(th)))(THETA[1:2])
        np.testing.assert_allclose(slope[0], gradient[1], rtol=1e-9)
        np.testing.assert_allclose(slope[0], weights @ fd[:, 1], rtol=GRADIENT_RTOL)
        return
    quantities = _quantities(system, section, form, None)
    direction = jnp.array([0.3, -0.8, 0.5, 0.1])
    _, slope = jax.jit(
        lambda th: jax.jvp(lambda t: weights @ quantities(t), (th,), (direction,))
    )(THETA)
    np.testing.assert_allclose(slope, weights @ fd @ direction, rtol=GRADIENT_RTOL)


@pytest.mark.slow
def test_reverse_mode_gradient_of_flow_outputs():
    """jax.grad of outputs that do not depend on the monodromy (period, stance
    share, apex) sweeps back through a plain cycle instead of its variational
    equation: against the differences, and against the same gradient taken with
    the monodromy's output in the objective (with weight zero, so that the
    backward pass goes through the variational equation)."""
    form, system, section, _, fd = _derivatives("minimal")
    quantities = _quantities(system, section, form, None)
    flow_only = jnp.array([0.7, 0.0, 2.1, 0.4])

    def flow_objective(theta):
        q = quantities(theta)
        return flow_only[0] * q[0] + flow_only[2] * q[2] + flow_only[3] * q[3]

    gradient = jax.jit(jax.grad(flow_objective))(THETA)
    np.testing.assert_allclose(gradient, flow_only @ fd, rtol=GRADIENT_RTOL)
    through_monodromy = jax.jit(jax.grad(lambda th: flow_only @ quantities(th)))(THETA)
    np.testing.assert_allclose(gradient, through_monodromy, rtol=1e-9)


@pytest.mark.slow
def test_forward_mode_jacobian():
    """jax.jacfwd of the four quantities in the four parameters against the
    differences, on the minimal form, with the default settings (the same as for
    jax.grad: the derivative is one linear map with a forward and a transposed
    rule); and with `diffrax.ForwardMode()`, which changes nothing (the
    constrained form's derivative is checked above)."""
    form, system, section, _, fd = _derivatives("minimal")
    quantities = _quantities(system, section, form, None)
    jacobian = jax.jit(jax.jacfwd(quantities))(THETA)
    np.testing.assert_allclose(jacobian, fd, rtol=GRADIENT_RTOL, atol=1e-12)
    explicit = _quantities(system, section, form, dfx.ForwardMode())
    np.testing.assert_allclose(
        jax.jit(jax.jacfwd(explicit))(THETA), jacobian, rtol=1e-12, atol=1e-15
    )


# Slow: 17 s per mode cold (a program of its own each); the fast set keeps the
# hopper's reverse-mode gradient against central differences (above) and the
# rimless wheel's derivatives in both modes (test_wheel_gradients.py).
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_derivatives_where_the_state_is_integrated_exactly(mode):
    """From rest with the hopper's spring exactly relaxed, the flight is a free fall
    that a fifth-order Runge-Kutta step reproduces exactly: the state's error
    estimate is zero, and without a floor the steps grew tenfold each time while
    the perturbed motion (the spring's oscillation, 35 rad/s) went unresolved;
    the event times' derivatives came out wrong by about 1e4 with a successful
    status. Both modes against central differences."""
    system, _ = models.hopper.minimal()
    params = hx.canonical_params(models.hopper.make_params())
    adjoint = dfx.ForwardMode() if mode == "forward" else None
    settings = hx.Settings(adjoint=adjoint)
    x0 = jnp.array([1.15, 0.15, 0.0, 0.0])  # z_U - z_L = L0: the spring relaxed

    def event_times(x):
        run = hx.simulate(system, x, params, n_events=3, settings=settings)
        return run.t_events

    assert hx.status_name(hx.simulate(system, x0, params, n_events=3).result) == [
        "successful"
    ]
    jacobian = (jax.jacfwd if mode == "forward" else jax.jacrev)(event_times)(x0)
    step = 1e-6
    columns = [
        (event_times(x0 + step * e) - event_times(x0 - step * e)) / (2 * step)
        for e in np.eye(4)
    ]
    reference = np.stack(columns, axis=1)
    np.testing.assert_allclose(jacobian, reference, rtol=1e-5, atol=1e-6)
