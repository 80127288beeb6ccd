"""The monopodial jumper (seed 001) against conservation laws and closed forms
written here: the seed's straight-leg drop bounces elastically with contacts at
(2k + 1) sqrt(2h/g) and constant energy over its 856 contacts in 400 s; with
plastic contact it lands losing all its kinetic energy; a jump's apex is the
ballistic height of the centre of mass at lift-off, its touchdown loses T_c with the
linear-momentum jump equal to the impulse and the angular momentum about the
contact point kept; an elastic landing keeps the energy and reverses the foot's
velocity; d(apex)/d(torque coefficient) by autodiff through stance, lift-off and
flight matches central differences. Every run shares one compiled program (the
simulation and its forward-mode derivative)."""

import math

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax.models import jumper as jm


TOL = 1e-10
G = 9.81
# The seed's anthropometric table: masses [kg] and inertias about the plane's
# normal [kg m^2] of calf, thigh and torso; lengths and centres [m].
MASSES = np.array([3.28, 6.86, 28.2055])
INERTIAS = np.array([0.0504, 0.1188, 0.1368])
L_CALF, L_THIGH = 0.41, 0.41
C_CALF, C_THIGH, C_TORSO = 0.2325, 0.2325, 0.25
M = MASSES.sum()

# The seed's Fig. 3: 400 s of elastic bouncing from rest, the calf's centre of
# mass at 0.5 m: the foot falls h = 0.5 - c_calf and hits the ground at
# (2k + 1) sqrt(2h/g), 856 times before 400 s.
DROP_HEIGHT = 0.5 - C_CALF
FIRST_CONTACT = math.sqrt(2 * DROP_HEIGHT / G)
N_CONTACTS = 856
SEED_DURATION = 400.0

SYSTEM, DEFAULTS = jm.jumper()
FLIGHT, STANCE = 0, 1
TOUCHDOWN = SYSTEM.transition_index("touchdown")
LIFTOFF = SYSTEM.transition_index("liftoff")
BOUNCE = SYSTEM.transition_index("bounce")


def _params(**values):
    return hx.canonical_params(jm.JumperParams(**values))


def _zeros_like(params):
    return jax.tree_util.tree_map(jnp.zeros_like, params)


@pytest.fixture(scope="module")
def run():
    """`run(x0, params, mode0, t_max, tangent) -> (solution, derivative)`: the
    simulation through up to N_CONTACTS events and its forward-mode derivative
    along the parameter tangent `tangent`, one compiled program for every test.
    Forward mode: it compiles in less than half the time of reverse mode (whose
    `jax.grad` gives the same derivative to 5e-10)."""

    @jax.jit
    def run(x0, params, mode0, t_max, tangent):
        settings = hx.Settings(
            rtol=TOL, atol=TOL, t_max=t_max, adjoint=dfx.ForwardMode()
        )

        def simulate(p):
            return hx.simulate(
                SYSTEM, x0, p, n_events=N_CONTACTS, settings=settings, mode0=mode0
            )

        return jax.jvp(simulate, (params,), (tangent,))

    def call(x0, params, mode0, t_max, tangent=None):
        # Strongly typed float64 leaves throughout: a weakly typed one (a Python
        # float through `jnp.asarray`) would compile the program again.
        params = hx.canonical_params(params)
        tangent = _zeros_like(params) if tangent is None else tangent
        return run(
            jnp.asarray(x0, jnp.float64),
            params,
            jnp.asarray(mode0, jnp.int32),
            jnp.asarray(t_max, jnp.float64),
            hx.canonical_params(tangent),
        )

    return call


# -- Hand-written kinematics and energies (the references) ------------------------


def _com_points(x):
    """Centres of mass of calf, thigh and torso, and their velocities."""
    foot, v_foot = np.asarray(x[:2]), np.asarray(x[5:7])
    angles, rates = np.asarray(x[2:5]), np.asarray(x[7:10])

    def axis(phi):
        return np.array([math.sin(phi), math.cos(phi)])

    def axis_rate(phi, w):
        return w * np.array([math.cos(phi), -math.sin(phi)])

    knee = foot + L_CALF * axis(angles[0])
    v_knee = v_foot + L_CALF * axis_rate(angles[0], rates[0])
    hip = knee + L_THIGH * axis(angles[1])
    v_hip = v_knee + L_THIGH * axis_rate(angles[1], rates[1])
    points = [
        foot + C_CALF * axis(angles[0]),
        knee + C_THIGH * axis(angles[1]),
        hip + C_TORSO * axis(angles[2]),
    ]
    velocities = [
        v_foot + C_CALF * axis_rate(angles[0], rates[0]),
        v_knee + C_THIGH * axis_rate(angles[1], rates[1]),
        v_hip + C_TORSO * axis_rate(angles[2], rates[2]),
    ]
    return points, velocities


def _energy(x):
    points, velocities = _com_points(x)
    kinetic = 0.5 * sum(m * v @ v for m, v in zip(MASSES, velocities))
    kinetic += 0.5 * float(INERTIAS @ np.asarray(x[7:10]) ** 2)
    potential = G * sum(m * r[1] for m, r in zip(MASSES, points))
    return kinetic, kinetic + potential


def _com(x):
    points, velocities = _com_points(x)
    return (
        sum(m * r for m, r in zip(MASSES, points)) / M,
        sum(m * v for m, v in zip(MASSES, velocities)) / M,
    )


def _angular_momentum(x, about):
    """Angular momentum about the point `about` (z component)."""
    points, velocities = _com_points(x)
    # Angles grow clockwise (from the vertical towards +x): a segment's spin about
    # z is -I omega.
    total = -float(INERTIAS @ np.asarray(x[7:10]))
    for m, r, v in zip(MASSES, points, velocities):
        d = r - about
        total += m * (d[0] * v[1] - d[1] * v[0])
    return total


# -- The seed's straight-leg drop -------------------------------------------------


@pytest.fixture(scope="module")
def elastic_drop(run):
    params = _params(elastic=1.0)
    solution, _ = run(jm.default_state(params), params, FLIGHT, SEED_DURATION)
    return solution


@pytest.mark.slow
def test_elastic_straight_drop_keeps_its_energy_over_the_seeds_contacts(
    elastic_drop,
):
    """856 contacts in 400 s at (2k + 1) sqrt(2h/g); the leg stays straight and
    upright; the total energy after each contact equals the initial one to within
    the integration tolerance accumulated over the contacts (N rtol)."""
    solution = elastic_drop
    assert hx.status_name(solution.result) == ["successful"]
    assert int(solution.n_events) == N_CONTACTS
    assert np.all(np.asarray(solution.transitions) == BOUNCE)
    k = np.arange(N_CONTACTS)
    np.testing.assert_allclose(
        solution.t_events, (2 * k + 1) * FIRST_CONTACT, rtol=1e-9, atol=0
    )
    assert float(solution.t_events[-1]) < SEED_DURATION
    after = np.asarray(solution.x_after)
    np.testing.assert_array_equal(after[:, 2:5], 0.0)
    np.testing.assert_array_equal(after[:, 7:10], 0.0)
    energy0 = _energy(jm.default_state())[1]
    energies = np.array([_energy(x)[1] for x in after])
    drift = np.max(np.abs(energies - energy0)) / energy0
    assert drift < N_CONTACTS * TOL
    # The kinetic energy at each contact is M g h: the speed sqrt(2 g h) reflected.
    np.testing.assert_allclose(after[:, 6], math.sqrt(2 * G * DROP_HEIGHT), rtol=1e-9)
    # Nothing is lost (T_c = 0) and the kinetic energy after each contact is the
    # M g h it had before.
    np.testing.assert_allclose(solution.observables["T_c"], 0.0, atol=1e-12)
    np.testing.assert_allclose(
        solution.observables["T_a"], M * G * DROP_HEIGHT, rtol=1e-9
    )
    np.testing.assert_allclose(solution.observables["energy_lost"], 0.0, atol=1e-12)


# A state of the foot at the ground, falling forward with every segment turning.
_LANDING = np.array([0.3, 0.0, 0.2, -0.1, 0.05, 0.8, -2.5, 1.1, -0.7, 0.4])


@pytest.mark.parametrize("kind", ["bounce", "touchdown"])
def test_impact_reports_the_energy_lost_and_the_energy_after(kind):
    """For every contact model, T_c is the kinetic energy the impact loses and
    T_a the kinetic energy after it (the documented meaning): measured here from
    the state after the reset with the reference model's mass matrix
    (H = d2T/dqd2) and the hand-written energy of the mass points. The elastic
    bounce loses T_c = 0 to rounding and keeps all of T^- (it reported the
    constrained share of T^-, 100.6 J of the straight drop, as lost); the
    plastic touchdown loses T^- - T^+ > 0."""
    params = _params(elastic=1.0 if kind == "bounce" else 0.0)
    reset = SYSTEM.transitions[SYSTEM.transition_index(kind)].reset
    x_minus = jnp.asarray(_LANDING)
    x_plus = np.asarray(reset(0.0, x_minus, params))
    values = {
        name: float(value)
        for name, value in reset.observables(0.0, x_minus, x_plus, params).items()
        if np.ndim(value) == 0
    }
    H = np.asarray(jm.lagrangian_model().mass_matrix(jnp.asarray(x_plus[:5]), params))
    after = 0.5 * x_plus[5:] @ H @ x_plus[5:]
    before = _energy(_LANDING)[0]
    np.testing.assert_allclose(after, _energy(x_plus)[0], rtol=1e-12)
    np.testing.assert_allclose(values["T_a"], after, rtol=1e-12)
    np.testing.assert_allclose(values["T_c"], before - after, atol=1e-12 * before)
    np.testing.assert_allclose(values["energy_lost"], values["T_c"], rtol=0)
    if kind == "bounce":
        assert abs(values["T_c"]) <= 1e-12 * before
        np.testing.assert_allclose(values["T_a"], before, rtol=1e-12)
        # The foot's velocity reversed: a real impact, not a no-op.
        np.testing.assert_allclose(x_plus[5:7], -_LANDING[5:7], rtol=1e-12)
    else:
        assert values["T_c"] > 0.1 * before and values["T_a"] > 0.1 * before


# Slow: the plastic form's program compiles for about 30 s (the elastic drop above
# keeps the closed-form touchdown in the fast set).
@pytest.mark.slow
def test_plastic_straight_drop_loses_its_kinetic_energy(run):
    """The same drop with plastic contact: one touchdown at sqrt(2h/g) that loses
    T_c = M g h (the whole kinetic energy: a vertical translation is orthogonal to
    the rotations about the foot, so T_a = 0), then the jumper stands at rest: no
    further event."""
    params = _params()
    solution, _ = run(jm.default_state(params), params, FLIGHT, 2.0)
    assert hx.status_name(solution.result) == ["event_not_reached"]
    assert int(solution.n_events) == 1
    assert int(solution.transitions[0]) == TOUCHDOWN
    np.testing.assert_allclose(solution.t_events[0], FIRST_CONTACT, rtol=1e-9)
    T_c = float(solution.observables["T_c"][0])
    np.testing.assert_allclose(T_c, M * G * DROP_HEIGHT, rtol=1e-9)
    np.testing.assert_allclose(solution.observables["T_a"][0], 0.0, atol=1e-9)
    before, after = _energy(solution.x_before[0]), _energy(solution.x_after[0])
    np.testing.assert_allclose(before[1] - after[1], T_c, rtol=1e-9)
    np.testing.assert_allclose(solution.x_after[0][5:], 0.0, atol=1e-12)
    np.testing.assert_allclose(solution.x_final[5:], 0.0, atol=1e-9)


# -- A jump ---------------------------------------------------------------------
# Slow, with the elastic landing below: the `run` fixture's simulation with its
# tangent compiles for 33-41 s cold on 2 cores, the fast set's largest.


@pytest.fixture(scope="module")
def jump(run):
    """The demonstration jump (plastic contact) and the derivative of its run
    along the knee's torque coefficient `knee_1`."""
    params = hx.canonical_params(jm.jump_params())
    tangent = eqx.tree_at(lambda p: p.knee_1, _zeros_like(params), jnp.asarray(1.0))
    return run(jm.crouch_state(params), params, STANCE, 0.6, tangent)


@pytest.mark.slow
def test_jump_apex_is_the_ballistic_height_of_the_centre_of_mass(jump):
    """Lift-off (the normal force changes sign), flight, touchdown. In flight the
    centre of mass is ballistic: its apex is y + vy^2 / (2 g) at lift-off, and it
    travels vx times the flight time."""
    solution, _ = jump
    assert [int(k) for k in solution.transitions[:2]] == [LIFTOFF, TOUCHDOWN]
    liftoff, landing = solution.x_after[0], solution.x_before[1]
    com, v_com = _com(liftoff)
    assert v_com[1] > 1.0  # a real jump
    apex = float(solution.phase_observables["com_apex"][1])
    np.testing.assert_allclose(apex, com[1] + v_com[1] ** 2 / (2 * G), rtol=1e-9)
    flight = float(solution.t_events[1] - solution.t_events[0])
    com_landing, v_landing = _com(landing)
    np.testing.assert_allclose(com_landing[0] - com[0], v_com[0] * flight, rtol=1e-8)
    np.testing.assert_allclose(v_landing[0], v_com[0], rtol=1e-8)
    np.testing.assert_allclose(v_landing[1], v_com[1] - G * flight, rtol=1e-8)
    # The foot stood still until lift-off (x is measured from the contact point).
    np.testing.assert_allclose(liftoff[:2], 0.0, atol=1e-9)
    np.testing.assert_allclose(liftoff[5:7], 0.0, atol=1e-9)
    np.testing.assert_allclose(solution.observables["stride"][1], landing[0])


@pytest.mark.slow
def test_jump_touchdown_loses_T_c_and_keeps_the_angular_momentum(jump):
    """At the plastic touchdown: the energy drops by T_c, the kinetic energy after
    it is T_a, the linear momentum jumps by the impulse, and the angular momentum
    about the contact point is kept (the impulse acts there)."""
    solution, _ = jump
    before, after = np.asarray(solution.x_before[1]), np.asarray(solution.x_after[1])
    T_c = float(solution.observables["T_c"][1])
    T_a = float(solution.observables["T_a"][1])
    assert T_c > 1.0 and T_a > 1.0
    kinetic_before, energy_before = _energy(before)
    kinetic_after, energy_after = _energy(after)
    np.testing.assert_allclose(energy_before - energy_after, T_c, rtol=1e-9)
    np.testing.assert_allclose(kinetic_after, T_a, rtol=1e-9)
    np.testing.assert_allclose(kinetic_before, T_a + T_c, rtol=1e-9)
    np.testing.assert_allclose(after[5:7], 0.0, atol=1e-10)  # the foot stops
    impulse = np.asarray(solution.observables["impulse"][1])
    momentum_jump = M * (_com(after)[1] - _com(before)[1])
    np.testing.assert_allclose(momentum_jump, impulse, rtol=1e-9)
    # The frame moves to the landing foot: compare about it in both frames.
    landing_foot = np.array([before[0], 0.0])
    np.testing.assert_allclose(
        _angular_momentum(after, np.zeros(2)),
        _angular_momentum(before, landing_foot),
        rtol=1e-9,
    )


@pytest.mark.slow
def test_lift_off_is_where_the_normal_force_changes_sign(jump):
    """At lift-off the ground's normal multiplier is zero and the released foot
    accelerates upwards (a consistent release)."""
    solution, _ = jump
    x = solution.x_before[0]
    params = hx.canonical_params(jm.jump_params())
    model = jm.JumperMechanics()
    t = solution.t_events[0]
    _, lam = hx.constrained_accelerations(model, ("ground",), x[:5], x[5:], params, t)
    free, _ = hx.constrained_accelerations(model, (), x[:5], x[5:], params, t)
    np.testing.assert_allclose(lam[1] / (M * G), 0.0, atol=1e-11)
    assert float(free[1]) > 1.0


@pytest.mark.slow
def test_apex_derivative_matches_central_differences(run, jump):
    """d(apex)/d(knee_1), by forward-mode autodiff through the stance phase, the
    lift-off event and the flight, against central differences."""
    _, derivative = jump
    ad = float(derivative.phase_observables["com_apex"][1])
    params = hx.canonical_params(jm.jump_params())
    h = 0.25  # N m, of a coefficient of 740 N m

    def apex(knee_1):
        moved = eqx.tree_at(lambda p: p.knee_1, params, jnp.asarray(knee_1))
        solution, _ = run(jm.crouch_state(params), moved, STANCE, 0.6)
        return float(solution.phase_observables["com_apex"][1])

    fd = (apex(740.0 + h) - apex(740.0 - h)) / (2 * h)
    assert ad > 0
    np.testing.assert_allclose(ad, fd, rtol=1e-5)


@pytest.mark.slow
def test_elastic_landing_keeps_the_energy_and_reverses_the_foot(run):
    """The jump landing on elastic contact: at each bounce the kinetic energy is
    kept and the foot's velocity reversed (qd+ = qd- - 2 P_c qd-), and once the
    torques are off (t > t_push) the total energy stays constant."""
    params = hx.canonical_params(jm.jump_params(elastic=1.0))
    solution, _ = run(jm.crouch_state(params), params, STANCE, 3.0)
    n = int(solution.n_events)
    assert n >= 6
    kinds = [int(k) for k in solution.transitions[:n]]
    assert kinds[0] == LIFTOFF and set(kinds[1:]) == {BOUNCE}
    energies = []
    for k in range(1, n):
        before, after = (
            np.asarray(solution.x_before[k]),
            np.asarray(solution.x_after[k]),
        )
        kinetic_before, energy = _energy(before)
        np.testing.assert_allclose(_energy(after)[0], kinetic_before, rtol=1e-10)
        np.testing.assert_allclose(after[5:7], -before[5:7], rtol=1e-10, atol=1e-12)
        energies.append(energy)
    assert float(solution.t_events[1]) > float(params.t_push)
    energies = np.array(energies)
    assert np.max(np.abs(energies - energies[0])) / energies[0] < n * 10 * TOL


# -- The equations of motion and the parameters ------------------------------------


def test_mechanics_equal_the_lagrangian_model():
    """`JumperMechanics` (H = J^T W J from the mass points) and
    `hybrax.LagrangianModel` of the same T, V, Q (H = d2T/dqd2): equal."""
    key = jax.random.PRNGKey(0)
    params = hx.canonical_params(jm.jump_params())
    fast, reference = jm.JumperMechanics(), jm.lagrangian_model()
    for k in jax.random.split(key, 3):
        q, qd = jax.random.normal(k, (2, 5))
        t = jnp.asarray(0.07)
        np.testing.assert_allclose(
            fast.mass_matrix(q, params), reference.mass_matrix(q, params), atol=1e-12
        )
        np.testing.assert_allclose(
            fast.forces(q, qd, params, t),
            reference.forces(q, qd, params, t),
            rtol=1e-12,
            atol=1e-10,
        )


def test_parameters_are_checked():
    with pytest.raises(ValueError, match="elastic"):
        jm.JumperParams(elastic=0.5)
    with pytest.raises(ValueError, match="t_push"):
        jm.JumperParams(t_push=0.0)
    bundle = hx.models.get_model("jumper")
    assert bundle.make_params(elastic=1.0).elastic == 1.0
    with pytest.raises(ValueError, match="unknown"):
        bundle.make_params(contact=1.0)


@pytest.mark.slow
def test_best_jump_raises_the_apex_within_the_torque_limit():
    """`best_jump`'s gradient loop (BFGS on the Bezier torque coefficients,
    forward-mode derivatives through stance, lift-off and flight): the centre of
    mass rises above the demonstration jump's apex, every coefficient stays inside
    the torque limit, and the reported apex is the best of its history."""
    limit = 800.0
    best = jm.best_jump(torque_limit=limit, max_steps=40)
    assert best.apex > best.start_apex + 0.01
    assert all(abs(value) < limit for value in best.coefficients.values())
    finite = [a for a in best.history if math.isfinite(a)]
    np.testing.assert_allclose(best.apex, max(finite), rtol=1e-9)
    # An independent check of the reported apex: the jump simulated again.
    assert best.n_steps <= 40 and best.compile_time > 0
