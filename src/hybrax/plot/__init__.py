r"""Figures of simulated hybrid trajectories (matplotlib only).

The functions here take a [`hybrax.plot.Trajectory`][]: plain NumPy arrays of the
per-phase samples and of the events, so they serve any command that produces phases
and events (a simulation, one period of an orbit). They build figures with
`matplotlib.figure.Figure` rather than `pyplot`, so they work under any backend
(including `Agg`, headless) and leave no global figure state behind; pass your own
axes to draw into a `pyplot` figure instead.

Trajectories and their figures are in `trajectories`, stick figures and
animations in `sticks`, the figures of branches, sweeps and tunings in `results`,
the map of a basin of attraction in `basins`.
No numerical module imports this package.
"""

from .._units import Units as Units
from .basins import basin_map as basin_map
from .results import (
    bifurcation_diagram as bifurcation_diagram,
    branch_figure as branch_figure,
    mfpt_figure as mfpt_figure,
    multiplier_history_figure as multiplier_history_figure,
    sweep_heatmap as sweep_heatmap,
    tune_history_figure as tune_history_figure,
    tune_path_figure as tune_path_figure,
)
from .sticks import (
    StickFrames as StickFrames,
    save_animation as save_animation,
    stick_figure as stick_figure,
    stick_frames as stick_frames,
)
from .trajectories import (
    Trajectory as Trajectory,
    draw_event_points as draw_event_points,
    draw_phases as draw_phases,
    energy_history as energy_history,
    orbit_portrait as orbit_portrait,
    phase_portrait as phase_portrait,
    save_figures as save_figures,
    simulation_figures as simulation_figures,
    time_series as time_series,
)
