"""The five-link biped's controller from a falling start: gradient against CMA-ES and
Nelder-Mead on the same objective.

The problem is `hybrax tune biped5`'s (`hybrax.models.biped5`): ten controller
numbers (`TUNED`), starting from `FALLING_START` (the swing hip's set point at 0:
from its default state the walker trips at its second step); wanted: a period-one
gait at 0.8 m/s (to 2%) with every nontrivial multiplier below 0.9 in modulus,
with the smallest cost of transport. The figure of merit is the wall time until
the first evaluation that is such a gait (a "stable gait"), compile time apart.

- **gradient**: `hybrax.tune` with its existence stage (Levenberg-Marquardt on the
  periodicity defect over the orbit and the parameters), then BFGS on the
  penalised objective with implicit-function gradients (reverse mode).
- **CMA-ES** (the `cma` package) and **Nelder-Mead** (SciPy) minimise the same
  objective with values only: where an orbit is found (Newton from the last
  orbit found, else the model's guess), the tuning's final-stage objective
  J = c_t + ((v - 0.8) / 0.016)^2 + 1e3 max(0, rho - 0.8991)^2; where none is, the
  existence stage's objective plus 1e3 (the squared periodicity defect of one
  step from the guess: a slope towards walking), or 1e6 where that step falls.

Each method gets the same evaluation budget; an evaluation is one orbit solve
(with its gradient for the gradient method). Compile time: every program is run
once before the clock starts, except the gradient method's, whose first run
(cold) and second run (warm) are both timed.

Run: `python experiments/bench_tune_biped.py [--budget 300]` (needs
`pip install cma`, or `pip install -e ".[experiments]"`).
"""

import argparse
import dataclasses
import math
import os
import platform
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=300, help="evaluations each")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import cma
    import jax
    import jax.numpy as jnp
    import numpy as np
    import scipy.optimize

    jax.config.update("jax_enable_x64", True)
    import equinox as eqx

    import hybrax as hx
    from hybrax.models import biped5 as b5

    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.2f}; jax {jax.__version__}, cma {cma.__version__}"
    )
    params = hx.canonical_params(
        dataclasses.replace(b5.Biped5Params(), **b5.FALLING_START)
    )
    system, section = b5.biped5()[0], b5.section()
    names = b5.TUNED
    scale = 0.5
    start = np.array([float(getattr(params, n)) for n in names])
    target, tolerance, bound = 0.8, 0.016, 0.9
    quantities = b5.ORBIT_QUANTITIES

    def speed_error(orbit, p):
        return quantities["speed"](orbit, p) - target

    def is_stable_gait(rho, speed):
        return (
            math.isfinite(rho)
            and rho < bound
            and math.isfinite(speed)
            and abs(speed - target) <= tolerance
        )

    # --- the value-only objective (CMA-ES, Nelder-Mead, and checking) ---------
    def with_values(y):
        p = params
        for name, value in zip(names, y * scale):
            p = eqx.tree_at(lambda q, name=name: getattr(q, name), p, value)
        return p

    @jax.jit
    def evaluate(y, u_guess):
        p = with_values(y)
        orbit = hx.find_periodic_orbit(system, section, u_guess, p, analyse=False)
        speed = quantities["speed"](orbit, p)
        rho = orbit.spectral_radius
        excess = jnp.maximum(rho - bound * (1 - 1e-3), 0.0)
        J = (
            quantities["cost_of_transport"](orbit, p)
            + ((speed - target) / tolerance) ** 2
            + 1e3 * excess**2
        )
        u_next, step = hx.poincare_map(system, section, u_guess, p)
        defect = jnp.sum((u_next - u_guess) ** 2)
        fallback = jnp.where(step.result == hx.RESULTS.successful, 1e3 + defect, 1e6)
        return (
            jnp.where(orbit.succeeded, J, fallback),
            orbit.succeeded,
            orbit.u,
            rho,
            speed,
        )

    guess0 = jnp.asarray(b5.orbit_guess(params))

    class Counter:
        def __init__(self, label):
            self.label, self.n, self.first_stable, self.best = label, 0, None, math.inf
            self.u = guess0
            self.t0 = time.perf_counter()

        def __call__(self, y):
            J, ok, u, rho, speed = jax.device_get(
                evaluate(jnp.asarray(y, dtype=float), self.u)
            )
            self.n += 1
            if bool(ok):
                self.u = jnp.asarray(u)
            if (
                self.first_stable is None
                and bool(ok)
                and is_stable_gait(float(rho), float(speed))
            ):
                self.first_stable = (self.n, time.perf_counter() - self.t0, float(J))
            self.best = min(self.best, float(J))
            if self.n > args.budget:
                raise StopIteration
            return float(J)

    y0 = start / scale
    evaluate(jnp.asarray(y0), guess0)[0].block_until_ready()  # compile apart

    results = {}
    # --- CMA-ES -----------------------------------------------------------
    counter = Counter("CMA-ES")
    options = {"seed": args.seed + 1, "verbose": -9, "maxfevals": args.budget}
    try:
        cma.fmin(counter, y0, 0.2, options=options)
    except StopIteration:
        pass
    results["CMA-ES"] = (counter, time.perf_counter() - counter.t0, 0.0)

    # --- Nelder-Mead ------------------------------------------------------
    counter = Counter("Nelder-Mead")
    try:
        scipy.optimize.minimize(
            counter,
            y0,
            method="Nelder-Mead",
            options={"maxfev": args.budget, "initial_simplex": None},
        )
    except StopIteration:
        pass
    results["Nelder-Mead"] = (counter, time.perf_counter() - counter.t0, 0.0)

    # --- gradient: hybrax.tune ------------------------------------------------
    def run_tune(record):
        began = time.perf_counter()

        def callback(step):
            record.append((step, time.perf_counter() - began))

        return hx.tune(
            system,
            section,
            guess0,
            params,
            quantities["cost_of_transport"],
            vary=list(names),
            scale=[scale] * len(names),
            constraints=[(speed_error, tolerance)],
            max_multiplier=bound,
            tune_settings=hx.TuneSettings(max_steps=args.budget, seek_steps=30),
            callback=callback,
        )

    cold_record, warm_record = [], []
    t0 = time.perf_counter()
    run_tune(cold_record)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    tuned = run_tune(warm_record)
    warm = time.perf_counter() - t0
    # The first tuning step at a stable gait at the target speed (checked with the
    # value-only evaluation, warm-started from the step's orbit).
    first = None
    for step, elapsed in warm_record:
        if step.stage != "tune" or not step.orbit_found:
            continue
        y = np.array([step.values[n] for n in names]) / scale
        J, ok, _, rho, speed = jax.device_get(
            evaluate(jnp.asarray(y), jnp.asarray(step.u))
        )
        if bool(ok) and is_stable_gait(float(rho), float(speed)):
            first = (step.step + 1, elapsed, float(J))
            break

    print()
    print(
        f"budget {args.budget} evaluations each; stable gait: rho < {bound}, "
        f"|v - {target}| <= {tolerance} m/s"
    )
    print(
        f"{'method':<13}{'evals':>7}{'wall s':>9}{'best J':>12}"
        f"{'evals to gait':>15}{'s to gait':>11}"
    )
    base = None
    if first is not None:
        base = first[1]
    rows = [("gradient", len(warm_record), warm, tuned.objective, first)]
    for label, (counter, wall, _) in results.items():
        rows.append((label, counter.n, wall, counter.best, counter.first_stable))
    for label, n, wall, best, found in rows:
        to_gait = "never" if found is None else f"{found[0]}"
        seconds = "-" if found is None else f"{found[1]:.1f}"
        print(f"{label:<13}{n:>7}{wall:>9.1f}{best:>12.5g}{to_gait:>15}{seconds:>11}")
    print()
    print(
        f"gradient: cold run {cold:.1f} s, warm {warm:.1f} s: compile about "
        f"{cold - warm:.1f} s; final stable {tuned.stable}, "
        f"rho {float(tuned.orbit.spectral_radius):.4f}"
    )
    if base is not None:
        for label, (counter, _, _) in results.items():
            if counter.first_stable is not None:
                print(
                    f"time to a stable gait, {label} / gradient: "
                    f"{counter.first_stable[1] / base:.1f}x"
                )
            else:
                print(f"{label}: no stable gait within the budget")


if __name__ == "__main__":
    main()
