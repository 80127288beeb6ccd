"""The `hybrax` command line: `hybrax <command> <model> [options]`.

A thin argparse wrapper over the public API. Each command is a `_add_<command>`
function that registers a subparser (sharing `_add_common_model_args`) and sets as its
defaults `run=_run_<command>` (`(args, parser) -> int`) and `command_parser` (itself);
each model is a `_Model` entry of `_MODELS` that says how to build its parameters,
initial state, systems and figures. Exit codes: 0 success, 1 a run that did not
succeed (its status is printed and what was computed is still written), 2 bad
arguments (argparse's convention).
"""

import argparse
import dataclasses
import importlib.metadata
import json
import math
import os
import pathlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


_PROG = "hybrax"
# Signed guards are scaled to O(1); below this a start past the guard is rounding.
_GUARD_NOTE_TOL = 1e-6


def _enable_x64() -> None:
    """Run JAX in float64: event times and orbits need it. Call before any array is
    made."""
    jax.config.update("jax_enable_x64", True)


def _cache_dir() -> str | None:
    """`$HYBRAX_CACHE_DIR` if set (empty disables the cache), else
    `$XDG_CACHE_HOME/hybrax/jax` or `~/.cache/hybrax/jax`."""
    if "HYBRAX_CACHE_DIR" in os.environ:
        return os.environ["HYBRAX_CACHE_DIR"] or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(base), "hybrax", "jax")


def _enable_cache() -> str | None:
    """Turn on JAX's persistent compilation cache, so that a second run of a command
    skips the XLA compilations (seconds each) of the first.

    Every compilation is cached (no minimum compile time or entry size). A cache
    directory already configured (by `JAX_COMPILATION_CACHE_DIR`, or by a caller such
    as a test suite) is kept as it is: JAX reads the setting once, at its first
    compilation. Returns the cache directory in use, or `None` when disabled.
    """
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    path = _cache_dir()
    if path is None:
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return path


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Form:
    """One formulation of a model: its system and how its state maps to and from the
    model's minimal coordinates (in which the CLI reads and prints states)."""

    system: Callable[[], Any]
    from_minimal: Callable[[Any], Any] | None = None
    to_minimal: Callable[[Any], Any] | None = None


@dataclasses.dataclass(frozen=True)
class _Model:
    """What the commands need to know about a model of the zoo."""

    description: str
    parameter_names: tuple[str, ...]
    make_params: Callable[..., Any]  # keyword values -> params; ValueError if bad
    default_state: Callable[[Any], Any]  # params -> minimal initial state
    state_names: tuple[str, ...]
    forms: dict[str, _Form]
    plot: Callable[[Any, Any, pathlib.Path], list[pathlib.Path]]

    @property
    def default_form(self) -> str:
        return next(iter(self.forms))


def _params_dict(params) -> dict[str, float]:
    return {f.name: float(getattr(params, f.name)) for f in dataclasses.fields(params)}


def _plot_hopper(trajectory, params, out: pathlib.Path) -> list[pathlib.Path]:
    from . import plot  # matplotlib is only needed when figures are written

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in (
        ("phase_portraits.png", plot.phase_portraits),
        ("energy.png", plot.energy_history),
    ):
        path = out / name
        draw(trajectory, params).savefig(path, dpi=150)
        written.append(path)
    return written


def _hopper() -> _Model:
    from . import models

    return _Model(
        description="two-mass vertical hopper (Zana et al. 2018)",
        parameter_names=(
            "g",
            "m",
            "mu",
            "k",
            "d_F",
            "d_G",
            "L0",
            "mu_U",
            "mu_L",
            "D_G",
            "D_F",
        ),
        make_params=models.hopper_params,
        default_state=models.default_initial_state,
        state_names=("z_U", "z_L", "v_U", "v_L"),
        forms={
            "minimal": _Form(models.minimal_hopper),
            "constrained": _Form(
                models.constrained_hopper, models.to_constrained, models.to_minimal
            ),
        },
        plot=_plot_hopper,
    )


# Factories, so that building the parser stays cheap; one entry per model.
_MODELS: dict[str, Callable[[], _Model]] = {"hopper": _hopper}


# ---------------------------------------------------------------------------
# Shared arguments
# ---------------------------------------------------------------------------


def _add_common_model_args(parser: argparse.ArgumentParser) -> None:
    """The model positional and `--set`, `--out`, `--json`, shared by commands."""
    parser.add_argument("model", choices=sorted(_MODELS), help="the model to use")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=(
            "set a model parameter (repeatable); for the hopper: g, m, mu, k, d_F, "
            "d_G, L0, mu_U, mu_L, or the dimensionless D_G, D_F"
        ),
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


def _parse_sets(
    parser: argparse.ArgumentParser, model: _Model, items: Sequence[str]
) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            parser.error(f"argument --set: expected NAME=VALUE, got {item!r}")
        if name not in model.parameter_names:
            parser.error(
                f"argument --set: unknown parameter {name!r}; known: "
                f"{', '.join(model.parameter_names)}"
            )
        if name in values:
            parser.error(f"argument --set: parameter {name!r} given twice")
        try:
            values[name] = float(text)
        except ValueError:
            parser.error(
                f"argument --set: parameter {name!r} needs a number, got {text!r}"
            )
    return values


def _make_params(
    parser: argparse.ArgumentParser, model: _Model, values: dict[str, float]
):
    try:
        return model.make_params(**values)
    except ValueError as error:
        parser.error(f"argument --set: {error}")


def _parse_state(
    parser: argparse.ArgumentParser, model: _Model, text: str
) -> np.ndarray:
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
    from ._simulate import RESULTS

    # TODO(cli): use `hybrax.status_message` once it handles `RESULTS` iteration.
    name = next(
        (
            name
            for name in RESULTS._name_to_item
            if bool(result == getattr(RESULTS, name))
        ),
        "unknown",
    )
    return name, (RESULTS[result] or name)


def _number(value) -> float | None:
    """A JSON-safe float: NaN and infinities become `null`."""
    value = float(value)
    return value if math.isfinite(value) else None


def _write_json(path: pathlib.Path, payload: dict[str, Any]) -> None:
    if path.parent != pathlib.Path(""):
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, allow_nan=False) + "\n")


# ---------------------------------------------------------------------------
# simulate
# ---------------------------------------------------------------------------


def _add_simulate(subparsers) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a model through a number of hops",
        description=(
            "Simulate a model from an initial state through --hops hops (a touchdown "
            "and a lift-off each), print the event table, and write figures (and "
            "optionally JSON)."
        ),
    )
    _add_common_model_args(parser)
    parser.add_argument(
        "--x0",
        default=None,
        metavar="zU,zL,vU,vL",
        help=(
            "initial state in minimal coordinates (default: both masses at rest, "
            "the foot 0.1 m up); write --x0=-1,... if the first value is negative"
        ),
    )
    parser.add_argument(
        "--hops",
        type=int,
        default=5,
        metavar="N",
        help="number of hops, i.e. 2N events (default: %(default)s)",
    )
    parser.add_argument(
        "--form",
        default=None,
        help="model formulation: minimal (default) or constrained",
    )
    parser.add_argument(
        "--t-max",
        type=float,
        default=50.0,
        metavar="T",
        help="give up if the events are not done by time T (default: %(default)s)",
    )
    parser.set_defaults(run=_run_simulate, command_parser=parser)


def _format_state(x) -> str:
    return "[" + ", ".join(f"{v:+.6f}" for v in x) + "]"


def _event_table(trajectory) -> list[str]:
    width = len(_format_state(np.zeros(4)))
    lines = [
        f"{'#':>3}  {'t [s]':>10}  {'event':<9}  {'state before':<{width}}  "
        f"{'state after':<{width}}  {'T_c [J]':>9}  {'T_a [J]':>9}"
    ]
    for k, kind in enumerate(trajectory.event_kinds):
        T_c, T_a = trajectory.T_c[k], trajectory.T_a[k]
        energy = (
            f"{T_c:9.4f}  {T_a:9.4f}"
            if np.isfinite(T_c) and np.isfinite(T_a)
            else f"{'':9}  {'':9}"
        )
        lines.append(
            f"{k + 1:>3}  {trajectory.t_events[k]:10.6f}  {kind:<9}  "
            f"{_format_state(trajectory.x_before[k])}  "
            f"{_format_state(trajectory.x_after[k])}  {energy}".rstrip()
        )
    return lines


def _run_simulate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ._simulate import RESULTS, simulate
    from .plot import Trajectory

    model = _MODELS[args.model]()
    form_name = model.default_form if args.form is None else args.form
    if form_name not in model.forms:
        parser.error(
            f"argument --form: invalid choice {form_name!r} for model "
            f"{args.model!r} (choose from {', '.join(model.forms)})"
        )
    if args.hops < 1:
        parser.error(f"argument --hops: must be a positive integer, got {args.hops}")
    if not (math.isfinite(args.t_max) and args.t_max > 0):
        parser.error(f"argument --t-max: must be positive, got {args.t_max}")
    params = _make_params(parser, model, _parse_sets(parser, model, args.set))
    if args.x0 is None:
        x0 = np.asarray(model.default_state(params), dtype=float)
    else:
        x0 = _parse_state(parser, model, args.x0)
    form = model.forms[form_name]
    system = form.system()
    # Python floats would be static under `eqx.filter_jit`: one compilation per
    # parameter value. As arrays, one compilation (and cache entry) serves them all.
    params = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype=float), params)
    state0 = x0 if form.from_minimal is None else form.from_minimal(x0)

    solution = simulate(
        system,
        jnp.asarray(state0, dtype=float),
        params,
        n_events=2 * args.hops,
        t_max=args.t_max,
        n_save=200,
    )
    trajectory = Trajectory.from_solution(solution, system, to_minimal=form.to_minimal)
    status, message = _status(solution.result)
    succeeded = bool(solution.result == RESULTS.successful)

    print(f"{args.model} ({form_name}), parameters:")
    print("  " + ", ".join(f"{k}={v:g}" for k, v in _params_dict(params).items()))
    print(f"  x0 = {_format_state(x0)}  ({', '.join(model.state_names)})")
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
    print()
    n_done = len(trajectory.t_events)
    summary = (
        f"status: {status} ({n_done} of {2 * args.hops} events, "
        f"t = {float(solution.t_final):.6f} s)"
    )
    if succeeded:
        print(summary)
    else:
        sys.stdout.flush()  # keep the table before the failure in a shared terminal
        print(f"{summary}: {message}", file=sys.stderr)

    if trajectory.t_phase.shape[0] > 0:
        for path in model.plot(trajectory, params, args.out):
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
            "hops": args.hops,
            "t_max": args.t_max,
            "status": status,
            "status_message": message,
            "t_final": float(solution.t_final),
            "events": events,
        }
        _write_json(args.json, payload)
        print(f"wrote {args.json}")
    return 0 if succeeded else 1


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description=(
            "Simulation and stability analysis of hybrid mechanical systems. "
            f"Models: {', '.join(sorted(_MODELS))}."
        ),
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {importlib.metadata.version('hybrax')}",
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="<command>", required=True
    )
    _add_simulate(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on `argv` (default `sys.argv[1:]`); returns the exit
    code. Argument errors raise `SystemExit(2)` with a one-line message."""
    _enable_x64()
    _enable_cache()
    parser = _build_parser()
    args = parser.parse_args(argv)
    # Errors found after parsing print the subcommand's usage: hand its parser on.
    return args.run(args, args.command_parser)
