"""What `jax.vmap` gains per element on this backend: the hopper's Newton step (one
variational pass of a cycle with the section's k tangent columns, as `sweep_orbits`
runs it) and, for comparison, a plain diffrax solve of a linear ODE of the same
size with no events, both batched over 1 ... 512 lanes against the unbatched call
of the same run.

On the 2-core CPU the gain levels off at 2.2-2.4x from 32 lanes on (hopper: 450,
293, 183, 188, 170 us per element at 1, 8, 32, 128, 512 lanes, 416 us
unbatched), and the plain diffrax solve gains about the same (2.3-2.6x): the
batched step's arithmetic, not the dispatch of XLA's kernels, bounds the CPU
batch, and hybrax's event machinery costs a batch no more than it costs a single
call. The program holds no custom calls (no LAPACK call per element). Times are
CPU seconds per call (medians), compile time apart.

Run: `python experiments/bench_vmap_gain.py [--lanes 1,8,32,128,512] [--repeats 15]`.
"""

import argparse
import platform
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", default="1,8,32,128,512")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    lanes = [int(n) for n in args.lanes.split(",")]

    import diffrax as dfx
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from hybrax import models
    from hybrax._periodic.cycle import _variational_map, resolve_sequence

    print(
        f"python {platform.python_version()}, jax {jax.__version__} "
        f"({jax.devices()[0].platform}), hybrax {hx.__version__}"
    )
    system, section = models.hopper.minimal()[0], models.hopper.section()
    sequence = resolve_sequence(system, section)[0]
    settings = hx.Settings(rtol=1e-10, atol=1e-10, t_max=5.0)

    def newton_step(u, params):
        u_next, M, _, _ = _variational_map(
            system, section, sequence, settings, u, params, full=False
        )
        return u_next, M

    # The stance-like linear ODE of the hopper's size (4 states), no events.
    A = jnp.array(
        [[0, 0, 1, 0], [0, 0, 0, 1], [-100.0, 100, -1, 1], [100, -100, 1, -1]]
    )
    gravity = jnp.array([0.0, 0.0, 9.81, 9.81])

    def plain_solve(y0, _):
        sol = dfx.diffeqsolve(
            dfx.ODETerm(lambda t, y, args: A @ y - gravity),
            dfx.Tsit5(),
            0.0,
            0.5,
            None,
            y0,
            stepsize_controller=dfx.PIDController(rtol=1e-10, atol=1e-10),
            saveat=dfx.SaveAt(t1=True),
            max_steps=4096,
        )
        return sol.ys[-1]

    def cpu_time(fn, *arguments):
        start = time.perf_counter()
        jax.block_until_ready(fn(*arguments))
        compile_s = time.perf_counter() - start
        times = []
        for _ in range(args.repeats):
            start = time.process_time()
            jax.block_until_ready(fn(*arguments))
            times.append(time.process_time() - start)
        return statistics.median(times), compile_s

    def batch(n):
        base = models.hopper.HopperParams()
        rng = np.random.default_rng(0)
        mu = rng.uniform(0.79, 0.81, n)
        params = eqx.tree_at(lambda p: p.mu, base, mu)
        params = jax.tree_util.tree_map(
            lambda leaf: jnp.broadcast_to(jnp.asarray(leaf, float), (n,)), params
        )
        u = jax.vmap(models.hopper.orbit_guess)(params)
        states = jnp.array([1.0, 0.2, 0.0, 1.0]) + 0.01 * jnp.arange(n)[:, None]
        return params, u, states

    params1, u1, states1 = batch(1)
    single = jax.tree_util.tree_map(lambda leaf: leaf[0], (params1, u1, states1))
    for name, fn, pick in (
        ("hopper Newton step (variational pass)", newton_step, lambda b: (b[1], b[0])),
        ("plain diffrax Tsit5, 4 states", plain_solve, lambda b: (b[2], b[0])),
    ):
        unbatched, compile_s = cpu_time(jax.jit(fn), *pick(single))
        print(
            f"\n{name}: unbatched {1e6 * unbatched:.1f} us per call "
            f"(compile {compile_s:.1f} s)"
        )
        print(f"  {'lanes':>6} {'us per element':>15} {'gain vs unbatched':>18}")
        batched = jax.jit(jax.vmap(fn))
        for n in lanes:
            seconds, _ = cpu_time(batched, *pick(batch(n)))
            per_element = seconds / n
            gain = unbatched / per_element
            print(f"  {n:>6} {1e6 * per_element:>15.1f} {gain:>17.2f}x")


if __name__ == "__main__":
    main()
