"""What the commands share: models and parameters from the arguments, the
solver options, checks of outputs, and the formats of results on the console and
in JSON files."""

import argparse
import contextlib
import dataclasses
import importlib
import importlib.metadata
import json
import math
import os
import pathlib
import sys
import textwrap
import typing
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from .params_files import _read_params_file


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
    from .._compile import enable_compilation_cache

    return enable_compilation_cache()


def _params_dict(params) -> dict[str, float]:
    return {f.name: float(getattr(params, f.name)) for f in dataclasses.fields(params)}


def _load_model(parser: argparse.ArgumentParser, name: str):
    """The registered model's [`hybrax.ModelBundle`][] (imported on demand)."""
    from .._registry import get_model

    try:
        return get_model(name)
    except ValueError as error:
        parser.error(f"argument model: {error}")


def _add_common_model_args(parser: argparse.ArgumentParser) -> None:
    """The model positional and `--set`, `--out`, `--json`, shared by commands."""
    from .._registry import model_names

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
        help="the figures' file format (default: %(default)s)",
    )
    output.add_argument(
        "--animation",
        choices=("gif", "mp4"),
        default="gif",
        help="the animations' format (default: %(default)s; mp4 needs the optional "
        'dependency imageio-ffmpeg: pip install "hybrax[video]")',
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
    from .._settings import Settings

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
    from .._io import probe_writable

    out = getattr(args, "out", None)
    if out is not None:
        if out.exists() and not out.is_dir():
            parser.error(f"argument --out: {str(out)!r} exists and is not a directory")
        problem = probe_writable(out)
        if problem is not None:
            parser.error(f"argument --out: {problem}")
    if getattr(args, "animation", "gif") == "mp4" and getattr(args, "figures", True):
        import importlib.util

        if importlib.util.find_spec("imageio_ffmpeg") is None:
            parser.error(
                "argument --animation: mp4 needs the optional dependency "
                'imageio-ffmpeg (pip install "hybrax[video]")'
            )
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


#: The most bytes a `--params` JSON file may hold (64 MiB); a saved result is
#: bounded as `hybrax.load` bounds it.
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
    from .._solution import status_message, status_name

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


def _for_command(message: str, options: Sequence[str] = (), advise: bool = True) -> str:
    """A status message with the library's advice (`Settings.t_max`,
    `max_steps`) turned into the command's `options`, or said without an option
    where the command has none; with `advise=False` (the model explains the
    failure: no orbit exists there), without the advice to raise a limit, which
    would only move the failure."""
    for library, option, with_option, without in _LIBRARY_ADVICE:
        if not advise and library.startswith(("Try", "Increase")):
            message = message.replace(" " + library, "").replace(library, "")
        else:
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


def _write_json(
    path: pathlib.Path,
    payload: dict[str, Any],
    section: str,
    generic: Collection[str] = (),
    records: Mapping[str, tuple[str, Collection[str]]] | None = None,
) -> pathlib.Path:
    """`payload` as JSON at `path`, after the keys `hybrax` (the version) and
    `schema` (`JSON_SCHEMA`), written under a temporary name and renamed
    (a run killed mid-write leaves no partial file; see `hybrax._io.write_file`
    for where it goes if that fails); returns the path written. Its keys are
    checked against the JSON reference's `section` (`json_fields.check`: a key
    it does not describe is a warning; `generic`: the keys that the model or the
    run names, which its fields in angle brackets stand for), and so are those
    of its nested `records` (payload key -> `(section, generic)`, where the key
    holds a record); the file is written as it is."""
    from .._io import write_file
    from .json_fields import check

    # Every result file says what wrote it and in which layout.
    payload = {
        "hybrax": importlib.metadata.version("hybrax"),
        "schema": JSON_SCHEMA,
        **payload,
    }
    check(section, payload, generic)
    for key, (nested, nested_generic) in (records or {}).items():
        if isinstance(payload.get(key), dict):
            check(nested, payload[key], nested_generic)
    text = json.dumps(payload, indent=2, allow_nan=False) + "\n"
    with contextlib.suppress(OSError):  # (else the write's own fallback)
        if path.parent != pathlib.Path(""):
            path.parent.mkdir(parents=True, exist_ok=True)
    return write_file(path, lambda temporary: temporary.write_text(text))


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


def _pairs(values) -> list[list[float | None]]:
    """Complex numbers as JSON `[real, imag]` pairs."""
    return [[_number(np.real(v)), _number(np.imag(v))] for v in np.ravel(values)]


def _matrix(values) -> list[list[float | None]]:
    return [[_number(v) for v in row] for row in np.asarray(values)]


def _stick_outputs(
    model, trajectory, params, out, fps: float = 25.0, animation: str = "gif"
) -> list:
    """`stick_figure.png` (a strobe picture) and `animation.gif` or `.mp4`
    (`animation`; `fps` frames per unit of simulated time, shown at that rate:
    real time) of a model whose presentation declares a `stick_figure` (and, for a
    walker, a `frame_shift`, the legs' `stick_swaps` and `stick_names`, and an
    `animation_note`)."""
    shown = model.presentation
    skeleton = shown.stick_figure
    if skeleton is None:
        return []
    from .. import plot

    shift = shown.frame_shift
    frames = plot.stick_frames(
        trajectory,
        lambda x: skeleton(x, params),
        frame_shift=None if shift is None else (lambda x: shift(x, params)),
        fps=fps,
        swaps=shown.stick_swaps,
        names=shown.stick_names,
    )
    units = shown.units
    strobe = plot.stick_figure(frames, units=units)
    strobe.suptitle(f"{model.name}: stick figures")
    paths = plot.save_figures({"stick_figure.png": strobe}, out)
    # Played at `fps`: real time while the frames fit their cap, faster beyond
    # (the title's clock says how fast).
    animation = plot.save_animation(
        frames,
        pathlib.Path(out) / f"animation.{animation}",
        units=units,
        fps=fps,
        note=shown.animation_note,
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


def model_parameter(parser, model, name: str, argument: str):
    """The model's parameter `name` (what `--param`, `--param2` and `--vary`
    name), checked to read a number from the model's defaults: a usage error
    naming `argument` where it does not (a misspelt field of a plug-in model
    whose `parameter` builds any name), before anything is compiled."""
    try:
        parameter = model.parameter(name)
    except ValueError as error:  # the model's own message names what it knows
        parser.error(f"argument {argument}: {error}")
    try:
        value = np.asarray(parameter.get(model.make_params()), dtype=float)
    except Exception as error:  # a plug-in's reader: any failure is the name's
        parser.error(
            f"argument {argument}: {name!r} is not a parameter of {model.name!r} "
            f"({type(error).__name__}: {error})"
        )
    if value.shape != ():
        parser.error(
            f"argument {argument}: {name!r} is not a scalar parameter of "
            f"{model.name!r} (shape {value.shape})"
        )
    return parameter


def _derived_value(model, params, name: str) -> float | None:
    """A derived parameter's value at the defaults `params` (`None` where the
    model's `parameter` cannot read it)."""
    try:
        return float(model.parameter(name).get(params))
    except Exception:  # a plug-in model's reader: the table shows no value
        return None


def refuse_condition(parser, model, name, option: str) -> None:
    """A usage error where `name` is one of the model's declared yes/no
    conditions (a `hybrax.Quantity` with `unit=None`): `tune` and `sweep` take
    numbers."""
    if name in (model.quantities or {}) and model.quantity(name).is_condition:
        parser.error(f"argument {option}: {name!r} is a yes/no condition, not a number")


def model_record(model) -> dict:
    """What `hybrax models` says of a model (and the documentation's gallery):
    description, forms, state, the commands it runs through, each parameter's unit,
    meaning, default (`None` for a derived one, which sets others), whether it is
    derived and its value at the defaults (`value`, for a derived one too), its
    orbit quantities."""
    commands = ["simulate"]
    if model.has_orbits:
        commands += ["orbit", "sweep", "basin", "continue"]
    if model.has_orbits and model.quantities:
        commands.append("tune")
    if model.has_orbits and model.disturbances:
        commands.append("robustness")
    params = model.make_params()
    defaults = _params_dict(params)
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
                "derived": parameter not in defaults,
                "value": (
                    defaults[parameter]
                    if parameter in defaults
                    else _derived_value(model, params, parameter)
                ),
            }
            for parameter, meaning in model.parameters.items()
        },
        "quantities": list(model.quantities or ()),
    }


class SectionProblem(typing.NamedTuple):
    """What a command on the model's section runs on: the formulation's name,
    its system and section, the parameters (`--set`, `--params`) and the
    model's orbit guess at them."""

    form_name: str
    system: typing.Any
    section: typing.Any
    params: typing.Any
    guess: typing.Any

    def point_orbit(self, settings):
        """The orbit from the guess, its point and reduced Jacobian only (no
        Floquet analysis, no phase observables: what `basin` and `robustness`
        read; one program less to compile than `orbit`'s)."""
        from .._periodic import find_periodic_orbit

        return find_periodic_orbit(
            self.system,
            self.section,
            self.guess,
            self.params,
            settings=settings,
            analyse=False,
            phase_observables=False,
        )


def section_problem(parser, model, args) -> SectionProblem:
    """The command line's system, section, parameters and orbit guess (usage
    errors for a formulation without a section and for bad parameters)."""
    import jax
    import jax.numpy as jnp

    from .._misc import canonical_params

    form_name = _form_name(parser, model, args)
    form = model.forms[form_name]
    if form.section is None:
        parser.error(f"argument --form: no Poincaré section for {form_name!r}")
    params = canonical_params(
        _make_params(parser, model, _parse_sets(parser, model, args.set, args.params))
    )
    guess = jnp.asarray(model.orbit_guess(jax.device_get(params)), dtype=float)
    return SectionProblem(form_name, form.system(), form.section(), params, guess)


def resume_error(path, error: Exception) -> str:
    """The usage error of a `--resume FILE` that the library refused (its
    `ValueError` naming `resume`): `argument --resume: 'FILE' is ...`, one line."""
    text = str(error).removeprefix("`resume` ").replace("this call's", "this run's")
    return f"argument --resume: {str(path)!r} {text}".rstrip(".")


def load_resume(parser, path, class_name: str, what: str):
    """The interrupted result that `--resume FILE` names, an object of the
    library's class `class_name` (a usage error for anything else)."""
    from .._archive import load

    try:
        resume = load(path)
    except FileNotFoundError as error:
        parser.error(f"argument --resume: cannot read {str(path)!r}: {error.strerror}")
    except ValueError as error:
        parser.error(f"argument --resume: {error}".replace("`path`: ", "").rstrip("."))
    if type(resume).__name__ != class_name:
        parser.error(
            f"argument --resume: {str(path)!r} is not an interrupted {what} (it "
            f"holds a {type(resume).__name__})"
        )
    return resume


def keep_partial(path: pathlib.Path, partial, message: str) -> int:
    """Ctrl-C during a command that can resume (`sweep`, `basin`): save the
    finished part `partial` to `path` (whole or not at all), print `message` and
    how to finish on stderr, and return the exit status 130."""
    from .._archive import archive_bytes
    from .._io import write_file

    written = write_file(
        path, lambda temporary: temporary.write_bytes(archive_bytes(partial))
    )
    print(f"{message}; finish with --resume {written}", file=sys.stderr)
    return 130
