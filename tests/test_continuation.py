"""Continuation of the hopper's periodic orbits in D_G (Zana et al. 2018 section 4.3)
against the closed-form NumPy/SciPy reference `reference_hopper.py`.

Every continuation here shares one integration setting, so the per-step corrector
compiles once for the whole module (checked by `test_corrector_compiles_once`). The
reference's orbit is the fixed point of its 1-D lift-off return map
$v_U \\mapsto P(v_U; D_G)$; a fold of the branch $P(v; D(v)) = v$ is where
$D'(v) = 0$, equivalently $\\partial P/\\partial v = 1$, found here as the
extremum of $D(v)$ (each $D(v)$ by `brentq` on the closed form), independently of
hybrax.
"""

import contextlib
import io
import json
import math

import jax.numpy as jnp
import numpy as np
import pytest
from matplotlib.lines import Line2D
from scipy.optimize import brentq, minimize_scalar

import hybrax as hx
import hybrax.plot
import reference_hopper as ref
from helpers import MULTIPLIER_TOL, ORACLE_TOL
from hybrax import models
from hybrax._cli import main


def _corrector_programs() -> int:
    """The continuation corrector programs compiled so far in this process."""
    from hybrax import _compile

    return _compile.COUNTS["the continuation corrector"]


TOL = 1e-12  # integration tolerance of every continuation in this module
THETA = 0.01  # arclength scale of D_G
SYSTEM = models.hopper.minimal()[0]
SECTION = models.hopper.section()
D_G = models.hopper.parameter("D_G")
# Coarse brackets (v_U range, D_G range, extremum) of the first two folds of the
# mu = 0.8 branch, read off a plot of the reference's zero set of P(v) - v.
REFERENCE_FOLDS = (
    ((0.84, 0.94), (-0.0375, -0.0335), "min"),
    ((1.35, 1.45), (-0.0257, -0.0217), "max"),
)


def _continue(mu, start, stop, v_guess, throw=False, **steps):
    """The branch with the `ContinuationSettings` fields `steps` (by default
    `parameter_scale=THETA, max_step=0.1`)."""
    params = hx.canonical_params(models.hopper.make_params(D_G=start, mu=mu))
    return hx.continue_orbits(
        SYSTEM,
        SECTION,
        models.hopper.orbit_guess(params, v_guess),
        params,
        D_G,
        start=start,
        stop=stop,
        continuation_settings=hx.ContinuationSettings(
            **{"parameter_scale": THETA, "max_step": 0.1, **steps}
        ),
        settings=hx.Settings(rtol=TOL, atol=TOL),
        throw=throw,
    )


@pytest.fixture(scope="module")
def branch():
    """mu = 0.8 from D_G = -0.005 to -0.04: through two folds (an S)."""
    return _continue(0.8, -0.005, -0.04, 0.3)


@pytest.fixture(scope="module")
def arclength_short():
    """A monotone stretch, pseudo-arclength, ending exactly on D_G = -0.02."""
    return _continue(0.8, -0.005, -0.02, 0.3)


@pytest.fixture(scope="module")
def natural_short():
    """The same stretch by natural-parameter continuation, steps of 0.0025."""
    return _continue(
        0.8,
        -0.005,
        -0.02,
        0.3,
        method="natural",
        initial_step=0.0025,
        min_step=1e-4,
        max_step=0.0025,
    )


@pytest.fixture(scope="module")
def towards_zero():
    """mu = 0.8 from D_G = -1e-3 up to -1e-7."""
    return _continue(0.8, -1e-3, -1e-7, 0.17)


@pytest.fixture(scope="module")
def heavy():
    """mu = 0.95 across D_G = -0.0097, where the ground starts to pull."""
    return _continue(0.95, -0.009, -0.011, 1.7)


def _reference_params(mu, D):
    return ref.HopperParams(mu=mu).with_D_G(float(D))


def _reference_fold(mu, v_range, D_range, kind):
    base = ref.HopperParams(mu=mu)

    def D_of_v(v):
        return brentq(
            lambda D: ref.return_map(v, base.with_D_G(D)) - v,
            *D_range,
            xtol=1e-16,
            rtol=1e-15,
        )

    sign = 1.0 if kind == "min" else -1.0
    found = minimize_scalar(
        lambda v: sign * D_of_v(v),
        bounds=v_range,
        method="bounded",
        options=dict(xatol=1e-9),
    )
    v = float(found.x)
    return v, D_of_v(v)


def _reference_slope(v, p, h=1e-4):
    """dP/dv by a Richardson-extrapolated central difference."""

    def central(step):
        return (ref.return_map(v + step, p) - ref.return_map(v - step, p)) / (2 * step)

    return (4 * central(h / 2) - central(h)) / 3


def test_branch_matches_reference_orbits(branch):
    assert branch.result == hx.RESULTS.reached_bound and branch.succeeded
    assert branch.kind[0] == "start" and branch.kind[-1] == "end"
    np.testing.assert_allclose(branch.parameter[[0, -1]], [-0.005, -0.04], atol=1e-15)
    assert np.all(branch.residual_norm < 1e-9)
    picks = np.linspace(0, branch.n_points - 1, 5).astype(int)
    picks = np.append(picks, np.flatnonzero(~branch.stable)[len(picks) // 2])
    assert not np.all(branch.stable[picks])  # unstable orbits are checked too
    for i in picks:
        p = _reference_params(0.8, branch.parameter[i])
        orbit = ref.periodic_orbit(p, v_guess=branch.u[i, 1])
        np.testing.assert_allclose(branch.state[i], orbit["state"], atol=ORACLE_TOL)
        np.testing.assert_allclose(
            branch.phase_durations[i],
            [orbit["t_flight"], orbit["t_ground"]],
            atol=ORACLE_TOL,
        )
        np.testing.assert_allclose(
            branch.multipliers[i, 0].real, orbit["multiplier"], atol=ORACLE_TOL
        )
        assert abs(branch.multipliers[i, 1]) < MULTIPLIER_TOL  # M has rank one
        assert branch.stable[i] == (abs(orbit["multiplier"]) < 1)
        T_c = branch.observables["T_c"][i, 0]
        T_a = branch.observables["T_a"][i, 0]
        np.testing.assert_allclose(T_c / (T_c + T_a), orbit["Tc_over_T"], atol=1e-10)


def test_folds_match_reference(branch):
    assert len(branch.folds) == 2
    assert len(branch.period_doublings) == 0
    for fold, (v_range, D_range, kind) in zip(branch.folds, REFERENCE_FOLDS):
        v_ref, D_ref = _reference_fold(0.8, v_range, D_range, kind)
        assert fold.located
        # The paper's question is D_G to 1e-6; it agrees far better.
        assert abs(fold.parameter - D_ref) < ORACLE_TOL
        assert abs(fold.u[1] - v_ref) < 1e-6  # flat extremum: v is less sharp
        p = _reference_params(0.8, D_ref)
        # The reference's multiplier at its fold, and ours at ours, are 1.
        assert abs(_reference_slope(v_ref, p) - 1) < MULTIPLIER_TOL
        assert abs(fold.multipliers[0].real - 1) < MULTIPLIER_TOL
        hop = ref.one_hop(ref.section_state(v_ref, p), p)
        assert abs(fold.phase_durations[0] - hop["t_flight"]) < 1e-6
        assert branch.kind[fold.index] == "fold"
        assert branch.parameter[fold.index] == fold.parameter
    # Known values (this implementation, checked above against the reference).
    np.testing.assert_allclose(
        [f.parameter for f in branch.folds], [-0.0354390342, -0.0237354715], atol=1e-9
    )


def test_branch_turns_back_and_keeps_both_stabilities(branch):
    first, second = (f.index for f in branch.folds)
    lam = branch.parameter
    # D_G decreases to the first fold, increases to the second, decreases after.
    assert np.all(np.diff(lam[: first + 1]) < 0)
    assert np.all(np.diff(lam[first : second + 1]) > 0)
    assert np.all(np.diff(lam[second:]) < 0)
    # The tangent's parameter component changes sign at each fold, the multiplier
    # passes +1: stable, unstable, stable.
    t_lam = branch.tangent[:, -1]
    assert np.all(t_lam[:first] < 0) and np.all(t_lam[first + 1 : second] > 0)
    assert np.all(t_lam[second + 1 :] < 0)
    nu = branch.multipliers[:, 0].real
    assert np.all(nu[:first] < 1) and np.all(nu[first + 1 : second] > 1)
    assert np.all(nu[second + 1 :] < 1)
    assert np.all(branch.stable[:first]) and np.all(branch.stable[second + 1 :])
    assert not np.any(branch.stable[first + 1 : second])
    # Three orbits coexist between the folds, e.g. at D_G = -0.03.
    crossings = np.flatnonzero(np.diff(np.sign(lam + 0.03)) != 0)
    assert len(crossings) == 3


def test_natural_agrees_with_pseudo_arclength(arclength_short, natural_short):
    a, n = arclength_short, natural_short
    assert a.result == n.result == hx.RESULTS.reached_bound
    assert a.method == "pseudo-arclength" and n.method == "natural"
    assert np.all(np.diff(a.parameter) < 0)  # a monotone stretch
    np.testing.assert_allclose(np.diff(n.parameter), -0.0025, atol=1e-15)
    for i in (0, -1):  # both start at -0.005 and end exactly on -0.02
        assert a.parameter[i] == n.parameter[i]
        np.testing.assert_allclose(a.u[i], n.u[i], atol=1e-10)
        np.testing.assert_allclose(a.multipliers[i], n.multipliers[i], atol=1e-9)
    # In between, on the cubic Hermite interpolant of the arclength points (dv/dD
    # from their tangents): agreement to the interpolation error.
    slope = a.tangent[:, 1] / (a.tangent[:, 2] * THETA)
    for lam, v in zip(n.parameter[1:-1], n.u[1:-1, 1]):
        j = np.flatnonzero((a.parameter[:-1] >= lam) & (a.parameter[1:] <= lam))[0]
        x0, x1 = a.parameter[j], a.parameter[j + 1]
        h = x1 - x0
        s = (lam - x0) / h
        h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
        h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
        guess = (
            h00 * a.u[j, 1]
            + h10 * h * slope[j]
            + h01 * a.u[j + 1, 1]
            + h11 * h * slope[j + 1]
        )
        assert abs(v - guess) < 1e-5
    # And on the reference.
    i = len(n.parameter) // 2
    orbit = ref.periodic_orbit(
        _reference_params(0.8, n.parameter[i]), v_guess=n.u[i, 1]
    )
    np.testing.assert_allclose(n.state[i], orbit["state"], atol=ORACLE_TOL)


def test_natural_continuation_stops_at_a_fold():
    n = _continue(
        0.8, -0.03, -0.04, 0.7, method="natural", initial_step=0.002,
        max_step=0.002, min_step=1e-4,
    )  # fmt: skip
    assert n.result == hx.RESULTS.min_step_reached
    assert n.parameter[-1] > -0.0354390342 and not n.folds
    assert n.parameter[-1] < -0.0354390342 + 2e-4


def test_limit_towards_zero_damping(towards_zero):
    """As D_G -> 0-, t_F -> 0 and t_G -> t_p0 = 2 pi sqrt(m_U / k) (the ground
    phase becomes the free oscillation of m_U), and the multiplier -> 1."""
    b = towards_zero
    t_p0 = 2 * math.pi * math.sqrt(0.8 * 75.0 / 15000.0)
    t_F, t_G = b.phase_durations[:, 0], b.phase_durations[:, 1]
    nu = b.multipliers[:, 0].real
    assert b.parameter[-1] == -1e-7
    assert np.all(np.diff(b.parameter) > 0)
    assert np.all(np.diff(t_F) < 0) and np.all(np.diff(t_G) > 0)
    assert np.all(np.diff(nu) > 0) and np.all(nu < 1)
    assert t_F[-1] < 3e-3
    assert 0 < t_p0 - t_G[-1] < 3e-3
    assert abs(b.period[-1] - t_p0) < 1e-5
    assert nu[-1] > 0.98
    # The reference at the start of this stretch.
    orbit = ref.periodic_orbit(_reference_params(0.8, -1e-3), v_guess=b.u[0, 1])
    np.testing.assert_allclose(t_G[0], orbit["t_ground"], atol=ORACLE_TOL)


def test_pulling_after_touchdown_is_flagged(heavy):
    """mu = 0.95: past D_G ~ -0.0097 the contact force right after touchdown is a
    pull (lambda_g > 0). Both implementations then wait, foot down, for lambda_g to
    cross 0 upwards (the reference's `liftoff_time` skips the initial pull); such
    orbits are kept and flagged as not admissible."""
    b = heavy
    assert b.admissible[0] and not b.admissible[-1]
    change = np.flatnonzero(np.diff(b.admissible.astype(int)) != 0)
    assert len(change) == 1
    for i in (0, change[0], change[0] + 1, b.n_points - 1):
        p = _reference_params(0.95, b.parameter[i])
        orbit = ref.periodic_orbit(p, v_guess=b.u[i, 1])
        np.testing.assert_allclose(b.state[i], orbit["state"], atol=ORACLE_TOL)
        np.testing.assert_allclose(
            b.multipliers[i, 0].real, orbit["multiplier"], atol=ORACLE_TOL
        )
        force = -b.guard_at_start[i, 0] * 75.0 * 9.81
        np.testing.assert_allclose(force, orbit["hop"]["lambda_touchdown"], atol=1e-6)
        if i != b.force_reversals[0].index:  # there the force is 0 (to 1e-9 N)
            assert b.admissible[i] == (orbit["hop"]["lambda_touchdown"] <= 0)
    # Where the force changes sign (linear interpolation): D_G ~ -0.00967.
    j = change[0]
    force = -b.guard_at_start[j : j + 2, 0]
    crossing = b.parameter[j] - force[0] * np.diff(b.parameter[j : j + 2])[0] / (
        force[1] - force[0]
    )
    assert -0.0098 < crossing < -0.0095
    # The continuation locates it as a hybrid boundary: a force reversal after
    # event 0 (touchdown), at the root of the reference's touchdown force found
    # by bisection on D_G (SciPy's brentq on the independent implementation).
    (reversal,) = b.force_reversals
    assert reversal.event == 0 and reversal.located
    assert abs(reversal.test_value) < 1e-10

    def pull(d_g):
        hop = ref.periodic_orbit(_reference_params(0.95, d_g), v_guess=reversal.u[1])
        return hop["hop"]["lambda_touchdown"]

    root = brentq(
        pull, reversal.parameter - 1e-4, reversal.parameter + 1e-4, xtol=1e-13
    )
    np.testing.assert_allclose(reversal.parameter, root, atol=1e-9)


@pytest.fixture(scope="module", autouse=True)
def programs_before():
    """The corrector programs compiled before this module's continuations (by
    other test files in the same process)."""
    return _corrector_programs()


def test_corrector_compiles_once(
    programs_before,
    branch,
    arclength_short,
    natural_short,
    towards_zero,
    heavy,
    cli_run,
):
    # Six continuations (one through the CLI), two methods, two mass ratios, fold
    # location: one program.
    assert _corrector_programs() == programs_before + 1


def test_start_failure():
    # D_G > 0: the dampers only take energy out, no hopping orbit exists.
    with pytest.raises(RuntimeError, match="no periodic orbit found"):
        _continue(0.8, 0.01, 0.02, 0.5, throw=True)
    failed = _continue(0.8, 0.01, 0.02, 0.5)
    assert failed.result == hx.RESULTS.start_failed and failed.n_points == 0
    assert not failed.succeeded


def test_several_guesses_start_from_the_first_that_starts():
    """`continue_orbits` with a list of guesses (as `hybrax continue` passes a
    model's `branch_guesses`): a guess that starts no orbit (lift-off downwards)
    is passed over, and the branch is the one the next guess starts alone, point
    for point; where none starts, the last one's `start_failed`."""
    params = hx.canonical_params(models.hopper.make_params(D_G=-0.03, mu=0.8))
    downwards = models.hopper.orbit_guess(params, -1.0)
    upwards = models.hopper.orbit_guess(params, 1.0)
    steps = dict(
        start=-0.03,
        stop=-0.029,
        continuation_settings=hx.ContinuationSettings(
            parameter_scale=THETA, max_step=0.1, max_points=3
        ),
    )
    alone = hx.continue_orbits(SYSTEM, SECTION, downwards, params, D_G, **steps)
    assert alone.result == hx.RESULTS.start_failed
    both = hx.continue_orbits(
        SYSTEM, SECTION, [downwards, upwards], params, D_G, **steps
    )
    second = hx.continue_orbits(SYSTEM, SECTION, upwards, params, D_G, **steps)
    assert both.n_points == second.n_points == 3
    np.testing.assert_array_equal(np.asarray(both.u), np.asarray(second.u))
    stacked = hx.continue_orbits(
        SYSTEM, SECTION, np.stack([downwards, downwards]), params, D_G, **steps
    )
    assert stacked.result == hx.RESULTS.start_failed


def test_parameter_get_set():
    params = models.hopper.make_params()
    changed = D_G.set(params, -0.03)
    np.testing.assert_allclose(D_G.get(changed), -0.03, rtol=1e-14)
    np.testing.assert_allclose(
        changed.d_G, -0.03 * 2 * math.sqrt(15000.0 * 75.0), rtol=1e-14
    )
    np.testing.assert_allclose(changed.D_G, -0.03, rtol=1e-14)
    mu = hx.FieldParameter("mu")
    assert float(mu.get(mu.set(params, 0.9))) == 0.9
    function = hx.FunctionParameter(
        lambda p: p["a"], lambda p, v: {**p, "a": v}, name="a"
    )
    assert function.set({"a": 1.0}, 2.0) == {"a": 2.0}
    assert hx.FieldParameter("a").set({"a": 1.0}, 3.0) == {"a": 3.0}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(stop=None), "Give `stop`"),
        (dict(stop=(0.0, -1.0)), "`stop` must be finite"),
        (dict(stop=(-0.02, -0.01), direction=1), "`start`"),
        (dict(stop=(-0.02, 0.0)), "`direction`"),
        (dict(direction=2), "`direction`"),
        (dict(continuation_settings=dict(max_step=0.1)), "`continuation_settings`"),
    ],
)
def test_argument_errors(kwargs, match):
    params = hx.canonical_params(models.hopper.make_params(D_G=-0.005))
    arguments = dict(start=-0.005, stop=-0.02)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=match):
        hx.continue_orbits(
            SYSTEM,
            SECTION,
            models.hopper.orbit_guess(params, 0.3),
            params,
            D_G,
            **arguments,
        )
    with pytest.raises(ValueError, match="`parameter`"):
        hx.continue_orbits(
            SYSTEM, SECTION, jnp.zeros(2), params, 3, start=-0.005, stop=-0.02
        )
    # Without `start`, the parameter's value in `params`: a scalar.
    with pytest.raises(ValueError, match="`start`.*not a scalar"):
        hx.continue_orbits(
            SYSTEM, SECTION, jnp.zeros(2), {"r": jnp.ones(2)}, "r", stop=1.0
        )
    with pytest.raises(ValueError, match="`field`"):
        hx.FieldParameter("")


POINT_KEYS = {
    "D_G",
    "t_flight",
    "t_ground",
    "period",
    "multiplier",
    "apex_upper",
    "apex_lower",
    "Tc_over_T",
    "Ta_over_T",
    "stable",
    "pulling_after_touchdown",
}
FIGURES = ("fig6_times.png", "fig7_multiplier.png", "fig8_apex.png", "fig9_energy.png")


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """`hybrax continue hopper` over the `branch` fixture's range and settings:
    its corrector is the module's one compilation."""
    out = tmp_path_factory.mktemp("continue")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(
            [
                "continue",
                "hopper",
                "--param",
                "D_G",
                "--set",
                "mu=0.8",
                "--start=-0.005",
                "--stop=-0.04",
                "--max-step",
                "0.1",
                "--tol",
                str(TOL),
                "--out",
                str(out),
                "--json",
                str(out / "branch.json"),
            ]
        )
    payload = json.loads((out / "branch.json").read_text())
    return code, out, payload, printed.getvalue()


def test_cli_writes_branch_and_figures(cli_run, branch):
    code, out, payload, printed = cli_run
    assert code == 0
    assert payload["status"] == "reached_bound" and payload["parameter"] == "D_G"
    points = payload["branch"]
    assert len(points) == branch.n_points
    assert all(POINT_KEYS <= set(point) for point in points)
    # The same computation up to rounding (the start guess is built from params
    # assembled a little differently).
    np.testing.assert_allclose([p["D_G"] for p in points], branch.parameter, atol=1e-12)
    regular = [i for i, kind in enumerate(branch.kind) if kind != "fold"]
    # (at a fold the multiplier is 1 to rounding: either verdict)
    assert [points[i]["stable"] for i in regular] == branch.stable[regular].tolist()
    # (at a force reversal the force is 0 to rounding: either verdict)
    clear = np.flatnonzero(np.abs(branch.guard_at_start[:, 0]) > 1e-9)
    assert [points[i]["pulling_after_touchdown"] for i in clear] == (
        branch.guard_at_start[clear, 0] < 0
    ).tolist()
    # The summary counts the points of the hopper's declared condition.
    pulling = sum(point["pulling_after_touchdown"] for point in points)
    assert f"; {pulling} where the ground pulls after touchdown" in printed
    folds = payload["folds"]
    np.testing.assert_allclose(
        [[f["D_G"], f["t_flight"]] for f in folds],
        [[f.parameter, f.phase_durations[0]] for f in branch.folds],
        atol=1e-12,
    )
    assert payload["period_doublings"] == []
    for point in points:
        assert abs(point["Tc_over_T"] + point["Ta_over_T"] - 1) < 1e-12
        assert point["t_flight"] + point["t_ground"] == pytest.approx(
            point["period"], abs=1e-12
        )
    # Apex heights against the maxima of the reference's exact flight solution
    # from the same lift-off state.
    for i in (0, branch.folds[0].index, branch.n_points - 1):
        p = _reference_params(0.8, branch.parameter[i])
        t_flight = ref.one_hop(branch.state[i], p)["t_flight"]
        for key, index in (("apex_upper", 0), ("apex_lower", 1)):
            exact = ref._flight_max(branch.state[i], t_flight, p, index)
            assert abs(points[i][key] - exact) < 1e-7
    for name in FIGURES:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# Slow: 10-20 s cold, over the fast set's share (run by .ci/run).
@pytest.mark.slow
def test_cli_says_how_the_run_ended_last(cli_run, tmp_path, capsys):
    """The JSON's top-level `status` and `message` say how the run ended, with
    `end`, the command's last line; the branch's own in `branch_status` and
    `branch_message`. A branch that reaches `--stop` ends there; one that uses
    up `--max-points` says so on its last line and top-level, with how far it
    got, and each point's progress line says the measured pace and the time
    the rest of the budget would take (the same corrector: no compilation)."""
    _, _, payload, _ = cli_run
    assert payload["status"] == payload["branch_status"] == "reached_bound"
    assert payload["ended_in"] == "branch"
    assert payload["end"] == (
        f"ended: the branch reached the end of its range at D_G = "
        f"{payload['branch'][-1]['D_G']:.8g} (left [-0.04, -0.005])"
    )
    capsys.readouterr()
    code = main(
        ["continue", "hopper", "--param", "D_G", "--set", "mu=0.8"]
        + ["--start=-0.005", "--stop=-0.04", "--max-step", "0.1", "--tol", str(TOL)]
        + ["--max-points", "5", "--no-figures", "--out", str(tmp_path)]
        + ["--json", str(tmp_path / "branch.json")]
    )
    assert code == 0
    out, err = capsys.readouterr()
    data = json.loads((tmp_path / "branch.json").read_text())
    last = data["branch"][-1]["D_G"]
    share = (last + 0.005) / (-0.04 + 0.005)
    message = (
        f"reached max_points = 5 at D_G = {last:.8g}, {share:.0%} of the way from "
        "-0.005 to -0.04"
    )
    assert data["status"] == data["branch_status"] == "max_points_reached"
    assert data["message"] == data["branch_message"] == message
    end = f"ended: the branch used up its point budget (--max-points 5): {message}"
    assert data["end"] == end and out.strip().splitlines()[-1] == end
    progress = [line for line in err.splitlines() if line.startswith("  point ")]
    assert [line.split(";")[1].split(",")[0] for line in progress] == [
        f" {n}/5 points" for n in range(2, 6)
    ]
    assert all(" s/point, " in line for line in progress)
    assert progress[-1].endswith("the point budget used up")


def test_cli_argument_errors(capsys):
    with pytest.raises(SystemExit) as error:
        main(["continue", "hopper", "--param", "E_G"])
    assert error.value.code == 2
    assert "unknown hopper parameter 'E_G'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["continue", "hopper", "--param", "mu", "--start", "0.5"])
    assert "give both" in capsys.readouterr().err


def test_branch_figure(branch):
    fig = hybrax.plot.branch_figure(
        branch.parameter,
        {"t_F": branch.phase_durations[:, 0], "t_G": branch.phase_durations[:, 1]},
        branch.stable,
        folds=[f.index for f in branch.folds],
        flagged=~branch.admissible,
        flagged_label="pulls",
        xlabel="D_G",
        ylabel="time",
    )
    (ax,) = fig.axes
    lines = [line for line in ax.get_lines() if isinstance(line, Line2D)]
    styles = {line.get_linestyle() for line in lines if len(line.get_xdata()) > 1}
    assert {"-", "--"} <= styles  # stable and unstable pieces
    markers = [
        line
        for line in lines
        if line.get_marker() == "o" and len(line.get_xdata()) == len(branch.folds)
    ]
    assert len(markers) == 2  # the folds, once per curve
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert {"t_F", "t_G", "stable", "unstable", "fold (LP)"} <= set(labels)
    assert "period doubling (PD)" not in labels  # only what is drawn
    # Each fold labelled LP on each curve, at the fold.
    notes = [a for a in ax.texts if a.get_text() == "LP"]
    assert len(notes) == 2 * len(branch.folds)
    assert {a.xy[0] for a in notes} == {branch.parameter[f.index] for f in branch.folds}
    assert ax.get_xlabel() == "D_G" and ax.get_ylabel() == "time"
    with pytest.raises(ValueError, match="stable"):
        hybrax.plot.branch_figure(branch.parameter, {}, branch.stable[:-1])
    # A branch of stable orbits only: no "unstable" in the legend; its period
    # doubling labelled PD.
    fig = hybrax.plot.branch_figure(
        np.arange(4.0), {"y": np.arange(4.0)}, np.ones(4, bool), period_doublings=[2]
    )
    (ax,) = fig.axes
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ["y", "stable", "period doubling (PD)"]
    assert [a.get_text() for a in ax.texts] == ["PD"]


def test_a_hybrid_branch_round_trips_through_a_file(branch, tmp_path):
    from helpers import assert_same_result

    hx.save(tmp_path / "branch.npz", branch)
    again = hx.load(tmp_path / "branch.npz")
    assert type(again) is hx.Branch
    assert_same_result(branch, again)
    assert [f.parameter for f in again.folds] == [f.parameter for f in branch.folds]


def test_a_hybrid_branch_is_a_pytree_of_stacked_arrays(branch, tmp_path):
    import dataclasses

    import jax

    leaves = {id(leaf) for leaf in jax.tree.leaves(branch)}
    per_point = [
        getattr(branch, field.name)
        for field in dataclasses.fields(branch)
        if not field.metadata.get("static")
        and field.name not in ("special_points", "result")
    ]
    # The named quantities are dicts of per-point arrays: the hopper's impact
    # reports T_c, T_a and its impulse; it declares no clearance.
    assert set(branch.observables) >= {"T_c", "T_a"} and branch.phase_observables == {}
    arrays = [
        array
        for value in per_point
        for array in (value.values() if isinstance(value, dict) else [value])
    ]
    assert len(per_point) == 18
    assert all(np.shape(array)[0] == branch.n_points for array in arrays)
    assert all(id(array) in leaves for array in arrays)
    assert all(id(point.u) in leaves for point in branch.special_points)
    # Picking points picks them in every named quantity too.
    some = branch.select(np.array([0, 2]))
    np.testing.assert_array_equal(
        some.observables["T_c"], branch.observables["T_c"][[0, 2]]
    )
    # And an archive keeps them bit for bit.
    loaded = hx.load(hx.save(tmp_path / "branch.npz", branch))
    assert set(loaded.observables) == set(branch.observables)
    for name, values in branch.observables.items():
        np.testing.assert_array_equal(loaded.observables[name], values)
