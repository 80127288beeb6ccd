"""`hybrax.continue_to_params`: orbits followed along a straight path in parameter
space, checked against the SciPy reference `reference_hopper.periodic_orbit` (a
scan of the hopper's 1-D return map refined by Brent's method, all its fixed
points), which imports neither JAX nor hybrax."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from helpers import ORACLE_TOL
from hybrax.models import hopper
from reference_hopper import (
    HopperParams as ReferenceParams,
    contact_multiplier,
    periodic_orbit,
    return_map,
)


def _damping_scale(p):
    return 2 * jnp.sqrt(p.k * p.m)


D_G = hx.FieldParameter("d_G", _damping_scale, name="D_G")
SYSTEM = hopper.minimal()[0]
SECTION = hopper.section("minimal")
DEFAULTS = hx.canonical_params(hopper.HopperParams())


def _at(mu, damping):
    """The hopper's parameters at mass ratio `mu` and D_G = `damping`."""
    base = hopper.HopperParams()
    scale = float(_damping_scale(base))
    return eqx.tree_at(lambda p: (p.mu, p.d_G), base, (mu, damping * scale))


def _check_against_reference(params, speed: float):
    """`speed` is the lift-off speed of one of the SciPy reference's periodic hops
    at `params`: its return map's defect there is below 1e-8 (relative to the
    speed: the high hops lift off at up to 10 m/s), and its nearest fixed point
    within the root's conditioning (near a fold, where the multiplier nears 1,
    a defect of 1e-10 moves the root by 1e-8)."""
    reference_params = ReferenceParams(mu=float(params.mu), d_G=float(params.d_G))
    scale = max(1.0, speed)
    assert abs(return_map(speed, reference_params) - speed) < ORACLE_TOL * scale
    reference = periodic_orbit(
        reference_params,
        v_bounds=(max(0.02, speed - 0.5), speed + 0.5),
        n_scan=60,
    )
    speeds = np.array([v for v, _ in reference["fixed_points"]])
    assert np.min(np.abs(speeds - speed)) < 1e-6 * scale


def test_paths_between_different_structures_are_refused():
    with pytest.raises(ValueError, match="one structure"):
        hx.StraightPath(DEFAULTS, {"mu": 0.8})
    with pytest.raises(ValueError, match="not a float"):
        hx.StraightPath({"a": 1.0, "n": 2}, {"a": 2.0, "n": 3})
    path = hx.StraightPath({"a": 1.0, "b": -1.0}, {"a": 3.0, "b": 1.0})
    middle = path.set(None, 0.25)
    assert (float(middle["a"]), float(middle["b"])) == (1.5, -0.5)
    assert float(path.get(middle)) == pytest.approx(0.25, abs=1e-15)


@pytest.mark.slow
def test_random_parameter_sets_inside_the_existence_region():
    """200 random (mu, D_G) inside the hopper's existence region, bounded at each
    of five mass ratios by the lowest D_G its continuation reaches (the family of
    high hops ends there after a cascade of folds): every one gets an orbit from
    the model's guess, with the homotopy from the defaults where the guess fails,
    and it is one of the reference's fixed points to 1e-8."""
    rng = np.random.default_rng(7)
    mus = np.linspace(0.76, 0.92, 5)
    points = []
    for mu in mus:
        start = hx.canonical_params(_at(mu, -0.005))
        orbit = hx.find_periodic_orbit(
            SYSTEM, SECTION, hopper.orbit_guess(start), start
        )
        assert bool(orbit.succeeded), orbit.describe_failure()
        branch = hx.continue_orbits(
            SYSTEM,
            SECTION,
            orbit.u,
            start,
            D_G,
            start=-0.005,
            stop=-0.12,
            continuation_settings=hx.ContinuationSettings(
                parameter_scale=0.01, max_step=0.1, max_points=400
            ),
        )
        lowest = float(branch.parameter.min())
        assert branch.folds and lowest < -0.02
        # Inside: a margin of 5% from the family's end and from D_G = 0, where
        # the hopper is conservative (a continuum of hops, no isolated orbit).
        for damping in rng.uniform(0.95 * lowest, -0.002, 40):
            points.append((mu, damping))
    points = np.array(points)
    batch = _at(points[:, 0], points[:, 1])
    sweep = hx.sweep_orbits(
        SYSTEM,
        SECTION,
        hopper.orbit_guess,
        batch,
        sweep_settings=hx.SweepSettings(neighbours=0),
    )

    # An orbit whose ground would pull right after touchdown is an orbit (values
    # kept) that the model's boundary rules out: the reference's contact
    # multiplier after the impact says which.
    def pulls(orbit, mu, damping):
        after = np.asarray(orbit.cycle.x_after)[..., 0, :]
        params = _at(mu, damping)
        reference = ReferenceParams(mu=float(mu), d_G=float(params.d_G))
        return contact_multiplier(after, reference) > 1e-9 * params.m * params.g

    names = sweep.status_names
    converged = np.isin(names, ["successful", "inadmissible_orbit"])
    for n in np.flatnonzero(converged):
        element = jax.tree_util.tree_map(lambda leaf: leaf[n], sweep.orbit)
        expected = "inadmissible_orbit" if pulls(element, *points[n]) else "successful"
        assert names[n] == expected, points[n]
    speeds = np.asarray(sweep.orbit.state)[:, 2]
    start = hx.find_periodic_orbit(
        SYSTEM, SECTION, hopper.orbit_guess(DEFAULTS), DEFAULTS
    )
    followed = 0
    for n in np.flatnonzero(~converged):
        params = hx.canonical_params(_at(*points[n]))
        homotopy = hx.continue_to_params(SYSTEM, SECTION, start.u, DEFAULTS, params)
        assert homotopy.reached, (points[n], homotopy.message)
        expected = (
            "inadmissible_orbit"
            if pulls(homotopy.orbit, *points[n])
            else ("successful")
        )
        assert hx.status_name(homotopy.orbit.result) == [expected], points[n]
        speeds[n] = float(homotopy.orbit.state[2])
        followed += 1
    # The guess alone does not do: the homotopy was needed somewhere.
    assert 0 < followed < len(points)
    for (mu, damping), speed in zip(points, speeds):
        _check_against_reference(_at(mu, damping), speed)


@pytest.mark.slow
def test_a_family_that_ends_says_where():
    """Towards D_G = 0 the hopper's ground feeds ever less energy in: the family
    from the defaults ends before a path to D_G > 0 does (no orbit exists at
    D_G >= 0). The result says so with the parameters where it ended, no orbit
    is reported, and the family's orbit half-way along the path is one of the
    reference's."""
    target = hx.canonical_params(_at(0.8, 0.01))
    start = hx.find_periodic_orbit(
        SYSTEM, SECTION, hopper.orbit_guess(DEFAULTS), DEFAULTS
    )
    homotopy = hx.continue_to_params(SYSTEM, SECTION, start.u, DEFAULTS, target)
    assert not homotopy.reached and homotopy.orbit is None
    assert hx.status_name(homotopy.result)[0] in ("fold_reached", "min_step_reached")
    assert not homotopy.succeeded
    assert 0 < homotopy.end < 1
    end = homotopy.path.set(None, homotopy.end)
    assert float(end.d_G) < 0  # it ends where the damping still feeds energy
    assert "d_G = " in homotopy.message and "mu" not in homotopy.message
    half = int(np.argmin(np.abs(homotopy.branch.parameter - 0.5)))
    params = homotopy.path.set(None, float(homotopy.branch.parameter[half]))
    _check_against_reference(params, float(homotopy.branch.state[half, 2]))


def test_a_known_orbit_needs_its_parameters_too():
    guess = hopper.orbit_guess(DEFAULTS)
    with pytest.raises(ValueError, match="known_guess"):
        hx.find_periodic_orbit_or_follow(
            SYSTEM, SECTION, guess, DEFAULTS, known_guess=guess
        )


@pytest.mark.slow
def test_an_orbit_the_guess_misses_is_followed_from_a_known_one():
    """At mu = 0.709898, D_G = -0.032999 shooting from the model's guess stalls;
    `hx.find_periodic_orbit_or_follow` from the defaults' orbit follows the family
    through two folds to one of the SciPy reference's periodic hops (the route
    `hybrax orbit hopper` takes), and says so: route "homotopy". At the
    defaults the guess is enough (route "guess", no homotopy)."""
    params = hx.canonical_params(_at(0.709898, -0.032999))
    guess = hopper.orbit_guess(params)
    alone = hx.find_periodic_orbit(SYSTEM, SECTION, guess, params)
    assert not bool(alone.succeeded)
    search = hx.find_periodic_orbit_or_follow(
        SYSTEM,
        SECTION,
        guess,
        params,
        known_guess=hopper.orbit_guess(DEFAULTS),
        known_params=DEFAULTS,
    )
    assert search.route == "homotopy" and search.known
    assert search.homotopy.reached and bool(search.orbit.succeeded)
    assert len(search.homotopy.branch.folds) == 2
    _check_against_reference(params, float(search.orbit.state[2]))
    at_defaults = hx.find_periodic_orbit_or_follow(
        SYSTEM,
        SECTION,
        hopper.orbit_guess(DEFAULTS),
        DEFAULTS,
        known_guess=hopper.orbit_guess(DEFAULTS),
        known_params=DEFAULTS,
    )
    assert at_defaults.route == "guess" and at_defaults.homotopy is None
