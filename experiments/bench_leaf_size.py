"""What a diffrax step costs on this backend as a function of the size of each leaf
of the state, with XLA's CPU small-loop limit as hybrax sets it (default) or as
XLA leaves it (`--xla-default`).

The same linear ODE $\\dot y = -y\\cos t$ is solved with `diffrax.Tsit5` at a
constant step (3000 steps, so that step-size control and events play no part) with
a state of $n$ entries held as one array, and as a tuple of arrays of at most 4
entries. The arithmetic grows linearly with $n$. With XLA's default limit (1024
bytes) the solver's loop runs as a sequence of kernel calls and the time per step
grows by steps at leaf sizes (on the 2-core machine about 0.45 us up to 4 entries,
1.2 us for 6 to 9, 3.6 us from 10), which had made hybrax carry a larger $\\Phi$
as a tuple of columns. With the limit that importing hybrax raises
(`hybrax._xla_cpu`) the loop is one kernel: 0.21 us for 4 entries, 0.26 us for 16,
and splitting costs more (0.66 us for 16 entries in four leaves), so $\\Phi$ is one
leaf. Compile time is reported apart from the warm run time; each row's ratio is
against the 4-entry single leaf of the same run.

Run: `python experiments/bench_leaf_size.py [--xla-default] [--sizes
2,4,6,8,10,16,32] [--repeats 20]`.
"""

import argparse
import os
import platform
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,4,6,8,10,16,32")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument(
        "--xla-default",
        action="store_true",
        help="XLA's own small-loop limit instead of the one hybrax sets",
    )
    args = parser.parse_args()
    if args.xla_default:
        limit = "xla_cpu_small_while_loop_byte_threshold=1024"
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_backend_extra_options={limit}".strip()
    import diffrax as dfx
    import jax
    import jax.numpy as jnp

    import hybrax  # noqa: F401  (sets the limit unless XLA_FLAGS holds one)

    jax.config.update("jax_enable_x64", True)
    print(
        f"python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, jax {jax.__version__} "
        f"({jax.devices()[0].platform}), diffrax {dfx.__version__}; XLA_FLAGS "
        f"{os.environ.get('XLA_FLAGS', '')!r}"
    )
    dt = 1e-3

    def solver_for(parts):
        def solve(y0):
            y = tuple(jnp.split(y0, parts)) if parts > 1 else y0

            def field(t, y, args):
                return jax.tree_util.tree_map(lambda v: -v * jnp.cos(t), y)

            return dfx.diffeqsolve(
                dfx.ODETerm(field),
                dfx.Tsit5(),
                0.0,
                args.steps * dt,
                dt,
                y,
                stepsize_controller=dfx.ConstantStepSize(),
                saveat=dfx.SaveAt(t1=True),
                max_steps=args.steps + 10,
            ).ys

        return jax.jit(solve)

    sizes = [int(v) for v in args.sizes.split(",")]
    cases = [(n, 1) for n in sizes] + [
        (n, n // 4) for n in sizes if n > 4 and n % 4 == 0
    ]
    rows = []
    for n, parts in cases:
        solve = solver_for(parts)
        y0 = jnp.ones(n)
        start = time.perf_counter()
        jax.block_until_ready(solve(y0))
        compile_s = time.perf_counter() - start
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            jax.block_until_ready(solve(y0))
            times.append(time.perf_counter() - start)
        per_step_us = 1e6 * statistics.median(times) / args.steps
        rows.append((n, parts, compile_s, per_step_us))
    baseline = next((r[3] for r in rows if r[0] == 4 and r[1] == 1), rows[0][3])
    header = ("entries", "leaves", "first call s", "us/step", "x (4, 1)")
    print("\n{:>7} {:>6} {:>12} {:>8} {:>8}".format(*header))
    for n, parts, compile_s, per_step_us in rows:
        print(
            f"{n:7d} {parts:6d} {compile_s:12.2f} {per_step_us:8.3f} "
            f"{per_step_us / baseline:8.2f}"
        )


if __name__ == "__main__":
    main()
