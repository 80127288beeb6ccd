"""hybrax: differentiable simulation and stability analysis of hybrid mechanical
systems in JAX."""

import importlib.metadata

from . import models as models
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
from ._simulate import (
    RESULTS as RESULTS,
    HybridSolution as HybridSolution,
    simulate as simulate,
    status_message as status_message,
    status_name as status_name,
)


__version__ = importlib.metadata.version("hybrax")
