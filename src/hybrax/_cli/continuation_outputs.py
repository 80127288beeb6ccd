"""What `hybrax continue` writes of a branch besides its table: the JSON records of
a cascade's levels and the figures (a cascade's bifurcation diagram, the branch's
period, multiplier and declared quantities)."""

import pathlib
from typing import Any

import numpy as np

from . import common


def _after_each_cycle(label: str) -> str:
    """`label` (a quantity and its unit, `"$y$ [m]"`) read after each cycle, the
    unit kept last: `"$y$ after each cycle [m]"`."""
    name, bracket, unit = label.rpartition(" [")
    if bracket and unit.endswith("]"):
        return f"{name} after each cycle [{unit}"
    return f"{label} after each cycle"


def _crossings(model, form, section, branch):
    """Per point of `branch`, the first minimal coordinate right after each cycle
    of the model's own section (2^k crossings on a period-2^k branch) and each
    cycle's duration: `(values (N, c), durations (N, c))`."""
    import jax.numpy as jnp

    length = len(model.forms[model.default_form].section().sequence)
    cycles = len(section.sequence) // length
    ends = [(c + 1) * length - 1 for c in range(cycles)]
    states = np.asarray(branch.x_after)[:, ends]
    if form.to_minimal is not None:
        states = np.asarray(form.to_minimal(jnp.asarray(states)), dtype=float)
    durations = np.asarray(branch.phase_durations).reshape(branch.n_points, cycles, -1)
    return states[..., 0], durations.sum(axis=-1)


def _level_record(model, form, section, branch, parameter, period):
    """The JSON record of one level of a cascade."""
    from .._solution import status_name

    values, durations = _crossings(model, form, section, branch)
    name = parameter.name
    points = []
    for i in range(branch.n_points):
        points.append(
            {
                name: float(branch.parameter[i]),
                f"{model.state_names[0]}_per_cycle": [
                    common._number(v) for v in values[i]
                ],
                "cycle_durations": [common._number(v) for v in durations[i]],
                "period": common._number(branch.period[i]),
                "multipliers_abs": [
                    common._number(v) for v in np.abs(branch.multipliers[i])
                ],
                "stable": bool(branch.stable[i]),
                "kind": branch.kind[i],
            }
        )
    return {
        "period": period,
        "status": status_name(branch.result)[0],
        "message": branch.message,
        "branch": points,
        "period_doublings": [
            {name: float(p.parameter), "located": p.located}
            for p in branch.period_doublings
        ],
    }


def _bifurcation_figure(model, form, levels, parameter, args):
    """`bifurcation.png`: the first minimal coordinate after every cycle and
    each cycle's duration against the parameter, for every level of the cascade."""
    from .. import plot

    units = model.presentation.units
    drawn = []
    born = None  # (parameter, values, durations) where the next level branches off
    for k, (section, branch) in enumerate(levels):
        values, durations = _crossings(model, form, section, branch)
        parameter_values, stable = branch.parameter, branch.stable
        doublings = [p.index for p in branch.period_doublings]
        offset = 0  # of the branch's points in the drawn arrays
        if born is not None:
            # Drawn from the period doubling it was born at, where its orbit is
            # the parent's traversed twice (no gap before its first point).
            x0, v0, d0 = born
            repeat = values.shape[1] // v0.size
            parameter_values = np.concatenate([[x0], parameter_values])
            values = np.concatenate([np.tile(v0, repeat)[None], values])
            durations = np.concatenate([np.tile(d0, repeat)[None], durations])
            stable = np.concatenate([stable[:1], stable])
            doublings = [i + 1 for i in doublings]
            offset = 1
        born = None
        if branch.period_doublings:
            i = branch.period_doublings[0].index  # where the cascade switched
            born = (branch.parameter[i], values[i + offset], durations[i + offset])
        drawn.append(
            dict(
                parameter=parameter_values,
                panels=[values, durations],
                stable=stable,
                period_doublings=doublings,
                label=f"period {2**k}",
            )
        )
    figure = plot.bifurcation_diagram(
        drawn,
        xlabel=model.label(parameter.name),
        ylabels=(
            _after_each_cycle(model.label(model.state_names[0])),
            f"duration of each cycle [{units.time}]",
        ),
        title=f"{args.model}: period-doubling cascade in {parameter.name}",
    )
    return plot.save_figures({"bifurcation.png": figure}, args.out)


def _branch_figures(model, branch, summary, params, parameter, out: pathlib.Path):
    """`branch_period.png`, `branch_multiplier.png` and `branch_quantities.png`:
    period, leading multiplier and the model's other declared quantities along
    the branch (any model), stable points solid, unstable dashed, special points
    marked, orbits that break a declared boundary drawn apart; the parameter
    with its unit, the model's name in the titles. The multiplier is drawn as
    its modulus and its angle (see `_multiplier_figure`), each one way along the
    whole branch."""
    from .. import plot

    del params
    units = model.presentation.units
    common = _branch_marks(branch)
    xlabel = model.label(parameter.name)
    period = plot.branch_figure(
        branch.parameter,
        curves={"period": summary["period"]},
        ylabel=f"period [{units.time}]",
        title=f"{model.name}: period along the branch",
        xlabel=xlabel,
        **common,
    )
    multiplier = _multiplier_figure(
        branch,
        xlabel=xlabel,
        title=f"{model.name}: leading Floquet multiplier along the branch",
    )
    figures = {"branch_period.png": period, "branch_multiplier.png": multiplier}
    quantities = _quantities_figure(model, branch, summary, xlabel)
    if quantities is not None:
        figures["branch_quantities.png"] = quantities
    return plot.save_figures(figures, out)


def _quantities_figure(model, branch, summary, xlabel: str):
    """One panel per declared quantity of the branch's columns (its conditions
    and the period and multiplier of the other figures left out), two panels a
    row: each titled with the quantity's meaning, its axis with the symbol (or
    name) and unit; `None` where the model declares none."""
    import textwrap

    from matplotlib.figure import Figure

    from .. import plot
    from .._model import with_unit

    names = [
        name
        for name in model.quantities or {}
        if name in summary
        and name not in ("period", "multiplier")
        and np.asarray(summary[name]).dtype != bool
    ]
    if not names:
        return None
    columns = min(2, len(names))
    rows = -(-len(names) // columns)
    fig = Figure(figsize=(5.0 * columns, 3.0 * rows + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, columns, sharex=True)).ravel()
    common = _branch_marks(branch)
    for index, (ax, name) in enumerate(zip(axes, names)):
        quantity = model.quantity(name)
        symbol = quantity.symbol or name
        plot.branch_figure(
            branch.parameter,
            curves={symbol: np.asarray(summary[name], dtype=float)},
            ylabel=with_unit(symbol, quantity.unit or ""),
            xlabel=xlabel if index >= len(names) - columns else "",
            title=textwrap.fill(quantity.meaning or name, 48),
            ax=ax,
            legend=index == 0,
            **common,
        )
        # The last panel of a column shows its parameter values, also where
        # the row below is left empty.
        ax.tick_params(labelbottom=index >= len(names) - columns)
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    fig.suptitle(f"{model.name}: the model's quantities along the branch")
    return fig


def _branch_marks(branch) -> dict[str, Any]:
    """The stability and the special points' indices of `branch`, as
    `hybrax.plot.branch_figure` takes them."""
    admissible = np.asarray(branch.admissible, dtype=bool)
    return dict(
        stable=branch.stable,
        flagged=None if admissible.all() else ~admissible,
        flagged_label="breaks a declared boundary",
        folds=[f.index for f in branch.folds],
        period_doublings=[p.index for p in branch.period_doublings],
        neimark_sackers=[p.index for p in branch.neimark_sackers],
    )


def _multiplier_figure(branch, *, xlabel: str, title: str):
    r"""The leading nontrivial Floquet multiplier $\nu$ along `branch` in two
    panels sharing the parameter axis: its modulus $|\nu|$ (the line $|\nu| = 1$
    marked) and its angle $|\arg\nu|$ in degrees, 0 to 180 (0 for a positive
    real multiplier, 180 for a negative one, the pair's angle for a complex
    pair; the absolute value, since the two of a conjugate pair come in either
    order). Each quantity is drawn the same way at every point, so the curves
    stay continuous where a complex pair turns real (the signed real value
    would jump from $+|\nu|$ to $-|\nu|$ there)."""
    from matplotlib.figure import Figure

    from .. import plot

    leading = np.asarray(branch.multipliers)[:, 0]
    fig = Figure(figsize=(7.0, 6.4), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    common = _branch_marks(branch)
    plot.branch_figure(
        branch.parameter,
        curves={r"$|\nu|$": np.abs(leading)},
        reference_lines=(1.0,),
        xlabel="",
        ylabel=r"modulus $|\nu|$ (dimensionless)",
        title=title,
        ax=top,
        **common,
    )
    plot.branch_figure(
        branch.parameter,
        curves={r"$|\arg\nu|$": np.degrees(np.abs(np.angle(leading)))},
        reference_lines=(0.0, 180.0),
        xlabel=xlabel,
        ylabel=r"angle $|\arg\nu|$ [deg]",
        ax=bottom,
        legend=False,
        **common,
    )
    bottom.set_ylim(-10.0, 190.0)
    bottom.set_yticks([0.0, 45.0, 90.0, 135.0, 180.0])
    return fig
