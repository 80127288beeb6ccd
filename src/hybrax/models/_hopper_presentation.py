"""The hopper's presentation (its `hybrax.ModelPresentation` entries) and branch
guesses for the command line: summaries, notes and
the paper's figures (Zana et al. 2018, Figs. 3-9). Matplotlib is imported only when
a figure is drawn."""

import math
import pathlib
from typing import Any

import jax
import numpy as np

from . import hopper


def simulate_figures(trajectory, params, out: pathlib.Path) -> list[pathlib.Path]:
    """`phase_portraits.png` (Fig. 4) and `energy.png` (Fig. 5)."""
    from .. import plot
    from . import hopper_figures

    params = jax.device_get(params)  # NumPy: no program per operation

    figures = {
        "phase_portraits.png": hopper_figures.phase_portraits(trajectory, params),
        "energy.png": hopper_figures.energy_history(trajectory, params),
    }
    return plot.save_figures(figures, out)


def orbit_figures(
    cycle, perturbed, labels, trajectory, params, out: pathlib.Path
) -> list[pathlib.Path]:
    """`orbit.png` (one period and perturbed trajectories, Fig. 3 of the paper),
    then the figures of `simulate_figures` for `trajectory` (several periods)."""
    from .. import plot
    from . import hopper_figures

    params = jax.device_get(params)  # NumPy: no program per operation

    orbit = hopper_figures.orbit_figure(
        cycle, params, perturbed=perturbed, labels=labels
    )
    return plot.save_figures({"orbit.png": orbit}, out) + simulate_figures(
        trajectory, params, out
    )


# Perturbations of the lift-off state for `orbit.png`, in minimal coordinates:
# (state index, size, label). Large on purpose, "for the sake of better
# illustration" as in the paper's Fig. 3.
ORBIT_PERTURBATIONS = (
    (0, 0.01, r"$z_U + 0.01$ m"),
    (2, 0.1, r"$\dot z_U + 0.1$ m/s"),
)


def no_orbit_hint(params) -> str | None:
    if float(params.d_G) >= 0 and float(params.d_F) >= 0:
        return (
            f"with d_G = {float(params.d_G):g} >= 0 the ground damper pumps in no "
            "energy, and the plastic touchdown and the flight damper only take it "
            "out: no hopping orbit exists (the paper's orbits need d_G < 0, e.g. "
            "--set D_G=-0.02)"
        )
    return None


def explain(status, mode, transition, params) -> str | None:
    del transition
    if status == "mode_not_viable" and mode == "flight":
        return (
            "the flight mode is not viable: the foot is pulled back into the ground at "
            f"once (flight damping d_F = {float(params.d_F):g} N s/m pulls the lower "
            "mass down at lift-off)"
        )
    return None


def describe_boundary(kind, mode, value, params) -> str | None:
    """A ground phase that starts past its lift-off guard: the signed guard is
    -lambda_g / (m g) = N / (m g), so the ground's normal force right after
    touchdown is N = guard m g, negative where the ground would have to pull."""
    if kind == "force_reversal" and mode == "ground":
        force = float(value) * float(params.m) * float(params.g)
        return f"the ground pulls, contact force {force:+.1f} N"
    return None


def continuation_limits(branch, summary, params, parameter) -> dict[str, Any]:
    """The limits the paper states: as D_G -> 0-, t_G -> 2 pi sqrt(m_U / k) and the
    multiplier -> 1; T_a / T -> mu as D_G decreases (read at the branch's ends)."""
    if parameter.name != "D_G" or branch.n_points == 0:
        return {}
    near_zero = int(np.argmax(branch.parameter))
    far = int(np.argmax(summary["t_flight"]))
    return {
        "t_p0": 2 * math.pi * math.sqrt(float(params.m_U) / float(params.k)),
        "D_G_nearest_zero": float(branch.parameter[near_zero]),
        "t_ground_nearest_zero": float(summary["t_ground"][near_zero]),
        "period_nearest_zero": float(summary["period"][near_zero]),
        "multiplier_nearest_zero": float(summary["multiplier"][near_zero]),
        "mu": float(params.mu),
        "D_G_longest_flight": float(branch.parameter[far]),
        "t_flight_longest": float(summary["t_flight"][far]),
        "Ta_over_T_longest_flight": float(summary["Ta_over_T"][far]),
        "multiplier_longest_flight": float(summary["multiplier"][far]),
    }


def continuation_figures(branch, summary, params, parameter, out: pathlib.Path):
    """The paper's Figs. 6-9 along the branch."""
    from .. import plot

    x = branch.parameter
    name = parameter.name
    xlabel = {"D_G": r"$D_G$", "D_F": r"$D_F$"}.get(name, name)
    common = dict(
        stable=branch.stable,
        folds=[f.index for f in branch.folds],
        period_doublings=[p.index for p in branch.period_doublings],
        flagged=summary["pulling_after_touchdown"],
        flagged_label="ground pulls after touchdown",
        flag_change_label="ground force at touchdown reverses",
        xlabel=xlabel,
    )
    title = rf"$\mu = {float(params.mu):g}$"
    figures = {
        "fig6_times.png": dict(
            curves={
                r"$t_F$ (flight)": summary["t_flight"],
                r"$t_G$ (ground)": summary["t_ground"],
                r"$t_p$ (period)": summary["period"],
            },
            ylabel="time [s]",
            title=f"flight, ground and total time, {title}",
        ),
        "fig7_multiplier.png": dict(
            curves={r"$\nu$": summary["multiplier"]},
            ylabel="nontrivial Floquet multiplier",
            title=f"relevant multiplier, {title}",
            # -1 (period doubling) only where a multiplier is negative somewhere.
            reference_lines=(1.0, -1.0)
            if np.any(summary["multiplier"] < 0)
            else (1.0,),
        ),
        "fig8_apex.png": dict(
            curves={
                r"apex of $z_U$": summary["apex_upper"],
                r"apex of $z_L$": summary["apex_lower"],
            },
            ylabel="height [m]",
            title=f"apex heights in flight, {title}",
        ),
        "fig9_energy.png": dict(
            curves={
                r"$T_c / T$ (lost)": summary["Tc_over_T"],
                r"$T_a / T$ (kept)": summary["Ta_over_T"],
            },
            ylabel="share of kinetic energy at touchdown",
            title=f"energy split at touchdown, {title}",
            # Both masses landing at one speed keep the share mu = m_U / m.
            reference_lines=(
                (float(params.mu), r"$\mu$: $T_a/T$ if both masses land at one speed"),
            ),
        ),
    }
    return plot.save_figures(
        {
            name: plot.branch_figure(x, **spec, **common)
            for name, spec in figures.items()
        },
        out,
    )


def _bundle():
    """The hopper as the commands read it: [`hybrax.models.hopper`][]'s
    mathematics with this module's presentation."""
    from .._model import (
        ContinuationDefaults,
        ModelBundle,
        ModelForm,
        ModelPresentation,
    )

    return ModelBundle(
        name="hopper",
        description="two-mass vertical hopper (Zana et al. 2018, Math. Comput. Appl.)",
        parameters=hopper.PARAMETERS,
        make_params=hopper.make_params,
        parameter=hopper.parameter,
        state_names=("z_U", "z_L", "v_U", "v_L"),
        default_state=hopper.default_state,
        forms={
            "minimal": ModelForm(
                lambda: hopper.minimal()[0], lambda: hopper.section("minimal")
            ),
            "constrained": ModelForm(
                lambda: hopper.constrained()[0],
                lambda: hopper.section("constrained"),
                hopper.to_constrained,
                hopper.to_minimal,
            ),
        },
        orbit_guess=hopper.orbit_guess,
        branch_guesses=hopper.branch_guesses,
        unknown_names=("z_U", "v_U"),
        quantities=hopper.ORBIT_QUANTITIES,
        disturbances={"height": hopper.height_disturbance()},
        gait_indicators=("period", "apex_upper"),
        scan_guess=hopper.scan_orbit_guess,
        presentation=ModelPresentation(
            continuation=ContinuationDefaults(
                "D_G", start=-0.001, stop=-0.08, parameter_scale=0.01, max_period=1.5
            ),
            sweep_grids=("mu=0.7:0.95:26", "D_G=-0.07:0:71"),
            labels={
                "mu": r"$\mu = m_U / m$ (dimensionless)",
                "D_G": r"$D_G = d_G / (2\sqrt{k m})$ (dimensionless)",
                "D_F": r"$D_F = d_F / (2\sqrt{k m})$ (dimensionless)",
                "d_G": r"$d_G$ [N s/m]",
                "d_F": r"$d_F$ [N s/m]",
                "k": r"$k$ [N/m]",
                "z_U": r"$z_U$ [m]",
                "z_L": r"$z_L$ [m]",
                "v_U": r"$\dot z_U$ [m/s]",
                "v_L": r"$\dot z_L$ [m/s]",
            },
            simulate_figures=simulate_figures,
            orbit_figures=orbit_figures,
            orbit_perturbations=ORBIT_PERTURBATIONS,
            no_orbit_hint=no_orbit_hint,
            explain=explain,
            describe_boundary=describe_boundary,
            sweep_flag=(
                "pulling_after_touchdown",
                "orbit(s) need a pulling ground right after touchdown (not "
                "admissible; flagged)",
                "ground pulls after touchdown",
            ),
            continuation_limits=continuation_limits,
            continuation_figures=continuation_figures,
        ),
    )
