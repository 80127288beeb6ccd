"""Derivatives of the rimless wheel's orbit against its closed forms, in a batch
with a failed element, and NaN (not an exception) where no orbit exists."""

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models


TOL = 1e-12


WHEEL = models.rimless_wheel.rimless_wheel()[0]
WHEEL_SECTION = models.rimless_wheel.section()


def _wheel_orbit(gamma, alpha):
    """The wheel's speed after heel strike on its orbit and its multiplier."""
    p = eqx.tree_at(
        lambda q: (q.gamma, q.alpha),
        hx.canonical_params(models.rimless_wheel.RimlessWheelParams()),
        (gamma, alpha),
    )
    orbit = hx.find_periodic_orbit(
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


@pytest.mark.slow
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
    """jax.linearize (forward mode, default settings) at parameters without an
    orbit: NaN tangents and status, no runtime error from the implicit-function
    solve."""
    p = hx.canonical_params(models.rimless_wheel.RimlessWheelParams(gamma=-0.05))
    settings = hx.Settings()

    def speed(gamma):
        q = eqx.tree_at(lambda s: s.gamma, p, gamma)
        orbit = hx.find_periodic_orbit(
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


def _wheel_step(omega, gamma, alpha, g=9.81, l=1.0):  # noqa: E741
    """The wheel's step map in closed form: energy from one spoke's swing down the
    slope, then the impact's factor cos 2 alpha,
    P(omega) = cos(2 alpha) sqrt(omega^2 + 4 g / l sin(alpha) sin(gamma))."""
    return np.cos(2 * alpha) * np.sqrt(
        omega**2 + 4 * g / l * np.sin(alpha) * np.sin(gamma)
    )


@pytest.mark.slow
def test_poincare_map_reverse_gradient_is_the_closed_form():
    """jax.grad through `poincare_map` (one event-terminated cycle, reverse mode)
    in the speed and the slope, against the step map's closed-form derivatives, in
    a batch by `hx.sweep` (one compiled vmap; vmap against a loop is checked on
    the wheel's orbit above)."""
    p0 = hx.canonical_params(models.rimless_wheel.RimlessWheelParams())
    settings = hx.Settings(rtol=TOL, atol=TOL)

    def step(omega_gamma):
        omega, gamma = omega_gamma
        p = eqx.tree_at(lambda q: q.gamma, p0, gamma)
        u_next, _ = hx.poincare_map(
            WHEEL, WHEEL_SECTION, omega[None], p, settings=settings
        )
        return u_next[0]

    gradient = jax.grad(step)
    # Speeds that carry the wheel over the top (omega^2 > 2 g / l (1 - cos(gamma -
    # alpha))), where the closed form holds.
    points = jnp.array([[1.2, 0.08], [1.5, 0.05], [2.0, 0.1]])
    alpha, h = float(p0.alpha), 1e-6
    for (omega, gamma), row in zip(np.asarray(points), hx.sweep(gradient, points)):
        d_omega = (
            _wheel_step(omega + h, gamma, alpha) - _wheel_step(omega - h, gamma, alpha)
        ) / (2 * h)  # of the closed form: its derivative written out is no simpler
        d_gamma = (
            np.cos(2 * alpha)
            * 2
            * 9.81
            * np.sin(alpha)
            * np.cos(gamma)
            / np.sqrt(omega**2 + 4 * 9.81 * np.sin(alpha) * np.sin(gamma))
        )
        # Each gradient alone agrees to 1.2e-9 (with this suite's flags too). The
        # batch agrees to 1e-15 with the single ones under the library's XLA
        # options, but to 2e-8 under this suite's (optimisation level 0, classic
        # emitters, XLA's small-loop limit: `conftest.py`; measured with each
        # flag alone and in pairs: only all three move it), which compile the
        # vmapped reverse pass to other roundings. A wrong event-time term would
        # be of order 1.
        np.testing.assert_allclose(row, [d_omega, d_gamma], rtol=1e-7)


def _speed(orbit, p):
    return orbit.u[0]


def _tune_speed(params, target, minimiser=None):
    """`hx.tune` of the slope to a speed after heel strike, the target a run-time
    value (`hx.QuantityTarget`): one compiled program for every target."""
    return hx.tune(
        WHEEL,
        WHEEL_SECTION,
        jnp.array([1.0]),
        params,
        None,
        vary=["gamma"],
        constraints=[(hx.QuantityTarget(_speed, jnp.asarray(target)), 1e-7)],
        tune_settings=hx.TuneSettings(mode="reverse", minimiser=minimiser),
    )


def _closed_form_slope(params, omega):
    """The slope on which the wheel rolls at `omega` after heel strike:
    sin(gamma) = omega^2 (1 - c) / (4 (g/l) sin(alpha) c), c = cos^2(2 alpha)."""
    alpha = float(params.alpha)
    c = np.cos(2 * alpha) ** 2
    return np.arcsin(omega**2 * (1 - c) / (4 * 9.81 * np.sin(alpha) * c))


# Slow: 10-20 s cold, over the fast set's share (run by .ci/run).
@pytest.mark.slow
def test_tune_in_reverse_mode_finds_the_closed_form_slope():
    """`hx.tune(mode="reverse")` (BFGS on reverse-mode implicit-function
    gradients, the default): the slope on which the
    wheel rolls at omega* = 1.3 rad/s after heel strike, sin(gamma) = omega*^2
    (1 - c) / (4 (g/l) sin(alpha) c) with c = cos^2(2 alpha)."""
    params = hx.canonical_params(models.rimless_wheel.RimlessWheelParams())
    result = _tune_speed(params, 1.3)
    assert result.mode == "reverse" and bool(result.orbit.succeeded)
    # The constraint met to its tolerance: a feasible point, an optimum only
    # where the minimiser also met its own tolerance (here its 100 steps ran
    # out: the penalty (c / 1e-7)^2 is steep).
    assert result.targets_met and abs(float(result.orbit.u[0]) - 1.3) <= 1e-7
    assert result.succeeded
    assert hx.status_name(result.result)[0] in ("successful", "targets_met")
    assert bool(result.result == hx.RESULTS.successful) == (
        result.minimiser_result == "successful"
    )
    np.testing.assert_allclose(
        result.values["gamma"], _closed_form_slope(params, 1.3), rtol=1e-6
    )


@pytest.mark.slow
def test_a_tuning_round_trips_through_a_file(tmp_path):
    """Its history, orbit and tuned parameters come back bit for bit; the
    objective function (`problem`, for `objective_at`) is not data: None."""
    from helpers import assert_same_result

    params = hx.canonical_params(models.rimless_wheel.RimlessWheelParams())
    result = _tune_speed(params, 1.3)
    hx.save(tmp_path / "tune.npz", result)
    again = hx.load(tmp_path / "tune.npz")
    assert type(again) is hx.TuneResult and again.problem is None
    assert_same_result(result.orbit, again.orbit)
    assert_same_result(result.params, again.params)
    assert again.values == result.values and bool(again.result == result.result)
    assert [s.objective for s in again.history] == [s.objective for s in result.history]

    # The command line takes the tuned parameters from the file (`--params`).
    from hybrax._cli import main

    record = tmp_path / "run.json"
    code = main(
        ["simulate", "rimless-wheel", "--params", str(tmp_path / "tune.npz"),
         "--cycles", "1", "--no-figures", "--json", str(record), "-q"]
    )  # fmt: skip
    assert code == 0
    assert json.loads(record.read_text())["params"]["gamma"] == result.values["gamma"]
    # A saved result that holds no parameters of the model: one line, exit 2.
    hx.save(tmp_path / "orbit.npz", result.orbit)
    with pytest.raises(SystemExit) as stop:
        main(["simulate", "rimless-wheel", "--params", str(tmp_path / "orbit.npz")])
    assert stop.value.code == 2


@pytest.mark.slow
def test_tune_stops_at_the_parameters_rules():
    """A speed no slope gives (1000 rad/s; at most about 3.9 on the steepest
    slope, sin(gamma) = 1): the minimiser steepens the slope towards and past
    the class's rule |gamma| < pi/2. `hx.tune` stops at the last point inside
    the rule, says which rule the next step broke, and its result is an orbit
    at parameters that pass the class's own check."""
    params = hx.canonical_params(models.rimless_wheel.RimlessWheelParams())
    result = _tune_speed(params, 1000.0)
    assert result.minimiser_result == "parameter_rule"
    assert "`gamma` must be in (-pi/2, pi/2)" in result.rule
    gamma = result.values["gamma"]
    assert abs(gamma) < np.pi / 2
    dataclasses.replace(params, gamma=gamma)  # (the class's check passes)
    assert all(abs(step.values["gamma"]) < np.pi / 2 for step in result.history)
    assert not result.targets_met
    assert float(result.params.gamma) == gamma


@pytest.mark.slow
def test_a_minimiser_that_evaluates_in_its_own_step_finds_the_same_slope():
    """`optimistix.BestSoFarMinimiser` evaluates the objective twice per step
    (at its point, for the best so far, and in its BFGS's step), not once at
    `state.y_eval` as the gradient-based minimisers do: the tuning hands it the
    objective itself instead of the objective program's evaluation. It finds the
    same closed-form slope."""
    import optimistix as optx

    params = hx.canonical_params(models.rimless_wheel.RimlessWheelParams())
    minimiser = optx.BestSoFarMinimiser(optx.BFGS(rtol=1e-8, atol=1e-8))
    result = _tune_speed(params, 1.3, minimiser)
    assert result.targets_met and abs(float(result.orbit.u[0]) - 1.3) <= 1e-7
    np.testing.assert_allclose(
        result.values["gamma"], _closed_form_slope(params, 1.3), rtol=1e-6
    )
