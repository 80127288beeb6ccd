"""The `hybrax` command line: `hybrax <command> <model> [options]`.

A thin argparse wrapper over the public API. Each command is a `_add_<command>`
function that registers a subparser (sharing `_add_common_model_args`) and sets as its
defaults `run=_run_<command>` (`(args, parser) -> int`) and `command_parser` (itself);
each model is a registered `hybrax.ModelBundle` (`hybrax.models.get_model`) that says
how to build its parameters, initial state, systems, Poincaré sections and orbit
guess, and in its `hybrax.ModelPresentation` its own summaries and figures; no
command holds model vocabulary. Exit codes: 0 success, 1 a run that did not
succeed (its status is printed and what was computed is still written), 2 bad
arguments (argparse's convention).
"""

import argparse
import concurrent.futures
import contextlib
import dataclasses
import importlib
import importlib.metadata
import io
import json
import math
import os
import pathlib
import re
import sys
import textwrap
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np


_PROG = "hybrax"
# Signed guards are scaled to O(1); below this a start past the guard is rounding.
_GUARD_NOTE_TOL = 1e-6


def _enable_x64() -> None:
    """Run JAX in float64: event times and orbits need it. Call before any array is
    made."""
    import jax

    jax.config.update("jax_enable_x64", True)


def _enable_cache() -> str | None:
    """The library's cache of compiled programs between runs, for the command
    line."""
    from ._programs import enable_compilation_cache

    return enable_compilation_cache()


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def _params_dict(params) -> dict[str, float]:
    return {f.name: float(getattr(params, f.name)) for f in dataclasses.fields(params)}


def _load_model(parser: argparse.ArgumentParser, name: str):
    """The registered model's [`hybrax.ModelBundle`][] (imported on demand)."""
    from ._registry import get_model

    try:
        return get_model(name)
    except ValueError as error:
        parser.error(f"argument model: {error}")


# ---------------------------------------------------------------------------
# Shared arguments
# ---------------------------------------------------------------------------


def _add_common_model_args(parser: argparse.ArgumentParser) -> None:
    """The model positional and `--set`, `--out`, `--json`, shared by commands."""
    from ._registry import model_names

    parser.add_argument(
        "model", choices=model_names(), help="the model to use (see `hybrax models`)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a model parameter (repeatable; `hybrax models` lists them)",
    )
    parser.add_argument(
        "--params",
        type=pathlib.Path,
        default=None,
        metavar="FILE",
        help="take the parameters from a file: a `hybrax tune` result (its "
        "final parameters), any command's JSON (its `params`), a NAME: VALUE "
        "object, or a result saved by hybrax.save (a TuneResult or the model's "
        "parameters); --set overrides it",
    )
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path("hybrax-out"),
        metavar="DIR",
        help="directory for the figures (default: %(default)s)",
    )
    parser.add_argument(
        "--json",
        type=pathlib.Path,
        default=None,
        metavar="FILE",
        help="also write the results as JSON to FILE",
    )
    output = parser.add_argument_group("output options")
    output.add_argument(
        "--no-figures",
        dest="figures",
        action="store_false",
        help="write no figures or animations (the tables and JSON still)",
    )
    output.add_argument(
        "--format",
        choices=("png", "pdf", "svg"),
        default="png",
        help="the figures' file format (default: %(default)s; animations stay GIF)",
    )
    output.add_argument(
        "--dpi",
        type=bounded_int(30, 1200),
        default=150,
        help="resolution of raster figures (default: %(default)s)",
    )
    output.add_argument(
        "--fps",
        type=_positive_float,
        default=25.0,
        help="animation frames per second of simulated time, played at that rate "
        "(real time; at most 600 frames, a longer run plays faster) "
        "(default: %(default)g)",
    )
    talk = output.add_mutually_exclusive_group()
    talk.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print nothing but warnings and errors (no results, no progress)",
    )
    talk.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print the library's log (logger `hybrax`: each compilation and "
        "what is kept between runs, and why not) on stderr",
    )


@contextlib.contextmanager
def _log_to_stderr():
    """Within the block, the `hybrax` logger's records (INFO and above) go to
    stderr, one line each (`-v`)."""
    import logging

    logger = logging.getLogger("hybrax")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("hybrax: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


#: The largest count any numeric option takes (cycles, points, iterations,
#: steps): beyond it a run would not end in a working day, or would not fit in
#: memory, on any machine this runs on.
MAX_COUNT = 100_000


def _finite_float(text: str) -> float:
    """An argparse type: a finite number."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def bounded_int(low: int, high: int):
    """An argparse type: an integer in `[low, high]` (the upper bound keeps a
    count from asking for more memory or time than any run could use)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {low} to {high}, got {text!r}"
            )
        return value

    parse.__name__ = "integer"
    return parse


def _unit_interval(text: str) -> float:
    """An argparse type: a number in (0, 1), e.g. a relative tolerance."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (math.isfinite(value) and 0 < value < 1):
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text!r}")
    return value


# The solver options of every command and their defaults: those of
# `hybrax.Settings` (a test checks that they agree), so that a command and a
# library call with default settings compute the same thing. A command that
# needs other defaults says why in its help (`add_solver_args`).
TOL = 1e-10
T_MAX = 50.0
MAX_ODE_STEPS = 4096
SOLVER_POLICY = (
    "Every command takes the solver options --tol (rtol = atol of the step-size "
    f"controller, default {TOL:g}), --t-max (the time limit of a run or of one "
    f"cycle, default {T_MAX:g}) and --max-ode-steps (integration steps per "
    f"phase, default {MAX_ODE_STEPS}), the defaults of the library's "
    "hybrax.Settings; only `orbit` (--tol 1e-12, for its monodromy cross-check) "
    "and `sweep` (--t-max 5: a batch waits for its slowest element) differ."
)


def add_solver_args(
    parser: argparse.ArgumentParser,
    *,
    tol: float = TOL,
    t_max: float = T_MAX,
    why: str = "",
) -> None:
    """`--tol`, `--t-max` and `--max-ode-steps` with the common defaults (see
    `SOLVER_POLICY`); `why` says why a command's `tol` or `t_max` differs."""
    note = f"; {why}" if why else ""
    group = parser.add_argument_group(
        "solver options", f"the same in every command (`hybrax --help`){note}"
    )
    group.add_argument(
        "--tol",
        type=_unit_interval,
        default=tol,
        metavar="TOL",
        help="integration tolerance rtol = atol (default: %(default)g)",
    )
    group.add_argument(
        "--t-max",
        type=_positive_float,
        default=t_max,
        metavar="T",
        help="give up a run (or a cycle) not done by time T (default: %(default)g)",
    )
    group.add_argument(
        "--max-ode-steps",
        type=bounded_int(16, 10_000_000),
        default=MAX_ODE_STEPS,
        metavar="N",
        help="integration steps allowed per phase (default: %(default)s); a "
        "change compiles the programs again",
    )


def solver_settings(args: argparse.Namespace, **extra):
    """The `hybrax.Settings` of the solver options in `args` (`extra`: other
    fields, e.g. the adjoint)."""
    from ._settings import Settings

    return Settings(
        rtol=args.tol,
        atol=args.tol,
        t_max=args.t_max,
        max_steps=args.max_ode_steps,
        **extra,
    )


def solver_record(args: argparse.Namespace) -> dict:
    """The solver options of a run, for its JSON."""
    return {"tol": args.tol, "t_max": args.t_max, "max_ode_steps": args.max_ode_steps}


# The options the library's advice names (see `_for_command`).
SOLVER_OPTIONS = ("--t-max", "--max-ode-steps")


def _check_outputs(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse unusable `--out`/`--json` paths before any computation: a file where
    a directory is wanted or the reverse, or a place where a real write fails
    (the folders are created and a file written in each and removed)."""
    from ._io import probe_writable

    out = getattr(args, "out", None)
    if out is not None:
        if out.exists() and not out.is_dir():
            parser.error(f"argument --out: {str(out)!r} exists and is not a directory")
        problem = probe_writable(out)
        if problem is not None:
            parser.error(f"argument --out: {problem}")
    path = getattr(args, "json", None)
    if path is not None:
        if path.is_dir():
            parser.error(f"argument --json: {str(path)!r} is a directory")
        if path.exists() and not os.access(path, os.W_OK):
            parser.error(f"argument --json: cannot write {str(path)!r}")
        parent = path.parent if str(path.parent) else pathlib.Path(".")
        problem = probe_writable(parent)
        if problem is not None:
            parser.error(f"argument --json: {problem}")


def _read_params_file(
    parser: argparse.ArgumentParser, model, path: pathlib.Path
) -> dict[str, float]:
    """The parameter values of a `--params` file (checked: one line and exit 2
    on a bad file)."""
    if _is_archive(path):
        data = _params_of_archive(parser, model, path)
    else:
        try:
            data = json.loads(path.read_text())
        except OSError as error:
            parser.error(
                f"argument --params: cannot read {str(path)!r}: {error.strerror}"
            )
        except ValueError:
            parser.error(
                f"argument --params: {str(path)!r} is neither JSON nor a result "
                "saved by hybrax.save"
            )
    if isinstance(data, dict) and isinstance(data.get("final"), dict):
        data = data["final"]
    if isinstance(data, dict) and isinstance(data.get("params"), dict):
        data = data["params"]
    if not isinstance(data, dict):
        parser.error(f"argument --params: {str(path)!r} holds no parameter object")
    values: dict[str, float] = {}
    for name, value in data.items():
        if name not in model.parameters:
            parser.error(
                f"argument --params: unknown {model.name} parameter {name!r} in "
                f"{str(path)!r}"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            parser.error(f"argument --params: {name} must be a number, got {value!r}")
        values[name] = float(value)
    return values


def _is_archive(path: pathlib.Path) -> bool:
    """Whether `path` is a zip file (as `hybrax.save` writes), by its first bytes."""
    try:
        with open(path, "rb") as file:
            return file.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _load_archive(parser: argparse.ArgumentParser, path: pathlib.Path):
    from ._archive import load

    try:
        return load(path)
    except ValueError as error:
        parser.error(f"argument --params: {error}".replace("`path`: ", ""))


def _params_of_archive(parser, model, path: pathlib.Path) -> dict:
    """The parameters held by a result saved with `hybrax.save`: a
    `hybrax.TuneResult` (its tuned parameters) or the model's parameter object
    itself, as a NAME: VALUE dictionary."""
    saved = _load_archive(parser, path)
    params = getattr(saved, "params", saved)
    expected = type(model.make_params())
    if not isinstance(params, expected):
        parser.error(
            f"argument --params: {str(path)!r} holds no {model.name} parameters "
            f"(a {type(saved).__name__}; save a hybrax.TuneResult of this model or "
            f"its {expected.__name__})"
        )
    return {
        field.name: np.asarray(getattr(params, field.name)).item()
        for field in dataclasses.fields(params)
        if np.ndim(getattr(params, field.name)) == 0
    }


def _params_file_vector(path: pathlib.Path | None, key: str, size: int):
    """A vector stored beside the parameters of a `--params` file (a `hybrax tune`
    result's final orbit `u` or `state`, in its JSON or as a saved
    `hybrax.TuneResult`), or None where there is none of that size. The file has
    been checked by `_read_params_file`."""
    if path is None:
        return None
    if _is_archive(path):
        from ._archive import load

        orbit = getattr(load(path), "orbit", None)
        value = None if orbit is None else np.asarray(getattr(orbit, key, None))
        if value is None or value.shape != (size,) or not np.all(np.isfinite(value)):
            return None
        return value.astype(float)
    data = json.loads(path.read_text())
    for place in (data.get("final"), data) if isinstance(data, dict) else ():
        if isinstance(place, dict):
            value = place.get(key)
            if (
                isinstance(value, list)
                and len(value) == size
                and all(isinstance(v, (int, float)) for v in value)
            ):
                return np.asarray(value, dtype=float)
    return None


def _parse_sets(
    parser: argparse.ArgumentParser,
    model,
    items: Sequence[str],
    params_file: pathlib.Path | None = None,
) -> dict[str, float]:
    """The parameter values from a `--params` file, then each `--set`. The
    file's values are checked against the model's rules on their own, so that a
    bad one is blamed on the file and its key."""
    base = {} if params_file is None else _read_params_file(parser, model, params_file)
    if base:
        try:
            model.make_params(**base)
        except ValueError as error:
            parser.error(f"argument --params: in {str(params_file)!r}: {error}")
    values: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            parser.error(f"argument --set: expected NAME=VALUE, got {item!r}")
        if name not in model.parameters:
            parser.error(
                f"argument --set: unknown parameter {name!r}; known: "
                f"{', '.join(model.parameters)}"
            )
        if name in values:
            parser.error(f"argument --set: parameter {name!r} given twice")
        try:
            values[name] = float(text)
        except ValueError:
            parser.error(
                f"argument --set: parameter {name!r} needs a number, got {text!r}"
            )
    return {**base, **values}


def _make_params(parser: argparse.ArgumentParser, model, values: dict[str, float]):
    try:
        return model.make_params(**values)
    except ValueError as error:
        parser.error(f"argument --set: {error}")


def _add_form_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--form",
        default=None,
        help="model formulation (default: the model's first; the hopper has "
        "minimal and constrained)",
    )


def _form_name(parser: argparse.ArgumentParser, model, args: argparse.Namespace) -> str:
    """The `--form` asked for (the model's first by default), checked."""
    name = model.default_form if args.form is None else args.form
    if name not in model.forms:
        parser.error(
            f"argument --form: invalid choice {name!r} for model "
            f"{args.model!r} (choose from {', '.join(model.forms)})"
        )
    return name


def _parse_state(parser: argparse.ArgumentParser, model, text: str) -> np.ndarray:
    names = model.state_names
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != len(names):
        parser.error(
            f"argument --x0: expected {len(names)} comma-separated values "
            f"({','.join(names)}), got {len(parts)}"
        )
    try:
        state = np.array([float(part) for part in parts])
    except ValueError:
        parser.error(f"argument --x0: not a list of numbers: {text!r}")
    if not np.all(np.isfinite(state)):
        parser.error(f"argument --x0: values must be finite, got {text!r}")
    return state


def _status(result) -> tuple[str, str]:
    """The name and message of a concrete `hybrax.RESULTS` item."""
    from ._solution import status_message, status_name

    return status_name(result)[0], status_message(result)[0]


# The library's advice names `Settings` fields; a command names its own option,
# or gives the advice without one where it has none.
_LIBRARY_ADVICE = (
    (
        "No transition occurred before `t_max`:",
        "--t-max",
        "No transition occurred before --t-max:",
        "No transition occurred before the time limit:",
    ),
    (
        "Increase `t_max` or check the initial state and parameters.",
        "--t-max",
        "Increase --t-max or check the initial state and parameters.",
        "Check the initial state and parameters.",
    ),
    (
        "Try increasing `max_steps`.",
        "--max-ode-steps",
        "Try increasing --max-ode-steps.",
        "A phase took more integration steps than allowed: its dynamics are stiff "
        "there, or the motion left the model's domain.",
    ),
)


def _for_command(message: str, options: Sequence[str] = ()) -> str:
    """A status message with the library's advice (`Settings.t_max`,
    `max_steps`) turned into the command's `options`, or said without an option
    where the command has none."""
    for library, option, with_option, without in _LIBRARY_ADVICE:
        message = message.replace(
            library, with_option if option in options else without
        )
    return message


def _number(value) -> float | None:
    """A JSON-safe float: NaN and infinities become `null`."""
    value = float(value)
    return value if math.isfinite(value) else None


# The layout of the commands' JSON files (raised when a key changes meaning).
JSON_SCHEMA = 1


def _write_json(path: pathlib.Path, payload: dict[str, Any]) -> pathlib.Path:
    """`payload` as JSON at `path`, after the keys `hybrax` (the version) and
    `schema` (`JSON_SCHEMA`), written under a temporary name and renamed
    (a run killed mid-write leaves no partial file; see `hybrax._io.write_file`
    for where it goes if that fails); returns the path written."""
    from ._io import write_file

    # Every result file says what wrote it and in which layout.
    payload = {
        "hybrax": importlib.metadata.version("hybrax"),
        "schema": JSON_SCHEMA,
        **payload,
    }
    text = json.dumps(payload, indent=2, allow_nan=False) + "\n"
    with contextlib.suppress(OSError):  # (else the write's own fallback)
        if path.parent != pathlib.Path(""):
            path.parent.mkdir(parents=True, exist_ok=True)
    return write_file(path, lambda temporary: temporary.write_text(text))


# ---------------------------------------------------------------------------
# simulate
# ---------------------------------------------------------------------------


def _add_simulate(subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a model through a number of cycles",
        description=(
            "Simulate a model from an initial state through --cycles cycles of its "
            "event sequence (for the hopper a hop: a touchdown and a lift-off), "
            "print the event table, and write figures (and optionally JSON)."
        ),
    )
    _add_common_model_args(parser)
    parser.add_argument(
        "--x0",
        default=None,
        metavar="X1,X2,...",
        help=(
            "initial state in the model's minimal coordinates (default: the "
            "model's; for the hopper zU,zL,vU,vL with both masses at rest and the "
            "foot 0.1 m up)"
        ),
    )
    parser.add_argument(
        "--cycles",
        "--hops",
        dest="cycles",
        type=bounded_int(1, MAX_COUNT),
        default=None,
        metavar="N",
        help="number of cycles of the model's event sequence (hops of the hopper: "
        "2N events; one event each for a model with one transition) "
        "(default: the model's, 5 for most)",
    )
    _add_form_arg(parser)
    add_solver_args(parser)
    parser.set_defaults(run=_run_simulate, command_parser=parser)


def _format_state(x) -> str:
    return "[" + ", ".join(f"{v:+.6f}" for v in x) + "]"


# The widest line the command line prints (a terminal's common width and more).
_TABLE_WIDTH = 100


def _folded(text: str, indent: int = 2, width: int = _TABLE_WIDTH) -> str:
    """`text` indented by two spaces and wrapped to `width` columns, its
    continuation lines indented by `indent` more."""
    return "\n".join(
        textwrap.wrap(
            text,
            width,
            initial_indent="  ",
            subsequent_indent=" " * (2 + indent),
            break_on_hyphens=False,
        )
    )


def _params_lines(values: dict[str, float]) -> str:
    """The parameters as `name=value` pairs, wrapped to the table's width."""
    return _folded(", ".join(f"{k}={v:g}" for k, v in values.items()), indent=0)


def _event_table(trajectory, width: int = _TABLE_WIDTH) -> list[str]:
    """The events, one line each (time, kind, states before and after, energy
    lost and kept); where that line would be wider than `width`, each event's
    states go on lines of their own below it, wrapped to `width`."""
    state_width = len(_format_state(np.zeros(trajectory.x_before.shape[-1])))
    kind_width = max([9, *(len(kind) for kind in trajectory.event_kinds)])
    folded = 3 + 2 + 10 + 2 + kind_width + 2 * (2 + state_width) + 22 > width
    energy_header = f"{'T_c [J]':>9}  {'T_a [J]':>9}"
    if folded:
        header = f"{'#':>3}  {'t [s]':>10}  {'event':<{kind_width}}  {energy_header}"
    else:
        header = (
            f"{'#':>3}  {'t [s]':>10}  {'event':<{kind_width}}  "
            f"{'state before':<{state_width}}  {'state after':<{state_width}}  "
            f"{energy_header}"
        )
    lines = [header]
    for k, kind in enumerate(trajectory.event_kinds):
        T_c, T_a = trajectory.T_c[k], trajectory.T_a[k]
        energy = (
            f"{T_c:9.4f}  {T_a:9.4f}"
            if np.isfinite(T_c) and np.isfinite(T_a)
            else f"{'':9}  {'':9}"
        )
        before = _format_state(trajectory.x_before[k])
        after = _format_state(trajectory.x_after[k])
        lead = f"{k + 1:>3}  {trajectory.t_events[k]:10.6f}  {kind:<{kind_width}}  "
        if not folded:
            lines.append(f"{lead}{before}  {after}  {energy}".rstrip())
            continue
        lines.append(f"{lead}{energy}".rstrip())
        for label, text in (("before", before), ("after", after)):
            lines += textwrap.wrap(
                text,
                width,
                initial_indent=f"{'':5}{label:<7}",
                subsequent_indent=" " * 12,
                break_on_hyphens=False,
            )
    return lines


def _explain_stop(model, system, solution, params) -> str | None:
    """What happened, in the model's words where it has them, when a run stopped on
    a degenerate event (a mode that cannot start, Zeno, grazing)."""
    status, _ = _status(solution.result)
    cause = int(np.asarray(solution.cause_transition))
    if cause < 0:
        return None
    transition = system.transitions[cause].name
    mode = system.modes[int(np.asarray(solution.mode_final))].name
    t = float(np.asarray(solution.t_final))
    explain = model.presentation.explain
    hint = None if explain is None else explain(status, mode, transition, params)
    if status == "mode_not_viable":
        text = (
            f"the {mode} mode cannot start at t = {t:.6f} s: the {transition} guard "
            "fires at the instant it begins (events would pile up at one instant)"
        )
    elif status == "zeno":
        text = (
            f"{transition} events accumulate (Zeno) at t = "
            f"{float(np.asarray(solution.zeno_time)):.9f} s (extrapolated)"
        )
    elif status == "grazing_event":
        text = f"the {transition} guard was met tangentially (grazing) at t = {t:.6f} s"
    elif status == "infeasible_initial_state":
        text = f"the initial state is already past the {transition} guard"
    elif status == "armed_beyond_guard":
        text = (
            f"the {transition} guard was already past its crossing when it became "
            f"armed, in the phase that began at t = {t:.6f} s (a missed crossing)"
        )
    elif status == "terminal_event":
        text = f"the run ended on the terminal {transition} event at t = {t:.6f} s"
    else:
        return None
    return text + ("" if hint is None else f"; {hint}")


def _run_simulate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import jax
    import jax.numpy as jnp

    from ._simulate import simulate
    from ._solution import RESULTS
    from .plot import Trajectory

    model = _load_model(parser, args.model)
    form_name = _form_name(parser, model, args)
    if args.cycles is None:
        args.cycles = model.presentation.simulate_cycles
    params = _make_params(
        parser, model, _parse_sets(parser, model, args.set, args.params)
    )
    stored = _params_file_vector(args.params, "state", len(model.state_names))
    if args.x0 is None and stored is not None:
        x0 = stored  # a tuned gait's state, where its orbit starts
    elif args.x0 is None:
        x0 = np.asarray(model.default_state(params), dtype=float)
    else:
        x0 = _parse_state(parser, model, args.x0)
    form = model.forms[form_name]
    system = form.system()
    # Events per cycle: the section's sequence where the model declares one.
    per_cycle = 1 if form.section is None else len(form.section().sequence)
    n_events = per_cycle * args.cycles
    # Python floats would be static under `eqx.filter_jit`: one compilation per
    # parameter value. As arrays, one compilation (and cache entry) serves them all.
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype=float), params)
    state0 = x0 if form.from_minimal is None else form.from_minimal(x0)

    try:
        solution = simulate(
            system,
            jnp.asarray(state0, dtype=float),
            params,
            n_events=n_events,
            settings=solver_settings(args),
            n_save=200,
        )
    except ValueError as error:  # a state outside its mode's declared domain
        source = "--x0" if args.x0 is not None else "--set"
        parser.error(f"argument {source}: {str(error).replace('`x0`', 'the state')}")
    trajectory = Trajectory.from_solution(solution, system, to_minimal=form.to_minimal)
    status, message = _status(solution.result)
    succeeded = bool(solution.result == RESULTS.successful)

    print(f"{args.model} ({form_name}), parameters:")
    print(_params_lines(_params_dict(params)))
    print(
        _folded(
            f"x0 = {_format_state(x0)}  ({', '.join(model.state_names)})",
            indent=7,
        )
    )
    print()
    if trajectory.event_kinds:
        for line in _event_table(trajectory):
            print(line)
    else:
        print("no events")
    # A phase that starts past its own guard (after a touchdown: the ground would
    # already have to pull) runs until the guard has come back and crossed again;
    # say so, as the trajectory then differs from a complementarity model's.
    guards = np.asarray(solution.guard_at_start, dtype=float)[
        : len(trajectory.t_events)
    ]
    for k in np.flatnonzero(guards < -_GUARD_NOTE_TOL):
        print(
            f"note: the phase after event {k + 1} ({trajectory.event_kinds[k]}) "
            f"starts past its guard (signed guard {guards[k]:+.3g} < 0; on the "
            "ground: the contact would pull); it runs until the guard re-crosses."
        )
    cause = _explain_stop(model, system, solution, params)
    if cause is not None:
        print(f"note: {cause}")
    print()
    n_done = len(trajectory.t_events)
    summary = (
        f"status: {status} ({n_done} of {n_events} events, "
        f"t = {float(solution.t_final):.6f} s)"
    )
    if succeeded:
        print(summary)
    else:
        sys.stdout.flush()  # keep the table before the failure in a shared terminal
        print(f"{summary}: {_for_command(message, SOLVER_OPTIONS)}", file=sys.stderr)

    if args.figures and trajectory.t_phase.shape[0] > 0:
        for path in model.simulate_figures(trajectory, params, args.out):
            print(f"wrote {path}")
        for path in _stick_outputs(model, trajectory, params, args.out, args.fps):
            print(f"wrote {path}")
    if args.json is not None:
        events = []
        for k, kind in enumerate(trajectory.event_kinds):
            event = {
                "t": float(trajectory.t_events[k]),
                "kind": kind,
                "state_before": [float(v) for v in trajectory.x_before[k]],
                "state_after": [float(v) for v in trajectory.x_after[k]],
                "T_c": _number(trajectory.T_c[k]),
                "T_a": _number(trajectory.T_a[k]),
                "guard_after": _number(guards[k]),
            }
            events.append(event)
        payload = {
            "model": args.model,
            "form": form_name,
            "params": _params_dict(params),
            "x0": [float(v) for v in x0],
            "state_names": list(model.state_names),
            "cycles": args.cycles,
            "hops": args.cycles,  # (the hopper's word for a cycle)
            "settings": solver_record(args),
            "status": status,
            "status_message": message,
            "t_final": float(solution.t_final),
            "events": events,
        }
        _write_json(args.json, payload)
        print(f"wrote {args.json}")
    return 0 if succeeded else 1


# ---------------------------------------------------------------------------
# orbit
# ---------------------------------------------------------------------------

# The dense simulations from the orbit: periods for the phase portraits and energy
# figures, and samples per phase (one compiled shape also serves the apex search
# and the perturbed trajectories, which use the first period only).
_ORBIT_PERIODS = 3
_ORBIT_SAMPLES = 400


def _add_orbit(subparsers) -> None:
    parser = subparsers.add_parser(
        "orbit",
        help="find a periodic orbit and its Floquet multipliers",
        description=(
            "Find the periodic orbit of a model by shooting on its Poincaré section "
            "from the model's guess, print its summary (phase durations and the "
            "model's quantities, e.g. the hopper's apex heights and energy split; "
            "reduced Jacobian, monodromy matrix by autodiff and by saltation "
            "product, Floquet multipliers), and write figures (and optionally "
            "JSON). Exits 1 if no orbit was found."
        ),
    )
    _add_common_model_args(parser)
    _add_form_arg(parser)
    add_solver_args(
        parser,
        tol=1e-12,
        why="--tol 1e-12 here, at which the monodromy by autodiff and by "
        "saltation agree to 1e-8",
    )
    parser.add_argument(
        "--no-homotopy",
        dest="homotopy",
        action="store_false",
        help="where shooting from the model's guess finds no orbit at parameters "
        "set by --set or --params, do not follow the orbit from the model's "
        "defaults to them (by default it is followed by pseudo-arclength "
        "continuation along the straight path in parameter space, which says "
        "where the family ends if it does)",
    )
    parser.set_defaults(run=_run_orbit, command_parser=parser)


def _pairs(values) -> list[list[float | None]]:
    """Complex numbers as JSON `[real, imag]` pairs."""
    return [[_number(np.real(v)), _number(np.imag(v))] for v in np.ravel(values)]


def _matrix(values) -> list[list[float | None]]:
    return [[_number(v) for v in row] for row in np.asarray(values)]


def _stick_outputs(model, trajectory, params, out, fps: float = 25.0) -> list:
    """`stick_figure.png` (a strobe picture) and `animation.gif` (`fps` frames
    per unit of simulated time, shown at that rate: real time) of a model that
    presentation declares a `stick_figure` (and, for a walker, a `frame_shift`)."""
    skeleton = model.presentation.stick_figure
    if skeleton is None:
        return []
    from . import plot

    shift = model.presentation.frame_shift
    frames = plot.stick_frames(
        trajectory,
        lambda x: skeleton(x, params),
        frame_shift=None if shift is None else (lambda x: shift(x, params)),
        fps=fps,
    )
    units = model.presentation.units
    strobe = plot.stick_figure(frames, units=units)
    strobe.suptitle(f"{model.name}: stick figures")
    paths = plot.save_figures({"stick_figure.png": strobe}, out)
    # Played at `fps`: real time while the frames fit their cap, faster beyond
    # (the title's clock says how fast).
    animation = plot.save_animation(
        frames, pathlib.Path(out) / "animation.gif", units=units, fps=fps
    )
    return [*paths, animation]


def _events_slice(trajectory, events: slice):
    """The phases and events of a `Trajectory` in `events` (a slice)."""
    fields = ("t_phase", "x_phase", "phase_modes", "t_events", "event_kinds")
    fields += ("x_before", "x_after", "T_c", "T_a")
    return dataclasses.replace(
        trajectory, **{name: getattr(trajectory, name)[events] for name in fields}
    )


def _first_period(trajectory, n_events: int):
    """The first `n_events` phases and events of a `Trajectory`."""
    return _events_slice(trajectory, slice(None, n_events))


def _format_complex(value) -> str:
    value = complex(value)
    if value.imag == 0:
        return f"{value.real:+.10f}"
    return f"{value.real:+.10f}{value.imag:+.2e}j"


def _format_matrix(matrix, indent: str = "  ") -> list[str]:
    return [
        indent + "[" + "  ".join(f"{v:+12.6f}" for v in row) + "]"
        for row in np.asarray(matrix, dtype=float)
    ]


def _orbit_from_defaults(model, system, section, params, orbit, shooting):
    """Where shooting from the model's guess failed at parameters other than the
    model's defaults: the orbit followed from the defaults' orbit to `params`
    ([`hybrax.continue_to_params`][]), with a record of the homotopy for the
    JSON (`None` where none was tried: at the defaults, or without an orbit
    there). Returns `(orbit, record)`; the orbit is the failed one unless the
    family reached `params`."""
    import jax
    import jax.numpy as jnp

    from ._homotopy import continue_to_params
    from ._misc import canonical_params
    from ._periodic import find_periodic_orbit
    from ._solution import status_name

    defaults = canonical_params(model.make_params())
    if _params_dict(defaults) == _params_dict(params):
        return orbit, None
    print(
        f"no orbit from the model's guess ({orbit.describe_failure()}); following "
        "the orbit from the model's defaults ...",
        file=sys.stderr,
    )
    guess = jnp.asarray(model.orbit_guess(jax.device_get(defaults)), dtype=float)
    start = find_periodic_orbit(system, section, guess, defaults, **shooting)
    if not bool(start.succeeded):
        print("  (no orbit at the model's defaults either)", file=sys.stderr)
        return orbit, None
    homotopy = continue_to_params(
        system, section, start.u, defaults, params, **shooting
    )
    message = homotopy.message.replace("`params_from`", "the model's defaults")
    record = {
        "from": "the model's defaults",
        "status": status_name(homotopy.result)[0],
        "reached": homotopy.reached,
        "end": homotopy.end,
        "continuation_points": len(homotopy.branch.parameter),
        "message": message,
    }
    if not homotopy.reached:
        print(f"  {message}", file=sys.stderr)
        return orbit, record
    print(f"  {message}")
    return homotopy.orbit, record


def _run_orbit(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    import jax
    import jax.numpy as jnp

    from ._misc import canonical_params
    from ._periodic import find_periodic_orbit
    from ._programs import prepare
    from ._simulate import simulate
    from ._solution import status_message, status_name

    model = _load_model(parser, args.model)
    if not model.has_orbits:
        parser.error(f"argument model: no periodic orbits for {args.model!r}")
    form_name = _form_name(parser, model, args)
    # Array leaves once, so that `--set` values reuse one compilation.
    params = canonical_params(
        _make_params(parser, model, _parse_sets(parser, model, args.set, args.params))
    )
    form = model.forms[form_name]
    system = form.system()
    if form.section is None:
        parser.error(f"argument --form: no Poincaré section for {form_name!r}")
    section = form.section()
    # From NumPy parameters: no program per operation.
    guess = jnp.asarray(model.orbit_guess(jax.device_get(params)), dtype=float)
    stored = _params_file_vector(args.params, "u", guess.shape[0])
    if stored is not None and form_name == model.default_form:
        guess = jnp.asarray(stored)  # a tuned gait's orbit
    # The dense simulation of the orbit (figures, apexes) compiles in a second
    # thread while the orbit search does: XLA releases the interpreter while it
    # compiles, and the machine has a core for each.
    sequence = tuple(system.transition_index(k) for k in section.sequence)
    mode0 = system.targets[sequence[-1]]
    n_cycle = len(sequence)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    periods_program = pool.submit(
        prepare,
        "the simulation of the orbit's periods",
        lambda x, p: simulate(
            system,
            x,
            p,
            n_events=_ORBIT_PERIODS * n_cycle,
            settings=solver_settings(args),
            mode0=mode0,
            n_save=_ORBIT_SAMPLES,
        ),
        (jnp.zeros((system.n_states,), dtype=float), params),
    )
    # The plotting code (matplotlib, 0.3 s) is imported by that thread once its
    # program is compiled, while XLA still compiles the orbit search: off the
    # critical path.
    pool.submit(importlib.import_module, "hybrax.plot")
    pool.shutdown(wait=False)
    settings = solver_settings(args)
    # Newton on the variational return map: its last iteration holds the orbit's
    # cycle, apexes and saltation monodromy, so the program needs no further
    # pass (the smallest program, compiled once).
    shooting = dict(settings=settings, phase_observables=False)
    orbit = find_periodic_orbit(system, section, guess, params, **shooting)
    homotopy = None
    no_orbit_hint = model.presentation.no_orbit_hint
    hint = None if no_orbit_hint is None else no_orbit_hint(params)
    # Where the model knows no orbit exists, no family leads there either.
    if not bool(orbit.succeeded) and args.homotopy and hint is None:
        orbit, homotopy = _orbit_from_defaults(
            model, system, section, params, orbit, shooting
        )
    floquet = orbit.floquet
    converged = bool(orbit.succeeded)
    status = status_name(orbit.result)[0]
    message = status_message(orbit.result)[0]

    # States and monodromy matrices are shown in the minimal coordinates.
    n_min = len(model.state_names)
    if form.to_minimal is None:
        to_minimal = np.asarray
    else:

        def to_minimal(x):
            return np.asarray(form.to_minimal(jnp.asarray(x)))

    state = to_minimal(orbit.state)
    durations = np.asarray(orbit.phase_durations, dtype=float)
    n_steps = int(orbit.n_steps)
    residual = float(orbit.residual_norm)
    payload: dict[str, Any] = {
        "model": args.model,
        "form": form_name,
        "params": _params_dict(params),
        "state_names": list(model.state_names),
        "settings": solver_record(args),
        "converged": converged,
        "status": status,
        "status_message": message,
        "newton_iterations": n_steps,
        "residual_norm": _number(residual),
        "homotopy": homotopy,
    }
    summary_hook = model.presentation.orbit_summary

    def model_summary(solution):
        """The model's own quantities (NaN where there is no orbit), JSON-safe."""
        if summary_hook is None:
            return {}, []
        values, lines = summary_hook(orbit, floquet, solution, params)
        return {
            key: value if isinstance(value, bool) else _number(value)
            for key, value in values.items()
        }, lines

    print(f"{args.model} ({form_name}), parameters:")
    print(_params_lines(_params_dict(params)))
    print()
    if not converged:
        keys = (
            "state period phase_durations reduced_jacobian "
            "reduced_jacobian_eigenvalues monodromy_ad monodromy_saltation "
            "max_discrepancy multipliers_ad multipliers_saltation "
            "trivial_multiplier_ad trivial_multiplier_saltation "
            "conserved_multipliers_ad conserved_multipliers_saltation stable"
        ).split()
        payload.update(dict.fromkeys(keys))
        payload.update(dict.fromkeys(model_summary(None)[0]))
        best = orbit.restart.safeguard
        payload["best_iterate"] = [_number(v) for v in np.asarray(best.best_iterate)]
        payload["best_residual_norm"] = _number(float(best.best_defect))
        sys.stdout.flush()
        # Where the model knows that no orbit can exist (a wheel on level
        # ground), that comes first: it is the cause, the failure its symptom.
        if hint is not None:
            print(f"note: {hint}.", file=sys.stderr)
        print(
            f"no periodic orbit found: {orbit.describe_failure()}. "
            f"{_for_command(message, SOLVER_OPTIONS)}",
            file=sys.stderr,
        )
        if args.json is not None:
            _write_json(args.json, payload)
            print(f"wrote {args.json}")
        return 1

    # One compiled simulation: the orbit over several periods, and from the
    # perturbed starts (their first period is drawn).

    def periods(x_min):
        from .plot import Trajectory

        full = x_min if form.from_minimal is None else form.from_minimal(x_min)
        solution = periods_program.result()(jnp.asarray(full, dtype=float), params)
        trajectory = Trajectory.from_solution(
            solution, system, to_minimal=form.to_minimal
        )
        return trajectory, solution, status_name(solution.result)[0]

    trajectory, solution, sim_status = periods(state)
    simulated = bool(solution.succeeded)
    cycle = _first_period(trajectory, n_cycle)
    summary, summary_lines = model_summary(solution)

    M = np.asarray(orbit.reduced_jacobian, dtype=float)
    mono_ad = form.minimal_monodromy(floquet.monodromy_ad, n_min)
    mono_s = form.minimal_monodromy(floquet.monodromy_saltation, n_min)
    mult_ad = np.asarray(floquet.multipliers_ad)
    mult_s = np.asarray(floquet.multipliers_saltation)
    stable = bool(np.all(np.abs(mult_ad) < 1) and np.all(np.abs(mult_s) < 1))
    payload.update(
        state=[float(v) for v in state],
        period=float(orbit.period),
        phase_durations=[float(v) for v in durations],
        **summary,
        reduced_jacobian=_matrix(M),
        reduced_jacobian_eigenvalues=_pairs(np.linalg.eigvals(M)),
        monodromy_ad=_matrix(mono_ad),
        monodromy_saltation=_matrix(mono_s),
        max_discrepancy=float(np.max(np.abs(mono_ad - mono_s))),
        max_discrepancy_full_state=float(floquet.max_discrepancy),
        multipliers_ad=_pairs(mult_ad),
        multipliers_saltation=_pairs(mult_s),
        trivial_multiplier_ad=_pairs(floquet.trivial_ad)[0],
        trivial_multiplier_saltation=_pairs(floquet.trivial_saltation)[0],
        conserved_multipliers_ad=_pairs(floquet.conserved_ad),
        conserved_multipliers_saltation=_pairs(floquet.conserved_saltation),
        stable=stable,
    )

    names = ", ".join(model.state_names)
    print(f"periodic orbit: converged ({status})")
    print(f"  Newton iterations       {n_steps}")
    print(f"  residual max|F|         {residual:.3e}")
    first = system.transitions[sequence[-1]].name
    on_section = "[" + ", ".join(f"{v:+.10f}" for v in state) + "]"
    print(f"  state after {first:<11} {on_section}")
    print(f"                          ({names})")
    if summary_lines:
        for line in summary_lines:
            print(line)
    else:
        for k, duration in enumerate(durations):
            mode = system.modes[system.sources[sequence[k]]].name
            print(f"  phase {k + 1} ({mode})".ljust(26) + f"{duration:.10f} s")
        print(f"  period                  {float(orbit.period):.10f} s")
    print()
    print(f"reduced Jacobian M (unknowns after {first}):")
    print("\n".join(_format_matrix(M)))
    eig_M = ", ".join(_format_complex(v) for v in np.linalg.eigvals(M))
    print(f"  eigenvalues: {eig_M}")
    for label, matrix in (("autodiff", mono_ad), ("saltation product", mono_s)):
        print(f"monodromy by {label} ({names}):")
        print("\n".join(_format_matrix(matrix)))
    print(f"  max |AD - saltation| = {payload['max_discrepancy']:.3e}", end="")
    if form.to_minimal is not None:
        print(f" (full state: {float(floquet.max_discrepancy):.3e})", end="")
    print()
    print()
    print("Floquet multipliers (nontrivial, by decreasing modulus):")
    print(f"  autodiff:  {', '.join(_format_complex(v) for v in mult_ad)}")
    print(f"  saltation: {', '.join(_format_complex(v) for v in mult_s)}")
    print(
        f"  trivial:   {_format_complex(floquet.trivial_ad)} (autodiff), "
        f"{_format_complex(floquet.trivial_saltation)} (saltation)"
    )
    for name, ad, salt in zip(
        (invariant.__name__ for invariant in section.invariants),
        np.asarray(floquet.conserved_ad),
        np.asarray(floquet.conserved_saltation),
    ):
        print(
            f"  conserved ({name}): {_format_complex(ad)} (autodiff), "
            f"{_format_complex(salt)} (saltation)"
        )
    leading = float(np.max(np.abs(mult_ad))) if mult_ad.size else 0.0
    verdict = "stable" if stable else "unstable"
    print(f"  {verdict}: largest nontrivial |multiplier| = {leading:.10f}")
    print()

    if simulated and args.figures:
        perturbed, labels = [], []
        for index, size, label in model.presentation.orbit_perturbations:
            start = state.copy()
            start[index] += size
            perturbed.append(_first_period(periods(start)[0], n_cycle))
            labels.append(label)
        for path in model.orbit_figures(
            cycle, perturbed, labels, trajectory, params, args.out
        ):
            print(f"wrote {path}")
        for path in _stick_outputs(model, trajectory, params, args.out, args.fps):
            print(f"wrote {path}")
    elif not simulated:
        print(
            f"note: the simulation of {_ORBIT_PERIODS} periods from the orbit "
            f"failed ({sim_status}); no figures written.",
            file=sys.stderr,
        )
    if args.json is not None:
        _write_json(args.json, payload)
        print(f"wrote {args.json}")
    return 0


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


def _add_models(subparsers) -> None:
    from ._registry import model_names

    parser = subparsers.add_parser(
        "models",
        help="list the registered models with their parameters",
        description=(
            "List the registered models (or the ones named): description, "
            "formulations, state, the commands each supports, and the parameters "
            "that --set takes with their units and defaults."
        ),
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="MODEL",
        help=f"models to show (default: all): {', '.join(model_names())}",
    )
    parser.add_argument(
        "--json",
        dest="as_json",
        action="store_true",
        help="print the same as JSON (name -> description, forms, state, commands, "
        "parameters with unit, meaning and default, orbit quantities)",
    )
    parser.set_defaults(run=_run_models, command_parser=parser)


def _run_models(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ._registry import model_names

    unknown = [name for name in args.names if name not in model_names()]
    if unknown:
        parser.error(
            f"argument MODEL: invalid choice: {unknown[0]!r} (choose from "
            f"{', '.join(map(repr, model_names()))})"
        )
    listing = {
        name: model_record(_load_model(parser, name))
        for name in args.names or model_names()
    }
    if args.as_json:
        print(json.dumps(listing, indent=2))
        return 0
    for name, record in listing.items():
        print(f"{name}: {record['description']}")
        forms, state = ", ".join(record["forms"]), ", ".join(record["state"])
        print(f"  forms: {forms}; state: {state}")
        print(f"  commands: {', '.join(record['commands'])}")
        for parameter, row in record["parameters"].items():
            default = row["default"]
            shown = "derived" if default is None else f"{default:g}"
            text = (
                row["meaning"]
                if row["unit"] == row["meaning"]
                else f"{row['unit']}, {row['meaning']}"
            )
            print(f"    {parameter:<6} {shown:>9}  {text}")
        if record["quantities"]:
            print(f"  orbit quantities: {', '.join(record['quantities'])}")
        print()
    return 0


def model_record(model) -> dict:
    """What `hybrax models` says of a model (and the documentation's gallery):
    description, forms, state, the commands it runs through, each parameter's unit,
    meaning and default (`None` for a derived one), its orbit quantities."""
    commands = ["simulate"]
    if model.has_orbits:
        commands += ["orbit", "sweep"]
    if model.has_orbits and model.presentation.continuation is not None:
        commands.append("continue")
    if model.has_orbits and model.quantities:
        commands.append("tune")
    defaults = _params_dict(model.make_params())
    return {
        "description": model.description,
        "forms": list(model.forms),
        "state": list(model.state_names),
        "commands": commands,
        "parameters": {
            parameter: {
                "unit": meaning.split(",")[0].strip(),
                "meaning": meaning.split(",", 1)[-1].strip(),
                "default": defaults.get(parameter),
            }
            for parameter, meaning in model.parameters.items()
        },
        "quantities": list(model.quantities or ()),
    }


def _build_parser() -> argparse.ArgumentParser:
    from ._registry import model_names

    parser = argparse.ArgumentParser(
        prog=_PROG,
        description=(
            "Simulation and stability analysis of hybrid mechanical systems. "
            f"Models: {', '.join(model_names())} (`hybrax models` lists them)."
        ),
        epilog=SOLVER_POLICY,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {importlib.metadata.version('hybrax')}",
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="<command>", required=True
    )
    _add_models(subparsers)
    _add_simulate(subparsers)
    _add_orbit(subparsers)
    # Commands defined in their own modules register themselves here.
    for module_name in ("_cli_continue", "_cli_sweep", "_cli_tune"):
        importlib.import_module(f"hybrax.{module_name}").add_parser(subparsers)
    return parser


def console() -> None:
    """The `hybrax` command and `python -m hybrax`: [`main`][hybrax._cli.main] on
    the process's arguments, then the process ends with its exit code.

    Once a command is done, the interpreter's teardown (XLA's CPU client and the
    thousands of loaded modules) takes another 0.45 s; everything the command wrote
    is closed by then, so the process ends at once (`os._exit`) after flushing the
    standard streams. A Python thread still working (a program that a command which
    ended early was compiling in the background) gets the ordinary exit instead,
    which waits for it, so that no cache entry is cut short. A closed output pipe
    exits 1 quietly; other exceptions propagate as usual."""
    try:
        code = main()
    except SystemExit as exit_:
        code = exit_.code
    except BrokenPipeError:
        # The reader of the output went away (`hybrax ... | head -1`): exit 1
        # without a traceback; what is left to flush goes nowhere (Python's
        # documented recipe for SIGPIPE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    programs = sys.modules.get("hybrax._programs")
    others_busy = any(
        thread.is_alive() and not thread.daemon
        for thread in threading.enumerate()
        if thread is not threading.main_thread()
        # (The library's compiler threads wait idle between programs.)
        and not (
            programs is not None and thread.name.startswith(programs.COMPILER_THREADS)
        )
    ) or (programs is not None and programs.compiling_in_background())
    if others_busy or not (code is None or isinstance(code, int)):
        raise SystemExit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`hybrax ... | head -1`)
            pass
    os._exit(code or 0)


def _finish_outputs(args: argparse.Namespace, argv, code: int) -> int:
    """After a run: make its `--out` folder hold one run's files of this command
    (those of its previous run that the folder's manifest lists and this run
    does not write again are removed; see `hybrax._io.finish_folder`), and say
    where each file went that could not be written to its own place (exit 1
    then: the outputs are not where asked)."""
    from . import _io

    out = getattr(args, "out", None)
    if out is not None and out.is_dir():
        words = sys.argv[1:] if argv is None else list(argv)
        removed = _io.finish_folder(out, args.command, " ".join(["hybrax", *words]))
        if removed:
            print(
                f"removed from {str(out)!r} the files of the previous "
                f"`{args.command}` run that this one does not write: "
                f"{', '.join(removed)}",
                file=sys.stderr,
            )
    for wanted, written, reason in _io.FALLBACKS:
        print(
            f"hybrax {args.command}: could not write {str(wanted)!r} ({reason}); "
            f"saved it as {str(written)!r}",
            file=sys.stderr,
        )
    if _io.FALLBACKS and code == 0:
        return 1
    return code


# A value that starts like a negative number (`-1,0.5`, `-1e-3`, `-inf`), which
# argparse would take for an option.
_NEGATIVE_VALUE = re.compile(r"-(\d|\.\d|inf|nan)", re.IGNORECASE)


def _negative_values_attached(argv: list[str]) -> list[str]:
    """`argv` with each negative value that follows a long option attached to it
    (`--x0 -1,0.5` becomes `--x0=-1,0.5`): argparse reads a token that starts
    with `-` as an option unless it is a plain number, and no command takes a
    negative number as a positional argument."""
    joined: list[str] = []
    for token in argv:
        previous = joined[-1] if joined else ""
        if (
            previous.startswith("--")
            and "=" not in previous
            and _NEGATIVE_VALUE.match(token)
        ):
            joined[-1] = f"{previous}={token}"
        else:
            joined.append(token)
    return joined


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on `argv` (default `sys.argv[1:]`); returns the exit
    code. Argument errors raise `SystemExit(2)` with a one-line message; an
    interrupt (Ctrl-C) returns 130 after one line."""
    parser = _build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    # `--help`, `--version` and usage errors end here, before JAX is imported.
    args = parser.parse_args(_negative_values_attached(argv))
    _enable_x64()
    # Errors found after parsing print the subcommand's usage: hand its parser on.
    _check_outputs(args.command_parser, args)
    from ._programs import announcing

    _enable_cache()
    from . import _io

    _io.start_run(
        _io.FigureOptions(
            format=getattr(args, "format", "png"), dpi=getattr(args, "dpi", 150)
        )
    )
    quiet = getattr(args, "quiet", False)
    try:
        with contextlib.ExitStack() as stack:
            if quiet:  # results and progress go nowhere; warnings still print
                stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
            elif getattr(args, "verbose", False):
                # The log holds the announcements too: printed once, from it.
                stack.enter_context(_log_to_stderr())
                stack.enter_context(
                    announcing(lambda line: None, label=getattr(args, "model", None))
                )
            else:
                stack.enter_context(announcing(label=getattr(args, "model", None)))
            code = args.run(args, args.command_parser)
        return _finish_outputs(args, argv, code)
    except KeyboardInterrupt:
        # Outputs are written whole at the end (under temporary names): an
        # interrupted run leaves none of its own, and no partial file.
        print(
            f"hybrax {args.command}: interrupted; no output of this run was written",
            file=sys.stderr,
        )
        return 130
