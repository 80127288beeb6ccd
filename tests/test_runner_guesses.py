"""Shooting from rough guesses on a model of one's own: the three-mode runner of
`experiments/runner_model.py` (ascent, descent, stance; the apex section), written
with the public API alone. Its fixed point is checked against a SciPy reference:
the ballistic flight in closed form, the stance by `solve_ivp` with a terminal
event, the apex map's fixed point by Brent's method."""

import pathlib
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import brentq

import hybrax as hx


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))
import runner_model  # noqa: E402


def _reference_apex_map(height, p):
    """The next apex height from the apex at `height` (NumPy/SciPy only)."""
    v = -np.sqrt(2 * p.g * (height - p.L0))  # touchdown speed

    def stance(t, x):
        return [x[1], (p.k * (p.L0 - x[0]) - p.c * x[1]) / p.m - p.g]

    def liftoff(t, x):
        return x[0] - p.L0

    liftoff.terminal, liftoff.direction = True, 1
    sol = solve_ivp(
        stance,
        (0, 5),
        [p.L0, v],
        events=liftoff,
        rtol=1e-12,
        atol=1e-13,
        method="DOP853",
    )
    v_up = sol.y_events[0][0][1] + p.push
    return p.L0 + v_up**2 / (2 * p.g)


@pytest.mark.slow
def test_orbit_from_guesses_ten_percent_off_and_a_failure_that_says_why():
    """From guesses 10% below and above the runner's stable apex, shooting finds
    the SciPy reference's fixed point (to 1e-8); from a guess below the leg's
    length (no flight reaches touchdown from there) it fails with the status of
    the guess's own cycle and says so."""
    system, params = runner_model.runner()
    section = runner_model.section()
    p = runner_model.RunnerParams()
    reference = brentq(lambda y: _reference_apex_map(y, p) - y, 1.2, 1.8, xtol=1e-14)
    for factor in (0.9, 1.1):
        orbit = hx.find_periodic_orbit(
            system, section, jnp.array([factor * reference]), params
        )
        assert bool(orbit.succeeded), orbit.describe_failure()
        assert abs(float(orbit.u[0]) - reference) < 1e-8
        assert abs(complex(orbit.multipliers[0])) < 1  # the stable apex
    far = hx.find_periodic_orbit(system, section, jnp.array([0.5]), params)
    assert not bool(far.succeeded)
    message = far.describe_failure()
    assert hx.status_name(far.result)[0] in message
    assert "guess" in message
