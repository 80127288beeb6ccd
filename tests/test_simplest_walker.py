"""The simplest walking model (Garcia, Chatterjee, Ruina & Coleman 1998) against
references that do not come from this code:

- Garcia et al.'s gaits at slope 0.009 (start of step, to 1e-10) and the
  multipliers of their step map (two digits: their finite-difference Jacobians);
- the loss of stability of the long-period gait by period doubling at a slope of
  0.0151, and stable period-2 gaits beyond it that double again before 0.019 (a
  cascade towards chaos);
- the small-slope asymptotics of the linearised step (derived in the model's
  docstring): theta* / slope^(1/3) -> tanh(tau0/2)^(2/3) with tau0 = pi (short-period
  gait) or the root of tan(tau0/2) = -3 tanh(tau0/2) (long-period gait), the step
  period -> tau0, and the relative error shrinking like slope^(2/3);
- the energy balance: on a periodic gait the kinetic energy lost at the heel
  strikes equals the potential energy released, 2 sin(theta) sin(slope) per step;
- multipliers by autodiff and by the saltation product.

Every orbit comes from `hybrax orbit` and `hybrax continue` with their default
settings, or from the library's continuation with the same settings (which reuses
the compiled corrector of `hybrax continue`).
"""

import json
import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq

import hybrax as hx
from hybrax._cli import main
from hybrax.models import simplest_walker as sw


SLOPE = 0.009
# Garcia et al. (1998): (theta, theta_dot) just after heel strike at slope 0.009.
GARCIA_LONG = (0.20031090049483, -0.19983247291764)
GARCIA_SHORT = (0.19393736960624, -0.20386692731962)
# Their eigenvalues of the step map, to the two digits that finite differences give.
GARCIA_LONG_MULTIPLIER = -0.19 + 0.56j
GARCIA_SHORT_MULTIPLIERS = (4.0, 0.46)
GARCIA_PERIOD_DOUBLING = 0.0151
CHAOS = 0.019
# The CLI's default integration tolerance (shared compiled programs).
SETTINGS = hx.Settings(rtol=1e-10, atol=1e-10)


def _released(theta_start, theta_end, slope):
    """Potential energy released by the hip (mass 1, g = l = 1) over one step:
    its height over the stance foot is cos(theta - slope)."""
    return math.cos(theta_start - slope) - math.cos(theta_end - slope)


@pytest.fixture(scope="module")
def orbit(tmp_path_factory):
    out = tmp_path_factory.mktemp("orbit")
    code = main(
        ["orbit", "simplest-walker", "--set", f"slope={SLOPE}", "--out", str(out)]
        + ["--json", str(out / "orbit.json")]
    )
    assert code == 0
    return json.loads((out / "orbit.json").read_text()), out


@pytest.fixture(scope="module")
def branch_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("branch")
    code = main(
        ["continue", "simplest-walker", "--param", "slope", "--out", str(out)]
        + ["--cascade", "1", "--json", str(out / "branch.json")]
    )
    assert code == 0
    return json.loads((out / "branch.json").read_text())


@pytest.fixture(scope="module")
def model():
    """The bundle's system, section, default parameters and continuation
    parameter."""
    bundle = hx.models.get_model("simplest-walker")
    form = bundle.forms["minimal"]
    params = hx.canonical_params(bundle.make_params())
    return form.system(), form.section(), params, bundle.parameter("slope")


def _gait(model, slope, gait):
    """The long- or short-period gait at `slope`: the first point of a continuation
    (corrected at fixed slope), from the small-slope guess."""
    system, section, params, parameter = model
    branch = hx.continue_orbits(
        system,
        section,
        sw.asymptotic_start(slope, gait),
        params,
        parameter,
        start=slope,
        stop=2 * slope,
        continuation_settings=hx.ContinuationSettings(max_points=1),
        settings=SETTINGS,
    )
    return branch.u[0], float(branch.period[0]), branch.multipliers[0]


# The command's programs and figures take 35 s cold: the three tests of its
# output run in the slow set, to keep the fast set within its 6 minutes.
@pytest.mark.slow
def test_orbit_command_finds_garcias_long_period_gait(orbit):
    data, out = orbit
    assert data["converged"] and data["stable"]
    theta, phi, theta_dot, phi_dot = data["state"]
    np.testing.assert_allclose([theta, theta_dot], GARCIA_LONG, atol=2e-10)
    # On the section: phi = 2 theta, phi_dot = (1 - cos 2 theta) theta_dot.
    np.testing.assert_allclose(phi, 2 * theta, atol=1e-14)
    np.testing.assert_allclose(phi_dot, (1 - math.cos(2 * theta)) * theta_dot)
    (pair, conjugate, zero) = [complex(*v) for v in data["multipliers_saltation"]]
    assert abs(pair - GARCIA_LONG_MULTIPLIER) < 0.006 and conjugate == pair.conjugate()
    assert abs(zero) < 1e-12  # phi and phi_dot after heel strike follow theta
    assert (out / "orbit.png").is_file() and (out / "energy.png").is_file()


@pytest.mark.slow
def test_orbit_multipliers_two_ways(orbit):
    data, _ = orbit
    np.testing.assert_allclose(
        data["multipliers_ad"], data["multipliers_saltation"], atol=1e-8
    )
    assert data["max_discrepancy"] < 1e-8
    np.testing.assert_allclose(data["trivial_multiplier_saltation"], [1, 0], atol=1e-9)
    # The reduced Jacobian's eigenvalues are the nontrivial multipliers.
    np.testing.assert_allclose(
        data["reduced_jacobian_eigenvalues"],
        data["multipliers_saltation"][:2],
        atol=1e-8,
    )


@pytest.mark.slow
def test_energy_lost_at_heel_strike_is_the_potential_released(orbit):
    """The step runs from theta* to -theta*: the hip descends 2 sin(theta*)
    sin(slope)."""
    data, _ = orbit
    theta = data["state"][0]
    np.testing.assert_allclose(data["T_c"], _released(theta, -theta, SLOPE), rtol=1e-8)
    np.testing.assert_allclose(
        data["T_c"], 2 * math.sin(theta) * math.sin(SLOPE), rtol=1e-8
    )


@pytest.mark.slow
def test_continue_finds_garcias_period_doubling(branch_json):
    """`hybrax continue simplest-walker --param slope`: stable from 0.009 up to the
    period doubling at 0.0151 (Garcia's three digits), unstable beyond."""
    data = branch_json
    assert data["parameter"] == "slope"
    points = data["branch"]
    first = points[0]
    assert first["slope"] == SLOPE and first["stable"]
    np.testing.assert_allclose(
        [first["state"][0], first["state"][2]], GARCIA_LONG, atol=2e-10
    )
    (doubling,) = data["period_doublings"]
    assert doubling["located"]
    assert abs(doubling["slope"] - GARCIA_PERIOD_DOUBLING) < 5e-5
    np.testing.assert_allclose(doubling["multiplier"], -1.0, atol=1e-6)
    assert data["folds"] == [] and data["neimark_sackers"] == []
    for point in points:
        if point["kind"] != "period_doubling":  # |multiplier| = 1 there
            assert point["stable"] == (point["slope"] < doubling["slope"])
        theta = point["state"][0]
        # The energy balance along the branch (theta_dot before the strike from
        # the reset theta_dot+ = cos(2 theta) theta_dot-).
        before = point["state"][2] / math.cos(2 * theta)
        lost = 0.5 * before**2 * math.sin(2 * theta) ** 2
        released = 2 * math.sin(theta) * math.sin(point["slope"])
        np.testing.assert_allclose(lost, released, rtol=1e-8)


# Slow, with the asymptotics below: the walker's continuation corrector compiles for
# 32 s cold (the two share it); the fast set keeps the compass gait's orbits.
@pytest.mark.slow
def test_short_period_gait_is_garcias_and_unstable(model):
    u, _, multipliers = _gait(model, SLOPE, "short")
    np.testing.assert_allclose(u, GARCIA_SHORT, atol=2e-10)
    assert np.all(np.abs(np.imag(multipliers)) < 1e-12)
    np.testing.assert_allclose(
        np.real(multipliers), GARCIA_SHORT_MULTIPLIERS, atol=0.01
    )


@pytest.mark.slow
def test_small_slope_asymptotics(model):
    """theta* -> C slope^(1/3), C = tanh(tau0/2)^(2/3), period -> tau0; the
    relative error of the leading term is O(slope^(2/3)) (it drops by 10^(2/3)
    from 1e-5 to 1e-6). C = 0.97096 for the long-period gait and 0.94398 for
    the short-period one: the coefficient 0.943 quoted with the walker's scaling
    law theta* ~ slope^(1/3) is the short-period gait's."""
    half = brentq(lambda x: math.tan(x) + 3 * math.tanh(x), 1.6, 3.0, xtol=1e-15)
    for gait, tau0 in (("long", 2 * half), ("short", math.pi)):
        np.testing.assert_allclose(sw.TAU0[gait], tau0, rtol=1e-14)
        C = math.tanh(tau0 / 2) ** (2 / 3)
        errors = []
        for slope in (1e-5, 1e-6):
            u, period, _ = _gait(model, slope, gait)
            theta = float(u[0])
            errors.append(theta / (C * slope ** (1 / 3)) - 1)
            # The next-order terms are O(slope^(2/3)) (theta* ~ slope^(1/3)).
            next_order = 2 * slope ** (2 / 3)
            np.testing.assert_allclose(period, tau0, rtol=next_order)
            # After the strike, theta_dot -> -theta coth(tau0 / 2).
            np.testing.assert_allclose(
                float(u[1]) / theta, -1 / math.tanh(tau0 / 2), rtol=next_order
            )
        assert abs(errors[1]) < 1e-4
        assert 3.5 < errors[0] / errors[1] < 6.0  # 10^(2/3) = 4.64
    short, _, _ = _gait(model, 1e-6, "short")
    np.testing.assert_allclose(float(short[0]) / 1e-2, 0.943, rtol=1.5e-3)


@pytest.mark.slow
def test_period_doubling_cascade(branch_json):
    """`hybrax continue simplest-walker --cascade 1` switches at the period doubling
    onto the period-2 gaits: they leave with twice the period, are stable at first,
    alternate two different steps whose split grows as the square root of the
    distance to the bifurcation (the flip normal form, Kuznetsov 2004 sec. 4.4),
    and double again before the slope of 0.019 (the cascade towards chaos)."""
    (doubling,) = branch_json["period_doublings"]
    (level,) = branch_json["cascade"]
    assert level["period"] == 2
    points = level["branch"]
    lam = np.array([p["slope"] for p in points])
    assert lam[0] > doubling["slope"]
    np.testing.assert_allclose(lam[0], doubling["slope"], atol=1e-3)
    np.testing.assert_allclose(points[0]["period"], 2 * doubling["period"], rtol=1e-3)
    assert points[0]["stable"] and points[1]["stable"]
    steps = np.array([p["theta_per_cycle"] for p in points])
    split = np.abs(steps[:, 0] - steps[:, 1])
    assert np.all(split > 1e-4)  # a genuine period-2 gait
    near = (lam - doubling["slope"]) < 1e-3
    assert near.sum() >= 2
    ratio = split[near] ** 2 / (lam[near] - doubling["slope"])
    assert ratio.max() / ratio.min() < 1.1
    (again,) = level["period_doublings"]
    assert doubling["slope"] < again["slope"] < CHAOS
    assert not points[-1]["stable"]


@pytest.mark.slow
def test_a_walker_on_a_steep_slope_ends_on_its_fall_event():
    """At slope 0.3 the model's start of a step does not walk: the run ends with status
    `terminal_event` on the transition `"fall"`, where the hip is half the leg's
    length above the slope, cos(theta) = 1/2 (it recorded a heel strike with the
    hip at 0.23 l and then ran out of time before the event existed)."""
    import jax.numpy as jnp

    system = sw.simplest_walker()[0]
    params = hx.canonical_params(sw.SimplestWalkerParams(slope=0.3))
    x0 = sw.section().chart(jnp.asarray(sw.orbit_guess(params)), params)
    sol = hx.simulate(system, x0, params, n_events=5)
    assert hx.status_name(sol.result) == ["terminal_event"]
    fall = system.transition_index("fall")
    last = int(sol.n_events) - 1
    assert int(sol.cause_transition) == fall and int(sol.transitions[last]) == fall
    np.testing.assert_allclose(math.cos(float(sol.x_before[last, 0])), 0.5, atol=1e-9)


@pytest.mark.slow
def test_a_slow_steps_heel_strike_is_found_where_its_swing_foot_rises_through():
    """A slow step (from a state the rough-terrain chain reaches at sigma 0.001
    rad) whose swing foot rises through the slope just before the heel strike:
    the guard dips inside and comes back out within two integrator steps.
    diffrax starts the event root find at a step's end, where the guard
    already rises again, and optimistix clips Newton's iterate to the step: the
    root find failed there (`event_location_failed`) until the phase's step
    controller retried such a step to end on the guard's falling side. At both
    tolerances the heel strike is SciPy's (solve_ivp at 1e-12 on the same
    equations: the first rising crossing of phi - 2 theta after it dips below
    zero)."""
    import jax.numpy as jnp
    from scipy.integrate import solve_ivp

    system = sw.simplest_walker()[0]
    params = hx.canonical_params(sw.SimplestWalkerParams(slope=0.009 - 0.00114428))
    x0 = np.asarray(sw.section().chart(jnp.array([0.15249833, -0.16309451]), params))
    slope = float(params.slope)

    def stance(t, x):
        pull = math.sin(x[0] - slope)
        swing = math.sin(x[1]) * (x[2] ** 2 - math.cos(x[0] - slope)) + pull
        return [x[2], x[3], pull, swing]

    def guard(t, x):
        return x[1] - 2 * x[0]

    reference = solve_ivp(
        stance, (0.0, 3.0), x0, rtol=1e-12, atol=1e-12, dense_output=True
    )
    times = np.linspace(0.1, 3.0, 30001)
    values = np.array([guard(t, reference.sol(t)) for t in times])
    inside = int(np.argmax(values < 0))  # the swing foot rises through the slope
    up = inside + int(np.argmax(values[inside:] > 0))
    strike = brentq(lambda t: guard(t, reference.sol(t)), times[up - 1], times[up])
    assert 2.5 < strike < 2.7 and values[inside - 1] > 0
    for tol in (1e-10, 1e-8):
        settings = hx.Settings(rtol=tol, atol=tol)
        sol = hx.simulate(system, x0, params, n_events=1, settings=settings)
        assert hx.status_name(sol.result) == ["successful"]
        assert abs(float(sol.t_events[0]) - strike) < 100 * tol
    # Without the dip check the 1e-10 step's root find fails, by name.
    unchecked = hx.Settings(rtol=1e-10, atol=1e-10, dip_tol=None)
    sol = hx.simulate(system, x0, params, n_events=1, settings=unchecked)
    assert hx.status_name(sol.result) == ["event_location_failed"]


@pytest.mark.slow
def test_library_cascade_locates_the_commands_doublings(model, branch_json):
    """`hx.continue_cascade` from a script: from the period-1 branch over the
    command's slope range it switches at the same period doubling as `hybrax
    continue simplest-walker --cascade 1` and finds the period-2 branch's own
    doubling where the command does (located points: to 1e-6 whatever the step
    control), then says why it ended; the period-2 gait has twice the period at
    its start."""
    system, section, params, parameter = model
    bundle = hx.models.get_model("simplest-walker")
    spec = bundle.presentation.continuation
    guess = bundle.orbit_guess(parameter.set(params, jnp.asarray(spec.start)))
    steps = hx.ContinuationSettings(
        parameter_scale=spec.parameter_scale, max_period=spec.max_period
    )
    branch = hx.continue_orbits(
        system,
        section,
        guess,
        params,
        parameter,
        start=spec.start,
        stop=spec.stop,
        continuation_settings=steps,
    )
    cascade = hx.continue_cascade(
        system,
        section,
        branch,
        params,
        parameter,
        levels=1,
        stop=spec.stop,
        continuation_settings=steps,
    )
    assert cascade.ended == "levels_reached" and cascade.periods == (1, 2)
    (doubling,) = branch_json["period_doublings"]
    (level,) = branch_json["cascade"]
    (again,) = level["period_doublings"]
    np.testing.assert_allclose(
        cascade.doublings[0].parameter, doubling["slope"], atol=1e-6
    )
    doubled = cascade.branches[1]
    located = [p for p in doubled.period_doublings if p.located]
    np.testing.assert_allclose(located[0].parameter, again["slope"], atol=1e-6)
    np.testing.assert_allclose(
        float(doubled.period[0]), 2 * doubling["period"], rtol=1e-3
    )
    # Asked for one level more than the branch holds doublings after the
    # second: the cascade ends saying so, with the levels it followed.
    short = hx.continue_cascade(
        system,
        section,
        branch,
        params,
        parameter,
        levels=1,
        stop=doubling["slope"] + 1e-3,
        continuation_settings=steps,
    )
    assert short.ended in hx.CASCADE_ENDS
    # A switch that found no orbit is a named record of its doubling, its empty
    # branch (whose message says why) and its seconds; any other end has none.
    failed = short.failed_switch
    if short.ended == "start_failed":
        assert isinstance(failed, hx.CascadeSwitch) and failed.branch.message
        assert failed.doubling.kind == "period_doubling" and failed.seconds > 0
    else:
        assert failed is None
    with pytest.raises(ValueError, match="levels"):
        hx.continue_cascade(
            system, section, branch, params, parameter, levels=0, stop=spec.stop
        )
