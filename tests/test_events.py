"""The event engine never reports a degenerate run as successful: zero-duration
phases, Zeno, shallow crossings and grazing, starts outside a mode, a horizon before
the start; guard arming on a walking model; event and phase observables; statuses
that carry their cause, NaN values for failures. Against closed forms: the bouncing
ball, the hopper's modal flight solution (reference_hopper.py), the simplest
walker's published fixed point (Garcia et al. 1998)."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq

import hybrax as hx
import reference_hopper as ref
from helpers import central_jacobian
from hybrax import models
from hybrax._solution import any_failed


SETTINGS = hx.Settings(t_max=10.0)
BALL = models.bouncing_ball.bouncing_ball()[0]
HOPPER = models.hopper.minimal()[0]
G = 9.81


def _names(system, solution):
    n = int(solution.n_events)
    return [system.transitions[int(k)].name for k in solution.transitions[:n]]


# --- events piling up at one instant ---------------------------------------------


def test_foot_pulled_back_at_liftoff_is_not_viable():
    """Negative flight damping pulls the foot back at lift-off: the flight mode
    cannot start. Reported today as 'successful, 10 of 10 events' with nine at one
    instant; now the run stops at the lift-off with `mode_not_viable`."""
    p_ref = ref.HopperParams(d_F=-150.0)
    params = hx.canonical_params(models.hopper.make_params(d_F=-150.0))
    x0 = models.hopper.default_state(params)
    sol = hx.simulate(HOPPER, x0, params, n_events=4, settings=SETTINGS)
    assert hx.status_name(sol.result) == ["mode_not_viable"]
    assert _names(HOPPER, sol) == ["touchdown", "liftoff"]
    assert HOPPER.modes[int(sol.mode_final)].name == "flight"
    assert HOPPER.transitions[int(sol.cause_transition)].name == "touchdown"
    assert np.all(np.isnan(sol.t_events[2:]))
    # The two events that did occur, against the closed-form phases.
    t_touchdown = ref.touchdown_time(np.asarray(x0), p_ref)
    x_post = ref.flight_state(np.asarray(x0), t_touchdown, p_ref)
    x_post[1] = x_post[3] = 0.0
    t_liftoff = t_touchdown + ref.liftoff_time(x_post, p_ref)
    np.testing.assert_allclose(sol.t_events[:2], [t_touchdown, t_liftoff], atol=1e-9)
    assert float(sol.t_final) == pytest.approx(t_liftoff, abs=1e-9)


@pytest.mark.parametrize(
    "x0, e, n_expected",
    [((1.0, 0.0), 0.0, 1), ((0.0, 0.0), 0.5, 0)],
    ids=["plastic-ball-dropped", "ball-at-rest-on-floor"],
)
def test_ball_that_cannot_leave_the_floor(x0, e, n_expected):
    """A ball with restitution 0 after its impact, or at rest on the floor, would
    fire impact after impact at one instant."""
    params = hx.canonical_params(models.bouncing_ball.BallParams(e=e))
    sol = hx.simulate(BALL, jnp.array(x0), params, n_events=5, settings=SETTINGS)
    assert hx.status_name(sol.result) == ["mode_not_viable"]
    assert int(sol.n_events) == n_expected
    np.testing.assert_allclose(
        sol.t_events[:n_expected], [np.sqrt(2 * x0[0] / G)] * n_expected, atol=1e-12
    )
    assert np.all(np.isnan(sol.t_events[n_expected:]))
    assert int(sol.cause_transition) == 0


def test_zeno_accumulation_time():
    """Restitution 0.5 from 1 m: the impacts accumulate at
    t_inf = sqrt(2h/g) + 2 e v1 / (g (1 - e)). The run records the impacts that are
    resolved (each closed-form to 1e-9) and ends with `zeno` and the extrapolated
    time, not with padded or spurious events."""
    e, h = 0.5, 1.0
    params = hx.canonical_params(models.bouncing_ball.BallParams(e=e))
    sol = hx.simulate(BALL, jnp.array([h, 0.0]), params, n_events=20, settings=SETTINGS)
    assert hx.status_name(sol.result) == ["zeno"]
    n = int(sol.n_events)
    assert 5 < n < 20
    v1 = np.sqrt(2 * G * h)
    flights = 2 * v1 * e ** np.arange(1, n) / G
    expected = np.sqrt(2 * h / G) + np.concatenate([[0.0], np.cumsum(flights)])
    np.testing.assert_allclose(sol.t_events[:n], expected, rtol=0, atol=1e-9)
    assert np.all(np.isnan(sol.t_events[n:]))
    t_inf = np.sqrt(2 * h / G) + 2 * e * v1 / (G * (1 - e))
    assert float(sol.zeno_time) == pytest.approx(t_inf, abs=1e-9)

    # It stops where the next flight would rise less than the guard resolution
    # (guard_tol): the flight after the last recorded impact; the one before rose
    # more.
    def apex(k):
        return (e**k * v1) ** 2 / (2 * G)

    assert apex(n) <= SETTINGS.guard_tol < apex(n - 1)


# --- shallow crossings and grazing ---------------------------------------------


def _dipping_flight(depth, t_min=0.05):
    """A flight state whose lower mass reaches -`depth` (its minimum) at `t_min`,
    from the closed-form flight run backwards."""
    p = ref.HopperParams()
    at_minimum = np.array([p.L0 + 0.02 - depth, -depth, 0.0, 0.0])
    return ref.flight_state(at_minimum, -t_min, p)


def _first_crossing(x0):
    """The closed-form touchdown: the first zero of z_L(t) near its minimum."""
    p = ref.HopperParams()
    return brentq(
        lambda t: ref.flight_state(x0, t, p)[1], 0.0, 0.05, xtol=1e-15, rtol=1e-15
    )


@pytest.fixture(scope="module")
def one_flight():
    params = hx.canonical_params(models.hopper.make_params())

    @eqx.filter_jit
    def run(x0, settings):
        return hx.simulate(HOPPER, x0, params, n_events=1, settings=settings)

    return run


def test_shallow_crossing_inside_one_step_is_found(one_flight):
    """z_L dips 1e-7 m below the ground around t = 0.05 s and comes back within one
    step at tolerance 1e-10: diffrax alone (signs at step ends) misses it and
    reports the next touchdown, at 0.117 s; the engine finds the crossing."""
    x0 = _dipping_flight(1e-7)
    sol = one_flight(jnp.asarray(x0), SETTINGS)
    assert hx.status_name(sol.result) == ["successful"]
    t_exact = _first_crossing(x0)
    assert float(sol.t_events[0]) == pytest.approx(t_exact, abs=1e-9)
    # A transversal crossing: its rate is the closed-form foot speed (to the
    # accuracy of the event time, whose error is the root finder's 1e-12 m over
    # this slow speed, times the foot's acceleration, 10 m/s^2: 5e-6 relative).
    v_exact = ref.flight_state(x0, t_exact, ref.HopperParams())[3]
    assert float(sol.crossing_rate[0]) == pytest.approx(v_exact, rel=2e-5)
    missed = one_flight(jnp.asarray(x0), hx.Settings(t_max=10.0, dip_tol=None))
    assert float(missed.t_events[0]) > 0.1


@pytest.mark.parametrize("depth", [1e-10, 1e-12])
def test_grazing_contact_is_reported(one_flight, depth):
    """A dip within the guard tolerance (1e-9 m) is a tangential contact: found,
    recorded on the guard inside the dip, and reported as `grazing_event`."""
    x0 = _dipping_flight(depth)
    sol = one_flight(jnp.asarray(x0), SETTINGS)
    assert hx.status_name(sol.result) == ["grazing_event"]
    assert int(sol.n_events) == 1
    assert HOPPER.transitions[int(sol.cause_transition)].name == "touchdown"
    # A tangential crossing's time is ill-conditioned (the root finder's 1e-12 m
    # over a speed of ~sqrt(2 g depth)); its place is not: the closed-form foot
    # height at the reported time is on the ground within that tolerance, and the
    # time lies in the dip.
    t_event = float(sol.t_events[0])
    height = ref.flight_state(x0, t_event, ref.HopperParams())[1]
    assert abs(height) <= 2e-12
    assert abs(t_event - 0.05) <= np.sqrt(8 * depth / 9.0)


# --- starts outside the mode, time span -------------------------------------------


# The constrained form is slow (11-15 s cold); the minimal one stays fast.
@pytest.mark.parametrize(
    "form", ["minimal", pytest.param("constrained", marks=pytest.mark.slow)]
)
def test_ground_mode_entered_with_the_foot_in_the_air(form):
    system = HOPPER if form == "minimal" else models.hopper.constrained()[0]
    params = hx.canonical_params(models.hopper.make_params())
    x0 = models.hopper.default_state(params)  # foot 0.15 m above the ground
    if form == "constrained":
        x0 = models.hopper.to_constrained(x0)
    sol = hx.simulate(system, x0, params, n_events=4, mode0="ground", settings=SETTINGS)
    assert hx.status_name(sol.result) == ["constraint_violated"]
    assert int(sol.n_events) == 0


def test_horizon_before_the_start_under_jit():
    params = hx.canonical_params(models.bouncing_ball.BallParams())

    @jax.jit
    def run(t0):
        return hx.simulate(
            BALL, jnp.array([1.0, 0.0]), params, n_events=5, t0=t0, settings=SETTINGS
        )

    sol = run(60.0)  # the horizon is t_max = 10
    assert hx.status_name(sol.result) == ["invalid_time_span"]
    assert np.all(np.isnan(sol.t_events))
    with pytest.raises(ValueError, match="t_max"):
        hx.simulate(
            BALL, jnp.array([1.0, 0.0]), params, n_events=5, t0=60.0, settings=SETTINGS
        )


# --- guard arming on a walker --------------------------------------------------


def _walker_field(t, x, p):
    # Garcia, Chatterjee, Ruina & Coleman (1998), the simplest walking model:
    # stance angle theta, inter-leg angle phi, slope gamma (dimensionless time).
    theta, phi, theta_dot, _ = x
    theta_ddot = jnp.sin(theta - p["gamma"])
    phi_ddot = theta_ddot + jnp.sin(phi) * (theta_dot**2 - jnp.cos(theta - p["gamma"]))
    return jnp.stack([x[2], x[3], theta_ddot, phi_ddot])


def _heel_strike_guard(t, x, p):
    # Zero when the swing foot is on the slope: phi = 2 theta. Also zero right
    # after the reset (the new swing foot starts on the ground) and at the
    # mid-stance scuff (theta = phi = 0).
    return x[1] - 2 * x[0]


def _heel_strike(t, x, p):
    theta, _, theta_dot, _ = x
    c = jnp.cos(2 * theta)
    return jnp.stack([-theta, -2 * theta, c * theta_dot, c * (1 - c) * theta_dot])


def _swing_foot_ahead(t, x, p):
    # Armed once the stance leg is past vertical by a margin: the swing foot has
    # passed the stance foot, and the scuff is behind.
    return -x[0] - 0.05


def _walker(arm):
    strike = hx.Transition(
        "stance",
        "stance",
        _heel_strike_guard,
        True,
        _heel_strike,
        "heelstrike",
        arm=_swing_foot_ahead if arm else None,
    )
    return hx.HybridSystem([hx.Mode(_walker_field, "stance")], [strike], n_states=4)


# The published long-period gait at gamma = 0.009 (Garcia et al. 1998).
WALKER_FIXED_POINT = np.array(
    [0.200310900544287, 0.400621801088574, -0.199832473004977, -0.015822999948318]
)


def test_arming_lets_the_walker_step():
    params = {"gamma": jnp.asarray(0.009)}
    x0 = jnp.asarray(WALKER_FIXED_POINT)
    settings = hx.Settings(t_max=20.0)
    # Unarmed, the heel-strike guard sits at zero after the reset and leaves the
    # mode at once: reported, not fired at t = 0.
    unarmed = hx.simulate(_walker(False), x0, params, n_events=2, settings=settings)
    assert hx.status_name(unarmed.result) == ["mode_not_viable"]
    assert int(unarmed.n_events) == 0
    # Armed: two steps, each back on the published fixed point.
    armed = hx.simulate(_walker(True), x0, params, n_events=2, settings=settings)
    assert hx.status_name(armed.result) == ["successful"]
    np.testing.assert_allclose(armed.x_after, [WALKER_FIXED_POINT] * 2, atol=1e-9)
    period = float(armed.t_events[0])
    assert 3.8 < period < 4.0
    np.testing.assert_allclose(armed.t_events[1], 2 * period, rtol=1e-9)
    # The scuff (theta = 0, phi = 0 mid-step) did not fire.
    assert float(armed.x_before[0, 0]) < -0.15


def _rotation(t, x, params):
    """(cos pi t, sin pi t, t): a point turning on the unit circle, and a clock."""
    del t, params
    return jnp.array([-jnp.pi * x[1], jnp.pi * x[0], 1.0])


def _arming_system(armed_outside):
    """The guard sin(pi t) (zeros at t = 1, 2, 3; crossed downward at 1 and 3),
    armed at t = 1.5 where it is -1: past its crossing."""
    transition = hx.Transition(
        "turn",
        "turn",
        lambda t, x, p: x[1],
        False,
        name="mark",
        arm=lambda t, x, p: x[2] - 1.5,
        armed_outside=armed_outside,
    )
    return hx.HybridSystem([hx.Mode(_rotation, "turn")], [transition], n_states=3)


def test_guard_armed_past_its_crossing_is_an_error_or_waits():
    """By default a guard already past its crossing when it becomes armed is a
    missed crossing (a swing foot coming ahead under the ground), reported at
    the arming instant with its cause; with `armed_outside="wait"` the
    transition fires at the next downward crossing (t = 3)."""
    x0 = jnp.array([1.0, 0.0, 0.0])
    strict = hx.simulate(_arming_system("error"), x0, {}, n_events=1, settings=SETTINGS)
    assert hx.status_name(strict.result) == ["armed_beyond_guard"]
    assert int(strict.n_events) == 0 and int(strict.cause_transition) == 0
    waiting = hx.simulate(_arming_system("wait"), x0, {}, n_events=1, settings=SETTINGS)
    assert hx.status_name(waiting.result) == ["successful"]
    np.testing.assert_allclose(waiting.t_events[0], 3.0, atol=1e-7)
    with pytest.raises(ValueError, match="armed_outside"):
        _arming_system("later")


def test_a_waiting_guard_hides_neither_the_horizon_nor_other_guards():
    """While a transition armed outside its guard waits for the guard to come
    back, the mode's other guards and the horizon still end the phase. The
    guard x[0] + 2 (the point's abscissa plus 2, never below 1), crossed upwards,
    is outside from its arming at t = 1.5 on and never comes back; a second,
    terminal transition at the clock's t = 2.25 fires, and with the horizon
    t_max = 2 before it the run ends there with `event_not_reached` (the waiting
    guard used to hide both until the step limit)."""
    waiting = hx.Transition(
        "turn",
        "turn",
        lambda t, x, p: x[0] + 2.0,
        True,
        name="never",
        arm=lambda t, x, p: x[2] - 1.5,
        armed_outside="wait",
    )
    clock = hx.Transition(
        "turn", "turn", lambda t, x, p: x[2] - 2.25, True, name="stop", terminal=True
    )
    system = hx.HybridSystem([hx.Mode(_rotation, "turn")], [waiting, clock], 3)
    x0 = jnp.array([1.0, 0.0, 0.0])
    stopped = hx.simulate(system, x0, {}, n_events=1, settings=hx.Settings(t_max=2.5))
    assert hx.status_name(stopped.result) == ["terminal_event"]
    assert int(stopped.cause_transition) == 1
    np.testing.assert_allclose(stopped.t_events[0], 2.25, atol=1e-9)
    timed_out = hx.simulate(system, x0, {}, n_events=1, settings=hx.Settings(t_max=2.0))
    assert hx.status_name(timed_out.result) == ["event_not_reached"]


def test_terminal_transition_ends_the_run_with_its_cause():
    """A terminal transition (a fall) ends the run at its crossing with status
    `terminal_event`: the ball falling from 1 m is stopped where it passes 0.5 m,
    at t = sqrt(2 * 0.5 / g), its state recorded; the bounce that would follow
    never happens."""

    def fall(t, x, p):
        del t, p
        return jnp.array([x[1], -G])

    transitions = [
        hx.Transition("air", "air", lambda t, x, p: x[0], False, name="bounce"),
        hx.Transition(
            "air", "air", lambda t, x, p: x[0] - 0.5, False, name="low", terminal=True
        ),
    ]
    system = hx.HybridSystem([hx.Mode(fall, "air")], transitions, n_states=2)
    sol = hx.simulate(system, jnp.array([1.0, 0.0]), {}, n_events=3, settings=SETTINGS)
    assert hx.status_name(sol.result) == ["terminal_event"]
    assert int(sol.n_events) == 1 and _names(system, sol) == ["low"]
    assert int(sol.cause_transition) == 1
    t_low = np.sqrt(2 * 0.5 / G)
    np.testing.assert_allclose(sol.t_events[0], t_low, atol=1e-9)
    np.testing.assert_allclose(sol.x_before[0], [0.5, -G * t_low], atol=1e-8)
    np.testing.assert_allclose(sol.t_final, t_low, atol=1e-9)
    assert "terminal" in hx.status_message(sol.result)[0]


def test_a_start_outside_the_modes_geometry_is_infeasible_under_vmap():
    """A mode's declared geometry (`Mode(domain=...)`: here the ball below a
    ceiling at 2 m). Under `jit` and `vmap` (no eager check) a start above it ends
    with `infeasible_initial_state` and NaN events, while its neighbour in the
    batch falls to the floor at the closed-form time sqrt(2 h / g). Eagerly,
    such a start is a `ValueError` naming the condition (the hopper's declared
    geometry: its upper mass above the foot)."""
    below = {"the ball below the ceiling": lambda t, x, p: 2.0 - x[0]}
    mode = hx.Mode(BALL.modes[0].vector_field, "air", domain=below)
    system = hx.HybridSystem((mode,), BALL.transitions, n_states=2)
    params = models.bouncing_ball.BallParams()
    starts = jnp.array([[1.0, 0.0], [2.5, 0.0]])
    batch = jax.jit(jax.vmap(lambda x: hx.simulate(system, x, params, n_events=1)))(
        starts
    )
    assert hx.status_name(batch.result) == ["successful", "infeasible_initial_state"]
    np.testing.assert_allclose(batch.t_events[0, 0], np.sqrt(2 / G), rtol=1e-12)
    assert np.all(np.isnan(batch.t_events[1]))
    with pytest.raises(ValueError, match="outside mode 'air'.*below the ceiling"):
        hx.simulate(system, starts[1], params, n_events=1)
    hopper = hx.canonical_params(models.hopper.make_params())
    with pytest.raises(ValueError, match="upper mass above the foot"):
        hx.simulate(HOPPER, jnp.array([0.5, 0.6, 0.0, 0.0]), hopper, n_events=2)


def _sensor_crossings(x0, v0, e, n):
    """Closed form: the times at which a ball from height x0 with upward speed v0
    (restitution e) passes 0.5 m downward, and its impacts, in order."""
    events, t, x, v = [], 0.0, x0, v0
    while len(events) < n:
        impact = (v + np.sqrt(v**2 + 2 * G * x)) / G
        if x + v**2 / (2 * G) > 0.5:  # the apex is above the sensor
            down = (v + np.sqrt(v**2 + 2 * G * (x - 0.5))) / G
            events.append((t + down, "sensor"))
        events.append((t + impact, "impact"))
        t, x, v = t + impact, 0.0, e * G * impact - e * v
    return events[:n]


@pytest.mark.parametrize("x0, v0", [(1.0, 0.0), (0.0, 3.5)])
def test_sensor_self_loop_fires_at_each_crossing(x0, v0):
    """A sensor transition (a self-loop with the identity reset: the ball passing
    0.5 m downward) leaves the state on its own guard; it is armed again once the
    ball is back above, so it fires at every downward passage between the
    impacts, at the closed-form times (from rest at 1 m, and from the floor, where
    the bounce's guard starts on its surface and the sensor re-arms within the
    first step)."""
    params = models.bouncing_ball.BallParams()
    sensor = hx.Transition(
        "air", "air", lambda t, x, p: x[0] - 0.5, False, name="sensor"
    )
    system = hx.HybridSystem(BALL.modes, (*BALL.transitions, sensor), n_states=2)
    sol = hx.simulate(
        system, jnp.array([x0, v0]), params, n_events=5, settings=SETTINGS
    )
    assert hx.status_name(sol.result) == ["successful"]
    expected = _sensor_crossings(x0, v0, params.e, 5)
    assert _names(system, sol) == [name for _, name in expected]
    np.testing.assert_allclose(sol.t_events, [t for t, _ in expected], atol=1e-9)


@pytest.mark.slow
def test_walker_orbit_and_multipliers_both_ways():
    """Shooting on the heel-strike section (reduced unknowns theta, theta_dot; phi
    and phi_dot follow from the reset) finds the published fixed point; AD and
    saltation agree, and equal finite differences of the step map."""
    params = hx.canonical_params({"gamma": 0.009})
    system = _walker(True)
    # After a heel strike phi = 2 theta and phi_dot = (1 - cos 2 theta) theta_dot.
    section = hx.PoincareSection(
        ("heelstrike",),
        chart=lambda u, p: jnp.stack(
            [u[0], 2 * u[0], u[1], (1 - jnp.cos(2 * u[0])) * u[1]]
        ),
        coordinates=lambda x, p: jnp.stack([x[0], x[2]]),
    )
    # At tolerance 1e-10 AD and saltation agree to ~2e-7; at 1e-12, to ~1e-9.
    settings = hx.Settings(t_max=20.0, rtol=1e-12, atol=1e-12)
    guess = jnp.array([0.19, -0.19])
    orbit = hx.find_periodic_orbit(system, section, guess, params, settings=settings)
    floquet = orbit.floquet
    assert bool(orbit.succeeded)
    np.testing.assert_allclose(orbit.state, WALKER_FIXED_POINT, atol=1e-9)
    assert float(floquet.max_discrepancy) < 1e-8

    def step(u):
        return np.asarray(
            hx.poincare_map(system, section, jnp.asarray(u), params, settings=settings)[
                0
            ]
        )

    fd = central_jacobian(step, np.asarray(orbit.u), h=1e-6)
    np.testing.assert_allclose(orbit.reduced_jacobian, fd, rtol=1e-5, atol=1e-7)


# --- observables ----------------------------------------------------------------


def _observed_ball(e):
    """The ball with two phase observables over each flight (its apex and two
    integrals) and a user's own event observable; its parameters."""
    params = hx.canonical_params(models.bouncing_ball.BallParams(e=e, m=2.0))
    observables = {
        "apex": hx.Extremum(lambda t, x, p: x[0]),
        # The flight's integral of v^2, and of d(exp(y))/dt (not a polynomial in t).
        "speed_squared": hx.Integral(lambda t, x, p: x[1] ** 2),
        "exp_rate": hx.Integral(lambda t, x, p: jnp.exp(x[0]) * x[1]),
    }
    system = hx.HybridSystem(
        [hx.Mode(BALL.modes[0].vector_field, "air", observables=observables)],
        [
            eqx.tree_at(
                lambda tr: tr.observe,
                BALL.transitions[0],
                lambda t, x_minus, x_plus, p: {
                    **BALL.transitions[0].reset.observables(t, x_minus, x_plus, p),
                    "speed_after": x_plus[1],
                },
            )
        ],
        n_states=2,
    )
    return system, params


def _drop_observables(system, params, height, settings=None):
    """The second flight's apex and the first flight's integral of v^2."""
    x0 = jnp.stack([height, jnp.zeros_like(height)])
    out = hx.simulate(system, x0, params, n_events=2, settings=settings)
    return jnp.stack(
        [out.phase_observables["apex"][1], out.phase_observables["speed_squared"][0]]
    )


def _drop_derivatives(e, h):
    """d(apex_1)/dh = e^2; d/dh of the first flight's integral of v^2,
    g^2 (2/g)^(3/2) sqrt(h) / 2 (through its end time: Leibniz's rule)."""
    return [e**2, G**2 * (2 / G) ** 1.5 * np.sqrt(h) / 2]


# Slow: the observed ball's simulation and its reverse-mode derivative compile
# for 20 s cold; the fast set keeps event observables in the plastic impact's
# test and phase observables in the orbit routines' tests.
@pytest.mark.slow
def test_event_and_phase_observables_of_the_ball():
    """T_c, T_a at each impact, the apex of each flight and two integrals over
    each flight, against closed forms, and a user's own event observable; the
    derivatives of an apex and an integral in reverse mode."""
    e, h = 0.7, 1.3
    system, params = _observed_ball(e)
    n = 2
    sol = hx.simulate(system, jnp.array([h, 0.0]), params, n_events=n)
    v = np.sqrt(2 * G * h) * e ** np.arange(n)  # impact speeds
    np.testing.assert_allclose(sol.T_c, 0.5 * 2.0 * (1 - e**2) * v**2, rtol=1e-9)
    np.testing.assert_allclose(sol.T_a, 0.5 * 2.0 * e**2 * v**2, rtol=1e-9)
    np.testing.assert_allclose(sol.observables["speed_after"], e * v, rtol=1e-9)
    # The first phase starts at its apex h; the k-th flight after rises to
    # (e v_k)^2 / (2 g).
    expected = np.concatenate([[h], (e * v[:-1]) ** 2 / (2 * G)])
    np.testing.assert_allclose(sol.phase_observables["apex"], expected, rtol=1e-9)
    # From the apex to the ground, v = -g t over T = sqrt(2h/g): g^2 T^3 / 3; a
    # whole flight from speed u: 2 u^3 / (3 g).
    u = e * v[:-1]
    expected = np.concatenate([[G**2 * (2 * h / G) ** 1.5 / 3], 2 * u**3 / (3 * G)])
    np.testing.assert_allclose(
        sol.phase_observables["speed_squared"], expected, rtol=1e-9
    )
    # exp(y_end) - exp(y_start): 1 - e^h, then 0 for a flight from the ground.
    np.testing.assert_allclose(
        sol.phase_observables["exp_rate"], [1 - np.exp(h), 0.0], atol=1e-9
    )

    reverse = jax.jacrev(_drop_observables, argnums=2)(system, params, jnp.asarray(h))
    np.testing.assert_allclose(reverse, _drop_derivatives(e, h), rtol=1e-7)


@pytest.mark.slow
def test_phase_observables_of_the_ball_in_forward_mode():
    """The same derivatives in forward mode (`diffrax.ForwardMode()`)."""
    e, h = 0.7, 1.3
    system, params = _observed_ball(e)
    settings = hx.Settings(adjoint=dfx.ForwardMode())
    forward = jax.jacfwd(_drop_observables, argnums=2)(
        system, params, jnp.asarray(h), settings
    )
    np.testing.assert_allclose(forward, _drop_derivatives(e, h), rtol=1e-7)


def _clearance_on_grid(g, t_start, t_end, n=256):
    """A clearance's value from `g(t)` and its rate on `n` times (what
    `hybrax.Clearance` does along a phase's dense output)."""
    from hybrax._simulate.observables import _interior_minimum

    grid = jnp.linspace(t_start, t_end, n)
    values, rates = jax.vmap(lambda t: jax.jvp(g, (t,), (jnp.ones_like(t),)))(grid)
    return _interior_minimum(values, rates, grid[1:] - grid[:-1])


def test_clearance_is_the_smallest_interior_minimum():
    """`hybrax.Clearance` against closed forms: g = cos(t - s) + t/10 on
    [0, 4 pi] has interior minima where sin(t - s) = 1/10 with cos(t - s) < 0,
    the smaller at t* = s + pi - asin(1/10), g* = -cos(asin(1/10)) + t*/10; its
    derivative in s is 1/10 (envelope theorem), by autodiff, which equals
    central differences. A minimum at a phase's first or last instant (cos t on
    [pi, 2 pi]) and a monotone g are no clearance (NaN)."""
    a = np.arcsin(0.1)

    def clearance(s):
        return _clearance_on_grid(lambda t: jnp.cos(t - s) + t / 10, 0.0, 4 * np.pi)

    s = 0.3
    expected = -np.cos(a) + (s + np.pi - a) / 10
    np.testing.assert_allclose(float(clearance(s)), expected, atol=1e-9)
    # The grid's O(h^4) error in the value moves with the minimum, so its
    # derivative is O(h^3): 9.5e-7 at 256 points (1.0e-7 at 512).
    gradient = float(jax.grad(clearance)(s))
    np.testing.assert_allclose(gradient, 0.1, atol=2e-6)
    h = 1e-5
    fd = (float(clearance(s + h)) - float(clearance(s - h))) / (2 * h)
    np.testing.assert_allclose(gradient, fd, atol=1e-9)
    assert np.isnan(float(_clearance_on_grid(jnp.cos, np.pi, 2 * np.pi)))
    assert np.isnan(float(_clearance_on_grid(lambda t: t**3 + t, 0.0, 1.0)))
    with pytest.raises(ValueError, match="n_grid"):
        hx.Clearance(lambda t, x, p: x[0], n_grid=1)


def test_plastic_impact_observables():
    """The constrained hopper's touchdown reports T_c, T_a and the impulse of the
    projection; H (v+ - v-) = G^T impulse and T_c = m_L v_L^2 / 2."""
    params = hx.canonical_params(models.hopper.make_params())
    x0 = models.hopper.to_constrained(models.hopper.liftoff_state(1.5, params))
    system = models.hopper.constrained()[0]
    sol = hx.simulate(system, x0, params, n_events=1, mode0="flight")
    v_minus = np.asarray(sol.x_before[0, 4:])
    v_plus = np.asarray(sol.x_after[0, 4:])
    mechanics = models.hopper.HopperMechanics("ground")
    H = np.asarray(mechanics.mass_matrix(sol.x_before[0, :4], params))
    G_q = np.asarray(
        hx.constraint_jacobian(
            mechanics, ("body", "ground"), sol.x_before[0, :4], params
        )
    )
    np.testing.assert_allclose(
        H @ (v_plus - v_minus),
        G_q.T @ np.asarray(sol.observables["impulse"][0]),
        atol=1e-10,
    )
    m_L = float(params.m_L)
    np.testing.assert_allclose(sol.T_c[0], 0.5 * m_L * v_minus[3] ** 2, rtol=1e-12)


# --- statuses with their causes ------------------------------------------------


@pytest.mark.slow
def test_failed_orbit_carries_its_cause_and_nan_values():
    """A leg so stiff that no cycle finishes within the step limit: the orbit's
    status is that of the cycle (`max_steps_reached`), not a bare
    `shooting_failed`, and every value, and every derivative, is NaN."""
    base = hx.canonical_params(models.hopper.make_params())
    params = eqx.tree_at(lambda p: p.k, base, jnp.asarray(1e12))
    system, section = HOPPER, models.hopper.section()
    orbit = hx.find_periodic_orbit(
        system,
        section,
        models.hopper.orbit_guess(params),
        params,
        settings=hx.Settings(rtol=1e-12, atol=1e-12),  # test_periodic's program
    )
    floquet = orbit.floquet
    assert hx.status_name(orbit.result) == ["max_steps_reached"]
    assert np.all(np.isnan(orbit.u)) and np.isnan(float(orbit.period))
    assert np.all(np.isnan(orbit.reduced_jacobian))
    assert np.all(np.isnan(floquet.multipliers_ad))

    # The return map of a failed cycle: NaN, and so is its derivative.
    def step(k):
        p = eqx.tree_at(lambda q: q.k, base, k)
        forward = hx.Settings(max_steps=64, adjoint=dfx.ForwardMode())
        u_next, _ = hx.poincare_map(
            system, section, models.hopper.orbit_guess(base), p, settings=forward
        )
        return u_next

    assert np.all(np.isnan(jax.jacfwd(step)(jnp.asarray(1e12))))


def test_status_of_a_batch_and_throw_under_vmap():
    params = hx.canonical_params(models.bouncing_ball.BallParams(e=0.5))
    heights = jnp.array([1.0, 0.0, 2.0])

    def run(h, throw):
        x0 = jnp.stack([h, jnp.zeros_like(h)])
        return hx.simulate(BALL, x0, params, n_events=5, settings=SETTINGS, throw=throw)

    batch = jax.vmap(lambda h: run(h, False))(heights)
    assert hx.status_name(batch.result) == [
        "successful",
        "mode_not_viable",
        "successful",
    ]
    assert np.all(np.isnan(batch.t_events[1]))
    assert hx.status_code(batch.result).tolist() == [
        0,
        hx.STATUS_NAMES.index("mode_not_viable"),
        0,
    ]
    # The eager routines' one-comparison check agrees with the names, batched
    # and per element.
    assert any_failed(batch.result)
    ok = hx.RESULTS.successful
    assert not any_failed(jax.vmap(lambda h: run(h, False))(heights[::2]).result)
    assert [any_failed(r) for r in (ok, hx.RESULTS.zeno, hx.RESULTS.not_run)] == [
        False,
        True,
        True,
    ]
    with pytest.raises(Exception, match="would end at the instant"):
        jax.vmap(lambda h: run(h, True))(heights)
    # Every name has a message of its own, read through the public interface.
    messages = {
        name: hx.status_message(getattr(hx.RESULTS, name))[0]
        for name in hx.STATUS_NAMES
    }
    assert len(set(messages.values())) == len(messages)


def test_settings_refuse_what_they_would_ignore():
    with pytest.raises(ValueError, match="stepsize_controller"):
        hx.Settings(
            stepsize_controller=dfx.PIDController(rtol=1e-8, atol=1e-8), rtol=1e-9
        )
    with pytest.raises(ValueError, match="rtol"):
        hx.Settings(rtol=2.0)
    with pytest.raises(ValueError, match="max_steps"):
        hx.Settings(max_steps=0)
    with pytest.raises(ValueError, match="solver"):
        hx.Settings(solver="tsit5")
    with pytest.raises(ValueError, match="settings"):
        hx.simulate(
            BALL,
            jnp.array([1.0, 0.0]),
            models.bouncing_ball.BallParams(),
            n_events=1,
            settings={"rtol": 1e-8},
        )
    with pytest.raises(ValueError, match="adjoint"):
        hx.find_periodic_orbit(
            HOPPER,
            models.hopper.section(),
            jnp.ones(2),
            models.hopper.make_params(),
            settings=hx.Settings(adjoint=dfx.BacksolveAdjoint()),
        )
