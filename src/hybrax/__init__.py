"""hybrax: differentiable simulation and stability analysis of hybrid mechanical
systems in JAX.

The public names below are imported on first use (PEP 562), so that `import hybrax`
loads neither JAX nor equinox: the command line answers `--help` and rejects bad
arguments without them, and XLA's options (below) are in place before JAX starts a
backend. Type checkers and documentation see the plain re-exports of the
`TYPE_CHECKING` block.

Importing hybrax sets XLA's CPU options so that a solver's loop compiles into one
kernel instead of one call per operation (see `hybrax._xla_cpu`), except where
`XLA_FLAGS` sets them already; they apply when hybrax is imported before the
process's first JAX computation."""

import importlib
import importlib.metadata
from typing import TYPE_CHECKING

from ._xla_cpu import configure_xla_cpu


configure_xla_cpu()

if TYPE_CHECKING:
    from . import models as models, plot as plot
    from ._archive import load as load, save as save
    from ._basin import (
        BASIN_OUTCOMES as BASIN_OUTCOMES,
        Basin as Basin,
        basin as basin,
    )
    from ._choices import (
        ContinuationMethod as ContinuationMethod,
        GradientMode as GradientMode,
        ShootingJacobian as ShootingJacobian,
        SweepOrder as SweepOrder,
    )
    from ._compile import (
        clear_caches as clear_caches,
        enable_compilation_cache as enable_compilation_cache,
    )
    from ._continuation import (
        CASCADE_ENDS as CASCADE_ENDS,
        BifurcationCurve as BifurcationCurve,
        Branch as Branch,
        Cascade as Cascade,
        CascadeSwitch as CascadeSwitch,
        ContinuationSettings as ContinuationSettings,
        SolutionBranch as SolutionBranch,
        SpecialPoint as SpecialPoint,
        branch_quantities as branch_quantities,
        continue_bifurcation_curve as continue_bifurcation_curve,
        continue_cascade as continue_cascade,
        continue_fixed_points as continue_fixed_points,
        continue_orbit_curve as continue_orbit_curve,
        continue_orbits as continue_orbits,
        continue_zeros as continue_zeros,
        period_doubled_section as period_doubled_section,
    )
    from ._continuation_parameter import (
        AbstractParameter as AbstractParameter,
        FieldParameter as FieldParameter,
        FunctionParameter as FunctionParameter,
    )
    from ._control import (
        bezier as bezier,
        bezier_rate as bezier_rate,
        saturate as saturate,
        virtual_constraint_torques as virtual_constraint_torques,
    )
    from ._first_passage import (
        FirstPassageMesh as FirstPassageMesh,
        FirstPassageWalks as FirstPassageWalks,
        ReachableMesh as ReachableMesh,
        first_passage_mesh as first_passage_mesh,
        first_passage_walks as first_passage_walks,
    )
    from ._homotopy import (
        Homotopy as Homotopy,
        OrbitSearch as OrbitSearch,
        StraightPath as StraightPath,
        continue_to_params as continue_to_params,
        find_periodic_orbit_or_follow as find_periodic_orbit_or_follow,
    )
    from ._hybrid import (
        AbstractReset as AbstractReset,
        Clearance as Clearance,
        ContactForceGuard as ContactForceGuard,
        Extremum as Extremum,
        HybridSystem as HybridSystem,
        ImpactRelabel as ImpactRelabel,
        Integral as Integral,
        MechanicalConstraints as MechanicalConstraints,
        MechanicalVectorField as MechanicalVectorField,
        Mode as Mode,
        PlasticImpact as PlasticImpact,
        Transition as Transition,
        identity_reset as identity_reset,
        mechanical_mode as mechanical_mode,
    )
    from ._impact_energy import (
        ImpactEnergyModes as ImpactEnergyModes,
        impact_energy_modes as impact_energy_modes,
    )
    from ._mechanics import (
        AbstractLagrangianModel as AbstractLagrangianModel,
        ImpactResult as ImpactResult,
        LagrangianModel as LagrangianModel,
        admissible_projector as admissible_projector,
        constrained_accelerations as constrained_accelerations,
        constraint_jacobian as constraint_jacobian,
        convective_term as convective_term,
        critical_friction as critical_friction,
        kinetic_energy as kinetic_energy,
        plastic_impact as plastic_impact,
        point_velocity as point_velocity,
    )
    from ._misc import (
        canonical_params as canonical_params,
    )
    from ._model import (
        ContinuationDefaults as ContinuationDefaults,
        FigureSpec as FigureSpec,
        ModelBundle as ModelBundle,
        ModelForm as ModelForm,
        ModelPresentation as ModelPresentation,
        Quantity as Quantity,
        TuneDefaults as TuneDefaults,
    )
    from ._params import (
        FRACTION as FRACTION,
        NONNEGATIVE as NONNEGATIVE,
        POSITIVE as POSITIVE,
        AbstractParams as AbstractParams,
        Bound as Bound,
        between as between,
        parameter_field as parameter_field,
        parameter_table as parameter_table,
    )
    from ._periodic import (
        FloquetAnalysis as FloquetAnalysis,
        PeriodicOrbit as PeriodicOrbit,
        PoincareSection as PoincareSection,
        ShootingSafeguard as ShootingSafeguard,
        ShootingStart as ShootingStart,
        constraint_tangent_basis as constraint_tangent_basis,
        find_periodic_orbit as find_periodic_orbit,
        floquet_multipliers as floquet_multipliers,
        monodromy as monodromy,
        poincare_map as poincare_map,
    )
    from ._robustness import (
        Disturbance as Disturbance,
        GaitSensitivity as GaitSensitivity,
        disturbed_step as disturbed_step,
        gait_sensitivity as gait_sensitivity,
    )
    from ._saltation import (
        phase_fundamental_matrix as phase_fundamental_matrix,
        saltation_matrix as saltation_matrix,
    )
    from ._settings import (
        Settings as Settings,
        Shooting as Shooting,
    )
    from ._simulate import (
        BoundaryViolation as BoundaryViolation,
        boundary_violations as boundary_violations,
        simulate as simulate,
    )
    from ._solution import (
        RESULTS as RESULTS,
        STATUS_NAMES as STATUS_NAMES,
        HybridSolution as HybridSolution,
        Interrupted as Interrupted,
        status_code as status_code,
        status_message as status_message,
        status_name as status_name,
    )
    from ._sweep import (
        SWEEP_STRATEGIES as SWEEP_STRATEGIES,
        OrbitSweep as OrbitSweep,
        SweepSettings as SweepSettings,
        process_slice as process_slice,
        sweep as sweep,
        sweep_orbits as sweep_orbits,
    )
    from ._tune import (
        QuantityTarget as QuantityTarget,
        TuneResult as TuneResult,
        TuneSettings as TuneSettings,
        TuneStep as TuneStep,
        tune as tune,
    )

# Public name -> the module that defines it.
_EXPORTS = {
    "ContinuationMethod": "._choices",
    "GradientMode": "._choices",
    "ShootingJacobian": "._choices",
    "SweepOrder": "._choices",
    "load": "._archive",
    "save": "._archive",
    "AbstractParameter": "._continuation_parameter",
    "BASIN_OUTCOMES": "._basin",
    "Basin": "._basin",
    "basin": "._basin",
    "BifurcationCurve": "._continuation",
    "Branch": "._continuation",
    "branch_quantities": "._continuation",
    "continue_bifurcation_curve": "._continuation",
    "continue_orbit_curve": "._continuation",
    "ContinuationSettings": "._continuation",
    "FieldParameter": "._continuation_parameter",
    "FunctionParameter": "._continuation_parameter",
    "SolutionBranch": "._continuation",
    "SpecialPoint": "._continuation",
    "continue_orbits": "._continuation",
    "continue_cascade": "._continuation",
    "CascadeSwitch": "._continuation",
    "Cascade": "._continuation",
    "CASCADE_ENDS": "._continuation",
    "continue_fixed_points": "._continuation",
    "continue_zeros": "._continuation",
    "period_doubled_section": "._continuation",
    "Homotopy": "._homotopy",
    "StraightPath": "._homotopy",
    "continue_to_params": "._homotopy",
    "find_periodic_orbit_or_follow": "._homotopy",
    "OrbitSearch": "._homotopy",
    "AbstractReset": "._hybrid",
    "Clearance": "._hybrid",
    "ContactForceGuard": "._hybrid",
    "Extremum": "._hybrid",
    "HybridSystem": "._hybrid",
    "MechanicalConstraints": "._hybrid",
    "MechanicalVectorField": "._hybrid",
    "Mode": "._hybrid",
    "ImpactRelabel": "._hybrid",
    "Integral": "._hybrid",
    "PlasticImpact": "._hybrid",
    "Transition": "._hybrid",
    "identity_reset": "._hybrid",
    "mechanical_mode": "._hybrid",
    "ImpactEnergyModes": "._impact_energy",
    "impact_energy_modes": "._impact_energy",
    "AbstractLagrangianModel": "._mechanics",
    "ImpactResult": "._mechanics",
    "LagrangianModel": "._mechanics",
    "admissible_projector": "._mechanics",
    "constrained_accelerations": "._mechanics",
    "constraint_jacobian": "._mechanics",
    "convective_term": "._mechanics",
    "critical_friction": "._mechanics",
    "kinetic_energy": "._mechanics",
    "plastic_impact": "._mechanics",
    "point_velocity": "._mechanics",
    "bezier": "._control",
    "bezier_rate": "._control",
    "saturate": "._control",
    "virtual_constraint_torques": "._control",
    "canonical_params": "._misc",
    "enable_compilation_cache": "._compile",
    "clear_caches": "._compile",
    "ContinuationDefaults": "._model",
    "FigureSpec": "._model",
    "TuneDefaults": "._model",
    "ModelBundle": "._model",
    "ModelForm": "._model",
    "ModelPresentation": "._model",
    "Quantity": "._model",
    "FRACTION": "._params",
    "NONNEGATIVE": "._params",
    "POSITIVE": "._params",
    "AbstractParams": "._params",
    "Bound": "._params",
    "between": "._params",
    "parameter_field": "._params",
    "parameter_table": "._params",
    "FloquetAnalysis": "._periodic",
    "PeriodicOrbit": "._periodic",
    "PoincareSection": "._periodic",
    "ShootingSafeguard": "._periodic",
    "ShootingStart": "._periodic",
    "constraint_tangent_basis": "._periodic",
    "find_periodic_orbit": "._periodic",
    "floquet_multipliers": "._periodic",
    "monodromy": "._periodic",
    "poincare_map": "._periodic",
    "FirstPassageMesh": "._first_passage",
    "FirstPassageWalks": "._first_passage",
    "ReachableMesh": "._first_passage",
    "first_passage_mesh": "._first_passage",
    "first_passage_walks": "._first_passage",
    "Disturbance": "._robustness",
    "GaitSensitivity": "._robustness",
    "disturbed_step": "._robustness",
    "gait_sensitivity": "._robustness",
    "phase_fundamental_matrix": "._saltation",
    "saltation_matrix": "._saltation",
    "Settings": "._settings",
    "Shooting": "._settings",
    "simulate": "._simulate",
    "BoundaryViolation": "._simulate",
    "boundary_violations": "._simulate",
    "RESULTS": "._solution",
    "STATUS_NAMES": "._solution",
    "HybridSolution": "._solution",
    "Interrupted": "._solution",
    "status_code": "._solution",
    "status_message": "._solution",
    "status_name": "._solution",
    "OrbitSweep": "._sweep",
    "SWEEP_STRATEGIES": "._sweep",
    "SweepSettings": "._sweep",
    "process_slice": "._sweep",
    "QuantityTarget": "._tune",
    "TuneResult": "._tune",
    "TuneSettings": "._tune",
    "TuneStep": "._tune",
    "tune": "._tune",
    "sweep": "._sweep",
    "sweep_orbits": "._sweep",
}
_SUBMODULES = ("models", "plot")


# Removed public names -> what replaces them (see the migration page).
_REMOVED = {
    "continue_branch": "hybrax.continue_orbits (same arguments; `bounds=(a, b)` "
    "is `stop=(a, b)`, `max_period` a field of ContinuationSettings)",
    "continue_branch_period_doubled": "hybrax.continue_orbits(system, section, "
    "point, params, parameter, stop=...) with the period doubling as `u0` "
    "(`amplitude` is ContinuationSettings.switch_amplitude)",
    "continue_period_doubled": "hybrax.continue_fixed_points(fn, point, "
    "args=args, iterates=branch.iterates, stop=...) with the period doubling as "
    "`u0` (`amplitude` is ContinuationSettings.switch_amplitude)",
}


def __getattr__(name: str):
    if name in _REMOVED:
        raise AttributeError(
            f"hybrax.{name} was removed: use {_REMOVED[name]}. The "
            "documentation's migration page maps every removed call."
        )
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'hybrax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, *_SUBMODULES])


__all__ = sorted([*_EXPORTS, *_SUBMODULES])
__version__ = importlib.metadata.version("hybrax")
