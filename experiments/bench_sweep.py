"""Benchmark: hopper periodic orbits with multipliers per second, batched with
`hybrax.sweep_orbits` (one `jit(vmap(...))`), against a SciPy loop in the same run.

In one run, at rtol = atol = 1e-10 (`--tol`):

1. SciPy (`experiments/scipy_hopper.py`: solve_ivp DOP853 with events, root "hybr",
   central finite differences): `--scipy-orbits` orbits, timed one by one.
2. hybrax: `sweep_orbits` on batches of 1, 16, 64, 256, 1024, 4096 parameter sets
   (`--batches`, up to `--max-batch`), in the library's default chunks (64 lanes on
   CPU, one chunk per core at once; the whole batch on an accelerator; one
   compilation per chunk size).
   Compilation (trace / lower / XLA, from `jax.monitoring`) is reported apart from
   the warm time (the median of `--repeats` calls); orbits/s = batch / warm time.
   CPU seconds per orbit (process time, all threads) are reported too: they are
   less sensitive to other load on the machine than wall time. On an accelerator,
   the device's peak memory.

The batch: random (seed 0) mu in [0.79, 0.81], D_G in [-0.039, -0.035] around the
paper's case (mu 0.8, D_G -0.0377), where every point has a stable orbit that
Newton finds from `models.hopper.orbit_guess` in 3-5 iterations. A grid with points
without orbits is much slower per point (under vmap every element waits for the
chunk's slowest, and a point that does not converge runs all Newton iterations);
`hybrax sweep hopper` reports that case.

Then (unless `--no-warm-start`) the largest batch with `warm_start=True` (each
element after the first converged ones starts from the nearest converged orbit)
against the cold batch (their calls alternating, medians).

Then the largest batch again with `--infeasible` (default 0.1) of its parameter sets
replaced by sets with D_G in [-0.2, 0.05] (most have no orbit: the hopper stops
lifting off, or its cycle never returns), solved with compaction (rounds of
`--round-iterations` Newton iterations, by default `sweep_orbits`' own) with the
queue ordered by each start's return-map defect (the default) and in batch order,
and without compaction (`round_iterations=None`, one round: the slowest element
holds its chunk for all its iterations), against the clean batch's throughput of
valid orbits (each configuration's calls alternating with the clean batch's, so that
both see the same drift of a shared machine's speed; medians).
Each row reports the orbits it found (and by which strategy) beside its speed,
and the batch's false holes (unless `--no-audit`): elements reported without an
orbit where a single `find_periodic_orbit` with its own defaults, from the model's
guess or from the orbit of one of the 8 nearest converged elements, finds one. So
losing orbits can never pass for speed.

`--profile` adds, at `--profile-batch`, warm per-element timings of the pieces of
one orbit solve under vmap (one return-map cycle, its forward-mode Jacobian, the
variational cycle), the steps per phase, and the Newton iteration counts, to show
what bounds the throughput. `--devices N` splits each batch over N host devices
(sets XLA_FLAGS before JAX starts). `--json` writes
`experiments/out/bench_sweep.json` (git-ignored).

Usage: `python experiments/bench_sweep.py [--max-batch 1024] [--profile] [--json]`;
on a GPU, `--max-batch 1000000 --batches 1e3,1e4,1e5,1e6 --infeasible 0
--no-warm-start` for the scaling with batch size.
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import sys
import time


HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hybrax._sweep_defaults import (  # noqa: E402 (no JAX: XLA_FLAGS are set later)
    SWEEP_MAP_ITERATIONS,
    SWEEP_MAX_ITERATIONS,
    SWEEP_T_MAX,
)


BATCHES = (1, 16, 64, 256, 1024, 4096)
SEED = 0
MU_RANGE = (0.79, 0.81)
D_G_RANGE = (-0.039, -0.035)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-batch", type=int, default=4096)
    parser.add_argument(
        "--batches",
        type=lambda text: tuple(int(float(b)) for b in text.split(",")),
        default=BATCHES,
        help="comma-separated batch sizes (e.g. 1e3,1e4,1e5); default "
        + ",".join(map(str, BATCHES)),
    )
    parser.add_argument(
        "--no-warm-start", action="store_true", help="skip the warm-start row"
    )
    parser.add_argument("--tol", type=float, default=1e-10, help="rtol = atol")
    parser.add_argument("--scipy-orbits", type=int, default=5)
    parser.add_argument("--devices", type=int, default=1, help="host devices")
    parser.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="lanes per call",
    )
    # `sweep_orbits`' defaults unless a flag says otherwise.
    parser.add_argument(
        "--max-iterations", type=int, default=SWEEP_MAX_ITERATIONS, help="Newton"
    )
    parser.add_argument("--map-iterations", type=int, default=SWEEP_MAP_ITERATIONS)
    parser.add_argument(
        "--newton-tol", type=float, default=1e-11, help="Newton rtol = atol"
    )
    parser.add_argument(
        "--t-max", type=float, default=SWEEP_T_MAX, help="one cycle's horizon"
    )
    parser.add_argument(
        "--no-audit",
        action="store_true",
        help="skip the false-hole count (single solves of every element without "
        "an orbit)",
    )
    parser.add_argument(
        "--jacobian", choices=("autodiff", "variational"), default="variational"
    )
    parser.add_argument("--infeasible", type=float, default=0.1)
    parser.add_argument(
        "--round-iterations",
        type=lambda text: text if text == "auto" else int(text),
        default="auto",
        help="Newton iterations per round; 'auto' (default): the library's, 4 on "
        "a CPU and 5 on an accelerator",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="warm calls per row, median reported (batches up to 4096)",
    )
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-batch", type=int, default=1024)
    parser.add_argument("--json", action="store_true", help="write experiments/out/")
    return parser.parse_args()


def batch_params(np, eqx, models, n):
    rng = np.random.default_rng(SEED)
    mu = rng.uniform(*MU_RANGE, n)
    D_G = rng.uniform(*D_G_RANGE, n)
    base = models.hopper.HopperParams()
    d_G = D_G * 2 * np.sqrt(base.k * base.m)
    return eqx.tree_at(lambda p: (p.mu, p.d_G), base, (mu, d_G)), mu, D_G


def take(jtu, np, params, n):
    return jtu.tree_map(lambda leaf: leaf[:n] if np.ndim(leaf) else leaf, params)


def bench_scipy(scipy_hopper, mu, D_G, tol, n):
    """`n` SciPy orbits (after one warm-up), timed one by one."""
    params = []
    for i in range(n):
        p = dict(scipy_hopper.DEFAULT_PARAMS)
        p["mu"] = float(mu[i])
        p["d_G"] = float(D_G[i]) * 2 * (p["k"] * p["m"]) ** 0.5
        params.append(p)
    scipy_hopper.orbit_with_multipliers(params[0], tol=tol)  # warm-up
    times, multipliers = [], []
    for p in params:
        start = time.perf_counter()
        _, _, multiplier, _ = scipy_hopper.orbit_with_multipliers(p, tol=tol)
        times.append(time.perf_counter() - start)
        multipliers.append(complex(multiplier))
    return times, multipliers


def main():
    args = parse_args()
    if args.devices > 1:
        flag = f"--xla_force_host_platform_device_count={args.devices}"
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()
    # As the command line does: runtime checks return NaN instead of carrying host
    # callbacks (the statuses already report failures).
    os.environ.setdefault("EQX_ON_ERROR", "nan")

    import scipy_hopper

    print(
        f"python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    start = time.perf_counter()
    import equinox as eqx
    import jax
    import jax.tree_util as jtu
    import numpy as np
    import optimistix as optx

    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from bench_orbit import CompileEvents
    from hybrax import models

    print(
        f"jax {jax.__version__}, {jax.local_device_count()} device(s) "
        f"({jax.devices()[0].platform}); import {time.perf_counter() - start:.2f} s"
    )
    events = CompileEvents()
    jax.monitoring.register_event_duration_secs_listener(events)

    sizes = [b for b in args.batches if b <= args.max_batch]
    pool, mu, D_G = batch_params(np, eqx, models, max(sizes + [args.profile_batch]))
    system, section = models.hopper.minimal()[0], models.hopper.section()
    options = dict(
        settings=hx.Settings(rtol=args.tol, atol=args.tol, t_max=args.t_max),
        shooting=hx.Shooting(
            optx.Newton(rtol=args.newton_tol, atol=args.newton_tol),
            max_iterations=args.max_iterations,
            return_map_iterations=args.map_iterations,
            jacobian=args.jacobian,
        ),
        sweep_settings=hx.SweepSettings(
            chunk_size=args.chunk, round_iterations=args.round_iterations
        ),
    )
    print(
        f"settings: tol {args.tol:g}, t_max {args.t_max:g}, Newton <= "
        f"{args.max_iterations} (tol {args.newton_tol:g}), {args.map_iterations} "
        "return-map iterations, "
        f"jacobian {args.jacobian}, chunk {args.chunk or 'default'}, rounds of "
        f"{args.round_iterations}; batch mu in "
        f"{MU_RANGE}, D_G in {D_G_RANGE}"
    )

    scipy_times, scipy_mult = bench_scipy(
        scipy_hopper, mu, D_G, args.tol, args.scipy_orbits
    )
    scipy_rate = len(scipy_times) / sum(scipy_times)
    print(
        f"SciPy: {len(scipy_times)} orbits, {1e3 * statistics.median(scipy_times):.1f} "
        f"ms median -> {scipy_rate:.2f} orbits/s"
    )

    rows = []
    last = None
    for n in sizes:
        params = take(jtu, np, pool, n)

        def call(params=params):
            return hx.sweep_orbits(
                system, section, models.hopper.orbit_guess, params, **options
            )

        events.start()
        t0 = time.perf_counter()
        out = call()
        first = time.perf_counter() - t0
        peak = peak_device_bytes(jax)
        parts = events.stop()
        repeats = args.repeats if n <= 4096 else 1
        wall, cpu, out = timed(call, repeats)
        iterations = np.asarray(out.orbit.n_steps)
        row = {
            "batch": n,
            "compile_s": sum(parts.values()),
            "compile_parts_s": parts,
            "first_call_s": first,
            "warm_s": wall,
            "orbits_per_s": n / wall,
            "cpu_ms_per_orbit": 1e3 * cpu / n,
            "converged": int(out.succeeded.sum()),
            "newton_max": int(iterations.max()),
            "newton_mean": float(iterations.mean()),
            "max_residual": float(np.max(out.orbit.residual_norm)),
            "peak_device_bytes": peak,
        }
        rows.append(row)
        last = out
        print(
            f"  batch {n:5d}: compile {row['compile_s']:6.1f} s, warm {wall:8.3f} s "
            f"-> {row['orbits_per_s']:8.1f} orbits/s ({row['cpu_ms_per_orbit']:.2f} "
            f"CPU ms/orbit), converged {row['converged']}/{n}, Newton max "
            f"{row['newton_max']}, max |F| {row['max_residual']:.1e}"
            + (f", device memory peak {peak / 2**30:.2f} GiB" if peak else ""),
            flush=True,
        )

    n_check = min(len(scipy_mult), last.multipliers.shape[0])
    diff = max(
        abs(abs(scipy_mult[i]) - abs(last.leading_multiplier[i]))
        for i in range(n_check)
    )
    print()
    header = (
        f"{'batch':>6} {'compile s':>9} {'(trace/lower/xla)':>19} {'warm s':>8} "
        f"{'orbits/s':>9} {'CPU ms/orbit':>12} {'vs SciPy':>9} {'converged':>10}"
    )
    print(header)
    print("-" * len(header))
    print(
        f"{'SciPy':>6} {'-':>9} {'':>19} {sum(scipy_times):8.3f} {scipy_rate:9.2f} "
        f"{1e3 * statistics.median(scipy_times):12.1f} {1:8.2f}x "
        f"{len(scipy_times):>10}"
    )
    for row in rows:
        parts = row["compile_parts_s"]
        split = f"{parts['trace']:.1f}/{parts['lower']:.1f}/{parts['xla']:.1f}"
        print(
            f"{row['batch']:>6} {row['compile_s']:9.1f} {split:>19} "
            f"{row['warm_s']:8.3f} {row['orbits_per_s']:9.1f} "
            f"{row['cpu_ms_per_orbit']:12.2f} {row['orbits_per_s'] / scipy_rate:8.1f}x "
            f"{row['converged']:>5}/{row['batch']}"
        )
    print(
        f"|leading multiplier| hybrax vs SciPy (first {n_check}): max diff {diff:.1e}"
    )

    results = {"settings": vars(args), "scipy_s": scipy_times, "rows": rows}
    if not args.no_warm_start:
        results["warm_start"] = warm_start(
            args, np, jtu, hx, models, system, section, pool, options, rows[-1], last
        )
    if args.infeasible > 0:
        results["infeasible"] = infeasible_batch(
            args, np, eqx, jtu, hx, models, system, section, pool, options, rows[-1]
        )
    if args.profile:
        results["profile"] = profile(args, jax, jtu, np, hx, models, pool, last)
    if args.json:
        folder = HERE / "out"
        folder.mkdir(exist_ok=True)
        path = folder / "bench_sweep.json"
        path.write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwrote {path.relative_to(HERE.parent)}")


def timed(call, repeats, other=None):
    """Medians of the wall and CPU seconds of `repeats` calls of `call` (after
    the caller's first), and its last output. With `other`, its calls alternate
    with `call`'s (the same drift of the machine's speed for both): then also
    `other`'s median wall seconds and last output."""
    walls, cpus, other_walls = [], [], []
    out = other_out = None
    for _ in range(repeats):
        if other is not None:
            t0 = time.perf_counter()
            other_out = other()
            other_walls.append(time.perf_counter() - t0)
        t0, c0 = time.perf_counter(), time.process_time()
        out = call()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    medians = (statistics.median(walls), statistics.median(cpus), out)
    if other is None:
        return medians
    return medians + (statistics.median(other_walls), other_out)


def peak_device_bytes(jax):
    """The first device's peak memory in use so far (accelerators report it; the
    CPU device does not: None)."""
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def warm_start(args, np, jtu, hx, models, system, section, pool, options, cold, out):
    """The largest batch again with `warm_start=True`: elements start from the
    nearest converged orbit; throughput and Newton iterations against the cold
    batch, and the largest difference of their orbits and multipliers."""
    n = cold["batch"]
    params = take(jtu, np, pool, n)

    def call():
        return hx.sweep_orbits(
            system,
            section,
            models.hopper.orbit_guess,
            params,
            **dict(
                options,
                sweep_settings=hx.SweepSettings(
                    chunk_size=args.chunk,
                    round_iterations=args.round_iterations,
                    warm_start=True,
                ),
            ),
        )

    def cold_call():
        return hx.sweep_orbits(
            system, section, models.hopper.orbit_guess, params, **options
        )

    warm = call()
    wall, _, warm, cold_wall, _ = timed(call, args.repeats, other=cold_call)
    row = {
        "batch": n,
        "warm_s": wall,
        "cold_s": cold_wall,
        "orbits_per_s": n / wall,
        "vs_cold": cold_wall / wall,
        "newton_mean": float(np.mean(warm.orbit.n_steps)),
        "newton_mean_cold": float(np.mean(out.orbit.n_steps)),
        "max_du": float(np.nanmax(np.abs(warm.orbit.u - out.orbit.u))),
        "max_dmult": float(np.nanmax(np.abs(warm.multipliers - out.multipliers))),
        "converged": int(warm.succeeded.sum()),
    }
    print(
        f"\nbatch {n} with warm_start=True: {wall:.3f} s -> "
        f"{row['orbits_per_s']:.1f} orbits/s ({row['vs_cold']:.2f}x cold); Newton "
        f"mean {row['newton_mean']:.2f} (cold {row['newton_mean_cold']:.2f}); "
        f"converged {row['converged']}/{n}; max |du| {row['max_du']:.1e}, max "
        f"|d multiplier| {row['max_dmult']:.1e} against cold",
        flush=True,
    )
    return row


def infeasible_batch(
    args, np, eqx, jtu, hx, models, system, section, pool, options, clean
):
    """The largest batch with a fraction of infeasible parameter sets, with and
    without compaction; throughput of its valid orbits against the clean batch."""
    n = clean["batch"]
    params = take(jtu, np, pool, n)
    rng = np.random.default_rng(SEED + 1)
    bad = rng.choice(n, int(round(args.infeasible * n)), replace=False)
    scale = 2 * np.sqrt(params.k * params.m)
    d_G = np.array(params.d_G)
    d_G[bad] = rng.uniform(-0.2, 0.05, bad.size) * scale
    clean_params = params
    params = eqx.tree_at(lambda p: p.d_G, params, d_G)

    def clean_call():
        return hx.sweep_orbits(
            system, section, models.hopper.orbit_guess, clean_params, **options
        )

    print(
        f"\nbatch {n} with {bad.size} parameter sets of D_G in [-0.2, 0.05], each "
        f"configuration's calls alternating with the clean batch's (medians of "
        f"{args.repeats})"
    )
    rows = []
    compaction = f"rounds of {args.round_iterations}"
    for label, rounds, order in (
        (f"{compaction}, queue by defect (default)", args.round_iterations, "defect"),
        (f"{compaction}, queue in batch order", args.round_iterations, None),
        ("one round, batch order", None, None),
    ):

        def call(rounds=rounds, order=order):
            return hx.sweep_orbits(
                system,
                section,
                models.hopper.orbit_guess,
                params,
                **dict(
                    options,
                    sweep_settings=hx.SweepSettings(
                        chunk_size=args.chunk, round_iterations=rounds, order=order
                    ),
                ),
            )

        t0 = time.perf_counter()
        out = call()
        first = time.perf_counter() - t0
        wall, _, out, clean_wall, _ = timed(call, args.repeats, other=clean_call)
        valid = int(out.succeeded.sum())
        row = {
            "label": label,
            "first_call_s": first,
            "warm_s": wall,
            "clean_s": clean_wall,
            "valid": valid,
            "valid_per_s": valid / wall,
            "vs_clean": valid / wall / (n / clean_wall),
            "statuses": dict(zip(*np.unique(out.status_names, return_counts=True))),
            "found_by": dict(zip(*np.unique(out.strategy_names, return_counts=True))),
        }
        rows.append(row)
        print(
            f"  {label:45s} warm {wall:8.3f} s -> {row['valid_per_s']:8.1f} valid "
            f"orbits/s ({row['vs_clean']:.2f} of clean: {n / clean_wall:.1f} "
            f"orbits/s); {valid} found (by {row['found_by']}); statuses "
            f"{row['statuses']}",
            flush=True,
        )
    if not args.no_audit:
        holes, audited = false_holes(np, jtu, hx, models, system, section, params, out)
        print(
            f"  false holes: {holes} of the {audited} elements without an orbit have "
            "one by a single solve from the guess or a near neighbour's orbit",
            flush=True,
        )
        for row in rows:
            row["false_holes"], row["audited"] = holes, audited
    return rows


def false_holes(np, jtu, hx, models, system, section, params, out, neighbours=8):
    """How many of `out`'s elements without an orbit have one by a single
    `find_periodic_orbit` (its own defaults, the sweep's cycle horizon) from the
    model's guess or from the orbit of one of the `neighbours` converged elements
    nearest in parameters (each parameter scaled by its spread), and how many
    elements were audited."""
    n = out.succeeded.size
    columns = [
        np.asarray(leaf, float).reshape(n, -1)
        for leaf in jtu.tree_leaves(params)
        if np.ndim(leaf) and np.shape(leaf)[0] == n
    ]
    features = np.concatenate(columns, axis=1)
    spread = features.std(axis=0)
    features = features[:, spread > 0] / spread[spread > 0]
    solved = np.flatnonzero(out.succeeded)
    settings = hx.Settings(t_max=SWEEP_T_MAX)
    holes = 0
    failed = np.flatnonzero(~out.succeeded)
    for i in failed:
        p = hx.canonical_params(
            jtu.tree_map(lambda leaf: leaf[i] if np.ndim(leaf) else leaf, params)
        )
        distance = np.sum((features[solved] - features[i]) ** 2, axis=1)
        starts = [models.hopper.orbit_guess(p)]
        starts += [out.orbit.u[j] for j in solved[np.argsort(distance)[:neighbours]]]
        if any(
            bool(
                hx.find_periodic_orbit(
                    system, section, np.asarray(u), p, settings=settings
                ).succeeded
            )
            for u in starts
        ):
            holes += 1
    return holes, failed.size


def profile(args, jax, jtu, np, hx, models, pool, out):
    """Warm per-element costs of the pieces of one orbit solve under vmap."""
    import diffrax as dfx

    from hybrax._periodic.cycle import _variational_map, resolve_sequence
    from hybrax.models.hopper import _flight_field, _ground_field

    n = args.profile_batch
    system, section = models.hopper.minimal()[0], models.hopper.section()
    params = jtu.tree_map(
        lambda leaf: np.asarray(leaf[:n] if np.ndim(leaf) else np.full(n, leaf)), pool
    )
    params = hx.canonical_params(params)
    u0 = jax.vmap(models.hopper.orbit_guess)(params)
    settings = hx.Settings(rtol=args.tol, atol=args.tol, t_max=args.t_max)
    sequence, _ = resolve_sequence(system, section)
    kw = dict(settings=settings)

    # Forward mode, so that `jacfwd` differentiates the cycle (the default
    # adjoint is reverse mode).
    forward = hx.Settings(
        rtol=args.tol, atol=args.tol, t_max=args.t_max, adjoint=dfx.ForwardMode()
    )

    def primal(u, p):
        return hx.poincare_map(system, section, u, p, settings=forward)[0]

    pieces = {
        "return-map cycle (primal)": jax.jit(jax.vmap(primal)),
        "cycle + jacfwd in u (autodiff Newton step)": jax.jit(
            jax.vmap(lambda u, p: jax.jacfwd(primal)(u, p))
        ),
        "variational cycle, k columns (variational Newton step)": jax.jit(
            jax.vmap(
                lambda u, p: _variational_map(
                    system, section, sequence, settings, u, p, full=False
                )[:2]
            )
        ),
        "variational cycle, n columns (pass of an analysed orbit)": jax.jit(
            jax.vmap(
                lambda u, p: _variational_map(
                    system, section, sequence, settings, u, p
                )[:2]
            )
        ),
    }
    rows = {}
    print()
    print(f"profile at batch {n} (warm, per element):")
    for name, fn in pieces.items():
        jax.block_until_ready(fn(u0, params))
        t0 = time.perf_counter()
        jax.block_until_ready(fn(u0, params))
        per = (time.perf_counter() - t0) / n
        rows[name] = per
        print(f"  {name:<58} {1e3 * per:8.3f} ms")

    # Steps per phase at the paper's orbit (what one cycle integrates).
    p = hx.canonical_params(models.hopper.make_params())
    orbit = hx.find_periodic_orbit(
        system, section, models.hopper.orbit_guess(p), p, analyse=False, **kw
    )
    steps = []
    for field, x0, t1 in (
        (_flight_field, orbit.state, orbit.phase_durations[0]),
        (_ground_field, orbit.x_after[0], orbit.phase_durations[1]),
    ):
        sol = dfx.diffeqsolve(
            dfx.ODETerm(field),
            dfx.Tsit5(),
            0.0,
            t1,
            None,
            x0,
            p,
            stepsize_controller=dfx.PIDController(rtol=args.tol, atol=args.tol),
            max_steps=100_000,
        )
        steps.append(
            (int(sol.stats["num_accepted_steps"]), int(sol.stats["num_rejected_steps"]))
        )
    print(
        f"  steps per phase at the paper's orbit (accepted, rejected): flight "
        f"{steps[0]}, ground {steps[1]}"
    )
    iterations = np.asarray(out.orbit.n_steps)
    print(
        f"  Newton iterations in the last batch: histogram "
        f"{np.bincount(iterations).tolist()} (under vmap every element runs "
        f"{iterations.max()})"
    )
    # Without the analysis (the sweep's default) every Newton evaluation, the
    # last one included (it reports the orbit), is one pass.
    step = rows[
        "cycle + jacfwd in u (autodiff Newton step)"
        if args.jacobian == "autodiff"
        else "variational cycle, k columns (variational Newton step)"
    ]
    estimate = args.map_iterations * rows["return-map cycle (primal)"]
    estimate += iterations.max() * step
    print(
        f"  estimate: {args.map_iterations} map cycles + {iterations.max()} Newton "
        f"steps = {1e3 * estimate:.2f} ms per orbit "
        f"-> {1 / estimate:.0f} orbits/s per device"
    )
    return {"per_element_s": rows, "steps_per_phase": steps}


if __name__ == "__main__":
    main()
