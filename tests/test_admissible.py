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
    return _ground_force_after(orbit.cycle, 0, params)


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


def test_a_simulation_is_judged_against_the_same_boundaries(hopper):
    """`hx.boundary_violations` judges a run as the status judges an orbit.
    From rest with the spring at its static length, dropped from 0.1 m, the
    foot lands while the spring is stretched and the ground would pull right
    after touchdown (the closed form above, from the state after it); dropped
    from 0.15 m it pushes at every touchdown. The orbit's own list is the same
    judgement."""
    system, section = hopper
    params = hx.canonical_params(models.hopper.make_params())
    m_g = float(params.m * params.g)

    def run(height):
        z_U = height + float(params.L0 - params.mu * m_g / params.k)
        x0 = np.array([z_U, height, 0.0, 0.0])
        solution = hx.simulate(system, x0, params, n_events=6, mode0="flight")
        assert bool(solution.succeeded)
        touchdowns = range(0, 6, 2)
        forces = [_ground_force_after(solution, k, params) for k in touchdowns]
        return solution, forces

    solution, forces = run(0.1)
    assert forces[0] < -200 and min(forces[1:]) > 0  # the ground pulls, once
    violation = hx.BoundaryViolation(
        "force_reversal", 0, "ground", None, forces[0] / m_g
    )
    (found,) = hx.boundary_violations(system, solution)
    assert found[:4] == violation[:4]
    np.testing.assert_allclose(found.value, violation.value, rtol=1e-9)

    solution, forces = run(0.15)
    assert min(forces) > 0
    assert hx.boundary_violations(system, solution) == []

    orbit, params = _solve(system, section, mu=0.72, D_G=-0.035)
    (found,) = hx.boundary_violations(system, orbit.cycle)
    assert (found.kind, found.event, found.mode) == ("force_reversal", 0, "ground")
    assert orbit.boundary_violations(system) == [
        f"force_reversal@0: the guard of phase 0 starts at {found.value:.6g}"
    ]


def _ground_force_after(solution, k, params):
    """The ground force right after the touchdown that is event `k`."""
    z_U, z_L, v_U, v_L = np.asarray(solution.x_after[k], dtype=float)
    tension = params.k * (z_U - z_L - params.L0) + params.d_G * (v_U - v_L)
    return float(params.m_L * params.g - tension)


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
