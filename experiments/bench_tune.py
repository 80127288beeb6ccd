"""Gradient-based tuning against SciPy's Nelder-Mead on the same objective.

Demo (a) of the tuning issue on the paper's hopper: the (d_G, k) whose upper mass
hops to 1.15 m (to 1 mm) with the smallest nontrivial multiplier, from the paper's
parameters (d_G = -80 N s/m, k = 15000 N/m). Both methods minimise

    J = rho + ((apex_upper - 1.15) / 1e-3)^2

in the scaled coordinates (d_G / 80, k / 15000), rho the spectral radius:
`hybrax.tune` (BFGS with implicit-function gradients, the target's penalty
tightened in stages 0.1 m, 1 cm, 1 mm) and `scipy.optimize.minimize(...,
method="Nelder-Mead")` on the same compiled hybrax objective (values only), its
penalty tightened in the same stages. Compile time is reported apart from run time
(the tuning runs twice; the second, warm run's wall time is its run time).

Run: `python experiments/bench_tune.py [--max-evals 400]`.
"""

import argparse
import os
import platform
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-evals", type=int, default=400)
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp
    import numpy as np
    import scipy.optimize

    jax.config.update("jax_enable_x64", True)
    import equinox as eqx

    import hybrax as hx
    from hybrax import models

    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.2f}; jax {jax.__version__}"
    )
    params = hx.canonical_params(models.hopper.make_params())
    system, section = models.hopper.minimal()[0], models.hopper.section()
    target, tolerance = 1.15, 1e-3
    scale = np.array([80.0, 15000.0])
    start = np.array([float(params.d_G), float(params.k)])

    def apex_error(orbit, p):
        return orbit.cycle.phase_observables["apex_upper"][0] - target

    def spectral_radius(orbit, p):
        return orbit.spectral_radius

    # --- gradient: hybrax.tune ---------------------------------------------
    # (The objective and constraint are the same function objects in both runs:
    # new ones would be new programs to compile.)
    def run_tune():
        return hx.tune(
            system,
            section,
            models.hopper.orbit_guess(params),
            params,
            spectral_radius,
            vary=["d_G", "k"],
            scale=scale,
            constraints=[(apex_error, tolerance)],
            tune_settings=hx.TuneSettings(max_steps=args.max_evals, mode="reverse"),
            progress=False,
            # as in the README's figures ("auto" is forward here)
        )

    # The first run compiles; the second, identical, is warm: its wall time is the
    # run time and the difference is compilation.
    t0 = time.perf_counter()
    run_tune()
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = run_tune()
    gradient_run = time.perf_counter() - t0
    gradient_compile = cold - gradient_run
    apex = float(result.orbit.cycle.phase_observables["apex_upper"][0])
    rho = float(result.orbit.spectral_radius)

    # --- Nelder-Mead on the same objective, values only ---------------------
    # The same penalty, tightened in the same stages (target widths 0.1 m, 1 cm,
    # 1 mm), each stage a Nelder-Mead run from the previous one's result.
    @jax.jit
    def objective(y, u, width):
        p = eqx.tree_at(lambda q: (q.d_G, q.k), params, tuple(y * scale))
        orbit = hx.find_periodic_orbit(system, section, u, p, analyse=False)
        apex_ = orbit.cycle.phase_observables["apex_upper"][0]
        value = orbit.spectral_radius + ((apex_ - target) / (width * tolerance)) ** 2
        return value, orbit.u

    u0 = models.hopper.orbit_guess(params)
    t0 = time.perf_counter()
    jax.block_until_ready(objective(jnp.asarray(start / scale), u0, 100.0))
    nm_compile = time.perf_counter() - t0
    warm = {"u": u0}
    count = [0]

    def f(y, width):
        count[0] += 1
        value, u = objective(jnp.asarray(y), warm["u"], width)
        value = float(value)
        if np.isfinite(value):
            warm["u"] = u  # the same warm start as the gradient method's
            return value
        return 1e12  # no orbit: a wall for the simplex

    t0 = time.perf_counter()
    x = start / scale
    for width in (100.0, 10.0, 1.0):
        nm = scipy.optimize.minimize(
            f,
            x,
            args=(width,),
            method="Nelder-Mead",
            options=dict(maxfev=args.max_evals - count[0], xatol=1e-9, fatol=1e-12),
        )
        x = nm.x
        if count[0] >= args.max_evals:
            break
    nm_run = time.perf_counter() - t0
    value, u = objective(jnp.asarray(x), warm["u"], 1.0)
    p_nm = eqx.tree_at(lambda q: (q.d_G, q.k), params, tuple(jnp.asarray(x * scale)))
    orbit_nm = hx.find_periodic_orbit(system, section, u, p_nm, analyse=False)
    apex_nm = float(orbit_nm.cycle.phase_observables["apex_upper"][0])
    rho_nm = float(orbit_nm.spectral_radius)

    print()
    print(
        f"{'method':<26} {'evals':>6} {'run [s]':>8} {'compile [s]':>11} "
        f"{'d_G':>9} {'k':>9} {'apex [m]':>10} {'rho':>9} {'target met':>10}"
    )
    rows = [
        (
            "hybrax.tune (BFGS, grad)",
            result.n_evaluations,
            gradient_run,
            gradient_compile,
            result.values["d_G"],
            result.values["k"],
            apex,
            rho,
        ),
        (
            "SciPy Nelder-Mead",
            count[0],
            nm_run,
            nm_compile,
            x[0] * scale[0],
            x[1] * scale[1],
            apex_nm,
            rho_nm,
        ),
    ]
    for name, evals, run, compile_s, d_G, k, apex_, rho_ in rows:
        met = abs(apex_ - target) <= tolerance
        print(
            f"{name:<26} {evals:>6d} {run:>8.2f} {compile_s:>11.1f} {d_G:>9.3f} "
            f"{k:>9.1f} {apex_:>10.6f} {rho_:>9.6f} {str(met):>10}"
        )
    print(
        f"\nwall time to the result, run only: Nelder-Mead / gradient = "
        f"{nm_run / gradient_run:.2f}; evaluations {count[0]} / "
        f"{result.n_evaluations} (a gradient evaluation costs an orbit solve and a "
        "reverse pass)"
    )


if __name__ == "__main__":
    main()
