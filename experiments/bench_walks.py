"""Benchmark: batched first-passage walks of the compass gait on random slopes
(`hybrax.first_passage_walks`), the throughput of Monte Carlo estimates of the
mean first-passage time (Byl & Tedrake 2009, "Metastable walking machines",
Int. J. Robotics Research 28(8)).

For each roughness level, `--walkers` walks of at most `--max-steps` steps run
twice: the first call's wall time holds the compilation where the batch size
is new (one program per batch size serves every level), the second is warm.
The baseline, in the same run, is `--baseline` walkers (a small batch, as a
loop over few walks would run). It prints walk steps per second, the gain of
the large batch over the baseline per step, and the time 10^6 walks would take
at that rate.

Measured on the 2-core CPU (`results/bench_walks_cpu_1000.log`): 1000 walkers
walk 0.27x (sigma 0.02 rad) and 0.70x (0.01) the steps per second of 64: the
walks run in calls of 64 steps with every walker in its lane to the call's end,
so the lanes of walkers that fell idle until the batch's slowest falls (a batch
of 1000 at 0.02 rad walks a mean of 9 steps a walker, its slowest about 60),
and the CPU's batch gain levels off at 2.2-2.4x (`bench_vmap_gain.py`). 10^6
walks at 0.01 rad would take about 9 hours on this CPU at the baseline's rate.

Run: `python experiments/bench_walks.py [--sigmas 0.005,0.01,0.02]
[--walkers 10000] [--baseline 64] [--max-steps 400]`; on a GPU,
`--walkers 1000000`.
"""

import argparse
import platform
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="compass-gait")
    parser.add_argument("--sigmas", default="0.005,0.01,0.02")
    parser.add_argument("--walkers", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=64)
    parser.add_argument("--max-steps", type=int, default=400)
    args = parser.parse_args()
    sigmas = [float(s) for s in args.sigmas.split(",")]

    import jax

    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from hybrax import models

    print(
        f"python {platform.python_version()}, jax {jax.__version__} "
        f"({jax.devices()[0].platform}), hybrax {hx.__version__}"
    )
    model = models.get_model(args.model)
    form = model.forms[model.default_form]
    system, section = form.system(), form.section()
    params = hx.canonical_params(model.make_params())
    orbit = hx.find_periodic_orbit(system, section, model.orbit_guess(params), params)
    slope = model.disturbances["slope"]

    def walks(sigma, walkers, seed):
        start = time.perf_counter()
        result = hx.first_passage_walks(
            system,
            section,
            orbit,
            params,
            slope,
            sigma,
            walkers=walkers,
            max_steps=args.max_steps,
            seed=seed,
        )
        return result, time.perf_counter() - start

    header = (
        f"{'sigma':>7} {'walkers':>8} {'MFPT':>8} {'95% interval':>17} "
        f"{'first s':>8} {'warm s':>8} {'steps/s':>10} {'gain':>6} {'1e6 walks':>10}"
    )
    print(header)
    for sigma in sigmas:
        rates = {}
        for walkers in (args.baseline, args.walkers):
            first, first_seconds = walks(sigma, walkers, seed=0)
            warm, warm_seconds = walks(sigma, walkers, seed=1)
            rates[walkers] = warm.steps_walked / warm_seconds
            per_walk = warm_seconds / walkers
            low, high = warm.interval
            print(
                f"{sigma:>7g} {walkers:>8} {warm.mfpt:>8.2f} "
                f"[{low:>7.2f}, {high:>7.2f}] {first_seconds:>8.2f} "
                f"{warm_seconds:>8.2f} {rates[walkers]:>10.0f} "
                f"{rates[walkers] / rates[args.baseline]:>5.2f}x "
                f"{1e6 * per_walk:>9.0f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
