"""Basins of attraction (`hx.basin`, `hybrax basin`): the classes of the batched
run against individual simulations of the same starts, the orbit in its own
basin, falls beyond the fall boundary, a period-2 gait against shooting on the
twice-iterated map, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax._cli import main
from hybrax.models import simplest_walker as sw


N_CYCLES = 12


# Garcia et al. (1998): the long-period gait at slope 0.009 starts its step at
# (theta, theta_dot) = (0.20031090049483, -0.19983247291764).
GARCIA_GAIT = np.array([0.20031090049483, -0.19983247291764])


@pytest.fixture(scope="module")
def walker():
    system = sw.simplest_walker()[0]
    section = sw.section()
    params = hx.canonical_params(sw.SimplestWalkerParams(slope=0.009))
    return system, section, params, GARCIA_GAIT


@pytest.mark.slow
def test_basin_classes_agree_with_single_simulations(walker):
    """A 4 x 4 grid over (theta, theta_dot) at heel strike with the orbit's own
    point: every start's class and last section point equal those of its own
    `hx.simulate` run through the general event loop (12 heel strikes); the
    orbit's point (Garcia et al.'s published start) is in its basin; a walker
    far too slow (theta_dot = -0.05 at
    theta = 0.3: it falls back) and one far too fast fall."""
    system, section, params, orbit = walker
    theta = np.linspace(0.15, 0.25, 4)
    theta_dot = np.linspace(-0.25, -0.15, 4)
    grid = np.stack(np.meshgrid(theta, theta_dot, indexing="ij"), -1)
    extra = np.array([orbit, [0.3, -0.05], [0.1, -0.35]])
    starts = np.concatenate([grid.reshape(-1, 2), extra])
    basin = hx.basin(system, section, starts, params, orbit=orbit, n_cycles=N_CYCLES)
    assert basin.outcome.shape == (19,) and basin.final.shape == (19, 2)

    # The orbit's point, and the two falls.
    assert basin.outcome_names()[16] == "orbit"
    assert list(basin.outcome_names()[17:]) == ["falls", "falls"]
    assert hx.status_name(basin.result)[17:] == ["terminal_event"] * 2

    def one(u):
        solution = hx.simulate(
            system,
            section.chart(u, params),
            params,
            n_events=N_CYCLES,
            settings=hx.Settings(t_max=50.0 * N_CYCLES),
            phase_observables=False,
        )
        return section.coordinates(solution.x_after[-1], params), solution.result

    finals, results = jax.vmap(one)(jnp.asarray(starts))
    names = hx.status_name(results)
    for i in range(len(starts)):
        if names[i] == "terminal_event":
            assert basin.outcome_names()[i] == "falls", i
        elif names[i] == "successful":
            np.testing.assert_allclose(basin.final[i], finals[i], atol=1e-9)
            reached = np.max(np.abs(finals[i] - orbit)) <= basin.tolerance
            assert (basin.outcome_names()[i] == "orbit") == reached, i
        else:
            assert basin.outcome_names()[i] == "failed", i
    # The grid has both fates (the test sees both branches).
    assert {"orbit", "falls"} <= set(basin.outcome_names())
    counts = basin.counts()
    assert sum(counts.values()) == 19 and counts["orbit"] >= 2


@pytest.mark.slow
def test_basin_finds_the_period_two_gait(walker):
    """At slope 0.017 the long-period gait has period-doubled (Garcia et al.
    1998): a start near the unstable period-1 gait settles on a period-2 gait,
    and its last two section points are the fixed points of the twice-iterated
    step map that shooting finds from another guess."""
    system, section, _, _ = walker
    params = hx.canonical_params(sw.SimplestWalkerParams(slope=0.017))
    period_1 = hx.find_periodic_orbit(
        system, section, sw.orbit_guess(params), params, analyse=False
    )
    assert float(period_1.spectral_radius) > 1
    start = np.asarray(period_1.u) + np.array([0.001, 0.0])
    basin = hx.basin(system, section, start[None], params, orbit=period_1, n_cycles=60)
    assert basin.outcome_names().tolist() == ["periodic"]
    assert basin.period.tolist() == [2]
    doubled = hx.find_periodic_orbit(
        system,
        hx.period_doubled_section(section),
        np.asarray(period_1.u) + np.array([0.006, -0.004]),
        params,
        analyse=False,
    )
    assert bool(doubled.succeeded)
    last_two = np.asarray(
        hx.poincare_map(system, section, jnp.asarray(basin.final[0]), params)[0]
    )
    points = np.stack([basin.final[0], last_two])
    gap = np.min(np.max(np.abs(points - np.asarray(doubled.u)), axis=-1))
    assert gap < 1e-6


def test_basin_bad_input_is_a_value_error(walker):
    system, section, params, orbit = walker
    good = orbit[None]
    cases = [
        (dict(starts=orbit), "starts"),
        (dict(starts=np.ones((2, 3))), "starts"),
        (dict(starts=np.array([[np.nan, 0.0]])), "starts"),
        (dict(starts=good, n_cycles=0), "n_cycles"),
        (dict(starts=good, n_cycles=5, max_period=5), "max_period"),
        (dict(starts=good, tolerance=-1.0), "tolerance"),
        (dict(starts=good, orbit=np.zeros(3)), "orbit"),
        (dict(starts=good, chunk_size=0), "`chunk_size` must be positive"),
        (dict(starts=good, chunk_size=2.5), "`chunk_size` must be an integer"),
    ]
    for kwargs, name in cases:
        starts = kwargs.pop("starts")
        with pytest.raises(ValueError, match=name):
            hx.basin(system, section, starts, params, **kwargs)


def test_basin_command_refuses_bad_grids_before_computing(capsys, tmp_path):
    """A name that is not a section coordinate, a coordinate given twice, or
    --max-period not below --steps: one line and exit 2, before any orbit is
    sought."""
    cases = [
        (["--grid", "phi=0:1:3"], "unknown section coordinate 'phi'"),
        (["--grid", "theta=0:1:2", "--grid", "theta=0:1:2"], "given twice"),
        (["--steps", "4", "--max-period", "4"], "--max-period"),
    ]
    for extra, message in cases:
        with pytest.raises(SystemExit) as exit_:
            main(["basin", "simplest-walker", "--out", str(tmp_path), *extra])
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.slow
def test_basin_command_writes_its_table_and_map(tmp_path, capsys):
    """`hybrax basin simplest-walker` on a 3 x 3 grid about the orbit: the
    table has a row per start, the centre reaches the orbit, and the map is
    written."""
    code = main(
        [
            "basin",
            "simplest-walker",
            "--grid",
            "theta=0.19:0.21:3",
            "--grid",
            "theta_dot=-0.21:-0.19:3",
            "--steps",
            "12",
            "--out",
            str(tmp_path),
            "--json",
            str(tmp_path / "basin.json"),
        ]
    )
    assert code == 0
    rows = (tmp_path / "basin.csv").read_text().splitlines()
    assert rows[0].startswith("theta,theta_dot,outcome,period,cycles,status")
    assert len(rows) == 10
    assert rows[5].split(",")[2] == "orbit"  # the centre, (0.2, -0.2)
    assert (tmp_path / "basin_map.png").stat().st_size > 0
    assert "starts in" in capsys.readouterr().out


def test_a_start_still_converging_near_the_orbit_is_in_its_basin():
    """The classification alone, on a linear map u -> u* + M (u - u*) with
    complex multipliers of modulus 0.59 and skewed eigenvectors: starts a few
    tolerances from u* after N steps are still converging, and the last step
    explains their deviation exactly (e_N = M (I - M)^-1 (u_{N-1} - u_N)), so
    they are in the orbit's basin; a fixed point elsewhere and a 2-cycle are
    other periodic orbits."""
    from hybrax._basin import BASIN_OUTCOMES, _classify

    c, s = np.cos(2.1), np.sin(2.1)
    rotation = 0.59 * np.array([[c, -s], [s, c]])
    skew = np.array([[1.0, 0.95], [0.0, 0.3]])
    jacobian = skew @ rotation @ np.linalg.inv(skew)
    u_star = np.array([0.2, -0.2])
    tolerance = 1e-4
    windows = []
    for e0 in ([2e-2, 1e-2], [-1.5e-2, 3e-2], [3e-2, 3e-2]):
        e = [np.asarray(e0)]
        for _ in range(8):
            e.append(jacobian @ e[-1])
        windows.append(u_star + np.stack(e[-9:]))
    windows.append(np.tile([0.3, -0.1], (9, 1)))  # another fixed point
    windows.append(np.array([[0.3, -0.1], [0.25, -0.15]] * 4 + [[0.3, -0.1]]))
    window = np.stack(windows)
    assert np.all(np.max(np.abs(window[:3, -1] - u_star), axis=-1) > tolerance)
    codes = np.full(len(window), hx.status_code(hx.RESULTS.successful))
    outcome, period, _ = _classify(window, codes, u_star, jacobian, tolerance)
    names = [BASIN_OUTCOMES[o] for o in outcome]
    assert names == ["orbit"] * 3 + ["periodic"] * 2
    assert period.tolist() == [1, 1, 1, 1, 2]


@pytest.mark.slow
def test_starts_that_approach_the_gait_slowly_are_in_its_basin(walker):
    """Fifteen starts of the simplest walker's 1000 x 1000 basin (theta in
    [0.1, 0.3], theta_dot in [-0.35, -0.05], 20 cycles) that a rule bounding
    the distance by the spectral radius alone classified as other orbits of
    period 1 to 4, 1e-4 to 5.5e-4 from the gait: they are in its basin, and
    run for 60 cycles each is within the tolerance of the gait outright."""
    system, section, params, guess = walker
    orbit = hx.find_periodic_orbit(system, section, guess, params)
    assert bool(orbit.succeeded) and float(orbit.spectral_radius) < 1
    starts = np.array(
        [
            [0.18788789, -0.19534535],
            [0.1954955, -0.20285285],
            [0.1986987, -0.20495495],
            [0.20670671, -0.20285285],
            [0.20910911, -0.21696697],
            [0.20930931, -0.21996997],
            [0.21011011, -0.22207207],
            [0.22512513, -0.22417417],
            [0.22792793, -0.23768769],
            [0.23253253, -0.24429429],
            [0.24214214, -0.2545045],
            [0.26516517, -0.26201201],
            [0.26576577, -0.26261261],
            [0.26856857, -0.28543544],
            [0.28038038, -0.27672673],
        ]
    )
    basin = hx.basin(system, section, starts, params, orbit=orbit, n_cycles=20)
    assert basin.outcome_names().tolist() == ["orbit"] * 15
    longer = hx.basin(system, section, starts, params, orbit=orbit, n_cycles=60)
    assert np.all(longer.distance <= 1e-4)
