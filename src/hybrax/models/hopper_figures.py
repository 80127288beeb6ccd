r"""The hopper's figures in the style of Zana et al. (2018): phase portraits with
the switching surfaces (Fig. 4), the energy history with the losses at impact
(Fig. 5) and the orbit with perturbed trajectories (Fig. 3). They take a
[`hybrax.plot.Trajectory`][] in the hopper's minimal coordinates
$x = [z_U, z_L, \dot z_U, \dot z_L]$ (matplotlib only)."""

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..plot import Trajectory, draw_event_points, draw_phases
from . import hopper


# Legends at the body font: these figures are 10-12 in wide, so at 80% of a
# documentation page a "small" (8.3 pt) legend would read below 7 px.
_LEGEND_FONT = "medium"


def _legend(ax: Axes) -> None:
    # An empty panel has nothing to list (matplotlib would warn).
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=_LEGEND_FONT)


def phase_portraits(
    trajectory: Trajectory,
    params: hopper.HopperParams,
    *,
    axes: Sequence[Axes] | None = None,
) -> Figure:
    r"""Phase portraits of the hopper's two masses (Zana et al. 2018, Fig. 4).

    Left: the upper mass in the $(z_U, \dot z_U)$ plane, with the lift-off surface
    $\lambda_g = 0$, i.e. the line $z_U = L_0 + (m_L g - d_G \dot z_U)/k$ (see
    [`hybrax.models.hopper.liftoff_state`][]). Right: the lower mass in the
    $(z_L, \dot z_L)$ plane, with the touchdown surface $z_L = 0$ and each plastic
    impact $\dot z_L^- \to 0$ drawn as a dashed vertical segment. Phases are
    coloured by mode; the start, touchdown (pre-impact) and lift-off points are
    marked. Switching surfaces are black.

    **Arguments:**

    - `trajectory`: a [`hybrax.plot.Trajectory`][] (or any object with its
      attributes) in minimal coordinates.
    - `params`: the [`hybrax.models.hopper.HopperParams`][] of the run.
    - `axes`: two matplotlib `Axes` to draw into; default a new figure.

    **Returns:** the matplotlib `Figure`.

    !!! example

        ```python
        sol = hybrax.simulate(
            system, x0, params, n_events=6, n_save=200,
            settings=hybrax.Settings(t_max=50.0),
        )
        traj = hybrax.plot.Trajectory.from_solution(sol, system)
        hybrax.models.hopper_figures.phase_portraits(traj, params).savefig("phase.png")
        ```
    """
    if axes is None:
        fig = Figure(figsize=(11.0, 4.8), layout="constrained")
        axes = fig.subplots(1, 2)
    else:
        if len(axes) != 2:
            raise ValueError(f"`axes` must hold two Axes; got {len(axes)}.")
        fig = axes[0].get_figure()
    ax_upper, ax_lower = axes
    x_phase = np.asarray(trajectory.x_phase, dtype=float)
    have_data = x_phase.size > 0 and np.any(np.isfinite(x_phase))

    # Upper mass and the lift-off surface over the range of v_U seen.
    if have_data:
        draw_phases(ax_upper, trajectory, 0, 2)
        v_U = x_phase[..., 2]
        low, high = float(np.nanmin(v_U)), float(np.nanmax(v_U))
    else:
        low, high = -1.0, 1.0
    pad = 0.1 * max(high - low, 1e-3)
    v_line = np.linspace(low - pad, high + pad, 2)
    z_line = np.asarray(hopper.liftoff_state(v_line, params))[0]
    ax_upper.plot(
        z_line, v_line, color="k", linewidth=1.2, label=r"lift-off $\lambda_g = 0$"
    )
    draw_event_points(ax_upper, trajectory, 0, 2)
    ax_upper.set_xlabel(r"$z_U$ [m]")
    ax_upper.set_ylabel(r"$\dot z_U$ [m/s]")
    ax_upper.set_title("upper mass")

    # Lower mass, the touchdown surface and the impact jumps.
    if have_data:
        draw_phases(ax_lower, trajectory, 1, 3)
    ax_lower.axvline(0.0, color="k", linewidth=1.2, label=r"touchdown $z_L = 0$")
    touchdown = trajectory.events_of("touchdown")
    for k, index in enumerate(np.flatnonzero(touchdown)):
        # Red over the black surface line, which it lies on.
        ax_lower.plot(
            [0.0, 0.0],
            [trajectory.x_before[index, 3], trajectory.x_after[index, 3]],
            color="tab:red",
            linestyle="--",
            linewidth=2.0,
            label=r"impact $\dot z_L^- \to 0$" if k == 0 else None,
            zorder=3,
        )
    draw_event_points(ax_lower, trajectory, 1, 3)
    ax_lower.set_xlabel(r"$z_L$ [m]")
    ax_lower.set_ylabel(r"$\dot z_L$ [m/s]")
    ax_lower.set_title("lower mass")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        _legend(ax)
    return fig


def energy_history(
    trajectory: Trajectory,
    params: hopper.HopperParams,
    *,
    ax: Axes | None = None,
    annotate: bool = True,
) -> Figure:
    r"""Kinetic, potential and total energy over time (Zana et al. 2018, Fig. 5).

    $T = \tfrac12(m_U\dot z_U^2 + m_L\dot z_L^2)$ and
    $V = g(m_U z_U + m_L z_L) + \tfrac12 k(z_U - z_L - L_0)^2$ from
    [`hybrax.models.hopper.energies`][]. At each touchdown the plastic impact removes
    $T_c = \tfrac12 m_L (\dot z_L^-)^2$ from the total (a red arrow down the drop)
    and keeps $T_a = \tfrac12 m_U (\dot z_U^-)^2$ as kinetic energy (a purple arrow
    from 0 up to the kinetic energy after the impact).

    **Arguments:**

    - `trajectory`: a [`hybrax.plot.Trajectory`][] (or any object with its
      attributes) in minimal coordinates.
    - `params`: the [`hybrax.models.hopper.HopperParams`][] of the run.
    - `ax`: a matplotlib `Axes` to draw into; default a new figure.
    - `annotate`: whether to mark $T_c$ and $T_a$ at the touchdowns.

    **Returns:** the matplotlib `Figure`.
    """
    own_figure = ax is None
    if ax is None:
        fig = Figure(figsize=(10.0, 5.2), layout="constrained")
        ax = fig.subplots()
    else:
        fig = ax.get_figure()
    t = np.asarray(trajectory.t_phase, dtype=float).reshape(-1)
    x = np.asarray(trajectory.x_phase, dtype=float).reshape(-1, 4)
    if x.shape[0] > 0:
        # Consecutive phases share their boundary time, so the concatenated curves
        # show each impact's loss as a vertical drop.
        kinetic, potential, total = (np.asarray(e) for e in hopper.energies(x, params))
        ax.plot(t, kinetic, color="tab:green", label="kinetic $T$")
        ax.plot(t, potential, color="tab:blue", label="potential $V$")
        ax.plot(t, total, color="k", label="total $T + V$")
    if annotate:
        # The labels go in the widest band that no curve crosses (between the
        # kinetic and the potential energy), where they cover no data.
        drawn = (
            np.concatenate([kinetic, potential, total]) if x.shape[0] else [0.0, 1.0]
        )
        drawn = np.sort(np.asarray(drawn)[np.isfinite(drawn)])
        widest = int(np.argmax(np.diff(drawn))) if drawn.size > 1 else 0
        low, high = drawn[widest], drawn[min(widest + 1, drawn.size - 1)]
        label_c, label_a = low + 0.6 * (high - low), low + 0.4 * (high - low)
        touchdown = np.flatnonzero(trajectory.events_of("touchdown"))
        for k, index in enumerate(touchdown):
            t_event = float(trajectory.t_events[index])
            T_c = float(trajectory.T_c[index])
            T_a = float(trajectory.T_a[index])
            if not (np.isfinite(T_c) and np.isfinite(T_a)):
                continue
            before = float(
                np.asarray(hopper.energies(trajectory.x_before[index], params)[2])
            )
            # No shrink: the arrows must span the drop exactly.
            arrow = dict(arrowstyle="->", shrinkA=0, shrinkB=0, linewidth=1.5)
            ax.annotate(
                "",
                xy=(t_event, before - T_c),
                xytext=(t_event, before),
                arrowprops=dict(arrow, color="tab:red"),
            )
            ax.annotate(
                f"$T_c$ = {T_c:.3g} J",
                xy=(t_event, label_c),
                horizontalalignment="center",
                verticalalignment="center",
                color="tab:red",
                fontsize="small",
            )
            ax.annotate(
                "",
                xy=(t_event, T_a),
                xytext=(t_event, 0.0),
                arrowprops=dict(arrow, color="tab:purple"),
            )
            ax.annotate(
                f"$T_a$ = {T_a:.3g} J",
                xy=(t_event, label_a),
                horizontalalignment="center",
                verticalalignment="center",
                color="tab:purple",
                fontsize="small",
            )
            if k == 0:
                ax.plot([], [], color="tab:red", label="$T_c$: lost at touchdown")
                ax.plot([], [], color="tab:purple", label="$T_a$: kept at touchdown")
    ax.set_xlabel("$t$ [s]")
    ax.set_ylabel("energy [J]")
    ax.grid(True, alpha=0.3)
    if own_figure and ax.get_legend_handles_labels()[0]:
        # Below the axes: inside, it sat in the band the labels use.
        fig.legend(loc="outside lower center", ncols=5, fontsize="small")
    else:
        _legend(ax)
    return fig


# Colours of the perturbed trajectories of `orbit_figure` (the orbit is black).
_PERTURBED_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple")


def _cycle_curve(trajectory: Trajectory) -> np.ndarray:
    """All phase samples, concatenated, as one `(s, 4)` curve (NaN padding
    dropped)."""
    x = np.asarray(trajectory.x_phase, dtype=float).reshape(-1, 4)
    return x[np.all(np.isfinite(x), axis=1)]


def _switch_points(trajectory: Trajectory, kind: str) -> np.ndarray:
    """The states at which `trajectory` meets the switching surface of `kind`."""
    mask = trajectory.events_of(kind)
    return np.asarray(trajectory.x_before, dtype=float).reshape(-1, 4)[mask]


def orbit_figure(
    orbit: Trajectory,
    params: hopper.HopperParams,
    *,
    perturbed: Sequence[Trajectory] = (),
    labels: Sequence[str] | None = None,
) -> Figure:
    r"""A periodic orbit and perturbed trajectories near it in the
    $(z_U, z_L, \dot z_U)$ subspace (Zana et al. 2018, Fig. 3).

    Left: a 3-D view with the foot height $z_L$ upwards, so that the touchdown
    surface $z_L = 0$ is the grey floor; on it lies the lift-off surface
    $\lambda_g = 0$, the line $z_U = L_0 + (m_L g - d_G\dot z_U)/k$ (see
    [`hybrax.models.hopper.liftoff_state`][]). Right: the view from above, the
    projection onto the $(z_U, \dot z_U)$ plane. The orbit is black, each perturbed
    trajectory has its own colour; the points where a curve meets a switching
    surface are marked (touchdown, pre-impact: down triangle; lift-off: up
    triangle) and each perturbed start by an open circle. The plastic impact
    changes only $\dot z_L$, so a touchdown is one point in this subspace.

    **Arguments:**

    - `orbit`: one period of the orbit as a [`hybrax.plot.Trajectory`][] (plain
      NumPy arrays; any object with its attributes will do) in minimal
      coordinates $[z_U, z_L, \dot z_U, \dot z_L]$.
    - `params`: the [`hybrax.models.hopper.HopperParams`][] of the orbit.
    - `perturbed`: trajectories started near the orbit, as `Trajectory`s.
    - `labels`: a legend entry per perturbed trajectory; default
      `"perturbed 1"`, ...

    **Returns:** the matplotlib `Figure`, its axes the 3-D view and the projection
    (which holds the legend entries; the figure legend lists them below both).

    **Raises:** `ValueError` if `labels` does not match `perturbed`.

    !!! example

        ```python
        sol = hybrax.simulate(
            system, orbit.state, params, n_events=2, mode0="flight", n_save=400,
            settings=hybrax.Settings(t_max=10.0),
        )
        traj = hybrax.plot.Trajectory.from_solution(sol, system)
        hybrax.models.hopper_figures.orbit_figure(traj, params).savefig("orbit.png")
        ```
    """
    perturbed = list(perturbed)
    if labels is None:
        labels = [f"perturbed {k + 1}" for k in range(len(perturbed))]
    elif len(labels) != len(perturbed):
        raise ValueError(
            f"`labels` must hold one entry per perturbed trajectory; got "
            f"{len(labels)} for {len(perturbed)}."
        )
    fig = Figure(figsize=(12.0, 5.6), layout="constrained")
    ax3 = fig.add_subplot(1, 2, 1, projection="3d")
    ax2 = fig.add_subplot(1, 2, 2)
    curves = [(orbit, "periodic orbit", "k", 2.2)] + [
        (trajectory, label, _PERTURBED_COLOURS[k % len(_PERTURBED_COLOURS)], 1.3)
        for k, (trajectory, label) in enumerate(zip(perturbed, labels))
    ]
    samples = [_cycle_curve(trajectory) for trajectory, *_ in curves]
    everything = np.concatenate([np.zeros((0, 4))] + samples)
    if everything.shape[0] > 0:
        low, high = np.min(everything, axis=0), np.max(everything, axis=0)
    else:
        low = np.array([float(params.L0) - 0.1, 0.0, -1.0, 0.0])
        high = np.array([float(params.L0) + 0.1, 0.1, 1.0, 0.0])
    pad = 0.06 * np.maximum(high - low, 1e-3)
    z_range = (low[0] - pad[0], high[0] + pad[0])
    v_range = (low[2] - pad[2], high[2] + pad[2])

    # Switching surfaces: the touchdown floor z_L = 0 and the lift-off line on it,
    # clipped to the plotted box.
    zz, vv = np.meshgrid(z_range, v_range)
    ax3.plot_surface(zz, vv, np.zeros_like(zz), color="0.55", alpha=0.15, linewidth=0)
    ax2.fill([], [], color="0.55", alpha=0.3, label=r"touchdown surface $z_L = 0$")
    v_line = np.linspace(*v_range, 101)
    z_line = np.asarray(hopper.liftoff_state(v_line, params))[0]
    inside = (z_line >= z_range[0]) & (z_line <= z_range[1])
    surface = dict(color="k", linestyle="--", linewidth=1.1)
    ax3.plot(z_line[inside], v_line[inside], np.zeros(int(np.sum(inside))), **surface)
    ax2.plot(
        z_line[inside],
        v_line[inside],
        label=r"lift-off surface $\lambda_g = 0$",
        **surface,
    )

    for (trajectory, label, colour, width), x in zip(curves, samples):
        ax3.plot(x[:, 0], x[:, 2], x[:, 1], color=colour, linewidth=width)
        ax2.plot(x[:, 0], x[:, 2], color=colour, linewidth=width, label=label)
        if trajectory is not orbit and x.shape[0] > 0:
            start = dict(
                linestyle="none",
                marker="o",
                markersize=7,
                markerfacecolor="white",
                markeredgecolor=colour,
                markeredgewidth=1.5,
                zorder=6,
            )
            ax3.plot(x[:1, 0], x[:1, 2], x[:1, 1], **start)
            ax2.plot(x[:1, 0], x[:1, 2], **start)
        for kind, marker in (("touchdown", "v"), ("liftoff", "^")):
            points = _switch_points(trajectory, kind)
            dots = dict(
                linestyle="none",
                marker=marker,
                markersize=8,
                markerfacecolor=colour,
                markeredgecolor="w" if colour == "k" else "k",
                markeredgewidth=0.8,
                zorder=5,
            )
            ax3.plot(points[:, 0], points[:, 2], points[:, 1], **dots)
            ax2.plot(points[:, 0], points[:, 2], **dots)
    # Legend entries for the markers, once, in a neutral colour.
    neutral = dict(linestyle="none", markersize=8, color="0.35")
    ax2.plot([], [], marker="v", label="touchdown point", **neutral)
    ax2.plot([], [], marker="^", label="lift-off point", **neutral)
    if perturbed:
        ax2.plot(
            [],
            [],
            linestyle="none",
            marker="o",
            markersize=7,
            markerfacecolor="white",
            markeredgecolor="0.35",
            label="perturbed start",
        )

    # Labels padded clear of the 3-D view's slanted tick labels.
    ax3.set_xlabel(r"$z_U$ [m]", labelpad=14)
    ax3.set_ylabel(r"$\dot z_U$ [m/s]", labelpad=18)
    ax3.zaxis.set_rotate_label(False)
    ax3.set_zlabel(r"$z_L$ [m]", rotation=90, labelpad=10)
    ax3.set_xlim(*z_range)
    ax3.set_ylim(*v_range)
    ax3.set_zlim(0.0, high[1] + pad[1])
    ax3.set_box_aspect((1.3, 1.3, 0.8))
    # Seen from the side of negative z_U and v_U: the flight arc rises off the floor.
    ax3.view_init(elev=22.0, azim=-125.0)
    ax3.set_title(r"state space $(z_U, \dot z_U, z_L)$")
    ax2.set_xlabel(r"$z_U$ [m]")
    ax2.set_ylabel(r"$\dot z_U$ [m/s]")
    ax2.set_xlim(*z_range)
    ax2.set_ylim(*v_range)
    ax2.set_title(r"projection onto $(z_U, \dot z_U)$, seen from above")
    ax2.grid(True, alpha=0.3)
    handles, names = ax2.get_legend_handles_labels()
    fig.legend(
        handles, names, loc="outside lower center", ncols=4, fontsize=_LEGEND_FONT
    )
    return fig


# ---------------------------------------------------------------------------
# Branches of periodic orbits (continuation)
# ---------------------------------------------------------------------------
