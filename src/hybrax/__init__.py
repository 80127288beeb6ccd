"""hybrax: differentiable simulation and stability analysis of hybrid mechanical
systems in JAX."""

import importlib.metadata

from . import models as models
from ._continuation import (
    AbstractParameter as AbstractParameter,
    Branch as Branch,
    FieldParameter as FieldParameter,
    Fold as Fold,
    FunctionParameter as FunctionParameter,
    PeriodDoubling as PeriodDoubling,
    continue_branch as continue_branch,
)
from ._hybrid import (
    ContactForceGuard as ContactForceGuard,
    HybridSystem as HybridSystem,
    MechanicalVectorField as MechanicalVectorField,
    Mode as Mode,
    PlasticImpact as PlasticImpact,
    Transition as Transition,
    identity_reset as identity_reset,
    mechanical_mode as mechanical_mode,
)
from ._mechanics import (
    AbstractLagrangianModel as AbstractLagrangianModel,
    ImpactResult as ImpactResult,
    admissible_projector as admissible_projector,
    constrained_accelerations as constrained_accelerations,
    constraint_jacobian as constraint_jacobian,
    convective_term as convective_term,
    critical_friction as critical_friction,
    kinetic_energy as kinetic_energy,
    plastic_impact as plastic_impact,
)
from ._periodic import (
    FloquetAnalysis as FloquetAnalysis,
    PeriodicOrbit as PeriodicOrbit,
    PoincareSection as PoincareSection,
    constraint_tangent_basis as constraint_tangent_basis,
    find_periodic_orbit as find_periodic_orbit,
    floquet_multipliers as floquet_multipliers,
    monodromy as monodromy,
    poincare_map as poincare_map,
)
from ._saltation import (
    phase_fundamental_matrix as phase_fundamental_matrix,
    saltation_matrix as saltation_matrix,
)
from ._simulate import (
    RESULTS as RESULTS,
    HybridSolution as HybridSolution,
    canonical_params as canonical_params,
    simulate as simulate,
    status_message as status_message,
    status_name as status_name,
)
from ._sweep import (
    OrbitSweep as OrbitSweep,
    process_slice as process_slice,
    sweep as sweep,
    sweep_orbits as sweep_orbits,
)


__version__ = importlib.metadata.version("hybrax")
