"""The gait sensitivity norm and disturbed steps against closed forms and
independent quadrature (the rimless wheel), a second method (the shooting's own
reduced Jacobian), finite differences, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import quad

import hybrax as hx
from hybrax.models import hopper, rimless_wheel as rw


@pytest.fixture(scope="module")
def wheel():
    system, params = rw.rimless_wheel()
    params = hx.canonical_params(params)
    section = rw.section()
    orbit = hx.find_periodic_orbit(system, section, jnp.array([1.5]), params)
    assert bool(orbit.succeeded)
    return system, section, params, orbit


SLOPE = hx.Disturbance(hx.FieldParameter("gamma"), "rad", "slope of the next step")
STEP_TIME = {"step_time": lambda orbit, params: orbit.period}


def _step_time(omega, d, gamma=0.08, alpha=np.pi / 8, g_over_l=9.81):
    """The rimless wheel's step time on a step of slope gamma + d from the rate
    omega after heel strike, by quadrature of the inverted pendulum's energy
    (theta from gamma + d - alpha to gamma + d + alpha)."""
    start, end = gamma + d - alpha, gamma + d + alpha

    def dt_dtheta(theta):
        return 1 / np.sqrt(omega**2 + 2 * g_over_l * (np.cos(start) - np.cos(theta)))

    return quad(dt_dtheta, start, end, epsabs=1e-13, epsrel=1e-13)[0]


def test_rimless_wheel_against_closed_forms_and_quadrature(wheel):
    r"""The wheel's step map on a step of slope gamma + d is
    omega' = c sqrt(omega^2 + K sin(gamma + d)) with c = cos 2 alpha,
    K = 4 (g/l) sin alpha: A = c^2, B = c^2 K cos(gamma) / (2 omega*). The
    step time's derivatives come from quadrature (central differences of the
    integral), and the norm is then sqrt(D^2 + B^2 C^2 / (1 - A^2))."""
    system, section, params, orbit = wheel
    result = hx.gait_sensitivity(system, section, orbit, params, SLOPE, STEP_TIME)
    assert hx.status_name(result.result) == ["successful"]
    omega = float(orbit.u[0])
    alpha, gamma, g = np.pi / 8, 0.08, 9.81
    c2 = np.cos(2 * alpha) ** 2
    A = c2
    B = c2 * 4 * g * np.sin(alpha) * np.cos(gamma) / (2 * omega)
    h = 1e-5
    C = (_step_time(omega + h, 0) - _step_time(omega - h, 0)) / (2 * h)
    D = (_step_time(omega, h) - _step_time(omega, -h)) / (2 * h)
    np.testing.assert_allclose(float(result.A[0, 0]), A, rtol=1e-7)
    np.testing.assert_allclose(float(result.B[0]), B, rtol=1e-7)
    np.testing.assert_allclose(float(result.C[0, 0]), C, rtol=1e-6)
    np.testing.assert_allclose(float(result.D[0]), D, rtol=1e-6)
    np.testing.assert_allclose(
        float(result.indicators[0]), _step_time(omega, 0), rtol=1e-9
    )
    norm = np.sqrt(D**2 + B**2 * C**2 / (1 - A**2))
    np.testing.assert_allclose(float(result.norm), norm, rtol=1e-6)
    # The responses, step by step: D, then C A^(k-1) B.
    k = np.arange(1, result.responses.shape[0])
    np.testing.assert_allclose(result.responses[0, 0], D, rtol=1e-6)
    np.testing.assert_allclose(result.responses[1:, 0], C * A ** (k - 1) * B, rtol=1e-6)
    # The truncated sum of the squared responses tends to the closed form.
    truncated = np.sqrt(np.sum(np.asarray(result.responses) ** 2))
    assert truncated < float(result.norm)
    np.testing.assert_allclose(truncated, float(result.norm), rtol=1e-4)


def test_step_jacobian_is_the_shootings_reduced_jacobian(wheel):
    """A = dP/du by forward AD through the disturbed step equals the reduced
    Jacobian M of the shooting's variational pass (a second method), both
    within 1e-7 of the closed form cos^2(2 alpha) = 1/2 (AD through the
    adaptive steps differentiates the steps as taken: 3e-8 off here)."""
    system, section, params, orbit = wheel
    result = hx.gait_sensitivity(system, section, orbit, params, SLOPE, STEP_TIME)
    np.testing.assert_allclose(result.A, orbit.reduced_jacobian, rtol=1e-7)
    np.testing.assert_allclose(orbit.reduced_jacobian[0, 0], 0.5, rtol=1e-7)


def test_disturbed_step_is_the_return_map_at_the_disturbed_parameters(wheel):
    """With d = 0 the disturbed step is the return map; with d, the return map at
    the parameters offset by d (the closed form of the wheel's step)."""
    system, section, params, orbit = wheel
    for d in (0.0, 0.01, -0.005):
        (u_next, y), status = hx.disturbed_step(
            system, section, orbit.u, params, SLOPE, d, STEP_TIME
        )
        assert hx.status_name(status) == ["successful"]
        omega = float(orbit.u[0])
        c = np.cos(np.pi / 4)
        closed = c * np.sqrt(omega**2 + 4 * 9.81 * np.sin(np.pi / 8) * np.sin(0.08 + d))
        np.testing.assert_allclose(float(u_next[0]), closed, rtol=1e-8)
        np.testing.assert_allclose(float(y[0]), _step_time(omega, d), rtol=1e-8)


HEIGHT = hx.models.get_model("rimless-wheel").disturbances["height"]


def _wheel_on_a_step(theta, omega, h, gamma=0.08, alpha=np.pi / 8, g_over_l=9.81):
    """The rimless wheel's step onto a foothold h higher (spokes of length 1),
    in closed form: the next spoke's foot is 2 sin(alpha) sin(gamma + alpha -
    theta) above the slope through the contact, so it strikes at theta_c with
    sin(gamma + alpha - theta_c) = h / (2 sin alpha); energy is conserved in
    stance; the impact keeps cos(2 alpha) of the rate and turns the angle back
    by 2 alpha."""
    strike = gamma + alpha - np.arcsin(h / (2 * np.sin(alpha)))
    rate = np.sqrt(omega**2 + 2 * g_over_l * (np.cos(theta) - np.cos(strike)))
    return np.array([strike - 2 * alpha, np.cos(2 * alpha) * rate])


def test_a_step_height_against_the_wheels_closed_form(wheel):
    """The wheel's declared `height` disturbance runs on the full state just
    after heel strike (its own section: the model's section fixes the angle).
    From the orbit and from a state off it, the step onto footholds 3 cm higher
    and 5 cm lower equals the closed form; its Jacobians in the state and the
    height (forward AD through the event) equal central differences of the
    closed form; A's multipliers are the orbit's (cos^2 2 alpha) and 0. The
    model's own section is refused with the argument named."""
    system, section, params, orbit = wheel
    start = HEIGHT.start(section, orbit.u, params)
    np.testing.assert_allclose(start, [0.08 - np.pi / 8, float(orbit.u[0])])
    for x in (np.asarray(start), np.array([0.08 - np.pi / 8 + 0.02, 1.3])):
        for h in (0.0, 0.03, -0.05):
            (x_next, _), status = hx.disturbed_step(
                system, HEIGHT.section, x, params, HEIGHT, h, STEP_TIME
            )
            assert hx.status_name(status) == ["successful"]
            np.testing.assert_allclose(x_next, _wheel_on_a_step(*x, h), rtol=1e-9)
    result = hx.gait_sensitivity(system, section, orbit, params, HEIGHT, STEP_TIME)
    assert hx.status_name(result.result) == ["successful"]
    eps = 1e-6
    x = np.asarray(start)
    dh = (_wheel_on_a_step(*x, eps) - _wheel_on_a_step(*x, -eps)) / (2 * eps)
    np.testing.assert_allclose(result.B, dh, rtol=1e-6, atol=1e-9)
    for i in range(2):
        e = eps * np.eye(2)[i]
        column = (_wheel_on_a_step(*(x + e), 0) - _wheel_on_a_step(*(x - e), 0)) / (
            2 * eps
        )
        np.testing.assert_allclose(result.A[:, i], column, rtol=1e-6, atol=1e-9)
    multipliers = np.sort(np.abs(np.linalg.eigvals(np.asarray(result.A))))
    np.testing.assert_allclose(multipliers, [0, np.cos(np.pi / 4) ** 2], atol=1e-9)
    with pytest.raises(ValueError, match="section"):
        hx.disturbed_step(system, section, orbit.u, params, HEIGHT, 0.01, STEP_TIME)
    with pytest.raises(ValueError, match="section"):
        hx.Disturbance(hx.FieldParameter("step_height"), "m", section="after")


@pytest.mark.slow  # four programs of the wheel's cycle: 8-13 s
def test_several_disturbances_in_one_pass_equal_each_alone(wheel):
    """A mapping of disturbances (the slope on the model's section, the height
    on the full state after heel strike) gives, from one forward pass and the
    chain rule through each section, each one's Jacobians and norm as its own
    call does (they share the cycle: equal to rounding); under `jax.jit`
    alike; a failed orbit gives each its status and NaN."""
    system, section, params, orbit = wheel
    both = {"slope": SLOPE, "height": HEIGHT}
    together = hx.gait_sensitivity(system, section, orbit, params, both, STEP_TIME)
    jitted = jax.jit(
        lambda o, p: hx.gait_sensitivity(system, section, o, p, both, STEP_TIME)
    )(orbit, params)
    assert list(together) == ["slope", "height"]
    for name, disturbance in both.items():
        alone = hx.gait_sensitivity(
            system, section, orbit, params, disturbance, STEP_TIME
        )
        for result in (together[name], jitted[name]):
            assert hx.status_name(result.result) == ["successful"]
            for got, want in zip(
                (result.A, result.B, result.C, result.D, result.norm),
                (alone.A, alone.B, alone.C, alone.D, alone.norm),
            ):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    level = hx.FieldParameter("gamma").set(params, 0.0)
    failed = hx.find_periodic_orbit(system, section, jnp.array([1.5]), level)
    for result in hx.gait_sensitivity(
        system, section, failed, level, both, STEP_TIME
    ).values():
        assert np.isnan(float(result.norm))
        assert hx.status_name(result.result) == hx.status_name(failed.result)


def test_a_failed_orbit_gives_nan_and_its_status(wheel):
    """On level ground there is no orbit: the norm is NaN with the orbit's own
    status, never a number."""
    system, section, params, _ = wheel
    level = hx.FieldParameter("gamma").set(params, 0.0)
    orbit = hx.find_periodic_orbit(system, section, jnp.array([1.5]), level)
    assert not bool(orbit.succeeded)
    result = hx.gait_sensitivity(system, section, orbit, level, SLOPE, STEP_TIME)
    assert np.isnan(float(result.norm))
    assert hx.status_name(result.result) == hx.status_name(orbit.result)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(indicators={}), "indicators"),
        (dict(indicators={"t": 1.0}), "indicators"),
        (dict(indicators=[lambda o, p: o.period]), "indicators"),
        (dict(steps=0), "steps"),
        (dict(steps=2.5), "steps"),
        (dict(disturbance="gamma"), "disturbance"),
        (dict(disturbance={}), "disturbance"),
        (dict(disturbance={"slope": SLOPE, "height": "step_height"}), "disturbance"),
        (
            dict(indicators={"apex": lambda o, p: o.cycle.phase_observables["apex"]}),
            "indicators",
        ),
    ],
)
def test_bad_input_names_the_argument(wheel, kwargs, name):
    system, section, params, orbit = wheel
    arguments = dict(disturbance=SLOPE, indicators=STEP_TIME) | kwargs
    with pytest.raises(ValueError, match=name):
        hx.gait_sensitivity(system, section, orbit, params, **arguments)


def test_a_disturbance_needs_a_parameter():
    """Each argument of a disturbance checked, the error naming it."""
    with pytest.raises(ValueError, match="parameter"):
        hx.Disturbance("gamma", "rad")
    with pytest.raises(ValueError, match="unit"):
        hx.Disturbance(hx.FieldParameter("gamma"), 1)
    with pytest.raises(ValueError, match="section"):
        hx.Disturbance(hx.FieldParameter("gamma"), "rad", section=rw.section)
    with pytest.raises(ValueError, match="system"):
        hx.Disturbance(hx.FieldParameter("gamma"), "rad", system=rw.rimless_wheel())


def _wheel_norm(system, section, params, gamma):
    slope = hx.FieldParameter("gamma")
    disturbed = slope.set(params, gamma)
    orbit = hx.find_periodic_orbit(
        system, section, jnp.array([1.5]), disturbed, analyse=False
    )
    return hx.gait_sensitivity(system, section, orbit, disturbed, SLOPE, STEP_TIME).norm


@pytest.mark.slow
def test_norm_derivative_and_batches_through_the_orbit(wheel):
    """d GSN / d gamma by `jax.jacfwd` through the orbit's own derivative against
    Richardson-extrapolated central differences; `jax.jit` with the orbit passed
    in equals the eager call; `jax.vmap` over slopes equals the single solves (a
    slope without an orbit is NaN, the others exact)."""
    system, section, params, _ = wheel

    def norm(gamma):
        return _wheel_norm(system, section, params, gamma)

    derivative = float(jax.jacfwd(norm)(jnp.asarray(0.08)))
    jitted = jax.jit(norm)

    def central(h):
        return (float(jitted(0.08 + h)) - float(jitted(0.08 - h))) / (2 * h)

    richardson = (4 * central(2.5e-4) - central(5e-4)) / 3
    np.testing.assert_allclose(derivative, richardson, rtol=2e-5)
    # Under the caller's `jax.jit` with the orbit passed in (traced), as eagerly.
    _, _, _, orbit = wheel
    eager = hx.gait_sensitivity(system, section, orbit, params, SLOPE, STEP_TIME)
    passed = jax.jit(
        lambda o, p: hx.gait_sensitivity(system, section, o, p, SLOPE, STEP_TIME)
    )(orbit, params)
    np.testing.assert_allclose(passed.norm, eager.norm, rtol=1e-12)
    np.testing.assert_allclose(passed.responses, eager.responses, rtol=1e-12)
    slopes = jnp.array([0.06, 0.08, 0.1])
    batched = jax.vmap(norm)(slopes)
    assert np.isnan(float(batched[0]))
    for value, gamma in zip(batched[1:], slopes[1:]):
        np.testing.assert_allclose(float(value), float(jitted(gamma)), rtol=1e-12)


@pytest.mark.slow
def test_compass_gait_norm_against_simulated_disturbed_walks():
    """The compass gait's norm on its declared indicators (step time, step
    length) against walks simulated step by step (`hybrax.simulate`, no
    Jacobian): a first step on a slope offset by +-eps, then 39 steps on the
    nominal slope, each started from the section's chart of the last one's
    unknowns; the indicators' central differences over all steps, squared and
    summed."""
    from hybrax import models

    model = models.get_model("compass-gait")
    form = model.forms[model.default_form]
    system, section = form.system(), form.section()
    params = hx.canonical_params(model.make_params())
    guess = jnp.asarray(model.orbit_guess(params), float)
    orbit = hx.find_periodic_orbit(system, section, guess, params)
    indicators = {name: model.quantity(name) for name in model.gait_indicators}
    assert list(indicators) == ["period", "step_length"]
    slope = model.disturbances["slope"]
    result = hx.gait_sensitivity(system, section, orbit, params, slope, indicators)
    assert hx.status_name(result.result) == ["successful"]
    n_steps = 40
    strike = system.transition_index(section.sequence[-1])
    mode0 = system.targets[strike]
    leg = float(params.a + params.b)

    def walk(eps):
        disturbed = slope.apply(params, eps)
        first = hx.simulate(
            system,
            section.chart(orbit.u, disturbed),
            disturbed,
            n_events=1,
            mode0=mode0,
        )
        u1 = section.coordinates(first.x_after[0], disturbed)
        rest = hx.simulate(
            system,
            section.chart(u1, params),
            params,
            n_events=n_steps - 1,
            mode0=mode0,
        )
        assert hx.status_name(first.result) == hx.status_name(rest.result)
        assert hx.status_name(rest.result) == ["successful"]
        times = np.concatenate(
            [np.asarray(first.t_events), np.diff(np.asarray(rest.t_events), prepend=0)]
        )
        later = [section.coordinates(x, params)[0] for x in rest.x_after[:-1]]
        alphas = np.array([float(orbit.u[0]), float(u1[0]), *map(float, later)])
        return np.stack([times, 2 * leg * np.sin(alphas)], axis=1)

    eps = 1e-4
    response = (walk(eps) - walk(-eps)) / (2 * eps)
    np.testing.assert_allclose(
        result.responses, response[: result.responses.shape[0]], atol=2e-4
    )
    np.testing.assert_allclose(
        float(result.norm), np.sqrt(np.sum(response**2)), rtol=1e-4
    )
    np.testing.assert_allclose(
        result.norms, np.sqrt(np.sum(response**2, axis=0)), rtol=1e-4
    )


def test_a_bundle_checks_its_disturbances_and_indicators():
    """A model's declared disturbances must be `hx.Disturbance`s with gait
    indicators among its quantities: each mistake a `ValueError` naming it."""
    from hybrax import models

    model = models.get_model("compass-gait")
    fields = (
        "name description parameters make_params parameter state_names "
        "default_state forms orbit_guess quantities"
    ).split()
    base = {field: getattr(model, field) for field in fields}
    with pytest.raises(ValueError, match="disturbances"):
        hx.ModelBundle(**base, disturbances={"x": 1}, gait_indicators=("period",))
    with pytest.raises(ValueError, match="gait_indicators"):
        hx.ModelBundle(**base, gait_indicators=("nope",))
    with pytest.raises(ValueError, match="gait_indicators"):
        hx.ModelBundle(**base, disturbances=model.disturbances)
    bundle = hx.ModelBundle(
        **base, disturbances=model.disturbances, gait_indicators=["period"]
    )
    assert bundle.gait_indicators == ("period",)


def _trailing_foot_height(x, params):
    """The compass gait's trailing foot's height above the slope through the
    stance foot, just after heel strike, from its documented geometry: the legs
    at theta_s, theta_ns from the true vertical (hip at l (sin theta_s, cos
    theta_s), the other foot l (sin theta_ns, -cos theta_ns) from it, the slope
    down towards +x)."""
    length, slope = float(params.a + params.b), float(params.slope)
    foot = length * np.array([np.sin(x[0]) + np.sin(x[1]), np.cos(x[0]) - np.cos(x[1])])
    return foot[0] * np.sin(slope) + foot[1] * np.cos(slope)


# Slow: the five-link biped's orbit and step Jacobians compile for about 40 s.
@pytest.mark.slow
@pytest.mark.parametrize(
    "name, disturbance",
    [
        ("simplest-walker", "slope"),
        ("biped5", "slope"),
        ("compass-gait", "height"),
    ],
)
def test_declared_disturbance_jacobians_against_central_differences(name, disturbance):
    """The declared disturbances (the walkers' slope and height of the next
    step): the norm's B = dP/dd and
    D = dG/dd (forward-mode AD through the disturbed cycle, event times
    included) against central differences of the
    disturbed step, and the norm against the closed form recomputed here with
    NumPy (W by summing A^k^T C^T C A^k to convergence). A step onto a
    foothold 1 cm higher or lower leaves a walker's trailing foot that far below
    or above the new stance foot (the heel strike fired at the foothold's
    height), and a step of height 0 returns to the orbit's state."""
    from hybrax import models

    model = models.get_model(name)
    form = model.forms[model.default_form]
    system, section = form.system(), form.section()
    params = hx.canonical_params(model.make_params())
    guess = jnp.asarray(model.orbit_guess(params), float)
    orbit = hx.find_periodic_orbit(system, section, guess, params)
    assert bool(orbit.succeeded)
    indicators = {n: model.quantity(n) for n in model.gait_indicators}
    disturbed = model.disturbances[disturbance]
    # The unit of the parameter it offsets.
    field = disturbed.parameter.field
    assert disturbed.unit == model.parameters[field].split(",")[0]
    result = hx.gait_sensitivity(system, section, orbit, params, disturbed, indicators)
    assert hx.status_name(result.result) == ["successful"]
    cycle_section = disturbed.cycle_section(section)
    start = disturbed.start(section, orbit.u, params)

    def step(d):
        (u_next, y), status = hx.disturbed_step(
            system, cycle_section, start, params, disturbed, d, indicators
        )
        assert hx.status_name(status) == ["successful"]
        return np.asarray(u_next), np.asarray(y)

    if disturbance == "height":
        # The full state's step: the orbit's multipliers (of the shooting on the
        # model's section, a second method), the others 0 (along the flow, and
        # what the impact fixes).
        full = np.sort(np.abs(np.linalg.eigvals(np.asarray(result.A))))
        reduced = np.sort(np.abs(np.asarray(orbit.multipliers)))
        np.testing.assert_allclose(full[-reduced.size :], reduced, atol=1e-7)
        assert np.all(full[: -reduced.size] < 1e-7)
        np.testing.assert_allclose(step(0.0)[0], start, atol=1e-9)
        for h in (0.01, -0.01):
            after = step(h)[0]
            np.testing.assert_allclose(
                _trailing_foot_height(after, params), -h, atol=1e-10
            )

    eps = 1e-6
    (u_plus, y_plus), (u_minus, y_minus) = step(eps), step(-eps)
    np.testing.assert_allclose(
        result.B, (u_plus - u_minus) / (2 * eps), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
        result.D, (y_plus - y_minus) / (2 * eps), rtol=1e-5, atol=1e-6
    )
    A, B, C, D = (np.asarray(m) for m in (result.A, result.B, result.C, result.D))
    gramian, power = np.zeros_like(A), np.eye(A.shape[0])
    for _ in range(2000):
        gramian += power.T @ C.T @ C @ power
        power = A @ power
    norm = np.sqrt(D @ D + B @ gramian @ B)
    np.testing.assert_allclose(float(result.norm), norm, rtol=1e-9)


def _hop_on_a_step(u, h, p):
    """One hop of the minimal hopper from lift-off (z_U, v_U; the foot at rest
    on the ground at 0) onto ground at height h, in closed form: both phases
    are linear ODEs, x' = A x + c, solved by the matrix exponential of
    [[A, c], [0, 0]]; touchdown where the falling foot reaches h, the plastic
    impact stops the foot, lift-off where the tension T = k (z_U - h - L0) +
    d_G v_U rises through m_L g (the ground's pull). Returns the next lift-off's
    unknowns (heights from the new ground), the hop's time and the upper mass's
    apex in flight (from the ground it lifted off); None where the foot's apex
    stays below h."""
    from scipy.linalg import expm
    from scipy.optimize import brentq

    m_U, m_L = p.mu * p.m, (1 - p.mu) * p.m

    def flow(A, c, x0):
        M = np.zeros((len(x0) + 1, len(x0) + 1))
        M[:-1, :-1], M[:-1, -1] = A, c
        return lambda t: (expm(M * t) @ np.append(x0, 1.0))[:-1]

    def first_root(f, t_max, rising):
        grid = np.linspace(1e-6, t_max, 4000)
        values = np.array([f(t) for t in grid])
        for i in range(len(grid) - 1):
            if (
                (values[i] < 0 <= values[i + 1])
                if rising
                else (values[i] > 0 >= values[i + 1])
            ):
                return brentq(f, grid[i], grid[i + 1], xtol=1e-15, rtol=1e-15)
        return None

    k, d_F, d_G, L0, g = p.k, p.d_F, p.d_G, p.L0, p.g
    # Flight: x = [z_U, z_L, v_U, v_L], T = k (z_U - z_L - L0) + d_F (v_U - v_L).
    A = np.array(
        [
            [0, 0, 1, 0],
            [0, 0, 0, 1],
            [-k / m_U, k / m_U, -d_F / m_U, d_F / m_U],
            [k / m_L, -k / m_L, d_F / m_L, -d_F / m_L],
        ]
    )
    c = np.array([0, 0, k * L0 / m_U - g, -k * L0 / m_L - g])
    flight = flow(A, c, np.array([u[0], 0.0, u[1], 0.0]))
    # The foot rises first: touchdown is the first downward crossing of h
    # after its apex.
    apex = first_root(lambda t: -flight(t)[3], 2.0, rising=True)
    if flight(apex)[1] < h:
        return None
    t_touch = apex + first_root(lambda s: flight(apex + s)[1] - h, 2.0, rising=False)
    # The upper mass's one maximum in flight, where its speed falls through 0.
    t_upper = first_root(lambda t: -flight(t)[2], t_touch, rising=True)
    upper = flight(t_upper)[0]
    z_U, _, v_U, _ = flight(t_touch)
    # Ground: y = [z_U, v_U], m_U z_U'' = -k (z_U - h - L0) - d_G v_U - m_U g.
    ground = flow(
        np.array([[0, 1], [-k / m_U, -d_G / m_U]]),
        np.array([0, k * (h + L0) / m_U - g]),
        np.array([z_U, v_U]),
    )

    def pull(t):
        z, v = ground(t)
        return k * (z - h - L0) + d_G * v - m_L * g

    t_ground = first_root(pull, 2.0, rising=True)
    z_U, v_U = ground(t_ground)
    return np.array([z_U - h, v_U]), t_touch + t_ground, upper


def _hop_jacobians(u, p, eps=1e-6):
    """A = dP/du, B = dP/dh, C = dG/du, D = dG/dh of the closed-form hop
    (`_hop_on_a_step`; G its time and upper apex) by central differences."""

    def outputs(u, h):
        u_next, time, upper = _hop_on_a_step(u, h, p)
        return np.concatenate([u_next, [time, upper]])

    columns = [
        (outputs(u + eps * e, 0.0) - outputs(u - eps * e, 0.0)) / (2 * eps)
        for e in np.eye(2)
    ]
    by_u = np.stack(columns, axis=1)
    by_h = (outputs(u, eps) - outputs(u, -eps)) / (2 * eps)
    return by_u[:2], by_h[:2], by_u[2:], by_h[2:]


@pytest.mark.slow  # the hopper's orbit, hop and gait sensitivity compile for 40 s
def test_a_hop_onto_a_step_against_the_closed_form():
    """The hopper's `height_disturbance()` (the ground at the next touchdown h
    higher): from the orbit's lift-off, hops onto ground 5 cm
    higher, 3 cm higher and 10 cm lower equal the closed form of the two linear
    phases (matrix exponentials and root finds in SciPy), from either form's
    lift-off unknowns; a step above the foot's apex ends the hop with its own status
    (`armed_beyond_guard`: the foot strikes the step) and NaN, not a landing."""
    from hybrax import models

    model = models.get_model("hopper")
    height = hopper.height_disturbance()
    indicators = {n: model.quantity(n) for n in ("period", "apex_upper")}
    params = hx.canonical_params(model.make_params())
    p = jax.device_get(params)
    form = model.forms["minimal"]
    system, section = form.system(), form.section()
    guess = jnp.asarray(model.orbit_guess(params), float)
    orbit = hx.find_periodic_orbit(system, section, guess, params, analyse=False)
    # Either form's lift-off unknowns are the hops' (the constrained form's
    # state mapped through its chart).
    for form_name in ("minimal", "constrained"):
        other = model.forms[form_name].section()
        start = height.start(other, orbit.u, params)
        np.testing.assert_allclose(start, orbit.u, rtol=1e-15)
    for h in (0.05, 0.03, -0.1, 0.2):
        (u_next, y), status = hx.disturbed_step(
            system, height.section, start, params, height, h, indicators
        )
        expected = _hop_on_a_step(np.asarray(start), h, p)
        if expected is None:
            assert hx.status_name(status) == ["armed_beyond_guard"]
            assert np.all(np.isnan(u_next))
            continue
        assert hx.status_name(status) == ["successful"]
        np.testing.assert_allclose(u_next, expected[0], rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(y[0], expected[1], rtol=1e-8)
        np.testing.assert_allclose(y[1], expected[2], rtol=1e-8)
    # The norm's Jacobians (forward-mode AD at h = 0 through the model's own
    # hop, unarmed) against central differences of the closed form, and A
    # against the shooting's reduced Jacobian (a second method); the armed
    # system's hop (the disturbance's own) gives the same derivatives to the
    # integration's error (its arming event splits the flight's steps: 3e-9
    # relative, 1e-9 on the apex's D of 0).
    result = hx.gait_sensitivity(system, section, orbit, params, height, indicators)
    assert hx.status_name(result.result) == ["successful"]
    A, B, C, D = _hop_jacobians(np.asarray(start), p)
    for got, want in zip((result.A, result.B, result.C, result.D), (A, B, C, D)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.A, orbit.reduced_jacobian, rtol=1e-6)
    armed = hx.gait_sensitivity(
        height.system, height.section, orbit, params, height, indicators
    )
    for got, want in zip(
        (armed.A, armed.B, armed.C, armed.D), (result.A, result.B, result.C, result.D)
    ):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8)


@pytest.mark.slow  # the orbit command compiles its programs for 25 s
def test_orbit_reports_the_hoppers_ground_height_norm(tmp_path):
    """`hybrax orbit hopper` reports the gait sensitivity norm of the ground's
    height at the next touchdown on the hop's time and upper apex: each
    indicator's norm (D_i^2 + B^T W_i B)^(1/2), W_i = A^T W_i A + C_i^T C_i,
    from central differences of the closed-form hop and SciPy's Lyapunov
    solver."""
    import json

    from scipy.linalg import solve_discrete_lyapunov

    from hybrax._cli import main

    path = tmp_path / "orbit.json"
    assert main(["orbit", "hopper", "--no-figures", "--json", str(path)]) == 0
    record = json.loads(path.read_text())
    entry = record["gait_sensitivity"]["height"]
    assert entry["status"] == "successful" and entry["unit"] == "m"
    assert entry["indicator_units"] == {"period": "s", "apex_upper": "m"}
    p = jax.device_get(hx.canonical_params(hopper.make_params()))
    z_U, z_L, v_U, v_L = record["state"]  # at lift-off: the foot at rest
    assert z_L == v_L == 0
    u = np.array([z_U, v_U])
    A, B, C, D = _hop_jacobians(u, p)
    norms = [
        np.sqrt(D[i] ** 2 + B @ solve_discrete_lyapunov(A.T, np.outer(c, c)) @ B)
        for i, c in enumerate(C)
    ]
    np.testing.assert_allclose(
        [entry["norms"]["period"], entry["norms"]["apex_upper"]], norms, rtol=1e-5
    )
    np.testing.assert_allclose(entry["norm"], np.hypot(*norms), rtol=1e-5)


@pytest.mark.slow  # the constrained form's orbit and the armed hop compile for 60 s
def test_the_hoppers_norm_is_the_same_from_either_form():
    """The hopper's ground height from the constrained form's orbit: the
    disturbance's section charts the minimal form's states, so its hops run on
    the disturbance's own system (the armed minimal form) instead of the
    caller's; the Jacobians and norm equal the minimal form's, whose hops run
    on its own cycle (two systems, two integrations: 1e-7)."""
    from hybrax import models

    model = models.get_model("hopper")
    height = hopper.height_disturbance()
    indicators = {n: model.quantity(n) for n in ("period", "apex_upper")}
    params = hx.canonical_params(model.make_params())
    results = []
    for name in ("minimal", "constrained"):
        form = model.forms[name]
        system, section = form.system(), form.section()
        guess = jnp.asarray(model.orbit_guess(params), float)
        orbit = hx.find_periodic_orbit(system, section, guess, params, analyse=False)
        assert bool(orbit.succeeded)
        result = hx.gait_sensitivity(system, section, orbit, params, height, indicators)
        assert hx.status_name(result.result) == ["successful"]
        results.append(result)
    minimal, constrained = results
    for got, want in zip(
        (constrained.A, constrained.B, constrained.C, constrained.D, constrained.norm),
        (minimal.A, minimal.B, minimal.C, minimal.D, minimal.norm),
    ):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-8)
