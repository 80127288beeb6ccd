"""The Poincaré section and the orbit result."""

from collections.abc import Callable
from typing import TYPE_CHECKING

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float, Int

from .._custom_types import Params
from .._simulate import boundary_violations
from .._solution import RESULTS, HybridSolution
from .newton import ShootingStart
from .spectrum import sorted_multipliers


if TYPE_CHECKING:  # (annotations only: the module imports this one)
    from .floquet import FloquetAnalysis


class PoincareSection(eqx.Module):
    r"""A Poincaré section given by the transition that closes one cycle.

    **Arguments:**

    - `sequence`: names (or indices) of the transitions of one cycle, in order; the
      last one defines the section (e.g. `("touchdown", "liftoff")`). A simulated
      cycle that fires another sequence is reported as `wrong_event_sequence`.
    - `chart`: `chart(u, params) -> x`, the state on the section for the reduced
      unknowns `u`; the states the section fixes are not unknowns.
    - `coordinates`: `coordinates(x, params) -> u`, reading the unknowns off a state.
    - `invariants`: first integrals of the cycle, `I(x, params) -> scalar` with
      $I(P(x)) = I(x)$ for the section states $x$ near the orbit (e.g. the total
      energy of a system without losses, evaluated where the cycle starts). Each
      fixes a unit Floquet multiplier (its gradient is a left eigenvector of the
      monodromy), which [`hybrax.FloquetAnalysis`][] reports apart
      (`conserved_ad`) instead of among the nontrivial multipliers. Default none.

    A conserved quantity also makes the orbits a family (one per level): fix the
    level in the `chart` (as a parameter) rather than among the unknowns, or
    Newton's Jacobian is singular.

    !!! example

        A spring-mass runner without losses, its apex height the unknown and its
        energy `p.E` a parameter (the forward speed follows from it):

        ```python
        def energy(x, p):
            return 0.5 * p.m * (x[2] ** 2 + x[3] ** 2) + p.m * p.g * x[1]

        def apex(u, p):
            speed = jnp.sqrt(2 * (p.E / p.m - p.g * u[0]))
            return jnp.stack([0.0 * u[0], u[0], speed, 0.0 * u[0]])

        section = hybrax.PoincareSection(
            ("touchdown", "liftoff", "apex"), apex, lambda x, p: x[1:2],
            invariants=(energy,),
        )
        ```
    """

    sequence: tuple[int | str, ...] = eqx.field(static=True)
    chart: Callable[[Array, Params], Array]
    coordinates: Callable[[Array, Params], Array]
    invariants: tuple[Callable[[Array, Params], Array], ...] = eqx.field(
        default=(), converter=tuple
    )

    def _traced_roles(self, x: Array, params: Params) -> dict:
        """The section's functions, called as the library calls them, at a state
        `x`: its coordinates, its chart at those, and its invariants (see
        `HybridSystem._traced_roles`).

        **Returns:** a dict of the functions' values by role.
        """
        u = self.coordinates(x, params)
        return {
            "coordinates": u,
            "chart": self.chart(u, params),
            "invariants": tuple(invariant(x, params) for invariant in self.invariants),
        }

    def __check_init__(self):
        if len(self.sequence) < 1:
            raise ValueError("`sequence` must name at least one transition.")
        if not all(callable(invariant) for invariant in self.invariants):
            raise ValueError(
                "`invariants` must be functions I(x, params) -> scalar; got "
                f"{self.invariants!r}."
            )


class PeriodicOrbit(eqx.Module):
    r"""The result of [`hybrax.find_periodic_orbit`][].

    - `u`: the reduced unknowns at the section; `u_next`: their image under the
      return map (equal to `u` up to the residual); `state`: the section state.
    - `cycle`: the [`hybrax.HybridSolution`][] of one cycle from `state` (its
      events, event observables such as `T_c`, and phase observables such as
      apex heights in `cycle.phase_observables`); `t_events`, `x_before`,
      `x_after`, `T_c`, `T_a`, `guard_at_start` read it.
    - `phase_durations`: time in each phase; `period`: their sum.
    - `reduced_jacobian`: $M = J + I$ (Zana et al. 2018, eqs. 32-33),
      $J = \partial F/\partial u$.
    - `residual_norm`: $\max|F(u)|$ at the returned point; `n_steps`: root-finder
      iterations; `result`: a [`hybrax.RESULTS`][]: `successful` only if the solver
      converged, the residual is below tolerance, the cycle ran as declared and
      it keeps every boundary its model declares (each phase starts inside its
      mode, e.g. the hopper's ground does not pull after touchdown; each impact's
      declared release velocity is not negative): an orbit that breaks one is
      `inadmissible_orbit`, with its values kept
      (`orbit.boundary_violations(system)` names them); otherwise the cause (the
      failure of the cycle at the last iterate, e.g. `max_steps_reached`, or
      `shooting_failed` when every cycle ran).
    - `restart`: the [`hybrax.ShootingStart`][] that resumes the solve, not a
      result: the root finder's last iterate, the loosening of its next
      iteration, the iterations used and the safeguarded Newton's memory (with
      the best iterate of a solve that did not converge and its defect, which
      `orbit.describe_failure()` reports). A solve that ran out of iterations
      (status `shooting_failed`) continues with `find_periodic_orbit(system,
      section, orbit.restart, params, shooting=...)` and a larger
      `max_iterations`; [`hybrax.sweep_orbits`][] resumes its unfinished
      elements so. No derivative.
    - `floquet`: the [`hybrax.FloquetAnalysis`][] (monodromy by autodiff and by
      the saltation product, their discrepancy, the multipliers) when the orbit
      was found with `analyse=True`; `None` otherwise.

    Every floating value of an orbit that did not converge is NaN (and so is its
    derivative), `restart` excepted: a failure never passes for a finite number.
    An `inadmissible_orbit` is a solution of the equations that the model's
    boundaries rule out: its values are kept, and it is never `succeeded`.
    """

    u: Float[Array, " k"]
    u_next: Float[Array, " k"]
    state: Float[Array, " n"]
    cycle: HybridSolution
    phase_durations: Float[Array, " E"]
    period: Float[Array, ""]
    reduced_jacobian: Float[Array, "k k"]
    residual_norm: Float[Array, ""]
    n_steps: Int[Array, ""]
    result: RESULTS
    restart: "ShootingStart"
    floquet: "FloquetAnalysis | None" = None

    @property
    def succeeded(self):
        """Whether this is a valid periodic orbit (`result` is `successful`),
        as every result of the library says."""
        return self.result == RESULTS.successful

    def boundary_violations(self, system, tol: float = 1e-9) -> list[str]:
        r"""The declared boundaries this orbit's cycle breaks, each with its value
        (host-side, for one unbatched orbit; `[]` where it keeps them all), named
        as continuation names them: `force_reversal@k` where phase $k$ starts past
        its guard by more than `tol` (the guard $h < 0$ at its start; for the
        hopper's ground phase $h = -\lambda/(m g)$: the ground would pull), and
        `release_reversal@k@name` where the release velocity `name` of event $k$
        is below `-tol` (the contact that impact releases would stay). `tol` is
        `Settings.guard_tol`'s default; the status `inadmissible_orbit` uses the
        solve's."""
        # (The status reads guards and release velocities, not clearances: those
        # are recorded only with phase observables.)
        words = {
            "force_reversal": "force_reversal@{0.event}: the guard of phase "
            "{0.event} starts at {0.value:.6g}",
            "release_reversal": "release_reversal@{0.event}@{0.name}: {0.name} = "
            "{0.value:.6g} after event {0.event}",
        }
        return [
            words[violation.kind].format(violation)
            for violation in boundary_violations(system, self.cycle, tol)
            if violation.kind in words
        ]

    def describe_failure(self) -> str:
        """What stopped a solve that found no orbit, in one line (host-side, for
        one unbatched orbit; `""` for a converged one): which evaluation's cycle
        failed and how, or that the iterations ran out, and the best iterate
        with its defect, e.g. `"mode_not_viable in the cycle of evaluation 6 of
        the shooting (its earlier trial points were cut back); best iterate u =
        [1.02, 2.49] with defect 0.114"`."""
        from .._solution import status_name

        if bool(self.succeeded):
            return ""
        status = status_name(self.result)[0]
        if status == "inadmissible_orbit":
            return (
                "inadmissible_orbit: the orbit converged but breaks a boundary its "
                "model declares (`orbit.boundary_violations(system)` names it)"
            )
        n = int(self.n_steps)
        memory = self.restart.safeguard
        if status == "shooting_failed" and bool(memory.dead):
            head = (
                f"shooting_failed: no progress towards an orbit in {n} "
                "evaluations (neither Newton's own iterates nor a second pass "
                "from the guess with the step control)"
            )
        elif status == "shooting_failed":
            head = f"shooting_failed: no convergence in {n} evaluations"
        elif n <= 1:
            head = f"{status} in the cycle from the guess"
        else:
            head = (
                f"{status} in the cycle of evaluation {n} of the shooting (its "
                "earlier trial points were cut back)"
            )
        best = np.asarray(memory.best_iterate, dtype=float)
        defect = float(memory.best_defect)
        if not np.isfinite(defect):
            return head
        values = ", ".join(f"{v:.6g}" for v in best)
        return f"{head}; best iterate u = [{values}] with defect {defect:.3g}"

    @property
    def multipliers(self) -> Complex[Array, " k"]:
        r"""The nontrivial Floquet multipliers: the eigenvalues of the reduced
        Jacobian $M$ (the section removes the trivial one), by decreasing modulus,
        a complex pair with its positive imaginary part first. Differentiable
        (NaN for a failed orbit)."""
        return sorted_multipliers(self.reduced_jacobian)

    @property
    def spectral_radius(self) -> Float[Array, ""]:
        r"""$\max_i|\nu_i|$ over the nontrivial multipliers: the orbit is
        asymptotically stable when it is below 1. Differentiable wherever the
        largest modulus is attained by one real multiplier or one complex pair."""
        return jnp.max(jnp.abs(self.multipliers))

    @property
    def t_events(self):
        """Event times of the cycle (from the section state at $t = 0$)."""
        return self.cycle.t_events

    @property
    def x_before(self):
        """States just before each event of the cycle."""
        return self.cycle.x_before

    @property
    def x_after(self):
        """States just after each event of the cycle."""
        return self.cycle.x_after

    @property
    def T_c(self):
        """Kinetic energy lost at each event of the cycle."""
        return self.cycle.T_c

    @property
    def T_a(self):
        """Kinetic energy kept at each event of the cycle."""
        return self.cycle.T_a

    @property
    def guard_at_start(self):
        """The smallest armed guard of each phase's mode right after its event."""
        return self.cycle.guard_at_start


def quantity_value(quantity, orbit, params):
    """`quantity(orbit, params)`, or `None` where it reads an observable that
    nothing recorded (the `KeyError` a missing name raises, while tracing): an
    unknown, never a value read from NaN."""
    try:
        return quantity(orbit, params)
    except KeyError:
        return None
