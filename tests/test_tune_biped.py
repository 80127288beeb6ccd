"""Tuning the five-link biped's gait controller by gradient: the tuning objective's
derivative against central differences, and `hybrax tune biped5` from
a walking (not yet target) controller to a stable gait at a new speed, checked by
finding the gait again from scratch and a 50-step disturbed walk."""

import dataclasses
import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax._cli import main
from hybrax.models import biped5 as b5


SYSTEM, DEFAULTS = b5.biped5()
SECTION = b5.section()
QUANTITIES = b5.ORBIT_QUANTITIES
# A controller with phase-dependent references (every shape offset set), on
# which the default gait's guess still finds a gait.
SHAPES = {
    "hip_swing_shape_1": 0.02,
    "hip_swing_shape_2": 0.03,
    "hip_swing_shape_3": -0.02,
    "knee_swing_shape_1": 0.02,
    "knee_swing_shape_2": -0.02,
    "knee_swing_shape_3": 0.01,
}
PARAMS = hx.canonical_params(dataclasses.replace(DEFAULTS, **SHAPES))


def _objective(values, u_guess, settings):
    """The tuning's penalised objective (its final stage) over the ten tuned
    controller numbers: cost of transport + ((speed - 0.8) / 0.016)^2 +
    1e3 max(0, rho - 0.8991)^2."""
    params = PARAMS
    for name, value in zip(b5.TUNED, values):
        params = eqx.tree_at(lambda p, name=name: getattr(p, name), params, value)
    orbit = hx.find_periodic_orbit(
        SYSTEM, SECTION, u_guess, params, analyse=False, settings=settings
    )
    speed = QUANTITIES["speed"](orbit, params)
    excess = jnp.maximum(orbit.spectral_radius - 0.8991, 0.0)
    return (
        QUANTITIES["cost_of_transport"](orbit, params)
        + ((speed - 0.8) / 0.016) ** 2
        + 1e3 * excess**2
    )


@pytest.mark.slow
def test_tuning_objective_gradient_matches_central_differences(getkey):
    """The derivative of J along random directions of the ten controller numbers
    (implicit-function derivatives of the orbit, through the virtual-constraint
    torques and the heel strike; forward mode, as `hx.tune(mode="forward")` takes
    it; reverse mode is the same rule transposed, tested on the hopper in
    test_gradients.py) against central differences of converged orbits."""
    values = jnp.array([float(getattr(PARAMS, n)) for n in b5.TUNED])
    u_guess = jnp.asarray(b5.orbit_guess(PARAMS))
    settings = hx.Settings()

    # One compiled program for the derivative and the values on both sides.
    @jax.jit
    def derivative(at, direction):
        return jax.jvp(lambda v: _objective(v, u_guess, settings), (at,), (direction,))

    h = 1e-5
    for _ in range(2):
        direction = jax.random.normal(getkey(), values.shape)
        direction = direction / jnp.linalg.norm(direction)
        value, slope = derivative(values, direction)
        assert np.isfinite(float(value))
        plus = float(derivative(values + h * direction, direction)[0])
        minus = float(derivative(values - h * direction, direction)[0])
        np.testing.assert_allclose(float(slope), (plus - minus) / (2 * h), rtol=2e-5)


@pytest.mark.slow
def test_tune_command_from_a_falling_start_reaches_a_stable_gait(tmp_path):
    """`hybrax tune biped5` on a test budget (five evaluations: the existence
    stage): from the controller under which the biped falls, a gait exists and
    is stable (every multiplier below 0.9); the command says the speed target is
    not met yet (exit code 1, `targets_met` false). The gait is found again from
    a cold start, a disturbed 50-step walk comes back to it as its multipliers
    predict (`orbit --params` and `simulate --params` are tested on the
    hopper)."""
    out = tmp_path / "tune"
    code = main(
        ["tune", "biped5", "--max-steps", "5", "--no-progress", "--out", str(out)]
        + ["--json", str(tmp_path / "t.json")]
    )
    data = json.loads((tmp_path / "t.json").read_text())
    final = data["final"]
    assert code == 1 and not final["targets_met"]
    assert data["status"] == "targets_not_met"
    assert final["orbit_found"] and final["stable"]
    assert max(abs(complex(*m)) for m in final["multipliers"]) < 0.9
    stages = [step["stage"] for step in data["history"]]
    assert stages == ["seek"] * len(stages) and data["history"][-1]["orbit_found"]
    check = data["verification"]
    assert check["passed"] and check["orbit_refound"]
    assert check["steps_completed"] == 50 and check["status"] == "successful"
    gaps = check["distance_to_orbit"]
    assert gaps[-1] < 10 * final["multiplier"] ** 49 * gaps[0]
    for name in ("tune_path.png", "animation.gif"):
        assert (out / name).stat().st_size > 0


@pytest.mark.slow
def test_tune_command_meets_the_speed_target(tmp_path):
    """`hybrax tune biped5` at its own budget: from the falling start to a stable
    gait at 0.8 m/s (to its 2% tolerance) whose multipliers stay below the 0.9
    bound, checked by a cold re-find and a disturbed 50-step walk."""
    code = main(
        ["tune", "biped5", "--no-progress", "--out", str(tmp_path / "tune")]
        + ["--json", str(tmp_path / "t.json")]
    )
    data = json.loads((tmp_path / "t.json").read_text())
    final = data["final"]
    assert code == 0 and final["targets_met"] and final["stable"]
    assert abs(final["speed"] - 0.8) <= 0.016
    assert max(abs(complex(*m)) for m in final["multipliers"]) < 0.9
    check = data["verification"]
    assert check["passed"] and check["orbit_refound"]


@pytest.mark.slow
def test_step_integrals_derivatives_match_central_differences(getkey):
    """The step's integrals (`hybrax.Integral` phase observables: the torques'
    effort, net and positive work) as orbit quantities: their derivatives along a
    random direction of the ten controller numbers (implicit-function
    derivatives of the orbit, through the quadrature and the step's end time;
    forward mode) against central differences of converged orbits; the net work
    equals the energy lost at heel strike on every side."""
    names = ("effort", "work", "positive_work")
    values = jnp.array([float(getattr(PARAMS, n)) for n in b5.TUNED])
    u_guess = jnp.asarray(b5.orbit_guess(PARAMS))
    settings = hx.Settings(rtol=1e-12, atol=1e-12)

    def integrals(v):
        params = PARAMS
        for name, value in zip(b5.TUNED, v):
            params = eqx.tree_at(lambda p, name=name: getattr(p, name), params, value)
        orbit = hx.find_periodic_orbit(
            SYSTEM, SECTION, u_guess, params, analyse=False, settings=settings
        )
        quantities = [QUANTITIES[name](orbit, params) for name in names]
        return jnp.stack([*quantities, QUANTITIES["energy_lost"](orbit, params)])

    @jax.jit
    def derivative(at, direction):
        return jax.jvp(integrals, (at,), (direction,))

    direction = jax.random.normal(getkey(), values.shape)
    direction = direction / jnp.linalg.norm(direction)
    h = 1e-5
    value, slope = derivative(values, direction)
    plus = derivative(values + h * direction, direction)[0]
    minus = derivative(values - h * direction, direction)[0]
    for side in (value, plus, minus):
        np.testing.assert_allclose(side[1], side[3], rtol=1e-7)
    np.testing.assert_allclose(slope[:3], (plus - minus)[:3] / (2 * h), rtol=1e-4)
