"""Figures of the analyses' results: branches and bifurcation diagrams, sweep heat
maps, and the path and history of a tuning.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
from jaxtyping import Float
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._legend import legend_below


_BRANCH_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")


# The cells of a sweep heat map that an interrupted sweep did not solve: a mid
# grey, cross-hatched (the cells without an orbit are a lighter grey, hatched one
# way; white is |nu| = 1).
_NOT_RUN_STYLE = dict(facecolor="0.72", edgecolor="0.35", hatch="xx")


def _stability_runs(stable: np.ndarray) -> list[tuple[int, int, bool]]:
    """Maximal runs `(first, last, stable)` of equal stability; each run ends on
    the first point of the next, so that the drawn curve stays connected."""
    runs = []
    start = 0
    n = stable.shape[0]
    for i in range(1, n + 1):
        if i == n or stable[i] != stable[start]:
            runs.append((start, min(i, n - 1), bool(stable[start])))
            start = i
    return runs


# Marker, abbreviation and name of the special points a branch figure marks.
_SPECIAL_STYLES = (
    ("o", "LP", "fold"),
    ("s", "PD", "period doubling"),
    ("D", "NS", "Neimark-Sacker"),
)


# The colour of a branch's stretches that are not admissible (`flagged`).
_FLAGGED_COLOUR = "0.72"


def _crowded(x, values, point, labelled, share: float = 0.04) -> bool:
    """Whether `point` lies within `share` of the plotted ranges (in both
    directions) of a point already labelled."""
    ys = np.concatenate([np.ravel(v) for v in values.values()]) if values else x
    x_span = float(np.nanmax(x) - np.nanmin(x)) or 1.0
    y_span = float(np.nanmax(ys) - np.nanmin(ys)) or 1.0
    return any(
        abs(point[0] - px) < share * x_span and abs(point[1] - py) < share * y_span
        for px, py in labelled
    )


def branch_figure(
    parameter: Float[np.ndarray, " N"],
    curves: dict[str, Float[np.ndarray, " N"]],
    stable: np.ndarray,
    *,
    folds: Sequence[int] = (),
    period_doublings: Sequence[int] = (),
    neimark_sackers: Sequence[int] = (),
    flagged: np.ndarray | None = None,
    flagged_label: str = "flagged",
    flag_change_label: str | None = None,
    reference_lines: Sequence[float | tuple[float, str]] = (),
    xlabel: str = r"$\lambda$",
    ylabel: str = "",
    title: str = "",
    ax: Axes | None = None,
    legend: bool = True,
) -> Figure:
    r"""Quantities along a branch of periodic orbits against the continuation
    parameter, in the style of bifurcation diagrams: stable orbits solid, unstable
    ones dashed, folds and period doublings marked (Zana et al. 2018, Figs. 6-9).

    **Arguments:**

    - `parameter`: the parameter value of each point, in the order followed (a
      [`hybrax.Branch`][]'s `parameter`).
    - `curves`: label $\to$ one value per point; each curve gets its colour.
    - `stable`: whether each orbit is stable (`Branch.stable`).
    - `folds`, `period_doublings`, `neimark_sackers`: indices of the located
      special points in the arrays (`SpecialPoint.index` of `branch.folds`,
      `branch.period_doublings`, `branch.neimark_sackers`); marked with circles,
      squares and diamonds on every curve and labelled LP, PD and NS (the usual
      abbreviations). The legend lists only what is drawn.
    - `flagged`: points that are not results like the others, e.g. orbits that
      are not admissible (for the hopper: the ground pulls right after
      touchdown): their stretches of every curve are drawn thin and light grey
      (in the stability's line style), with the legend entry `flagged_label`.
      Labels of special points close to one already labelled are left out (their
      markers stay), so that no two overlap.
    - `flag_change_label`: where given, each place the branch passes between
      flagged and unflagged points (for the hopper: the ground force at
      touchdown reverses) is marked by a dotted vertical line, named so in the
      legend.
    - `reference_lines`: values to draw as thin horizontal lines (e.g. $\pm 1$ for
      multipliers); a `(value, label)` pair names its line in the legend.
    - `xlabel`, `ylabel`, `title`: axis labels and title.
    - `ax`: axes to draw into; default a new figure.
    - `legend`: whether to draw the legend (off for a second panel of a figure
      whose first panel has it).

    **Returns:** the matplotlib `Figure`.

    **Raises:** `ValueError` if the arrays do not have one entry per point.
    """
    x = np.asarray(parameter, dtype=float)
    stable = np.asarray(stable, dtype=bool)
    n = x.shape[0]
    if stable.shape != (n,):
        raise ValueError(f"`stable` must have shape ({n},); got {stable.shape}.")
    values = {label: np.asarray(y, dtype=float) for label, y in curves.items()}
    for label, y in values.items():
        if y.shape != (n,):
            raise ValueError(
                f"`curves[{label!r}]` must have shape ({n},); got {y.shape}."
            )
    if flagged is not None:
        flagged = np.asarray(flagged, dtype=bool)
        if flagged.shape != (n,):
            raise ValueError(f"`flagged` must have shape ({n},); got {flagged.shape}.")
    specials = (folds, period_doublings, neimark_sackers)
    for name, indices in zip(
        ("folds", "period_doublings", "neimark_sackers"), specials
    ):
        if any(not 0 <= int(i) < n for i in indices):
            raise ValueError(f"`{name}` holds an index outside 0..{n - 1}.")
    if ax is None:
        fig = Figure(figsize=(7.0, 4.8), layout="constrained")
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.get_figure()
    for line in reference_lines:
        value, label = line if isinstance(line, tuple) else (line, None)
        ax.axhline(value, color="0.6", linewidth=0.8, zorder=0, label=label)
    runs = _stability_runs(stable) if n else []
    # Flagged points (not admissible) are never drawn as ordinary results: their
    # stretches of the curve are grey and thin, in the curve's line style.
    marked = np.zeros(n, bool) if flagged is None else flagged
    labelled: list[tuple[float, float]] = []
    for k, (label, y) in enumerate(values.items()):
        colour = _BRANCH_COLOURS[k % len(_BRANCH_COLOURS)]
        ax.plot([], [], color=colour, linewidth=1.8, label=label)
        for first, last, is_stable in runs:
            stretches = _stability_runs(~marked[first : last + 1])
            for start, end, admissible in stretches:
                # (Runs end on the next one's first point: the curve stays
                # connected.)
                piece = slice(first + start, first + end + 1)
                width = 1.8 if is_stable else 1.3
                ax.plot(
                    x[piece],
                    y[piece],
                    color=colour if admissible else _FLAGGED_COLOUR,
                    linewidth=width if admissible else 0.7 * width,
                    linestyle="-" if is_stable else "--",
                    zorder=2 if admissible else 1,
                )
        for indices, (marker, short, _) in zip(specials, _SPECIAL_STYLES):
            index = np.asarray(indices, dtype=int)
            ax.plot(
                x[index],
                y[index],
                linestyle="none",
                marker=marker,
                markersize=7,
                markerfacecolor="white",
                markeredgecolor="k",
                markeredgewidth=1.3,
                zorder=5,
            )
            for i in index:  # the usual abbreviations, as AUTO and COCO print
                # Labels never overlap: a point near one already labelled keeps
                # its marker only (the legend names the marker).
                if _crowded(x, values, (x[i], y[i]), labelled):
                    continue
                labelled.append((x[i], y[i]))
                ax.annotate(
                    short,
                    (x[i], y[i]),
                    xytext=(5, 5),
                    textcoords="offset points",
                    fontsize="small",
                    zorder=6,
                )
    style = dict(color="0.3")
    if stable.any():
        ax.plot([], [], linestyle="-", label="stable", **style)
    if not stable.all():
        ax.plot([], [], linestyle="--", label="unstable", **style)
    for indices, (marker, short, name) in zip(specials, _SPECIAL_STYLES):
        if len(indices):
            ax.plot(
                [], [], linestyle="none", marker=marker, markerfacecolor="white",
                markeredgecolor="k", label=f"{name} ({short})",
            )  # fmt: skip
    if flagged is not None and np.any(flagged):
        ax.plot([], [], color=_FLAGGED_COLOUR, linewidth=1.2, label=flagged_label)
        changes = np.flatnonzero(flagged[1:] != flagged[:-1])
        if flag_change_label is not None and changes.size:
            # Between the two points (the branch's resolution there).
            for i in changes:
                ax.axvline(
                    0.5 * (x[i] + x[i + 1]), color="0.35", linestyle=":",
                    linewidth=1.0, zorder=0,
                )  # fmt: skip
            ax.plot(
                [], [], color="0.35", linestyle=":", linewidth=1.0,
                label=flag_change_label,
            )  # fmt: skip
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if legend:
        ax.legend(fontsize="small")
    return fig


def bifurcation_diagram(
    levels: Sequence[dict[str, Any]],
    *,
    xlabel: str,
    ylabels: Sequence[str],
    title: str = "",
) -> Figure:
    r"""A bifurcation diagram of a period-doubling cascade: for every branch (period
    1, 2, 4, ...), quantities taken at each of its section crossings against the
    parameter, one colour per branch, stable orbits solid and unstable dashed,
    period doublings marked (Goswami, Thuilot & Espiau 1998, Figs. 6-7).

    **Arguments:**

    - `levels`: one dict per branch with `parameter` `(N,)`, `panels` (one array
      `(N, c)` per panel: a value per point and crossing), `stable` `(N,)`,
      `period_doublings` (indices) and `label`.
    - `xlabel`, `ylabels` (one per panel), `title`: labels.

    **Returns:** the matplotlib `Figure`.
    """
    n_panels = len(ylabels)
    fig = Figure(figsize=(7.0, 2.0 + 2.4 * n_panels), layout="constrained")
    axes = np.atleast_1d(fig.subplots(n_panels, 1, sharex=True))
    for k, level in enumerate(levels):
        colour = _BRANCH_COLOURS[k % len(_BRANCH_COLOURS)]
        x = np.asarray(level["parameter"], dtype=float)
        stable = np.asarray(level["stable"], dtype=bool)
        if len(level["panels"]) != n_panels:
            raise ValueError(
                f"level {k}: {len(level['panels'])} panels for {n_panels} `ylabels`."
            )
        runs = _stability_runs(stable) if x.size else []
        doublings = np.asarray(level.get("period_doublings", ()), dtype=int)
        for ax, values in zip(axes, level["panels"]):
            values = np.asarray(values, dtype=float).reshape(x.size, -1)
            ax.plot([], [], color=colour, linewidth=1.8, label=level["label"])
            for c in range(values.shape[1]):
                for first, last, is_stable in runs:
                    ax.plot(
                        x[first : last + 1],
                        values[first : last + 1, c],
                        color=colour,
                        linewidth=1.8 if is_stable else 1.2,
                        linestyle="-" if is_stable else "--",
                    )
                ax.plot(
                    x[doublings],
                    values[doublings, c],
                    linestyle="none",
                    marker="s",
                    markersize=6,
                    markerfacecolor="white",
                    markeredgecolor="k",
                    zorder=5,
                )
    for ax, ylabel in zip(axes, ylabels):
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    style = dict(color="0.3")
    every = [np.asarray(level["stable"], dtype=bool) for level in levels]
    if any(stable.any() for stable in every):
        axes[0].plot([], [], linestyle="-", label="stable", **style)
    if any(not stable.all() for stable in every):
        axes[0].plot([], [], linestyle="--", label="unstable", **style)
    if any(len(level.get("period_doublings", ())) for level in levels):
        axes[0].plot(
            [], [], linestyle="none", marker="s", markerfacecolor="white",
            markeredgecolor="k", label="period doubling (PD)",
        )  # fmt: skip
    axes[0].legend(fontsize="small")
    axes[-1].set_xlabel(xlabel)
    if title:
        axes[0].set_title(title)
    return fig


def sweep_heatmap(
    x: Float[np.ndarray, " nx"],
    y: Float[np.ndarray, " ny"],
    values: Float[np.ndarray, "nx ny"],
    *,
    xlabel: str,
    ylabel: str,
    colorbar_label: str = r"leading nontrivial $|\nu|$ (dimensionless)",
    flagged: np.ndarray | None = None,
    flagged_label: str = "flagged",
    no_orbit_label: str = "no orbit found",
    title: str | None = None,
    level: float | None = 1.0,
    not_run: np.ndarray | None = None,
    failed: np.ndarray | None = None,
    failed_label: str = "solver failed (status in the table)",
) -> Figure:
    r"""A heat map of a multiplier magnitude (or any orbit quantity) over a 2-D
    parameter grid (e.g. from [`hybrax.sweep_orbits`][]), with the stability
    boundary $|\nu| = 1$ contoured.

    Cells without a value (NaN: no orbit found there) are not coloured: they show
    the hatched grey background, so a missing orbit never reads as a value. The
    colour scale is linear from 0 to `2 level`, diverging about `level` (white
    there): blue below (stable), red above, values beyond `2 level` at the top
    colour; with `level=None` (a quantity other than a multiplier) it is
    sequential, uncontoured. The legend, below the map, takes as many columns as
    fit the figure's width (its long entries wrapped), so it is never cut off.

    **Arguments:**

    - `x`, `y`: the grid values along each axis (cell centres).
    - `values`: `(len(x), len(y))` magnitudes, NaN where there is no orbit.
    - `xlabel`, `ylabel`, `colorbar_label`, `title`: labels.
    - `flagged`: optional `(len(x), len(y))` booleans marked with a small cross
      (e.g. orbits whose ground would have to pull), labelled `flagged_label`.
    - `no_orbit_label`: the legend entry of the hatched region.
    - `level`: the contoured value (1: the stability boundary), or `None`.
    - `not_run`: optional `(len(x), len(y))` booleans: cells an interrupted sweep
      did not solve (status `not_run`), drawn mid grey and cross-hatched (not
      white, the colour of $|\nu| = 1$), apart from those without an orbit, and
      named in the legend.
    - `failed`, `failed_label`: optional `(len(x), len(y))` booleans: cells where
      the solver failed (a cycle that could not be integrated, rather than a
      shooting that found no orbit), drawn dark grey, apart from the hatched
      cells without an orbit.

    **Returns:** the matplotlib `Figure`; its first axes hold the map.

    **Raises:** `ValueError` if the shapes do not match.
    """
    from matplotlib.colors import Normalize
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    values = np.asarray(values, dtype=float)
    if values.shape != (x.size, y.size):
        raise ValueError(
            f"`values` must have shape (len(x), len(y)) = ({x.size}, {y.size}); "
            f"got {values.shape}."
        )
    for name, mask in (("flagged", flagged), ("not_run", not_run), ("failed", failed)):
        if mask is not None and np.shape(mask) != values.shape:
            raise ValueError(
                f"`{name}` must have the shape of `values` {values.shape}; got "
                f"{np.shape(mask)}."
            )
    fig = Figure(figsize=(7.6, 5.4), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)

    def edges(c):
        if c.size == 1:
            return np.array([c[0] - 0.5, c[0] + 0.5])
        mid = 0.5 * (c[1:] + c[:-1])
        return np.concatenate([[2 * c[0] - mid[0]], mid, [2 * c[-1] - mid[-1]]])

    xe, ye = edges(x), edges(y)
    # The background shows wherever no cell is drawn: no orbit.
    hatch_style = dict(facecolor="0.88", edgecolor="0.55", hatch="///", linewidth=0)
    ax.add_patch(
        Rectangle(
            (xe.min(), ye.min()),
            np.ptp(xe),
            np.ptp(ye),
            zorder=0,
            **hatch_style,
        )
    )
    finite = np.isfinite(values)
    extend = "neither"
    if level is None:
        norm, cmap = None, "viridis"
    else:
        # One linear scale, diverging about `level` (white there): 0 to 2 level,
        # values above it drawn at the top colour (the bar's arrow says so).
        top = float(np.nanmax(values)) if finite.any() else level
        norm = Normalize(vmin=0.0, vmax=2.0 * level)
        cmap = "RdBu_r"
        extend = "max" if top > 2.0 * level else "neither"
    mesh = ax.pcolormesh(
        xe, ye, np.ma.masked_invalid(values).T, cmap=cmap, norm=norm, zorder=1
    )
    fig.colorbar(mesh, ax=ax, label=colorbar_label, extend=extend)
    handles = [Patch(label=no_orbit_label, **hatch_style)]
    if failed is not None and np.any(failed):
        from matplotlib.colors import ListedColormap

        dark = np.ma.masked_where(~np.asarray(failed, bool), np.ones(values.shape))
        ax.pcolormesh(xe, ye, dark.T, cmap=ListedColormap(["0.35"]), zorder=1)
        handles.append(Patch(facecolor="0.35", label=failed_label))
    if not_run is not None and np.any(not_run):
        from matplotlib.collections import PolyCollection

        # Not white: white is |nu| = 1 on the diverging scale.
        i, j = np.nonzero(not_run)
        cells = np.stack(
            [
                np.stack([xe[i], ye[j]], axis=-1),
                np.stack([xe[i + 1], ye[j]], axis=-1),
                np.stack([xe[i + 1], ye[j + 1]], axis=-1),
                np.stack([xe[i], ye[j + 1]], axis=-1),
            ],
            axis=1,
        )
        ax.add_collection(
            PolyCollection(
                cells,
                facecolors=_NOT_RUN_STYLE["facecolor"],
                edgecolors=_NOT_RUN_STYLE["edgecolor"],
                hatch=_NOT_RUN_STYLE["hatch"],
                linewidths=0,
                zorder=2,
                label="not run",
            ),
            autolim=False,
        )
        handles.append(Patch(label="not run (interrupted)", **_NOT_RUN_STYLE))
    # Contour only where the level is crossed (matplotlib warns otherwise).
    if (
        level is not None
        and finite.any()
        and np.nanmin(values) < level < np.nanmax(values)
    ):
        ax.contour(
            x,
            y,
            np.ma.masked_invalid(values).T,
            levels=[level],
            colors="k",
            linewidths=1.4,
            zorder=3,
        )
        handles.append(
            Line2D([], [], color="k", linewidth=1.4, label=rf"$|\nu| = {level:g}$")
        )
    if flagged is not None and np.any(flagged):
        i, j = np.nonzero(flagged)
        ax.plot(
            x[i],
            y[j],
            linestyle="none",
            marker="x",
            markersize=3,
            color="k",
            alpha=0.6,
            zorder=4,
        )
        handles.append(
            Line2D([], [], linestyle="none", marker="x", color="k", label=flagged_label)
        )
    ax.set_xlim(xe.min(), xe.max())
    ax.set_ylim(ye.min(), ye.max())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    legend_below(fig, handles)
    return fig


def tune_path_figure(
    x: Float[np.ndarray, " nx"],
    y: Float[np.ndarray, " ny"],
    objective: Float[np.ndarray, "nx ny"],
    path: Float[np.ndarray, "N 2"],
    *,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
) -> Figure:
    r"""The path of a tuning run ([`hybrax.tune`][]) over a contour map of its
    objective in two varied parameters.

    **Arguments:**

    - `x`, `y`: the grid along each parameter; `objective`: `(len(x), len(y))`
      values (NaN where no orbit exists: left blank).
    - `path`: the evaluated points in order, `(N, 2)`; the start is marked with a
      circle and the end with a star.
    - `xlabel`, `ylabel`, `title`: labels (each axis's with its unit, e.g.
      `"k [N/m]"`). The colour bar is the $\log_{10}$ of the minimised
      objective, dimensionless: $J/J_0$ (the objective over its scale, see
      [`hybrax.TuneSettings`][]) plus the penalties, each a violation over
      its tolerance.
    """
    fig = Figure(figsize=(6.4, 5.0), layout="constrained")
    ax = fig.add_subplot()
    finite = np.isfinite(objective)
    if finite.any():
        # The penalties span decades: the map shows log10 of the objective.
        z = np.log10(np.maximum(np.where(finite, objective, np.nan), 1e-12))
        contours = ax.contourf(x, y, z.T, levels=25, cmap="viridis")
        fig.colorbar(contours, ax=ax, label=r"$\log_{10}$ objective (dimensionless)")
    path = np.asarray(path, dtype=float)
    ax.plot(path[:, 0], path[:, 1], "-", color="white", lw=1.2, label="evaluations")
    ax.plot(path[:, 0], path[:, 1], ".", color="white", ms=3)
    ax.plot(path[0, 0], path[0, 1], "o", color="tab:red", ms=7, label="start")
    ax.plot(path[-1, 0], path[-1, 1], "*", color="tab:orange", ms=12, label="result")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    return fig


def tune_history_figure(
    objective: Float[np.ndarray, " N"],
    spectral_radius: Float[np.ndarray, " N"],
    *,
    title: str | None = None,
) -> Figure:
    r"""The objective and the spectral radius (largest nontrivial $|\nu|$) of each
    evaluation of a tuning run, for more than two varied parameters; both are
    dimensionless, and the evaluations are numbered from 0."""
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    steps = np.arange(len(objective))
    ax.semilogy(steps, np.abs(objective), ".-", label="objective")
    ax.set_xlabel("evaluation (number)")
    ax.set_ylabel("objective (dimensionless)")
    twin = ax.twinx()
    twin.plot(steps, spectral_radius, ".-", color="tab:orange", label=r"$\rho$")
    twin.axhline(1.0, color="0.5", lw=0.8, ls=":")
    twin.set_ylabel(r"spectral radius $\rho$ (dimensionless)")
    if title:
        ax.set_title(title)
    return fig


def multiplier_history_figure(
    multipliers,
    *,
    final=None,
    bound: float | None = None,
    title: str | None = "Floquet multipliers over the tuning",
) -> Figure:
    r"""The nontrivial Floquet multipliers $\nu$ of each evaluation of a tuning run
    in the complex plane, coloured from the first evaluation (light) to the last
    (dark), with the unit circle (the stability boundary), the bound
    $|\nu| = \rho_{max}$ (`bound`, if given) and the final orbit's multipliers
    (`final`, ringed).

    **Arguments:** `multipliers`: one array of complex multipliers per
    evaluation; `final`: the result's multipliers; `bound`: $\rho_{max}$.
    """
    fig = Figure(figsize=(5.6, 5.2), layout="constrained")
    ax = fig.add_subplot()
    angle = np.linspace(0.0, 2.0 * np.pi, 361)
    ax.plot(np.cos(angle), np.sin(angle), color="0.3", lw=1.0, label=r"$|\nu| = 1$")
    if bound is not None:
        ax.plot(
            bound * np.cos(angle),
            bound * np.sin(angle),
            color="tab:green",
            lw=0.9,
            ls="--",
            label=rf"$|\nu| = {bound:g}$",
        )
    n = len(multipliers)
    colours = _blues(np.linspace(0.3, 1.0, max(n, 1)))
    for k, values in enumerate(multipliers):
        values = np.asarray(values)
        ax.scatter(values.real, values.imag, s=10, color=colours[k], lw=0)
    if final is not None:
        final = np.asarray(final)
        ax.scatter(
            final.real,
            final.imag,
            s=60,
            facecolors="none",
            edgecolors="tab:red",
            label="result",
        )
    ax.set_aspect("equal")
    ax.set_xlabel(r"Re $\nu$ (dimensionless)")
    ax.set_ylabel(r"Im $\nu$ (dimensionless)")
    ax.legend(loc="upper right", fontsize="small")
    if title:
        ax.set_title(title)
    return fig


def _blues(values):
    """Colours of the `Blues` colormap (for figures drawn without pyplot)."""
    from matplotlib import colormaps

    return colormaps["Blues"](values)


def mfpt_figure(
    sigma: Float[np.ndarray, " n"],
    walks: Float[np.ndarray, " n"],
    interval: Float[np.ndarray, "n 2"],
    mesh: Float[np.ndarray, " n"],
    *,
    xlabel: str,
    title: str | None = None,
) -> Figure:
    r"""The mean first-passage time against the roughness of the terrain
    ([`hybrax.first_passage_walks`][], [`hybrax.first_passage_mesh`][]), on a
    logarithmic axis of steps: the Monte Carlo estimate with its 95% interval as
    error bars, and the mesh chain's expected steps (NaN: not computed).

    **Arguments:**

    - `sigma`: the roughness levels (the disturbance's standard deviation).
    - `walks`, `interval`: the walks' estimates and their `(low, high)`
      intervals (an infinite estimate, no fall, is drawn at its interval's low
      end with an arrow up).
    - `mesh`: the chain's estimates.
    - `xlabel`, `title`: labels (the x label with its unit).
    """
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.add_subplot()
    sigma = np.asarray(sigma, dtype=float)
    walks = np.asarray(walks, dtype=float)
    interval = np.asarray(interval, dtype=float)
    finite = np.isfinite(walks)
    # Error bars of the finite estimates only (an infinite one, whose interval
    # is open above, is drawn apart): no inf - inf.
    low = np.where(finite, walks - interval[:, 0], 0.0)
    bounded = finite & np.isfinite(interval[:, 1])
    high = np.where(bounded, interval[:, 1] - np.where(bounded, walks, 0.0), 0.0)
    ax.errorbar(
        sigma[finite],
        walks[finite],
        yerr=[low[finite], high[finite]],
        fmt="o",
        color="tab:blue",
        capsize=3,
        label="Monte Carlo walks (95% interval)",
    )
    if (~finite).any():
        ax.plot(
            sigma[~finite],
            interval[~finite, 0],
            "^",
            color="tab:blue",
            label="no fall: at least (95%)",
        )
    mesh = np.asarray(mesh, dtype=float)
    if np.isfinite(mesh).any():
        ax.plot(sigma, mesh, "s--", color="tab:orange", mfc="none", label="mesh chain")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("mean first-passage time [steps]")
    if title:
        ax.set_title(title)
    handles, _ = ax.get_legend_handles_labels()
    legend_below(fig, handles)
    return fig
