"""The model zoo: factories returning hybrid systems, with their parameters."""

from .bouncing_ball import (
    BallParams as BallParams,
    bouncing_ball as bouncing_ball,
)
from .hopper import (
    HopperMechanics as HopperMechanics,
    HopperParams as HopperParams,
    constrained_hopper as constrained_hopper,
    default_initial_state as default_initial_state,
    energies as energies,
    ground_force as ground_force,
    ground_multiplier as ground_multiplier,
    hopper_parameter as hopper_parameter,
    hopper_params as hopper_params,
    hopper_section as hopper_section,
    liftoff_state as liftoff_state,
    minimal_hopper as minimal_hopper,
    orbit_guess as orbit_guess,
    scan_orbit_guess as scan_orbit_guess,
    to_constrained as to_constrained,
    to_minimal as to_minimal,
)
from .rimless_wheel import (
    RimlessWheelParams as RimlessWheelParams,
    rimless_wheel as rimless_wheel,
)
