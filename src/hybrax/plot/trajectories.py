"""Figures of simulated hybrid trajectories: a [`hybrax.plot.Trajectory`][] of
per-phase samples and events, its time series, phase portraits, energy history and
an orbit's portrait.
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxtyping import Float
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._units import Units


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
            label=None if name in labelled else _readable(name),
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
    - `indices`: which state entries (default: all that change; in a figure of
      its own, entries that stay constant over the whole run, such as the
      jumper's coordinates held by its constraints, get no flat panel but one
      line under the panels naming them and their value).
    - `labels`: a label per state entry of the trajectory (default $x_i$).
    - `axes`: draw into these (one per index) instead of a new figure.
    - `units`: the time unit of the axis (default seconds).
    """
    units = Units() if units is None else units
    n = trajectory.x_phase.shape[-1]
    names = _labels(labels, n)
    constant: list[int] = []
    if indices is None:
        indices = list(range(n))
        if axes is None:
            constant = [i for i in indices if _constant(trajectory, i)]
            if len(constant) < n:
                indices = [i for i in indices if i not in constant]
            else:
                constant = []
    indices = [int(i) for i in indices]
    if any(not 0 <= i < n for i in indices):
        raise ValueError(f"`indices` must lie in [0, {n}); got {indices}.")
    own_figure = axes is None
    if axes is None:
        # Many entries (a multibody's angles and rates): two columns, the first
        # half of the entries on the left, the second on the right. Two columns
        # of 5 in, not 6: shown at 80% of a page's 800 px, a 13 in figure's
        # 10 pt tick labels read 6.8 px (11 in: 8.1 px, about a footnote).
        columns = 2 if len(indices) > 6 else 1
        rows = -(-len(indices) // columns)
        width = 7.0 if columns == 1 else 5.0 * columns + 1.0
        fig = Figure(figsize=(width, 1.6 * rows + 1.0), layout="constrained")
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
    if constant:
        entries = [
            f"{names[i]} = {float(trajectory.x_phase[0][0, i]):.6g}" for i in constant
        ]
        # Four to a line, so that the note fits the figure's width.
        held = ",\n".join(
            ", ".join(entries[k : k + 4]) for k in range(0, len(entries), 4)
        )
        # Above the first panel (the layout makes room for an axes title).
        axes[0].set_title(
            f"constant over the run: {held}", fontsize="small", loc="left"
        )
    handles, texts = axes[0].get_legend_handles_labels()
    if own_figure and handles:
        # One legend for the figure (the modes and events are the same in
        # every panel), below the panels (the title is above).
        fig.legend(handles, texts, loc="outside lower center", ncols=min(6, len(texts)))
    elif handles:
        _legend(axes[0])
    return fig


def _constant(trajectory: Trajectory, i: int) -> bool:
    """Whether state entry `i` keeps one value (to 1e-12 of its size) in every
    sample of every phase."""
    values = np.concatenate([np.asarray(x)[:, i] for x in trajectory.x_phase])
    if values.size == 0 or not np.all(np.isfinite(values)):
        return False
    spread = float(values.max() - values.min())
    return spread <= 1e-12 * max(1.0, float(np.abs(values).max()))


def _few_ticks(ax: Axes) -> None:
    """At most about six ticks on the horizontal axis: long labels of a narrow
    range (a trunk angle of -0.175 to 0.025 rad) ran into each other."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=6))


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
    switching surfaces that are lines $x_i = c$ or $x_j = c$ and each event's jump
    as a dashed grey segment (any model).

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
    # Each event's jump (an impact's change of velocity), so the drawing of a
    # run does not break at its events.
    _draw_jumps(ax, trajectory, i, j, color="0.4", lw=0.9, legend=True)
    _event_marks(
        ax,
        trajectory,
        lambda mask: (trajectory.x_before[mask, i], trajectory.x_before[mask, j]),
    )
    ax.set_xlabel(names[i])
    ax.set_ylabel(names[j])
    _few_ticks(ax)
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
    `hybrax.models.hopper_figures.orbit_figure`). Each phase is a line of its
    own and each event's jump from the state before it to the state after it
    a dashed segment (labelled "impact" where the event is one), so a periodic
    orbit's drawing closes.

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
        colour = colours[k % len(colours)]
        label = None if perturbed_labels is None else perturbed_labels[k]
        start = _draw_flows(ax, trajectory, i, j, color=colour, lw=1.0, label=label)
        if start is not None:
            ax.plot(*start, "o", markerfacecolor="none", color=colour)
        _draw_jumps(ax, trajectory, i, j, color=colour, lw=0.9, legend=False)
    _draw_flows(ax, cycle, i, j, color="k", lw=1.8, label="periodic orbit")
    _draw_jumps(ax, cycle, i, j, color="k", lw=1.4, legend=True)
    ax.set_xlabel(names[i])
    ax.set_ylabel(names[j])
    _few_ticks(ax)
    _legend(ax)
    return fig


def _draw_flows(ax: Axes, trajectory: Trajectory, i: int, j: int, *, label, **style):
    """Each phase of `trajectory` as a line of its own in the plane of state
    entries `i` and `j` (one legend entry, `label`), so that no line joins the
    end of a phase to the start of the next across an event; returns the first
    drawn point, or `None` if nothing is finite."""
    start = None
    for x in trajectory.x_phase:
        x = x[np.all(np.isfinite(x), axis=1)]
        if not x.shape[0]:
            continue
        ax.plot(x[:, i], x[:, j], label=label, **style)
        label = None
        if start is None:
            start = (x[0, i], x[0, j])
    return start


def _draw_jumps(ax: Axes, trajectory: Trajectory, i: int, j: int, *, legend, **style):
    r"""Each event's jump from the state before it to the state after it, in the
    plane of state entries `i` and `j`, as a dashed segment of its own: an impact
    changes the velocities at once (and a walker's relabelling its angles), so
    without these an orbit's drawn flow does not close. With `legend`, the first
    impact (an event that reports its energy lost $T_c$) is labelled "impact" and
    the first jump of any other event "jump at" its name. Events that leave the
    plotted pair unchanged (a lift-off) draw nothing."""
    before = np.asarray(trajectory.x_before, dtype=float)[:, [i, j]]
    after = np.asarray(trajectory.x_after, dtype=float)[:, [i, j]]
    finite = np.all(np.isfinite(before), axis=1) & np.all(np.isfinite(after), axis=1)
    if not finite.any():
        return
    scale = max(float(np.max(np.abs(before[finite]))), 1e-300)
    impacts = np.isfinite(np.asarray(trajectory.T_c, dtype=float))
    labelled = set()
    for k in np.nonzero(finite)[0]:
        start, end = before[k], after[k]
        if np.max(np.abs(end - start)) <= 1e-12 * scale:
            continue
        name = (
            "impact"
            if impacts[k]
            else f"jump at {_readable(trajectory.event_kinds[k])}"
        )
        ax.plot(
            [start[0], end[0]],
            [start[1], end[1]],
            linestyle="--",
            label=name if legend and name not in labelled else None,
            zorder=3,
            **style,
        )
        labelled.add(name)


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

    from .._io import write_figure

    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return [write_figure(out / name, figure) for name, figure in figures.items()]
