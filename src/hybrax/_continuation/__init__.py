r"""Numerical continuation of zeros, fixed points and periodic orbits in one scalar
parameter.

The core follows a curve (branch) of zeros of $F(u, \lambda) = 0$, $u \in
\mathbb{R}^k$ and $\lambda$ a scalar, by Keller's (1977) pseudo-arclength
continuation: with $z = (u, \lambda)$, the unit tangent $t$ spanning the null space
of $[F_u\ F_\lambda]$ and a step $h$, the predictor $z_p = z_n + h\,t_n$ is
corrected by solving

$$F(z) = 0, \qquad t_n \cdot (z - z_p) = 0$$

with Newton's method (optimistix). Natural-parameter continuation (fix $\lambda$,
solve $F(u, \lambda) = 0$) is the other `method`; it cannot pass a fold. Its clients:

- [`hybrax.continue_zeros`][]: any $F$, with an optional multiplier matrix $M$;
- [`hybrax.continue_fixed_points`][]: fixed points of a map, $F = g^m(u) - u$ with
  $M = D_u g^m$ ($m = 1$: fixed points, $m > 1$: period-$m$ orbits); started
  from a period doubling, it switches onto the period-$2m$ branch;
- [`hybrax.continue_orbits`][]: periodic orbits of a hybrid system,
  $F(u, \lambda) = \pi(P(\chi(u); p(\lambda))) - u$ with the return map $P$ of
  [`hybrax.poincare_map`][] and $M = F_u + I$ the reduced Jacobian (Zana et al.
  2018 eqs. 32-33), whose eigenvalues are the nontrivial Floquet multipliers;
  started from a period doubling, it switches onto its period-2 orbits (the
  return map of [`hybrax.period_doubled_section`][]), and
  [`hybrax.continue_cascade`][] follows a cascade of such switches;
- [`hybrax.continue_bifurcation_curve`][] and [`hybrax.continue_orbit_curve`][]:
  special points of a map or of periodic orbits in two parameters;
- [`hybrax.continue_to_params`][]: periodic orbits along a path between two
  parameter sets.

Step control lives in [`hybrax.ContinuationSettings`][]; every located special point
is a [`hybrax.SpecialPoint`][] told apart by its `kind`.

Along a branch, with $\nu_i$ the eigenvalues of $M$ (Kuznetsov 2004, sec. 10.2;
Seydel 2010, ch. 5):

- a fold is where a real multiplier passes $+1$: $\det F_u$ $(= \prod(\nu_i - 1)$
  when $F_u = M - I)$ changes sign, and so does the $\lambda$-component of the
  oriented tangent;
- a period doubling (flip) is where a real multiplier passes $-1$:
  $\det(M + I) = \prod(\nu_i + 1)$ changes sign;
- a Neimark-Sacker (torus) point is where a complex pair crosses the unit circle:
  $\det(M \odot M - I) = \prod_{i<j}(\nu_i\nu_j - 1)$ changes sign, $M \odot M$
  the bialternate product (here the second compound matrix, whose eigenvalues are
  the $\nu_i\nu_j$, $i < j$). It also vanishes at a neutral saddle (real
  $\nu_i\nu_j = 1$), which is discarded after location.

Each is located by the Illinois variant of regula falsi on its test function
between the two points that bracket it.
"""

from .cascade import (
    CASCADE_ENDS as CASCADE_ENDS,
    Cascade as Cascade,
    CascadeSwitch as CascadeSwitch,
    continue_cascade as continue_cascade,
)
from .curves import (
    CODIM2_KINDS as CODIM2_KINDS,
    BifurcationCurve as BifurcationCurve,
    continue_bifurcation_curve as continue_bifurcation_curve,
    continue_orbit_curve as continue_orbit_curve,
)
from .driver import (
    check_u0 as check_u0,
    start_at_parameter as start_at_parameter,
)
from .maps import (
    continue_fixed_points as continue_fixed_points,
    continue_zeros as continue_zeros,
)
from .orbits import (
    continue_orbits as continue_orbits,
    follow_orbits as follow_orbits,
    period_doubled_section as period_doubled_section,
    start_cycle_failure as start_cycle_failure,
)
from .quantities import branch_quantities as branch_quantities
from .results import (
    SPECIAL_POINT_KINDS as SPECIAL_POINT_KINDS,
    Branch as Branch,
    SolutionBranch as SolutionBranch,
    SpecialPoint as SpecialPoint,
)
from .settings import (
    ContinuationSettings as ContinuationSettings,
    resolve_continuation_settings as resolve_continuation_settings,
)
