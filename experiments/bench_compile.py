"""Benchmark: what compiling costs, per model and program, cold and from the cache.

For each model (the zoo's hopper in minimal and constrained coordinates, compass
gait, simplest walker, five-link biped, jumper, and `runner_model.py`, a model
written with the public API alone) and each program:

- `simulate`: `hybrax.simulate` over a few cycles;
- `orbit`: `hybrax.find_periodic_orbit` with the Floquet analysis;
- `grad`: `jax.jit(jax.grad(...))` of an orbit quantity (the period) with respect
  to one parameter (a user's own transformation of the library's orbit);
- `tune`: one `hybrax.tune` step (its objective's value and gradient programs);
- `sweep`: one `hybrax.sweep_orbits` chunk;
- `continue`: `hybrax.continue_orbits` to its first points;

it runs the program in a fresh process with an empty cache directory
(`hybrax.enable_compilation_cache`), then in a second fresh process with that
cache, and reports the seconds of tracing, lowering and XLA compilation of each
(hybrax's compile records; for `grad`, JAX's own monitoring events), the first
call's wall time, the warm run time (median of `--repeats` calls) and how many
programs XLA compiled rather than loaded from the cache. It ends with the targets
(the analysed orbit's seconds, `grad` and `tune` against the orbit, the second
process's compilations and tracing), each met or missed, and the bound measured
for each one missed. Compile times are a first-class cost: the table and targets
are in docs/pages/performance.md.

With `--commands orbit,simulate` it also times the command line's `hybrax orbit
MODEL` and `hybrax simulate MODEL` (figures and all, as a user runs them) for the
zoo's models, with a fresh `HYBRAX_CACHE_DIR`, then again with that cache: the
targets of 10 s cold and 3 s repeated; `--commands tune` times `hybrax tune MODEL`
and sums the seconds of the compilations it announces, against 20 s.

Usage: `python experiments/bench_compile.py [--models hopper,compass-gait]
[--programs orbit,simulate] [--repeats 5] [--commands orbit,simulate] [--json]`.
Runs each measurement in its own process (2 per model and program); on a 2-core
CPU the full table takes about half an hour. Prints the machine and its load
first.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time


HERE = pathlib.Path(__file__).resolve().parent
MODELS = (
    "hopper",
    "hopper-constrained",
    "compass-gait",
    "simplest-walker",
    "biped5",
    "jumper",
    "runner",
)
PROGRAMS = ("simulate", "orbit", "grad", "jacfwd", "tune", "sweep", "continue")
# The models `--commands` runs (the zoo's, by their command-line names; the runner
# and the hopper's constrained form are not commands' models).
COMMAND_MODELS = ("hopper", "compass-gait", "simplest-walker", "biped5", "jumper")


def _setup(model_name):
    """`(system, section, guess, params, parameter name, quantity, x0, n_events)`
    of a model."""
    import jax.numpy as jnp

    import hybrax as hx

    if model_name == "runner":
        sys.path.insert(0, str(HERE))
        import runner_model

        system, params = runner_model.runner()
        section = runner_model.section()
        guess = runner_model.orbit_guess(params)
        x0 = section.chart(guess, params)
        return system, section, guess, params, "push", x0, 9, "descent"
    from hybrax import models

    name, form_name = model_name, None
    if model_name == "hopper-constrained":
        name, form_name = "hopper", "constrained"
    model = models.get_model(name)
    form_name = form_name or model.default_form
    form = model.forms[form_name]
    system = form.system()
    params = hx.canonical_params(model.make_params())
    if model.orbit_guess is None:
        # A model without periodic orbits (the jumper): its simulation only, from
        # its default state, as `hybrax simulate` runs it.
        per_cycle = 1 if form.section is None else len(form.section().sequence)
        x0 = jnp.asarray(model.default_state(params), dtype=float)
        return system, None, None, params, None, x0, 3 * per_cycle, 0
    section = form.section()
    guess = jnp.asarray(model.orbit_guess(params), dtype=float)
    parameter = (
        model.presentation.continuation.parameter
        if model.presentation.continuation is not None
        else model.presentation.tune.vary[0]
    )
    x0 = section.chart(guess, params)
    sequence = tuple(system.transition_index(k) for k in section.sequence)
    mode0 = system.targets[sequence[-1]]
    return system, section, guess, params, parameter, x0, 3 * len(sequence), mode0


class NotApplicable(Exception):
    """The program does not apply to the model (a row of the table says so)."""


def _program(model_name, program):
    """A zero-argument function that runs the program once and blocks."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import hybrax as hx

    system, section, guess, params, parameter, x0, n_events, mode0 = _setup(model_name)
    if parameter is None:
        handle = None
    elif model_name == "runner":
        handle = hx.FieldParameter(parameter)
    else:
        from hybrax import models

        handle = models.get_model(model_name.split("-constrained")[0]).parameter(
            parameter
        )

    if program == "simulate":
        return lambda: hx.simulate(system, x0, params, n_events=n_events, mode0=mode0)
    if section is None:
        raise NotApplicable(f"{model_name} has no periodic orbit")
    if program == "orbit":
        return lambda: hx.find_periodic_orbit(system, section, guess, params)
    if program == "grad":

        def period(value):
            p = handle.set(params, value)
            return hx.find_periodic_orbit(
                system, section, guess, p, analyse=False
            ).period

        gradient = jax.jit(jax.grad(period))
        value = jnp.asarray(handle.get(params), dtype=float)
        return lambda: gradient(value)
    if program in ("jacfwd", "jacfwd-eager"):
        # Forward mode through an orbit: the fixed point's sensitivity to one
        # parameter, under the caller's `jax.jit` or eager.
        def fixed_point(value):
            p = handle.set(params, value)
            return hx.find_periodic_orbit(system, section, guess, p, analyse=False).u

        sensitivity = jax.jacfwd(fixed_point)
        if program == "jacfwd":
            sensitivity = jax.jit(sensitivity)
        value = jnp.asarray(handle.get(params), dtype=float)
        return lambda: sensitivity(value)
    if program == "tune":
        return lambda: hx.tune(
            system,
            section,
            guess,
            params,
            lambda orbit, p: orbit.period,
            vary=[handle],
            tune_settings=hx.TuneSettings(max_steps=1),
        )
    if program == "sweep":
        value = float(handle.get(params))
        values = value * (1 + 0.01 * np.linspace(-1, 1, 8))
        batch = jax.vmap(lambda v: handle.set(params, v))(jnp.asarray(values))
        return lambda: hx.sweep_orbits(
            system, section, jnp.broadcast_to(guess, (8, guess.shape[0])), batch
        )
    if program == "continue":
        value = float(handle.get(params))
        return lambda: hx.continue_orbits(
            system,
            section,
            guess,
            params,
            handle,
            start=value,
            stop=(value - 0.5 * abs(value) - 0.1, value + 0.5 * abs(value) + 0.1),
            direction=1,
            continuation_settings=hx.ContinuationSettings(max_points=3),
            throw=False,
        )
    raise ValueError(program)


def worker(model_name, program, cache, repeats):
    """One measurement in this (fresh) process; prints one line of JSON."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import hybrax as hx
    from hybrax import _compile

    hx.enable_compilation_cache(
        cache, keep_traced=os.environ.get("BENCH_KEEP_TRACED", "1") == "1"
    )
    totals = {"trace": 0.0, "lower": 0.0, "xla": 0.0}
    names = {
        "/jax/core/compile/jaxpr_trace_duration": "trace",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
        "/jax/core/compile/backend_compile_duration": "xla",
    }

    # Executables JAX asked XLA for (each a backend-compile event, loaded from the
    # persistent cache or not), and those the cache had: the difference is what
    # this process compiled, programs the cache refused included (every program,
    # whatever its size, is written: `enable_compilation_cache` sets no minimum).
    cache = {"executables": 0, "hits": 0}

    def listen(event, duration, **kwargs):
        if event in names:
            totals[names[event]] += duration
        if names.get(event) == "xla":
            cache["executables"] += 1

    def count(event, **kwargs):
        if event == "/jax/compilation_cache/cache_hits":
            cache["hits"] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    jax.monitoring.register_event_listener(count)
    run = _program(model_name, program)
    start = time.perf_counter()
    jax.block_until_ready(run())
    first = time.perf_counter() - start
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(run())
        warm.append(time.perf_counter() - start)
    records = list(_compile.COMPILATIONS)
    print(
        json.dumps(
            {
                "first": first,
                "warm": statistics.median(warm) if warm else None,
                "jax": totals,
                "xla_compiled": cache["executables"] - cache["hits"],
                "xla_loaded": cache["hits"],
                "records": [dataclasses.asdict(r) for r in records],
            }
        )
    )


def measure(model_name, program, cache, repeats):
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            model_name,
            program,
            cache,
            "--repeats",
            str(repeats),
        ],
        capture_output=True,
        text=True,
        # As the compilation how-to says for scripts that use the cache: without
        # it, programs that differentiate an event's time hold a host callback.
        env=dict(os.environ, EQX_ON_ERROR=os.environ.get("EQX_ON_ERROR", "nan")),
    )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1]
        if last.startswith("NotApplicable") or "NotApplicable:" in last:
            return {"skipped": last.split(":", 1)[-1].strip()}
        return {"error": last}
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_command(command, model, repeats=2):
    """Wall seconds of `hybrax COMMAND MODEL` in fresh processes, and the seconds
    of the compilations each announces, summed (compilations in threads overlap):
    the first with an empty `HYBRAX_CACHE_DIR`, then `repeats - 1` more with that
    cache; `None` where the command fails (its last line is printed)."""
    seconds, compiling = [], []
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, HYBRAX_CACHE_DIR=str(pathlib.Path(folder) / "cache"))
        env.setdefault("MPLBACKEND", "Agg")
        hybrax = pathlib.Path(sys.executable).with_name("hybrax")
        argv = [str(hybrax), command, model, "--out", str(pathlib.Path(folder) / "o")]
        for _ in range(repeats):
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, capture_output=True, text=True)
            seconds.append(time.perf_counter() - start)
            announced = re.findall(
                r"^compiled .* in ([0-9.]+) s", done.stdout + done.stderr, re.M
            )
            compiling.append(sum(float(value) for value in announced))
            if done.returncode != 0:
                lines = (done.stderr or done.stdout).strip().splitlines()
                print(f"hybrax {command} {model} failed: {lines[-1] if lines else ''}")
                return None
    return seconds, compiling


def _row(result):
    if "skipped" in result:
        return f"n/a: {result['skipped']}"
    if "error" in result:
        return f"failed: {result['error'][:60]}"
    jax_ = result["jax"]
    return (
        f"{result['first']:7.2f} {jax_['trace']:6.2f} {jax_['lower']:6.2f} "
        f"{jax_['xla']:6.2f} {1000 * result['warm']:9.2f} "
        f"{result.get('xla_compiled', -1):8d}"
    )


# The targets (2-core CPU, idle, fresh process, empty cache), and where one
# is missed, the bound measured (docs/pages/performance.md has the measurements).
ORBIT_SECONDS = {"hopper": 3.0}  # every other model: 6 s
ORBIT_BOUND = (
    "the traced cycle: each phase an event-driven diffrax solve with optimistix's "
    "event root find and its implicit derivative, traced for the solve and again "
    "under jax.jacfwd for the AD monodromy (half of XLA's part)"
)
DERIVATIVE_BOUND = (
    "the derivative's own flow: the transposed cycle (reverse mode) or the "
    "variational tangent (forward mode), beside the solve"
)
CACHED_BOUND = (
    "a program outside hybrax's store of traced programs: the caller's own "
    "jax.jit / jax.grad / jax.jacfwd of a routine is the caller's program, traced "
    "in every process (jax.export's Exported.call has no JVP or batching rule)"
)
TUNE_BOUND = (
    "the tuning objective's one program: the orbit with its gradient in every "
    "varied parameter under the stability bound (twice the analysed orbit), and "
    "the existence stage's residual with its Jacobian"
)
COMMAND_BOUND = (
    "cold: the command's programs (the analysed orbit above, the figures' "
    "simulation beside it); repeated (hopper, by cProfile): importing JAX, "
    "matplotlib and the models (2 s), loading the kept programs (1.2 s), drawing "
    "the figures with matplotlib (2.5 s, half of it its constrained layout)"
)


def _targets(table):
    """Lines stating each target, the figure this run measured, and the bound of a
    missed one."""
    rows = {
        (r["model"], r["program"], r["process"]): r
        for r in table
        if "first" in r  # measured (not skipped, not failed)
    }
    lines = ["targets (first call in a fresh process with an empty cache):"]

    def state(met, text, bound):
        lines.append(f"  {'met   ' if met else 'MISSED'} {text}")
        if not met:
            lines.append(f"         bound: {bound}")

    models = dict.fromkeys(model for model, _, _ in rows)
    for model in models:
        orbit = rows.get((model, "orbit", "cold"))
        if orbit is not None:
            limit = ORBIT_SECONDS.get(model, 6.0)
            state(
                orbit["first"] <= limit,
                f"{model}: analysed orbit {orbit['first']:.1f} s <= {limit:.0f} s",
                ORBIT_BOUND,
            )
            for program in ("grad", "tune"):
                derivative = rows.get((model, program, "cold"))
                if derivative is not None:
                    ratio = derivative["first"] / orbit["first"]
                    state(
                        ratio <= 2.0,
                        f"{model}: {program} {derivative['first']:.1f} s, "
                        f"{ratio:.2f}x the orbit's <= 2x",
                        DERIVATIVE_BOUND,
                    )
    for row in table:
        if row.get("program") == "hybrax tune":
            state(
                row["compiling"][0] <= 20.0,
                f"hybrax tune {row['model']}: {row['compiling'][0]:.1f} s of "
                f"compilation, cold (<= 20 s)",
                TUNE_BOUND,
            )
        elif "seconds" in row:
            cold, repeat = row["seconds"][:2]
            state(
                cold <= 10.0 and repeat <= 3.0,
                f"{row['program']} {row['model']}: {cold:.1f} s cold (<= 10 s), "
                f"{repeat:.1f} s repeated (<= 3 s)",
                COMMAND_BOUND,
            )
    for (model, program, process), row in rows.items():
        if process != "cached":
            continue
        compiled, trace = row.get("xla_compiled", 0), row["jax"]["trace"]
        state(
            compiled == 0 and trace <= 1.0,
            f"{model} {program}, second process: {compiled} XLA compilations "
            f"(0), {trace:.2f} s of tracing (<= 1 s)",
            CACHED_BOUND,
        )
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--programs", default=",".join(PROGRAMS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commands", default="", help="e.g. orbit,simulate")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--no-keep-traced",
        action="store_true",
        help="workers enable the compilation cache without hybrax's store of "
        "traced programs (the baseline of the store)",
    )
    parser.add_argument("--worker", nargs=3, metavar=("MODEL", "PROGRAM", "CACHE"))
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.repeats)
        return
    if args.no_keep_traced:
        os.environ["BENCH_KEEP_TRACED"] = "0"
    models = [m for m in args.models.split(",") if m]
    programs = [p for p in args.programs.split(",") if p]
    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start; "
        f"python {platform.python_version()}; workers run with "
        f"EQX_ON_ERROR={os.environ.get('EQX_ON_ERROR', 'nan')}; traced programs "
        f"{'not ' if args.no_keep_traced else ''}kept (hybrax's store)"
    )
    print(
        "seconds: first call (compile + run), then JAX's trace / lower / XLA "
        "within it; warm run in ms (median); programs XLA compiled (not from the "
        "cache)"
    )
    header = f"{'model':<20} {'program':<9} {'process':<7} {'first':>7} {'trace':>6} "
    header += f"{'lower':>6} {'XLA':>6} {'warm ms':>9} {'compiled':>8}"
    print(header)
    table = []
    for model_name in models:
        for program in programs:
            with tempfile.TemporaryDirectory() as cache:
                cold = measure(model_name, program, cache, args.repeats)
                cached = measure(model_name, program, cache, args.repeats)
            for label, result in (("cold", cold), ("cached", cached)):
                print(f"{model_name:<20} {program:<9} {label:<7} {_row(result)}")
                table.append(
                    dict(model=model_name, program=program, process=label, **result)
                )
            sys.stdout.flush()
    commands = [c for c in args.commands.split(",") if c]
    if commands:
        print(
            f"{'command':<32} {'cold (s)':>9} {'repeat (s)':>10} "
            f"{'compiling, cold (s)':>19}"
        )
    for command in commands:
        for model_name in models:
            if model_name not in COMMAND_MODELS or (
                command == "orbit" and model_name == "jumper"  # no periodic orbit
            ):
                continue
            timed = time_command(command, model_name)
            if timed is None:
                continue
            seconds, compiling = timed
            name = f"hybrax {command} {model_name}"
            print(
                f"{name:<32} {seconds[0]:9.2f} {seconds[1]:10.2f} {compiling[0]:19.2f}"
            )
            table.append(
                dict(
                    model=model_name,
                    program=f"hybrax {command}",
                    seconds=seconds,
                    compiling=compiling,
                )
            )
            sys.stdout.flush()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    print()
    for line in _targets(table):
        print(line)
    if args.json:
        out = HERE / "out"
        out.mkdir(exist_ok=True)
        (out / "bench_compile.json").write_text(json.dumps(table, indent=1))
        print(f"wrote {out / 'bench_compile.json'}")


if __name__ == "__main__":
    main()
