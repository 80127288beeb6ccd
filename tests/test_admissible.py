"""An orbit is `successful` only where it keeps the boundaries its model declares.

The hopper's ground phase is admissible only while the ground pushes: right after
touchdown (plastic impact, the lower mass at rest on the ground) the ground force
is, in closed form, $N = m_L g - T$ with the tension $T = k(z_U - z_L - L_0) +
d_G(\\dot z_U - \\dot z_L)$ (Zana et al. 2018, the signs of `NOTES`), and the
ground phase's guard at its start is $N/(m g)$. At mu = 0.72, D_G = -0.035 Newton
from the model's guess converges to an orbit with $N < 0$: an orbit of the
equations that needs a pulling ground.
"""

import numpy as np
import pytest

import hybrax as hx
from helpers import run_cli
from hybrax import models


@pytest.fixture(scope="module")
def hopper():
    return models.hopper.minimal()[0], models.hopper.section()


def _ground_force(orbit, params):
    """The ground force right after touchdown, from the state after it (closed
    form, see the module docstring)."""
    z_U, z_L, v_U, v_L = np.asarray(orbit.cycle.x_after[0], dtype=float)
    tension = params.k * (z_U - z_L - params.L0) + params.d_G * (v_U - v_L)
    return params.m_L * params.g - tension


def _solve(system, section, **values):
    params = hx.canonical_params(models.hopper.make_params(**values))
    guess = models.hopper.orbit_guess(params)
    return hx.find_periodic_orbit(system, section, guess, params), params


def test_an_orbit_that_needs_a_pulling_ground_is_inadmissible(hopper):
    system, section = hopper
    orbit, params = _solve(system, section, mu=0.72, D_G=-0.035)
    assert hx.status_name(orbit.result) == ["inadmissible_orbit"]
    assert not bool(orbit.succeeded)
    # Its values are kept: a fixed point of the return map, by one more cycle.
    u_next, _ = hx.poincare_map(system, section, orbit.u, params)
    np.testing.assert_allclose(u_next, orbit.u, atol=1e-9)
    force = _ground_force(orbit, params)
    assert force < 0
    np.testing.assert_allclose(
        orbit.guard_at_start[0], force / (params.m * params.g), atol=1e-9
    )
    (violation,) = orbit.boundary_violations(system)
    assert violation.startswith("force_reversal@0")
    assert f"{force / (params.m * params.g):.6g}" in violation
    assert "boundary" in orbit.describe_failure()
    with pytest.raises(Exception, match="boundary"):
        hx.find_periodic_orbit(
            system, section, orbit.u, params, throw=True, phase_observables=True
        )


def test_the_papers_orbit_is_admissible(hopper):
    system, section = hopper
    orbit, params = _solve(system, section, mu=0.8, D_G=-0.0377)
    assert bool(orbit.succeeded)
    assert _ground_force(orbit, params) > 0
    assert orbit.boundary_violations(system) == []


def test_the_command_line_names_the_boundary(hopper):
    del hopper
    code, out, err = run_cli(
        ["orbit", "hopper", "--set", "mu=0.72", "--set", "D_G=-0.035"]
        + ["--no-figures", "--no-homotopy"]
    )
    assert code == 1, err
    assert "no admissible periodic orbit" in err
    assert "force_reversal@0" in err
    assert "Traceback" not in out + err
