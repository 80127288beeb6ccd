"""`hybrax continue <model> --param NAME`: follow a branch of periodic orbits.

Registered by `hybrax._cli` through `add_parser(subparsers)`. For the hopper it
reproduces Zana et al. (2018) section 4.3, Figs. 6-9: the branch in the ground
damping $D_G$ from just below 0 downwards, with flight, ground and total times,
the nontrivial Floquet multiplier, apex heights and the kinetic-energy split at
touchdown; folds and period doublings are located and marked, stable orbits drawn
solid and unstable ones dashed. Orbits where the ground would have to pull right
after touchdown (not admissible for a unilateral contact) are kept and flagged.
"""

import argparse
import dataclasses
import math
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _cli
from .models.hopper import hopper_parameter


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Continuation:
    """What `continue` needs to know about a model, beyond `hybrax._cli._Model`."""

    parameter: Callable[[str], Any]  # name -> AbstractParameter; ValueError if bad
    default_parameter: str
    default_start: float
    default_stop: float
    parameter_scale: float  # the continuation's theta, for the default parameter
    guesses: Callable[[Any], list[Any]]  # params -> guesses of u, tried in order
    # (system, form, branch, params, parameter, t_max) -> per-point quantities
    summary: Callable[..., dict[str, Any]]
    limits: Callable[..., dict[str, Any]] | None = None
    figures: Callable[..., list[pathlib.Path]] | None = None


# Guesses of the hopper's lift-off velocity v_U for the start: the orbit near
# D_G = 0- hops low, those further out higher.
_HOPPER_GUESSES = (0.1, 0.2, 0.35, 0.5, 0.8, 1.2, 1.7, 2.5, 4.0)
# Longest simulated time of one phase.
_T_MAX = 50.0


def _hopper_guesses(params):
    from . import models

    return [models.orbit_guess(params, v) for v in _HOPPER_GUESSES]


@eqx.filter_jit
def _flights(system, states, params, parameter, values, t_max):
    """The flight phase from each lift-off state (batched), with its apexes."""
    from ._settings import Settings
    from ._simulate import simulate

    def one(x, value):
        return simulate(
            system,
            x,
            parameter.set(params, value),
            n_events=1,
            settings=Settings(t_max=t_max),
            mode0="flight",
        )

    return jax.vmap(one)(states, values)


def _hopper_summary(system, form, branch, params, parameter, t_max):
    """Per point: times, multiplier, apex heights, energy split at touchdown and
    the ground force right after it, as NumPy arrays."""
    sol = _flights(
        system,
        jnp.asarray(branch.state),
        params,
        parameter,
        jnp.asarray(branch.parameter),
        jnp.asarray(t_max, dtype=float),
    )
    apex_upper = np.asarray(sol.phase_observables["apex_upper"][:, 0], dtype=float)
    apex_lower = np.asarray(sol.phase_observables["apex_lower"][:, 0], dtype=float)
    T_c, T_a = branch.T_c[:, 0], branch.T_a[:, 0]
    # The signed guard of the ground mode is -lambda_g / (m g): negative right
    # after touchdown means lambda_g > 0, the ground would have to pull.
    guard = branch.guard_at_start[:, 0]
    weight = float(params.m) * float(params.g)
    return {
        "t_flight": branch.phase_durations[:, 0],
        "t_ground": branch.phase_durations[:, 1],
        "period": branch.period,
        "multiplier": branch.multipliers[:, 0].real,
        "apex_upper": apex_upper,
        "apex_lower": apex_lower,
        "Tc_over_T": T_c / (T_c + T_a),
        "Ta_over_T": T_a / (T_c + T_a),
        "ground_force_after_touchdown": -guard * weight,
        "pulling_after_touchdown": guard < 0,
        "v_U": branch.u[:, 1],
    }


def _hopper_limits(branch, summary, params, parameter) -> dict[str, Any]:
    """The limits the paper states: as D_G -> 0-, t_G -> 2 pi sqrt(m_U / k) and the
    multiplier -> 1; T_a / T -> mu as D_G decreases (read at the branch's ends)."""
    if parameter.name != "D_G" or branch.n_points == 0:
        return {}
    near_zero = int(np.argmax(branch.parameter))
    far = int(np.argmax(summary["t_flight"]))
    return {
        "t_p0": 2 * math.pi * math.sqrt(float(params.m_U) / float(params.k)),
        "D_G_nearest_zero": float(branch.parameter[near_zero]),
        "t_ground_nearest_zero": float(summary["t_ground"][near_zero]),
        "period_nearest_zero": float(summary["period"][near_zero]),
        "multiplier_nearest_zero": float(summary["multiplier"][near_zero]),
        "mu": float(params.mu),
        "D_G_longest_flight": float(branch.parameter[far]),
        "t_flight_longest": float(summary["t_flight"][far]),
        "Ta_over_T_longest_flight": float(summary["Ta_over_T"][far]),
        "multiplier_longest_flight": float(summary["multiplier"][far]),
    }


def _hopper_figures(branch, summary, params, parameter, out: pathlib.Path):
    from . import plot

    out.mkdir(parents=True, exist_ok=True)
    x = branch.parameter
    name = parameter.name
    xlabel = {"D_G": r"$D_G$", "D_F": r"$D_F$"}.get(name, name)
    common = dict(
        stable=branch.stable,
        folds=[f.index for f in branch.folds],
        period_doublings=[p.index for p in branch.period_doublings],
        flagged=summary["pulling_after_touchdown"],
        flagged_label="ground pulls after touchdown",
        xlabel=xlabel,
    )
    title = rf"$\mu = {float(params.mu):g}$"
    figures = {
        "fig6_times.png": dict(
            curves={
                r"$t_F$ (flight)": summary["t_flight"],
                r"$t_G$ (ground)": summary["t_ground"],
                r"$t_p$ (period)": summary["period"],
            },
            ylabel="time [s]",
            title=f"flight, ground and total time, {title}",
        ),
        "fig7_multiplier.png": dict(
            curves={r"$\nu$": summary["multiplier"]},
            ylabel="nontrivial Floquet multiplier",
            title=f"relevant multiplier, {title}",
            # -1 (period doubling) only where a multiplier is negative somewhere.
            reference_lines=(1.0, -1.0)
            if np.any(summary["multiplier"] < 0)
            else (1.0,),
        ),
        "fig8_apex.png": dict(
            curves={
                r"apex of $z_U$": summary["apex_upper"],
                r"apex of $z_L$": summary["apex_lower"],
            },
            ylabel="height [m]",
            title=f"apex heights in flight, {title}",
        ),
        "fig9_energy.png": dict(
            curves={
                r"$T_c / T$ (lost)": summary["Tc_over_T"],
                r"$T_a / T$ (kept)": summary["Ta_over_T"],
            },
            ylabel="share of kinetic energy at touchdown",
            title=f"energy split at touchdown, {title}",
            reference_lines=(float(params.mu),),
        ),
    }
    written = []
    for filename, spec in figures.items():
        path = out / filename
        plot.branch_figure(x, **spec, **common).savefig(path, dpi=150)
        written.append(path)
    return written


def _hopper() -> _Continuation:
    return _Continuation(
        parameter=hopper_parameter,
        default_parameter="D_G",
        default_start=-0.001,
        default_stop=-0.08,
        parameter_scale=0.01,
        guesses=_hopper_guesses,
        summary=_hopper_summary,
        limits=_hopper_limits,
        figures=_hopper_figures,
    )


_CONTINUATIONS: dict[str, Callable[[], _Continuation]] = {"hopper": _hopper}


# ---------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------


def add_parser(subparsers) -> None:
    """Register `hybrax continue`."""
    parser = subparsers.add_parser(
        "continue",
        help="follow a branch of periodic orbits in one parameter",
        description=(
            "Follow a branch of periodic orbits from --start towards --stop by "
            "pseudo-arclength continuation (through folds), locate folds and "
            "period doublings, print the special points and write the figures "
            "(for the hopper, Figs. 6-9 of Zana et al. 2018) and optionally JSON. "
            "The start orbit is found by shooting from a list of guesses. Exits 1 "
            "if no orbit is found at the start."
        ),
    )
    _cli._add_common_model_args(parser)
    _cli._add_form_arg(parser)
    parser.add_argument(
        "--param",
        default=None,
        metavar="NAME",
        help="the parameter to continue in (hopper default: D_G)",
    )
    parser.add_argument(
        "--start",
        type=float,
        default=None,
        metavar="VALUE",
        help="first parameter value (hopper D_G default: -0.001); write --start=-0.001",
    )
    parser.add_argument(
        "--stop",
        type=float,
        default=None,
        metavar="VALUE",
        help="follow the branch towards this value (hopper D_G default: -0.08)",
    )
    parser.add_argument(
        "--method",
        choices=("pseudo-arclength", "natural"),
        default="pseudo-arclength",
        help="continuation method (default: %(default)s)",
    )
    parser.add_argument(
        "--max-period",
        type=float,
        default=1.5,
        metavar="T",
        help="stop once the period exceeds T seconds (default: %(default)s)",
    )
    parser.add_argument(
        "--max-points",
        type=int,
        default=600,
        metavar="N",
        help="most points on the branch (default: %(default)s)",
    )
    parser.add_argument(
        "--max-step",
        type=float,
        default=0.05,
        metavar="H",
        help="largest step, scaled arclength (default: %(default)s)",
    )
    parser.add_argument(
        "--parameter-scale",
        type=float,
        default=None,
        metavar="THETA",
        help="arclength scale of the parameter (hopper D_G default: 0.01)",
    )
    parser.add_argument(
        "--tol",
        type=float,
        default=1e-10,
        metavar="TOL",
        help="integration tolerance rtol = atol per cycle (default: %(default)s)",
    )
    parser.set_defaults(run=_run_continue, command_parser=parser)


def _run_continue(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ._continuation import continue_branch
    from ._misc import canonical_params
    from ._settings import Settings

    model = _cli._MODELS[args.model]()
    if args.model not in _CONTINUATIONS or model.section is None:
        parser.error(f"argument model: no continuation for {args.model!r}")
    spec = _CONTINUATIONS[args.model]()
    form_name = _cli._form_name(parser, model, args)
    name = spec.default_parameter if args.param is None else args.param
    try:
        parameter = spec.parameter(name)
    except ValueError as error:
        parser.error(f"argument --param: {error}")
    default_range = name == spec.default_parameter
    start = args.start
    stop = args.stop
    if start is None or stop is None:
        if not default_range:
            parser.error(f"argument --start/--stop: give both for --param {name}")
        start = spec.default_start if start is None else start
        stop = spec.default_stop if stop is None else stop
    if not (math.isfinite(start) and math.isfinite(stop)) or start == stop:
        parser.error(f"argument --stop: must differ from --start; got {start}, {stop}")
    for label, value in (
        ("--max-period", args.max_period),
        ("--max-step", args.max_step),
        ("--tol", args.tol),
    ):
        if not (math.isfinite(value) and value > 0):
            parser.error(f"argument {label}: must be positive, got {value}")
    if args.max_points < 2:
        parser.error(
            f"argument --max-points: must be at least 2, got {args.max_points}"
        )
    theta = args.parameter_scale
    if theta is None:
        theta = spec.parameter_scale if default_range else 0.1 * abs(stop - start)
    if not (math.isfinite(theta) and theta > 0):
        parser.error(f"argument --parameter-scale: must be positive, got {theta}")

    values = _cli._parse_sets(parser, model, args.set)
    params = canonical_params(_cli._make_params(parser, model, values))
    params = parameter.set(params, jnp.asarray(start, dtype=float))
    form = model.forms[form_name]
    system = form.system()
    section = model.section(form_name)
    # Guesses of the reduced unknowns: the same for every form of a model.
    guesses = spec.guesses(params)

    began = time.perf_counter()
    branch = None
    for guess in guesses:
        branch = continue_branch(
            system,
            section,
            guess,
            params,
            parameter,
            start=start,
            stop=stop,
            method=args.method,
            step=min(0.02, args.max_step),
            max_step=args.max_step,
            max_points=args.max_points,
            max_period=args.max_period,
            parameter_scale=theta,
            settings=Settings(rtol=args.tol, atol=args.tol),
            throw=False,
        )
        if branch.status != "start_failed":
            break
    elapsed = time.perf_counter() - began
    assert branch is not None

    payload: dict[str, Any] = {
        "model": args.model,
        "form": form_name,
        "params": _cli._params_dict(params),
        "parameter": name,
        "start": start,
        "stop": stop,
        "method": args.method,
        "status": branch.status,
        "message": branch.message,
        "n_points": branch.n_points,
        "n_rejected": branch.n_rejected,
        "tol": args.tol,
        "seconds": elapsed,
    }
    print(f"{args.model} ({form_name}), parameters:")
    print("  " + ", ".join(f"{k}={v:g}" for k, v in payload["params"].items()))
    print(f"continuation in {name} from {start:g} towards {stop:g} ({args.method})")
    if branch.status == "start_failed":
        sys.stdout.flush()
        print(
            f"no periodic orbit found at {name} = {start:g} from any of "
            f"{len(guesses)} guesses: {branch.message}",
            file=sys.stderr,
        )
        payload.update(branch=[], folds=[], period_doublings=[], limits={})
        if args.json is not None:
            _cli._write_json(args.json, payload)
            print(f"wrote {args.json}")
        return 1

    summary = spec.summary(system, form, branch, params, parameter, _T_MAX)
    states = branch.state
    if form.to_minimal is not None:
        states = np.asarray(form.to_minimal(jnp.asarray(states)), dtype=float)
    print(
        f"  {branch.n_points} points in {elapsed:.1f} s ({branch.n_rejected} steps "
        f"retried); stopped: {branch.status} ({branch.message})"
    )
    n_stable = int(np.sum(branch.stable))
    n_flagged = int(np.sum(summary.get("pulling_after_touchdown", [])))
    print(
        f"  {n_stable} stable, {branch.n_points - n_stable} unstable; "
        f"{n_flagged} with the ground pulling right after touchdown"
    )
    print()

    def point_record(i: int) -> dict[str, Any]:
        record: dict[str, Any] = {name: float(branch.parameter[i])}
        for key, column in summary.items():
            value = column[i]
            if isinstance(value, np.bool_ | bool):
                record[key] = bool(value)
            else:
                record[key] = _cli._number(value)
        record["stable"] = bool(branch.stable[i])
        record["kind"] = branch.kind[i]
        record["state"] = [_cli._number(v) for v in states[i]]
        return record

    def special_record(special) -> dict[str, Any]:
        record = point_record(special.index)
        record["located"] = special.located
        record["test_value"] = _cli._number(special.test_value)
        return record

    records = [point_record(i) for i in range(branch.n_points)]
    folds = [special_record(f) for f in branch.folds]
    doublings = [special_record(p) for p in branch.period_doublings]
    for label, items in (("folds", folds), ("period doublings", doublings)):
        print(f"{label}: {len(items)}")
        for item in items:
            print(
                f"  {name} = {item[name]:+.10f}  t_flight = "
                f"{item.get('t_flight', float('nan')):.6f} s  multiplier = "
                f"{item.get('multiplier', float('nan')):+.10f}"
                + ("" if item["located"] else "  (not located)")
            )
    limits = {}
    if spec.limits is not None:
        limits = spec.limits(branch, summary, params, parameter)
    if limits:
        print()
        print("limits:")
        for key, value in limits.items():
            print(f"  {key:28s} {value:.10g}")
    payload.update(
        branch=records,
        folds=folds,
        period_doublings=doublings,
        limits={k: _cli._number(v) for k, v in limits.items()},
    )
    print()
    if spec.figures is not None:
        for path in spec.figures(branch, summary, params, parameter, args.out):
            print(f"wrote {path}")
    if args.json is not None:
        _cli._write_json(args.json, payload)
        print(f"wrote {args.json}")
    return 0
