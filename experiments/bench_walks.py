"""Benchmark: batched first-passage walks of the compass gait on random slopes
(`hybrax.first_passage_walks`), the throughput of Monte Carlo estimates of the
mean first-passage time (Byl & Tedrake 2009, "Metastable walking machines",
Int. J. Robotics Research 28(8)).

For each roughness level, `--walkers` walks of at most `--max-steps` steps run
twice in each of two ways: the baseline, every walk in its own lane at once
(`lanes=walkers`: a lane whose walk fell idles until the batch's slowest
falls), and `--lanes` lanes that take the next walk as theirs ends. The first
call's wall time holds the compilation where the shapes are new (one program
per number of walkers and lanes serves every level), the second is warm. It
prints walk steps per second, the lanes' gain over the baseline, and the time
10^6 walks would take at that rate. Both give the same walks (the disturbances
are drawn per walk and step).

Measured on the 2-core CPU (`results/bench_walks_cpu_1000.log`, beside a test
run): 64 lanes walk 4.4x (sigma 0.01 rad) and 3.4x (0.02) the steps per second
of 1000 lanes, the same walks; 10^6 walks at 0.01 rad would take about 3 hours
on this CPU in 64 lanes, 13 hours in lanes of every walk.

Run: `python experiments/bench_walks.py [--sigmas 0.01,0.02]
[--walkers 1000] [--lanes 64] [--max-steps 200]`; on a GPU, `--walkers
1000000 --lanes 65536`.
"""

import argparse
import platform
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="compass-gait")
    parser.add_argument("--sigmas", default="0.01,0.02")
    parser.add_argument("--walkers", type=int, default=1000)
    parser.add_argument("--lanes", type=int, default=64)
    parser.add_argument("--max-steps", type=int, default=200)
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

    def walks(sigma, lanes, seed):
        start = time.perf_counter()
        result = hx.first_passage_walks(
            system,
            section,
            orbit,
            params,
            slope,
            sigma,
            walkers=args.walkers,
            max_steps=args.max_steps,
            seed=seed,
            lanes=lanes,
        )
        return result, time.perf_counter() - start

    header = (
        f"{'sigma':>7} {'lanes':>8} {'MFPT':>8} {'95% interval':>17} "
        f"{'first s':>8} {'warm s':>8} {'steps/s':>10} {'gain':>6} {'1e6 walks':>10}"
    )
    print(f"{args.walkers} walks of at most {args.max_steps} steps")
    print(header)
    for sigma in sigmas:
        rates = {}
        for lanes in (args.walkers, args.lanes):
            _, first_seconds = walks(sigma, lanes, seed=0)
            warm, warm_seconds = walks(sigma, lanes, seed=1)
            rates[lanes] = warm.steps_walked / warm_seconds
            low, high = warm.interval
            print(
                f"{sigma:>7g} {lanes:>8} {warm.mfpt:>8.2f} "
                f"[{low:>7.2f}, {high:>7.2f}] {first_seconds:>8.2f} "
                f"{warm_seconds:>8.2f} {rates[lanes]:>10.0f} "
                f"{rates[lanes] / rates[args.walkers]:>5.2f}x "
                f"{1e6 * warm_seconds / args.walkers:>9.0f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
