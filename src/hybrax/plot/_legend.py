"""A figure's legend below its axes that stays inside the canvas."""

import textwrap
from collections.abc import Sequence

from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.legend import Legend


# Legend entries longer than this are wrapped onto several lines.
_WRAP = 40


def _wrapped(label: str) -> str:
    """`label` on lines of at most `_WRAP` characters (mathematics, between
    dollars, is never split)."""
    if len(label) <= _WRAP or "$" in label:
        return label
    return textwrap.fill(label, _WRAP)


def legend_below(
    fig: Figure,
    handles: Sequence[Artist],
    *,
    max_columns: int = 3,
    fontsize: str = "small",
) -> Legend:
    """A legend of `handles` below the axes of the constrained-layout `fig`, in
    as many columns (at most `max_columns`) as fit the figure's width, each
    entry wrapped at 40 characters. A centred legend wider than the figure
    would be cut off at both edges of the saved image; the width is measured
    on the laid-out figure, with a margin for the resolution it is saved at."""
    labels = [_wrapped(str(handle.get_label())) for handle in handles]

    def legend(ncols: int) -> Legend:
        return fig.legend(
            handles, labels, loc="outside lower center", ncols=ncols, fontsize=fontsize
        )

    for ncols in range(min(max_columns, len(handles)), 1, -1):
        drawn = legend(ncols)
        fig.draw_without_rendering()
        if drawn.get_window_extent().width <= 0.95 * fig.bbox.width:
            return drawn
        drawn.remove()
    return legend(1)
