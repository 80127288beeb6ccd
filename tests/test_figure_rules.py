"""The figures' rules, checked on the drawn matplotlib artists: one quantity is
drawn one way along a curve, legends and colour bars lie inside the canvas, a
point not computed has a colour of its own, an impact's jump is drawn, and every
axis names its unit."""

import re
import types

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

import hybrax.plot
from hybrax._cli.continuation_outputs import _multiplier_figure


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
        admissible=np.ones(leading.shape, bool),
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


def _segments(ax):
    """The two-point dashed lines of `ax`, as `(start, end, label)`."""
    return [
        (
            np.array([line.get_xdata()[0], line.get_ydata()[0]]),
            np.array([line.get_xdata()[1], line.get_ydata()[1]]),
            line.get_label(),
        )
        for line in ax.get_lines()
        if len(line.get_xdata()) == 2 and line.get_linestyle() == "--"
    ]


def _events(trajectory, events: slice):
    """The phases and events `events` of `trajectory` (phase k ends at event k)."""
    return hybrax.plot.Trajectory(
        **{name: value[events] for name, value in trajectory.__dict__.items()}
    )


# Slow: 10-20 s cold, over the fast set's share (run by .ci/run).
@pytest.mark.slow
def test_compass_gait_orbit_figure_draws_the_heel_strike_jump(monkeypatch):
    """`orbit.png` of the compass gait (the figure `hybrax orbit compass-gait`
    draws, from one step of its gait): the heel strike's jump from the state
    before it to the state after it is a dashed line of its own, named "impact"
    in the legend, so the period's drawing closes; no solid line joins the end
    of a step to the start of the next."""
    import hybrax as hx
    from hybrax.models import get_model

    model = get_model("compass-gait")
    params = hx.canonical_params(model.make_params())
    system = model.forms[model.default_form].system()
    solution = hx.simulate(
        system,
        model.default_state(params),
        params,
        n_events=2,
        n_save=40,
        settings=hx.Settings(t_max=5.0),
    )
    trajectory = hybrax.plot.Trajectory.from_solution(solution, system)
    assert len(trajectory.t_events) == 2
    step, next_step = _events(trajectory, slice(0, 1)), _events(trajectory, slice(1, 2))
    drawn = {}
    monkeypatch.setattr(
        hybrax.plot, "save_figures", lambda figures, out: drawn.update(figures) or []
    )
    model.orbit_figures(step, [next_step], ["next step"], trajectory, params, None)
    (ax,) = drawn["orbit.png"].axes
    i, j = model.presentation.figures.portrait
    jumps = _segments(ax)
    for k, (before, after) in enumerate(zip(step.x_before, step.x_after)):
        ends = [
            (start, end, label)
            for start, end, label in jumps
            if np.allclose(start, before[[i, j]], rtol=1e-12)
            and np.allclose(end, after[[i, j]], rtol=1e-12)
        ]
        assert len(ends) == 1, k
        assert ends[0][2] == "impact"
        # The jump is a real one: both entries change at heel strike.
        assert np.all(np.abs(after[[i, j]] - before[[i, j]]) > 1e-3)
    # The other trajectory's heel strike too, unlabelled.
    assert len(jumps) == 2
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels.count("impact") == 1 and "periodic orbit" in labels
    # No solid line of the orbit or the perturbed start crosses an event: each
    # phase is a line of its own, ending at the state before the event.
    for line in ax.get_lines():
        if line.get_linestyle() == "-" and len(line.get_xdata()) > 2:
            end = np.array([line.get_xdata()[-1], line.get_ydata()[-1]])
            assert any(
                np.allclose(end, before[[i, j]], atol=1e-9)
                for before in trajectory.x_before
            )


def _axes_with_units(fig):
    """The axes of `fig` that show ticks (colour bars' and twin axes' included)
    without a unit at the end of their label: `[(axes, "x" or "y", label)]`."""
    missing = []
    for ax in fig.axes:
        for what, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if not (axis.get_visible() and len(axis.get_ticklocs())):
                continue  # a twin's x axis, a colour bar's short side
            label = axis.get_label_text()
            if not _UNIT.search(label):
                missing.append((ax.get_label(), what, label))
    return missing


def _labels_of_every_model():
    """`(model, name, label)` of every parameter, state entry, section unknown and
    orbit quantity of every model: the axes of sweeps, continuations, tunings and
    basin maps, and the colour bar of `sweep --quantity`."""
    from hybrax._registry import get_model, model_names

    for name in model_names():
        model = get_model(name)
        names = [*model.parameters, *model.state_names, *(model.quantities or {})]
        if model.has_orbits:
            k = len(model.orbit_guess(model.make_params()))
            names += model.section_unknowns(k)
        for entry in names:
            yield name, entry, model.label(entry)


def test_every_axis_label_of_every_model_has_a_unit():
    """What a figure's parameter, state or quantity axis reads
    (`ModelBundle.label`): with a unit in brackets or parentheses for every
    model's parameters, state entries, section unknowns and orbit quantities
    ("(dimensionless)" for a ratio)."""
    missing = [item for item in _labels_of_every_model() if not _UNIT.search(item[2])]
    assert not missing
    # The simplest walker's rates: radians per its time unit sqrt(l/g), as its
    # time axes read, not "rad sqrt(g/l)".
    from hybrax.models import get_model

    walker = get_model("simplest-walker")
    assert walker.label("theta_dot").endswith(r"[rad/$\sqrt{l/g}$]")


def _tune_result(names, values):
    """A tuning run's result as `_figures` reads it: evaluations along a line
    towards `values`, an objective map of a bowl about them."""
    import types

    start = {name: 0.5 * value for name, value in values.items()}
    history = [
        types.SimpleNamespace(
            stage="tune",
            orbit_found=True,
            values={n: start[n] + (values[n] - start[n]) * s for n in names},
            objective=10.0 ** (-s * 4),
            spectral_radius=0.9 - 0.2 * s,
            multipliers=np.array([0.9 - 0.2 * s, 0.1j]),
        )
        for s in np.linspace(0.0, 1.0, 6)
    ]

    def objective_at(grid):
        scaled = np.asarray(grid) / np.array([values[n] for n in names]) - 1.0
        return 1e-6 + np.sum(scaled**2, axis=1)

    return types.SimpleNamespace(
        history=history,
        values=values,
        orbit=types.SimpleNamespace(multipliers=np.array([0.7, 0.1j])),
        objective_at=objective_at,
    )


def test_tune_path_axes_carry_their_units(monkeypatch, tmp_path):
    """`tune_path.png` as `hybrax tune` writes it: for two varied parameters the
    path over the objective's map, its axes the parameters' labels with their
    units (were the bare names d_G, k) and its colour bar dimensionless; for
    more, the history of the objective and the spectral radius, every axis with
    a unit too."""
    import argparse

    import hybrax._cli.tune as tune_cli
    from hybrax.models import get_model

    drawn = {}
    monkeypatch.setattr(
        tune_cli, "write_figure", lambda path, fig: drawn.setdefault(path.name, fig)
    )
    model = get_model("hopper")
    args = argparse.Namespace(out=tmp_path, max_multiplier=0.95)
    names = ["d_G", "k"]
    tune_cli._figures(args, model, _tune_result(names, {"d_G": 500.0, "k": 1e4}), names)
    fig = drawn["tune_path.png"]
    ax = fig.axes[0]
    assert ax.get_xlabel() == model.label("d_G") == r"$d_G$ [N s/m]"
    assert ax.get_ylabel() == model.label("k") == r"$k$ [N/m]"
    assert not _axes_with_units(fig)
    drawn.clear()
    names = ["d_G", "k", "mu"]
    values = {"d_G": 500.0, "k": 1e4, "mu": 0.8}
    tune_cli._figures(args, model, _tune_result(names, values), names)
    fig = drawn["tune_path.png"]
    assert len(fig.axes) == 2  # the objective and its twin, the spectral radius
    assert not _axes_with_units(fig)


def test_basin_map_axes_carry_readable_units(monkeypatch, tmp_path):
    """The simplest walker's `basin_map.png` as `hybrax basin` writes it: both
    axes with a unit, the rate in radians per the model's time unit sqrt(l/g)
    (was "rad sqrt(g/l)"), and the legend inside the canvas."""
    import argparse
    import types

    import hybrax._cli.basin as basin_cli
    from hybrax.models import get_model

    drawn = {}
    monkeypatch.setattr(
        basin_cli, "write_figure", lambda path, fig: drawn.setdefault(path.name, fig)
    )
    model = get_model("simplest-walker")
    axes = [
        ("theta", np.linspace(0.1, 0.3, 5)),
        ("theta_dot", np.linspace(-0.35, -0.05, 4)),
    ]
    outcome = np.zeros((5, 4), int)
    outcome[0], outcome[-1, -1], outcome[1, 1] = 2, 1, 4
    result = types.SimpleNamespace(
        outcome=outcome,
        period=np.where(outcome == 1, 2, 0),
        orbit=np.array([0.2, -0.2]),
    )
    args = argparse.Namespace(model="simplest-walker", steps=20)
    basin_cli._write_map(
        tmp_path, model, axes, ["theta", "theta_dot"], result, True, args
    )
    fig = drawn["basin_map.png"]
    ax = fig.axes[0]
    assert not _axes_with_units(fig)
    assert ax.get_ylabel() == r"$\dot\theta$ [rad/$\sqrt{l/g}$]"
    assert "g/l" not in ax.get_ylabel()
    FigureCanvasAgg(fig).draw()
    assert _inside(fig, fig.legends[0].get_window_extent())


def test_a_branch_draws_flagged_stretches_apart_and_labels_apart():
    """Points that are not admissible are never drawn as ordinary results: their
    stretch of the curve is grey, thinner, and named in the legend; special-point
    labels of points that lie close together are drawn once (no two label
    boxes overlap), their markers all kept."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from hybrax import plot

    x = np.linspace(0.0, 1.0, 401)
    y = np.sin(3 * x)
    flagged = (x > 0.5) & (x < 0.8)
    folds = [100, 101, 102, 300]  # three close together
    fig = plot.branch_figure(
        x,
        {"q": y},
        stable=x < 0.6,
        folds=folds,
        flagged=flagged,
        flagged_label="not admissible",
        xlabel="p [1]",
        ylabel="q [1]",
    )
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    grey = [
        line
        for line in ax.get_lines()
        if line.get_color() == "0.72" and len(line.get_xdata())
    ]
    # Every flagged point lies on a grey stretch, and no coloured stretch holds
    # a flagged point inside it (only its ends touch the grey ones).
    on_grey = np.concatenate([line.get_xdata() for line in grey])
    assert set(x[flagged]) <= set(on_grey)
    coloured = [
        line
        for line in ax.get_lines()
        if line.get_color() not in ("0.72", "0.3", "k") and len(line.get_xdata()) > 2
    ]
    for line in coloured:
        inner = np.asarray(line.get_xdata())[1:-1]
        assert not np.any(np.isin(inner, x[flagged]))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "not admissible" in labels
    texts = [t for t in ax.texts if t.get_text() == "LP"]
    assert 2 <= len(texts) < len(folds)
    boxes = [t.get_window_extent() for t in texts]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b)


def test_a_reference_line_can_be_named():
    """A `(value, label)` reference line is drawn and named in the legend (the
    hopper's fig9 drew an unnamed grey line at mu)."""
    from hybrax import plot

    x = np.linspace(0.0, 1.0, 5)
    fig = plot.branch_figure(
        x,
        {"q": x},
        stable=np.ones(5, bool),
        reference_lines=(1.0, (0.8, "mu")),
        xlabel="p [1]",
        ylabel="q [1]",
    )
    ax = fig.axes[0]
    assert "mu" in [t.get_text() for t in ax.get_legend().get_texts()]
    levels = sorted(
        line.get_ydata()[0] for line in ax.get_lines() if line.get_color() == "0.6"
    )
    assert levels == [0.8, 1.0]


def test_a_branch_marks_where_its_flag_changes():
    """With `flag_change_label`, each place a branch passes between flagged and
    unflagged points (the hopper's ground force at touchdown reversing) is a
    dotted vertical line between the two points, named once in the legend; no
    line without the label."""
    from hybrax import plot

    x = np.linspace(0.0, 1.0, 11)
    flagged = (x > 0.25) & (x < 0.75)  # two changes: 0.2|0.3 and 0.7|0.8
    common = dict(stable=np.ones(11, bool), flagged=flagged, xlabel="p [1]")
    fig = plot.branch_figure(x, {"q": x}, flag_change_label="force reverses", **common)
    ax = fig.axes[0]
    dotted = [
        line.get_xdata()[0]
        for line in ax.get_lines()
        if line.get_linestyle() == ":" and len(line.get_xdata())
    ]
    np.testing.assert_allclose(sorted(dotted), [0.25, 0.75])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels.count("force reverses") == 1
    plain = plot.branch_figure(x, {"q": x}, **common).axes[0]
    assert not [line for line in plain.get_lines() if line.get_linestyle() == ":"]


def test_curves_over_a_heat_map_are_drawn_above_its_contour():
    """A period-doubling curve lies on the |nu| = 1 contour (nu = -1 there):
    drawn black beneath it (the biped5 gallery map), it could not be seen. The
    curves are drawn above the contour, in colour, with a white edge."""
    from hybrax import plot
    from hybrax._cli.sweep_map import draw_curves

    x, y = np.linspace(0.0, 1.0, 11), np.linspace(0.0, 1.0, 9)
    values = 0.5 + np.add.outer(x, y)  # |nu| = 1 on x + y = 0.5
    fig = plot.sweep_heatmap(x, y, values, xlabel="a [1]", ylabel="b [1]")
    ax = fig.axes[0]
    contour_top = max(c.get_zorder() for c in ax.collections)
    on_contour = np.linspace(0.0, 0.5, 6)
    draw_curves(ax, [("period_doubling", on_contour, 0.5 - on_contour, [])])
    (curve,) = [line for line in ax.get_lines() if len(line.get_xdata()) == 6]
    assert curve.get_zorder() > contour_top
    assert curve.get_color() not in ("k", "black", "#000000")
    assert curve.get_path_effects()
    assert curve.get_label() == "period doubling curve"
