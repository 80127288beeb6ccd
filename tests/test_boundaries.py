"""Hybrid boundaries declared by a model, located on branches and followed in a
second parameter, against references independent of the continuation's
locator (Brent's method on the parameter):

- grazing: the five-link biped's swing foot, whose lowest height as it passes
  the stance foot (its declared `hybrax.Clearance`, `swing_clearance`) reaches
  zero as the swing knee's set point decreases; the clearance is also read off
  4001 samples of the foot's height (a parabola through the lowest interior
  local minimum);
- release reversal: the compass gait's trailing foot, whose normal velocity
  after heel strike (its impact's declared release velocity) changes sign as
  the leg's mass moves towards the foot.

Slow: each continuation's corrector and each curve's compile for about a
minute on 2 cores."""

import json

import jax
import numpy as np
import pytest
from scipy.optimize import brentq

import hybrax as hx
from hybrax._cli import main
from hybrax._registry import get_model
from hybrax.models.biped5 import forms


def _biped5():
    model = get_model("biped5")
    form = model.forms["minimal"]
    return model, form.system(), form.section()


_height = jax.jit(
    jax.vmap(lambda x, p: forms._swing_foot_height(0.0, x, p), in_axes=(0, None))
)


def _clearances(model, system, section, params, n_samples=4001):
    """`(sampled, declared)`: the swing foot's lowest interior height on the
    orbit at `params`, from a parabola through the three samples around the
    lowest local minimum of `n_samples`, and the declared clearance."""
    orbit = hx.find_periodic_orbit(
        system, section, model.orbit_guess(params), params, analyse=False
    )
    assert bool(orbit.succeeded)
    sol = hx.simulate(system, orbit.state, params, n_events=1, n_save=n_samples)
    t = np.asarray(sol.t_phase[0])
    h = np.asarray(_height(sol.x_phase[0], params))
    minima = [j for j in range(1, len(h) - 1) if h[j] < h[j - 1] and h[j] < h[j + 1]]
    i = min(minima, key=lambda j: h[j])
    a, b, c = np.polyfit(t[i - 1 : i + 2] - t[i], h[i - 1 : i + 2], 2)
    return c - b**2 / (4 * a), float(sol.phase_observables["swing_clearance"][0])


def _grazing_in_knee(model, system, section, params, low, high, which):
    """The knee set point where the clearance (`which` 0: sampled, 1:
    declared) is zero, by Brent's method."""
    knee = model.parameter("knee_swing_ref")

    def clearance(value):
        return _clearances(model, system, section, knee.set(params, value))[which]

    return brentq(clearance, low, high, xtol=1e-13)


@pytest.mark.slow
def test_biped5_grazing_on_the_knee_branch(tmp_path):
    """The branch in `knee_swing_ref` from 0.6 to 0.35 has one grazing, of
    `swing_clearance` in phase 0, at the parameter where Brent's method puts
    the declared clearance's zero (to 1e-9) and the sampled one's (to 1e-8: the
    declared clearance's grid error, 2e-10 to 5e-10 here); the clearance is
    positive and the orbits admissible above it, negative and not admissible
    below; the declared clearance equals the sampled one to 1e-9 at both ends.
    The command line reports the same point in its JSON."""
    model, system, section = _biped5()
    params = hx.canonical_params(model.make_params())
    knee = model.parameter("knee_swing_ref")
    branch = hx.continue_orbits(
        system, section, model.orbit_guess(params), params, knee, start=0.6, stop=0.35
    )
    assert branch.succeeded and branch.clearance_names == ("swing_clearance",)
    (grazing,) = branch.grazings
    assert grazing.located and grazing.event == 0
    assert grazing.observable == "swing_clearance"
    declared = _grazing_in_knee(model, system, section, params, 0.35, 0.6, 1)
    sampled = _grazing_in_knee(model, system, section, params, 0.35, 0.6, 0)
    np.testing.assert_allclose(grazing.parameter, declared, atol=1e-9)
    np.testing.assert_allclose(grazing.parameter, sampled, atol=1e-8)

    clearance = branch.phase_observables["swing_clearance"][:, 0]
    above = branch.parameter > grazing.parameter + 1e-6
    below = branch.parameter < grazing.parameter - 1e-6
    assert np.all(clearance[above] > 0) and np.all(clearance[below] < 0)
    assert np.all(branch.admissible[above]) and not np.any(branch.admissible[below])
    for value in (0.6, 0.35):
        sampled_value, declared_value = _clearances(
            model, system, section, knee.set(params, value)
        )
        np.testing.assert_allclose(declared_value, sampled_value, atol=1e-9)

    out = tmp_path / "continue.json"
    argv = ["continue", "biped5", "--param", "knee_swing_ref", "--start", "0.6"]
    argv += ["--stop", "0.35", "--no-figures", "--json", str(out)]
    assert main(argv) == 0
    (record,) = json.loads(out.read_text())["grazings"]
    assert record["clearance"] == "swing_clearance" and record["phase"] == 0
    np.testing.assert_allclose(record["knee_swing_ref"], declared, atol=1e-9)


@pytest.mark.slow
def test_biped5_grazing_curve_matches_fixed_hip_branches():
    """The grazing followed in `hip_swing_ref` from 0.5 to 0.56: at the curve's
    end, Brent's method in the knee set point at that hip set point finds the
    curve's knee set point (to 1e-9), and at its middle the sampled clearance
    of the orbit is zero (to 1e-9)."""
    model, system, section = _biped5()
    params = hx.canonical_params(model.make_params())
    knee, hip = model.parameter("knee_swing_ref"), model.parameter("hip_swing_ref")
    branch = hx.continue_orbits(
        system, section, model.orbit_guess(params), params, knee, start=0.6, stop=0.4
    )
    (grazing,) = branch.grazings
    curve = hx.continue_orbit_curve(
        system, section, grazing, params, knee, hip, stop=0.56
    )
    assert curve.succeeded and curve.kind == "grazing"
    assert curve.mu[-1] == pytest.approx(0.56) and curve.branch.n_points >= 3
    at_end = hip.set(params, curve.mu[-1])
    knee_at_end = _grazing_in_knee(model, system, section, at_end, 0.4, 0.6, 1)
    np.testing.assert_allclose(curve.lam[-1], knee_at_end, atol=1e-9)
    middle = curve.branch.n_points // 2
    p = knee.set(hip.set(params, curve.mu[middle]), curve.lam[middle])
    np.testing.assert_allclose(
        _clearances(model, system, section, p)[0], 0.0, atol=1e-9
    )


def test_grazing_curve_needs_a_clearance():
    """A grazing point whose clearance the system does not declare is refused
    before anything compiles, naming `point`."""
    model, system, section = _biped5()
    params = hx.canonical_params(model.make_params())
    point = hx.SpecialPoint(
        kind="grazing",
        index=0,
        parameter=0.42,
        u=np.zeros(9),
        multipliers=None,
        multiplier_matrix=None,
        test_value=0.0,
        located=True,
        event=0,
        observable="toe_clearance",
    )
    with pytest.raises(ValueError, match="`point`.*swing_clearance"):
        hx.continue_orbit_curve(
            system, section, point, params, "knee_swing_ref", "hip_swing_ref", stop=0.6
        )


@pytest.mark.slow
def test_biped5_clearance_gradient_matches_central_differences():
    """The swing foot's clearance over one step from a fixed start, as a
    function of the knee set point: `jax.grad` (reverse mode, the default
    adjoint) equals central differences (h = 1e-5) to 1e-7 relative."""
    model, system, section = _biped5()
    params = hx.canonical_params(model.make_params())
    knee = model.parameter("knee_swing_ref")
    orbit = hx.find_periodic_orbit(
        system, section, model.orbit_guess(params), params, analyse=False
    )
    state = orbit.state

    @jax.jit
    def clearance(value):
        sol = hx.simulate(system, state, knee.set(params, value), n_events=1)
        return sol.phase_observables["swing_clearance"][0]

    gradient = float(jax.grad(clearance)(0.6))
    h = 1e-5
    fd = (float(clearance(0.6 + h)) - float(clearance(0.6 - h))) / (2 * h)
    assert np.isfinite(gradient) and abs(gradient) > 1e-3
    np.testing.assert_allclose(gradient, fd, rtol=1e-7)


def _release_root(model, system, section, params, low, high):
    """Where the compass gait's trailing foot's normal velocity after heel
    strike (its declared release velocity) is zero, in `a`, by Brent's method
    on the orbits that `find_periodic_orbit` finds."""
    a = model.parameter("a")

    def release(value):
        p = a.set(params, value)
        orbit = hx.find_periodic_orbit(
            system, section, model.orbit_guess(p), p, analyse=False
        )
        velocity = float(orbit.cycle.observables["trailing_normal_velocity"][0])
        # Beyond the reversal the orbit is one of the equations that the model's
        # boundary rules out: its values kept, its status says so.
        expected = "successful" if velocity >= -1e-9 else "inadmissible_orbit"
        assert hx.status_name(orbit.result) == [expected], velocity
        return velocity

    return brentq(release, low, high, xtol=1e-13)


@pytest.mark.slow
def test_compass_gait_release_reversal_and_its_curve():
    """The compass gait with b = 0.2 followed in a from 0.8 to 1.0: its
    trailing foot's release velocity after heel strike (Font-Llagunes &
    Kövecses's lift-off condition) changes sign once, a `release_reversal` at
    the `a` where Brent's method puts the declared velocity's zero (to 1e-9);
    above it the orbits are not admissible. Followed in the hip mass to 11 kg,
    the boundary's end is Brent's zero at that mass (to 1e-9)."""
    model = get_model("compass-gait")
    form = model.forms[model.default_form]
    system, section = form.system(), form.section()
    params = hx.canonical_params(model.make_params(b=0.2))
    a, mass = model.parameter("a"), model.parameter("m_H")
    branch = hx.continue_orbits(
        system, section, model.orbit_guess(params), params, a, start=0.8, stop=1.0
    )
    assert branch.release_names == ("trailing_normal_velocity",)
    (point,) = branch.release_reversals
    assert point.located and point.event == 0
    assert point.observable == "trailing_normal_velocity"
    reference = _release_root(model, system, section, params, 0.8, 1.0)
    np.testing.assert_allclose(point.parameter, reference, atol=1e-9)
    velocity = branch.observables["trailing_normal_velocity"][:, 0]
    below = branch.parameter < point.parameter - 1e-6
    above = branch.parameter > point.parameter + 1e-6
    assert np.all(velocity[below] > 0) and np.all(velocity[above] < 0)
    assert np.all(branch.admissible[below]) and not np.any(branch.admissible[above])

    curve = hx.continue_orbit_curve(system, section, point, params, a, mass, stop=11.0)
    assert curve.succeeded and curve.kind == "release_reversal"
    assert curve.mu[-1] == pytest.approx(11.0) and curve.branch.n_points >= 3
    at_end = mass.set(params, curve.mu[-1])
    np.testing.assert_allclose(
        curve.lam[-1],
        _release_root(model, system, section, at_end, 0.8, 1.0),
        atol=1e-9,
    )
