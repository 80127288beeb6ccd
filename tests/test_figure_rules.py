"""The figures' rules, checked on the drawn matplotlib artists: one quantity is
drawn one way along a curve, legends and colour bars lie inside the canvas, a
point not computed has a colour of its own, an impact's jump is drawn, and every
axis names its unit."""

import re
import types

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

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
