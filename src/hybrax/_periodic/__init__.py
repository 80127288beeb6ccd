r"""Periodic orbits by shooting on a Poincaré section, and their stability.

The orbit is a fixed point of the return map $P$ on a section $\Sigma$ given by a
transition (for the hopper: lift-off, Zana et al. 2018 section 3.4). Unknowns are
reduced coordinates $u$ of a chart $x = \chi(u)$ whose image lies on the section's
fixed states by construction; shooting solves $F(u) = \pi(P(\chi(u))) - u = 0$ with
optimistix, and $M = J + I$ with $J = \partial F/\partial u$ is the reduced Jacobian
of Zana et al. (2018), eqs. (32)-(33).

The monodromy matrix $\tilde\Phi$ (eq. 36) is the Jacobian of the flow over the
fixed duration of one period, started on the section. It is computed two ways:

- autodiff through the composite flow with its root-found event times,
  $\tilde\Phi = \partial x_e^+/\partial x_0 - f^+(x_e^+)\,\partial t_e/\partial x_0$;
- the explicit product $\tilde\Phi = S_N\Phi_N\cdots S_1\Phi_1$ of saltation and
  phase fundamental matrices (eqs. 36-39).

Its eigenvalues are the Floquet multipliers, one of them the trivial 1.
"""

from .cycle import (
    constraint_tangent_basis as constraint_tangent_basis,
    cycle as cycle,
    resolve_sequence as resolve_sequence,
    variational_map as variational_map,
)
from .floquet import (
    FloquetAnalysis as FloquetAnalysis,
    floquet_multipliers as floquet_multipliers,
)
from .newton import (
    ShootingSafeguard as ShootingSafeguard,
    ShootingStart as ShootingStart,
    loosen_max as loosen_max,
    loosened as loosened,
)
from .orbit import (
    find_periodic_orbit as find_periodic_orbit,
    monodromy as monodromy,
    poincare_map as poincare_map,
    poincare_map_with as poincare_map_with,
)
from .section import (
    PeriodicOrbit as PeriodicOrbit,
    PoincareSection as PoincareSection,
    quantity_value as quantity_value,
)
from .solve import cycle_orbit as cycle_orbit, iteration_cap as iteration_cap
from .spectrum import (
    modulus_key as modulus_key,
    sorted_multipliers as sorted_multipliers,
)
