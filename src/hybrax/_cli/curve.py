"""`hybrax continue ... --curve KIND --param2 NAME --stop2 VALUE`: the branch's
first fold, period doubling, Neimark-Sacker point or hybrid boundary followed in
a second parameter ([`hybrax.continue_orbit_curve`][]), and the branch's hybrid
boundaries (force reversals, grazings, release reversals).

Used by `hybrax._cli.continuation`: `add_curve_args` registers the options,
`check_curve_args` checks them before any computation, `check_curve_kind`
refuses a kind that the model cannot have, `follow_curve` runs the curve after
the branch and returns its JSON record, and `boundary_records` lists
the branch's hybrid boundaries.
"""

import argparse
import math
import sys
import time

from .._io import write_figure
from . import common


# --curve's names -> the special points' kinds.
CURVES = {
    "fold": "fold",
    "period-doubling": "period_doubling",
    "neimark-sacker": "neimark_sacker",
    "force-reversal": "force_reversal",
    "grazing": "grazing",
    "release-reversal": "release_reversal",
}
_MARKERS = {
    "cusp": "v",
    "fold_flip": "o",
    "resonance_1_1": "s",
    "resonance_1_2": "D",
    "fold": "P",
    "period_doubling": "X",
    "neimark_sacker": "*",
    "force_reversal": "^",
    "grazing": "d",
    "release_reversal": "<",
}


def curve_marker(kind: str) -> str:
    """The marker of a curve's special point of `kind` in figures."""
    return _MARKERS.get(kind, "x")


def add_curve_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "two-parameter curve",
        "follow the branch's first special point of a kind in a second parameter",
    )
    group.add_argument(
        "--curve",
        choices=tuple(CURVES),
        default=None,
        help="the kind of point followed (its first located one on the branch); "
        "adds the JSON entry 'curve' and the figure curve.png",
    )
    group.add_argument(
        "--param2",
        default=None,
        metavar="NAME",
        help="the second parameter, along which the curve is followed",
    )
    group.add_argument(
        "--stop2",
        type=common._finite_float,
        default=None,
        metavar="VALUE",
        help="follow the curve from the second parameter's value towards VALUE",
    )
    group.add_argument(
        "--curve-points",
        type=common.bounded_int(2, 10_000),
        default=40,
        metavar="N",
        help="the most points of the curve (default: %(default)s)",
    )


def check_curve_args(args: argparse.Namespace, parser, model, span) -> None:
    """Usage errors of the curve's options, before any computation; `span` is
    the continued parameter's range (its `name` and `parameter`)."""
    given = [args.curve is not None, args.param2 is not None, args.stop2 is not None]
    if any(given) and not all(given):
        parser.error("argument --curve: give --curve, --param2 and --stop2 together")
    if args.curve is None:
        return
    parameter2 = common.model_parameter(parser, model, args.param2, "--param2")
    # The same parameter twice (named, or the model's default `--param`), or
    # one field under two names (the hopper's d_G and its scaled D_G): a curve
    # in one parameter is no codimension-two curve.
    field, field2 = (getattr(p, "field", None) for p in (span.parameter, parameter2))
    if args.param2 == span.name or (field is not None and field == field2):
        parser.error(
            f"argument --param2: must differ from the continued parameter "
            f"{span.name} (--param)"
        )


def check_curve_kind(
    args: argparse.Namespace, parser, model, form_name: str, system, k: int
) -> None:
    """A usage error, before the branch is computed, where no branch of `system`
    (its section with `k` unknowns) can have a point of the `--curve` kind: a
    grazing needs a declared clearance, a release reversal a declared release
    velocity, a Neimark-Sacker point two unknowns (a complex pair of
    multipliers). A fold, a period doubling and a force reversal (a phase that
    starts past its guard) need no declaration."""
    from .._simulate import clearance_names, release_names

    if args.curve is None:
        return
    needs = {
        "grazing": (
            clearance_names(system),
            "a clearance that the model declares (a hybrax.Clearance phase observable)",
        ),
        "release-reversal": (
            release_names(system),
            "an impact that declares the release velocity of the contact it "
            "releases (e.g. ImpactRelabel(release=...))",
        ),
    }
    if args.curve in needs:
        declared, what = needs[args.curve]
        if not declared:
            parser.error(
                f"argument --curve: a {args.curve} point needs {what}; "
                f"{args.model} ({form_name}) declares none, so "
                "no branch of it has one"
            )
    if args.curve == "neimark-sacker" and k < 2:
        unknowns = ", ".join(model.section_unknowns(k))
        parser.error(
            "argument --curve: a neimark-sacker point needs a pair of complex "
            f"multipliers, so two or more section unknowns; {args.model}'s "
            f"section has {k} ({unknowns}), so no branch of it has one"
        )


def boundary_records(branch, name: str) -> dict[str, list[dict]]:
    """The branch's hybrid boundaries, printed and as JSON records:
    `force_reversals` (a phase that starts on its guard), `grazings` (a
    declared clearance reaching zero inside a phase) and `release_reversals`
    (an impact's release velocity changing sign). The last two are printed
    where the model declares such a quantity."""
    # Each kind: its JSON key, its points, whether it is printed, the record's
    # field naming the phase or event, the observable's field (None where the
    # guard itself is watched) and the value's field.
    kinds = (
        (
            "force_reversals",
            branch.force_reversals,
            True,
            "event",
            None,
            "guard_at_start",
        ),
        (
            "grazings",
            branch.grazings,
            bool(branch.clearance_names),
            "phase",
            "clearance",
            "value",
        ),
        (
            "release_reversals",
            branch.release_reversals,
            bool(branch.release_names),
            "event",
            "release",
            "value",
        ),
    )
    out = {}
    for key, points, shown, where, what, value in kinds:
        records = []
        for p in points:
            record = {name: float(p.parameter), where: p.event}
            if what is not None:
                record[what] = p.observable
            record[value] = float(p.test_value)
            record["located"] = bool(p.located)
            records.append(record)
        if shown:
            print(f"{key.replace('_', ' ')}: {len(records)}")
        for record in records:
            if what is None:
                crossing = f"the phase after event {record[where]} starts on its guard"
            else:
                crossing = f"{record[what]} of {where} {record[where]} reaches zero"
            print(f"  {name} = {record[name]:+.10f}  {crossing}")
        out[key] = records
    return out


def follow_curve(args, model, system, section, branch, params, span) -> dict:
    """Follow the branch's first located point of the `--curve` kind in
    `--param2` towards `--stop2`; print and return its JSON record (with
    `status` `no_point` where the branch has none)."""
    from .._continuation import ContinuationSettings, continue_orbit_curve
    from .._solution import status_name

    kind = CURVES[args.curve]
    points = [p for p in branch.special_points if p.kind == kind and p.located]
    parameter2 = model.parameter(args.param2)
    if not points:
        found = sum(p.kind == kind for p in branch.special_points)
        unlocated = f" ({found} found but not located)" if found else ""
        print(
            f"curve: no located {args.curve} point on the branch{unlocated}: "
            "nothing to follow in --param2",
            file=sys.stderr,
        )
        return {"kind": kind, "status": "no_point"}
    start2 = float(parameter2.get(params))
    if not math.isfinite(start2) or start2 == args.stop2:
        print(f"curve: --stop2 must differ from {args.param2} = {start2:g}")
        return {"kind": kind, "status": "empty_range"}
    # A bifurcation's defining test function holds the cycle's Jacobian. How
    # long its compilation takes is announced as it happens; each point's line
    # then says the measured pace and the time the point budget may still take.
    order = "second " if kind in ("fold", "period_doubling", "neimark_sacker") else ""
    print(
        f"curve: the {args.curve} at {span.name} = {points[0].parameter:.10g} "
        f"followed in {args.param2} from {start2:g} towards {args.stop2:g}, at "
        f"most {args.curve_points} points (first its corrector, with the cycle's "
        f"{order}derivatives, is compiled or loaded from the cache)"
    )
    sys.stdout.flush()
    begin = time.perf_counter()
    curve = continue_orbit_curve(
        system,
        section,
        points[0],
        params,
        span.parameter,
        parameter2,
        stop=args.stop2,
        settings=common.solver_settings(args),
        continuation_settings=ContinuationSettings(
            max_points=args.curve_points,
            parameter_scale=0.1 * abs(args.stop2 - start2),
        ),
    )
    elapsed = time.perf_counter() - begin
    status = status_name(curve.result)[0]
    print(
        f"curve: {curve.branch.n_points} points in {elapsed:.1f} s ({status}: "
        f"{curve.branch.message}); {span.name} from {curve.lam[0]:.8g} to "
        f"{curve.lam[-1]:.8g}"
        if curve.branch.n_points
        else f"curve: no point ({status}: {curve.branch.message})"
    )
    for p in curve.special_points:
        print(
            f"  {p.kind}: {span.name} = {p.u[-1]:+.10f}, {args.param2} = "
            f"{p.parameter:+.10f}"
            + _where(p)
            + ("" if p.located else "  (not located)")
        )
    return {
        "kind": kind,
        "status": status,
        "message": curve.branch.message,
        "n_points": curve.branch.n_points,
        "max_points": args.curve_points,
        "parameters": [span.name, args.param2],
        span.name: curve.lam.tolist(),
        args.param2: curve.mu.tolist(),
        "u": curve.u.tolist(),
        "codim2": [
            {
                "kind": p.kind,
                span.name: float(p.u[-1]),
                args.param2: float(p.parameter),
                "located": bool(p.located),
                **({} if p.event is None else {"event": p.event}),
                **({} if p.observable is None else {"observable": p.observable}),
            }
            for p in curve.special_points
        ],
        "seconds": elapsed,
    }


def _where(point) -> str:
    """Where a boundary met along a curve lies, in words."""
    if point.observable is not None:
        where = "phase" if point.kind == "grazing" else "event"
        return f"  ({point.observable} of {where} {point.event})"
    if point.event is not None:
        return f"  (the phase after event {point.event})"
    return ""


# Why a curve stopped before its range's end, as its figure says it.
_FIGURE_STOPS = {
    "max_points_reached": "point budget used up",
    "min_step_reached": "no step could be corrected",
    "max_period_reached": "longest period reached",
}


def write_curve_figure(record: dict, model, out) -> None:
    """`curve.png`: the curve in the plane of its two parameters, its
    codimension-two points marked, and its last point where it stopped before
    the end of its range (on its point budget, say)."""
    if "parameters" not in record or not record[record["parameters"][0]]:
        return
    from matplotlib.figure import Figure

    name, name2 = record["parameters"]
    fig = Figure(figsize=(6.4, 4.8), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    kind = record["kind"].replace("_", " ")
    ax.plot(record[name2], record[name], "-", color="tab:blue", label=f"{kind} curve")
    marked = set()
    for point in record["codim2"]:
        ax.plot(
            point[name2],
            point[name],
            curve_marker(point["kind"]),
            color="k",
            label=None if point["kind"] in marked else point["kind"].replace("_", " "),
        )
        marked.add(point["kind"])
    # A curve that stopped before its range's end: its last point marked with
    # why (the point budget, a failed step, ...), as the run's last line says.
    stopped = _FIGURE_STOPS.get(record["status"], record["status"].replace("_", " "))
    title = f"{kind} curve"
    if record["status"] != "reached_bound":
        ax.plot(
            record[name2][-1],
            record[name][-1],
            "o",
            markerfacecolor="none",
            markersize=10,
            color="tab:red",
            label=f"stopped: {stopped} at {name2} = {record[name2][-1]:.4g}",
        )
        title += f" (stopped: {stopped})"
    ax.set_xlabel(model.label(name2))
    ax.set_ylabel(model.label(name))
    ax.set_title(title)
    ax.legend(fontsize="small")
    path = write_figure(out / "curve.png", fig)
    print(f"wrote {path}")
