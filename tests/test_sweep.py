"""`hybrax.sweep`, `hybrax.sweep_orbits` and `hybrax sweep hopper`.

One batch of six hopper parameter sets (valid ones, D_G = 0 and d_G > 0 where no
orbit exists, NaN parameters) is swept once, with the command's settings and shape,
so that the command-line test reuses its compilation. It is checked against a loop
of single `find_periodic_orbit` solves (from the same improved guess), and against
the same sweep sharded over four host devices in chunks of four, which runs in a
subprocess (XLA_FLAGS must be set before JAX starts) started at the beginning of
the module so that it compiles while this process does.
"""

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import re
import subprocess
import sys
import textwrap
import threading

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from matplotlib.collections import QuadMesh

import hybrax as hx
import hybrax._progress
import hybrax._sweep.executor
import hybrax._sweep.rounds
import hybrax.plot
from hybrax import models
from hybrax._cli import main
from hybrax._cli.sweep import _sweep_options
from hybrax._periodic.newton import _LOOSE_TOL


EQUAL_TOL = 1e-12  # a sweep against single solves of the same problem
OPTIONS = _sweep_options()  # the command's settings: one compilation for both
SCALE = 2 * np.sqrt(15000.0 * 75.0)  # d_G = D_G * 2 sqrt(k m), default k and m
# (mu, D_G): three orbits (the first the paper's, d_G = -80), then D_G = 0 and
# D_G > 0 (no orbit), then NaN.
POINTS = [(0.8, -80.0 / SCALE), (0.75, -0.02), (0.72, -0.05), (0.8, 0.0), (0.8, 0.01)]
POINTS.append((0.8, np.nan))
N_ORBITS = 3

SHARDED_SCRIPT = textwrap.dedent(
    """
    import sys

    import equinox as eqx
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from hybrax import models
    from hybrax._cli.sweep import _sweep_options

    with np.load(sys.argv[1]) as npz:
        data = dict(npz)
    params = eqx.tree_at(
        lambda p: (p.mu, p.d_G), models.hopper.HopperParams(), (data["mu"], data["d_G"])
    )
    system, section = models.hopper.minimal()[0], models.hopper.section()
    results = {}
    for name, distributed in (("sharded", False), ("distributed", True)):
        out = hx.sweep_orbits(
            system, section, models.hopper.orbit_guess, params,
            sweep_settings=hx.SweepSettings(
                chunk_size=4, distributed=distributed, neighbours=0
            ),
            **_sweep_options(),
        )
        results[name + "_u"] = out.orbit.u
        results[name + "_period"] = out.orbit.period
        results[name + "_multipliers"] = out.multipliers
        results[name + "_status"] = hx.status_code(out.result)
    np.savez(sys.argv[2], devices=jax.local_device_count(), **results)
    """
)


def _params():
    mu = np.array([p[0] for p in POINTS])
    d_G = np.array([p[1] for p in POINTS]) * SCALE
    # `tree_at` skips `HopperParams`' eager checks, which refuse NaN.
    return eqx.tree_at(lambda p: (p.mu, p.d_G), models.hopper.HopperParams(), (mu, d_G))


@pytest.fixture(scope="module", autouse=True)
def sharded_run(tmp_path_factory):
    """Start the 4-device sweep in a subprocess now; the test collects it."""
    folder = tmp_path_factory.mktemp("sharded")
    params = _params()
    np.savez(folder / "in.npz", mu=params.mu, d_G=params.d_G)
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    env["JAX_PLATFORMS"] = "cpu"
    process = subprocess.Popen(
        [sys.executable, "-c", SHARDED_SCRIPT, folder / "in.npz", folder / "out.npz"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    yield process, folder / "out.npz"
    if process.poll() is None:
        process.kill()
    process.wait()
    process.stdout.close()  # (whether or not a test read it)


@pytest.fixture(scope="module")
def system_and_section():
    return models.hopper.minimal()[0], models.hopper.section("minimal")


@pytest.fixture(scope="module")
def swept(system_and_section):
    system, section = system_and_section
    # Without the starts from neighbours' orbits (tested apart), so that each
    # element is a single solve from its guess (and after return-map iterations).
    return hx.sweep_orbits(
        system,
        section,
        models.hopper.orbit_guess,
        _params(),
        sweep_settings=hx.SweepSettings(neighbours=0),
        **OPTIONS,
    )


@pytest.fixture(scope="module")
def starts(system_and_section):
    """Each finite element's parameters and the orbit guess it starts from (the
    NaN element is not solved by the sweep either)."""
    results = []
    for mu, D_G in POINTS[:-1]:
        p = hx.canonical_params(models.hopper.make_params(mu=mu, D_G=D_G))
        results.append((p, models.hopper.orbit_guess(p)))
    return results


@pytest.fixture(scope="module")
def single_solves(system_and_section, starts):
    """A loop of single solves, `find_periodic_orbit` from each start."""
    system, section = system_and_section
    return [_single_solve(system, section, u, p, OPTIONS) for p, u in starts]


def _single_solve(system, section, u, params, options, fallback=True):
    """`find_periodic_orbit` as `sweep_orbits` with `options` solves an element
    from `u` (its guess), by single solves: Newton from `u`, its first iteration
    at the loosest tolerance (a rough start); where that finds no orbit and the
    options have return-map iterations (and `fallback`), those iterations from
    `u`, then Newton from the settings' tolerance. Where neither converges, the
    first solve (its status is the element's)."""

    def solve(loosening, shooting):
        return hx.find_periodic_orbit(
            system,
            section,
            hx.ShootingStart(u, loosening=loosening),
            params,
            analyse=False,
            phase_observables=False,
            settings=options["settings"],
            shooting=shooting,
        )

    shooting = options["shooting"]
    first = solve(math.inf, dataclasses.replace(shooting, return_map_iterations=0))
    if first.succeeded or not fallback or not int(shooting.return_map_iterations):
        return first
    mapped = solve(1.0, shooting)
    return mapped if mapped.succeeded else first


def _with_map_iterations(options, n):
    """`options` with `n` return-map iterations."""
    shooting = dataclasses.replace(options["shooting"], return_map_iterations=n)
    return dict(options, shooting=shooting)


def test_statuses_flag_failures(swept):
    names = swept.status_names
    assert names[:N_ORBITS] == ["successful"] * N_ORBITS
    # No orbit at D_G = 0 or above: flagged with the cause (the failure of the
    # last cycle the shooting ran, or the shooting itself), never a value.
    for name in names[3:5]:
        assert name not in ("successful", "nonfinite_parameters")
    assert np.all(np.isnan(swept.orbit.u[3:5]))
    assert np.all(np.isnan(swept.orbit.period[3:5]))
    assert names[5] == "nonfinite_parameters"
    assert list(swept.succeeded) == [True] * N_ORBITS + [False] * 3
    assert np.all(np.isnan(swept.multipliers[N_ORBITS:]))
    assert np.all(np.isnan(swept.orbit.u[5]))
    # The orbits' multipliers: eigenvalues of M by decreasing modulus; the paper's
    # 0.4714 at its parameters, and 0 (landing on the lift-off surface).
    mult = swept.multipliers[:N_ORBITS]
    assert np.all(np.abs(mult[:, 0]) >= np.abs(mult[:, 1]))
    assert abs(mult[0, 0] - 0.4714) < 5e-5
    assert np.all(np.abs(mult[:, 1]) < 1e-8)


def test_a_sweep_round_trips_through_a_file(swept, tmp_path):
    from helpers import assert_same_result

    hx.save(tmp_path / "sweep.npz", swept)
    again = hx.load(tmp_path / "sweep.npz")
    assert type(again) is hx.OrbitSweep
    assert_same_result(swept, again)
    assert again.status_names == swept.status_names


def test_sweep_equals_loop_of_single_solves(swept, single_solves):
    for i, orbit in enumerate(single_solves):
        assert hx.status_name(orbit.result)[0] == swept.status_names[i]
        if i >= N_ORBITS:
            continue
        for name in ("u", "period", "phase_durations", "reduced_jacobian"):
            np.testing.assert_allclose(
                getattr(swept.orbit, name)[i],
                getattr(orbit, name),
                rtol=0,
                atol=EQUAL_TOL,
                err_msg=f"element {i}: {name}",
            )
        eig = np.linalg.eigvals(np.asarray(orbit.reduced_jacobian))
        eig = eig[np.argsort(-np.abs(eig))]
        np.testing.assert_allclose(swept.multipliers[i], eig, atol=1e-10)


def test_host_multipliers_equal_closed_form_and_device_routine():
    """The sweep's host eigenvalues (`sorted_multipliers_batch`, threaded over
    pieces) against matrices built from known eigenvalues, in the library's one
    order, and against the differentiable device routine."""
    from hybrax._periodic import sorted_multipliers
    from hybrax._sweep.executor import _EIG_PIECE, sorted_multipliers_batch

    rng = np.random.default_rng(7)
    n = 2 * _EIG_PIECE + 3  # several pieces
    radius, angle = rng.uniform(0.1, 0.9, n), rng.uniform(0.2, 2.5, n)
    real = rng.uniform(-0.05, 0.05, n)  # smaller than every pair's modulus
    # M = V blockdiag([[a, -b], [b, a]], r) V^-1: eigenvalues a +- ib and r.
    a, b = radius * np.cos(angle), radius * np.sin(angle)
    blocks = np.zeros((n, 3, 3))
    blocks[:, 0, 0] = blocks[:, 1, 1] = a
    blocks[:, 0, 1], blocks[:, 1, 0] = -b, b
    blocks[:, 2, 2] = real
    # Well-conditioned eigenvectors (condition number at most 4).
    Q = np.linalg.qr(rng.standard_normal((n, 3, 3)))[0]
    V = Q * rng.uniform(0.5, 2.0, (n, 1, 3))
    matrices = V @ blocks @ np.linalg.inv(V)
    matrices[5] = np.nan
    expected = np.stack([a + 1j * b, a - 1j * b, real + 0j], axis=1)
    got = sorted_multipliers_batch(matrices)
    assert np.all(np.isnan(got[5]))
    keep = np.arange(n) != 5
    np.testing.assert_allclose(got[keep], expected[keep], rtol=0, atol=1e-9)
    on_device = jax.vmap(sorted_multipliers)(matrices[:64])
    np.testing.assert_allclose(got[:64][keep[:64]], on_device[keep[:64]], atol=1e-13)


# The scheduling options a test helper passes on to `hx.SweepSettings`.
_PLAN_KEYS = ("order", "warm_start", "neighbours")


def _split_plan(extra):
    """`extra` keywords as (`SweepSettings` fields, by default without the starts
    from neighbours' orbits; the other keywords of `sweep_orbits`)."""
    plan = {"neighbours": 0, **{k: v for k, v in extra.items() if k in _PLAN_KEYS}}
    return plan, {k: v for k, v in extra.items() if k not in _PLAN_KEYS}


def _rounds_of_one(system, section, params, options=OPTIONS, **extra):
    """`sweep_orbits` in rounds of one Newton iteration on two lanes, by default
    with the command's settings (one compilation shared by the tests that use
    it), without the starts from neighbours' orbits (the rounds are compared with
    single solves from the guess)."""
    plan, rest = _split_plan(extra)
    return hx.sweep_orbits(
        system,
        section,
        models.hopper.orbit_guess,
        params,
        sweep_settings=hx.SweepSettings(chunk_size=2, round_iterations=1, **plan),
        **rest,
        **options,
    )


# Slow: 21 s cold (its one-iteration rounds compile their own programs).
@pytest.mark.slow
def test_rounds_resume_where_they_stopped(system_and_section, starts, monkeypatch):
    """Compaction: in rounds of one Newton iteration, on two lanes, every element
    leaves its lane after each iteration and resumes from its last iterate; the
    orbits and statuses are those of the single solves (Newton's iterates do not
    depend on where a run is cut, nor on the queue's order), and the iterations
    are counted over rounds. The queue is ordered by each start's return-map
    defect max|P(u0) - u0|, largest first, computed here by single
    `poincare_map` calls. A solve whose next iteration is at the settings'
    tolerance leaves its lane for the queue's end: it runs again only once every
    element has entered (one stream, so that the calls are in order)."""
    system, section = system_and_section
    queues = []
    queue_by_defect = hybrax._sweep.rounds._queue_by_defect

    def spy(*args):
        queues.append(queue_by_defect(*args))
        return queues[-1]

    monkeypatch.setattr(hybrax._sweep.rounds, "_queue_by_defect", spy)
    monkeypatch.setattr(hybrax._sweep.executor, "_streams", lambda *args, **kwargs: 1)
    chunks = []  # each call's (start, loosening) per lane
    evaluate = hybrax._sweep.executor._evaluate

    def spy_evaluate(fn, static, chunk, sharding):
        if len(chunk) == 6 and not isinstance(fn, hybrax._sweep.rounds._StartDefect):
            chunks.append((np.asarray(chunk[2]), np.asarray(chunk[3])))
        return evaluate(fn, static, chunk, sharding)

    monkeypatch.setattr(hybrax._sweep.executor, "_evaluate", spy_evaluate)
    settings = OPTIONS["settings"]
    assert settings.stepsize_controller.rtol == settings.stepsize_controller.atol
    # Two return-map iterations (they run in the first round): Newton's
    # iterations then span several rounds.
    options = _with_map_iterations(OPTIONS, 2)
    single_solves = [_single_solve(system, section, u, p, options) for p, u in starts]
    rounds = _rounds_of_one(system, section, _params(), options)
    resume, from_guess = hybrax._sweep.rounds._RESUME, hybrax._sweep.rounds._FROM_GUESS
    fresh = [i for i, (start, _) in enumerate(chunks) if np.any(start == from_guess)]
    tight = [
        i
        for i, (start, loosening) in enumerate(chunks)
        if np.any((start == resume) & (loosening <= 1))
    ]
    assert fresh and tight and min(tight) >= max(fresh)
    for i, orbit in enumerate(single_solves):
        assert rounds.status_names[i] == hx.status_name(orbit.result)[0]
        if i < N_ORBITS:
            np.testing.assert_allclose(rounds.orbit.u[i], orbit.u, atol=EQUAL_TOL)
            # Its iterations count every strategy's solve: Newton from the guess,
            # then, where that found none, the return map's.
            p, u = starts[i]
            plain = _single_solve(system, section, u, p, options, fallback=False)
            total = int(plain.n_steps) + (0 if plain.succeeded else int(orbit.n_steps))
            assert total <= rounds.orbit.n_steps[i] <= 2 * total
    assert rounds.status_names[5] == "nonfinite_parameters"
    # The sweep orders by defects at the loosest tolerance of a shooting
    # iteration (they only order the queue).
    loosest = hx.Settings(rtol=_LOOSE_TOL, atol=_LOOSE_TOL, t_max=settings.t_max)
    defects = []
    for p, u in starts:
        u_next, _ = hx.poincare_map(system, section, u, p, settings=loosest)
        defect = float(jnp.max(jnp.abs(u_next - u)))
        defects.append(defect if np.isfinite(defect) else np.inf)
    defects.append(defects[0])  # the NaN element is solved as the first one
    assert len(queues) == 1
    # Sorted by the independent defects, up to their rounding (two elements at
    # their orbits differ by 1e-14).
    queued = np.asarray(defects)[queues[0]]
    assert sorted(queues[0]) == list(range(len(POINTS)))
    assert np.all(np.diff(queued[np.isfinite(queued)]) <= 1e-12)  # largest first
    # Elements whose cycle fails at their start (an infinite defect) come first.
    failing = ~np.isfinite(queued)
    assert np.all(failing[: failing.sum()])


# Slow: 23 s cold (its rounds of one iteration and its cut single solves compile
# their own programs); the fast set keeps an interrupted sweep's resumption below.
@pytest.mark.slow
def test_rounds_resume_with_the_loosening_where_they_stopped(system_and_section):
    """From the rough guess (no return-map iterations) the first Newton iteration
    integrates at the loosest tolerance and the later ones tighten with the step
    (`find_periodic_orbit`'s inexact Newton). Cut into rounds of one iteration,
    each solve resumes with the loosening where it stopped
    (`orbit.restart.loosening`), so its iterates are those of the uncut single
    solve: the same orbit and the same number of iterations. So do single solves
    cut after one iteration and resumed from `orbit.restart`."""
    system, section = system_and_section
    options = _with_map_iterations(OPTIONS, 0)
    # The first and third orbits (the second needs the return-map iterations).
    params = jax.tree_util.tree_map(
        lambda leaf: leaf[[0, 2]] if np.ndim(leaf) else leaf, _params()
    )
    out = _rounds_of_one(system, section, params, options)
    for i in range(2):
        p = jax.tree_util.tree_map(
            lambda leaf: leaf[i] if np.ndim(leaf) else leaf, params
        )
        p = hx.canonical_params(p)
        # From the rough guess: the first iteration at the loosest tolerance.
        orbit = _single_solve(system, section, models.hopper.orbit_guess(p), p, options)
        assert orbit.succeeded and out.succeeded[i]
        assert out.orbit.n_steps[i] == int(orbit.n_steps) > 1
        np.testing.assert_allclose(out.orbit.u[i], orbit.u, rtol=0, atol=EQUAL_TOL)
        # The same solve cut after each iteration and resumed from its restart.
        start = hx.ShootingStart(models.hopper.orbit_guess(p), loosening=math.inf)
        for part in range(int(orbit.n_steps)):
            shooting = dataclasses.replace(options["shooting"], max_iterations=part + 1)
            cut = hx.find_periodic_orbit(
                system,
                section,
                start,
                p,
                analyse=False,
                phase_observables=False,
                settings=options["settings"],
                shooting=shooting,
            )
            assert int(cut.n_steps) == 1
            assert int(cut.restart.iterations_used) == part + 1
            start = cut.restart
        assert cut.succeeded
        np.testing.assert_allclose(cut.u, orbit.u, rtol=0, atol=EQUAL_TOL)
    with pytest.raises(ValueError, match="loosening"):
        hx.find_periodic_orbit(
            system, section, hx.ShootingStart(orbit.u, loosening=0.5), p
        )
    for used in (-1, 40, 1.5):  # in [0, max_iterations), an integer
        with pytest.raises(ValueError, match="iterations_used"):
            hx.find_periodic_orbit(
                system, section, hx.ShootingStart(orbit.u, iterations_used=used), p
            )


@pytest.mark.slow  # (the fast set's cold run is at its bound)
def test_concurrent_streams_equal_single_solves(
    system_and_section, single_solves, monkeypatch
):
    """On a CPU the rounds run in several chunks at once, each from its own
    thread (here three streams of two lanes, whatever the core count): the
    orbits and statuses are those of the single solves, and the program is traced
    once (JAX's jit makes the other threads wait for the first one's compile)."""
    system, section = system_and_section
    monkeypatch.setattr(
        hybrax._sweep.executor, "_streams", lambda plan, n_chunks, rounds=False: 3
    )
    threads, traces = set(), []
    evaluate = hybrax._sweep.executor._evaluate

    def spy(fn, static, chunk, sharding):
        # (A pool's threads are named `<pool>_<k>`; a later round of the
        # sweep's strategies may run in a pool of its own.)
        threads.add(threading.current_thread().name)
        return evaluate(fn, static, chunk, sharding)

    vmapped = hybrax._sweep.executor._vmapped

    def counting(fn, static, out_static):
        traces.append(threading.get_ident())  # runs while tracing only
        return vmapped(fn, static, out_static)

    monkeypatch.setattr(hybrax._sweep.executor, "_evaluate", spy)
    monkeypatch.setattr(hybrax._sweep.executor, "_vmapped", counting)
    out = _rounds_of_one(system, section, _params(), order=None)
    pools = {}
    for name in threads:
        pool, _, worker = name.rpartition("_")
        pools.setdefault(pool, set()).add(worker)
    assert max(len(workers) for workers in pools.values()) == 3
    assert len(traces) <= 1  # 0 where an earlier test compiled it already
    for i, orbit in enumerate(single_solves):
        assert out.status_names[i] == hx.status_name(orbit.result)[0]
        if i < N_ORBITS:
            np.testing.assert_allclose(out.orbit.u[i], orbit.u, atol=EQUAL_TOL)
            np.testing.assert_allclose(
                out.multipliers[i],
                np.asarray(orbit.multipliers),
                atol=1e-10,
            )


def _failing_call(monkeypatch, n_streams: int, failing: int) -> list:
    """Run chunks in `n_streams` threads, and make the `failing`-th chunk call
    raise; returns the list that counts the calls."""
    monkeypatch.setattr(
        hybrax._sweep.executor,
        "_streams",
        lambda plan, n_chunks, rounds=False: n_streams,
    )
    calls = []
    evaluate = hybrax._sweep.executor._evaluate

    def fail(fn, static, chunk, sharding):
        calls.append(None)
        if len(calls) == failing:
            raise RuntimeError("chunk failed")
        return evaluate(fn, static, chunk, sharding)

    monkeypatch.setattr(hybrax._sweep.executor, "_evaluate", fail)
    return calls


# Slow: 10-20 s cold, over the fast set's share (run by .ci/run).
@pytest.mark.slow
def test_a_failing_stream_stops_the_others(system_and_section, monkeypatch):
    """An error in one stream's chunk call (here the third call) reaches the
    caller, and the other streams stop after the call they are running instead of
    working through their queues (as after Ctrl-C)."""
    system, section = system_and_section
    calls = _failing_call(monkeypatch, n_streams=3, failing=3)
    # Four copies of the six elements: eight a stream, several rounds each.
    params = jax.tree_util.tree_map(
        lambda leaf: np.tile(leaf, 4) if np.ndim(leaf) else leaf, _params()
    )
    with pytest.raises(RuntimeError, match="chunk failed"):
        _rounds_of_one(system, section, params, order=None)
    # Without the stop, the other streams would work through their queues.
    assert len(calls) <= 3 + 2


def test_a_failing_chunk_drops_the_chunks_not_started(monkeypatch):
    """`sweep` in threads: an error in one chunk's call reaches the caller as soon
    as it happens, and the chunks not started are dropped."""
    calls = _failing_call(monkeypatch, n_streams=2, failing=2)
    with pytest.raises(RuntimeError, match="chunk failed"):
        hx.sweep(_newton_sqrt, np.arange(1.0, 41.0), chunk_size=2)
    assert len(calls) <= 4  # of 20 chunks


def test_streams_one_per_core_on_a_cpu_device():
    """One chunk per core at once on a single CPU device, at most one per chunk;
    on an accelerator or a sharded chunk, one round at a time (two chunks in
    flight for plain sweeps, so that one is prepared while the other runs)."""
    from types import SimpleNamespace

    cores = len(os.sched_getaffinity(0))  # Linux, as CI
    cpu = SimpleNamespace(sharding=None, target=SimpleNamespace(platform="cpu"))
    gpu = SimpleNamespace(sharding=None, target=SimpleNamespace(platform="gpu"))
    sharded = SimpleNamespace(sharding=object(), target=None)
    streams = hybrax._sweep.executor._streams
    assert streams(cpu, 1000) == cores
    assert streams(cpu, 1) == 1
    assert streams(gpu, 1000) == 2 and streams(gpu, 1000, rounds=True) == 1
    assert streams(sharded, 1000, rounds=True) == 1


def test_cpu_chunks_are_wide_only_where_every_core_gets_two(monkeypatch):
    """The default CPU chunk: 64 lanes per device where the batch fills two such
    chunks per core, else 32 (a small batch still runs on every core)."""
    monkeypatch.setattr(hybrax._sweep.executor, "host_cores", lambda: 2)
    lanes = hybrax._sweep.orbits._cpu_lanes
    assert lanes(255, 1) == 32 and lanes(256, 1) == 64
    assert lanes(511, 2) == 32 and lanes(512, 2) == 64


def _rounds_of_four(system, section, params, **extra):
    """`sweep_orbits` in rounds of four Newton iterations on eight lanes, from the
    rough guesses (no return-map iterations, which would pull every start near
    its orbit), without the starts from neighbours' orbits; one compilation shared
    by the tests that use it."""
    plan, rest = _split_plan(extra)
    return hx.sweep_orbits(
        system,
        section,
        models.hopper.orbit_guess,
        params,
        sweep_settings=hx.SweepSettings(chunk_size=8, round_iterations=4, **plan),
        **rest,
        **_with_map_iterations(OPTIONS, 0),
    )


# Slow: it compiles a chunk program for each of three lane counts (22 s cold); the
# fast set keeps the rounds' compaction above.
@pytest.mark.slow
def test_remaining_elements_move_to_a_smaller_chunk(system_and_section, monkeypatch):
    """Once the queue is empty, the elements still iterating run in a chunk
    smaller by a power of 8 (here down to one lane per device): the chunks
    shrink from 8 lanes to 1 for the last element, and the orbits and statuses
    are those of the single solves. From the rough guesses the elements need
    different numbers of iterations."""
    system, section = system_and_section
    monkeypatch.setattr(hybrax._sweep.rounds, "_TAIL_LANES", 1)
    lanes = []
    evaluate = hybrax._sweep.executor._evaluate

    def spy(fn, static, chunk, sharding):
        lanes.append(chunk[1].shape[0])
        return evaluate(fn, static, chunk, sharding)

    monkeypatch.setattr(hybrax._sweep.executor, "_evaluate", spy)
    options = _with_map_iterations(OPTIONS, 0)
    # Eight elements: two orbits, the set without one at D_G = 0 (its Newton
    # wanders, all its iterations), an orbit, the NaN set, then orbits again:
    # the set that wanders runs its last round alone.
    rows = [0, 2, 3, 0, 5, 0, 2, 0]
    params = jax.tree_util.tree_map(
        lambda leaf: leaf[rows] if np.ndim(leaf) else leaf, _params()
    )
    out = _rounds_of_four(system, section, params)
    assert lanes[0] == 8 and lanes[-1] == 1
    assert all(a >= b for a, b in zip(lanes, lanes[1:]))
    for i, row in enumerate(rows[:4]):
        mu, D_G = POINTS[row]
        p = hx.canonical_params(models.hopper.make_params(mu=mu, D_G=D_G))
        orbit = _single_solve(system, section, models.hopper.orbit_guess(p), p, options)
        assert out.status_names[i] == hx.status_name(orbit.result)[0]
        # The same iterations, cut into rounds or not (exactly `max_iterations`
        # for the set whose Newton wanders, though rounds of 4 do not divide 10).
        assert out.orbit.n_steps[i] == int(orbit.n_steps)
        if orbit.succeeded:
            np.testing.assert_allclose(out.orbit.u[i], orbit.u, atol=EQUAL_TOL)
            np.testing.assert_allclose(
                out.orbit.period[i], orbit.period, atol=EQUAL_TOL
            )
    assert out.status_names[4] == "nonfinite_parameters"
    np.testing.assert_array_equal(out.orbit.u[5:], out.orbit.u[[0, 1, 0]])


@pytest.mark.slow  # (the fast set's cold run is at its bound)
def test_warm_starts_from_the_nearest_converged_orbit(system_and_section):
    """With `warm_start`, elements entering a lane after the first orbits have
    converged start from the nearest converged orbit: the same orbits (a region
    with one orbit per parameter set) as cold starts from the guess, in fewer
    Newton iterations. Sixteen sets with orbits and one without, on eight lanes
    (the first eight enter cold)."""
    system, section = system_and_section
    mu = np.linspace(0.78, 0.82, 16)
    params = eqx.tree_at(
        lambda p: (p.mu, p.d_G),
        models.hopper.HopperParams(),
        (np.append(mu, 0.8), np.append(np.full(16, -0.0377), 0.01) * SCALE),
    )
    runs = {
        warm: _rounds_of_four(system, section, params, warm_start=warm)
        for warm in (False, True)
    }
    cold, warm = runs[False], runs[True]
    # The set without an orbit fails either way (its cause depends on the start).
    assert list(cold.succeeded) == list(warm.succeeded) == [True] * 16 + [False]
    np.testing.assert_allclose(warm.orbit.u[:16], cold.orbit.u[:16], atol=1e-9)
    np.testing.assert_allclose(warm.multipliers[:16], cold.multipliers[:16], atol=1e-9)
    assert np.all(warm.orbit.residual_norm[:16] <= 1e-8)  # the default residual_tol
    assert warm.orbit.n_steps[:16].sum() < cold.orbit.n_steps[:16].sum()


def _interrupt_after(monkeypatch, n_finished: int) -> None:
    """Ctrl-C (a KeyboardInterrupt) once `n_finished` elements have finished."""
    update = hybrax._progress.Progress.update

    def interrupting(self, count, note=None):
        update(self, count, note)
        if self.done >= n_finished:
            raise KeyboardInterrupt

    monkeypatch.setattr(hybrax._progress.Progress, "update", interrupting)


def _ramp_params():
    """Sixteen hopper sets with an orbit each and one without (D_G > 0)."""
    mu = np.linspace(0.78, 0.82, 16)
    return eqx.tree_at(
        lambda p: (p.mu, p.d_G),
        models.hopper.HopperParams(),
        (np.append(mu, 0.8), np.append(np.full(16, -0.0377), 0.01) * SCALE),
    )


# Slow: 10-20 s cold, over the fast set's share (run by .ci/run).
@pytest.mark.slow
def test_an_interrupted_sweep_keeps_its_finished_elements(
    system_and_section, monkeypatch
):
    """Ctrl-C during the rounds raises `hx.Interrupted` (a KeyboardInterrupt)
    once the running rounds end; its `partial` holds every finished element
    exactly as the uninterrupted sweep gives it and marks the others `not_run`
    with NaN values."""
    system, section = system_and_section
    params = _ramp_params()
    whole = _rounds_of_four(system, section, params, order=None)
    _interrupt_after(monkeypatch, 4)
    with pytest.raises(hx.Interrupted) as info:
        _rounds_of_four(system, section, params, order=None)
    assert isinstance(info.value, KeyboardInterrupt)
    partial = info.value.partial
    names = np.array(partial.status_names)
    ran = names != "not_run"
    assert 4 <= ran.sum() < 17, names
    assert "interrupted" in hx.status_message(hx.RESULTS.not_run)[0]
    np.testing.assert_array_equal(
        hx.status_code(partial.result)[ran], hx.status_code(whole.result)[ran]
    )
    np.testing.assert_array_equal(partial.orbit.u[ran], whole.orbit.u[ran])
    np.testing.assert_array_equal(partial.multipliers[ran], whole.multipliers[ran])
    np.testing.assert_array_equal(partial.orbit.n_steps[ran], whole.orbit.n_steps[ran])
    assert np.isnan(partial.orbit.u[~ran]).all()
    assert np.isnan(partial.multipliers[~ran]).all()
    assert not partial.succeeded[~ran].any()
    assert f"after {ran.sum()} of 17" in str(info.value)
    # Resumed: the finished elements kept, the others solved, as the whole.
    monkeypatch.undo()
    resumed = _rounds_of_four(system, section, params, order=None, resume=partial)
    np.testing.assert_array_equal(
        hx.status_code(resumed.result), hx.status_code(whole.result)
    )
    np.testing.assert_array_equal(resumed.orbit.u[ran], partial.orbit.u[ran])
    np.testing.assert_allclose(resumed.orbit.u, whole.orbit.u, atol=EQUAL_TOL)
    np.testing.assert_allclose(resumed.multipliers, whole.multipliers, atol=1e-10)
    with pytest.raises(ValueError, match="`resume`"):
        _rounds_of_four(system, section, params, resume=whole.orbit)


def test_a_resume_of_other_inputs_is_refused(system_and_section, swept, tmp_path):
    """`resume` carries what it was computed for (`OrbitSweep.inputs`, kept by
    `hx.save`): a batch of the same size with other parameter values, other
    settings, another model form or guess is a `ValueError` naming `resume` and
    what differs; the same inputs resume (here a finished sweep: returned as
    it is)."""
    system, section = system_and_section
    saved = hx.load(hx.save(tmp_path / "partial.npz", swept))
    assert saved.inputs == swept.inputs and dict(saved.inputs)["analyse"] == "false"
    same = dict(sweep_settings=hx.SweepSettings(neighbours=0), **OPTIONS)

    def resumed(params=None, system=system, section=section, guess=None, **extra):
        return hx.sweep_orbits(
            system,
            section,
            models.hopper.orbit_guess if guess is None else guess,
            _params() if params is None else params,
            resume=saved,
            **{**same, **extra},
        )

    assert resumed() is saved
    other_d_G = eqx.tree_at(lambda p: p.d_G, _params(), _params().d_G * 1.01)
    cases = [
        (dict(params=other_d_G), r"params_batch\.d_G \(another value\)"),
        (
            dict(shooting=dataclasses.replace(OPTIONS["shooting"], max_iterations=11)),
            r"shooting\.max_iterations \(10 there, 11 here\)",
        ),
        (
            dict(
                settings=eqx.tree_at(
                    lambda s: s.t_max, OPTIONS["settings"], np.asarray(4.0)
                )
            ),
            r"settings\.t_max \(5\.0 there, 4\.0 here\)",
        ),
        (dict(sweep_settings=hx.SweepSettings()), r"neighbours \(0 there, 8 here\)"),
        (dict(analyse=True), "analyse"),
        (
            dict(
                system=models.hopper.constrained()[0],
                section=models.hopper.section("constrained"),
            ),
            "system.*section",
        ),
        (dict(guess=np.zeros(2)), "u_guess"),
    ]
    for extra, message in cases:
        with pytest.raises(ValueError, match="^`resume` .*" + message):
            resumed(**extra)
    with pytest.raises(ValueError, match="`resume` holds no record"):
        hx.sweep_orbits(
            system,
            section,
            models.hopper.orbit_guess,
            _params(),
            resume=dataclasses.replace(swept, inputs=()),
            **same,
        )


@pytest.mark.slow
def test_an_interrupt_during_the_retries_keeps_the_first_solves(
    system_and_section, monkeypatch
):
    """Ctrl-C while the elements without an orbit are solved again from their
    nearest neighbour's orbit: `partial` holds the whole first pass and the
    solves from the neighbour that finished, as the uninterrupted sweep does."""
    system, section = system_and_section
    params = _ramp_params()
    whole = _rounds_of_four(system, section, params, order=None, neighbours=1)
    update = hybrax._progress.Progress.update

    def interrupting(self, count, note=None):  # the retries' (quiet) progress only
        update(self, count, note)
        if not self.desc:
            raise KeyboardInterrupt

    monkeypatch.setattr(hybrax._progress.Progress, "update", interrupting)
    with pytest.raises(hx.Interrupted) as info:
        _rounds_of_four(system, section, params, order=None, neighbours=1)
    partial = info.value.partial
    assert "not_run" not in partial.status_names
    np.testing.assert_array_equal(
        hx.status_code(partial.result), hx.status_code(whole.result)
    )
    np.testing.assert_array_equal(partial.found_by, whole.found_by)
    np.testing.assert_array_equal(partial.neighbour_starts, whole.neighbour_starts)
    assert partial.neighbour_starts[16] == 1 and not partial.succeeded[16]
    assert partial.strategy_names == ["guess"] * 16 + [""]
    np.testing.assert_array_equal(partial.orbit.n_steps, whole.orbit.n_steps)
    np.testing.assert_array_equal(partial.orbit.u, whole.orbit.u)


def test_nearest_converged_orbit_in_scaled_parameters():
    from hybrax._sweep.rounds import (
        _nearest_solved,
        _nearest_untried,
        _neighbourhood_radius,
        _parameter_features,
    )

    # Two float leaves on very different scales and a constant one: each column
    # is scaled to unit spread, the constant dropped.
    dynamic = {
        "a": np.array([0.0, 1.0, 2.0, 3.0]),
        "b": np.array([0.0, 3000.0, 0.0, 3000.0]),
        "c": np.full(4, 5.0),
    }
    features = _parameter_features(dynamic, 4)
    assert features.shape == (4, 2)
    np.testing.assert_allclose(np.std(features, axis=0), 1.0)
    solved_u = [np.array([10.0]), np.array([30.0])]
    # Element 1 is nearer element 3 (same b) than element 0 once b is scaled.
    np.testing.assert_array_equal(
        _nearest_solved(features, [1, 2], [0, 3], solved_u), [[30.0], [10.0]]
    )
    # The nearest not yet tried: element 1's nearest (3) was, so its next is 0;
    # element 2 has tried both, so none (-1).
    tried = np.array([[3, -1], [0, 3]])
    nearest, u = _nearest_untried(features, [1, 2], [0, 3], solved_u, tried)
    np.testing.assert_array_equal(nearest, [0, -1])
    np.testing.assert_array_equal(u[0], [10.0])
    # A neighbourhood is the 8 nearest elements: on a unit 5 x 5 grid, an
    # interior point's reaches its diagonal neighbours (squared distance 2), a
    # corner's the point two steps along the diagonal (8: 1, 1, 2, 4, 4, 5, 5, 8);
    # an element farther than that is no neighbour.
    grid = np.stack(np.meshgrid(np.arange(5.0), np.arange(5.0)), -1).reshape(-1, 2)
    centre, corner = 12, 0
    np.testing.assert_array_equal(
        _neighbourhood_radius(grid, [centre, corner], 8), [2.0, 8.0]
    )
    far = np.array([[-1, -1]])
    nearest, _ = _nearest_untried(
        grid, [centre], [0, 6], [[0.0], [6.0]], far, np.array([2.0])
    )
    np.testing.assert_array_equal(nearest, [6])  # 0 lies two steps away


def _newton_sqrt(a):
    """A per-element while loop whose length depends on the element, and a status."""

    def cond(carry):
        y, k = carry
        return (jnp.abs(y * y - a) > 1e-13 * a) & (k < 12)

    def body(carry):
        y, k = carry
        return 0.5 * (y + a / y), k + 1

    y, k = jax.lax.while_loop(cond, body, (a, 0))
    done = jnp.abs(y * y - a) <= 1e-13 * a
    result = hx.RESULTS.where(done, hx.RESULTS.successful, hx.RESULTS.shooting_failed)
    return {"root": y, "steps": k, "result": result}


def test_chunked_equals_unchunked_and_loop():
    batch = np.array([0.5, 2.0, 9.0, 16.0, 1e30, 30.0, 7.0])
    whole = hx.sweep(_newton_sqrt, batch)
    chunked = hx.sweep(_newton_sqrt, batch, chunk_size=3, progress=True)
    assert whole["root"].shape == chunked["root"].shape == (7,)
    for key in ("root", "steps"):
        assert np.array_equal(whole[key], chunked[key])
    # Status per element; the element that needs too many steps fails alone.
    assert (
        hx.status_name(chunked["result"])
        == ["successful"] * 4 + ["shooting_failed"] + ["successful"] * 2
    )
    for i, a in enumerate(batch):
        one = jax.jit(_newton_sqrt)(jnp.asarray(a))
        assert float(one["root"]) == chunked["root"][i]


def test_progress_line_without_tqdm(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import now fails
    out = hx.sweep(
        _newton_sqrt, np.array([4.0, 9.0, 16.0]), chunk_size=3, progress=True
    )
    np.testing.assert_allclose(out["root"], [2.0, 3.0, 4.0], rtol=1e-12)
    assert "sweep: 3/3 (100%)" in capsys.readouterr().err


def test_bad_batches():
    with pytest.raises(ValueError, match="`batch`.*batch size"):
        hx.sweep(lambda x: x[0] + x[1], (np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError, match="`chunk_size`"):
        hx.sweep(jnp.sin, np.zeros(3), chunk_size=0)
    with pytest.raises(ValueError, match="`batch`.*leading batch axis"):
        hx.sweep(jnp.sin, np.float64(1.0))


def test_process_slice():
    parts = [hx.process_slice(10, i, 3) for i in range(3)]
    assert [(s.start, s.stop) for s in parts] == [(0, 4), (4, 8), (8, 10)]
    parts = [hx.process_slice(2, i, 3) for i in range(3)]
    assert [(s.start, s.stop) for s in parts] == [(0, 1), (1, 2), (2, 2)]
    assert hx.process_slice(5) == slice(0, 5)  # one process: everything


def test_sweep_heatmap_marks_missing_orbits():
    x, y = np.linspace(0.7, 0.9, 3), np.linspace(-0.06, 0.0, 4)
    values = np.array(
        [[0.3, 0.6, 1.2, np.nan], [0.4, 0.9, 1.1, np.nan], [0.2, 0.5, np.nan, np.nan]]
    )
    flagged = np.zeros_like(values, dtype=bool)
    flagged[0, 2] = True
    fig = hybrax.plot.sweep_heatmap(
        x, y, values, xlabel="mu", ylabel="D_G", flagged=flagged, title="t"
    )
    ax = fig.axes[0]
    (mesh,) = [c for c in ax.collections if isinstance(c, QuadMesh)]
    shown = mesh.get_array()
    assert np.array_equal(np.ma.getmaskarray(shown).reshape(4, 3).T, np.isnan(values))
    assert len(ax.patches) == 1 and ax.patches[0].get_hatch() == "///"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["no orbit found", r"$|\nu| = 1$", "flagged"]
    assert ax.get_xlabel() == "mu" and ax.get_ylabel() == "D_G"
    # One linear scale from 0 to 2, white at |nu| = 1.
    assert (mesh.norm.vmin, mesh.norm.vmax) == (0.0, 2.0)
    assert mesh.norm(1.0) == 0.5 and mesh.norm(0.5) == 0.25
    with pytest.raises(ValueError, match="`values`"):
        hybrax.plot.sweep_heatmap(x, y, values.T, xlabel="", ylabel="")
    # A solver failure apart from no orbit: a dark cell of its own, in the legend.
    failed = np.zeros_like(flagged)
    failed[2, 3] = True
    values[0, 0] = 3.0  # beyond the scale: the colour bar's arrow
    fig = hybrax.plot.sweep_heatmap(
        x, y, values, xlabel="mu", ylabel="D_G", failed=failed
    )
    ax = fig.axes[0]
    dark = [c for c in ax.collections if isinstance(c, QuadMesh)][1]
    assert np.array_equal(~np.ma.getmaskarray(dark.get_array()).reshape(4, 3).T, failed)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "solver failed (status in the table)" in labels
    assert fig.axes[1].get_label() == "<colorbar>" and fig.axes[1].collections


def test_cli_writes_table_and_heatmap(tmp_path, swept):
    del swept  # compiled the same program first
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(
            ["sweep", "hopper", "--grid", "mu=0.75:0.8:2", "--grid", "D_G=-0.04:0:3"]
            + ["--out", str(tmp_path), "--no-progress"]
        )
    assert code == 0, err.getvalue()
    assert "= 6 points" in out.getvalue()
    assert "converged 4/6" in out.getvalue()
    with (tmp_path / "sweep.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    assert len(rows) == 6
    assert [float(r["mu"]) for r in rows] == [0.75] * 3 + [0.8] * 3
    for row in rows:
        at_zero = float(row["D_G"]) == 0.0
        assert row["converged"] == ("false" if at_zero else "true")
        if at_zero:  # flagged with its cause
            assert row["status"] not in ("successful", "nonfinite_parameters")
        else:
            assert row["status"] == "successful"
        if at_zero:  # marked, not a value
            assert row["multiplier_re"] == "nan" and row["period"] == "nan"
        else:
            assert 0 < float(row["multiplier_abs"]) < 1 and row["stable"] == "true"
            assert float(row["period"]) > 0
            assert row["pulling_after_touchdown"] in ("true", "false")
            np.testing.assert_allclose(
                float(row["t_flight"]) + float(row["t_ground"]), float(row["period"])
            )
    with np.load(tmp_path / "sweep.npz") as npz:
        data = dict(npz)
    assert data["status_code"].shape == (2, 3)
    assert data["multipliers"].shape == (2, 3, 2)
    assert list(data["grid_names"]) == ["mu", "D_G"]
    assert not data["converged"][:, 2].any() and data["converged"][:, :2].all()
    png = (tmp_path / "sweep_heatmap.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


# Slow: 19 s cold (three runs of the command, figures included); the fast set keeps
# the library's interrupted sweep above and the command's table and heat map.
@pytest.mark.slow
def test_cli_interrupted_sweep_writes_the_finished_points(
    tmp_path, swept, monkeypatch, capsys
):
    """Ctrl-C in `hybrax sweep`: exit 130, one line, and the table, arrays,
    heat map and JSON of the points that finished (each row as the
    uninterrupted run's), the others with the status `not_run`."""
    del swept  # compiled the same program first
    grid = ["--grid", "mu=0.75:0.8:2", "--grid", "D_G=-0.04:0:3", "--no-progress"]
    assert main(["sweep", "hopper", *grid, "--out", str(tmp_path / "whole")]) == 0
    capsys.readouterr()
    _interrupt_after(monkeypatch, 1)
    folder = tmp_path / "partial"
    code = main(
        ["sweep", "hopper", *grid, "--out", str(folder), "--json", str(folder / "j")]
    )
    out, err = capsys.readouterr()
    assert code == 130
    (line,) = err.strip().splitlines()
    assert line.startswith("hybrax sweep: interrupted after ")
    assert "Traceback" not in out + err
    with (tmp_path / "whole" / "sweep.csv").open() as stream:
        whole = list(csv.DictReader(stream))
    with (folder / "sweep.csv").open() as stream:
        partial = list(csv.DictReader(stream))
    ran = [row["status"] != "not_run" for row in partial]
    assert 1 <= sum(ran) < 6
    assert f"after {sum(ran)} of 6 points" in line
    assert f"not run (interrupted) at {6 - sum(ran)}" in out
    for kept, row, full in zip(ran, partial, whole):
        if kept and row["neighbour_starts"] != full["neighbour_starts"]:
            # A point without an orbit whose solves from its neighbours' orbits
            # had not all run (the whole run's found none either).
            assert row["converged"] == full["converged"] == "false"
            for key in ("newton_iterations", "neighbour_starts"):
                del row[key], full[key]
        if kept:
            assert row == full
        else:
            assert row["period"] == "nan" and row["converged"] == "false"
    record = json.loads((folder / "j").read_text())
    assert record["status"] == "interrupted" and record["not_run"] == 6 - sum(ran)
    assert (folder / "sweep_heatmap.png").stat().st_size > 0
    # `--resume` finishes it: the whole run's table; the partial file goes.
    saved = folder / "sweep_partial.npz"
    assert line.endswith(f"--resume {saved}")
    monkeypatch.undo()
    assert (
        main(["sweep", "hopper", *grid, "--out", str(folder), "--resume", str(saved)])
        == 0
    )
    with (folder / "sweep.csv").open() as stream:
        finished = list(csv.DictReader(stream))
    assert [row["status"] for row in finished] == [row["status"] for row in whole]
    for row, full in zip(finished, whole):
        if row["converged"] == "true":
            np.testing.assert_allclose(
                float(row["period"]), float(full["period"]), rtol=1e-12
            )
    assert not saved.exists()
    (folder / "other.npz").write_bytes(b"")
    with pytest.raises(SystemExit) as info:
        main(["sweep", "hopper", *grid, "--resume", str(folder / "other.npz")])
    assert info.value.code == 2
    assert "argument --resume" in capsys.readouterr().err


def test_cli_resume_of_another_sweep_exits_2(tmp_path, swept, monkeypatch, capsys):
    """`--resume` of a sweep of other inputs: a grid of the same size with other
    values (its rows would carry the first run's results under the new labels),
    another form, or another Newton limit is one usage error that names what
    differs and exit 2, before any point is solved."""
    del swept  # compiled the same program first
    grid = ["--grid", "mu=0.75:0.8:2", "--grid", "D_G=-0.04:0:3", "--no-progress"]
    _interrupt_after(monkeypatch, 1)
    folder = tmp_path / "partial"
    assert main(["sweep", "hopper", *grid, "--out", str(folder), "-q"]) == 130
    monkeypatch.undo()
    saved = folder / "sweep_partial.npz"
    capsys.readouterr()
    other_grid = ["--grid", "mu=0.75:0.8:2", "--grid", "D_G=-0.05:0:3", "--no-progress"]
    cases = [
        (other_grid, r"params_batch\.d_G \(another value\)"),
        ([*grid, "--form", "constrained"], r"system \(another value\)"),
        ([*grid, "--max-iterations", "9"], r"max_iterations \(10 there, 9 here\)"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as info:
            main(
                ["sweep", "hopper", *argv, "--out", str(tmp_path / "x")]
                + ["--resume", str(saved)]
            )
        assert info.value.code == 2
        err = capsys.readouterr().err
        line = err.strip().splitlines()[-1]
        assert f"argument --resume: {str(saved)!r} is a sweep of other inputs" in line
        assert re.search(message, line), line
        assert not (tmp_path / "x" / "sweep.csv").exists()


def test_cli_warm_start_reaches_the_sweep(tmp_path, swept, monkeypatch):
    """`--warm-start` is passed to `sweep_orbits` (whose warm starts are tested
    above); on this grid, one chunk, the table is that of the cold sweep."""
    del swept  # compiled the same program first
    calls = []
    sweep_orbits = hybrax._sweep.sweep_orbits

    def spy(*args, **kwargs):
        calls.append(kwargs["sweep_settings"].warm_start)
        return sweep_orbits(*args, **kwargs)

    monkeypatch.setattr(hybrax._sweep, "sweep_orbits", spy)
    tables = []
    for flags in ([], ["--warm-start"]):
        folder = tmp_path / str(len(flags))
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(
                ["sweep", "hopper", "--grid", "mu=0.75:0.8:2", "--grid"]
                + ["D_G=-0.04:0:3", "--out", str(folder), "--no-progress"]
                + flags
            )
        assert code == 0
        tables.append((folder / "sweep.csv").read_text())
    assert calls == [False, True]
    assert tables[0] == tables[1]


@pytest.mark.parametrize(
    "grid, message",
    [
        ("mu=0.7:0.9", "expected NAME=START:STOP:COUNT"),
        ("nu=0:1:2", "unknown parameter 'nu'"),
        ("mu=0.7:1.2:3", "at mu=1.2: Hopper parameter `mu` must be in"),
    ],
)
def test_cli_bad_grid_exits_2(grid, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(["sweep", "hopper", "--grid", grid])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_sharded_equals_unsharded(sharded_run, swept):
    process, path = sharded_run
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output
    with np.load(path) as npz:
        data = dict(npz)
    assert int(data["devices"]) == 4
    for name in ("sharded", "distributed"):
        assert np.array_equal(data[name + "_status"], hx.status_code(swept.result))
        for key, ours in (
            ("u", swept.orbit.u),
            ("period", swept.orbit.period),
            ("multipliers", swept.multipliers),
        ):
            np.testing.assert_allclose(
                data[f"{name}_{key}"], ours, rtol=0, atol=EQUAL_TOL, err_msg=name + key
            )


def test_sweep_orbits_argument_errors(system_and_section):
    system, section = system_and_section
    with pytest.raises(ValueError, match="`u_guess`"):
        hx.sweep_orbits(system, section, np.zeros((3, 2)), _params())
    with pytest.raises(ValueError, match="`order`"):
        hx.sweep_orbits(
            system,
            section,
            np.zeros(2),
            _params(),
            sweep_settings=hx.SweepSettings(order="cost"),
        )
    for rounds in ("fast", 0):
        with pytest.raises(ValueError, match="`round_iterations`"):
            hx.sweep_orbits(
                system,
                section,
                np.zeros(2),
                _params(),
                sweep_settings=hx.SweepSettings(round_iterations=rounds),
            )
    with pytest.raises(ValueError, match="`params_batch`"):
        hx.sweep_orbits(system, section, np.zeros(2), models.hopper.HopperParams())
    for neighbours in (-1, 1.5, True):
        with pytest.raises(ValueError, match="`neighbours`"):
            hx.SweepSettings(neighbours=neighbours)


# Slow: its 32-lane chunks, return map and single solves compile for 16 s cold;
# the fast set keeps the starts from neighbours through the interrupted sweep's
# above and the hole test below.
@pytest.mark.slow
def test_failed_elements_are_solved_from_their_nearest_neighbours(
    system_and_section,
):
    """A line of D_G across the hopper family's edge, swept with the command's
    options. With `neighbours` (8 by default) an element without an orbit from
    its guess is solved again from its nearest converged neighbours' orbits: the
    elements that converged without them are unchanged, some that did not now
    converge to a fixed point of the return map, and every element still without
    an orbit has none from its guess nor from any of its nearest converged
    neighbours' orbits either (single solves)."""
    system, section = system_and_section
    D_G = np.linspace(-0.10, 0.0, 32)
    params = eqx.tree_at(
        lambda p: (p.mu, p.d_G),
        models.hopper.HopperParams(),
        (np.full(32, 0.8), D_G * SCALE),
    )
    runs = {
        neighbours: hx.sweep_orbits(
            system,
            section,
            models.hopper.orbit_guess,
            params,
            sweep_settings=hx.SweepSettings(neighbours=neighbours),
            **OPTIONS,
        )
        for neighbours in (0, 8)
    }
    plain, helped = runs[0], runs[8]
    assert not plain.neighbour_starts.any()
    # Found from the guess: the first strategy, the same in both runs (the others
    # may reach an orbit from another start, equal only to the solver tolerance).
    first = plain.succeeded & (plain.found_by == 0)
    np.testing.assert_array_equal(helped.orbit.u[first], plain.orbit.u[first])
    assert np.all(helped.succeeded[first])

    # An element's neighbourhood: its 8 nearest elements of the line.
    def around(i):
        return np.argsort(np.abs(D_G - D_G[i]), kind="stable")[1:9]

    for i in np.flatnonzero(~first):
        # Solved from a neighbour's orbit where one converged from its guess.
        if first[around(i)].any():
            assert helped.neighbour_starts[i] >= 1, i
    rescued = np.flatnonzero(helped.succeeded & ~first)
    assert rescued.size >= 1
    assert all(helped.strategy_names[i] == "neighbour" for i in rescued)
    settings = OPTIONS["settings"]
    for i in rescued:  # a fixed point of the return map, by one cycle
        p = jax.tree_util.tree_map(
            lambda leaf: leaf[i] if np.ndim(leaf) else leaf, params
        )
        u_next, _ = hx.poincare_map(
            system, section, helped.orbit.u[i], p, settings=settings
        )
        np.testing.assert_allclose(u_next, helped.orbit.u[i], atol=1e-8)
    for i in np.flatnonzero(~helped.succeeded):
        p = jax.tree_util.tree_map(
            lambda leaf: leaf[i] if np.ndim(leaf) else leaf, params
        )
        p = hx.canonical_params(p)
        guess = models.hopper.orbit_guess(p)
        assert not bool(_single_solve(system, section, guess, p, OPTIONS).succeeded)
        for j in [j for j in around(i) if helped.succeeded[j]]:
            again = _single_solve(
                system, section, helped.orbit.u[j], p, OPTIONS, fallback=False
            )
            assert not bool(again.succeeded)


def _grid_around(mu, D_G, d_mu=0.01, d_D_G=0.001):
    """The hopper's parameters on the 3 x 3 grid around `(mu, D_G)`, with the
    default sweep grid's spacing; centre last but one of the middle row."""
    mus = np.repeat(mu + d_mu * np.arange(-1, 2), 3)
    D_Gs = np.tile(D_G + d_D_G * np.arange(-1, 2), 3)
    points = [models.hopper.make_params(mu=a, D_G=b) for a, b in zip(mus, D_Gs)]
    return jax.tree_util.tree_map(lambda *leaves: np.asarray(leaves), *points)


@pytest.mark.slow
def test_no_hole_where_a_single_solve_finds_a_stable_orbit(system_and_section, swept):
    """The hopper at mu = 0.85, D_G = -0.017 has a stable orbit that Newton from
    the model's guess finds (`hybrax orbit hopper --set mu=0.85 --set
    D_G=-0.017`), while the return map's iterates from the guess drift into the
    slow ghost of a nearby fold. The sweep of the 3 x 3 grid around it, with the
    command's settings (which `sweep_orbits` shares), finds that orbit at the
    centre, by Newton from the guess, equal to the single solve; no point of the
    grid is left without an orbit that a single solve from its guess finds."""
    del swept  # compiled the same 32-lane program first
    system, section = system_and_section
    params = _grid_around(0.85, -0.017)
    out = hx.sweep_orbits(system, section, models.hopper.orbit_guess, params, **OPTIONS)
    centre = 4
    assert out.status_names[centre] == "successful"
    assert out.strategy_names[centre] == "guess"
    p = hx.canonical_params(models.hopper.make_params(mu=0.85, D_G=-0.017))
    single = hx.find_periodic_orbit(system, section, models.hopper.orbit_guess(p), p)
    assert single.succeeded
    np.testing.assert_allclose(out.orbit.period[centre], single.period, atol=1e-9)
    np.testing.assert_allclose(out.orbit.u[centre], single.u, atol=1e-9)
    # Stable (|nu| 0.615 by the single solve's reduced Jacobian).
    nu = np.max(np.abs(np.linalg.eigvals(np.asarray(single.reduced_jacobian))))
    np.testing.assert_allclose(np.abs(out.multipliers[centre, 0]), nu, atol=1e-9)
    assert nu < 1
    for i in range(9):
        q = hx.canonical_params(jax.tree_util.tree_map(lambda leaf: leaf[i], params))
        alone = _single_solve(system, section, models.hopper.orbit_guess(q), q, OPTIONS)
        if alone.succeeded:
            assert out.succeeded[i], i


def test_the_command_and_the_library_map_alike(tmp_path, swept):
    """`hybrax sweep` and `sweep_orbits` with its defaults share their settings
    (`hybrax._sweep_defaults`): the same statuses, strategies and orbits on the
    same grid."""
    del swept
    grid = ["--grid", "mu=0.75:0.8:2", "--grid", "D_G=-0.04:0:3"]
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["sweep", "hopper", *grid, "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    with (tmp_path / "sweep.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    points = [
        models.hopper.make_params(mu=float(r["mu"]), D_G=float(r["D_G"])) for r in rows
    ]
    params = jax.tree_util.tree_map(lambda *leaves: np.asarray(leaves), *points)
    system, section = models.hopper.minimal()[0], models.hopper.section()
    library = hx.sweep_orbits(
        system,
        section,
        models.hopper.orbit_guess,
        params,
        sweep_settings=hx.SweepSettings(chunk_size=len(rows)),
    )
    assert [r["status"] for r in rows] == library.status_names
    assert [r["found_by"] for r in rows] == library.strategy_names
    period = np.array([float(r["period"]) for r in rows])
    np.testing.assert_allclose(period, library.orbit.period, rtol=0, atol=1e-12)
