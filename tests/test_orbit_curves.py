"""Two-parameter curves of periodic orbits' bifurcations (`hx.continue_orbit_curve`)
against one-parameter continuations at fixed values of the second parameter: the
compass gait's period-doubling curve over (slope, hip mass), and the hopper's fold
curve over (D_G, mu) through its cusp, against the closed-form reference. Slow:
the corrector differentiates the cycle twice in forward mode (one to two minutes of
compilation each on 2 cores)."""

import json

import numpy as np
import pytest

import hybrax as hx
from hybrax._cli import main
from hybrax._registry import get_model


def _model(name, **values):
    model = get_model(name)
    params = hx.canonical_params(model.make_params(**values))
    form = model.forms[model.default_form]
    return model, form.system(), form.section(), params


@pytest.mark.slow
def test_compass_gait_period_doubling_curve_matches_fixed_mass_branches():
    """The compass gait's period doubling in the slope at m_H = 10 followed in
    m_H up to 11: at the curve's end, a one-parameter branch in the slope at that
    m_H period-doubles at the curve's slope (to 1e-6 deg), and at its middle the
    orbit's Floquet analysis (the AD monodromy) has a multiplier -1."""
    model, system, section, params = _model("compass-gait")
    slope, mass = model.parameter("slope_deg"), model.parameter("m_H")

    def doubling_at(p):
        branch = hx.continue_orbits(
            system,
            section,
            model.orbit_guess(p),
            p,
            slope,
            start=3.0,
            stop=5.5,
            continuation_settings=hx.ContinuationSettings(max_period=5.0),
        )
        (point,) = branch.period_doublings
        return point

    start = doubling_at(params)
    curve = hx.continue_orbit_curve(
        system, section, start, params, slope, mass, stop=11.0
    )
    assert curve.succeeded and curve.parameter_names == ("slope_deg", "m_H")
    assert curve.mu[-1] == pytest.approx(11.0) and curve.branch.n_points >= 3
    at_end = doubling_at(mass.set(params, curve.mu[-1]))
    np.testing.assert_allclose(at_end.parameter, curve.lam[-1], atol=1e-6)
    middle = curve.branch.n_points // 2
    p = slope.set(mass.set(params, curve.mu[middle]), curve.lam[middle])
    orbit = hx.find_periodic_orbit(system, section, curve.u[middle], p)
    assert bool(orbit.succeeded)
    np.testing.assert_allclose(
        np.min(np.abs(orbit.floquet.multipliers_ad + 1.0)), 0.0, atol=1e-7
    )


def _reference_cusp():
    """The hopper's cusp by the closed-form reference alone: on the branch
    parametrised by the lift-off speed v, D_G(v) (the root of P(v; D_G) = v by
    brentq) has a fold wherever dD_G/dv = 0; the folds of a pair meet where the
    largest slope between them, found by minimize_scalar on Richardson central
    differences, reaches 0, a root in mu found by brentq."""
    from scipy.optimize import brentq, minimize_scalar

    import reference_hopper as ref

    def d_g(v, mu):
        base = ref.HopperParams(mu=mu)
        return brentq(
            lambda D: ref.return_map(v, base.with_D_G(D)) - v,
            -0.03,
            -0.001,
            xtol=1e-16,
            rtol=1e-15,
        )

    def slope(v, mu, h=2e-3):
        def central(step):
            return (d_g(v + step, mu) - d_g(v - step, mu)) / (2 * step)

        return (4 * central(h / 2) - central(h)) / 3

    def steepest(mu):
        found = minimize_scalar(
            lambda v: -slope(v, mu),
            bounds=(0.6, 1.0),
            method="bounded",
            options=dict(xatol=1e-8),
        )
        return -found.fun, found.x

    mu = brentq(lambda m: steepest(m)[0], 0.91, 0.95, xtol=1e-12)
    return mu, d_g(steepest(mu)[1], mu)


def _reference(mu, d_g):
    import reference_hopper as ref

    return ref, ref.HopperParams(mu=mu).with_D_G(float(d_g))


def _check_fold_on_the_boundary(point):
    """At a curve's point where a fold meets the force-reversal boundary, the
    closed-form reference's lift-off speed v = u[1] is a fixed point of its
    return map P with P'(v) = 1 (Richardson central differences) and a
    touchdown force of 0."""
    ref, p = _reference(point.parameter, point.u[-1])
    v = float(point.u[1])
    hop = ref.one_hop(ref.section_state(v, p), p)
    np.testing.assert_allclose(hop["x_liftoff"][2], v, atol=1e-9)

    def slope(h):
        return (ref.return_map(v + h, p) - ref.return_map(v - h, p)) / (2 * h)

    np.testing.assert_allclose((4 * slope(5e-4) - slope(1e-3)) / 3, 1.0, atol=1e-6)
    np.testing.assert_allclose(hop["lambda_touchdown"], 0.0, atol=1e-6)


def _hopper_branch_and_curve(params, start, point_of, stop2):
    """The hopper's branch in D_G from `start` to -0.04 at `params`, and the
    curve in mu towards `stop2` of the point `point_of(branch)`."""
    model, system, section, _ = _model("hopper")
    d_g, mu = model.parameter("D_G"), model.parameter("mu")
    branch = hx.continue_orbits(
        system,
        section,
        hx.models.hopper.orbit_guess(params, 0.3),
        params,
        d_g,
        start=start,
        stop=-0.04,
        continuation_settings=hx.ContinuationSettings(
            parameter_scale=0.01, max_step=0.1
        ),
    )
    if stop2 is None:
        return branch, None
    curve = hx.continue_orbit_curve(
        system,
        section,
        point_of(branch),
        params,
        d_g,
        mu,
        stop=stop2,
        continuation_settings=hx.ContinuationSettings(
            parameter_scale=0.1, max_points=300
        ),
    )
    return branch, curve


@pytest.mark.slow
def test_hopper_force_reversal_curve_joins_two_reversals_at_a_fold():
    """The boundary where the hopper's ground force right after touchdown
    changes sign, followed in mu from the branch's first force reversal (mu =
    0.8, D_G ~ -0.0320): it meets the fold curve at mu ~ 0.887 and comes back
    down to the branch's second force reversal (D_G ~ -0.0244, to 1e-8). Along
    it, the (v, D_G) where the closed-form reference hops periodically with no
    touchdown force (scipy's root at the point's mu) equals the curve's to 1e-9
    in D_G; at the fold met, the reference's orbit has P'(v) = 1 and no
    touchdown force."""
    from scipy.optimize import root

    _, _, _, params = _model("hopper", D_G=-0.001, mu=0.8)
    branch, curve = _hopper_branch_and_curve(
        params, -0.001, lambda b: b.force_reversals[0], 0.9
    )
    first, second = branch.force_reversals[:2]
    assert first.event == second.event == 0
    assert curve.kind == "force_reversal"
    assert curve.result == hx.RESULTS.reached_bound
    np.testing.assert_allclose(curve.mu[-1], 0.8, atol=1e-12)
    np.testing.assert_allclose(curve.lam[-1], second.parameter, atol=1e-8)
    for j in np.linspace(1, curve.branch.n_points - 2, 6).astype(int):
        ref, _ = _reference(curve.mu[j], curve.lam[j])

        def periodic_without_force(z, j=j):
            # (v, D_G) of a periodic hop whose touchdown force is 0.
            _, p = _reference(curve.mu[j], z[1])
            hop = ref.one_hop(ref.section_state(z[0], p), p)
            force = hop["lambda_touchdown"] / (p.m * p.g)
            return [hop["x_liftoff"][2] - z[0], force]

        found = root(periodic_without_force, [curve.u[j, 1], curve.lam[j]], tol=1e-14)
        # hybr stops "not making good progress" once at rounding: the
        # residual says whether it is a root.
        assert np.max(np.abs(found.fun)) < 1e-12
        np.testing.assert_allclose(curve.lam[j], found.x[1], atol=1e-9)
        np.testing.assert_allclose(curve.u[j, 1], found.x[0], atol=1e-8)
    (fold,) = curve.special_points
    assert fold.kind == "fold" and fold.located
    _check_fold_on_the_boundary(fold)


@pytest.mark.slow
def test_hopper_fold_curve_turns_at_a_cusp_into_the_other_fold():
    """The hopper's first fold in D_G (mu = 0.8, D_G ~ -0.0354) followed in mu:
    the hysteresis between the branch's first two folds closes at a cusp, where
    the curve reverses in the (mu, D_G) plane and comes back down as the second
    fold. The cusp equals the closed-form reference's meeting of the two folds
    (to 1e-7 in mu, 1e-9 in D_G); back at mu = 0.8 the curve ends on the
    branch's second fold (D_G ~ -0.0237, to 1e-8), and near mu = 0.88 on either
    side it passes through the first and second folds of the branch there."""
    model, _, _, params = _model("hopper", D_G=-0.005, mu=0.8)
    mu = model.parameter("mu")

    def folds(p):
        return _hopper_branch_and_curve(p, -0.005, None, None)[0].folds[:2]

    branch, curve = _hopper_branch_and_curve(params, -0.005, lambda b: b.folds[0], 0.95)
    second = branch.folds[1]
    assert curve.result == hx.RESULTS.reached_bound
    np.testing.assert_allclose(curve.mu[-1], 0.8, atol=1e-12)
    np.testing.assert_allclose(curve.lam[-1], second.parameter, atol=1e-8)
    # Met on the way: the cusp, then, on the second fold, where the fold's
    # orbit starts its ground phase with no contact force (the fold curve meets
    # the boundary that the force reversals trace).
    cusp, boundary = curve.special_points
    assert boundary.kind == "force_reversal" and boundary.event == 0
    assert boundary.located and cusp.kind == "cusp" and cusp.located
    _check_fold_on_the_boundary(boundary)
    mu_cusp, d_g_cusp = _reference_cusp()
    np.testing.assert_allclose(cusp.parameter, mu_cusp, atol=1e-7)
    np.testing.assert_allclose(cusp.u[-1], d_g_cusp, atol=1e-9)
    assert np.max(curve.mu) == pytest.approx(cusp.parameter, abs=1e-3)
    # On the way up and down: the one-parameter branch at the mu of a curve
    # point on either side of the cusp folds at that point's D_G.
    for side, fold_index in ((slice(0, cusp.index), 0), (slice(cusp.index, None), 1)):
        j = side.start + np.argmin(np.abs(curve.mu[side] - 0.88))
        at_mu = folds(mu.set(params, curve.mu[j]))[fold_index]
        np.testing.assert_allclose(at_mu.parameter, curve.lam[j], atol=1e-8)


@pytest.mark.slow
def test_curve_command_and_its_curve_on_the_sweep_map(tmp_path, capsys):
    """`hybrax continue compass-gait --curve period-doubling --param2 m_H`
    writes the curve (JSON and figure); `hybrax sweep --curves` draws it over
    the heat map of the same two parameters."""
    curve_json = tmp_path / "curve.json"
    code = main(
        [
            "continue",
            "compass-gait",
            "--start",
            "4.2",
            "--stop",
            "4.6",
            "--curve",
            "period-doubling",
            "--param2",
            "m_H",
            "--stop2",
            "10.5",
            "--curve-points",
            "5",
            "--out",
            str(tmp_path / "continue"),
            "--json",
            str(curve_json),
        ]
    )
    assert code == 0
    data = json.loads(curve_json.read_text())
    curve = data["curve"]
    assert curve["kind"] == "period_doubling" and curve["parameters"] == [
        "slope_deg",
        "m_H",
    ]
    assert curve["m_H"][0] == pytest.approx(10.0) and len(curve["slope_deg"]) >= 2
    # The curve stops on its point budget short of m_H = 10.5: it says so with
    # how far it got, on the last line and in the JSON's top-level status (the
    # branch reached its bound: its own status is kept beside).
    last = curve["m_H"][-1]
    message = (
        f"reached max_points = 5 at m_H = {last:.8g}, {(last - 10) / 0.5:.0%} of "
        "the way from 10 to 10.5"
    )
    assert curve["status"] == data["status"] == "max_points_reached"
    assert curve["message"] == data["message"] == message
    assert data["branch_status"] == "reached_bound" and data["ended_in"] == "curve"
    end = (
        "ended: the period-doubling curve used up its point budget "
        f"(--curve-points 5): {message}"
    )
    assert data["end"] == end
    assert capsys.readouterr().out.strip().splitlines()[-1] == end
    assert (tmp_path / "continue" / "curve.png").stat().st_size > 0
    code = main(
        [
            "sweep",
            "compass-gait",
            "--grid",
            "slope_deg=4.2:4.6:3",
            "--grid",
            "m_H=10:10.5:2",
            "--curves",
            str(curve_json),
            "--out",
            str(tmp_path / "sweep"),
        ]
    )
    assert code == 0
    assert (tmp_path / "sweep" / "sweep_heatmap.png").stat().st_size > 0
    capsys.readouterr()


def test_curve_options_are_checked_before_computing(tmp_path, capsys):
    """--curve without --param2/--stop2, a --curves file without a curve, and a
    curve over other parameters than the grid's: exit 2 with one line, before
    any orbit is sought."""
    wrong = tmp_path / "wrong.json"
    wrong.write_text(
        json.dumps(
            {"curve": {"kind": "fold", "parameters": ["a", "b"], "a": [], "b": []}}
        )
    )
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    cases = [
        (["continue", "compass-gait", "--curve", "fold"], "together"),
        (
            ["sweep", "compass-gait", "--curves", str(empty)],
            "holds no `hybrax continue --curve` result",
        ),
        (["sweep", "compass-gait", "--curves", str(wrong)], "is a curve over a and b"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as exit_:
            main([*argv, "--out", str(tmp_path)])
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


def test_orbit_curve_argument_errors():
    """A point of a kind that has no curve, or a force reversal without its
    event, is a ValueError naming `point`, before anything compiles."""
    model, system, section, params = _model("hopper")

    def point(kind, event=None):
        return hx.SpecialPoint(
            kind=kind,
            index=0,
            parameter=-0.03,
            u=np.array([1.0, 1.0]),
            multipliers=None,
            multiplier_matrix=None,
            test_value=0.0,
            located=True,
            event=event,
        )

    for bad, message in (
        (point("cusp"), "`point` must be"),
        (point("force_reversal"), "`point` is a force reversal without"),
    ):
        with pytest.raises(ValueError, match=message):
            hx.continue_orbit_curve(system, section, bad, params, "d_G", "mu", stop=0.9)
