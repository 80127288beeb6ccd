"""The generic continuation core on small maps with closed-form bifurcations.

- The logistic map $x \\mapsto r x (1 - x)$: fixed point $x^* = 1 - 1/r$ with
  multiplier $2 - r$, a period doubling at $r = 3$; its period-2 orbit
  $x_\\pm = (r + 1 \\pm \\sqrt{(r - 3)(r + 1)}) / (2r)$ with multiplier
  $g'(x_+)g'(x_-) = -r^2 + 2r + 4$, a period doubling at $r = 1 + \\sqrt 6$; the
  period-4 orbit's doubling at $r_3 = 3.5440903595519228536\\ldots$ (no closed form;
  the value of the period-doubling cascade, e.g. OEIS A086181).
- $x \\mapsto x + \\lambda - x^2$: fixed points $\\pm\\sqrt\\lambda$, a fold at
  $\\lambda = 0$, multiplier $1 - 2x$.
- The delayed logistic map $(x, y) \\mapsto (r x (1 - y), x)$: fixed point
  $x = y = 1 - 1/r$, $M = [[1, 1 - r], [1, 0]]$ there ($\\det M = r - 1$,
  $\\operatorname{tr} M = 1$): a Neimark-Sacker point at $r = 2$ with multipliers
  $e^{\\pm i\\pi/3}$ (Kuznetsov 2004, example 4.7 / sec. 4.7).

Each map compiles one corrector per iterate count (small programs): the fixtures are
module-scoped and the maps module-level functions.
"""

import inspect
import math

import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx


def _corrector_programs() -> int:
    """The continuation corrector programs compiled so far in this process."""
    from hybrax import _compile

    return _compile.COUNTS["the continuation corrector"]


R_FLIP_1 = 3.0
R_FLIP_2 = 1.0 + math.sqrt(6.0)
R_FLIP_4 = 3.5440903595519228536  # OEIS A086181
# (The scale these branches' step counts were written for: r weighs as u.)
SETTINGS = hx.ContinuationSettings(max_step=0.1, parameter_scale=1.0)


def logistic(x, r, args):
    return r * x * (1 - x)


def fold_map(x, lam, args):
    return x + lam - x**2


def delayed_logistic(z, r, args):
    x, y = z[0], z[1]
    return jnp.stack([r * x * (1 - y), x])


def saddle_map(u, lam, args):
    # Linear, real multipliers 2 and lam: nu_1 nu_2 = 1 at lam = 1/2 (a neutral
    # saddle, no bifurcation).
    return jnp.stack([2.0 * u[0], lam * u[1]])


def parabola(u, lam, args):
    return u**2 - lam


def two_periodic_points(r):
    root = np.sqrt((r - 3) * (r + 1))
    return (r + 1 - root) / (2 * r), (r + 1 + root) / (2 * r)


@pytest.fixture(scope="module")
def fixed():
    return hx.continue_fixed_points(
        logistic, 0.6, 2.5, stop=3.6, parameter_name="r", continuation_settings=SETTINGS
    )


@pytest.fixture(scope="module")
def period_2(fixed):
    return hx.continue_fixed_points(
        logistic, fixed.period_doublings[0], stop=3.6, continuation_settings=SETTINGS
    )


@pytest.fixture(scope="module")
def period_4(period_2):
    return hx.continue_fixed_points(
        logistic,
        period_2.period_doublings[0],
        iterates=2,
        stop=3.6,
        continuation_settings=SETTINGS,
    )


@pytest.fixture(scope="module")
def folded():
    """From x = 1 at lambda = 1 down through the fold and back up to lambda = 1."""
    return hx.continue_fixed_points(fold_map, 1.0, 1.0, stop=(-1.0, 1.0), direction=-1)


@pytest.fixture(scope="module")
def torus():
    return hx.continue_fixed_points(delayed_logistic, [1 / 3, 1 / 3], 1.5, stop=2.3)


def test_logistic_fixed_point_branch(fixed):
    r, x = fixed.parameter, fixed.u[:, 0]
    assert fixed.result == hx.RESULTS.reached_bound and fixed.iterates == 1
    assert fixed.kind[0] == "start" and fixed.kind[-1] == "end"
    assert r[0] == 2.5 and r[-1] == 3.6
    assert np.all(np.diff(r) > 0) and not fixed.folds and not fixed.neimark_sackers
    np.testing.assert_allclose(x, 1 - 1 / r, atol=1e-12)
    np.testing.assert_allclose(fixed.multipliers[:, 0].real, 2 - r, atol=1e-12)
    np.testing.assert_allclose(fixed.multiplier_matrix[:, 0, 0], 2 - r, atol=1e-12)
    assert np.array_equal(fixed.stable, r < 3)
    assert fixed.parameter_name == "r" and fixed.method == "pseudo-arclength"


def test_an_interrupted_continuation_keeps_its_points(fixed, monkeypatch):
    """Ctrl-C after the third accepted point: `hx.Interrupted` (a
    KeyboardInterrupt) whose `partial` is the branch so far, point for point the
    uninterrupted branch's, with the status `interrupted`."""
    import hybrax._continuation.driver

    announce = hybrax._continuation.driver.announce
    lines = []

    def interrupting(line):
        announce(line)
        lines.append(line)
        if line.startswith("  point 3:"):
            raise KeyboardInterrupt

    monkeypatch.setattr(hybrax._continuation.driver, "announce", interrupting)
    with pytest.raises(hx.Interrupted) as info:
        hx.continue_fixed_points(
            logistic,
            0.6,
            2.5,
            stop=3.6,
            parameter_name="r",
            continuation_settings=SETTINGS,
        )
    assert isinstance(info.value, KeyboardInterrupt)
    partial = info.value.partial
    assert partial.result == hx.RESULTS.interrupted and not partial.succeeded
    assert "after 4 point(s)" in partial.message
    n = partial.parameter.size
    assert n == 4 + len(partial.special_points)
    np.testing.assert_array_equal(partial.parameter, fixed.parameter[:n])
    np.testing.assert_array_equal(partial.u, fixed.u[:n])
    assert partial.kind == fixed.kind[:n]


def test_a_point_budget_says_how_far_it_got_and_each_point_its_pace(fixed, monkeypatch):
    """A continuation that uses up `max_points` says in its message where it
    stopped (its last parameter value and its share of the way to the bound),
    not only that it reached the budget; each point's progress line gives
    `n/max_points`, the measured seconds per point and the time the rest of the
    budget would take at that pace (the last: the budget used up)."""
    import re

    import hybrax._continuation.driver

    announce = hybrax._continuation.driver.announce
    lines = []

    def keep(line):
        announce(line)
        lines.append(line)

    monkeypatch.setattr(hybrax._continuation.driver, "announce", keep)
    settings = hx.ContinuationSettings(max_step=0.1, max_points=6, parameter_scale=1)
    short = hx.continue_fixed_points(
        logistic, 0.6, 2.5, stop=3.6, parameter_name="r", continuation_settings=settings
    )
    assert short.result == hx.RESULTS.max_points_reached and short.succeeded
    np.testing.assert_array_equal(short.parameter, fixed.parameter[:6])
    last = short.parameter[-1]
    share = (last - 2.5) / (3.6 - 2.5)
    assert short.message == (
        f"reached max_points = 6 at r = {last:.8g}, {share:.0%} of the way from "
        "2.5 to 3.6"
    )
    progress = [line for line in lines if line.startswith("  point ")]
    assert len(progress) == 5
    for n, line in enumerate(progress, start=2):
        match = re.fullmatch(
            rf"  point {n - 1}: r = (\S+) \(\d+ Newton steps, step \S+\); "
            rf"{n}/6 points, (\S+) s/point, (.*)",
            line,
        )
        assert match, line
        assert float(match.group(1)) == pytest.approx(short.parameter[n - 1], rel=1e-7)
        assert float(match.group(2)) > 0
        if n < 6:
            assert re.fullmatch(
                r"under 1 s left|about \d+ (s|min) left at most", match.group(3)
            ), line
        else:
            assert match.group(3) == "the point budget used up"


def test_the_pace_and_the_time_left_come_from_the_measured_steps(monkeypatch):
    """The seconds per point are the mean of the last points' measured times,
    and the time left is that pace times the points the budget has left."""
    from hybrax._continuation import driver

    clock = iter([0.0, 2.0, 4.0, 10.0])
    monkeypatch.setattr(driver.time, "perf_counter", lambda: next(clock))
    pace = driver._Pace(1)
    pace.mark(2)  # 2 s
    pace.mark(3)  # 2 s
    assert pace.words(3, 63) == "3/63 points, 2 s/point, about 2 min left at most"
    pace.mark(5)  # two points in 6 s: 3 s each
    assert pace.words(5, 65) == "5/65 points, 2.5 s/point, about 2 min left at most"
    assert pace.words(5, 5) == "5/5 points, 2.5 s/point, the point budget used up"
    assert driver.duration_words(40) == "40 s"
    assert driver.duration_words(4000) == "67 min"
    assert driver.duration_words(36000) == "10.0 h"


def test_logistic_period_doubling_at_three(fixed):
    (flip,) = fixed.period_doublings
    assert fixed.special_points == (flip,)
    assert flip.kind == "period_doubling" and flip.located
    assert abs(flip.parameter - R_FLIP_1) < 1e-8
    assert abs(flip.u[0] - 2 / 3) < 1e-8
    assert abs(flip.critical_multiplier + 1) < 1e-8
    assert fixed.kind[flip.index] == "period_doubling"
    assert fixed.parameter[flip.index] == flip.parameter


def test_switch_onto_the_period_2_orbit(period_2):
    r, x = period_2.parameter, period_2.u[:, 0]
    assert period_2.result == hx.RESULTS.reached_bound and period_2.iterates == 2
    # Supercritical: the period-2 branch leaves r = 3 upwards, near the flip.
    assert 3 < r[0] < 3.01 and r[-1] == 3.6 and np.all(np.diff(r) > 0)
    low, high = two_periodic_points(r)
    assert np.max(np.minimum(abs(x - low), abs(x - high))) < 1e-12
    np.testing.assert_allclose(
        period_2.multipliers[:, 0].real, -(r**2) + 2 * r + 4, atol=1e-10
    )
    assert np.array_equal(period_2.stable, r < R_FLIP_2)


def test_period_2_orbit_doubles_at_one_plus_root_six(period_2):
    (flip,) = period_2.special_points
    assert flip.kind == "period_doubling" and flip.located
    assert abs(flip.parameter - R_FLIP_2) < 1e-8
    assert min(abs(flip.u[0] - p) for p in two_periodic_points(R_FLIP_2)) < 1e-8


def test_cascade_to_period_4(period_4):
    assert period_4.iterates == 4 and period_4.result == hx.RESULTS.reached_bound
    assert R_FLIP_2 < period_4.parameter[0] < R_FLIP_4
    (flip,) = period_4.period_doublings
    assert abs(flip.parameter - R_FLIP_4) < 1e-8


def test_fold_of_x_plus_lambda_minus_x_squared(folded):
    lam, x = folded.parameter, folded.u[:, 0]
    assert folded.result == hx.RESULTS.reached_bound
    np.testing.assert_allclose(lam[[0, -1]], [1.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(x[[0, -1]], [1.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(x**2, lam, atol=1e-12)  # fixed points x = ±sqrt(lam)
    (fold,) = folded.special_points
    assert fold.kind == "fold" and folded.folds == (fold,) and fold.located
    assert abs(fold.parameter) < 1e-8 and abs(fold.u[0]) < 1e-6
    assert abs(fold.critical_multiplier - 1) < 1e-6
    # lambda decreases to the fold and increases after it; the tangent's lambda
    # component changes sign there; the multiplier 1 - 2x: stable for 0 < x < 1.
    i = fold.index
    assert np.all(np.diff(lam[: i + 1]) < 0) and np.all(np.diff(lam[i:]) > 0)
    assert np.all(folded.tangent[:i, -1] < 0) and np.all(
        folded.tangent[i + 1 :, -1] > 0
    )
    np.testing.assert_allclose(folded.multipliers[:, 0].real, 1 - 2 * x, atol=1e-12)
    assert np.array_equal(folded.stable[1:-1], (x > 0)[1:-1])


def test_natural_continuation_stops_at_the_fold():
    natural = hx.continue_fixed_points(
        fold_map,
        1.0,
        1.0,
        stop=-1.0,
        continuation_settings=hx.ContinuationSettings(
            method="natural", initial_step=0.05, max_step=0.05, min_step=1e-4
        ),
    )
    assert natural.result == hx.RESULTS.min_step_reached and not natural.folds
    assert 0 < natural.parameter[-1] < 2e-3


def test_neimark_sacker_of_the_delayed_logistic_map(torus):
    r = torus.parameter
    assert torus.result == hx.RESULTS.reached_bound
    np.testing.assert_allclose(torus.u, np.stack([1 - 1 / r] * 2, axis=1), atol=1e-12)
    np.testing.assert_allclose(
        np.linalg.det(torus.multiplier_matrix), r - 1, atol=1e-12
    )
    (torus_point,) = torus.special_points
    assert torus.neimark_sackers == (torus_point,)
    assert not torus.folds and not torus.period_doublings
    assert torus_point.kind == "neimark_sacker" and torus_point.located
    assert abs(torus_point.parameter - 2.0) < 1e-8
    np.testing.assert_allclose(torus_point.u, [0.5, 0.5], atol=1e-8)
    np.testing.assert_allclose(np.abs(torus_point.multipliers), 1.0, atol=1e-8)
    assert abs(torus_point.critical_multiplier - np.exp(1j * np.pi / 3)) < 1e-8
    assert torus.kind[torus_point.index] == "neimark_sacker"
    # Away from the located point stability is r < 2; at the point itself |mu| = 1
    # to the location tolerance, so its flag is a rounding of the bifurcation.
    off_point = np.arange(r.size) != torus_point.index
    assert np.array_equal(torus.stable[off_point], r[off_point] < 2)


def test_neutral_saddle_is_not_a_torus_point():
    branch = hx.continue_fixed_points(saddle_map, [0.0, 0.0], 0.3, stop=0.7)
    products = np.prod(branch.multipliers, axis=1).real
    assert products[0] < 1 < products[-1]  # nu_1 nu_2 crosses 1 ...
    assert branch.special_points == ()  # ... with real multipliers: no bifurcation


def test_continue_zeros_without_multipliers():
    branch = hx.continue_zeros(parabola, 1.0, 1.0, stop=(-1.0, 1.0), direction=-1)
    assert branch.multipliers is None and branch.stable is None
    assert branch.iterates is None
    (fold,) = branch.folds
    assert abs(fold.parameter) < 1e-8 and fold.multipliers is None
    np.testing.assert_allclose(branch.u[:, 0] ** 2, branch.parameter, atol=1e-12)


def test_continue_zeros_with_a_multiplier_matrix():
    def flip(u, r, args):
        return jnp.atleast_1d(logistic(u[0], r, args)) - u

    def jacobian(u, r, args):
        return jnp.reshape(r * (1 - 2 * u[0]), (1, 1))

    branch = hx.continue_zeros(flip, 0.6, 2.5, stop=3.2, multiplier_matrix=jacobian)
    (point,) = branch.period_doublings
    assert abs(point.parameter - R_FLIP_1) < 1e-8


def test_one_compilation_per_map(fixed):
    before = _corrector_programs()
    again = hx.continue_fixed_points(
        logistic, 0.5, 2.0, stop=2.8, continuation_settings=SETTINGS
    )
    assert again.result == hx.RESULTS.reached_bound
    assert _corrector_programs() == before


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(method="secant"), "`method`"),
        (dict(initial_step=1.0, max_step=0.1), "`initial_step`"),
        (dict(max_points=0), "`max_points`"),
        (dict(parameter_scale=-1.0), "`parameter_scale`"),
        (dict(max_iterations=0), "`max_iterations`"),
        (dict(shrink=1.5), "`shrink`"),
        (dict(corrector="newton"), "`corrector`"),
    ],
)
def test_settings_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        hx.ContinuationSettings(**kwargs)


def test_argument_errors(fixed, folded):
    with pytest.raises(ValueError, match="`iterates`"):
        hx.continue_fixed_points(logistic, 0.6, 2.5, stop=3.0, iterates=0)
    with pytest.raises(ValueError, match="`fn`"):
        hx.continue_fixed_points(delayed_logistic, 0.6, 2.5, stop=3.0)
    with pytest.raises(ValueError, match="`lam0`"):
        hx.continue_fixed_points(logistic, 0.6, 2.5, stop=(3.0, 4.0))
    with pytest.raises(ValueError, match="Give `stop`"):
        hx.continue_fixed_points(logistic, 0.6, 2.5)
    with pytest.raises(ValueError, match="`direction`"):
        hx.continue_fixed_points(logistic, 0.6, 2.5, stop=(2.0, 3.0))
    with pytest.raises(ValueError, match="`stop` as a range"):
        hx.continue_fixed_points(logistic, 0.6, 2.5, stop=(2.0, 2.7, 3.0))
    with pytest.raises(ValueError, match="Give `lam0`"):
        hx.continue_fixed_points(logistic, 0.6, stop=3.0)
    with pytest.raises(ValueError, match="`continuation_settings`"):
        hx.continue_fixed_points(
            logistic, 0.6, 2.5, stop=3.0, continuation_settings=dict(max_step=0.1)
        )
    with pytest.raises(ValueError, match="`multiplier_matrix`"):
        hx.continue_zeros(parabola, 1.0, 1.0, stop=0.5, multiplier_matrix=parabola)
    with pytest.raises(ValueError, match="period doubling; got a fold"):
        hx.continue_fixed_points(fold_map, folded.folds[0], stop=1.0)
    with pytest.raises(ValueError, match="`switch_amplitude`"):
        hx.ContinuationSettings(switch_amplitude=-1.0)
    with pytest.raises(ValueError, match="`max_period`"):
        hx.ContinuationSettings(max_period=0.0)
    with pytest.raises(ValueError, match="`lam0`"):
        hx.continue_fixed_points(logistic, fixed.period_doublings[0], 3.0, stop=3.6)
    with pytest.raises(ValueError, match="`u0` must be an array"):
        hx.continue_fixed_points(logistic, fixed.special_points, 2.5, stop=3.6)
    with pytest.raises(RuntimeError, match="no solution"):
        hx.continue_zeros(parabola, 1.0, -1.0, stop=-0.5, throw=True)
    failed = hx.continue_zeros(parabola, 1.0, -1.0, stop=-0.5)
    assert failed.result == hx.RESULTS.start_failed and failed.n_points == 0


# The logistic map as the return map of a hybrid system: a clock x[1] runs for one
# time unit, then a kick resets x[0] -> r x[0] (1 - x[0]). One compilation per
# section (the period-1 and the doubled one).


def drift(t, x, params):
    return jnp.array([0.0, 1.0])


def clock(t, x, params):
    return 1.0 - x[1]


def kick(t, x, params):
    return jnp.stack([params["r"] * x[0] * (1 - x[0]), 0.0 * x[1]])


def kick_chart(u, params):
    return jnp.stack([u[0], 0.0 * u[0]])


def kick_coordinates(x, params):
    return x[:1]


@pytest.fixture(scope="module")
def kicked():
    system = hx.HybridSystem(
        [hx.Mode(drift, name="drift")],
        [
            hx.Transition(
                "drift", "drift", clock, direction=False, reset=kick, name="kick"
            )
        ],
        n_states=2,
    )
    section = hx.PoincareSection(("kick",), kick_chart, kick_coordinates)
    params = {"r": jnp.asarray(2.8)}
    branch = hx.continue_orbits(
        system,
        section,
        jnp.array([0.6]),
        params,
        "r",  # starts at its value in `params`, 2.8
        stop=3.5,
        continuation_settings=hx.ContinuationSettings(max_step=0.1),
    )
    doubled = hx.continue_orbits(
        system,
        section,
        branch.period_doublings[0],
        params,
        "r",
        stop=3.5,
        continuation_settings=SETTINGS,
    )
    return section, branch, doubled


@pytest.mark.slow
def test_hybrid_orbit_branch_switches_at_its_period_doubling(kicked):
    section, branch, doubled = kicked
    assert hx.period_doubled_section(section).sequence == ("kick", "kick")
    r = branch.parameter
    np.testing.assert_allclose(branch.u[:, 0], 1 - 1 / r, atol=1e-12)
    np.testing.assert_allclose(branch.period, 1.0, atol=1e-12)
    (flip,) = branch.special_points
    assert flip.kind == "period_doubling" and abs(flip.parameter - R_FLIP_1) < 1e-8
    assert flip.phase_durations.shape == (1,) and abs(flip.period - 1) < 1e-12
    r, x = doubled.parameter, doubled.u[:, 0]
    assert doubled.result == hx.RESULTS.reached_bound and 3 < r[0] < 3.01
    low, high = two_periodic_points(r)
    assert np.max(np.minimum(abs(x - low), abs(x - high))) < 1e-12
    np.testing.assert_allclose(doubled.period, 2.0, atol=1e-12)
    assert doubled.phase_durations.shape == (doubled.n_points, 2)
    (flip,) = doubled.period_doublings
    assert abs(flip.parameter - R_FLIP_2) < 1e-8


def test_a_branch_is_a_pytree_of_stacked_arrays(fixed):
    """Its leaves are the per-point arrays (leading axis: the points), its result
    and its special points' arrays; `select` takes some points as a branch."""
    import jax

    leaves = {id(leaf) for leaf in jax.tree.leaves(fixed)}
    assert id(fixed.parameter) in leaves and id(fixed.u) in leaves
    head = fixed.select(slice(3))
    assert type(head) is type(fixed) and head.n_points == 3
    np.testing.assert_array_equal(head.parameter, fixed.parameter[:3])
    np.testing.assert_array_equal(head.u, fixed.u[:3])
    assert head.kind == fixed.kind[:3]
    assert head.special_points == fixed.special_points
    stable = fixed.select(fixed.stable)
    assert stable.n_points == int(np.sum(fixed.stable)) and all(stable.stable)


def test_parameter_scale_defaults_to_the_parameters_magnitude():
    """A stiffness near 2e4 N/m: with the arclength weighing lambda as 1 (the old
    default) a 60-point budget moved it by about 12 N/m and said no more; the
    default scale is now |lambda_0|, and the same budget covers the range. The
    line u = lambda / 1e4 is its own closed form."""

    def line(u, lam, args):
        return u - lam * 1e-4

    settings = hx.ContinuationSettings(max_points=60)
    branch = hx.continue_zeros(line, 2.0, 2e4, stop=3e4, continuation_settings=settings)
    assert hx.status_name(branch.result) == ["reached_bound"], branch.message
    np.testing.assert_allclose(branch.parameter[-1], 3e4, rtol=1e-9)
    np.testing.assert_allclose(branch.u[:, 0], branch.parameter * 1e-4, rtol=1e-9)
    tight = hx.ContinuationSettings(max_points=60, parameter_scale=1.0)
    short = hx.continue_zeros(line, 2.0, 2e4, stop=3e4, continuation_settings=tight)
    assert hx.status_name(short.result) == ["max_points_reached"]
    assert "reached max_points = 60" in short.message
    assert short.parameter[-1] < 2.01e4
    with pytest.raises(ValueError, match="parameter_scale"):
        hx.ContinuationSettings(parameter_scale=0.0)


def test_one_continuation_family():
    """Continuation is a small family, one entry point per kind of object
    continued, each with at most 11 parameters; the removed names say what
    replaces them rather than failing with a bare `AttributeError`."""
    family = {
        "continue_zeros",
        "continue_fixed_points",
        "continue_orbits",
        "continue_bifurcation_curve",
        "continue_orbit_curve",
        "continue_to_params",
        "continue_cascade",
    }
    public = {name for name in dir(hx) if name.startswith("continue_")}
    assert public == family
    for name in family:
        assert len(inspect.signature(getattr(hx, name)).parameters) <= 11, name
    replacements = {
        "continue_branch": "continue_orbits",
        "continue_branch_period_doubled": "continue_orbits",
        "continue_period_doubled": "continue_fixed_points",
    }
    for removed, replacement in replacements.items():
        with pytest.raises(AttributeError, match=f"hybrax.{replacement}"):
            getattr(hx, removed)
    with pytest.raises(AttributeError, match="no attribute 'continue_nothing'"):
        hx.continue_nothing  # noqa: B018
