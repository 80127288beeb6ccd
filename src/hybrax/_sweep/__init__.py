"""Batched work: the generic executor ([`hybrax.sweep`][]: chunks, devices,
processes) in `executor`, and periodic orbits over a batch of parameters
([`hybrax.sweep_orbits`][]) in `orbits`, scheduled in rounds by `rounds`. Each
element carries its own status, so a failed element spoils no other.
"""

from .executor import (
    host_cores as host_cores,
    process_slice as process_slice,
    sorted_multipliers_batch as sorted_multipliers_batch,
    sweep as sweep,
)
from .orbits import (
    SWEEP_STRATEGIES as SWEEP_STRATEGIES,
    OrbitSweep as OrbitSweep,
    SweepSettings as SweepSettings,
    sweep_orbits as sweep_orbits,
)
