r"""The map of a basin of attraction (from [`hybrax.basin`][])."""

import numpy as np
from jaxtyping import Float, Int
from matplotlib.figure import Figure

from ._legend import legend_below


# Outcome code (`hybrax.BASIN_OUTCOMES`) -> (colour, legend label).
_OUTCOME_STYLE = {
    0: ("tab:green", "reaches the orbit"),
    1: ("tab:blue", "another periodic orbit"),
    2: ("0.86", "falls"),
    3: ("tab:orange", "unsettled after the cycles"),
    4: ("0.3", "run failed (status in the table)"),
}


def _edges(c: np.ndarray) -> np.ndarray:
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = 0.5 * (c[1:] + c[:-1])
    return np.concatenate([[2 * c[0] - mid[0]], mid, [2 * c[-1] - mid[-1]]])


def basin_map(
    x: Float[np.ndarray, " nx"],
    y: Float[np.ndarray, " ny"] | None,
    outcome: Int[np.ndarray, "nx ..."],
    *,
    xlabel: str,
    ylabel: str | None = None,
    period: Int[np.ndarray, "nx ..."] | None = None,
    orbit: tuple[float, ...] | None = None,
    title: str | None = None,
) -> Figure:
    r"""The outcome of every start of a basin over a 1-D or 2-D grid of section
    states, one colour per class: reaches the orbit (green), settles on another
    periodic orbit (blue; its period written in the legend), falls (light grey),
    unsettled (orange), failed run (dark grey). The orbit's point is marked with
    a star. Each legend entry gives its count; the legend, below the map, takes
    as many columns as fit the figure's width.

    **Arguments:**

    - `x`, `y`: the grid values along each axis (cell centres); `y=None` for a
      1-D grid (drawn as one strip).
    - `outcome`: `(len(x), len(y))` (or `(len(x),)`) codes of
      `hybrax.BASIN_OUTCOMES` ([`hybrax.Basin`][]`.outcome`).
    - `xlabel`, `ylabel`, `title`: labels.
    - `period`: the settled periods (`Basin.period`), to name them in the
      legend.
    - `orbit`: the orbit's point in the plotted coordinates `(x, y)` (or `(x,)`).

    **Returns:** the matplotlib `Figure`; its first axes hold the map.

    **Raises:** `ValueError` if the shapes do not match or a code is unknown.
    """
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    x = np.asarray(x, dtype=float)
    one_d = y is None
    y = np.zeros(1) if one_d else np.asarray(y, dtype=float)
    outcome = np.asarray(outcome)
    expected = (x.size,) if one_d else (x.size, y.size)
    if outcome.shape != expected:
        raise ValueError(
            f"`outcome` must have shape {expected} (the grid's); got {outcome.shape}."
        )
    if period is not None and np.shape(period) != outcome.shape:
        raise ValueError(
            f"`period` must have the shape of `outcome` {outcome.shape}; got "
            f"{np.shape(period)}."
        )
    if not np.isin(outcome, list(_OUTCOME_STYLE)).all():
        raise ValueError("`outcome` holds codes that are not basin outcomes.")
    grid = outcome.reshape(x.size, y.size)
    codes = sorted(_OUTCOME_STYLE)
    cmap = ListedColormap([_OUTCOME_STYLE[c][0] for c in codes])
    norm = BoundaryNorm(np.arange(len(codes) + 1) - 0.5, cmap.N)
    fig = Figure(figsize=(7.6, 3.0 if one_d else 5.6), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.pcolormesh(_edges(x), _edges(y), grid.T, cmap=cmap, norm=norm)
    handles = []
    for code in codes:
        count = int(np.sum(outcome == code))
        if not count:
            continue
        colour, label = _OUTCOME_STYLE[code]
        if code == 1 and period is not None:
            periods = sorted(set(np.asarray(period)[outcome == 1].tolist()))
            label += f" (period {', '.join(str(p) for p in periods)})"
        handles.append(Patch(facecolor=colour, label=f"{label}: {count}"))
    if orbit is not None:
        point = tuple(float(v) for v in orbit)
        ax.plot(
            point[0],
            0.0 if one_d else point[1],
            marker="*",
            markersize=13,
            color="k",
            markeredgecolor="white",
            linestyle="none",
        )
        handles.append(
            Line2D([], [], marker="*", color="k", linestyle="none", label="the orbit")
        )
    ax.set_xlabel(xlabel)
    if one_d:
        ax.set_yticks([])
    else:
        ax.set_ylabel(ylabel or "")
    if title:
        ax.set_title(title)
    legend_below(fig, handles)
    return fig
