"""Basins of attraction (`hx.basin`, `hybrax basin`): the classes of the batched
run against individual simulations of the same starts, the orbit in its own
basin, falls beyond the fall boundary, a period-2 gait against shooting on the
twice-iterated map, and bad input."""

import re

import equinox as eqx
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


def _interrupt_basin_after(monkeypatch, n_calls: int) -> None:
    """Ctrl-C (a KeyboardInterrupt) in the basin's compiled call after `n_calls`
    of them (each a slice of one chunk per core)."""
    import hybrax._basin
    import hybrax._sweep

    sweep = hybrax._sweep.sweep
    calls = []

    def interrupting(*args, **kwargs):
        if len(calls) == n_calls:
            raise KeyboardInterrupt
        calls.append(None)
        return sweep(*args, **kwargs)

    monkeypatch.setattr(hybrax._sweep, "sweep", interrupting)
    monkeypatch.setattr(hybrax._basin, "_SLICE_CHUNKS", 1)


def test_an_interrupted_basin_resumes_to_the_whole(walker, monkeypatch, tmp_path):
    """Ctrl-C keeps the slices of starts that finished: `hx.Interrupted`'s
    `partial` holds every start that stopped as the uninterrupted basin gives
    it, the others `not_run`; resumed (through `hx.save`/`hx.load`), it equals
    the uninterrupted basin. A resume of other starts, parameters, cycles,
    tolerance or model is a `ValueError` naming `resume` and the difference."""
    system, section, params, orbit = walker
    # The orbit, a start that falls at once, and two that walk on.
    starts = orbit + np.array([[0.0, 0.0], [0.3, 0.3], [0.002, 0.0], [0.0, -0.004]])
    options = dict(orbit=orbit, n_cycles=6, max_period=2, chunk_size=1)
    whole = hx.basin(system, section, starts, params, **options)
    _interrupt_basin_after(monkeypatch, 4)
    with pytest.raises(hx.Interrupted) as info:
        hx.basin(system, section, starts, params, **options)
    monkeypatch.undo()
    partial = hx.load(hx.save(tmp_path / "basin_partial.npz", info.value.partial))
    not_run = np.array(hx.status_name(partial.result)) == "not_run"
    assert 0 < not_run.sum() < 4, hx.status_name(partial.result)
    assert "still moving" in str(info.value)
    for name in ("outcome", "period", "cycles", "final"):
        np.testing.assert_array_equal(
            getattr(partial, name)[~not_run], getattr(whole, name)[~not_run]
        )
    assert partial.trail.shape == (4, 3, 2) and whole.trail is None
    resumed = hx.basin(system, section, starts, params, resume=partial, **options)
    for name in ("outcome", "period", "cycles", "final", "distance"):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(whole, name))
    assert hx.status_name(resumed.result) == hx.status_name(whole.result)
    assert resumed.trail is None
    other_params = hx.canonical_params(sw.SimplestWalkerParams(slope=0.0091))
    field = system.modes[0].vector_field
    # Another model: its swing twice as fast.
    other_system = eqx.tree_at(
        lambda s: s.modes[0].vector_field,
        system,
        lambda t, x, p: 2.0 * field(t, x, p),
    )
    cases = [
        (dict(starts=starts + 1e-3), "starts"),
        (dict(params=other_params), r"params\.slope \(0\.009 there, 0\.0091 here\)"),
        (dict(n_cycles=7), r"n_cycles \(6 there, 7 here\)"),
        (dict(tolerance=1e-5), "tolerance"),
        (dict(orbit=None), "orbit"),
        (dict(system=other_system), r"this call.s: system \(another value\)\. "),
        (dict(system=sw.simplest_walker()[0]), None),  # the same model: resumes
    ]
    for change, message in cases:
        call = dict(system=system, starts=starts, params=params, **options)
        call.update(change)
        system_, starts_, params_ = (
            call.pop(k) for k in ("system", "starts", "params")
        )
        if message is None:
            hx.basin(system_, section, starts_, params_, resume=partial, **call)
            continue
        with pytest.raises(
            ValueError, match="^`resume` is a basin of other.*" + message
        ):
            hx.basin(system_, section, starts_, params_, resume=partial, **call)


# Slow: 11 s cold (the command finds the orbit first, as
# `test_basin_command_writes_its_table_and_map`); the fast set keeps the
# library's interrupted basin and its refused resumes.
@pytest.mark.slow
def test_basin_command_keeps_its_finished_starts_on_ctrl_c(
    tmp_path, monkeypatch, capsys
):
    """Ctrl-C in `hybrax basin`: exit 130, one line naming `basin_partial.npz`
    and the table of the starts so far (the others `not_run`); `--resume` of it
    finishes the uninterrupted run's table, and a `--resume` with another grid
    of the same size or other --steps is one usage error and exit 2."""
    grid = ["--grid", "theta=0.199:0.201:2", "--grid", "theta_dot=-0.2:-0.19:2"]
    common = ["basin", "simplest-walker", "--steps", "4", "--max-period", "2"]
    common += ["--no-figures", "-q"]
    whole = tmp_path / "whole"
    assert main([*common, *grid, "--out", str(whole)]) == 0
    _interrupt_basin_after(monkeypatch, 2)
    folder = tmp_path / "partial"
    capsys.readouterr()
    assert main([*common, *grid, "--out", str(folder)]) == 130
    monkeypatch.undo()
    (line,) = capsys.readouterr().err.strip().splitlines()
    saved = folder / "basin_partial.npz"
    assert line.startswith("hybrax basin: interrupted with ")
    assert line.endswith(f"--resume {saved}")
    assert "not_run" in (folder / "basin.csv").read_text()
    for argv, message in [
        (
            ["--grid", "theta=0.198:0.201:2", "--grid", "theta_dot=-0.2:-0.19:2"],
            "starts",
        ),
        ([*grid, "--steps", "5"], r"n_cycles \(4 there, 5 here\)"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main([*common, *argv, "--out", str(folder), "--resume", str(saved)])
        assert exit_.value.code == 2
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"argument --resume: {str(saved)!r} is a basin of other" in error
        assert re.search(message, error), error
    assert main([*common, *grid, "--out", str(folder), "--resume", str(saved)]) == 0
    assert (folder / "basin.csv").read_text() == (whole / "basin.csv").read_text()
    assert not saved.exists()
