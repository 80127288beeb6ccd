"""What a referee checks on every figure, on the drawn matplotlib artists of each
figure kind (`hybrax.plot` and the command line's figure writers), drawn from
small synthetic inputs (no orbit solve): every text lies inside the canvas, no
two texts overlap, every axis that shows values has a label naming its unit, and
the smallest font stays readable with the figure shown at 80% of a page's width.

Not drawn here: `ModelBundle.orbit_figures` (it simulates the model), the
models' own figures (`hybrax.models.hopper_figures`: not part of `hybrax.plot`
or the generic writers), and the command's `bifurcation.png`
(`_cli.continuation_outputs._bifurcation_figure` reads the crossings of solved
branches; `bifurcation_diagram` itself is drawn below). The command's other
writers (`branch_multiplier.png`, `sweep_heatmap.png`, `tune_path.png`,
`tune_multipliers.png`, `curve.png`) are drawn from stand-ins of their
results."""

import argparse
import contextlib
import dataclasses
import inspect
import types

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

import hybrax.plot
from test_figure_rules import _UNIT, _tune_result
from test_plot_generic import _trajectory


# A documentation page's content width, in CSS pixels (a typical text column),
# and the share of it a figure is shown at.
PAGE_WIDTH_PX = 800.0
SHOWN_SHARE = 0.8
# The smallest font, in CSS pixels of the page, that stays readable: about the
# size of a footnote (a 16 px body text's footnotes are set at 10-11 px; 7 px is
# the least a reader can still make out without zooming).
MIN_FONT_PX = 7.0
# How far a text may reach past the canvas (rounding of the extents), in pixels.
SLACK_PX = 1.0
# How far two texts' boxes may intersect (in both directions) before they are
# said to overlap: the extents of neighbouring tick labels touch.
OVERLAP_PX = 1.5


@contextlib.contextmanager
def _recording_texts(drawn: list):
    """Record every `Text` that draws itself (tick labels of the ticks in view
    only, as matplotlib draws them; annotations too) while in the block."""
    draw = Text.draw

    def recording(self, renderer):
        drawn.append(self)
        return draw(self, renderer)

    Text.draw = recording
    try:
        yield
    finally:
        Text.draw = draw


def _describe(text: Text) -> str:
    return f"{text.get_text()!r} ({type(text).__name__} at {text.get_fontsize():g} pt)"


def drawn_texts(fig) -> list[Text]:
    """The visible, non-empty texts of `fig` as drawn (on an Agg canvas)."""
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    drawn: list[Text] = []
    with _recording_texts(drawn):
        fig.canvas.draw()
    unique = list({id(t): t for t in drawn}.values())
    return [t for t in unique if t.get_visible() and t.get_text().strip()]


def _shown_tick_labels(axis, texts) -> bool:
    ticks = [*axis.majorTicks, *axis.minorTicks]
    labels = {id(label) for tick in ticks for label in (tick.label1, tick.label2)}
    return any(id(t) in labels for t in texts)


def _has_data(ax) -> bool:
    return bool(
        ax.get_label() == "<colorbar>"
        or ax.collections
        or ax.images
        or any(len(line.get_xdata()) for line in ax.get_lines())
    )


def figure_problems(fig) -> list[str]:
    """Every way the drawn `fig` breaks the rules (empty: none), each naming the
    offending text or axis:

    - every drawn text (and every legend's frame) lies within the canvas, to
      `SLACK_PX`;
    - no two drawn texts (tick labels included) intersect by more than
      `OVERLAP_PX` in both directions;
    - every x or y axis of axes with data (colour bars and twins included) that
      shows tick labels has a label ending in a unit, by the rule of
      `test_every_axis_label_of_every_model_has_a_unit` (`"[unit]"` or
      `"(dimensionless)"`); an axis without tick labels (the upper panels'
      shared time axis, a strip's height) needs none;
    - the smallest font, in pixels of the figure shown `SHOWN_SHARE` of
      `PAGE_WIDTH_PX` wide, is at least `MIN_FONT_PX`.
    """
    texts = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    problems = []
    boxes = [t.get_window_extent(renderer) for t in texts]
    # Inside the canvas: every text and every legend's frame.
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
    framed = [
        (f"legend {lg!r}", lg.get_window_extent(renderer)) for lg in legends if lg
    ]
    for what, box in [*((_describe(t), b) for t, b in zip(texts, boxes)), *framed]:
        if (
            box.x0 < canvas.x0 - SLACK_PX
            or box.x1 > canvas.x1 + SLACK_PX
            or box.y0 < canvas.y0 - SLACK_PX
            or box.y1 > canvas.y1 + SLACK_PX
        ):
            problems.append(
                f"outside the canvas {tuple(np.round(canvas.extents, 1))}: {what} "
                f"at {tuple(np.round(box.extents, 1))}"
            )
    # No two texts overlap (matplotlib draws a legend entry's label, wrapped over
    # lines or not, as one text: no pair is exempt but a text with itself).
    for a in range(len(texts)):
        for b in range(a + 1, len(texts)):
            one, two = boxes[a], boxes[b]
            width = min(one.x1, two.x1) - max(one.x0, two.x0)
            height = min(one.y1, two.y1) - max(one.y0, two.y0)
            if width > OVERLAP_PX and height > OVERLAP_PX:
                problems.append(
                    f"overlap ({width:.1f} x {height:.1f} px): {_describe(texts[a])} "
                    f"and {_describe(texts[b])}"
                )
    # Every axis that shows values (its tick labels) is labelled with a unit.
    for ax in fig.axes:
        if not (ax.get_visible() and ax.axison and _has_data(ax)):
            continue
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if not (axis.get_visible() and _shown_tick_labels(axis, texts)):
                continue
            label = axis.get_label_text()
            if not label.strip() or not _UNIT.search(label):
                where = ax.get_title() or ax.get_title(loc="left") or ax.get_label()
                problems.append(
                    f"the {name} axis of axes {where!r} shows values but its label "
                    f"{label!r} names no unit"
                )
    # Readable at 80% of the page's width.
    if texts:
        scale = SHOWN_SHARE * PAGE_WIDTH_PX / canvas.width
        sizes = [t.get_fontsize() * fig.dpi / 72.0 * scale for t in texts]
        smallest = int(np.argmin(sizes))
        if sizes[smallest] < MIN_FONT_PX:
            problems.append(
                f"font {sizes[smallest]:.2f} px at {SHOWN_SHARE:.0%} of a "
                f"{PAGE_WIDTH_PX:g} px page (least {MIN_FONT_PX:g}): "
                f"{_describe(texts[smallest])} in a {fig.get_figwidth():g} in wide "
                "figure"
            )
    return problems


def check_figure(fig) -> None:
    """Assert that the figure `fig` keeps every rule (see `figure_problems`)."""
    problems = figure_problems(fig)
    assert not problems, "\n".join(problems)


# --- The figure kinds, from synthetic inputs -------------------------------------

_BALL_LABELS = ["height y [m]", "speed v [m/s]"]


def _ball_energy(x):
    x = np.asarray(x, dtype=float)
    return 0.5 * x[..., 1] ** 2, 9.81 * x[..., 0]


def _time_series():
    return [hybrax.plot.time_series(_trajectory(), labels=_BALL_LABELS)]


def _model_labels(name):
    from hybrax.models import get_model

    model = get_model(name)
    return [model.label(entry) for entry in model.state_names]


def _time_series_many_entries():
    """Ten entries (the five-link biped's angles and rates, with its labels):
    two columns."""
    ball = _trajectory()
    wide = dataclasses.replace(
        ball,
        x_phase=np.tile(ball.x_phase, 5),
        x_before=np.tile(ball.x_before, 5),
        x_after=np.tile(ball.x_after, 5),
        phase_modes=("single_support",) * len(ball.phase_modes),
        event_kinds=("heel_strike",) * len(ball.event_kinds),
    )
    return [hybrax.plot.time_series(wide, labels=_model_labels("biped5"))]


def _time_series_constant_entries():
    """Eight entries held constant (the jumper's coordinates held by its
    constraints, with its labels): named over the panels."""
    ball = _trajectory()
    held = np.broadcast_to(np.linspace(0.1, 0.8, 8), ball.x_phase.shape[:-1] + (8,))
    trajectory = dataclasses.replace(
        ball,
        x_phase=np.concatenate([ball.x_phase, held], axis=-1),
        x_before=np.concatenate([ball.x_before, held[:, 0]], axis=-1),
        x_after=np.concatenate([ball.x_after, held[:, 0]], axis=-1),
    )
    labels = _model_labels("jumper")
    labels = labels[1:2] + labels[6:7] + labels[:1] + labels[2:6] + labels[7:]
    return [hybrax.plot.time_series(trajectory, labels=labels)]


def _simulation_figures():
    """`time_series.png`, `phase_portrait.png` and `energy.png` as `simulate`
    writes them (titled), the portrait with a switching surface and the energy
    with its loss panel."""
    figures = hybrax.plot.simulation_figures(
        _trajectory(),
        _BALL_LABELS,
        _ball_energy,
        surfaces=[("x", 0.0, "ground")],
        title="bouncing-ball",
    )
    return list(figures.values())


def _orbit_portrait():
    cycle = _trajectory(n_impacts=1)
    nudged = dataclasses.replace(cycle, x_phase=cycle.x_phase + np.array([0.0, 0.1]))
    fig = hybrax.plot.orbit_portrait(
        cycle,
        0,
        1,
        _BALL_LABELS,
        perturbed=[nudged],
        perturbed_labels=["v + 0.1"],
        surfaces=[("x", 0.0, "ground")],
    )
    fig.suptitle("bouncing-ball: one period and perturbed starts")
    return [fig]


def _branch():
    """A branch with flagged stretches, every kind of special point (two folds
    close together), reference lines and flag changes."""
    x = np.linspace(0.0, 1.0, 201)
    return types.SimpleNamespace(
        parameter=x,
        period=1.0 + 0.5 * np.sin(3 * x),
        multipliers=np.stack(
            [(0.5 + x) * np.exp(2j * x), np.full(x.shape, 0.1 + 0j)], axis=1
        ),
        stable=(0.5 + x) < 1,
        folds=[types.SimpleNamespace(index=i) for i in (40, 41, 150)],
        period_doublings=[types.SimpleNamespace(index=100)],
        neimark_sackers=[types.SimpleNamespace(index=120)],
        flagged=(x > 0.6) & (x < 0.8),
        admissible=~((x > 0.6) & (x < 0.8)),
    )


def _branch_figure():
    branch = _branch()
    return [
        hybrax.plot.branch_figure(
            branch.parameter,
            {"period": branch.period},
            branch.stable,
            folds=[p.index for p in branch.folds],
            period_doublings=[p.index for p in branch.period_doublings],
            neimark_sackers=[p.index for p in branch.neimark_sackers],
            flagged=branch.flagged,
            flagged_label="not admissible: the ground pulls after touchdown",
            flag_change_label="ground force reverses at touchdown",
            reference_lines=(1.0, (1.4, "period of the guess")),
            xlabel=r"$k$ [N/m]",
            ylabel="period [s]",
            title="hopper: period along the branch",
        )
    ]


def _branch_multiplier_figure():
    """`branch_multiplier.png` as `hybrax continue` writes it."""
    from hybrax._cli.continuation_outputs import _multiplier_figure

    return [
        _multiplier_figure(
            _branch(),
            xlabel=r"$k$ [N/m]",
            title="hopper: leading Floquet multiplier along the branch",
        )
    ]


def _branch_quantities_figure():
    """`branch_quantities.png` as `hybrax continue` writes it, for the compass
    gait's declared quantities (nine panels, long meanings, a condition left
    out)."""
    from hybrax._cli.continuation_outputs import _quantities_figure
    from hybrax.models import get_model

    model = get_model("compass-gait")
    branch = _branch()
    x = branch.parameter
    summary = {
        name: (x > 0.5) if model.quantity(name).is_condition else 1.0 + i * np.sin(x)
        for i, name in enumerate(model.quantities)
    }
    figure = _quantities_figure(model, branch, summary, r"slope $\phi$ [deg]")
    drawn = [ax for ax in figure.axes if ax.get_visible()]
    # The period and the multiplier have figures of their own.
    assert len(drawn) == sum(
        not model.quantity(name).is_condition
        for name in model.quantities
        if name not in ("period", "multiplier")
    )
    return [figure]


def _bifurcation_diagram():
    x = np.linspace(0.0, 1.0, 30)
    levels = [
        dict(
            parameter=x,
            panels=[x[:, None], 1.0 + 0.1 * x[:, None]],
            stable=x < 0.5,
            period_doublings=[15],
            label="period 1",
        ),
        dict(
            parameter=x[15:],
            panels=[
                np.stack([x[15:] + 0.1, x[15:] - 0.1], axis=1),
                np.stack([1.0 + 0.1 * x[15:]] * 2, axis=1),
            ],
            stable=x[15:] < 0.8,
            period_doublings=[],
            label="period 2",
        ),
    ]
    return [
        hybrax.plot.bifurcation_diagram(
            levels,
            xlabel=r"slope $\phi$ [deg]",
            ylabels=[r"$\theta$ after each cycle [rad]", "duration of each cycle [s]"],
            title="compass-gait: period-doubling cascade in slope_deg",
        )
    ]


def _sweep_heatmap(monkeypatch, tmp_path):
    """`sweep_heatmap.png` as `hybrax sweep` writes it for an interrupted sweep
    of the compass gait: every kind of cell, and two `--curves` with special
    points."""
    import hybrax._cli.sweep_map as sweep_map
    from hybrax.models import get_model

    drawn = {}
    monkeypatch.setattr(
        sweep_map, "write_figure", lambda path, fig: drawn.setdefault(path.name, fig)
    )
    model = get_model("compass-gait")
    x, y = np.linspace(1.0, 5.0, 9), np.linspace(5.0, 20.0, 7)
    shape = (9, 7)
    rng = np.random.default_rng(0)
    multipliers = rng.uniform(0.3, 1.6, shape).ravel()
    not_run = np.zeros(shape, bool)
    not_run[5:, 4:] = True
    converged = ~not_run
    converged[0, 0] = converged[1, 1] = False
    pulling = np.zeros(shape, bool)
    pulling[2, 2] = True
    status = np.full(shape, "successful", dtype=object)
    status[1, 1] = "max_steps_reached"
    status[0, 0] = "no_orbit"
    tally = types.SimpleNamespace(
        converged=converged.ravel(), pulling=pulling.ravel(), not_run=not_run.ravel()
    )
    problem = types.SimpleNamespace(
        model=model,
        axes=[("slope_deg", x), ("m_H", y)],
        flag=model.presentation.sweep_flag,
    )
    args = argparse.Namespace(model="compass-gait", quantity=None, out=tmp_path)
    s = np.linspace(0.0, 1.0, 20)
    curves = [
        ("period_doubling", 1.5 + 3 * s, 6 + 12 * s, [("fold_flip", 3.0, 12.0)]),
        ("fold", 4.5 - 2 * s, 8 + 10 * s**2, [("cusp", 3.5, 10.5)]),
    ]
    sweep_map.write_heatmap(
        args,
        problem,
        types.SimpleNamespace(multipliers=multipliers[:, None]),
        {"status": status.ravel()},
        tally,
        curves,
    )
    return [drawn["sweep_heatmap.png"]]


def _basin_maps():
    x, y = np.linspace(0.1, 0.3, 9), np.linspace(-0.35, -0.05, 8)
    outcome = np.zeros((9, 8), int)
    outcome[0], outcome[-1, -1], outcome[1, 1], outcome[4, 0] = 2, 1, 4, 3
    common = dict(
        period=np.where(outcome == 1, 2, 0),
        title="simplest-walker: basin of attraction (20 cycles)",
    )
    two = hybrax.plot.basin_map(
        x,
        y,
        outcome,
        xlabel=r"$\theta$ [rad]",
        ylabel=r"$\dot\theta$ [rad/$\sqrt{l/g}$]",
        orbit=(0.2, -0.2),
        **common,
    )
    common["period"] = common["period"][:, 0]
    one = hybrax.plot.basin_map(
        x, None, outcome[:, 0], xlabel=r"$\theta$ [rad]", orbit=(0.2,), **common
    )
    return [two, one]


def _tune_figures(monkeypatch, tmp_path, names, values):
    import hybrax._cli.tune as tune_cli
    from hybrax.models import get_model

    drawn = {}
    monkeypatch.setattr(
        tune_cli, "write_figure", lambda path, fig: drawn.setdefault(path.name, fig)
    )
    args = argparse.Namespace(out=tmp_path, max_multiplier=0.95)
    tune_cli._figures(args, get_model("hopper"), _tune_result(names, values), names)
    return list(drawn.values())


def _tune_path(monkeypatch, tmp_path):
    """`tune_path.png` (two parameters: the path over the objective's map) and
    `tune_multipliers.png`, as `hybrax tune` writes them."""
    return _tune_figures(monkeypatch, tmp_path, ["d_G", "k"], {"d_G": 500.0, "k": 1e4})


def _tune_history(monkeypatch, tmp_path):
    """`tune_path.png` for three parameters: the objective's history."""
    values = {"d_G": 500.0, "k": 1e4, "mu": 0.8}
    return _tune_figures(monkeypatch, tmp_path, list(values), values)


def _curve_figure(monkeypatch, tmp_path):
    """`curve.png` of `hybrax continue --curve`, stopped on its point budget."""
    import hybrax._cli.curve as curve_cli
    from hybrax.models import get_model

    drawn = {}
    monkeypatch.setattr(
        curve_cli, "write_figure", lambda path, fig: drawn.setdefault(path.name, fig)
    )
    s = np.linspace(0.0, 1.0, 30)
    record = {
        "kind": "period_doubling",
        "status": "max_points_reached",
        "parameters": ["slope_deg", "m_H"],
        "slope_deg": list(1.5 + 3 * s),
        "m_H": list(6 + 12 * s),
        "codim2": [{"kind": "fold_flip", "slope_deg": 3.0, "m_H": 12.0}],
    }
    curve_cli.write_curve_figure(record, get_model("compass-gait"), tmp_path)
    return [drawn["curve.png"]]


def _ball_frames(frames=30, travel=0.0):
    return hybrax.plot.stick_frames(
        _trajectory(),
        lambda x: [
            np.array([[-0.5, 0.0], [0.5, 0.0]]),
            np.array([[-0.1, x[0]], [0.1, x[0]]]),
        ],
        frame_shift=lambda x_before: np.array([travel, 0.0]),
        frames=frames,
        names=("ball",),
    )


def _strobe_in_place():
    """A motion in place: snapshots side by side, each with its time."""
    return [hybrax.plot.stick_figure(_ball_frames(), snapshots=8)]


def _strobe_travelling():
    """A body that travels (a metre per bounce): snapshots along the ground."""
    return [hybrax.plot.stick_figure(_ball_frames(travel=1.0), snapshots=8)]


def _animation_frame():
    """A frame of `save_animation` (its animated title drawn in), with a note."""
    from hybrax.plot.sticks import _Animation

    animation = _Animation(
        _ball_frames(frames=10, travel=1.0),
        fps=10,
        note="a simplification of the model that shows: the ball is a bar",
    )
    animation.draw(5)
    for artist in [*animation.artists, animation.title]:
        artist.set_animated(False)
    return [animation.fig]


def _hopper_trajectory(cycles=2, samples=60):
    """Flights and ground phases of the hopper in its minimal coordinates
    $[z_U, z_L, \\dot z_U, \\dot z_L]$, drawn by hand (a parabola in flight, a
    half cosine on the ground): the paper figures' inputs, no solve."""
    from hybrax.models import hopper

    params = hopper.make_params()
    L0, g = float(params.L0), float(params.g)
    t0, t_phase, x_phase, modes, t_events, kinds = 0.0, [], [], [], [], []
    before, after, lost, kept = [], [], [], []
    for _ in range(cycles):
        # Flight: both masses on one parabola, the leg at rest length.
        duration = 0.3
        t = np.linspace(0.0, duration, samples)
        z_L = 1.5 * t - 0.5 * g * t**2 + 0.05
        v = 1.5 - g * t
        x_phase.append(np.stack([z_L + L0, z_L, v, v], axis=1))
        t_phase.append(t0 + t)
        modes.append("flight")
        t0 += duration
        t_events.append(t0)
        kinds.append("touchdown")
        before.append(x_phase[-1][-1])
        after.append(x_phase[-1][-1] * np.array([1.0, 0.0, 1.0, 0.0]))
        lost.append(0.5 * float(params.m) * 0.1 * v[-1] ** 2)
        kept.append(0.5 * float(params.m) * 0.9 * v[-1] ** 2)
        # Ground: the foot at rest, the upper mass down and up again.
        t = np.linspace(0.0, 0.25, samples)
        z_U = L0 - 0.05 * np.sin(np.pi * t / 0.25)
        v_U = -0.05 * np.pi / 0.25 * np.cos(np.pi * t / 0.25)
        zero = np.zeros_like(t)
        x_phase.append(np.stack([z_U, zero, v_U, zero], axis=1))
        t_phase.append(t0 + t)
        modes.append("ground")
        t0 += 0.25
        t_events.append(t0)
        kinds.append("liftoff")
        before.append(x_phase[-1][-1])
        after.append(x_phase[-1][-1])
        lost.append(np.nan)
        kept.append(np.nan)
    trajectory = hybrax.plot.Trajectory(
        t_phase=np.array(t_phase),
        x_phase=np.array(x_phase),
        phase_modes=tuple(modes),
        t_events=np.array(t_events),
        event_kinds=tuple(kinds),
        x_before=np.array(before),
        x_after=np.array(after),
        T_c=np.array(lost),
        T_a=np.array(kept),
    )
    return trajectory, params


def _hopper_paper_figures():
    from hybrax.models import hopper_figures

    trajectory, params = _hopper_trajectory()
    return [
        hopper_figures.phase_portraits(trajectory, params),
        hopper_figures.energy_history(trajectory, params),
        hopper_figures.orbit_figure(
            trajectory, params, perturbed=[_hopper_trajectory(1)[0]]
        ),
    ]


FIGURES = {
    "time series": _time_series,
    "time series, two columns": _time_series_many_entries,
    "time series, constant entries": _time_series_constant_entries,
    "simulation figures (time series, phase portrait, energy)": _simulation_figures,
    "orbit portrait": _orbit_portrait,
    "branch figure": _branch_figure,
    "branch multiplier (command)": _branch_multiplier_figure,
    "branch quantities (command)": _branch_quantities_figure,
    "bifurcation diagram": _bifurcation_diagram,
    "sweep heat map (command)": _sweep_heatmap,
    "basin map": _basin_maps,
    "tune path (command)": _tune_path,
    "tune history (command)": _tune_history,
    "curve (command)": _curve_figure,
    "strobe in place": _strobe_in_place,
    "strobe travelling": _strobe_travelling,
    "animation frame": _animation_frame,
    "the hopper's paper figures": _hopper_paper_figures,
}


@pytest.mark.parametrize("kind", list(FIGURES))
def test_every_figure_kind_keeps_the_rules(kind, request):
    """Each figure of the kind: texts inside the canvas and apart, every axis
    that shows values labelled with its unit, fonts readable at 80% of a page's
    width; at matplotlib's resolution and at the command line's (150 dpi; text
    extents do not scale exactly with it)."""
    make = FIGURES[kind]
    fixtures = inspect.signature(make).parameters
    figures = make(**{name: request.getfixturevalue(name) for name in fixtures})
    assert figures
    problems = []
    for k, fig in enumerate(figures):
        for dpi in (100, 150):
            fig.set_dpi(dpi)
            problems += [
                f"figure {k} ({fig.get_suptitle() or 'untitled'}) at {dpi} dpi: "
                f"{problem}"
                for problem in figure_problems(fig)
            ]
    assert not problems, "\n".join(problems)


def test_the_checker_finds_what_breaks_the_rules():
    """The checker itself: a text off the canvas, two texts on top of each
    other, an axis without a unit and a tiny font are each reported, naming
    the text or the axis."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("time [s]")
    ax.set_ylabel("height")
    ax.text(1.3, 0.5, "far right", transform=ax.transAxes)
    ax.text(0.5, 0.5, "first", transform=ax.transAxes)
    ax.text(0.5, 0.5, "second", transform=ax.transAxes)
    ax.set_title("tiny", fontsize=4)
    problems = "\n".join(figure_problems(fig))
    assert "outside the canvas" in problems and "'far right'" in problems
    assert "overlap" in problems and "'first'" in problems and "'second'" in problems
    assert "'height' names no unit" in problems
    assert "font" in problems and "'tiny'" in problems
    clean = Figure(figsize=(6.4, 4.8), layout="constrained")
    ax = clean.add_subplot()
    ax.plot([0, 1], [0, 1], label="line")
    ax.set(xlabel="time [s]", ylabel="height [m]", title="fine")
    ax.legend()
    check_figure(clean)


def test_the_cascade_figure_keeps_the_unit_last():
    """`hybrax continue --cascade` labels its bifurcation diagram with the first
    state after each cycle: the unit stays at the end, where the rule reads it."""
    from hybrax._cli.continuation_outputs import _after_each_cycle

    label = _after_each_cycle(r"$z_U$ [m]")
    assert label == r"$z_U$ after each cycle [m]" and _UNIT.search(label)
    assert _after_each_cycle("phase") == "phase after each cycle"
