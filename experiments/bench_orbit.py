"""Benchmark: the hopper's periodic orbit and multiplier, SciPy baseline vs hybrax.

In one run, at rtol = atol = 1e-10:

1. SciPy baseline (`experiments/scipy_hopper.py`: solve_ivp DOP853 with events,
   scipy.optimize.root "hybr", central finite differences): one warm-up call, then
   `--scipy-repeats` timed calls of `orbit_with_multipliers`.
2. hybrax, minimal form: the first call of `hybrax.find_periodic_orbit` (compile +
   run; the compile time is split into tracing, lowering to MLIR and XLA compilation
   with `jax.monitoring` duration events), then `--repeats` warm calls of the full
   orbit + monodromy (AD and saltation product) + multipliers.
3. The same with `analyse=False` (orbit and reduced Jacobian M only; the multiplier
   is then the leading eigenvalue of M).
4. The constrained (descriptor) form, unless `--skip-constrained`.

Every hybrax row does the baseline's work, `phase_observables=False` (no apex
heights: SciPy computes none); one more row runs the library's default, which
records the phase observables (dense output and extrema in every Newton pass),
and one starts Newton's inexact iterations at the loosest tolerance
(`hybrax.ShootingStart(guess, loosening=math.inf)`, as for a rough guess; the
same compiled program).

5. Each public routine called from Python in a loop against the same call under
   the caller's `jax.jit` (the analysed orbit, the orbit alone, one cycle of
   `simulate`, `poincare_map`, a sweep chunk of 8 orbits): the best of
   `--overhead-blocks` blocks of `--overhead-calls` calls, alternating with the
   twin's blocks; the target is 1.2x.

`--profile` adds warm timings of the pieces of one cycle (simulate; its JVP with
`diffrax.ForwardMode()`; `jax.jacfwd` of the cycle end state; `hybrax.monodromy` at
the orbit) to show what bounds the orbit time. `--json` writes the numbers to
`experiments/out/bench_orbit.json` (git-ignored).

Usage: `python experiments/bench_orbit.py [--profile] [--json] [--skip-constrained]`.
"""

import argparse
import json
import math
import os
import pathlib
import platform
import statistics
import sys
import time


HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import scipy_hopper  # noqa: E402


# The baseline's work: orbit, monodromy and multipliers, no phase observables.
SAME_WORK = dict(phase_observables=False)


class CompileEvents:
    """Sums jax.monitoring durations of tracing, lowering and XLA compilation while
    active (only top-level `jit` traces are reported by JAX, so nothing is counted
    twice)."""

    names = {
        "/jax/core/compile/jaxpr_trace_duration": "trace",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
        "/jax/core/compile/backend_compile_duration": "xla",
    }

    def __init__(self):
        self.active = False
        self.totals = {}

    def __call__(self, event, duration, **kwargs):
        if self.active and event in self.names:
            key = self.names[event]
            self.totals[key] = self.totals.get(key, 0.0) + duration

    def start(self):
        self.totals = {"trace": 0.0, "lower": 0.0, "xla": 0.0}
        self.active = True

    def stop(self):
        self.active = False
        return dict(self.totals)


def time_calls(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def summary(times):
    return {"median_s": statistics.median(times), "min_s": min(times), "n": len(times)}


def bench_scipy(tol, repeats):
    scipy_hopper.orbit_with_multipliers(tol=tol)  # warm-up (imports, caches)
    results = []
    times = time_calls(
        lambda: results.append(scipy_hopper.orbit_with_multipliers(tol=tol)), repeats
    )
    state, period, multiplier, nfev = results[-1]
    return {
        "method": "SciPy DOP853 + root(hybr) + central FD",
        "compile_s": None,
        "first_call_s": None,
        **summary(times),
        "multiplier": float(multiplier.real),
        "period": float(period),
        "state": [float(v) for v in state],
        "cycle_simulations": int(nfev),
    }


def public_against_jit(jax, hx, models, p, guess, repeats, blocks):
    """Each public routine called from Python in a loop, against the same call
    inside the caller's `jax.jit` (the program alone, with JAX's dispatch): the
    analysed orbit, the orbit alone, one cycle of `simulate`, `poincare_map` and
    a `sweep_orbits` chunk of 8 parameter points. Per call, the best of
    `blocks` blocks of `repeats` calls, alternating with the twin's blocks."""
    import jax.numpy as jnp

    def block_time(fn, args, n):
        start = time.perf_counter()
        for _ in range(n):
            jax.block_until_ready(fn(*args))
        return (time.perf_counter() - start) / n

    system, section = models.hopper.minimal()[0], models.hopper.section("minimal")
    orbit = hx.find_periodic_orbit(system, section, guess, p)
    mode0 = system.targets[system.transition_index(section.sequence[-1])]
    batch = jax.tree_util.tree_map(
        lambda leaf: jnp.full((8,), leaf) if jnp.ndim(leaf) == 0 else leaf, p
    )
    guesses = jnp.tile(guess, (8, 1))
    calls = {
        "find_periodic_orbit (analysed)": (
            lambda g, q: hx.find_periodic_orbit(system, section, g, q),
            (guess, p),
        ),
        "find_periodic_orbit (orbit only)": (
            lambda g, q: hx.find_periodic_orbit(system, section, g, q, analyse=False),
            (guess, p),
        ),
        "simulate (one cycle)": (
            lambda x, q: hx.simulate(system, x, q, n_events=2, mode0=mode0),
            (orbit.state, p),
        ),
        "poincare_map": (
            lambda u, q: hx.poincare_map(system, section, u, q),
            (orbit.u, p),
        ),
    }
    one_orbit = jax.vmap(
        lambda g, q: hx.find_periodic_orbit(system, section, g, q, analyse=False).u
    )
    # A sweep chunk: `hx.sweep` of one orbit solve over 8 points (one chunk),
    # against the caller's `jax.jit(jax.vmap(...))` of the same solve.
    chunk = jax.jit(one_orbit)

    def element(e):  # one function object: a new one would compile anew
        return hx.find_periodic_orbit(system, section, e[0], e[1], analyse=False).u

    calls["hx.sweep, one chunk of 8 orbits"] = (
        lambda g, q: hx.sweep(element, (g, q), chunk_size=8),
        (guesses, batch),
    )
    rows = []
    for name, (fn, args) in calls.items():
        jitted = chunk if name.startswith("hx.sweep") else jax.jit(fn)
        for _ in range(3):  # warm-up (compilation)
            jax.block_until_ready(fn(*args))
            jax.block_until_ready(jitted(*args))
        # Blocks of `repeats` calls alternating with their `jax.jit` twins, the
        # best block of each: the machine's drift reaches both alike.
        public = inside = math.inf
        for _ in range(blocks):
            public = min(public, block_time(fn, args, repeats))
            inside = min(inside, block_time(jitted, args, repeats))
        rows.append(
            {
                "call": name,
                "public_ms": public * 1e3,
                "jit_ms": inside * 1e3,
                "ratio": public / inside,
            }
        )
    return rows


def bench_hybrax(
    jax, hx, system, section, guess, p, *, analyse, repeats, events, call=None, **kw
):
    import jax.numpy as jnp

    solve = call or (
        lambda: hx.find_periodic_orbit(system, section, guess, p, analyse=analyse, **kw)
    )

    def call():
        return jax.block_until_ready(solve())

    events.start()
    start = time.perf_counter()
    orbit = call()
    floquet = orbit.floquet
    first = time.perf_counter() - start
    parts = events.stop()
    times = time_calls(call, repeats)
    if floquet is not None:
        multiplier = complex(floquet.leading_multiplier)
        extra = {
            "multiplier_saltation": float(floquet.multipliers_saltation[0].real),
            "ad_vs_saltation_max_diff": float(floquet.max_discrepancy),
        }
    else:
        eig = jnp.linalg.eigvals(orbit.reduced_jacobian)
        multiplier = complex(eig[jnp.argmax(jnp.abs(eig))])
        extra = {}
    warm = statistics.median(times)
    return {
        "compile_s": sum(parts.values()),
        "compile_parts_s": parts,
        "first_call_s": first,
        "first_minus_warm_s": first - warm,
        **summary(times),
        "multiplier": multiplier.real,
        "multiplier_imag": multiplier.imag,
        "period": float(orbit.period),
        "state": [float(v) for v in orbit.state],
        "newton_steps": int(orbit.n_steps),
        "converged": bool(orbit.succeeded),
        "residual_norm": float(orbit.residual_norm),
        **extra,
    }


def profile_pieces(jax, hx, models, p, repeats, events, orbit_state):
    import diffrax as dfx
    import jax.numpy as jnp

    system = models.hopper.minimal()[0]
    section = models.hopper.section("minimal")
    x0 = models.hopper.liftoff_state(1.74, p)
    kwargs = dict(n_events=2, settings=hx.Settings(t_max=10.0), mode0="flight")
    forward = dict(kwargs, settings=hx.Settings(t_max=10.0, adjoint=dfx.ForwardMode()))

    def end_state(x, params):
        sol = hx.simulate(system, x, params, **forward)
        return sol.x_after[-1]

    direction = jnp.ones_like(x0)
    jitted_jvp = jax.jit(
        lambda x, params: jax.jvp(lambda y: end_state(y, params), (x,), (direction,))
    )
    jitted_jacfwd = jax.jit(jax.jacfwd(end_state))
    jitted_simulate = jax.jit(
        lambda x, params: hx.simulate(system, x, params, **kwargs).x_after[-1]
    )
    from hybrax._periodic.cycle import _variational_map, resolve_sequence

    sequence = resolve_sequence(system, section)[0]
    u_orbit = section.coordinates(orbit_state, p)

    def variational(full):
        return jax.jit(
            lambda u, params: _variational_map(
                system, section, sequence, hx.Settings(), u, params, full=full
            )[:2]
        )

    tangent_pass, full_pass = variational(False), variational(True)
    pieces = [
        (
            "simulate, one cycle (public call)",
            lambda: hx.simulate(system, x0, p, **kwargs),
        ),
        ("simulate, one cycle (under jax.jit)", lambda: jitted_simulate(x0, p)),
        ("jax.jvp, ForwardMode (under jax.jit)", lambda: jitted_jvp(x0, p)),
        ("jax.jacfwd of cycle end state (jit)", lambda: jitted_jacfwd(x0, p)),
        (
            "variational pass, k columns (Newton step)",
            lambda: tangent_pass(u_orbit, p),
        ),
        (
            "variational pass, full Phi (analysis)",
            lambda: full_pass(u_orbit, p),
        ),
        (
            "hybrax.monodromy at the orbit (AD+salt.)",
            lambda: hx.monodromy(system, section, orbit_state, p),
        ),
    ]
    rows = []
    for name, fn in pieces:
        events.start()
        start = time.perf_counter()
        jax.block_until_ready(fn())
        first = time.perf_counter() - start
        parts = events.stop()
        times = time_calls(lambda: jax.block_until_ready(fn()), repeats)
        rows.append(
            {
                "piece": name,
                "first_call_s": first,
                "compile_s": sum(parts.values()),
                **summary(times),
            }
        )
    return rows


def fmt_ms(seconds):
    return f"{1e3 * seconds:9.3f}"


def print_table(rows, scipy_row):
    ref = scipy_row["median_s"]
    header = (
        f"{'method':<40} {'compile s':>9} {'first s':>8} {'warm ms':>9} "
        f"{'min ms':>9} {'orbits/s':>9} {'vs SciPy':>8} {'multiplier':>14} "
        f"{'diff vs SciPy':>13}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        compile_s = "-" if row["compile_s"] is None else f"{row['compile_s']:9.2f}"
        first = "-" if row["first_call_s"] is None else f"{row['first_call_s']:8.2f}"
        diff = row["multiplier"] - scipy_row["multiplier"]
        print(
            f"{row['method']:<40} {compile_s:>9} {first:>8} {fmt_ms(row['median_s'])} "
            f"{fmt_ms(row['min_s'])} {1 / row['median_s']:9.1f} "
            f"{ref / row['median_s']:7.2f}x {row['multiplier']:14.10f} {diff:13.2e}"
        )


def main():
    parser = argparse.ArgumentParser(
        description="Hopper orbit + multiplier: SciPy baseline vs hybrax."
    )
    parser.add_argument("--scipy-repeats", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=50, help="hybrax warm calls")
    parser.add_argument("--tol", type=float, default=1e-10, help="SciPy rtol = atol")
    parser.add_argument(
        "--overhead-calls", type=int, default=100, help="calls per timed block"
    )
    parser.add_argument(
        "--overhead-blocks", type=int, default=21, help="alternating blocks per call"
    )
    parser.add_argument("--skip-constrained", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", action="store_true", help="write experiments/out/")
    args = parser.parse_args()

    print(
        f"python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs"
    )
    scipy_row = bench_scipy(args.tol, args.scipy_repeats)
    print(
        f"SciPy: {scipy_row['median_s'] * 1e3:.1f} ms/orbit (median of "
        f"{args.scipy_repeats}), {scipy_row['cycle_simulations']} cycle simulations"
    )

    start = time.perf_counter()
    import jax

    jax.config.update("jax_enable_x64", True)
    import diffrax
    import equinox
    import optimistix

    import hybrax as hx
    from hybrax import models

    import_s = time.perf_counter() - start
    print(
        f"jax {jax.__version__} ({jax.devices()[0].platform}), diffrax "
        f"{diffrax.__version__}, optimistix {optimistix.__version__}, equinox "
        f"{equinox.__version__}, hybrax {hx.__version__}; import {import_s:.2f} s"
    )
    events = CompileEvents()
    jax.monitoring.register_event_duration_secs_listener(events)

    p = hx.canonical_params(models.hopper.make_params())
    guess = models.hopper.orbit_guess(p)
    forms = [("minimal", models.hopper.minimal()[0])]
    if not args.skip_constrained:
        forms.append(("constrained", models.hopper.constrained()[0]))
    rows = [scipy_row]
    for form, system in forms:
        section = models.hopper.section(form)

        def run(label, analyse=True, **options):
            print(f"hybrax {form}, {label}: compiling ...", flush=True)
            row = bench_hybrax(
                jax,
                hx,
                system,
                section,
                guess,
                p,
                analyse=analyse,
                repeats=args.repeats,
                events=events,
                **options,
            )
            row["method"] = f"hybrax {form}: {label}"
            rows.append(row)

        run("orbit+Phi(AD,S)+mult", **SAME_WORK)
        run("orbit+M only", analyse=False, **SAME_WORK)
        if form == "minimal":
            # The first Newton iteration at the loosest tolerance, as for a rough
            # guess (the model's is 4% off): the same compiled program.
            rough = hx.ShootingStart(guess, loosening=math.inf)
            run(
                "all, loosening=inf",
                call=lambda: hx.find_periodic_orbit(
                    system, section, rough, p, **SAME_WORK
                ),
            )
            run("all + apexes (default)")
            # The Newton Jacobian by forward-mode AD through the solver instead
            # of the variational equations, and chord iterations reusing the
            # first one (a primal cycle per iteration).
            run(
                "all, Newton, AD Jacobian",
                shooting=hx.Shooting(jacobian="autodiff"),
                **SAME_WORK,
            )
            chord = optimistix.Chord(rtol=1e-11, atol=1e-11)
            run(
                "all, Chord, AD Jacobian",
                shooting=hx.Shooting(chord, jacobian="autodiff"),
                **SAME_WORK,
            )
            # The same-work solve inside the caller's own `jax.jit`: without the
            # public call's host work (argument checks, pytree flattening and
            # dispatch of the system, section and settings).
            jitted = jax.jit(
                lambda params: hx.find_periodic_orbit(
                    system, section, guess, params, **SAME_WORK
                )
            )
            run("all, under the caller's jax.jit", call=lambda: jitted(p))

    print()
    print_table(rows, scipy_row)
    print()
    print("hybrax compile split (trace / lower / XLA, s) and first call - warm median:")
    for row in rows[1:]:
        parts = row["compile_parts_s"]
        print(
            f"  {row['method']:<40} {parts['trace']:6.2f} / {parts['lower']:5.2f} / "
            f"{parts['xla']:6.2f}   first-warm {row['first_minus_warm_s']:6.2f}; "
            f"Newton steps {row['newton_steps']}, converged {row['converged']}, "
            f"|F| {row['residual_norm']:.1e}"
        )
    print(
        "  (rows after the first of a form reuse traces cached by earlier rows, so "
        "their trace time is smaller)"
    )
    print()
    print("multipliers and periods:")
    for row in rows:
        line = (
            f"  {row['method']:<40} {row['multiplier']:.12f}  T = {row['period']:.12f}"
        )
        if "multiplier_saltation" in row:
            line += (
                f"  saltation {row['multiplier_saltation']:.12f}, "
                f"max|Phi_AD - Phi_S| {row['ad_vs_saltation_max_diff']:.1e}"
            )
        print(line)
    worst = max(abs(r["multiplier"] - scipy_row["multiplier"]) for r in rows)
    print(f"  largest multiplier difference vs SciPy: {worst:.2e}")

    print()
    overhead = public_against_jit(
        jax, hx, models, p, guess, args.overhead_calls, args.overhead_blocks
    )
    print("public call against the same computation under the caller's jax.jit")
    print(
        f"  (best of {args.overhead_blocks} alternating blocks of "
        f"{args.overhead_calls} calls, same process; target <= 1.2x):"
    )
    for row in overhead:
        print(
            f"  {row['call']:<34} public {row['public_ms']:7.3f} ms, jit "
            f"{row['jit_ms']:7.3f} ms, {row['ratio']:5.2f}x"
        )
    results = {"settings": vars(args), "rows": rows, "public_vs_jit": overhead}
    if args.profile:
        orbit_state = jax.numpy.asarray(rows[1]["state"])
        print()
        print(
            f"hybrax minimal pieces (warm, {args.repeats} calls; x0 = liftoff(1.74)):"
        )
        prof = profile_pieces(jax, hx, models, p, args.repeats, events, orbit_state)
        # Everything as multiples of one primal cycle (simulate under jit).
        cycle = prof[1]["median_s"]
        print(
            f"  {'piece':<42} {'compile s':>9} {'warm ms':>9} {'min ms':>9} "
            f"{'x cycle':>8}"
        )
        for row in prof:
            print(
                f"  {row['piece']:<42} {row['compile_s']:9.2f} "
                f"{fmt_ms(row['median_s'])} {fmt_ms(row['min_s'])} "
                f"{row['median_s'] / cycle:8.1f}"
            )
        for row in rows[1:]:
            print(
                f"  {'orbit: ' + row['method']:<42} {'':>9} "
                f"{fmt_ms(row['median_s'])} {fmt_ms(row['min_s'])} "
                f"{row['median_s'] / cycle:8.1f}"
            )
        # With the analysis, Newton runs one full variational pass per step (the
        # last one also gives M and the saltation monodromy) and the analysis adds
        # the AD monodromy (jacfwd of the cycle, n tangents); without it, the
        # passes carry the section's k tangent columns only.
        jac, tangent, full = (prof[i]["median_s"] for i in (3, 4, 5))
        estimates = (
            (rows[1], full, "full-column pass + jacfwd", jac),
            (rows[2], tangent, "k-column pass", 0.0),
        )
        for row, pass_time, what, extra in estimates:
            steps = row["newton_steps"]
            print(
                f"  rough estimate, {row['method']}: {steps} Newton steps x {what} "
                f"= {1e3 * (steps * pass_time + extra):.2f} ms (measured "
                f"{1e3 * row['median_s']:.2f} ms)"
            )
        results["profile"] = prof

    if args.json:
        out = HERE / "out"
        out.mkdir(exist_ok=True)
        path = out / "bench_orbit.json"
        path.write_text(json.dumps(results, indent=2, default=str))
        print(f"\nwrote {path.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
