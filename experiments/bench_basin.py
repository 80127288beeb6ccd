"""Benchmark: the simplest walker's basin of attraction (`hybrax.basin`), batched
in one `jit(vmap(...))`, against a loop of single simulations in the same run.

In one run, at the library's default settings (rtol = atol = 1e-10):

1. The long-period gait at slope 0.009 (`find_periodic_orbit`, no Floquet
   analysis: the basin needs its point and reduced Jacobian).
2. `hybrax.basin` on an `--n` x `--n` grid of (theta, theta_dot) at heel strike
   over [0.1, 0.3] x [-0.35, -0.05] (the command's default grid), `--steps`
   steps each: the first call (compilation, reported as trace / lowering / XLA
   from `jax.monitoring`, and the run), then a second call (warm); starts/s =
   n^2 / warm time.
3. The baseline: `--baseline` starts of the same grid, each simulated alone by
   one jitted `hybrax.simulate` through `--steps` heel strikes (what one writes
   without a batched driver), warm, in a Python loop; its time per start scaled
   to the grid gives the ratio.
4. The classes of the baseline's starts against the basin's (they must agree).

Usage: `python experiments/bench_basin.py [--n 100] [--steps 20]`; on a GPU,
`--n 1000`.
"""

import argparse
import os
import platform
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="grid points per axis")
    parser.add_argument("--steps", type=int, default=20, help="steps per start")
    parser.add_argument("--chunk", type=int, default=None, help="starts per call")
    parser.add_argument(
        "--baseline", type=int, default=40, help="starts simulated one by one"
    )
    args = parser.parse_args()
    os.environ.setdefault("EQX_ON_ERROR", "nan")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    print(
        f"python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from bench_orbit import CompileEvents
    from hybrax.models import simplest_walker as sw

    print(
        f"jax {jax.__version__}, {jax.local_device_count()} device(s) "
        f"({jax.devices()[0].platform})"
    )
    events = CompileEvents()
    jax.monitoring.register_event_duration_secs_listener(events)

    system, section = sw.simplest_walker()[0], sw.section()
    params = hx.canonical_params(sw.SimplestWalkerParams(slope=0.009))
    start = time.perf_counter()
    orbit = hx.find_periodic_orbit(
        system, section, sw.orbit_guess(params), params, analyse=False
    )
    print(
        f"orbit: u = {np.asarray(orbit.u)}, spectral radius "
        f"{float(orbit.spectral_radius):.4f}, {time.perf_counter() - start:.1f} s "
        "(compilation included)"
    )
    theta = np.linspace(0.1, 0.3, args.n)
    theta_dot = np.linspace(-0.35, -0.05, args.n)
    starts = np.stack(np.meshgrid(theta, theta_dot, indexing="ij"), -1)

    def run():
        return hx.basin(
            system,
            section,
            starts,
            params,
            orbit=orbit,
            n_cycles=args.steps,
            chunk_size=args.chunk,
        )

    events.start()
    start = time.perf_counter()
    basin = run()
    first = time.perf_counter() - start
    compile_parts = events.stop()
    start = time.perf_counter()
    basin = run()
    warm = time.perf_counter() - start
    n = args.n**2
    parts = "/".join(f"{compile_parts[k]:.1f}" for k in ("trace", "lower", "xla"))
    print(
        f"basin {args.n} x {args.n}, {args.steps} steps: first call {first:.1f} s "
        f"(compile trace/lower/xla {parts} s), warm {warm:.2f} s -> "
        f"{n / warm:.0f} starts/s"
    )
    print(f"  outcomes: {basin.counts()}")

    @jax.jit
    def one(u):
        solution = hx.simulate(
            system,
            section.chart(u, params),
            params,
            n_events=args.steps,
            settings=hx.Settings(t_max=50.0 * args.steps),
            phase_observables=False,
        )
        return section.coordinates(solution.x_after[-1], params), solution.result

    flat = starts.reshape(-1, 2)
    picks = np.random.default_rng(0).choice(
        n, size=min(args.baseline, n), replace=False
    )
    jax.block_until_ready(one(jnp.asarray(flat[picks[0]])))  # compile
    start = time.perf_counter()
    outcomes = [jax.block_until_ready(one(jnp.asarray(flat[i]))) for i in picks]
    per_start = (time.perf_counter() - start) / len(picks)
    baseline_total = per_start * n
    print(
        f"baseline: one jitted simulate per start, {per_start * 1e3:.2f} ms each -> "
        f"{baseline_total:.1f} s for the grid; basin (warm) is "
        f"{baseline_total / warm:.1f}x faster"
    )
    names = basin.outcome_names().reshape(-1)
    agree = 0
    for i, (u_last, result) in zip(picks, outcomes):
        status = hx.status_name(result)[0]
        if status == "terminal_event":
            expected = {"falls"}
        elif status == "successful":
            close = np.max(np.abs(np.asarray(u_last) - np.asarray(orbit.u)))
            expected = (
                {"orbit"} if close <= basin.tolerance else {"periodic", "unsettled"}
            )
        else:
            expected = {"failed"}
        agree += names[i] in expected
    print(f"classes agree with the single runs: {agree}/{len(picks)}")


if __name__ == "__main__":
    main()
