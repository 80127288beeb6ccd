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

from ._units import Units as Units


# Colours of the phases by mode name (others cycle through `_EXTRA_COLOURS`).
_MODE_COLOURS = {"flight": "tab:blue", "ground": "tab:orange"}
_EXTRA_COLOURS = ("tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive")
_EVENT_STYLE = {
    "touchdown": dict(marker="v", color="tab:red", label="touchdown"),
    "liftoff": dict(marker="^", color="tab:green", label="lift-off"),
}


@dataclasses.dataclass(frozen=True)
class Trajectory:
    r"""A simulated trajectory as plain NumPy arrays, for plotting and export.

    States are in the model's minimal coordinates (`n` entries; `to_minimal`
    converts other forms). Only events and phases that occurred are kept (no NaN
    padding).

    **Arguments:**

    - `t_phase`: sample times of each phase, shape `(P, s)`.
    - `x_phase`: the states at those times, shape `(P, s, n)`.
    - `phase_modes`: the mode name of each phase (e.g. `"flight"`, `"ground"`).
    - `t_events`: event times, shape `(E,)`.
    - `event_kinds`: the transition name of each event (e.g. `"touchdown"`).
    - `x_before`, `x_after`: the states just before and after each event, `(E, n)`.
    - `T_c`, `T_a`: energy lost and kept at each event, `(E,)`, NaN where the event
      has no impact.
    """

    t_phase: Float[np.ndarray, "P s"]
    x_phase: Float[np.ndarray, "P s n"]
    phase_modes: tuple[str, ...]
    t_events: Float[np.ndarray, " E"]
    event_kinds: tuple[str, ...]
    x_before: Float[np.ndarray, "E n"]
    x_after: Float[np.ndarray, "E n"]
    T_c: Float[np.ndarray, " E"]
    T_a: Float[np.ndarray, " E"]

    def events_of(self, kind: str) -> np.ndarray:
        """A boolean mask of the events of transition `kind` (e.g.
        `"touchdown"`), shape `(E,)`."""
        return np.asarray([k == kind for k in self.event_kinds], dtype=bool)

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
          coordinates, e.g. [`hybrax.models.hopper.to_minimal`][] for the
          constrained hopper; default identity.

        **Returns:** a `Trajectory` holding the `solution.n_events` events that
        occurred and every phase with finite samples (a phase cut short by a failure
        is kept up to where the solver stopped).
        """
        convert = (lambda x: x) if to_minimal is None else to_minimal

        def minimal(x):
            return np.asarray(convert(np.asarray(x)), dtype=float)

        n = int(np.asarray(solution.n_events))
        n_states = minimal(np.zeros(np.shape(solution.x_before)[-1])).shape[-1]
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
            x_phase = np.zeros((0, t_phase.shape[1], n_states))
        return cls(
            t_phase=t_phase[keep],
            x_phase=x_phase,
            phase_modes=tuple(phase_modes),
            t_events=np.asarray(solution.t_events, dtype=float)[:n],
            event_kinds=tuple(names[int(i)] for i in transitions),
            x_before=minimal(np.asarray(solution.x_before)[:n]).reshape(n, n_states),
            x_after=minimal(np.asarray(solution.x_after)[:n]).reshape(n, n_states),
            T_c=np.asarray(solution.T_c, dtype=float)[:n],
            T_a=np.asarray(solution.T_a, dtype=float)[:n],
        )


def _mode_colour(name: str, seen: dict[str, str]) -> str:
    if name not in seen:
        extra = [c for c in _EXTRA_COLOURS if c not in seen.values()]
        seen[name] = _MODE_COLOURS.get(name, extra[0] if extra else "tab:gray")
    return seen[name]


def _legend(ax: Axes) -> None:
    # An empty trajectory leaves nothing to list (matplotlib would warn).
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")


def draw_phases(ax: Axes, trajectory: Trajectory, i: int, j: int) -> None:
    """Draw every phase of `trajectory` into `ax`, in the plane of state entries
    `i` (horizontal) and `j`, coloured by mode (each mode named once in the
    legend); a phase that stays at one point of the plane is drawn as a marker.
    The building block of [`hybrax.plot.phase_portrait`][], for figures of one's
    own."""
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


def draw_event_points(ax: Axes, trajectory: Trajectory, i: int, j: int) -> None:
    """Mark the start of `trajectory` (an open circle) and the states just before
    its touchdowns and lift-offs in `ax`, in the plane of state entries `i` and
    `j`, for figures of one's own (see [`hybrax.plot.draw_phases`][])."""
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
        mask = trajectory.events_of(kind)
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


def _labels(labels: Sequence[str] | None, n: int) -> list[str]:
    if labels is None:
        return [f"$x_{{{i}}}$" for i in range(n)]
    if len(labels) != n:
        raise ValueError(f"`labels` must have {n} entries; got {len(labels)}.")
    return list(labels)


def _event_marks(ax: Axes, trajectory: Trajectory, values) -> None:
    """Mark each event kind at the states before it: known kinds in their style,
    others cycling through markers."""
    markers = ("D", "s", "P", "X", "*")
    for k, kind in enumerate(dict.fromkeys(trajectory.event_kinds)):
        style = _EVENT_STYLE.get(
            kind,
            dict(marker=markers[k % len(markers)], color="k", label=_readable(kind)),
        )
        mask = trajectory.events_of(kind)
        ax.plot(*values(mask), linestyle="none", markersize=7, zorder=4, **style)


def time_series(
    trajectory: Trajectory,
    indices: Sequence[int] | None = None,
    labels: Sequence[str] | None = None,
    *,
    axes: Sequence[Axes] | None = None,
    units: Units | None = None,
) -> Figure:
    r"""State entries against time, one panel each, phases coloured by mode and
    events marked (any model).

    **Arguments:**

    - `trajectory`: a [`hybrax.plot.Trajectory`][].
    - `indices`: which state entries (default: all).
    - `labels`: a label per state entry of the trajectory (default $x_i$).
    - `axes`: draw into these (one per index) instead of a new figure.
    - `units`: the time unit of the axis (default seconds).
    """
    units = Units() if units is None else units
    n = trajectory.x_phase.shape[-1]
    indices = list(range(n)) if indices is None else [int(i) for i in indices]
    if any(not 0 <= i < n for i in indices):
        raise ValueError(f"`indices` must lie in [0, {n}); got {indices}.")
    names = _labels(labels, n)
    own_figure = axes is None
    if axes is None:
        # Many entries (a multibody's angles and rates): two columns, the first
        # half of the entries on the left, the second on the right.
        columns = 2 if len(indices) > 6 else 1
        rows = -(-len(indices) // columns)
        fig = Figure(
            figsize=(6.0 * columns + 1.0, 1.6 * rows + 1.0), layout="constrained"
        )
        grid = fig.subplots(rows, columns, sharex=True, squeeze=False)
        axes = [grid[k % rows, k // rows] for k in range(len(indices))]
        for ax in grid.ravel()[len(indices) :]:
            ax.set_visible(False)
    else:
        fig = axes[0].figure
    for ax, i in zip(axes, indices):
        colours: dict[str, str] = {}
        labelled = set()
        for t, x, mode in zip(
            trajectory.t_phase, trajectory.x_phase, trajectory.phase_modes
        ):
            ax.plot(
                t,
                x[:, i],
                color=_mode_colour(mode, colours),
                label=None if mode in labelled else _readable(mode),
            )
            labelled.add(mode)
        _event_marks(
            ax,
            trajectory,
            lambda mask: (trajectory.t_events[mask], trajectory.x_before[mask, i]),
        )
        ax.set_ylabel(names[i])
    for ax in axes:
        if ax.get_subplotspec() is None or ax.get_subplotspec().is_last_row():
            ax.set_xlabel(f"t [{units.time}]")
    handles, texts = axes[0].get_legend_handles_labels()
    if own_figure and handles:
        # One legend for the figure (the modes and events are the same in
        # every panel), below the panels (the title is above).
        fig.legend(handles, texts, loc="outside lower center", ncols=min(6, len(texts)))
    elif handles:
        _legend(axes[0])
    return fig


def _readable(name: str) -> str:
    """A mode or transition name for a legend (`single_support` as "single
    support")."""
    return name.replace("_", " ")


def phase_portrait(
    trajectory: Trajectory,
    i: int,
    j: int,
    labels: Sequence[str] | None = None,
    *,
    surfaces: Sequence[tuple[str, float, str]] = (),
    ax: Axes | None = None,
) -> Figure:
    r"""The trajectory in the plane of state entries `i` (horizontal) and `j`, with
    switching surfaces that are lines $x_i = c$ or $x_j = c$ (any model).

    **Arguments:**

    - `trajectory`: a [`hybrax.plot.Trajectory`][].
    - `i`, `j`: the state entries on the axes.
    - `labels`: a label per state entry (default $x_k$).
    - `surfaces`: `(axis, value, label)` with `axis` `"x"` (a vertical line
      $x_i = $ `value`) or `"y"`, e.g. a touchdown height or a heel-strike angle.
    - `ax`: draw into these axes instead of a new figure.
    """
    n = trajectory.x_phase.shape[-1]
    if not (0 <= i < n and 0 <= j < n):
        raise ValueError(f"`i` and `j` must lie in [0, {n}); got {i}, {j}.")
    names = _labels(labels, n)
    if ax is None:
        fig = Figure(figsize=(5.5, 4.5), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    for axis, value, label in surfaces:
        if axis not in ("x", "y"):
            raise ValueError(f"a surface's axis must be 'x' or 'y'; got {axis!r}.")
        line = ax.axvline if axis == "x" else ax.axhline
        line(value, color="k", linewidth=1.2, linestyle=":", label=label)
    draw_phases(ax, trajectory, i, j)
    _event_marks(
        ax,
        trajectory,
        lambda mask: (trajectory.x_before[mask, i], trajectory.x_before[mask, j]),
    )
    ax.set_xlabel(names[i])
    ax.set_ylabel(names[j])
    _legend(ax)
    return fig


def energy_history(
    trajectory: Trajectory,
    energy: Callable[[np.ndarray], tuple[Any, Any]],
    *,
    ax: Axes | None = None,
    units: Units | None = None,
) -> Figure:
    r"""Kinetic, potential and total energy over time on one potential datum,
    with the energy each event removes marked (any model).

    A walker's coordinates move with its stance foot, so `energy` measures the
    potential from a datum that moves at every step. Positions do not jump at an
    event, so the potential does not either: each phase's potential is shifted by
    the constant that makes it continuous across the events before it, which puts
    the whole run on the first phase's datum. The total then drops at an event by
    exactly the kinetic energy the event removes, $T(x^-) - T(x^+)$ (the $T_c$ of
    a plastic impact; nothing for an elastic one), drawn as a red step; below, a
    second panel shows each event's loss on its own scale (a few joules stay
    visible beside a total of hundreds).

    **Arguments:**

    - `trajectory`: a [`hybrax.plot.Trajectory`][].
    - `energy`: `x -> (kinetic, potential)` for states batched on the leading
      axis, in the trajectory's coordinates.
    - `ax`: draw the energies into these axes (without the loss panel) instead
      of a new figure.
    - `units`: the time and energy units of the axes (default SI).
    """
    units = Units() if units is None else units

    def energies(x):
        kinetic, potential = energy(np.asarray(x, dtype=float))
        return np.asarray(kinetic, dtype=float), np.asarray(potential, dtype=float)

    n_events = trajectory.t_events.size
    kinetic_before, potential_before = energies(trajectory.x_before)
    kinetic_after, potential_after = energies(trajectory.x_after)
    # The datum of phase k (phase k ends at event k).
    datum = np.concatenate([[0.0], np.cumsum(potential_before - potential_after)])
    lost = kinetic_before - kinetic_after
    scale = np.nanmax(np.abs(kinetic_before + potential_before), initial=0.0)
    shown = np.isfinite(lost) & (np.abs(lost) > 1e-9 * max(scale, 1e-300))
    if ax is None:
        fig = Figure(figsize=(7.0, 5.2 if shown.any() else 4.0), layout="constrained")
        if shown.any():
            ax, loss_ax = fig.subplots(
                2, 1, sharex=True, height_ratios=(3, 1), squeeze=True
            )
        else:
            ax, loss_ax = fig.add_subplot(), None
    else:
        fig, loss_ax = ax.figure, None
    first = True
    for k, (t, x) in enumerate(zip(trajectory.t_phase, trajectory.x_phase)):
        keep = np.all(np.isfinite(x), axis=1)
        kinetic, potential = energies(x[keep])
        potential = potential + datum[min(k, n_events)]
        for values, colour, label in (
            (kinetic, "tab:blue", "kinetic T"),
            (potential, "tab:orange", "potential V"),
            (kinetic + potential, "k", "total T + V"),
        ):
            ax.plot(t[keep], values, color=colour, label=label if first else None)
        first = False
    if shown.any():
        total = kinetic_before + potential_before + datum[:n_events]
        ax.vlines(
            trajectory.t_events[shown],
            total[shown] - lost[shown],
            total[shown],
            color="tab:red",
            linewidth=2.0,
            label="lost at the event",
        )
        if loss_ax is not None:
            loss_ax.stem(
                trajectory.t_events[shown],
                lost[shown],
                linefmt="tab:red",
                markerfmt="v",
                basefmt=" ",
            )
            loss_ax.set_ylabel(f"lost [{units.energy}]")
            loss_ax.set_ylim(0.0, 1.2 * float(np.max(lost[shown], initial=0.0)))
    ax.set_ylabel(f"energy [{units.energy}]")
    (ax if loss_ax is None else loss_ax).set_xlabel(f"t [{units.time}]")
    _legend(ax)
    return fig


def orbit_portrait(
    cycle: Trajectory,
    i: int,
    j: int,
    labels: Sequence[str] | None = None,
    *,
    perturbed: Sequence[Trajectory] = (),
    perturbed_labels: Sequence[str] | None = None,
    surfaces: Sequence[tuple[str, float, str]] = (),
    ax: Axes | None = None,
) -> Figure:
    r"""One period of an orbit (black) and trajectories started near it
    (coloured, each from an open circle) in the plane of state entries `i` and `j`,
    with switching surfaces (any model; the hopper's 3-D version is
    `hybrax.models.hopper_figures.orbit_figure`).

    **Arguments:**

    - `cycle`: a [`hybrax.plot.Trajectory`][] of one period.
    - `i`, `j`, `labels`, `surfaces`: as for [`hybrax.plot.phase_portrait`][].
    - `perturbed`: trajectories from perturbed starts; `perturbed_labels`: their
      legend entries.
    - `ax`: draw into these axes instead of a new figure.
    """
    n = cycle.x_phase.shape[-1]
    if not (0 <= i < n and 0 <= j < n):
        raise ValueError(f"`i` and `j` must lie in [0, {n}); got {i}, {j}.")
    if perturbed_labels is not None and len(perturbed_labels) != len(perturbed):
        raise ValueError("`perturbed_labels` must have one entry per trajectory.")
    names = _labels(labels, n)
    if ax is None:
        fig = Figure(figsize=(5.5, 4.5), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    for axis, value, label in surfaces:
        line = ax.axvline if axis == "x" else ax.axhline
        line(value, color="k", linewidth=1.0, linestyle=":", label=label)
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:red")
    for k, trajectory in enumerate(perturbed):
        x = trajectory.x_phase.reshape(-1, n)
        x = x[np.all(np.isfinite(x), axis=1)]
        colour = colours[k % len(colours)]
        label = None if perturbed_labels is None else perturbed_labels[k]
        ax.plot(x[:, i], x[:, j], color=colour, linewidth=1.0, label=label)
        ax.plot(x[0, i], x[0, j], "o", markerfacecolor="none", color=colour)
    x = cycle.x_phase.reshape(-1, n)
    x = x[np.all(np.isfinite(x), axis=1)]
    ax.plot(x[:, i], x[:, j], color="k", linewidth=1.8, label="periodic orbit")
    ax.set_xlabel(names[i])
    ax.set_ylabel(names[j])
    _legend(ax)
    return fig


def simulation_figures(
    trajectory: Trajectory,
    labels: Sequence[str],
    energy: Callable[[np.ndarray], tuple[Any, Any]],
    *,
    portrait: tuple[int, int] = (0, 1),
    surfaces: Sequence[tuple[str, float, str]] = (),
    units: Units | None = None,
    title: str | None = None,
) -> dict[str, Figure]:
    """The figures of a simulation of any model, by file name: `time_series.png`,
    `phase_portrait.png` (state entries `portrait`, with `surfaces`) and
    `energy.png` (`energy(x) -> (kinetic, potential)`), in `units`, each titled
    `title` (e.g. the model's name) and what it shows."""
    figures = {
        "time_series.png": time_series(trajectory, labels=labels, units=units),
        "phase_portrait.png": phase_portrait(
            trajectory, *portrait, labels, surfaces=surfaces
        ),
        "energy.png": energy_history(trajectory, energy, units=units),
    }
    if title:
        for name, what in (
            ("time_series.png", "state over time"),
            ("phase_portrait.png", "phase portrait"),
            ("energy.png", "energy"),
        ):
            figures[name].suptitle(f"{title}: {what}")
    return figures


def save_figures(figures: dict[str, Figure], out) -> list:
    """Write each figure to `out / name`, creating `out`, as PNG at 150 dpi (the
    command line's `--format` and `--dpi` change the suffix and resolution);
    returns the paths written (each under a temporary name, then renamed; where
    that fails, in the fallback folder of `hybrax._io.write_file`, whose path is
    returned instead)."""
    import pathlib

    from ._io import write_figure

    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return [write_figure(out / name, figure) for name, figure in figures.items()]


@dataclasses.dataclass(frozen=True)
class StickFrames:
    """Stick-figure drawings of a trajectory at uniform times, in world
    coordinates (see [`hybrax.plot.stick_frames`][]).

    - `times`: the sample times, shape `(F,)`.
    - `polylines`: per frame, the figure's polylines, each an array `(k, 2)` of
      points $(x, y)$ (segments of a body, the ground line).
    """

    times: Float[np.ndarray, " F"]
    polylines: tuple[tuple[np.ndarray, ...], ...]


def _state_at(trajectory: Trajectory, t: float) -> tuple[np.ndarray, int]:
    """The state at time `t` (linear interpolation of the phase samples) and the
    number of events before `t`."""
    for k in range(trajectory.t_phase.shape[0]):
        times = trajectory.t_phase[k]
        finite = np.isfinite(times)
        times, states = times[finite], trajectory.x_phase[k][finite]
        if times.size and t <= times[-1] or k == trajectory.t_phase.shape[0] - 1:
            x = np.array(
                [np.interp(t, times, states[:, i]) for i in range(states.shape[1])]
            )
            return x, int(np.sum(trajectory.t_events < t))
    raise ValueError("the trajectory has no phases to draw.")


def stick_frames(
    trajectory: Trajectory,
    skeleton: Callable[[np.ndarray], Sequence[np.ndarray]],
    *,
    frame_shift: Callable[[np.ndarray], np.ndarray] | None = None,
    frames: int = 60,
    fps: float | None = None,
    max_frames: int = 600,
) -> StickFrames:
    r"""Sample a trajectory as stick figures at uniform times: `frames` of them,
    or with `fps` one every `1/fps` of simulated time (at most `max_frames`;
    beyond, evenly spread over the run).

    **Arguments:**

    - `trajectory`: the [`hybrax.plot.Trajectory`][] (minimal coordinates).
    - `skeleton`: `x -> [polyline, ...]`, the figure of a state in the model's
      frame, each polyline an array `(k, 2)`; the first is the ground (a
      segment of it, which the figures extend across their view).
    - `frame_shift`: for models whose coordinates are relative to a contact that
      moves at events (a walker's stance foot), `x_before -> (dx, dy)`: where the
      new frame's origin lies in the old frame at an event (the landing foot).
      The shifts of the events before a frame add up to its origin.
    - `frames`: the number of frames (without `fps`).
    - `fps`, `max_frames`: frames per unit of simulated time, and their most.
    """
    t_start = float(np.nanmin(trajectory.t_phase))
    t_end = float(np.nanmax(trajectory.t_phase))
    if fps is not None:
        if not fps > 0:
            raise ValueError(f"`fps` must be positive; got {fps}.")
        frames = min(int(max_frames), int((t_end - t_start) * fps) + 1)
    if frames < 1:
        raise ValueError(f"`frames` must be >= 1; got {frames}.")
    shifts = np.zeros((len(trajectory.t_events) + 1, 2))
    if frame_shift is not None:
        for e, x_before in enumerate(trajectory.x_before):
            shifts[e + 1] = shifts[e] + np.asarray(frame_shift(x_before), dtype=float)
    times = np.linspace(t_start, t_end, frames)
    drawings = []
    for t in times:
        x, n_before = _state_at(trajectory, t)
        origin = shifts[n_before]
        drawings.append(
            tuple(np.asarray(line, dtype=float) + origin for line in skeleton(x))
        )
    return StickFrames(times=times, polylines=tuple(drawings))


def _stick_limits(frames: StickFrames) -> tuple[tuple[float, float], ...]:
    """The box around every frame's body (the ground, the first polyline, left
    out: the figures extend it across their view)."""
    points = np.concatenate(
        [line for lines in frames.polylines for line in (lines[1:] or lines)]
    )
    low, high = points.min(axis=0), points.max(axis=0)
    pad = 0.08 * float(np.max(high - low)) + 1e-9
    return (low[0] - pad, high[0] + pad), (low[1] - pad, high[1] + pad)


def _body_centres(frames: StickFrames) -> np.ndarray:
    """Each frame's mean horizontal position of its body (not the ground)."""
    return np.array(
        [
            np.mean(np.concatenate([line[:, 0] for line in (lines[1:] or lines)]))
            for lines in frames.polylines
        ]
    )


def _body_width(frames: StickFrames) -> float:
    """The widest horizontal extent of the body in one frame, and at least a
    third of its height (a body upright on one line still takes room)."""
    widest = 0.0
    for lines in frames.polylines:
        points = np.concatenate(lines[1:] or lines)
        extent = np.ptp(points, axis=0)
        widest = max(widest, float(extent[0]), float(extent[1]) / 3)
    return widest


def _extended_ground(line: np.ndarray, low: float, high: float) -> np.ndarray:
    """A two-point ground segment extended to span `[low, high]` horizontally
    (one fixed line across the view; a vertical or longer polyline as given)."""
    if line.shape[0] != 2 or line[1, 0] == line[0, 0]:
        return line
    slope = (line[1, 1] - line[0, 1]) / (line[1, 0] - line[0, 0])
    xs = np.array([low, high])
    return np.stack([xs, line[0, 1] + slope * (xs - line[0, 0])], axis=1)


_STICK_COLOURS = ("0.45", "tab:blue", "tab:orange", "tab:green", "tab:red")


def _draw_sticks(ax: Axes, lines, alpha: float = 1.0, ground: bool = True) -> list:
    """The polylines of one frame; the first is the ground (thin, grey) unless
    `ground` is False (a body drawn without its ground)."""
    artists = []
    for i, line in enumerate(lines):
        k = i if ground else i + 1  # 0: the ground's style
        (artist,) = ax.plot(
            line[:, 0],
            line[:, 1],
            "-o" if line.shape[0] > 1 and k else "-",
            color=_STICK_COLOURS[k % len(_STICK_COLOURS)],
            alpha=alpha,
            markersize=3,
            linewidth=2 if k else 1,
        )
        artists.append(artist)
    return artists


def stick_figure(
    frames: StickFrames,
    *,
    snapshots: int = 8,
    ax: Axes | None = None,
    units: Units | None = None,
):
    """`snapshots` stick figures of `frames` at evenly spaced times, later ones
    darker (a strobe picture of a step or a jump), on one ground line. Where the
    body travels less than its own width times the snapshots (a jump in place),
    the snapshots are set side by side, each labelled with its time, instead of
    on top of each other."""
    units = Units() if units is None else units
    if ax is None:
        fig = Figure(figsize=(8, 3.8), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    picks = np.round(
        np.linspace(0, len(frames.times) - 1, min(snapshots, len(frames.times)))
    ).astype(int)
    centres = _body_centres(frames)[picks]
    width = _body_width(frames)
    spread = float(np.ptp(centres)) < 0.5 * width * len(picks) and len(picks) > 1
    offsets = 1.3 * width * np.arange(len(picks)) if spread else np.zeros(len(picks))
    (x_low, x_high), (y_low, y_high) = _stick_limits(frames)
    x_high += float(offsets[-1])
    for j, (index, offset) in enumerate(zip(picks, offsets)):
        lines = [line + np.array([offset, 0.0]) for line in frames.polylines[index]]
        if j:
            lines = lines[1:]  # the ground once
        else:
            lines[0] = _extended_ground(lines[0], x_low, x_high)
        _draw_sticks(ax, lines, alpha=0.25 + 0.75 * j / len(picks), ground=not j)
        if spread:
            ax.annotate(
                f"{frames.times[index]:.2f}",
                (centres[j] + offset, y_low),
                horizontalalignment="center",
                verticalalignment="top",
                fontsize="small",
            )
    ax.set(
        xlim=(x_low, x_high),
        ylim=(y_low - (0.08 * (y_high - y_low) if spread else 0.0), y_high),
        aspect="equal",
        xlabel=(
            f"snapshots set side by side; their times [{units.time}] below"
            if spread
            else f"x [{units.length}]"
        ),
        ylabel=f"y [{units.length}]",
    )
    if spread:  # the horizontal positions are the layout's, not the motion's
        ax.set_xticks([])
    ax.set_title(f"t = {frames.times[0]:.2f} to {frames.times[-1]:.2f} {units.time}")
    return fig


def save_animation(
    frames: StickFrames,
    path,
    *,
    fps: float = 20,
    units: Units | None = None,
    follow: bool | None = None,
) -> Any:
    """Write `frames` as an animated GIF (Pillow) at `path`, 800 x 450 pixels,
    `fps` frames per second; returns the path written (see
    [`hybrax.plot.save_figures`][] for where it goes if that fails).

    The view keeps the body's scale. With `follow` (default: where the body
    travels further than the view is wide, as a walker does) the camera moves
    with the body's mean position, smoothed over half a second of frames, and
    the ground (the first polyline) is drawn as one line across the view, so it
    stays in place under the moving body; the title gives the time and the
    camera's position. Frames are drawn without axes: each restores an empty
    background and draws only the ground, the sticks and the title (as
    matplotlib's blitting does on screen)."""
    import pathlib

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    units = Units() if units is None else units
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(8, 4.5), dpi=100)
    canvas = FigureCanvasAgg(fig)
    box = (0.02, 0.02, 0.96, 0.86)
    ax = fig.add_axes(box)
    ax.set_axis_off()
    (x_low, x_high), (y_low, y_high) = _stick_limits(frames)
    ratio = (box[2] * 8) / (box[3] * 4.5)  # the axes' width over their height
    height = y_high - y_low
    view = max(height * ratio, min(x_high - x_low, 3.0 * _body_width(frames)))
    if follow is None:
        follow = x_high - x_low > view
    if not follow:
        view = max(view, x_high - x_low)
    height = view / ratio
    middle = 0.5 * (y_low + y_high)
    ax.set_ylim(middle - 0.5 * height, middle + 0.5 * height)
    centres = _body_centres(frames)
    if follow:
        window = max(1, int(round(0.5 * fps)))
        padded = np.pad(centres, window, mode="edge")
        centres = np.convolve(padded, np.ones(2 * window + 1), "valid") / (
            2 * window + 1
        )
    else:
        centres = np.full(len(frames.times), 0.5 * (x_low + x_high))
    ax.set_xlim(centres[0] - 0.5 * view, centres[0] + 0.5 * view)
    title = fig.text(0.5, 0.95, "", horizontalalignment="center")
    artists = _draw_sticks(ax, frames.polylines[0])
    for artist in (*artists, title):
        artist.set_animated(True)  # left out of the background
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    images = []
    for index, time in enumerate(frames.times):
        canvas.restore_region(background)
        low, high = centres[index] - 0.5 * view, centres[index] + 0.5 * view
        ax.set_xlim(low, high)
        for k, (artist, line) in enumerate(zip(artists, frames.polylines[index])):
            if k == 0:
                line = _extended_ground(line, low - view, high + view)
            artist.set_data(line[:, 0], line[:, 1])
            ax.draw_artist(artist)
        where = f",  x = {centres[index]:.2f} {units.length}" if follow else ""
        title.set_text(f"t = {time:.2f} {units.time}{where}")
        fig.draw_artist(title)
        images.append(Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB"))
    from ._io import write_file

    return write_file(
        path,
        lambda temporary: images[0].save(
            temporary,
            save_all=True,
            append_images=images[1:],
            duration=int(round(1000 / fps)),
            loop=0,
        ),
    )


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


# Marker, abbreviation and name of the special points a branch figure marks.
_SPECIAL_STYLES = (
    ("o", "LP", "fold"),
    ("s", "PD", "period doubling"),
    ("D", "NS", "Neimark-Sacker"),
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
    - `folds`, `period_doublings`, `neimark_sackers`: indices of the located
      special points in the arrays (`SpecialPoint.index` of `branch.folds`,
      `branch.period_doublings`, `branch.neimark_sackers`); marked with circles,
      squares and diamonds on every curve and labelled LP, PD and NS (the usual
      abbreviations). The legend lists only what is drawn.
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
                markeredgewidth=0.6,
                color="0.55",
                alpha=0.5,
                # Under the branch, whose line style (stable or not) stays seen.
                zorder=1,
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
        ax.plot([], [], linestyle="none", marker="x", color="0.45", label=flagged_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
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
    colorbar_label: str = r"leading nontrivial $|\nu|$",
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
    sequential, uncontoured.

    **Arguments:**

    - `x`, `y`: the grid values along each axis (cell centres).
    - `values`: `(len(x), len(y))` magnitudes, NaN where there is no orbit.
    - `xlabel`, `ylabel`, `colorbar_label`, `title`: labels.
    - `flagged`: optional `(len(x), len(y))` booleans marked with a small cross
      (e.g. orbits whose ground would have to pull), labelled `flagged_label`.
    - `no_orbit_label`: the legend entry of the hatched region.
    - `level`: the contoured value (1: the stability boundary), or `None`.
    - `not_run`: optional `(len(x), len(y))` booleans: cells an interrupted sweep
      did not solve (status `not_run`), drawn white, apart from those without an
      orbit.
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
        from matplotlib.colors import ListedColormap

        blank = np.ma.masked_where(~np.asarray(not_run, bool), np.ones(values.shape))
        ax.pcolormesh(xe, ye, blank.T, cmap=ListedColormap(["white"]), zorder=1)
        handles.append(
            Patch(
                facecolor="white",
                edgecolor="0.55",
                linewidth=0.8,
                label="not run (interrupted)",
            )
        )
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
    ax.set_xlabel(r"Re $\nu$")
    ax.set_ylabel(r"Im $\nu$")
    ax.legend(loc="upper right", fontsize="small")
    if title:
        ax.set_title(title)
    return fig


def _blues(values):
    """Colours of the `Blues` colormap (for figures drawn without pyplot)."""
    from matplotlib import colormaps

    return colormaps["Blues"](values)
