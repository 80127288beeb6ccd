"""Periodic orbits and their stability against the seed's semi-analytic reference
(section 4.1, written with NumPy/SciPy in reference_hopper.py), autodiff against the
saltation product, and constrained against minimal coordinates."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import hybrax as hx
import reference_hopper as ref
from hybrax import RESULTS, models


TOL = 1e-12  # integration tolerance of the accuracy tests below
SETTINGS = hx.Settings(rtol=TOL, atol=TOL)
PARAMS = hx.canonical_params(models.hopper.make_params())


@pytest.fixture(scope="module")
def reference():
    return ref.periodic_orbit(ref.HopperParams())


def _find(system, section, params, guess=None):
    guess = models.hopper.orbit_guess(params) if guess is None else guess
    orbit = hx.find_periodic_orbit(system, section, guess, params, settings=SETTINGS)
    return orbit, orbit.floquet


@pytest.fixture(scope="module")
def minimal_orbit():
    return _find(models.hopper.minimal()[0], models.hopper.section("minimal"), PARAMS)


@pytest.fixture(scope="module")
def constrained_orbit():
    return _find(
        models.hopper.constrained()[0], models.hopper.section("constrained"), PARAMS
    )


def test_orbit_matches_semi_analytic_reference(minimal_orbit, reference):
    orbit, floquet = minimal_orbit
    assert orbit.succeeded
    assert float(orbit.residual_norm) < 1e-10
    np.testing.assert_allclose(orbit.state, reference["state"], atol=1e-9)
    np.testing.assert_allclose(
        orbit.phase_durations[0], reference["t_flight"], atol=1e-9
    )
    np.testing.assert_allclose(
        orbit.phase_durations[1], reference["t_ground"], atol=1e-9
    )
    np.testing.assert_allclose(orbit.period, reference["period"], atol=1e-9)
    np.testing.assert_allclose(orbit.T_c[0], reference["T_c"], rtol=1e-8)
    np.testing.assert_allclose(orbit.T_a[0], reference["T_a"], rtol=1e-8)
    # The paper's numbers (section 4.2): multiplier 0.4714, t_p = t_F + t_G.
    np.testing.assert_allclose(floquet.multipliers_ad[0].real, 0.4714, atol=5e-5)
    np.testing.assert_allclose(
        floquet.multipliers_ad[0].real, reference["multiplier"], atol=1e-8
    )
    np.testing.assert_allclose(
        floquet.multipliers_saltation[0].real, reference["multiplier"], atol=1e-8
    )
    assert np.all(np.abs(floquet.multipliers_ad[1:]) < 1e-6)  # the two zeros


def test_phase_observables_of_the_orbit(minimal_orbit, reference):
    """The apexes of the flight (Extremum on the flight mode) against the modal
    solution's; the smallest ground force over the ground phase is the zero at
    lift-off (the paper's orbit lands with the ground pushing)."""
    orbit, _ = minimal_orbit
    observables = orbit.cycle.phase_observables
    for key in ("apex_upper", "apex_lower"):
        np.testing.assert_allclose(observables[key][0], reference[key], atol=1e-9)
        assert np.isnan(observables[key][1])  # no flight in the ground phase
    assert abs(float(observables["min_ground_force"][1])) < 1e-6


def test_monodromy_two_ways_and_against_finite_differences(minimal_orbit, reference):
    _, floquet = minimal_orbit
    assert float(floquet.max_discrepancy) < 1e-8
    # Central differences of the closed-form flow over the fixed period (reference).
    np.testing.assert_allclose(floquet.monodromy_ad, reference["monodromy"], atol=1e-6)
    np.testing.assert_allclose(
        floquet.monodromy_saltation, reference["monodromy"], atol=1e-6
    )
    # The paper's printed matrix (its text lost the signs; magnitudes to its digits).
    printed = np.array(
        [
            [0.729, 0.134, 0.248, 0.0634],
            [0, 0, 0, 0],
            [11.41, 4.19, 3.18, 0.803],
            [11.45, 2.27, 3.84, 0.980],
        ]
    )
    np.testing.assert_allclose(
        np.abs(floquet.monodromy_ad), printed, rtol=3e-3, atol=1e-3
    )
    # The trivial multiplier (the flow direction).
    assert abs(complex(floquet.trivial_ad) - 1) < 1e-9
    assert abs(complex(floquet.trivial_saltation) - 1) < 1e-9
    eig = np.sort(np.abs(np.linalg.eigvals(floquet.monodromy_ad)))
    np.testing.assert_allclose(eig, [0, 0, reference["multiplier"], 1], atol=1e-6)


def test_reduced_jacobian_matches_paper(minimal_orbit, reference):
    orbit, floquet = minimal_orbit
    M = np.asarray(orbit.reduced_jacobian)
    np.testing.assert_allclose(M, reference["M_reduced"], atol=1e-6)
    printed = np.array([[0.0175, 0.0024], [3.28, 0.453]])
    np.testing.assert_allclose(np.abs(M), printed, rtol=3e-3, atol=1e-4)
    mu = np.sort(np.abs(np.linalg.eigvals(M)))
    np.testing.assert_allclose(mu, [0.0, reference["multiplier"]], atol=1e-8)


@pytest.mark.slow
def test_constrained_form_on_the_manifold(constrained_orbit, minimal_orbit):
    orbit_c, floquet_c = constrained_orbit
    orbit_m, floquet_m = minimal_orbit
    assert orbit_c.succeeded
    np.testing.assert_allclose(
        models.hopper.to_minimal(orbit_c.state), orbit_m.state, atol=1e-9
    )
    np.testing.assert_allclose(orbit_c.period, orbit_m.period, atol=1e-10)
    assert floquet_c.tangent_basis.shape == (8, 4)
    np.testing.assert_allclose(
        floquet_c.multipliers_ad, floquet_m.multipliers_ad, atol=1e-8
    )
    np.testing.assert_allclose(
        floquet_c.multipliers_saltation, floquet_m.multipliers_saltation, atol=1e-8
    )
    assert abs(complex(floquet_c.trivial_ad) - 1) < 1e-9
    assert float(floquet_c.max_discrepancy) < 1e-8
    # In minimal coordinates, R Phi E is the minimal monodromy.
    E = jax.jacfwd(models.hopper.to_constrained)(jnp.zeros(4))
    R = jax.jacfwd(models.hopper.to_minimal)(jnp.zeros(8))
    np.testing.assert_allclose(
        R @ floquet_c.monodromy_ad @ E, floquet_m.monodromy_ad, atol=1e-7
    )
    # The model's own conversion (what the command line prints) is the same.
    form = models.get_model("hopper").forms["constrained"]
    for route in ("monodromy_ad", "monodromy_saltation"):
        np.testing.assert_allclose(
            form.minimal_monodromy(getattr(floquet_c, route), 4),
            getattr(floquet_m, route),
            atol=1e-7,
        )
    minimal = models.get_model("hopper").forms["minimal"]
    assert np.array_equal(
        minimal.minimal_monodromy(floquet_m.monodromy_ad, 4), floquet_m.monodromy_ad
    )
    # Without the manifold, constraint drift adds spurious unit multipliers.
    raw = np.linalg.eigvals(floquet_c.monodromy_ad)
    assert np.sum(np.abs(raw - 1) < 1e-6) >= 2


def test_no_orbit_for_positive_ground_damping():
    params = hx.canonical_params(models.hopper.make_params(d_G=10.0))
    orbit, _ = _find(
        models.hopper.minimal()[0], models.hopper.section("minimal"), params
    )
    assert not bool(orbit.succeeded)
    # The status names the cause (the failure of the last cycle, or the shooting
    # itself), and no value of the failed orbit passes for a number.
    assert hx.status_name(orbit.result)[0] in (
        "shooting_failed",
        "max_steps_reached",
        "event_not_reached",
        "mode_not_viable",
        "wrong_event_sequence",
    )
    assert np.all(np.isnan(orbit.u)) and np.isnan(float(orbit.period))


@pytest.mark.slow
def test_random_parameters_ad_against_saltation(getkey):
    """Property test: on hopper parameters drawn at random, the autodiff monodromy
    equals the saltation product and the multiplier equals the reference."""
    n = 4
    D_G = jax.random.uniform(getkey(), (n,), minval=-0.045, maxval=-0.032)
    mu = jax.random.uniform(getkey(), (n,), minval=0.76, maxval=0.84)
    k = jax.random.uniform(getkey(), (n,), minval=13000.0, maxval=17000.0)
    base = PARAMS

    def make(D_G, mu, k):
        p = eqx.tree_at(lambda s: (s.mu, s.k), base, (mu, k))
        return eqx.tree_at(lambda s: s.d_G, p, D_G * 2 * jnp.sqrt(k * base.m))

    @jax.vmap
    def solve(D_G, mu, k):
        p = make(D_G, mu, k)
        guess = models.hopper.scan_orbit_guess(p)  # a fixed guess can be far off here
        return _find(
            models.hopper.minimal()[0], models.hopper.section("minimal"), p, guess
        )

    orbits, floquets = solve(D_G, mu, k)
    # Some drawn sets have an orbit whose ground would pull right after touchdown
    # (the reference's contact multiplier after the impact positive): an orbit of
    # the equations that the model's boundary rules out, its values kept.
    pulling = [
        ref.contact_multiplier(
            orbits.cycle.x_after[i, 0],
            ref.HopperParams(mu=float(mu[i]), k=float(k[i])).with_D_G(float(D_G[i])),
        )
        > 1e-9 * base.m * base.g
        for i in range(n)
    ]
    assert hx.status_name(orbits.result) == [
        "inadmissible_orbit" if pull else "successful" for pull in pulling
    ]
    np.testing.assert_array_less(np.asarray(floquets.max_discrepancy), 1e-7)
    for i in range(n):
        p_ref = ref.HopperParams(mu=float(mu[i]), k=float(k[i])).with_D_G(float(D_G[i]))
        expected = ref.periodic_orbit(p_ref, v_guess=float(orbits.state[i, 2]))
        np.testing.assert_allclose(orbits.state[i], expected["state"], atol=1e-8)
        np.testing.assert_allclose(
            floquets.multipliers_ad[i, 0].real, expected["multiplier"], atol=1e-8
        )


def test_bouncing_ball_ad_against_saltation():
    params = hx.canonical_params(models.bouncing_ball.BallParams(e=0.8))
    section = hx.PoincareSection(
        ("impact",),
        chart=lambda u, p: jnp.stack([jnp.zeros_like(u[0]), u[0]]),
        coordinates=lambda x, p: x[1:2],
    )
    v0 = 3.0
    floquet = hx.monodromy(
        models.bouncing_ball.bouncing_ball()[0], section, jnp.array([0.0, v0]), params
    )
    assert float(floquet.max_discrepancy) < 1e-9
    # Closed form, perturbing (y0, v0) about (0, v0): the impact comes at
    # t_e = (v0 + sqrt(v0^2 + 2 g y0))/g with v_- = -sqrt(v0^2 + 2 g y0), then
    # v_+ = -e v_-. Near the fixed duration t_p = t_e(ref), the flow is
    # y(t_p) = v_+ (t_p - t_e), v(t_p) = v_+ - g (t_p - t_e).
    g, e = params.g, params.e
    dv_minus = np.array([-g / v0, -1.0])  # d v_- / d(y0, v0)
    dt_e = np.array([1 / v0, 2 / g])
    v_plus = e * v0
    row_y = -v_plus * dt_e
    row_v = -e * dv_minus + g * dt_e
    np.testing.assert_allclose(
        floquet.monodromy_ad, np.stack([row_y, row_v]), atol=1e-9
    )


def test_float32_warns_and_bad_arguments_raise():
    system, section = models.hopper.minimal()[0], models.hopper.section()
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.warns(RuntimeWarning, match="float64"):
            with pytest.raises(ValueError, match="`shooting`"):
                hx.find_periodic_orbit(
                    system, section, jnp.ones(2), PARAMS, shooting="newton"
                )
    finally:
        jax.config.update("jax_enable_x64", True)
    with pytest.raises(ValueError, match="form"):
        models.hopper.section("redundant")
    with pytest.raises(ValueError, match="sequence"):
        hx.find_periodic_orbit(
            system,
            hx.PoincareSection(("touchdown",), section.chart, section.coordinates),
            jnp.ones(2),
            PARAMS,
        )
    with pytest.raises(ValueError, match="`max_iterations`"):
        hx.Shooting(max_iterations=0)
    with pytest.raises(ValueError, match="`fallback`"):
        hx.Shooting(fallback="lm")
    with pytest.raises(ValueError, match="`residual_tol`"):
        hx.Shooting(residual_tol=-1e-8)
    with pytest.raises(ValueError, match="`return_map_iterations`"):
        hx.Shooting(return_map_iterations=1.5)
    with pytest.raises(ValueError, match="`jacobian`"):
        hx.Shooting(jacobian="finite-differences")
    with pytest.raises(ValueError, match="`root_finder`"):
        hx.Shooting(root_finder="newton")


# Slow: 13 s cold (the least-squares shooting compiles its own orbit program); the
# fast set keeps the default solver against the same reference.
@pytest.mark.slow
def test_least_squares_solver_finds_the_reference_orbit(reference, minimal_orbit):
    """A damped least-squares solver (Levenberg-Marquardt) as the shooting solver:
    the same orbit as the semi-analytic reference. Without the analysis its
    variational passes carry only the section's two tangent columns (of the four
    of the full fundamental matrix): the reduced Jacobian is the full pass's."""
    import optimistix as optx

    orbit = hx.find_periodic_orbit(
        models.hopper.minimal()[0],
        models.hopper.section(),
        models.hopper.orbit_guess(PARAMS),
        PARAMS,
        settings=SETTINGS,
        shooting=hx.Shooting(
            optx.LevenbergMarquardt(rtol=1e-12, atol=1e-12), max_iterations=100
        ),
        analyse=False,
        phase_observables=False,
    )
    assert orbit.succeeded
    np.testing.assert_allclose(orbit.period, reference["period"], atol=1e-9)
    np.testing.assert_allclose(
        orbit.reduced_jacobian, minimal_orbit[0].reduced_jacobian, rtol=0, atol=1e-9
    )


def test_phase_fundamental_matrix_is_the_matrix_exponential():
    """The flight phase is linear, x' = A x + b: its fundamental matrix over a
    duration t is expm(A t) (Zana et al. 2018 eq. 35 solved in closed form)."""
    import scipy.linalg

    p = models.hopper.HopperParams()
    k, d, m_U, m_L = p.k, p.d_F, p.m_U, p.m_L
    A = np.array(
        [
            [0, 0, 1, 0],
            [0, 0, 0, 1],
            [-k / m_U, k / m_U, -d / m_U, d / m_U],
            [k / m_L, -k / m_L, d / m_L, -d / m_L],
        ]
    )
    duration = 0.23
    Phi = hx.phase_fundamental_matrix(
        models.hopper.minimal()[0],
        "flight",
        jnp.asarray(0.0),
        models.hopper.liftoff_state(1.7, PARAMS),
        jnp.asarray(duration),
        PARAMS,
        settings=SETTINGS,
    )
    np.testing.assert_allclose(Phi, scipy.linalg.expm(A * duration), atol=1e-9)


def test_stopped_lanes_run_idle_evaluations_whose_results_are_discarded():
    # Under vmap the root finder's loop runs every lane until the last stops;
    # `_ShootingRootFinder` flags the evaluations of stopped lanes (the shooting
    # residual then runs a zero-length cycle). Here an idle evaluation returns NaN:
    # had the loop kept one, the batched roots would differ from the single solves.
    from hybrax._periodic.newton import _ShootingRootFinder

    seen = []

    def residual(y, args):
        target, _, _, _, idle, _, _ = args
        jax.debug.callback(lambda i, t: seen.append((float(t), bool(i))), idle, target)
        F = jnp.where(idle, jnp.nan, y**3 - target)
        # (the cycle's status, the return map's image y + F)
        return F, (RESULTS.successful, y + F, None)

    solver = optx.Newton(rtol=1e-12, atol=1e-12)
    # Different iteration counts, each Newton step accepted by the safeguard.
    targets = jnp.array([1.0, 2.0, 0.5, 1.5])

    def solve(target, wrapped):
        return optx.root_find(
            residual,
            _ShootingRootFinder(solver, None, 1.0) if wrapped else solver,
            jnp.ones(()),
            # (target, guess, iteration budget, return-map iterations, idle,
            # first loosening, return-map iteration)
            args=(
                target,
                None,
                60,
                0,
                jnp.asarray(False),
                jnp.ones(()),
                jnp.asarray(False),
            ),
            has_aux=True,
            max_steps=60,
            throw=False,
        )

    singles = [solve(t, wrapped=False) for t in targets]
    steps = np.array([int(s.stats["num_steps"]) for s in singles])
    assert len(set(steps)) > 1
    seen.clear()
    batched = jax.vmap(lambda t: solve(t, wrapped=True))(targets)
    np.testing.assert_array_equal(batched.value, [s.value for s in singles])
    np.testing.assert_array_equal(batched.stats["num_steps"], steps)
    np.testing.assert_allclose(batched.value**3, targets, rtol=1e-12)
    # Each lane is idle in exactly the iterations after its own last one.
    for target, n in zip(np.asarray(targets), steps):
        flags = [i for t, i in seen if t == target]
        assert len(flags) == steps.max()
        assert flags == [False] * n + [True] * (steps.max() - n)


@pytest.mark.slow
def test_the_declared_sequence_and_the_free_loop_agree(minimal_orbit):
    """The one phase body runs a declared event sequence (the mode and expected
    transition of phase i read from the sequence) and a free run (the mode
    carried from the last reset): the hopper's flight and stance from a state on
    its orbit and from one perturbed off it, and a start from which the flight
    cannot begin (the body below the ground: `mode_not_viable`), give the same
    events, states and statuses by both, batched."""
    from hybrax._periodic import resolve_sequence
    from hybrax._simulate import run_events

    system, section = models.hopper.minimal()[0], models.hopper.section("minimal")
    sequence, mode0 = resolve_sequence(system, section)
    state = minimal_orbit[0].state
    starts = jnp.stack([state, state * 1.05, state.at[0].set(-1.0)])

    def run(x0, declared):
        solution, _, _ = run_events(
            system,
            x0,
            PARAMS,
            SETTINGS,
            dfx.ForwardMode(),
            mode0=mode0,
            t0=jnp.zeros(()),
            **(dict(sequence=sequence) if declared else dict(n_events=len(sequence))),
        )
        return solution

    declared = jax.jit(jax.vmap(lambda x: run(x, True)))(starts)
    free = jax.jit(jax.vmap(lambda x: run(x, False)))(starts)
    statuses = hx.status_name(declared.result)
    assert statuses[:2] == ["successful"] * 2 and statuses[2] != "successful"
    assert hx.status_name(free.result) == statuses
    for name in ("t_events", "x_before", "x_after", "transitions", "modes"):
        np.testing.assert_allclose(
            getattr(declared, name), getattr(free, name), rtol=1e-13, atol=1e-13
        )


def _domain_solve(guess, wrapped):
    """Newton on F(y) = arctan(1 - y), whose "cycle" fails for y > 2 (a domain
    boundary): from |y - 1| > 1.39 Newton's steps overshoot ever further. Returns
    the root-find and the points where the residual ran."""
    from hybrax._periodic.newton import _ShootingRootFinder

    evaluated = []

    def residual(y, args):
        *_, idle, _, _ = args
        jax.debug.callback(lambda v, i: i or evaluated.append(float(v)), y, idle)
        inside = y <= 2.0
        F = jnp.where(inside, jnp.arctan(1.0 - y), jnp.nan)
        status = RESULTS.where(inside, RESULTS.successful, RESULTS.mode_not_viable)
        # As the shooting residual does: a failed cycle's residual is zero with
        # the identity for Jacobian (the solver stops), its status says why.
        F = jnp.where(inside, F, y - jax.lax.stop_gradient(y))
        return F, (status, y + F, None)

    solver = optx.Newton(rtol=1e-12, atol=1e-12)
    root = optx.root_find(
        residual,
        _ShootingRootFinder(solver, None, 1.0) if wrapped else solver,
        jnp.asarray(guess),
        args=(None, None, 40, 0, jnp.asarray(False), jnp.ones(()), jnp.asarray(False)),
        has_aux=True,
        max_steps=40,
        throw=False,
    )
    return root, evaluated


def test_safeguarded_newton_stays_in_the_domain_and_converges():
    """From y = -1.5 Newton's first step lands at 7.1, outside the domain, and
    plain Newton stops there; the safeguarded one rejects that trial and its
    halving (2.8, also outside), takes the return map's image of the guess
    instead, and converges to the root from there (cutting back one more step
    that left the domain). A guess outside the domain
    has nothing to fall back to: the solve stops at once, at the guess."""
    plain, _ = _domain_solve(-1.5, wrapped=False)
    assert float(plain.value) > 2.0 or plain.aux[0] != RESULTS.successful
    root, evaluated = _domain_solve(-1.5, wrapped=True)
    assert root.result == optx.RESULTS.successful
    np.testing.assert_allclose(float(root.value), 1.0, atol=1e-12)
    assert root.aux[0] == RESULTS.successful
    # The guess; Newton's step from it (F' = -1/7.25) and its half, both
    # outside; the return map's image of the guess.
    full = -1.5 + np.arctan(2.5) * 7.25
    expected = [-1.5, full, -1.5 + (full + 1.5) / 2, -1.5 + np.arctan(2.5)]
    assert evaluated[:4] == pytest.approx(expected, rel=1e-12)
    dead, evaluated = _domain_solve(2.5, wrapped=True)
    assert dead.result != optx.RESULTS.successful
    assert evaluated == [2.5] and float(dead.value) == 2.5
    assert dead.aux[0] == RESULTS.mode_not_viable


def test_shooting_tightens_the_tolerance_and_stops_only_at_it():
    # `_ShootingRootFinder` tells the residual how loosely to integrate: the
    # first evaluation at the loosest tolerance, then by the size of the last step,
    # and it stops only after an evaluation at the settings' own. A model residual
    # whose error grows with the loosening (as a cycle's does with the tolerance)
    # shows both: the root is that of the exact residual's tolerance, not of a
    # loose one, and earlier evaluations did run loosened.
    from hybrax._periodic.newton import _LOOSE_TOL, _ShootingRootFinder

    base_tol = 1e-10
    error = 0.7 * base_tol  # the residual's error at loosen = 1
    seen = []

    def residual(y, args):
        target, _, _, _, _, loosen, _ = args
        jax.debug.callback(lambda value: seen.append(float(value)), loosen)
        F = y**3 - target + error * loosen
        return F, (RESULTS.successful, y + F, None)  # (status, image, no pass)

    solver = _ShootingRootFinder(
        optx.Newton(rtol=1e-13, atol=1e-13), base_tol, _LOOSE_TOL / base_tol
    )
    target = 2.0

    def solve(budget):
        seen.clear()
        return optx.root_find(
            residual,
            solver,
            jnp.asarray(1.0),
            # (target, guess, iteration budget, return-map iterations, idle,
            # first loosening: loosest, return-map iteration)
            args=(
                target,
                None,
                budget,
                0,
                jnp.asarray(False),
                jnp.asarray(jnp.inf),
                jnp.asarray(False),
            ),
            has_aux=True,
            max_steps=60,
            throw=False,
        )

    root = solve(60)
    assert root.result == optx.RESULTS.successful
    np.testing.assert_allclose(root.value, np.cbrt(target - error), rtol=1e-14)
    assert seen[0] == _LOOSE_TOL / base_tol
    assert seen[-1] == 1.0
    assert any(1.0 < value < _LOOSE_TOL / base_tol for value in seen)
    assert seen == sorted(seen, reverse=True)  # a converging Newton only tightens
    # A budget below the iterations it takes stops it there, as max_steps would.
    n_steps = int(root.stats["num_steps"])
    iterations = list(seen)
    root = solve(n_steps - 2)
    assert root.result == optx.RESULTS.nonlinear_max_steps_reached
    assert int(root.stats["num_steps"]) == n_steps - 2
    assert seen == iterations[: n_steps - 2]


def test_loosened_iterations_find_the_fixed_tolerance_orbit(minimal_orbit, monkeypatch):
    # The loosened Newton iterations (`_ShootingRootFinder`, the library's default)
    # and Newton at the settings' tolerance throughout find the same orbit, with
    # the same Jacobian, in no more iterations: the same root to the root finder's
    # tolerance (the default Newton's 1e-11; the iterates' paths differ).
    import hybrax._periodic.newton as periodic

    monkeypatch.setattr(periodic, "_LOOSE_TOL", TOL)
    system, section = models.hopper.minimal()[0], models.hopper.section("minimal")
    fixed = hx.find_periodic_orbit(
        system,
        section,
        models.hopper.orbit_guess(PARAMS),
        PARAMS,
        settings=SETTINGS,
        analyse=False,
        phase_observables=False,
    )
    orbit = minimal_orbit[0]
    assert fixed.succeeded and orbit.succeeded
    np.testing.assert_allclose(orbit.u, fixed.u, rtol=0, atol=1e-11)
    np.testing.assert_allclose(
        orbit.reduced_jacobian, fixed.reduced_jacobian, rtol=0, atol=1e-9
    )
    assert int(orbit.n_steps) <= int(fixed.n_steps)


@pytest.mark.slow  # the analysed orbit's program compiles once more, traced whole
def test_an_eager_analysis_in_two_programs_equals_the_single_program():
    """An eager `find_periodic_orbit(analyse=True)` runs the solve (with the
    saltation monodromy) and the AD monodromy with the Floquet analysis as two
    programs, compiled at once; under `jax.jit` the same call is one program.
    Both give the same orbit and the same analysis."""
    from hybrax import _compile

    system, section = models.hopper.minimal()[0], models.hopper.section("minimal")
    params = hx.canonical_params(models.hopper.make_params())
    guess = models.hopper.orbit_guess(params)
    with _compile.recorded() as records:
        eager = hx.find_periodic_orbit(system, section, guess, params)
    names = {r.what for r in records}
    assert names <= {
        "the orbit search with its saltation monodromy",
        "the AD monodromy and Floquet analysis",
    }
    traced = jax.jit(lambda p: hx.find_periodic_orbit(system, section, guess, p))(
        params
    )
    assert bool(eager.succeeded) and bool(traced.succeeded)
    np.testing.assert_allclose(eager.u, traced.u, rtol=1e-13)
    np.testing.assert_allclose(eager.period, traced.period, rtol=1e-13)
    for name in (
        "monodromy_ad",
        "monodromy_saltation",
        "multipliers_ad",
        "multipliers_saltation",
        "trivial_ad",
        "conserved_saltation",
    ):
        np.testing.assert_allclose(
            getattr(eager.floquet, name), getattr(traced.floquet, name), atol=1e-12
        )
