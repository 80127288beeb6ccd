"""simulate() against closed forms: the hopper's modal solution (seed 000 section
4.1, in reference_hopper.py, NumPy/SciPy only), the bouncing ball, the rimless wheel;
autodiff through events against finite differences; status codes for bad input."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
import reference_hopper as ref
from helpers import MULTIPLIER_TOL, central_jacobian
from hybrax import models


PARAMS = models.hopper.HopperParams()
REF_PARAMS = ref.HopperParams()
SYSTEMS = {
    "minimal": models.hopper.minimal()[0],
    "constrained": models.hopper.constrained()[0],
}
# An off-orbit lift-off state: z_L = v_L = 0 and the ground force zero.
X_LIFTOFF = np.asarray(models.hopper.liftoff_state(1.5, PARAMS))
N_HOP_EVENTS = 4  # two hops: touchdown, lift-off, touchdown, lift-off


def _to_form(x_min, form):
    return (
        models.hopper.to_constrained(x_min)
        if form == "constrained"
        else jnp.asarray(x_min)
    )


def _to_min(x, form):
    return models.hopper.to_minimal(x) if form == "constrained" else x


SETTINGS = hx.Settings(t_max=10.0)
FORWARD = hx.Settings(t_max=10.0, adjoint=dfx.ForwardMode())


def _run(form, x_min, params=PARAMS, **kwargs):
    return hx.simulate(
        SYSTEMS[form],
        _to_form(x_min, form),
        params,
        n_events=N_HOP_EVENTS,
        settings=SETTINGS,
        mode0="flight",
        **kwargs,
    )


@pytest.fixture(scope="module")
def reference_hops():
    hop1 = ref.one_hop(X_LIFTOFF, REF_PARAMS)
    hop2 = ref.one_hop(hop1["x_liftoff"], REF_PARAMS)
    t1 = hop1["period"]
    times = [hop1["t_flight"], t1, t1 + hop2["t_flight"], t1 + hop2["period"]]
    before = [hop1["x_touchdown_pre"], hop1["x_liftoff"]]
    before += [hop2["x_touchdown_pre"], hop2["x_liftoff"]]
    after = [hop1["x_touchdown_post"], hop1["x_liftoff"]]
    after += [hop2["x_touchdown_post"], hop2["x_liftoff"]]
    return dict(
        times=np.array(times),
        before=np.array(before),
        after=np.array(after),
        T_c=[hop1["T_c"], hop2["T_c"]],
        T_a=[hop1["T_a"], hop2["T_a"]],
    )


# The constrained form is slow (11-15 s cold); the minimal one stays fast.
@pytest.mark.parametrize(
    "form", ["minimal", pytest.param("constrained", marks=pytest.mark.slow)]
)
def test_hopper_events_match_closed_form(form, reference_hops):
    sol = _run(form, X_LIFTOFF)
    assert sol.result == hx.RESULTS.successful
    assert int(sol.n_events) == N_HOP_EVENTS
    names = [SYSTEMS[form].transitions[int(k)].name for k in sol.transitions]
    assert names == ["touchdown", "liftoff", "touchdown", "liftoff"]
    np.testing.assert_allclose(sol.t_events, reference_hops["times"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(
        _to_min(sol.x_before, form), reference_hops["before"], rtol=0, atol=1e-9
    )
    np.testing.assert_allclose(
        _to_min(sol.x_after, form), reference_hops["after"], rtol=0, atol=1e-9
    )
    np.testing.assert_allclose(sol.T_c[::2], reference_hops["T_c"], rtol=1e-9)
    np.testing.assert_allclose(sol.T_a[::2], reference_hops["T_a"], rtol=1e-9)
    assert np.all(np.isnan(sol.T_c[1::2]))  # lift-off is no impact


# Slow: 20 s cold (the constrained form's dense simulation); the fast set keeps
# the constrained form's events against the closed form.
@pytest.mark.slow
def test_constrained_and_minimal_agree_along_the_phase():
    x0 = models.hopper.default_state(PARAMS)
    kw = dict(n_save=50)
    sol_min = _run("minimal", x0, **kw)
    sol_con = _run("constrained", x0, **kw)
    np.testing.assert_allclose(sol_con.t_events, sol_min.t_events, atol=1e-10)
    np.testing.assert_allclose(
        models.hopper.to_minimal(sol_con.x_phase), sol_min.x_phase, atol=1e-9
    )
    # The constraints z1 = z2 and z3 = z4 hold along the constrained trajectory.
    xs = sol_con.x_phase
    np.testing.assert_allclose(xs[..., 0] - xs[..., 1], 0.0, atol=1e-10)
    np.testing.assert_allclose(xs[..., 2] - xs[..., 3], 0.0, atol=1e-10)
    # Ground phases keep the lower mass on the ground.
    ground = np.asarray(sol_min.modes) == 1
    np.testing.assert_allclose(sol_min.x_phase[ground][..., 1], 0.0, atol=1e-12)


def test_energy_balance_in_flight():
    # In flight only the damper d_F dissipates: dE/dt = -d_F (v_U - v_L)^2.
    x0 = models.hopper.default_state(PARAMS)
    sol = _run("minimal", x0, n_save=400)
    ts, xs = np.asarray(sol.t_phase[0]), np.asarray(sol.x_phase[0])
    _, _, energy = models.hopper.energies(xs, PARAMS)
    power = -PARAMS.d_F * (xs[:, 2] - xs[:, 3]) ** 2
    dissipated = np.concatenate(
        [[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * np.diff(ts))]
    )
    np.testing.assert_allclose(energy - energy[0], dissipated, atol=2e-4)


def test_bouncing_ball_impacts_and_zeno_time():
    params = models.bouncing_ball.BallParams(e=0.7)
    h = 1.0
    n = 20
    sol = hx.simulate(
        models.bouncing_ball.bouncing_ball()[0],
        jnp.array([h, 0.0]),
        params,
        n_events=n,
        settings=SETTINGS,
    )
    assert sol.result == hx.RESULTS.successful
    g, e = params.g, params.e
    v1 = np.sqrt(2 * g * h)
    flights = 2 * v1 * e ** np.arange(1, n) / g
    expected = np.sqrt(2 * h / g) + np.concatenate([[0.0], np.cumsum(flights)])
    np.testing.assert_allclose(sol.t_events, expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(sol.x_before[:, 1], -v1 * e ** np.arange(n), atol=1e-9)
    # Aitken's extrapolation of the impact times gives the Zeno time.
    t = np.asarray(sol.t_events)
    zeno = t[-1] - (t[-1] - t[-2]) ** 2 / (t[-1] - 2 * t[-2] + t[-3])
    np.testing.assert_allclose(zeno, np.sqrt(2 * h / g) + 2 * e * v1 / (g * (1 - e)))
    np.testing.assert_allclose(
        sol.T_c, 0.5 * (1 - e**2) * sol.x_before[:, 1] ** 2, rtol=1e-12
    )


def test_rimless_wheel_fixed_point_and_multiplier():
    params = models.rimless_wheel.RimlessWheelParams()
    g_l, a, gam = params.g / params.l, params.alpha, params.gamma
    c2 = np.cos(2 * a) ** 2
    u_star = 4 * g_l * np.sin(a) * np.sin(gam) * c2 / (1 - c2)
    omega_star = np.sqrt(u_star)
    system = models.rimless_wheel.rimless_wheel()[0]

    def step(omega):
        x0 = jnp.stack([jnp.asarray(gam - a), omega])
        sol = hx.simulate(system, x0, params, n_events=1, settings=FORWARD)
        return sol.x_after[0]

    x1 = step(jnp.asarray(omega_star))
    np.testing.assert_allclose(x1, [gam - a, omega_star], atol=1e-9)
    multiplier = jax.jacfwd(step)(jnp.asarray(omega_star))[1]
    np.testing.assert_allclose(multiplier, c2, rtol=MULTIPLIER_TOL)


@pytest.mark.parametrize(
    "form", ["minimal", pytest.param("constrained", marks=pytest.mark.slow)]
)
def test_one_hop_jacobian_against_finite_differences(form):
    """d(state after touchdown and lift-off)/d(initial state), event-time
    sensitivity included."""
    x_start = models.hopper.default_state(PARAMS)

    @jax.jit
    def hop(x0):
        sol = hx.simulate(
            SYSTEMS[form],
            _to_form(x0, form),
            PARAMS,
            n_events=2,
            settings=FORWARD,
        )
        return jnp.concatenate([_to_min(sol.x_after[1], form), sol.t_events])

    jac = jax.jacfwd(hop)(x_start)
    fd = central_jacobian(lambda x: hop(jnp.asarray(x)), x_start, h=1e-6)
    np.testing.assert_allclose(jac, fd, rtol=1e-5, atol=1e-6)
    # Freezing the event times would give a different answer: the event-time
    # sensitivity is not negligible here.
    assert np.max(np.abs(jac[-2:])) > 1e-2


def test_vmap_equals_loop_and_failed_element_is_flagged():
    system = SYSTEMS["minimal"]
    x_good = models.hopper.default_state(PARAMS)
    batch = jnp.stack([x_good, x_good.at[1].set(-0.05), x_good.at[1].set(0.2)])

    def run(x0):
        return hx.simulate(system, x0, PARAMS, n_events=N_HOP_EVENTS, settings=SETTINGS)

    batched = jax.vmap(run)(batch)
    names = hx.status_name(batched.result)
    assert names == ["successful", "infeasible_initial_state", "successful"]
    for i in (0, 2):
        single = run(batch[i])
        np.testing.assert_allclose(batched.t_events[i], single.t_events, atol=1e-12)
        np.testing.assert_allclose(batched.x_after[i], single.x_after, atol=1e-12)
    assert np.all(np.isnan(batched.t_events[1]))


def test_jit_with_traced_parameters_equals_eager():
    x0 = models.hopper.default_state(PARAMS)

    @jax.jit
    def first_touchdown(d_F):
        p = eqx.tree_at(lambda s: s.d_F, PARAMS, d_F)
        sol = hx.simulate(
            SYSTEMS["minimal"], x0, p, n_events=N_HOP_EVENTS, settings=SETTINGS
        )
        return sol.t_events

    eager = _run("minimal", x0).t_events
    np.testing.assert_allclose(first_touchdown(150.0), eager, atol=1e-13)


# --- bad input -------------------------------------------------------------------


def test_state_of_wrong_shape_raises():
    with pytest.raises(ValueError, match="x0"):
        hx.simulate(SYSTEMS["minimal"], jnp.zeros(3), PARAMS, n_events=2)
    with pytest.raises(ValueError, match="x0"):
        hx.simulate(SYSTEMS["minimal"], jnp.zeros((2, 4)), PARAMS, n_events=2)


@pytest.mark.parametrize(
    "bad, name",
    [
        ({"m": -1.0}, "`m`"),
        ({"k": 0.0}, "`k`"),
        ({"mu": 1.5}, "`mu`"),
        ({"d_G": np.nan}, "`d_G`"),
    ],
)
def test_impossible_parameters_raise(bad, name):
    with pytest.raises(ValueError, match=name):
        models.hopper.HopperParams(**bad)
    with pytest.raises(ValueError, match=name):
        models.hopper.make_params(**bad)


def test_bad_static_arguments_raise():
    x0 = models.hopper.default_state(PARAMS)
    with pytest.raises(ValueError, match="n_events"):
        hx.simulate(SYSTEMS["minimal"], x0, PARAMS, n_events=0)
    with pytest.raises(ValueError, match="t_max"):
        hx.simulate(
            SYSTEMS["minimal"], x0, PARAMS, n_events=2, settings=hx.Settings(t_max=-1.0)
        )
    with pytest.raises(ValueError, match="mode"):
        hx.simulate(SYSTEMS["minimal"], x0, PARAMS, n_events=2, mode0="air")
    with pytest.raises(ValueError, match="direction"):
        hx.Transition("a", "a", guard=lambda t, x, p: x[0], direction=None)


def test_initial_state_below_ground_is_reported():
    x0 = models.hopper.default_state(PARAMS).at[1].set(-0.01)
    sol = _run("minimal", x0)
    assert sol.result == hx.RESULTS.infeasible_initial_state
    assert int(sol.n_events) == 0
    assert np.all(np.isnan(sol.t_events))


def test_guard_never_reached_is_reported():
    x0 = models.hopper.default_state(PARAMS)
    sol = hx.simulate(
        SYSTEMS["minimal"],
        x0,
        PARAMS,
        n_events=N_HOP_EVENTS,
        settings=hx.Settings(t_max=0.05),
    )
    assert sol.result == hx.RESULTS.event_not_reached
    assert int(sol.n_events) == 0
    # Without an event, the final fields are where the failed phase started.
    assert float(sol.t_final) == 0.0
    assert int(sol.mode_final) == 0
    np.testing.assert_array_equal(sol.x_final, x0)


def test_step_limit_is_reported():
    x0 = models.hopper.default_state(PARAMS)
    sol = hx.simulate(
        SYSTEMS["minimal"],
        x0,
        PARAMS,
        n_events=N_HOP_EVENTS,
        settings=hx.Settings(t_max=10.0, max_steps=4),
    )
    assert sol.result == hx.RESULTS.max_steps_reached
    assert np.all(np.isnan(sol.x_after))


def test_nonfinite_parameters_inside_jit_are_reported():
    x0 = models.hopper.default_state(PARAMS)
    bad = eqx.tree_at(lambda s: s.k, PARAMS, jnp.asarray(jnp.nan))  # skips checks
    sol = _run("minimal", x0, params=bad)
    assert sol.result == hx.RESULTS.nonfinite_parameters


def test_throw_raises_with_the_status_message():
    x0 = models.hopper.default_state(PARAMS).at[1].set(-0.01)
    with pytest.raises(Exception, match="initial state"):
        _run("minimal", x0, throw=True)
    assert "initial state" in hx.status_message(_run("minimal", x0).result)[0]


def test_reverse_mode_gradient_of_an_event_time():
    """jax.grad (default adjoint) through the event: the ball's first impact time
    t = sqrt(2h/g) has dt/dh = 1/sqrt(2 g h)."""
    params = hx.canonical_params(models.bouncing_ball.BallParams())
    system = models.bouncing_ball.bouncing_ball()[0]

    def impact_time(h):
        x0 = jnp.stack([h, jnp.zeros_like(h)])
        return hx.simulate(system, x0, params, n_events=1, settings=SETTINGS).t_events[
            0
        ]

    h = 1.3
    np.testing.assert_allclose(
        jax.grad(impact_time)(jnp.asarray(h)), 1 / np.sqrt(2 * params.g * h), rtol=1e-8
    )


def test_host_helpers_compute_in_numpy():
    """On NumPy inputs the hopper's energies and orbit guess compute in NumPy (the
    command line's figures would otherwise compile a program per operation), with
    the closed forms' values, and agree with their traced form."""
    params = jax.device_get(hx.canonical_params(models.hopper.HopperParams()))
    x = np.array([[1.1, 0.05, 0.5, -0.2], [1.0, 0.0, -1.0, 0.0]])
    kinetic, potential, total = models.hopper.energies(x, params)
    assert all(isinstance(e, np.ndarray) for e in (kinetic, potential, total))
    m_U, m_L = params.mu * params.m, (1 - params.mu) * params.m
    np.testing.assert_allclose(
        kinetic, 0.5 * (m_U * x[:, 2] ** 2 + m_L * x[:, 3] ** 2), rtol=1e-15
    )
    spring = x[:, 0] - x[:, 1] - params.L0
    np.testing.assert_allclose(
        potential,
        params.g * (m_U * x[:, 0] + m_L * x[:, 1]) + 0.5 * params.k * spring**2,
        rtol=1e-15,
    )
    guess = models.hopper.orbit_guess(params)
    assert isinstance(guess, np.ndarray)
    traced = jax.jit(models.hopper.orbit_guess)(hx.canonical_params(params))
    np.testing.assert_allclose(guess, traced, rtol=1e-15)
    # On the lift-off surface: z_U = L0 + (m_L g - d_G v_U) / k at v_U = 1.7.
    z_U = params.L0 + (m_L * params.g - params.d_G * 1.7) / params.k
    np.testing.assert_allclose(guess, [z_U, 1.7], rtol=1e-15)
