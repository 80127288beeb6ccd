r"""The event engine: one phase primitive, one event loop, and `simulate`.

A phase integrates the current mode's vector field with one `diffrax.diffeqsolve`
per stage, stopped by a `diffrax.Event` whose condition is the smallest
sign-normalised guard of the armed transitions leaving the mode (so the earliest
crossing wins whatever order the transitions are listed in), or the arming
condition of a transition not yet armed (an arming instant ends a stage and the
next stage continues the phase). Event times are root-found on the dense
interpolant (optimistix) and differentiated by the implicit function theorem, so
Jacobians of the state after $N$ events include the event-time sensitivity (the
saltation terms).

Before a phase runs, its start is checked: the mode's constraints, a start beyond a
guard, and viability (a guard at zero that the flow leaves at once, read off its
first two time derivatives $\dot h$, $\ddot h$ along the flow); during the phase a
step-size controller catches guard dips inside one step; at each event the
crossing is classified transversal or grazing. The same phase primitive serves the
general loop (`lax.scan` over events, modes chosen at run time) and the declared
event sequence of a periodic orbit (a `lax.scan` whose phase i has the sequence's
i-th mode, or a Python loop over static modes).
"""

from .checks import (
    PhaseStart as PhaseStart,
    check_phase_start as check_phase_start,
)
from .entry import (
    check_domain as check_domain,
    check_state as check_state,
    raise_if_failed as raise_if_failed,
    simulate as simulate,
)
from .events import (
    run_events as run_events,
)
from .observables import (
    BoundaryViolation as BoundaryViolation,
    boundary_violations as boundary_violations,
    clearance_names as clearance_names,
    cycle_admissible as cycle_admissible,
    phase_observable_keys as phase_observable_keys,
    release_names as release_names,
    stacked_observables as stacked_observables,
)
from .phase import (
    PhaseOutcome as PhaseOutcome,
    run_phase as run_phase,
)
from .tables import (
    Tables as Tables,
)
