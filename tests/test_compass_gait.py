"""The compass-gait biped (Goswami, Thuilot & Espiau 1998) against conservation laws
written here: the energy lost at each heel strike equals the potential energy
released per step on the periodic gait; through the impact the angular momentum of
the whole walker about the landing foot and that of the trailing leg about the hip
are conserved (the two equations of the classic hand-derived impact map); the
Floquet multipliers agree by autodiff and by the saltation product; and seed 002's
ratios keep the energy balance within the impact's energy-loss bounds."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax.models import compass_gait as cg


TOL = 1e-12
SYSTEM, DEFAULTS = cg.compass_gait()
PARAMS = hx.canonical_params(DEFAULTS)


# The gait's tests are slow: its analysed orbit compiles for 26 s of the fast
# set's cold run on 2 cores.
@pytest.fixture(scope="module")
def gait():
    return hx.find_periodic_orbit(
        SYSTEM,
        cg.section(),
        cg.orbit_guess(PARAMS),
        PARAMS,
        settings=hx.Settings(rtol=TOL, atol=TOL),
    )


@pytest.mark.slow
def test_energy_lost_at_heel_strike_is_the_potential_released(gait):
    """On the gait the walker (mass 2m + m_H) descends by its step length
    2 l sin(alpha) along the slope each step."""
    assert gait.succeeded
    alpha, l = float(gait.u[0]), 1.0  # noqa: E741
    released = 20.0 * 9.81 * 2 * l * math.sin(alpha) * math.sin(3 * math.pi / 180)
    np.testing.assert_allclose(float(gait.T_c[0]), released, rtol=1e-9)
    # The trailing foot leaves the ground after the impact (seed 002).
    assert float(gait.cycle.observables["trailing_normal_velocity"][0]) > 0


@pytest.mark.slow
def test_multipliers_two_ways(gait):
    floquet = gait.floquet
    assert float(floquet.max_discrepancy) < 1e-7
    np.testing.assert_allclose(
        floquet.multipliers_ad, floquet.multipliers_saltation, atol=1e-8
    )
    # The reduced Jacobian's eigenvalues are the nontrivial multipliers.
    np.testing.assert_allclose(
        gait.multipliers, floquet.multipliers_saltation, atol=1e-8
    )
    np.testing.assert_allclose(floquet.trivial_saltation, 1.0, atol=1e-9)
    assert float(gait.spectral_radius) < 1  # the passive gait at 3 degrees is stable


def _points(x, p):
    """Positions and velocities (stance foot at the origin) of the stance-leg mass,
    hip, swing-leg mass and swing foot, written out by hand."""
    ts, tn, ws, wn = x
    a, b = float(p.a), float(p.b)
    l = a + b  # noqa: E741
    up, dup = (
        np.array([math.sin(ts), math.cos(ts)]),
        np.array([math.cos(ts), -math.sin(ts)]),
    )
    dn, ddn = (
        np.array([math.sin(tn), -math.cos(tn)]),
        np.array([math.cos(tn), math.sin(tn)]),
    )
    hip, v_hip = l * up, l * dup * ws
    return {
        "leg": (a * up, a * dup * ws),
        "hip": (hip, v_hip),
        "swing": (hip + b * dn, v_hip + b * ddn * wn),
        "foot": (hip + l * dn, v_hip + l * ddn * wn),
    }


def _cross(r, v):
    return r[0] * v[1] - r[1] * v[0]


@pytest.mark.slow
def test_impact_conserves_the_angular_momenta_of_the_classic_map(gait):
    """Before heel strike (minimal state x-) and after it (x+, legs relabelled):
    the whole walker's angular momentum about the landing foot, and the trailing
    leg's about the hip, are the same (the impulse acts at the landing foot; the
    hip is a free joint)."""
    m, m_H = float(PARAMS.m), float(PARAMS.m_H)
    before = np.asarray(gait.cycle.x_before[0])
    after = np.asarray(gait.cycle.x_after[0])
    pre = _points(before, PARAMS)
    # After the relabelling, the new stance foot (the landing foot) is the origin.
    post = _points(after, PARAMS)
    landing = pre["foot"][0]
    masses = {"leg": m, "hip": m_H, "swing": m}

    def about(points, origin, names):
        return sum(
            masses[n] * _cross(points[n][0] - origin, points[n][1]) for n in names
        )

    total_pre = about(pre, landing, ("leg", "hip", "swing"))
    total_post = about(post, np.zeros(2), ("leg", "hip", "swing"))
    np.testing.assert_allclose(total_post, total_pre, rtol=1e-10)
    # The trailing leg (before: the stance leg, "leg"; after: the swing leg): its
    # only impulse acts at the hip, so m (r - r_H) x v does not jump.
    trailing_pre = m * _cross(pre["leg"][0] - pre["hip"][0], pre["leg"][1])
    trailing_post = m * _cross(post["swing"][0] - post["hip"][0], post["swing"][1])
    np.testing.assert_allclose(trailing_post, trailing_pre, rtol=1e-10)
    # The energy kept is the kinetic energy after the impact.
    kinetic = sum(
        masses[n] * post[n][1] @ post[n][1] / 2 for n in ("leg", "hip", "swing")
    )
    np.testing.assert_allclose(kinetic, float(gait.T_a[0]), rtol=1e-10)


@pytest.mark.parametrize("a_ratio, mu", [(0.5, 0.6), (0.6, 0.5), (0.6, 0.7)])
def test_seed_002_ratios_keep_the_energy_balance(a_ratio, mu):
    """Seed 002's ratios alpha = a/(a+b) and mu = m_H/(m_H + 2m) as parameters
    (leg length 1 m and total mass 20 kg kept): on each gait the energy lost at
    heel strike is the potential energy released per step, and its share T_c/T-
    lies between the extreme fractions of the impact's energy-loss eigenproblem
    (seed 003) at the heel-strike configuration. (The same compiled orbit search
    as the 3-degree gait: the parameters are traced.)"""
    params = cg.make_params(a_ratio=a_ratio, mu=mu)
    np.testing.assert_allclose(float(params.a), a_ratio, rtol=1e-12)
    np.testing.assert_allclose(
        float(params.m_H / (params.m_H + 2 * params.m)), mu, rtol=1e-12
    )
    np.testing.assert_allclose(float(params.m_H + 2 * params.m), 20.0, rtol=1e-12)
    orbit = hx.find_periodic_orbit(
        SYSTEM,
        cg.section(),
        cg.orbit_guess(PARAMS),
        hx.canonical_params(params),
        settings=hx.Settings(rtol=TOL, atol=TOL),
    )
    assert orbit.succeeded
    slope = 3 * math.pi / 180
    alpha = float(orbit.u[0])
    released = 20.0 * 9.81 * 2 * math.sin(alpha) * math.sin(slope)
    np.testing.assert_allclose(float(orbit.T_c[0]), released, rtol=1e-8)
    q = np.array([0.0, 0.0, alpha + slope, alpha - slope])
    modes = hx.impact_energy_modes(
        cg.mechanics(), ("swing",), q, params, before=("stance",)
    )
    share = float(cg.ORBIT_QUANTITIES["Tc_over_T"](orbit, params))
    assert modes.fractions[0] - 1e-9 <= share <= modes.fractions[1] + 1e-9


@pytest.mark.slow
def test_continue_command_follows_the_cascade(tmp_path):
    """`hybrax continue compass-gait --param slope_deg --start 3 --stop 5 --cascade
    1` (the README's command): the gait doubles its period once between 4.3 and
    4.5 degrees (Goswami, Thuilot & Espiau 1998 report the first doubling near
    4.4), and the period-2 branch the command switches to leaves the doubling
    with twice its period, stable at first, alternating two different steps."""
    import json

    from hybrax._cli import main

    out = tmp_path / "branch"
    code = main(
        ["continue", "compass-gait", "--param", "slope_deg", "--start", "3"]
        + ["--stop", "5", "--cascade", "1", "--out", str(out)]
        + ["--json", str(out / "branch.json")]
    )
    assert code == 0
    data = json.loads((out / "branch.json").read_text())
    (doubling,) = data["period_doublings"]
    assert 4.3 < doubling["slope_deg"] < 4.5
    (level,) = data["cascade"]
    assert level["period"] == 2
    first = level["branch"][0]
    assert abs(first["slope_deg"] - doubling["slope_deg"]) < 0.05
    np.testing.assert_allclose(first["period"], 2 * doubling["period"], rtol=2e-3)
    assert first["stable"]
    assert (out / "bifurcation.png").stat().st_size > 0
    # The run ended with its cascade: the period-2 branch's own end, top-level
    # and on the last line; the period-1 branch's kept beside.
    assert data["ended_in"] == "cascade" and data["cascade_ended"] == "levels_reached"
    assert data["status"] == level["status"] and data["message"] == level["message"]
    assert data["branch_status"] == "reached_bound"
    assert data["end"].startswith("ended: the cascade followed its 1 level(s); ")
    assert "the period-2 branch" in data["end"]


@pytest.mark.slow
def test_a_walker_that_falls_back_ends_on_its_fall_event():
    """Started leaning back (the hip 0.3 rad behind the stance foot, at rest) the
    walker falls back: the run ends with status `terminal_event` on the
    transition `"fall"`, where the hip is half the leg's length above the slope
    (it was recorded as walking on through the ground before the event
    existed)."""
    x0 = jnp.array([-0.3, 0.3, 0.0, 0.0])
    sol = hx.simulate(SYSTEM, x0, PARAMS, n_events=3)
    assert hx.status_name(sol.result) == ["terminal_event"]
    fall = SYSTEM.transition_index("fall")
    assert int(sol.cause_transition) == fall
    assert int(sol.transitions[int(sol.n_events) - 1]) == fall
    # The hip's height over the slope, l cos(theta_s - slope) (theta_s from the
    # vertical), is l/2 at the event.
    theta_s = float(sol.x_before[int(sol.n_events) - 1, 0])
    np.testing.assert_allclose(math.cos(theta_s - float(PARAMS.slope)), 0.5, atol=1e-9)
