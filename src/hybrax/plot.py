r"""Figures of simulated hybrid trajectories (matplotlib only).

The functions here take a [`hybrax.plot.Trajectory`][]: plain NumPy arrays of the
per-phase samples and of the events, so they serve any command that produces phases
and events (a simulation, one period of an orbit). They build figures with
`matplotlib.figure.Figure` rather than `pyplot`, so they work under any backend
(including `Agg`, headless) and leave no global figure state behind; pass your own
axes to draw into a `pyplot` figure instead.

No numerical module imports this one.
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxtyping import Float
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from . import models


# Colours of the phases by mode name (others cycle through `_EXTRA_COLOURS`).
_MODE_COLOURS = {"flight": "tab:blue", "ground": "tab:orange"}
_EXTRA_COLOURS = ("tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive")
_EVENT_STYLE = {
    "touchdown": dict(marker="v", color="tab:red", label="touchdown"),
    "liftoff": dict(marker="^", color="tab:green", label="lift-off"),
}

_TEXT_BOX = dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none")


@dataclasses.dataclass(frozen=True)
class Trajectory:
    r"""A simulated trajectory as plain NumPy arrays, for plotting and export.

    States are in the hopper's minimal coordinates $x = [z_U, z_L, \dot z_U,
    \dot z_L]$. Only events and phases that occurred are kept (no NaN padding).

    **Arguments:**

    - `t_phase`: sample times of each phase, shape `(P, s)`.
    - `x_phase`: the states at those times, shape `(P, s, 4)`.
    - `phase_modes`: the mode name of each phase (e.g. `"flight"`, `"ground"`).
    - `t_events`: event times, shape `(E,)`.
    - `event_kinds`: the transition name of each event (`"touchdown"`,
      `"liftoff"`).
    - `x_before`, `x_after`: the states just before and after each event, `(E, 4)`.
    - `T_c`, `T_a`: energy lost and kept at each event, `(E,)`, NaN where the event
      has no impact.
    """

    t_phase: Float[np.ndarray, "P s"]
    x_phase: Float[np.ndarray, "P s 4"]
    phase_modes: tuple[str, ...]
    t_events: Float[np.ndarray, " E"]
    event_kinds: tuple[str, ...]
    x_before: Float[np.ndarray, "E 4"]
    x_after: Float[np.ndarray, "E 4"]
    T_c: Float[np.ndarray, " E"]
    T_a: Float[np.ndarray, " E"]

    @classmethod
    def from_solution(
        cls,
        solution: Any,
        system: Any,
        *,
        to_minimal: Callable[[np.ndarray], Any] | None = None,
    ) -> "Trajectory":
        r"""Read a [`hybrax.HybridSolution`][] into a `Trajectory`.

        **Arguments:**

        - `solution`: the result of [`hybrax.simulate`][] (unbatched), run with
          `n_save > 0` to have phase samples.
        - `system`: the [`hybrax.HybridSystem`][] it came from (for the mode and
          transition names).
        - `to_minimal`: maps states (batched on the last axis) to minimal
          coordinates, e.g. [`hybrax.models.to_minimal`][] for the constrained
          hopper; default identity.

        **Returns:** a `Trajectory` holding the `solution.n_events` events that
        occurred and every phase with finite samples (a phase cut short by a failure
        is kept up to where the solver stopped).
        """
        convert = (lambda x: x) if to_minimal is None else to_minimal

        def minimal(x):
            return np.asarray(convert(np.asarray(x)), dtype=float)

        n = int(np.asarray(solution.n_events))
        modes = np.asarray(solution.modes)
        t_phase = np.asarray(solution.t_phase, dtype=float)
        keep = [
            k
            for k in range(t_phase.shape[0])
            if t_phase.shape[1] > 0 and np.any(np.isfinite(t_phase[k]))
        ]
        # A phase cut short by a failure is recorded with mode -1; it ran in the mode
        # where the simulation stopped.
        mode_names = [mode.name for mode in system.modes]
        mode_final = int(np.asarray(solution.mode_final))
        phase_modes = [
            mode_names[int(modes[k]) if modes[k] >= 0 else mode_final] for k in keep
        ]
        transitions = np.asarray(solution.transitions)[:n]
        names = [tr.name for tr in system.transitions]
        if keep:
            x_phase = minimal(np.asarray(solution.x_phase)[keep])
        else:
            x_phase = np.zeros((0, t_phase.shape[1], 4))
        return cls(
            t_phase=t_phase[keep],
            x_phase=x_phase,
            phase_modes=tuple(phase_modes),
            t_events=np.asarray(solution.t_events, dtype=float)[:n],
            event_kinds=tuple(names[int(i)] for i in transitions),
            x_before=minimal(np.asarray(solution.x_before)[:n]).reshape(n, 4),
            x_after=minimal(np.asarray(solution.x_after)[:n]).reshape(n, 4),
            T_c=np.asarray(solution.T_c, dtype=float)[:n],
            T_a=np.asarray(solution.T_a, dtype=float)[:n],
        )


def _mode_colour(name: str, seen: dict[str, str]) -> str:
    if name not in seen:
        extra = [c for c in _EXTRA_COLOURS if c not in seen.values()]
        seen[name] = _MODE_COLOURS.get(name, extra[0] if extra else "tab:gray")
    return seen[name]


def _events(trajectory: Trajectory, kind: str) -> np.ndarray:
    return np.asarray([k == kind for k in trajectory.event_kinds], dtype=bool)


def _legend(ax: Axes) -> None:
    # An empty trajectory leaves nothing to list (matplotlib would warn).
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")


def _plot_phases(ax: Axes, trajectory: Trajectory, i: int, j: int) -> None:
    """Draw every phase in the plane of state entries `i` (horizontal) and `j`."""
    colours: dict[str, str] = {}
    labelled = set()
    scale = max(float(np.nanmax(np.abs(trajectory.x_phase[..., [i, j]]))), 1.0)
    for x, name in zip(trajectory.x_phase, trajectory.phase_modes):
        horizontal, vertical = x[:, i], x[:, j]
        if not np.any(np.isfinite(horizontal)):
            continue
        # A phase that stays at one point of this plane (the lower mass on the
        # ground) is drawn as a marker; as a line it would be invisible.
        extent = np.nanmax(np.abs(np.diff(horizontal))) + np.nanmax(
            np.abs(np.diff(vertical))
        )
        still = x.shape[0] < 2 or extent <= 1e-9 * scale
        ax.plot(
            horizontal,
            vertical,
            color=_mode_colour(name, colours),
            marker="o" if still else None,
            markersize=7,
            linewidth=1.4,
            label=None if name in labelled else name,
            zorder=2,
        )
        labelled.add(name)


def _plot_event_points(ax: Axes, trajectory: Trajectory, i: int, j: int) -> None:
    x = np.asarray(trajectory.x_phase, dtype=float)
    if x.shape[0] > 0 and np.all(np.isfinite(x[0, 0, [i, j]])):
        ax.plot(
            x[0, 0, i],
            x[0, 0, j],
            linestyle="none",
            marker="o",
            markerfacecolor="none",
            markeredgecolor="k",
            markersize=8,
            label="start",
            zorder=4,
        )
    for kind, style in _EVENT_STYLE.items():
        mask = _events(trajectory, kind)
        if np.any(mask):
            ax.plot(
                trajectory.x_before[mask, i],
                trajectory.x_before[mask, j],
                linestyle="none",
                markersize=7,
                markeredgecolor="k",
                zorder=4,
                **style,
            )


def phase_portraits(
    trajectory: Trajectory,
    params: models.HopperParams,
    *,
    axes: Sequence[Axes] | None = None,
) -> Figure:
    r"""Phase portraits of the hopper's two masses (Zana et al. 2018, Fig. 4).

    Left: the upper mass in the $(z_U, \dot z_U)$ plane, with the lift-off surface
    $\lambda_g = 0$, i.e. the line $z_U = L_0 + (m_L g - d_G \dot z_U)/k$ (see
    [`hybrax.models.liftoff_state`][]). Right: the lower mass in the
    $(z_L, \dot z_L)$ plane, with the touchdown surface $z_L = 0$ and each plastic
    impact $\dot z_L^- \to 0$ drawn as a dashed vertical segment. Phases are
    coloured by mode; the start, touchdown (pre-impact) and lift-off points are
    marked. Switching surfaces are black.

    **Arguments:**

    - `trajectory`: a [`hybrax.plot.Trajectory`][] (or any object with its
      attributes) in minimal coordinates.
    - `params`: the [`hybrax.models.HopperParams`][] of the run.
    - `axes`: two matplotlib `Axes` to draw into; default a new figure.

    **Returns:** the matplotlib `Figure`.

    !!! example

        ```python
        sol = hybrax.simulate(system, x0, params, n_events=6, t_max=50.0, n_save=200)
        traj = hybrax.plot.Trajectory.from_solution(sol, system)
        hybrax.plot.phase_portraits(traj, params).savefig("phase.png")
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
        _plot_phases(ax_upper, trajectory, 0, 2)
        v_U = x_phase[..., 2]
        low, high = float(np.nanmin(v_U)), float(np.nanmax(v_U))
    else:
        low, high = -1.0, 1.0
    pad = 0.1 * max(high - low, 1e-3)
    v_line = np.linspace(low - pad, high + pad, 2)
    z_line = np.asarray(models.liftoff_state(v_line, params))[0]
    ax_upper.plot(
        z_line, v_line, color="k", linewidth=1.2, label=r"lift-off $\lambda_g = 0$"
    )
    _plot_event_points(ax_upper, trajectory, 0, 2)
    ax_upper.set_xlabel(r"$z_U$ [m]")
    ax_upper.set_ylabel(r"$\dot z_U$ [m/s]")
    ax_upper.set_title("upper mass")

    # Lower mass, the touchdown surface and the impact jumps.
    if have_data:
        _plot_phases(ax_lower, trajectory, 1, 3)
    ax_lower.axvline(0.0, color="k", linewidth=1.2, label=r"touchdown $z_L = 0$")
    touchdown = _events(trajectory, "touchdown")
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
    _plot_event_points(ax_lower, trajectory, 1, 3)
    ax_lower.set_xlabel(r"$z_L$ [m]")
    ax_lower.set_ylabel(r"$\dot z_L$ [m/s]")
    ax_lower.set_title("lower mass")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        _legend(ax)
    return fig


def energy_history(
    trajectory: Trajectory,
    params: models.HopperParams,
    *,
    ax: Axes | None = None,
    annotate: bool = True,
) -> Figure:
    r"""Kinetic, potential and total energy over time (Zana et al. 2018, Fig. 5).

    $T = \tfrac12(m_U\dot z_U^2 + m_L\dot z_L^2)$ and
    $V = g(m_U z_U + m_L z_L) + \tfrac12 k(z_U - z_L - L_0)^2$ from
    [`hybrax.models.energies`][]. At each touchdown the plastic impact removes
    $T_c = \tfrac12 m_L (\dot z_L^-)^2$ from the total (a red arrow down the drop)
    and keeps $T_a = \tfrac12 m_U (\dot z_U^-)^2$ as kinetic energy (a purple arrow
    from 0 up to the kinetic energy after the impact).

    **Arguments:**

    - `trajectory`: a [`hybrax.plot.Trajectory`][] (or any object with its
      attributes) in minimal coordinates.
    - `params`: the [`hybrax.models.HopperParams`][] of the run.
    - `ax`: a matplotlib `Axes` to draw into; default a new figure.
    - `annotate`: whether to mark $T_c$ and $T_a$ at the touchdowns.

    **Returns:** the matplotlib `Figure`.
    """
    if ax is None:
        fig = Figure(figsize=(10.0, 4.8), layout="constrained")
        ax = fig.subplots()
    else:
        fig = ax.get_figure()
    t = np.asarray(trajectory.t_phase, dtype=float).reshape(-1)
    x = np.asarray(trajectory.x_phase, dtype=float).reshape(-1, 4)
    if x.shape[0] > 0:
        # Consecutive phases share their boundary time, so the concatenated curves
        # show each impact's loss as a vertical drop.
        kinetic, potential, total = (np.asarray(e) for e in models.energies(x, params))
        ax.plot(t, kinetic, color="tab:green", label="kinetic $T$")
        ax.plot(t, potential, color="tab:blue", label="potential $V$")
        ax.plot(t, total, color="k", label="total $T + V$")
    if annotate:
        touchdown = np.flatnonzero(_events(trajectory, "touchdown"))
        for k, index in enumerate(touchdown):
            t_event = float(trajectory.t_events[index])
            T_c = float(trajectory.T_c[index])
            T_a = float(trajectory.T_a[index])
            if not (np.isfinite(T_c) and np.isfinite(T_a)):
                continue
            before = float(
                np.asarray(models.energies(trajectory.x_before[index], params)[2])
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
                xy=(t_event, before),
                xytext=(4, 5),
                textcoords="offset points",
                color="tab:red",
                fontsize="small",
                bbox=_TEXT_BOX,
            )
            ax.annotate(
                "",
                xy=(t_event, T_a),
                xytext=(t_event, 0.0),
                arrowprops=dict(arrow, color="tab:purple"),
            )
            ax.annotate(
                f"$T_a$ = {T_a:.3g} J",
                xy=(t_event, 0.5 * T_a),
                xytext=(-4, 0),
                textcoords="offset points",
                color="tab:purple",
                fontsize="small",
                horizontalalignment="right",
                verticalalignment="center",
                bbox=_TEXT_BOX,
            )
            if k == 0:
                ax.plot([], [], color="tab:red", label="$T_c$: lost at touchdown")
                ax.plot([], [], color="tab:purple", label="$T_a$: kept at touchdown")
    ax.set_xlabel("$t$ [s]")
    ax.set_ylabel("energy [J]")
    ax.grid(True, alpha=0.3)
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
    mask = _events(trajectory, kind)
    return np.asarray(trajectory.x_before, dtype=float).reshape(-1, 4)[mask]


def orbit_figure(
    orbit: Trajectory,
    params: models.HopperParams,
    *,
    perturbed: Sequence[Trajectory] = (),
    labels: Sequence[str] | None = None,
) -> Figure:
    r"""A periodic orbit and perturbed trajectories near it in the
    $(z_U, z_L, \dot z_U)$ subspace (Zana et al. 2018, Fig. 3).

    Left: a 3-D view with the foot height $z_L$ upwards, so that the touchdown
    surface $z_L = 0$ is the grey floor; on it lies the lift-off surface
    $\lambda_g = 0$, the line $z_U = L_0 + (m_L g - d_G\dot z_U)/k$ (see
    [`hybrax.models.liftoff_state`][]). Right: the view from above, the projection
    onto the $(z_U, \dot z_U)$ plane. The orbit is black, each perturbed trajectory
    has its own colour; the points where a curve meets a switching surface are
    marked (touchdown, pre-impact: down triangle; lift-off: up triangle) and each
    perturbed start by an open circle. The plastic impact changes only $\dot z_L$,
    so a touchdown is one point in this subspace.

    **Arguments:**

    - `orbit`: one period of the orbit as a [`hybrax.plot.Trajectory`][] (plain
      NumPy arrays; any object with its attributes will do) in minimal
      coordinates $[z_U, z_L, \dot z_U, \dot z_L]$.
    - `params`: the [`hybrax.models.HopperParams`][] of the orbit.
    - `perturbed`: trajectories started near the orbit, as `Trajectory`s.
    - `labels`: a legend entry per perturbed trajectory; default
      `"perturbed 1"`, ...

    **Returns:** the matplotlib `Figure`, its axes the 3-D view and the projection
    (which holds the legend entries; the figure legend lists them below both).

    **Raises:** `ValueError` if `labels` does not match `perturbed`.

    !!! example

        ```python
        sol = hybrax.simulate(system, orbit.state, params, n_events=2,
                              t_max=10.0, mode0="flight", n_save=400)
        traj = hybrax.plot.Trajectory.from_solution(sol, system)
        hybrax.plot.orbit_figure(traj, params).savefig("orbit.png")
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
    z_line = np.asarray(models.liftoff_state(v_line, params))[0]
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

    ax3.set_xlabel(r"$z_U$ [m]")
    ax3.set_ylabel(r"$\dot z_U$ [m/s]")
    ax3.zaxis.set_rotate_label(False)
    ax3.set_zlabel(r"$z_L$ [m]", rotation=90)
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
    fig.legend(handles, names, loc="outside lower center", ncols=4, fontsize="small")
    return fig


# ---------------------------------------------------------------------------
# Branches of periodic orbits (continuation)
# ---------------------------------------------------------------------------

_BRANCH_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")


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


def branch_figure(
    parameter: Float[np.ndarray, " N"],
    curves: dict[str, Float[np.ndarray, " N"]],
    stable: np.ndarray,
    *,
    folds: Sequence[int] = (),
    period_doublings: Sequence[int] = (),
    flagged: np.ndarray | None = None,
    flagged_label: str = "flagged",
    reference_lines: Sequence[float] = (),
    xlabel: str = r"$\lambda$",
    ylabel: str = "",
    title: str = "",
    ax: Axes | None = None,
) -> Figure:
    r"""Quantities along a branch of periodic orbits against the continuation
    parameter, in the style of bifurcation diagrams: stable orbits solid, unstable
    ones dashed, folds and period doublings marked (Zana et al. 2018, Figs. 6-9).

    **Arguments:**

    - `parameter`: the parameter value of each point, in the order followed (a
      [`hybrax.Branch`][]'s `parameter`).
    - `curves`: label $\to$ one value per point; each curve gets its colour.
    - `stable`: whether each orbit is stable (`Branch.stable`).
    - `folds`, `period_doublings`: indices of the located special points in the
      arrays (`Fold.index`, `PeriodDoubling.index`); marked with circles and
      squares on every curve.
    - `flagged`: points to mark with small grey crosses, e.g. orbits that are not
      admissible (for the hopper: the ground pulls right after touchdown), with the
      legend entry `flagged_label`.
    - `reference_lines`: values to draw as thin horizontal lines (e.g. $\pm 1$ for
      multipliers).
    - `xlabel`, `ylabel`, `title`: axis labels and title.
    - `ax`: axes to draw into; default a new figure.

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
    for name, indices in (("folds", folds), ("period_doublings", period_doublings)):
        if any(not 0 <= int(i) < n for i in indices):
            raise ValueError(f"`{name}` holds an index outside 0..{n - 1}.")
    if ax is None:
        fig = Figure(figsize=(7.0, 4.8), layout="constrained")
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.get_figure()
    for value in reference_lines:
        ax.axhline(value, color="0.6", linewidth=0.8, zorder=0)
    runs = _stability_runs(stable) if n else []
    for k, (label, y) in enumerate(values.items()):
        colour = _BRANCH_COLOURS[k % len(_BRANCH_COLOURS)]
        ax.plot([], [], color=colour, linewidth=1.8, label=label)
        for first, last, is_stable in runs:
            ax.plot(
                x[first : last + 1],
                y[first : last + 1],
                color=colour,
                linewidth=1.8 if is_stable else 1.3,
                linestyle="-" if is_stable else "--",
            )
        if flagged is not None and np.any(flagged):
            ax.plot(
                x[flagged],
                y[flagged],
                linestyle="none",
                marker="x",
                markersize=3,
                markeredgewidth=0.8,
                color="0.4",
                alpha=0.6,
                zorder=3,
            )
        for indices, marker in ((folds, "o"), (period_doublings, "s")):
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
    style = dict(color="0.3")
    ax.plot([], [], linestyle="-", label="stable", **style)
    ax.plot([], [], linestyle="--", label="unstable", **style)
    if len(folds):
        ax.plot(
            [], [], linestyle="none", marker="o", markerfacecolor="white",
            markeredgecolor="k", label="fold",
        )  # fmt: skip
    if len(period_doublings):
        ax.plot(
            [], [], linestyle="none", marker="s", markerfacecolor="white",
            markeredgecolor="k", label="period doubling",
        )  # fmt: skip
    if flagged is not None and np.any(flagged):
        ax.plot([], [], linestyle="none", marker="x", color="0.45", label=flagged_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def sweep_heatmap(
    x: Float[np.ndarray, " nx"],
    y: Float[np.ndarray, " ny"],
    values: Float[np.ndarray, "nx ny"],
    *,
    xlabel: str,
    ylabel: str,
    colorbar_label: str = r"leading nontrivial $|\nu|$",
    flagged: np.ndarray | None = None,
    flagged_label: str = "flagged",
    no_orbit_label: str = "no orbit found",
    title: str | None = None,
    level: float = 1.0,
) -> Figure:
    r"""A heat map of a multiplier magnitude over a 2-D parameter grid (e.g. from
    [`hybrax.sweep_orbits`][]), with the stability boundary $|\nu| = 1$ contoured.

    Cells without a value (NaN: no orbit found there) are not coloured: they show
    the hatched grey background, so a missing orbit never reads as a value. The
    colour scale is diverging about `level`: blue below (stable), red above.

    **Arguments:**

    - `x`, `y`: the grid values along each axis (cell centres).
    - `values`: `(len(x), len(y))` magnitudes, NaN where there is no orbit.
    - `xlabel`, `ylabel`, `colorbar_label`, `title`: labels.
    - `flagged`: optional `(len(x), len(y))` booleans marked with a small cross
      (e.g. orbits whose ground would have to pull), labelled `flagged_label`.
    - `no_orbit_label`: the legend entry of the hatched region.
    - `level`: the contoured value (1: the stability boundary).

    **Returns:** the matplotlib `Figure`; its first axes hold the map.

    **Raises:** `ValueError` if the shapes do not match.
    """
    from matplotlib.colors import TwoSlopeNorm
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
    if flagged is not None and np.shape(flagged) != values.shape:
        raise ValueError(
            f"`flagged` must have the shape of `values` {values.shape}; got "
            f"{np.shape(flagged)}."
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
    top = float(np.nanmax(values)) if finite.any() else level
    norm = TwoSlopeNorm(vmin=0.0, vcenter=level, vmax=max(top, 1.25 * level))
    mesh = ax.pcolormesh(
        xe,
        ye,
        np.ma.masked_invalid(values).T,
        cmap="RdYlBu_r",
        norm=norm,
        zorder=1,
    )
    fig.colorbar(mesh, ax=ax, label=colorbar_label)
    handles = [Patch(label=no_orbit_label, **hatch_style)]
    # Contour only where the level is crossed (matplotlib warns otherwise).
    if finite.any() and np.nanmin(values) < level < np.nanmax(values):
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
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize="small")
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
    - `xlabel`, `ylabel`, `title`: labels.
    """
    fig = Figure(figsize=(6.4, 5.0), layout="constrained")
    ax = fig.add_subplot()
    finite = np.isfinite(objective)
    if finite.any():
        # The penalties span decades: the map shows log10 of the objective.
        z = np.log10(np.maximum(np.where(finite, objective, np.nan), 1e-12))
        contours = ax.contourf(x, y, z.T, levels=25, cmap="viridis")
        fig.colorbar(contours, ax=ax, label=r"$\log_{10}$ objective")
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
    evaluation of a tuning run, for more than two varied parameters."""
    fig = Figure(figsize=(6.4, 4.0), layout="constrained")
    ax = fig.add_subplot()
    steps = np.arange(len(objective))
    ax.semilogy(steps, np.abs(objective), ".-", label="objective")
    ax.set_xlabel("evaluation")
    ax.set_ylabel("objective")
    twin = ax.twinx()
    twin.plot(steps, spectral_radius, ".-", color="tab:orange", label=r"$\rho$")
    twin.axhline(1.0, color="0.5", lw=0.8, ls=":")
    twin.set_ylabel(r"spectral radius $\rho$")
    if title:
        ax.set_title(title)
    return fig
