"""The figures' rules, checked on the drawn matplotlib artists: one quantity is
drawn one way along a curve, legends and colour bars lie inside the canvas, a
point not computed has a colour of its own, an impact's jump is drawn, and every
axis names its unit."""

import re
import types

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

import hybrax.plot
from hybrax._cli.continuation import _multiplier_figure


# A unit in brackets or parentheses at the end of an axis label, e.g. "t [s]",
# "slope [deg]", "|nu| (dimensionless)".
_UNIT = re.compile(r"(\[[^\]]+\]|\([^)]+\))\s*$")


def _curve_lines(ax):
    """The drawn lines of a branch figure's axes that carry data: not the
    legend's empty proxies, the reference lines (grey) or the special points'
    markers."""
    return [
        line
        for line in ax.get_lines()
        if len(line.get_xdata())
        and line.get_linestyle() not in ("None", "none", "")
        and line.get_color() != "0.6"
    ]


def _check_drawn(lines, parameter, expected):
    """Every drawn `(x, y)` is a point `(parameter[i], expected[i])`, and every
    point is drawn."""
    at = {float(x): float(y) for x, y in zip(parameter, expected)}
    seen = set()
    for line in lines:
        for x, y in zip(line.get_xdata(), line.get_ydata()):
            np.testing.assert_allclose(y, at[float(x)], rtol=1e-12, atol=1e-12)
            seen.add(float(x))
    assert seen == set(at)


def test_branch_multiplier_is_drawn_as_modulus_and_angle_everywhere():
    """A complex pair that meets on the negative real axis and splits into two
    real multipliers (the compass gait's branch): the modulus panel draws
    |nu| at every point (no jump from +0.56 to -0.65 where the pair turns real),
    the angle panel |arg nu| in degrees (180 for the negative reals), both
    axes with units, stable solid and unstable dashed."""
    n = 12
    parameter = np.linspace(3.0, 5.0, n)
    angle = np.concatenate([np.linspace(2.0, np.pi, 6), np.full(6, np.pi)])
    modulus = np.concatenate([np.full(6, 0.56), np.linspace(0.65, 1.2, 6)])
    leading = modulus * np.exp(1j * angle)
    leading[1::2] = np.conj(leading[1::2])  # either one of a pair comes first
    leading[6:] = leading[6:].real  # the real ones
    branch = types.SimpleNamespace(
        parameter=parameter,
        multipliers=np.stack([leading, 0.1 * np.ones(n)], axis=1),
        stable=np.abs(leading) < 1,
        folds=[],
        period_doublings=[types.SimpleNamespace(index=9)],
        neimark_sackers=[],
    )
    fig = _multiplier_figure(branch, xlabel="slope [deg]", title="t")
    top, bottom = fig.axes
    _check_drawn(_curve_lines(top), parameter, np.abs(leading))
    _check_drawn(_curve_lines(bottom), parameter, np.degrees(np.abs(np.angle(leading))))
    assert {line.get_linestyle() for line in _curve_lines(top)} == {"-", "--"}
    for ax in (top, bottom):
        assert _UNIT.search(ax.get_ylabel()), ax.get_ylabel()
    assert _UNIT.search(bottom.get_xlabel())
    assert "deg" in bottom.get_ylabel() and "|" in top.get_ylabel()
    # The period doubling is marked in both panels, at |nu| and at 180 deg.
    for ax, value in ((top, abs(leading[9])), (bottom, 180.0)):
        marks = [line for line in ax.get_lines() if line.get_marker() == "s"]
        assert any(
            np.allclose(m.get_ydata(), [value]) for m in marks if len(m.get_ydata())
        )
    # One legend, in the first panel.
    assert top.get_legend() is not None and bottom.get_legend() is None
    FigureCanvasAgg(fig).draw()


def _inside(fig, box):
    """Whether the window extent `box` lies within the figure's canvas."""
    canvas = fig.bbox
    return (
        box.x0 >= canvas.x0 - 0.5
        and box.x1 <= canvas.x1 + 0.5
        and box.y0 >= canvas.y0 - 0.5
        and box.y1 <= canvas.y1 + 0.5
    )


def test_sweep_heatmap_keeps_its_legend_inside_and_marks_points_not_run():
    """The command's heat map of an interrupted sweep with every kind of cell
    (its long legend entries included): legend and colour bar inside the canvas
    at the command's and the gallery's resolutions; the cells not run are drawn
    in a colour of their own (not white, the colour of |nu| = 1, nor the
    hatching of the cells without an orbit) and named in the legend."""
    from matplotlib.colors import to_rgba

    x, y = np.linspace(1.0, 5.0, 9), np.linspace(5.0, 20.0, 7)
    values = np.random.default_rng(0).uniform(0.3, 1.6, (9, 7))
    not_run = np.zeros(values.shape, bool)
    not_run[5:, 4:] = True
    values[not_run] = np.nan
    values[0, 0] = np.nan  # no orbit
    flagged, failed = np.zeros_like(not_run), np.zeros_like(not_run)
    flagged[2, 2], failed[1, 1] = True, True
    values[1, 1] = np.nan
    fig = hybrax.plot.sweep_heatmap(
        x,
        y,
        values,
        xlabel="slope [deg]",
        ylabel="m_H [kg]",
        flagged=flagged,
        flagged_label="ground pulls after touchdown",
        no_orbit_label=(
            "no periodic orbit (from the guess, the neighbours' orbits, the return map)"
        ),
        title="compass-gait: leading nontrivial Floquet multiplier",
        not_run=not_run,
        failed=failed,
    )
    FigureCanvasAgg(fig)
    for dpi in (150, 70):
        fig.set_dpi(dpi)
        fig.canvas.draw()
        (legend,) = fig.legends
        box = legend.get_window_extent()
        assert _inside(fig, box), (box, fig.bbox)
        colorbar = fig.axes[1]
        assert colorbar.get_label() == "<colorbar>"
        assert _inside(fig, colorbar.get_tightbbox())
    ax = fig.axes[0]
    (cells,) = [c for c in ax.collections if c.get_label() == "not run"]
    drawn = cells.get_paths()
    assert len(drawn) == not_run.sum()
    centres = {tuple(np.round(path.vertices[:4].mean(axis=0), 9)) for path in drawn}
    i, j = np.nonzero(not_run)
    assert centres == set(zip(np.round(x[i], 9), np.round(y[j], 9)))
    white = to_rgba("white")
    face = tuple(cells.get_facecolor()[0])
    assert face != white and cells.get_hatch()
    (no_orbit,) = ax.patches
    assert cells.get_hatch() != no_orbit.get_hatch()
    assert face != tuple(no_orbit.get_facecolor())
    # Named in the legend with the same look.
    entries = dict(
        zip([t.get_text() for t in legend.get_texts()], legend.legend_handles)
    )
    key = entries["not run (interrupted)"]
    assert tuple(key.get_facecolor()) == face and key.get_hatch() == cells.get_hatch()
