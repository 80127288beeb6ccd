"""The map of `hybrax sweep` over a 2-D grid, `sweep_heatmap.png`: the leading
nontrivial multiplier's magnitude (or `--quantity`) with the stability boundary
contoured, the points without an orbit, flagged, failed or not run marked, and the
`--curves` of `hybrax continue --curve` drawn over it."""

import argparse
import pathlib
from typing import TYPE_CHECKING

import numpy as np

from .._io import write_figure


if TYPE_CHECKING:  # (annotations only: the command's module imports this one)
    from .sweep import _SweepProblem, _SweepTally


def write_heatmap(
    args: argparse.Namespace,
    problem: "_SweepProblem",
    out,
    columns: dict[str, np.ndarray],
    tally: "_SweepTally",
    curves: list[tuple] = (),
) -> pathlib.Path:
    """Write `sweep_heatmap.png` of a 2-D grid: the leading multiplier's magnitude
    (or `--quantity`) where an orbit converged, the other points marked, and the
    `--curves` drawn over it."""
    from .. import plot
    from .._solution import NUMERICAL_FAILURES

    (xname, x), (yname, y) = problem.axes
    shape = (len(x), len(y))
    if args.quantity is None:
        values = np.abs(np.asarray(out.multipliers)[:, 0])
        title = f"{args.model}: leading nontrivial Floquet multiplier"
    else:
        values = columns[args.quantity]
        title = f"{args.model}: {args.quantity}"
    values = np.where(tally.converged | tally.pulling, values, np.nan).reshape(shape)
    fig = plot.sweep_heatmap(
        x,
        y,
        values,
        xlabel=problem.model.label(xname),
        ylabel=problem.model.label(yname),
        flagged=tally.pulling.reshape(shape),
        flagged_label=problem.flag[2],
        no_orbit_label=(
            "no periodic orbit (from the guess, the neighbours' orbits, the return map)"
        ),
        title=title,
        level=1.0 if args.quantity is None else None,
        not_run=tally.not_run.reshape(shape),
        # A numerical failure, apart from no orbit found.
        failed=np.isin(columns["status"], sorted(NUMERICAL_FAILURES)).reshape(shape),
        colorbar_label=(
            r"leading nontrivial $|\nu|$ (dimensionless)"
            if args.quantity is None
            else problem.model.label(args.quantity)
        ),
    )
    if curves:
        ax = fig.axes[0]
        limits = ax.get_xlim(), ax.get_ylim()
        drawn = len(ax.get_lines())
        draw_curves(ax, curves)
        ax.set_xlim(limits[0])
        ax.set_ylim(limits[1])
        # The curves and their points only: the cells not run (a labelled
        # collection) are named in the legend below the map already.
        named = [
            line
            for line in ax.get_lines()[drawn:]
            if not line.get_label().startswith("_")
        ]
        ax.legend(handles=named, loc="best", fontsize="small")
    return write_figure(args.out / "sweep_heatmap.png", fig)


def draw_curves(ax, curves) -> None:
    """Draw `--curves`' `(kind, x, y, points)` over a heat map's axes: one line
    style, colour and legend entry per kind, each special point marked."""
    from matplotlib import patheffects

    from .curve import curve_marker

    styles: dict[str, tuple[str, str]] = {}
    marked: set[str] = set()
    # Above the |nu| = 1 contour, in colour with a white edge: a
    # period-doubling curve lies on that contour (nu = -1 there) and, drawn
    # black beneath it, could not be seen.
    halo = [patheffects.withStroke(linewidth=3.6, foreground="white")]
    colours = ("tab:red", "tab:purple", "tab:orange", "tab:cyan")
    for kind, cx, cy, points in curves:
        # One style and one legend entry per kind (a curve followed in both
        # directions is two files).
        label = None if kind in styles else f"{kind.replace('_', ' ')} curve"
        styles.setdefault(
            kind,
            (("--", ":", "-.", "-")[len(styles) % 4], colours[len(styles) % 4]),
        )
        line_style, colour = styles[kind]
        ax.plot(
            cx, cy, line_style, color=colour, linewidth=1.8, label=label,
            zorder=6, path_effects=halo,
        )  # fmt: skip
        for point_kind, px, py in points:
            ax.plot(
                px,
                py,
                curve_marker(point_kind),
                color=colour,
                markeredgecolor="k",
                markersize=7,
                zorder=7,
                label=None if point_kind in marked else point_kind.replace("_", " "),
            )
            marked.add(point_kind)


def read_curves(args, parser, axes) -> list[tuple]:
    """The `--curves` files' curves as `(kind, x, y, points)` in the grid's
    axes, `points` their special points as `(kind, x, y)` (a usage error for a
    file without a curve over the grid's two parameters)."""
    import json

    names = [name for name, _ in axes]
    curves = []
    for path in args.curves:
        try:
            curve = json.loads(path.read_text())["curve"]
            first, second = curve["parameters"]
            values = {first: curve[first], second: curve[second]}
        except (OSError, ValueError, KeyError, TypeError) as error:
            parser.error(
                f"argument --curves: {str(path)!r} holds no `hybrax continue --curve` "
                f"result ({type(error).__name__}: {error})"
            )
        if len(names) != 2 or set(values) != set(names):
            parser.error(
                f"argument --curves: {str(path)!r} is a curve over {first} and "
                f"{second}; the grid is over {', '.join(names)}"
            )
        points = [
            (point["kind"], point[names[0]], point[names[1]])
            for point in curve.get("codim2", ())
            if names[0] in point and names[1] in point
        ]
        curves.append(
            (
                curve["kind"],
                np.asarray(values[names[0]]),
                np.asarray(values[names[1]]),
                points,
            )
        )
    return curves
