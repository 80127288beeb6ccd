"""`hybrax continue <model> --param NAME`: follow a branch of periodic orbits.

Registered by `hybrax._cli` through `add_parser(subparsers)`. Any model whose bundle
declares a section and `continuation` defaults; its presentation adds per-point
quantities, flags, limits and figures (for the hopper, Zana et al. 2018 section
4.3, Figs. 6-9). Without them, every point carries its period and leading
multiplier, and the branch is drawn as period and multiplier against the
parameter.
"""

import argparse
import dataclasses
import functools
import math
import sys
import time
from typing import Any, NamedTuple

import numpy as np

from . import common
from .continuation_outputs import _bifurcation_figure, _branch_figures, _level_record
from .curve import (
    add_curve_args,
    boundary_records,
    check_curve_args,
    check_curve_kind,
    follow_curve,
    write_curve_figure,
)


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
            "pseudo-arclength continuation (through folds), locate folds, "
            "period doublings and Neimark-Sacker points, print the special points "
            "and write the figures "
            "(the model's, or period and multiplier along the branch) and "
            "optionally JSON. "
            "Defaults of --param, --start, --stop, --parameter-scale and "
            "--max-period are the model's. "
            "The start orbit is found by shooting from a list of guesses. Exits 1 "
            "if no orbit is found at the start, or if the branch has no point of "
            "the --curve kind."
        ),
    )
    common._add_common_model_args(parser)
    common._add_form_arg(parser)
    parser.add_argument(
        "--param",
        default=None,
        metavar="NAME",
        help="the parameter to continue in (default: the model's)",
    )
    parser.add_argument(
        "--start",
        type=common._finite_float,
        default=None,
        metavar="VALUE",
        help="first parameter value (default: the model's); write --start=-0.001",
    )
    parser.add_argument(
        "--stop",
        type=common._finite_float,
        default=None,
        metavar="VALUE",
        help="follow the branch towards this value (default: the model's)",
    )
    parser.add_argument(
        "--method",
        choices=("pseudo-arclength", "natural"),
        default="pseudo-arclength",
        help="continuation method (default: %(default)s)",
    )
    parser.add_argument(
        "--max-period",
        type=common._positive_float,
        default=None,
        metavar="T",
        help="stop once the period exceeds T seconds (default: the model's)",
    )
    parser.add_argument(
        "--max-points",
        type=common.bounded_int(2, common.MAX_COUNT),
        default=600,
        metavar="N",
        help="most points on the branch (default: %(default)s)",
    )
    parser.add_argument(
        "--max-step",
        type=common._positive_float,
        default=0.05,
        metavar="H",
        help="largest step, scaled arclength (default: %(default)s)",
    )
    parser.add_argument(
        "--parameter-scale",
        type=common._positive_float,
        default=None,
        metavar="THETA",
        help="arclength scale of the parameter (default: the model's)",
    )
    parser.add_argument(
        "--cascade",
        type=common.bounded_int(0, 10),
        default=0,
        metavar="LEVELS",
        help=(
            "at the first period doubling of the branch, switch onto the period-2 "
            "branch and follow it towards --stop; repeat LEVELS times down a "
            "period-doubling cascade (period 2, 4, ...; default: %(default)s). "
            "Adds the JSON list 'cascade' and the figure bifurcation.png"
        ),
    )
    add_curve_args(parser)
    common.add_solver_args(parser)
    parser.set_defaults(run=_run_continue, command_parser=parser)


def _continuation_settings(args: argparse.Namespace, span, method: str):
    """The command's `ContinuationSettings`: its step options, the parameter
    scale and the period bound of `span`."""
    from .._continuation import ContinuationSettings

    return ContinuationSettings(
        method=method,
        initial_step=min(0.02, args.max_step),
        max_step=args.max_step,
        max_points=args.max_points,
        parameter_scale=span.theta,
        max_period=span.max_period,
    )


class _Range(NamedTuple):
    """The parameter to continue in (its name and `Parameter`), the range to
    follow it over, the longest period followed and the parameter's arclength
    scale."""

    name: str
    parameter: Any
    start: float
    stop: float
    max_period: float | None
    theta: float


def _run_continue(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .._solution import RESULTS

    model = common._load_model(parser, args.model)
    if not model.has_orbits:
        parser.error(
            f"argument model: no continuation for {args.model!r} (it has no "
            "periodic orbits)"
        )
    spec = model.presentation.continuation  # the model's defaults, or None
    form_name = common._form_name(parser, model, args)
    form = model.forms[form_name]
    if form.section is None:
        parser.error(f"argument --form: no Poincaré section for {form_name!r}")
    span = _continuation_range(args, parser, model, spec)
    check_curve_args(args, parser, model, span)
    params = _start_params(args, parser, model, span)
    system = form.system()
    section = form.section()
    # Guesses of the reduced unknowns: the same for every form of a model.
    guesses = model.start_guesses(params)
    k = int(np.shape(guesses[0])[-1])
    check_curve_kind(args, parser, model, form_name, system, k)
    branch, elapsed = _branch_from_guesses(args, system, section, guesses, params, span)

    payload = _continue_payload(args, form_name, params, span, branch, elapsed)
    name, start, stop = span.name, span.start, span.stop
    print(f"{args.model} ({form_name}), parameters:")
    print(common._params_lines(payload["params"]))
    print(f"continuation in {name} from {start:g} towards {stop:g} ({args.method})")
    if branch.result == RESULTS.start_failed:
        hint = _start_hint(args, model, system, section, guesses[-1], params, span)
        return _report_start_failed(args, payload, span, len(guesses), branch, hint)

    summary = _branch_summary(
        args, model, system, section, branch, params, span.parameter
    )
    _print_branch_counts(model, branch, summary, elapsed)
    records, folds, doublings, tori = _point_records(form, branch, summary, name)
    _print_special_points(name, folds, doublings, tori)
    payload.update(boundary_records(branch, name))
    limits = _branch_limits(model, branch, summary, params, span.parameter)
    payload.update(
        branch=records,
        folds=folds,
        period_doublings=doublings,
        neimark_sackers=tori,
        limits={k: common._number(v) for k, v in limits.items()},
    )
    levels, interrupted = _cascade_levels(
        args, model, form, system, section, branch, params, span, payload
    )
    if args.curve is not None and not interrupted:
        payload["curve"] = follow_curve(
            args, model, system, section, branch, params, span
        )
    print()
    if args.figures:
        _write_continue_figures(
            args, model, form, levels, summary, params, span.parameter
        )
        if "curve" in payload:
            write_curve_figure(payload["curve"], model, args.out)
    if not interrupted:
        _finish_run(args, span, levels, payload)
    if args.json is not None:
        # The curve's record names its two parameters' columns.
        curve = ("continue: curve", (span.name, args.param2))
        common._write_json(args.json, payload, "continue", records={"curve": curve})
        print(f"wrote {args.json}")
    if interrupted:
        _report_interrupted(branch)
        return 130
    # Why the run ended, last (the branch's bound, its point budget and how far
    # it got, a failure and its cause; or its cascade's, or its curve's).
    print(payload["end"])
    # A curve asked for and not followed (the branch has no such point).
    return 1 if payload.get("curve", {}).get("status") == "no_point" else 0


def _continuation_range(
    args: argparse.Namespace, parser: argparse.ArgumentParser, model, spec
) -> _Range:
    """The parameter, range, longest period and parameter scale from the command
    line, each defaulting to the model's `spec` (a usage error where one is
    invalid, or where only one end of another parameter's range is given).
    Without a `spec`, `--param`, `--start` and `--stop` are required and the
    period has no bound unless `--max-period` gives one."""
    if spec is None and args.param is None:
        parser.error(
            f"argument --param: required for {args.model!r} (it has no "
            "continuation defaults); give --param, --start and --stop"
        )
    name = spec.parameter if args.param is None else args.param
    parameter = common.model_parameter(parser, model, name, "--param")
    default_range = spec is not None and name == spec.parameter
    max_period = args.max_period
    if max_period is None and spec is not None:
        max_period = spec.max_period
    start = args.start
    stop = args.stop
    if start is None or stop is None:
        if not default_range:
            parser.error(f"argument --start/--stop: give both for --param {name}")
        start = spec.start if start is None else start
        stop = spec.stop if stop is None else stop
    if not (math.isfinite(start) and math.isfinite(stop)) or start == stop:
        parser.error(f"argument --stop: must differ from --start; got {start}, {stop}")
    for label, value in (
        ("--max-period", max_period),
        ("--max-step", args.max_step),
    ):
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"argument {label}: must be positive, got {value}")
    if not 0 <= args.cascade <= 6:
        parser.error(f"argument --cascade: must be in 0..6, got {args.cascade}")
    if args.max_points < 2:
        parser.error(
            f"argument --max-points: must be at least 2, got {args.max_points}"
        )
    theta = args.parameter_scale
    if theta is None:
        theta = spec.parameter_scale if default_range else 0.1 * abs(stop - start)
    if not (math.isfinite(theta) and theta > 0):
        parser.error(f"argument --parameter-scale: must be positive, got {theta}")
    return _Range(name, parameter, start, stop, max_period, theta)


def _start_params(
    args: argparse.Namespace, parser: argparse.ArgumentParser, model, span: _Range
):
    """The model's parameters with `--set`/`--params` applied, at the start of the
    range (a usage error where either end breaks the parameters' rules)."""
    import jax.numpy as jnp

    from .._misc import canonical_params

    parameter = span.parameter
    values = common._parse_sets(parser, model, args.set, args.params)
    params = canonical_params(common._make_params(parser, model, values))
    for label, value in (("--stop", span.stop), ("--start", span.start)):
        try:
            # Rebuilt, the parameters check their rules at that value too.
            dataclasses.replace(parameter.set(params, jnp.asarray(value, float)))
        except ValueError as error:
            parser.error(f"argument {label}: {span.name}={value:g}: {error}")
    return parameter.set(params, jnp.asarray(span.start, dtype=float))


def _branch_from_guesses(
    args: argparse.Namespace, system, section, guesses, params, span: _Range
):
    """The branch followed from the first of `guesses` whose start orbit is
    found ([`hybrax.continue_orbits`][] tries them in order), the partial branch
    where interrupted: `(branch, seconds)`."""
    from .._continuation import continue_orbits
    from .._solution import Interrupted

    began = time.perf_counter()
    try:
        branch = continue_orbits(
            system,
            section,
            list(guesses),
            params,
            span.parameter,
            start=span.start,
            stop=span.stop,
            continuation_settings=_continuation_settings(args, span, args.method),
            settings=common.solver_settings(args),
            throw=False,
        )
    except Interrupted as stop_early:
        if stop_early.partial is None:  # no point yet: `main`'s one line
            raise KeyboardInterrupt from None
        branch = stop_early.partial
    return branch, time.perf_counter() - began


def _continue_payload(
    args: argparse.Namespace, form_name: str, params, span: _Range, branch, elapsed
) -> dict[str, Any]:
    """The JSON's entries on the inputs and on how the continuation ended."""
    from .._solution import status_name

    return {
        "model": args.model,
        "form": form_name,
        "params": common._params_dict(params),
        "parameter": span.name,
        "start": span.start,
        "stop": span.stop,
        "method": args.method,
        # How the run ended (its last stage: the branch, its cascade or its
        # curve; `_finish_run` sets them), and how the branch itself ended.
        "status": status_name(branch.result)[0],
        "message": branch.message,
        "branch_status": status_name(branch.result)[0],
        "branch_message": branch.message,
        "n_points": branch.n_points,
        "n_rejected": branch.n_rejected,
        "settings": common.solver_record(args),
        "seconds": elapsed,
    }


def _report_start_failed(
    args: argparse.Namespace,
    payload: dict[str, Any],
    span: _Range,
    n_guesses: int,
    branch,
    hint: str | None = None,
) -> int:
    """Say that no guess led to an orbit at the start (and the model's `hint`
    of why, where it has one) and write the JSON with an empty branch; exit
    status 1."""
    sys.stdout.flush()
    end = (
        f"no periodic orbit found at {span.name} = {span.start:g} from any of "
        f"{n_guesses} guesses: {branch.message}"
    )
    payload.update(ended_in="branch", end=f"ended: {end}")
    print(end, file=sys.stderr)
    if hint is not None:
        print(f"note: {hint}.", file=sys.stderr)
    payload.update(
        branch=[], folds=[], period_doublings=[], neimark_sackers=[], limits={}
    )
    if args.json is not None:
        common._write_json(args.json, payload, "continue")
        print(f"wrote {args.json}")
    return 1


def _start_hint(args, model, system, section, guess, params, span) -> str | None:
    """The model's words for why the cycle from the last guess fails at the
    start (`Presentation.no_orbit_hint`, else `explain` of the cycle's status),
    or `None`."""
    from .._continuation import start_cycle_failure

    no_orbit_hint = model.presentation.no_orbit_hint
    hint = None if no_orbit_hint is None else no_orbit_hint(params)
    explain = model.presentation.explain
    if hint is not None or explain is None:
        return hint
    cause = start_cycle_failure(
        system,
        section,
        span.parameter,
        params,
        guess,
        span.start,
        common.solver_settings(args),
    )
    return None if cause is None else explain(*cause, params)


def _branch_summary(args, model, system, section, branch, params, parameter):
    """The per-point columns of the branch, by name: the period, the leading
    multiplier (its real value where it is real, -1 at a period doubling, else
    its modulus), then each of the model's declared quantities
    (`hybrax.branch_quantities`, the cycles at the run's solver settings)."""
    from .._continuation import branch_quantities

    leading = branch.multipliers[:, 0]
    real = np.abs(np.imag(leading)) <= 1e-12 * np.maximum(1.0, np.abs(leading))
    summary = {
        "period": branch.period,
        "multiplier": np.where(real, np.real(leading), np.abs(leading)),
    }
    declared = {
        name: model.quantity(name)
        for name in model.quantities or {}
        if name not in summary
    }
    summary.update(
        branch_quantities(
            system,
            section,
            branch,
            params,
            parameter,
            declared,
            settings=common.solver_settings(args),
        )
    )
    return summary


def _print_branch_counts(model, branch, summary, elapsed: float) -> None:
    """How the continuation went: points, time, retried steps, why it stopped,
    and how many points are stable (and flagged by the model)."""
    from .._solution import status_name

    print(
        f"  {branch.n_points} points in {elapsed:.1f} s ({branch.n_rejected} steps "
        f"retried); stopped: {status_name(branch.result)[0]} ({branch.message})"
    )
    n_stable = int(np.sum(branch.stable))
    line = f"  {n_stable} stable, {branch.n_points - n_stable} unstable"
    # How many points meet each declared condition that the branch's columns
    # carry (a quantity with `unit=None`, e.g. the hopper's ground pulling).
    for name in model.quantities or {}:
        quantity = model.quantity(name)
        # (A condition that reads what nothing records is a float column of
        # NaN: unknown, not counted.)
        if quantity.is_condition and summary.get(name, np.zeros(0)).dtype == bool:
            count = int(np.sum(np.asarray(summary[name], dtype=bool)))
            line += f"; {count} where {quantity.meaning or name}"
    print(line)
    print()


def _point_records(form, branch, summary, name: str):
    """The JSON records of every point of the branch and of its folds, period
    doublings and Neimark-Sacker points (those with where they were located):
    `(points, folds, doublings, tori)`."""
    import jax.numpy as jnp

    states = branch.state
    if form.to_minimal is not None:
        states = np.asarray(form.to_minimal(jnp.asarray(states)), dtype=float)

    def point_record(i: int) -> dict[str, Any]:
        record: dict[str, Any] = {name: float(branch.parameter[i])}
        for key, column in summary.items():
            value = column[i]
            if isinstance(value, np.bool_ | bool):
                record[key] = bool(value)
            else:
                record[key] = common._number(value)
        record["stable"] = bool(branch.stable[i])
        record["kind"] = branch.kind[i]
        record["state"] = [common._number(v) for v in states[i]]
        return record

    def special_record(special) -> dict[str, Any]:
        record = point_record(special.index)
        record["located"] = special.located
        record["test_value"] = common._number(special.test_value)
        return record

    return (
        [point_record(i) for i in range(branch.n_points)],
        [special_record(f) for f in branch.folds],
        [special_record(p) for p in branch.period_doublings],
        [special_record(p) for p in branch.neimark_sackers],
    )


def _print_special_points(name: str, folds, doublings, tori) -> None:
    """Each kind of special point with its parameter, period and multiplier."""
    for label, items in (
        ("folds", folds),
        ("period doublings", doublings),
        ("Neimark-Sacker points", tori),
    ):
        print(f"{label}: {len(items)}")
        for item in items:
            period = item.get("period")
            multiplier = item.get("multiplier")
            print(
                f"  {name} = {item[name]:+.10f}  period = "
                f"{float('nan') if period is None else period:.6f} s  multiplier = "
                f"{float('nan') if multiplier is None else multiplier:+.10f}"
                + ("" if item["located"] else "  (not located)")
            )


def _branch_limits(model, branch, summary, params, parameter) -> dict:
    """The model's limits along the branch (none without its hook), printed."""
    limits = {}
    find_limits = model.presentation.continuation_limits
    if find_limits is not None:
        limits = find_limits(branch, summary, params, parameter)
    if limits:
        print()
        print("limits:")
        for key, value in limits.items():
            print(f"  {key:28s} {value:.10g}")
    return limits


def _cascade_levels(
    args: argparse.Namespace,
    model,
    form,
    system,
    section,
    branch,
    params,
    span: _Range,
    payload: dict[str, Any],
):
    """The branch and, with `--cascade`, its period-doubled levels, whose records
    go into `payload`: `([(section, branch), ...], interrupted)`."""
    from .._solution import RESULTS, Interrupted

    levels = [(section, branch)]
    interrupted = bool(branch.result == RESULTS.interrupted)
    if not args.cascade or interrupted:
        return levels, interrupted
    try:
        doubled, cascade = _follow_cascade(
            args,
            system,
            section,
            branch,
            params,
            span,
        )
        levels += doubled
        payload["cascade_ended"] = cascade.ended
        if cascade.failed_switch is not None:
            payload["cascade_failure"] = cascade.failed_switch.branch.message
    except Interrupted:  # the first branch is whole; the cascade is dropped
        payload["cascade_status"] = "interrupted"
        return levels, True
    payload["cascade"] = [
        _level_record(model, form, level_section, level, span.parameter, 2**k)
        for k, (level_section, level) in enumerate(levels)
        if k > 0
    ]
    return levels, False


def _write_continue_figures(
    args: argparse.Namespace, model, form, levels, summary, params, parameter
) -> None:
    """The cascade's bifurcation diagram (where it has levels) and the branch's
    figures (the model's, else period and multiplier), each path printed."""
    if len(levels) > 1:
        for path in _bifurcation_figure(model, form, levels, parameter, args):
            print(f"wrote {path}")
    branch = levels[0][1]
    figures = model.presentation.continuation_figures or functools.partial(
        _branch_figures, model
    )
    for path in figures(branch, summary, params, parameter, args.out):
        print(f"wrote {path}")


# What a continuation's status says of how it stopped, and the option that
# sets the limit it met (where one does).
_STOPS = {
    "reached_bound": ("reached the end of its range", None),
    "max_points_reached": ("used up its point budget", "points"),
    "max_period_reached": ("reached the longest period", "--max-period"),
    "min_step_reached": ("failed", None),
    "start_failed": ("could not start", None),
}


def _stop_words(what: str, status: str, message: str, budget: str) -> str:
    """`the <what> <how it stopped>: <message>`, naming the option of the limit
    it met (`budget`: the point budget's option and value) and, for a failure,
    its possible causes (the status's own)."""
    from .._solution import RESULTS, status_message

    how, option = _STOPS.get(status, (f"stopped ({status})", None))
    option = budget if option == "points" else option
    words = f"the {what} {how}" + ("" if option is None else f" ({option})")
    words += f": {message}"
    if status == "min_step_reached" and "fold" not in message:
        # The library's causes, after its own first sentence's colon.
        (text,) = status_message(RESULTS.min_step_reached)
        words += f" ({text.split(': ', 1)[-1].rstrip('.')})"
    return words


def _finish_run(args: argparse.Namespace, span: _Range, levels, payload) -> None:
    """Set how the whole run ended in `payload`: `ended_in` (its last stage:
    `branch`, `cascade` or `curve`), `status` and `message` (that stage's), and
    `end`, the line that says so (printed last)."""
    curve = payload.get("curve")
    if curve is not None:
        stage, status, message = "curve", curve["status"], curve.get("message", "")
        what = f"{args.curve} curve"
        if status == "no_point":
            message = f"no located {args.curve} point on the branch to follow"
        elif status == "empty_range":
            message = (
                f"--stop2 is {args.param2}'s value at the start: nothing to follow"
            )
        end = message
        if status not in ("no_point", "empty_range"):
            budget = f"--curve-points {args.curve_points}"
            end = _stop_words(what, status, message, budget)
            if status == "reached_bound":
                end = _reached(what, args.param2, curve[args.param2][-1], message)
    elif "cascade_ended" in payload:
        stage, status = "cascade", payload["cascade_ended"]
        last, period = levels[-1][1], 2 ** (len(levels) - 1)
        if status == "no_period_doubling":
            message = end = (
                f"the cascade found no located period doubling on the "
                f"period-{period} branch"
            )
        elif status == "start_failed":
            message = payload.get("cascade_failure", "")
            end = (
                f"the cascade found no period-{2 * period} orbit at the period "
                f"doubling of the period-{period} branch: {message}"
            )
        else:  # every level asked for: the last level's own end
            status, message = payload["cascade"][-1]["status"], last.message
            what = f"period-{period} branch"
            end = _stop_words(what, status, message, f"--max-points {args.max_points}")
            if status == "reached_bound":
                end = _reached(what, span.name, last.parameter[-1], message)
            end = f"the cascade followed its {len(levels) - 1} level(s); {end}"
    else:
        branch = levels[0][1]
        stage, status, message = "branch", payload["branch_status"], branch.message
        end = _stop_words("branch", status, message, f"--max-points {args.max_points}")
        if status == "reached_bound":
            end = _reached("branch", span.name, branch.parameter[-1], message)
    payload.update(ended_in=stage, status=status, message=message, end=f"ended: {end}")


def _reached(what: str, name: str, value, message: str) -> str:
    """The words of a continuation that reached the end of its range."""
    value = float(value)
    return (
        f"the {what} reached the end of its range at {name} = {value:.8g} ({message})"
    )


def _report_interrupted(branch) -> None:
    """Say where an interrupted continuation stopped and what was written."""
    from .._solution import RESULTS

    what = (
        f"after {branch.n_points} points; wrote the branch so far (continue "
        f"it with --start {float(branch.parameter[-1])!r})"
        if branch.result == RESULTS.interrupted
        else "during the cascade; wrote the first branch without it"
    )
    print(f"hybrax continue: interrupted {what}", file=sys.stderr)


def _follow_cascade(args, system, section, branch, params, span):
    """Switch onto the period-2 branch at the first period doubling of `branch`,
    then of that branch, `args.cascade` times ([`hybrax.continue_cascade`][]),
    saying what each level found: `([(section, branch), ...], cascade)`, the
    doubled levels and the [`hybrax.Cascade`][] (why it ended)."""
    from .._continuation import continue_cascade
    from .._solution import status_name

    cascade = continue_cascade(
        system,
        section,
        branch,
        params,
        span.parameter,
        levels=args.cascade,
        stop=span.stop,
        settings=common.solver_settings(args),
        # The same step control as the period-1 branch (switched branches leave
        # their doubling along the arclength).
        continuation_settings=_continuation_settings(args, span, "pseudo-arclength"),
    )
    switches = list(zip(cascade.doublings, cascade.branches[1:], cascade.seconds[1:]))
    failed = cascade.failed_switch
    if failed is not None:
        switches.append((failed.doubling, failed.branch, failed.seconds))
    for k, (point, doubled, elapsed) in enumerate(switches, start=1):
        print(
            f"cascade: period-{2**k} branch from {span.parameter.name} = "
            f"{point.parameter:+.10f}: {doubled.n_points} points in {elapsed:.1f} s; "
            f"stopped: {status_name(doubled.result)[0]} ({doubled.message}); "
            f"{len(doubled.period_doublings)} period doubling(s)"
        )
        for p in doubled.period_doublings:
            print(f"  period doubling at {span.parameter.name} = {p.parameter:+.10f}")
    if cascade.ended == "no_period_doubling":
        level = len(cascade.branches) - 1
        print(
            f"cascade: no located period doubling on the period-{2**level} "
            "branch; stopped"
        )
    return list(zip(cascade.sections[1:], cascade.branches[1:])), cascade
