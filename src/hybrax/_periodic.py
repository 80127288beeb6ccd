r"""Periodic orbits by shooting on a Poincaré section, and their stability.

The orbit is a fixed point of the return map $P$ on a section $\Sigma$ given by a
transition (for the hopper: lift-off, Zana et al. 2018 section 3.4). Unknowns are
reduced coordinates $u$ of a chart $x = \chi(u)$ whose image lies on the section's
fixed states by construction; shooting solves $F(u) = \pi(P(\chi(u))) - u = 0$ with
optimistix, and $M = J + I$ with $J = \partial F/\partial u$ is the reduced Jacobian
of eqs. (32)-(33).

The monodromy matrix $\tilde\Phi$ (eq. 36) is the Jacobian of the flow over the
fixed duration of one period, started on the section. It is computed two ways:

- autodiff through the composite flow with its root-found event times,
  $\tilde\Phi = \partial x_e^+/\partial x_0 - f^+(x_e^+)\,\partial t_e/\partial x_0$;
- the explicit product $\tilde\Phi = S_N\Phi_N\cdots S_1\Phi_1$ of saltation and
  phase fundamental matrices (eqs. 36-39).

Its eigenvalues are the Floquet multipliers, one of them the trivial 1.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optimistix as optx
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, ArrayLike, Complex, Float, Int

from ._custom_types import Params
from ._hybrid import HybridSystem, MechanicalVectorField
from ._misc import canonical_params, check_float64, is_concrete, trace_once
from ._programs import call, compiled, prepare, system_label
from ._saltation import saltation_parts
from ._settings import (
    Settings,
    Shooting,
    resolve_settings,
    resolve_shooting,
)
from ._simulate import raise_if_failed, run_events
from ._solution import RESULTS, HybridSolution, masked_nan


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
    - `reduced_jacobian`: $M = J + I$ (eqs. 32-33), $J = \partial F/\partial u$.
    - `residual_norm`: $\max|F(u)|$ at the returned point; `n_steps`: root-finder
      iterations; `result`: a [`hybrax.RESULTS`][]: `successful` only if the solver
      converged, the residual is below tolerance and the cycle ran as declared;
      otherwise the cause (the failure of the cycle at the last iterate, e.g.
      `max_steps_reached`, or `shooting_failed` when every cycle ran).
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
        as every result of the library says; `converged` is its other name."""
        return self.result == RESULTS.successful

    @property
    def converged(self):
        """Whether this is a valid periodic orbit (the same as `succeeded`)."""
        return self.succeeded

    def describe_failure(self) -> str:
        """What stopped a solve that found no orbit, in one line (host-side, for
        one unbatched orbit; `""` for a converged one): which evaluation's cycle
        failed and how, or that the iterations ran out, and the best iterate
        with its defect, e.g. `"mode_not_viable in the cycle of evaluation 6 of
        the shooting (its earlier trial points were cut back); best iterate u =
        [1.02, 2.49] with defect 0.114"`."""
        from ._solution import status_name

        if bool(self.converged):
            return ""
        status = status_name(self.result)[0]
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


def _check_adjoint(settings: Settings) -> None:
    """The orbit routines differentiate in both modes whatever `settings.adjoint`
    says; a reverse pass takes it where it is a reverse-capable adjoint (e.g.
    `diffrax.RecursiveCheckpointAdjoint(checkpoints=...)`)."""
    if settings.adjoint is None or isinstance(
        settings.adjoint,
        dfx.ForwardMode | dfx.RecursiveCheckpointAdjoint | dfx.DirectAdjoint,
    ):
        return
    raise ValueError(
        "`settings.adjoint`: the orbit routines differentiate with "
        "`diffrax.RecursiveCheckpointAdjoint()` (reverse mode) or "
        "`diffrax.ForwardMode()`, or None (the default: both modes work); got "
        f"{type(settings.adjoint).__name__}."
    )


def _reverse_adjoint(settings: Settings):
    if isinstance(settings.adjoint, dfx.RecursiveCheckpointAdjoint | dfx.DirectAdjoint):
        return settings.adjoint
    return dfx.RecursiveCheckpointAdjoint()


def resolve_sequence(system: HybridSystem, section: PoincareSection):
    """The section's transitions as indices, and the mode a cycle starts in;
    `ValueError` unless they form a closed path of the system."""
    # The method taken from the class: equinox wraps a method looked up on an
    # instance in a new module each time (about 35 us, of a 1.7 ms eager orbit).
    transition_index = HybridSystem.transition_index
    sequence = tuple(transition_index(system, k) for k in section.sequence)
    mode0 = system.targets[sequence[-1]]
    for a, b in zip(sequence[:-1], sequence[1:]):
        if system.targets[a] != system.sources[b]:
            raise ValueError(
                f"`sequence` is not a path of the system: transition {a} leads to "
                f"mode {system.targets[a]} but transition {b} leaves mode "
                f"{system.sources[b]}"
            )
    if system.sources[sequence[0]] != mode0:
        raise ValueError("`sequence` does not close: it must end where it starts.")
    return sequence, mode0


class Variational(eqx.Module):
    r"""The augmentation of a phase by its first variational equation (Zana et al.
    2018 eq. 35): the solve carries $(x, \Phi)$ with $\dot\Phi = f_x\Phi$ (step
    sizes controlled on $x$ alone), and at each event $\Phi^+ = S\Phi^-$ with the
    saltation matrix $S$, recording the event-time gradient
    $\partial t_e/\partial x_0 = -h_x\Phi^- / (h_x f^- + h_t)$. After a cycle,
    $\Phi$ is the fixed-duration monodromy $\tilde\Phi = S_N\Phi_N\cdots S_1\Phi_1$.

    $\Phi$ is one leaf of the solver's state. On XLA's CPU backend with its
    default small-loop limit a diffrax step had cost several times more for a leaf
    of ten or more entries than for one of four, and $\Phi$ had travelled as a
    tuple of its columns; with the limit hybrax sets (`hybrax._xla_cpu`) the loop
    is one kernel, the leaf's size matters little and columns cost more
    (`experiments/bench_leaf_size.py`: 16 entries 0.26 us a step as one leaf, 0.66
    us as four; the hopper's analysed orbit under `jax.jit` 1.0 ms against 1.3
    ms).
    """

    def initial(self, x0):
        return jnp.eye(x0.shape[0], dtype=x0.dtype)

    def field(self, field, t, y):
        x, Phi = y
        fx, jvp_fn = jax.linearize(lambda z: field(t, z), x)
        return fx, jax.vmap(jvp_fn, in_axes=1, out_axes=1)(Phi)

    def at_event(self, system, k, t, x_minus, Phi, params):
        def transport(j):
            def apply(t, x_minus, Phi, params):
                S, h_x, h_t, f_minus = saltation_parts(system, j, t, x_minus, params)
                dt_dx0 = -(h_x @ Phi) / (h_x @ f_minus + h_t)
                return S @ Phi, dt_dx0

            return apply

        if isinstance(k, int):
            return transport(k)(t, x_minus, Phi, params)
        branches = [transport(j) for j in range(len(system.transitions))]
        return jax.lax.switch(k, branches, t, x_minus, Phi, params)


def cycle(
    system,
    x0,
    params,
    sequence,
    settings,
    adjoint,
    *,
    variational=False,
    phase_observables=False,
    diagnose=True,
    tangents=None,
    seed_tangents=False,
):
    r"""One cycle of the declared `sequence` from `x0` at $t = 0$ (the engine's
    sequence loop). Returns `(solution, augmented)`; with `variational=True`,
    `augmented` is `(monodromy, dt_dx0)` (the event-time gradient of the last
    event), else `None`; with `tangents` (an `(n, k)` matrix $V$) the variational
    equation carries only $\Phi V$ and $\partial t_e/\partial x_0\,V$.
    `diagnose=False` skips the viability and grazing checks: for the iterations of
    a solver whose result a diagnosed pass checks. `seed_tangents`: for
    forward-mode AD through the cycle (see `run_events`)."""
    augmentation = Variational() if variational else None
    if augmentation is not None and tangents is None:
        tangents = augmentation.initial(x0)
    solution, extra, records = run_events(
        system,
        x0,
        params,
        settings,
        adjoint,
        mode0=system.sources[sequence[0]],
        t0=jnp.zeros((), x0.dtype),
        sequence=sequence,
        augmentation=augmentation,
        extra0=tangents,
        phase_observables=phase_observables,
        diagnose=diagnose,
        # The variational pass is the inner loop of Newton and of the sweeps: its
        # phases are traced apart, each with its mode's functions (no conditional
        # in a step; scanned with a run-time mode, a batched orbit took 10% more
        # CPU time). The other cycles (the AD monodromy, the return map) scan one
        # traced phase: the analysed hopper orbit compiled in 10.0-10.3 s against
        # 11.4-11.95 s (alternating runs).
        unroll=variational,
        seed_tangents=seed_tangents,
    )
    if augmentation is None:
        return solution, None
    return solution, (extra, records[-1])


def _cycle_jacobian(system, x0, params, sequence, settings):
    """One cycle from `x0` and its forward-mode Jacobian: `(x_e, t_e)`, their
    derivatives with respect to `x0`, and the simulation (undiagnosed: the cycle
    at the same state is diagnosed by the variational pass)."""

    def flow(x):
        sol, _ = cycle(
            system,
            x,
            params,
            sequence,
            settings,
            dfx.ForwardMode(),
            diagnose=False,
            seed_tangents=True,
        )
        return (sol.x_after[-1], sol.t_events[-1]), sol

    (dx_dx0, dt_dx0), sol = jax.jacfwd(flow, has_aux=True)(x0)
    return dx_dx0, dt_dx0, sol


def _ad_monodromy(system, state, params, sequence, settings):
    """The monodromy by forward-mode AD through one cycle from `state`."""
    dx_dx0, dt_dx0, sol = _cycle_jacobian(system, state, params, sequence, settings)
    return _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol, sequence, params)


def _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol, sequence, params):
    # Phi~ = d x_e^+ / d x0 - f^+(x_e^+) d t_e / d x0: the flow over the fixed
    # duration t_e, continued past the last event with the post-event field.
    field_after = trace_once(system.modes[system.targets[sequence[-1]]].vector_field)
    f_plus = field_after(sol.t_events[-1], sol.x_after[-1], params)
    return dx_dx0 - jnp.outer(f_plus, dt_dx0)


def _variational_map(
    system,
    section,
    sequence,
    settings,
    u,
    params,
    phase_observables=False,
    diagnose=True,
    adjoint=None,
    full=True,
):
    r"""The return map and its Jacobian from the variational equations and saltation
    matrices (no AD through the solver): `(u_next, M, solution, monodromy)` with
    $M = \pi_x(\tilde\Phi + f^+\,\partial t_e/\partial x_0)\chi_u$. `adjoint`
    only matters when this pass itself is differentiated (the derivative rules of
    the orbit); by default a plain forward while loop, as checkpointing costs
    time. With `full=False` the variational equation carries only the $k$ columns
    $\Phi\chi_u$ (not the $n$ of $\Phi$: for the hopper's minimal form 2 of 4,
    its constrained form 2 of 8) and `monodromy` is `None`."""
    x0 = section.chart(u, params)
    chart_jac = jax.jacfwd(section.chart)(u, params)
    sol, (monodromy, dt_dx0) = cycle(
        system,
        x0,
        params,
        sequence,
        settings,
        dfx.ForwardMode() if adjoint is None else adjoint,
        variational=True,
        phase_observables=phase_observables,
        diagnose=diagnose,
        tangents=None if full else chart_jac,
    )
    x_end = sol.x_after[-1]
    field_after = trace_once(system.modes[system.targets[sequence[-1]]].vector_field)
    f_plus = field_after(sol.t_events[-1], x_end, params)
    coord_jac = jax.jacfwd(section.coordinates)(x_end, params)
    # Without `full`, `monodromy` is already Phi~ chi_u and `dt_dx0` is d t_e / d u.
    M = coord_jac @ (monodromy + jnp.outer(f_plus, dt_dx0))
    if not full:
        return section.coordinates(x_end, params), M, sol, None
    return section.coordinates(x_end, params), M @ chart_jac, sol, monodromy


def _zero_tangent(leaf):
    if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
        return jnp.zeros_like(leaf)
    return np.zeros(np.shape(leaf), dtype=jax.dtypes.float0)


def _variational_return_map(
    system, section, sequence, settings, phase_observables, example, full=True
):
    r"""The return map $(u, p, t_\max) \mapsto (u', \text{info})$ whose derivative
    in $u$ is the variational Jacobian $M$ (a `jax.custom_jvp`): Newton then needs
    one augmented solve per iteration instead of forward-mode AD through the
    solver. `info` is `(M, solution, monodromy)` of that (diagnosed) cycle, so that
    the last iteration already holds the analysis of the orbit (`monodromy` only
    if `full`). $t_\max$ replaces `settings.t_max` (see `_ShootingRootFinder`).

    The pass is traced once, at the `example` arguments `(u, p, t_max, loosen)`
    (`loosen` multiplies the default controller's tolerances), and both
    the primal and the derivative rule evaluate that trace: tracing the rule
    again took as long as the first trace (1.4 s of a 12.6 s compile on the
    hopper)."""

    def trace(u, params, t_max, loosen):
        u_next, M, sol, monodromy = _variational_map(
            system,
            section,
            sequence,
            _for_iteration(settings, t_max, loosen),
            u,
            params,
            phase_observables=phase_observables,
            full=full,
        )
        return u_next, (M, sol, monodromy)

    evaluate = eqx.filter_closure_convert(trace, *example)

    @jax.custom_jvp
    def return_map(u, params, t_max, loosen):
        return evaluate(u, params, t_max, loosen)

    def return_map_jvp(primals, tangents):
        u, params, t_max, loosen = primals
        du, dparams, _, _ = tangents
        if not all(
            isinstance(leaf, SymbolicZero)
            for leaf in jax.tree_util.tree_leaves(
                dparams, is_leaf=lambda x: isinstance(x, SymbolicZero)
            )
        ):
            raise NotImplementedError(
                "Derivatives with respect to the parameters are not available with "
                "`jacobian='variational'`; use `jacobian='autodiff'`."
            )
        u_next, info = evaluate(u, params, t_max, loosen)
        info_tangent = jax.tree_util.tree_map(_zero_tangent, info)
        if isinstance(du, SymbolicZero):
            return (u_next, info), (jnp.zeros_like(u_next), info_tangent)
        return (u_next, info), (info[0] @ du, info_tangent)

    return_map.defjvp(return_map_jvp, symbolic_zeros=True)
    return return_map


def constraint_tangent_basis(
    system: HybridSystem, mode: int, x: Float[Array, " n"], params: Params
) -> Float[Array, "n r"]:
    r"""An orthonormal basis of the tangent space of the constraint manifold
    $\{[q, \dot q] : \gamma(q) = 0,\ \gamma_q\dot q = 0\}$ of a mechanical mode at `x`
    (the identity for a mode given by a plain vector field).

    The index-reduced dynamics keeps $\ddot\gamma = 0$ only, so perturbations off the
    manifold drift linearly and add spurious unit multipliers; restricting the
    monodromy to this basis, $B^T\tilde\Phi B$, removes them.
    """
    field = system.modes[mode].vector_field
    n = x.shape[0]
    if not isinstance(field, MechanicalVectorField) or not field.active:
        return jnp.eye(n, dtype=x.dtype)
    from ._mechanics import _stacked_constraints

    gamma = _stacked_constraints(field.model, field.active)

    def position_and_velocity_constraints(y):
        q, qd = y[: n // 2], y[n // 2 :]
        g = gamma(q, params)
        gd = jax.jvp(lambda s: gamma(s, params), (q,), (qd,))[1]
        return jnp.concatenate([g, gd])

    A = jax.jacfwd(position_and_velocity_constraints)(x)
    rank = A.shape[0]
    _, _, vt = jnp.linalg.svd(A, full_matrices=True)
    return vt[rank:].T


class FloquetAnalysis(eqx.Module):
    r"""Monodromy matrices and Floquet multipliers of a periodic orbit.

    - `monodromy_ad`, `monodromy_saltation`: $\tilde\Phi$ by autodiff and by the
      saltation product (full state).
    - `max_discrepancy`: $\max|\tilde\Phi_{AD} - \tilde\Phi_{S}|$.
    - `tangent_basis`: $B$ of [`hybrax.constraint_tangent_basis`][] at the section
      state ($I$ for unconstrained states).
    - `multipliers_ad`, `multipliers_saltation`: the nontrivial eigenvalues of
      $B^T\tilde\Phi B$, sorted by decreasing modulus (see
      [`hybrax.floquet_multipliers`][]).
    - `trivial_ad`, `trivial_saltation`: the multiplier of the flow direction
      (ideally 1).
    - `conserved_ad`, `conserved_saltation`: the multiplier of each of the
      section's `invariants` (ideally 1; empty without them), deflated with
      their gradients, so that the nontrivial multipliers keep their number and
      order across parameters and a defective unit pair adds no complex part.
    """

    monodromy_ad: Float[Array, "n n"]
    monodromy_saltation: Float[Array, "n n"]
    max_discrepancy: Float[Array, ""]
    tangent_basis: Float[Array, "n r"]
    multipliers_ad: Complex[Array, " r-1"]
    multipliers_saltation: Complex[Array, " r-1"]
    trivial_ad: Complex[Array, ""]
    trivial_saltation: Complex[Array, ""]
    conserved_ad: Complex[Array, " m"]
    conserved_saltation: Complex[Array, " m"]

    @property
    def leading_multiplier(self):
        """The nontrivial multiplier of largest modulus (autodiff)."""
        return self.multipliers_ad[0]


def _modulus_key(eig, xp=jnp):
    """The sort key of the one ordering of multipliers in the library: decreasing
    modulus, a complex pair with its positive imaginary part first (the relative
    1e-12 lets the imaginary part decide between a pair's rounded moduli). `xp`:
    `jax.numpy` or `numpy`."""
    return -xp.abs(eig) * (1 + 1e-12) - 1e-15 * xp.imag(eig)


def _by_modulus(eig: Complex[Array, " k"]) -> Complex[Array, " k"]:
    """`eig` sorted by `_modulus_key`."""
    return eig[jnp.argsort(jax.lax.stop_gradient(_modulus_key(eig)))]


@jax.jit
def _eigenvalues(matrix: Float[Array, "k k"]) -> Complex[Array, " k"]:
    """The eigenvalues of a small real matrix by LAPACK's `geev` (differentiable).

    LAPACK on every backend: on GPUs `jnp.linalg.eigvals` runs cuSOLVER's `geev`
    one matrix after another (0.32 ms per 3 x 3 matrix on an H100, 32 s for a
    batch of 1e5), while JAX's LAPACK path copies the batch to the host once.
    Jitted on its own, as `jnp.linalg.eigvals` is: inlined into a larger program
    compiled by XLA CPU at backend optimisation level 0, the forward-mode
    derivatives of an orbit's quantities moved by 3.5e-6 (relative)."""
    return jax.lax.linalg.eig(
        matrix,
        compute_left_eigenvectors=False,
        compute_right_eigenvectors=False,
        implementation=jax.lax.linalg.EigImplementation.LAPACK,
    )[0]


def sorted_multipliers(matrix: Float[Array, "k k"]) -> Complex[Array, " k"]:
    r"""The eigenvalues of `matrix` by decreasing modulus, a complex pair with its
    positive imaginary part first (differentiable; the order is not)."""
    return _by_modulus(_eigenvalues(matrix))


def _deflated(matrix, vector):
    r"""Deflate an eigenvalue with a known eigenvector `vector` (right or left:
    the reflector is symmetric, so one construction serves both) by a
    Householder reflector $H$, $H v \propto e_1$: $H A H$ is block triangular,
    its corner $v^T A v / v^T v$ the eigenvalue and its trailing block the
    matrix of the other eigenvalues. Returns `(corner,
    block, H)`. (Plain arithmetic: differentiable, and exact for a defective pair,
    whose eigenvalues would split by the square root of rounding.)"""
    n = vector.shape[0]
    norm = jnp.linalg.norm(vector)
    sign = jnp.where(vector[0] >= 0, 1.0, -1.0)
    w = vector.at[0].add(sign * norm)
    H = jnp.eye(n, dtype=matrix.dtype) - 2.0 * jnp.outer(w, w) / jnp.dot(w, w)
    reflected = H @ matrix @ H
    return reflected[0, 0], reflected[1:, 1:], H


def floquet_multipliers(
    monodromy: Float[Array, "n n"],
    tangent_basis: Float[Array, "n r"] | None = None,
    *,
    flow: Float[Array, " n"] | None = None,
    invariant_gradients: Float[Array, "m n"] | None = None,
) -> tuple[Complex[Array, ""], Complex[Array, " m"], Complex[Array, " r-1-m"]]:
    r"""Floquet multipliers: the eigenvalues $\nu_i$ of $A = B^T\tilde\Phi B$, the
    structural ones apart.

    - The trivial multiplier belongs to the flow direction $f(x_0)$, a right
      eigenvector of the monodromy ($\tilde\Phi f = f$ for an autonomous orbit,
      Zana et al. 2018 section 3.5).
    - A first integral $I$ of the cycle gives a left eigenvector $\nabla I$
      ($\nabla I\,\tilde\Phi = \nabla I$): the unit multipliers of a conservative
      system, with the flow's a defective (Jordan) pair whose computed
      eigenvalues would split into $1 \pm \sqrt{\epsilon}$, even into a complex
      pair.

    Each known eigenvector is deflated by a Householder reflector (Saad 2011,
    *Numerical Methods for Large Eigenvalue Problems*, section 4.2): its
    multiplier is the Rayleigh quotient, the rest are the eigenvalues of the
    remaining block, whatever their values, so their number and order do not
    depend on where they lie. Without `flow`, the trivial multiplier is the
    eigenvalue closest to 1. The nontrivial ones come by decreasing modulus; the
    orbit is asymptotically stable if all have $|\nu_i| < 1$.

    **Arguments:**

    - `monodromy`: $\tilde\Phi$, `(n, n)`.
    - `tangent_basis`: $B$, an orthonormal basis of the states the orbit's
      constraints admit (`None`: all states).
    - `flow`: $f(x_0)$, the vector field where the cycle starts.
    - `invariant_gradients`: $\nabla I_j(x_0)$, one row per first integral.

    **Returns:** `(trivial, conserved, nontrivial)`: the flow's multiplier, one
    per invariant (`(m,)`) and the others (`(r - 1 - m,)`).
    """
    matrix = monodromy
    if tangent_basis is not None:
        matrix = tangent_basis.T @ monodromy @ tangent_basis
    if invariant_gradients is None:
        invariant_gradients = jnp.zeros((0, monodromy.shape[0]), monodromy.dtype)
    rows = invariant_gradients
    if flow is not None:
        flow = jnp.asarray(flow, matrix.dtype)
    if tangent_basis is not None:
        rows = rows @ tangent_basis
        flow = None if flow is None else tangent_basis.T @ flow
    conserved = []
    # The invariants first: their gradients are orthogonal to the flow
    # ($\nabla I \cdot f = 0$), so the flow stays an eigenvector of each block.
    for j in range(rows.shape[0]):
        value, matrix, H = _deflated(matrix, rows[j])
        conserved.append(value)
        rows = (rows @ H)[:, 1:]
        flow = None if flow is None else (H @ flow)[1:]
    conserved = jnp.stack(conserved) if conserved else jnp.zeros((0,), matrix.dtype)
    conserved = conserved.astype(jnp.result_type(conserved.dtype, jnp.complex64))
    if flow is None:
        eig = _eigenvalues(matrix)
        trivial_index = jnp.argmin(jnp.abs(eig - 1.0))
        trivial = eig[trivial_index]
        others = jnp.delete(eig, trivial_index, assume_unique_indices=True)
        return trivial, conserved, _by_modulus(others)
    trivial, matrix, _ = _deflated(matrix, flow)
    trivial = trivial.astype(conserved.dtype)
    return trivial, conserved, _by_modulus(_eigenvalues(matrix))


def _floquet(system, section, state, params, mode0, mono_ad, mono_s):
    basis = constraint_tangent_basis(system, mode0, state, params)
    # The known eigenvectors: the flow where the cycle starts, and the gradients
    # of the section's first integrals there.
    flow = system.modes[mode0].vector_field(jnp.zeros((), state.dtype), state, params)
    gradients = [jax.grad(invariant)(state, params) for invariant in section.invariants]
    gradients = (
        jnp.stack(gradients)
        if gradients
        else jnp.zeros((0,) + state.shape, state.dtype)
    )
    trivial_ad, conserved_ad, mult_ad = floquet_multipliers(
        mono_ad, basis, flow=flow, invariant_gradients=gradients
    )
    trivial_s, conserved_s, mult_s = floquet_multipliers(
        mono_s, basis, flow=flow, invariant_gradients=gradients
    )
    return FloquetAnalysis(
        monodromy_ad=mono_ad,
        monodromy_saltation=mono_s,
        max_discrepancy=jnp.max(jnp.abs(mono_ad - mono_s)),
        tangent_basis=basis,
        multipliers_ad=mult_ad,
        multipliers_saltation=mult_s,
        trivial_ad=trivial_ad,
        trivial_saltation=trivial_s,
        conserved_ad=conserved_ad,
        conserved_saltation=conserved_s,
    )


def _orbit_status(root_ok, last_result, sol, residual_norm, residual_tol, u):
    """`successful` only for a converged orbit; otherwise the cause: the failure of
    the cycle at the returned point, else that of the last cycle the root finder
    ran, else `shooting_failed`."""
    converged = (
        root_ok
        & (residual_norm <= residual_tol)
        & jnp.all(jnp.isfinite(u))
        & (sol.result == RESULTS.successful)
    )
    cause = RESULTS.where(
        sol.result != RESULTS.successful,
        sol.result,
        RESULTS.where(
            last_result != RESULTS.successful, last_result, RESULTS.shooting_failed
        ),
    )
    return converged, RESULTS.where(converged, RESULTS.successful, cause)


def _finite_or(u, fallback):
    """`u`, or `fallback` where `u` is not finite: a root-finder iterate that ran
    off to NaN is evaluated at the guess instead, so that its cycle costs an
    ordinary one (under `vmap` a NaN lane would otherwise hold its batch until every
    step limit is spent) and reports the cycle's own failure as the cause."""
    finite = jnp.all(jnp.isfinite(u))
    return finite, jnp.where(finite, u, fallback)


# The residual a least-squares solver sees where a cycle fails: large, so that its
# trial step into the failing region is rejected and the step shrinks.
_FAILED_CYCLE_RESIDUAL = 1e3


def _as_return_map_step(u, F, picard):
    r"""`F` with, where `picard`, the Jacobian $-I$: Newton's step is then the
    return map's, $u \leftarrow u + F = P(u)$."""
    step = jax.lax.stop_gradient(F) - (u - jax.lax.stop_gradient(u))
    return jnp.where(picard, step, F)


def _residual_or_identity(u, F, finite, result, damped=False):
    """`F` where the cycle ran; where it failed, the residual of the identity map,
    $u - u$: zero at the iterate with a unit Jacobian, so that the wrapped
    solver's step there is finite (`_ShootingRootFinder` rejects the trial and
    cuts it back, or stops where nothing is left to fall back to), and the
    implicit-function derivative at a failed orbit stays a solvable linear system
    instead of raising on NaN; the status reports the failure and the orbit's
    values, and their derivatives, are NaN.

    For a `damped` (least-squares) solver the failed residual is instead offset by
    a large constant: a trust-region step that lands there is rejected and
    shortened, which is how such a solver recovers from a far guess."""
    ok = finite & (result == RESULTS.successful)
    identity = u - jax.lax.stop_gradient(u)
    if damped:
        identity = identity + _FAILED_CYCLE_RESIDUAL
    return jnp.where(ok, F, identity)


def _with_horizon(settings: Settings, t_max) -> Settings:
    return eqx.tree_at(lambda s: s.t_max, settings, t_max)


# The loosest integration tolerance of a shooting iteration (see
# `_ShootingRootFinder`), and the rule that tightens it: an iteration whose last
# step moved the unknowns by r (relative, `_relative_step`) is integrated at
# tolerance `_TOLERANCE_RULE * r**4`, within [the settings' tolerance, _LOOSE_TOL].
_LOOSE_TOL = 1e-5
_TOLERANCE_RULE = 1.0


def _for_iteration(settings: Settings, t_max, loosen) -> Settings:
    """`settings` with horizon `t_max` and tolerances loosened by `loosen`."""
    return _loosened(_with_horizon(settings, t_max), loosen)


def _base_tol(settings: Settings):
    """The default controller's tolerance, `max(rtol, atol)` (a run-time value);
    `None` for any other controller (never loosened)."""
    controller = settings.stepsize_controller
    if not isinstance(controller, dfx.PIDController):
        return None
    return jnp.maximum(controller.rtol, controller.atol)


def _loosen_max(settings: Settings):
    """The largest loosening: to `_LOOSE_TOL` (1 where that is not looser)."""
    tol = _base_tol(settings)
    return 1.0 if tol is None else jnp.maximum(1.0, _LOOSE_TOL / tol)


def _loosened(settings: Settings, loosen) -> Settings:
    """`settings` with the default controller's tolerances multiplied by `loosen`
    (>= 1; see `_ShootingRootFinder`)."""
    controller = settings.stepsize_controller
    if not isinstance(controller, dfx.PIDController):
        return settings
    return eqx.tree_at(
        lambda s: (s.stepsize_controller.rtol, s.stepsize_controller.atol),
        settings,
        (controller.rtol * loosen, controller.atol * loosen),
    )


def _relative_step(new_y, y):
    r"""$\max_i |y'_i - y_i| / \max(1, |y_i|)$ over the leaves."""
    return jnp.max(
        jnp.stack(
            [
                jnp.max(jnp.abs(a - b) / jnp.maximum(1.0, jnp.abs(b)))
                for a, b in zip(jax.tree.leaves(new_y), jax.tree.leaves(y))
            ]
        )
    )


class ShootingSafeguard(eqx.Module):
    r"""The safeguarded Newton's memory (see [`hybrax.find_periodic_orbit`][]),
    kept with each [`hybrax.PeriodicOrbit`][] as `orbit.restart.safeguard`:

    - `best_iterate`: the best iterate so far (the last one accepted), and
      `best_defect`, $\max|F|$ at it ($\infty$ before any evaluation);
    - `best_image`: its image under the return map; `best_step`: Newton's step
      from it; `best_jacobian`: the return map's $J = M - I$ there (where the
      shooting's Jacobian is the variational one; else NaN);
    - `trial`: which kind of trial the next evaluation is (Newton's step, half of
      it, or the return map's image of the best iterate);
    - `least_defect`: the smallest defect of an accepted iterate, and `stale`:
      the evaluations since it last fell by a tenth;
    - `strict`: whether the natural monotonicity test is on (the second pass,
      from the guess `start`);
    - `rejected`: whether the last evaluation was rejected; `dead`: whether the
      solve died (a cycle failed where nothing was left to fall back to, or no
      progress for `_PATIENCE` evaluations).

    A solve cut short resumes with it (in `orbit.restart`, a
    [`hybrax.ShootingStart`][]), so that the cut solve takes the iterates of the
    uncut one. No derivative."""

    best_iterate: Array
    best_image: Array
    best_step: Array
    best_jacobian: Array
    best_defect: Array
    trial: Array
    least_defect: Array
    stale: Array
    strict: Array
    start: Array
    rejected: Array
    dead: Array

    @classmethod
    def fresh(cls, u):
        """The memory of a solve starting at `u`: nothing evaluated yet."""
        u = jnp.asarray(u)
        return cls(
            best_iterate=u,
            best_image=u,
            best_step=jnp.zeros_like(u),
            best_jacobian=jnp.full(u.shape * 2, jnp.nan, u.dtype),
            best_defect=jnp.full((), jnp.inf, u.dtype),
            trial=jnp.asarray(_NEWTON, jnp.int32),
            least_defect=jnp.full((), jnp.inf, u.dtype),
            stale=jnp.asarray(0, jnp.int32),
            strict=jnp.asarray(False),
            start=u,
            rejected=jnp.asarray(False),
            dead=jnp.asarray(False),
        )


class ShootingStart(eqx.Module):
    r"""Where a shooting solve starts: the guess and, for a solve cut short, the
    state to resume it from. [`hybrax.find_periodic_orbit`][] takes one in place
    of a plain guess array (which means `ShootingStart(u)`), and every orbit
    carries the one that resumes it, `orbit.restart`.

    **Arguments:**

    - `u`: the reduced unknowns to start from.
    - `loosening`: how much looser than the settings the first iteration
      integrates (a factor on the default controller's `rtol` and `atol`, clipped
      to the inexact Newton's range, see [`hybrax.find_periodic_orbit`][]), a
      number $\ge 1$. `1.0` (default) suits a guess near the orbit (a warm
      start: a loose cycle's error would spoil its first step); `math.inf`, the
      loosest, a rough guess such as a model's orbit guess
      ([`hybrax.sweep_orbits`][] starts its elements so).
    - `iterations_used`: the iterations a cut solve has taken so far, in
      $[0, 	ext{max\_iterations})$: the resumed solve stops after the rest of
      [`hybrax.Shooting`][]'s `max_iterations` (with a root finder such as the
      default Newton; a least-squares solver runs all of them), so that the
      parts of a cut solve take the iterations of the uncut one, and takes no
      return-map iterations (those came first).
    - `safeguard`: the safeguarded Newton's memory ([`hybrax.ShootingSafeguard`][])
      where the cut solve stopped, so that the resumed solve takes the iterates
      of the uncut one; `None` (default): a fresh start at `u`.

    Every field may be traced (one per element under `vmap`); none carries a
    derivative (an orbit does not depend on where its solve started).
    """

    u: Float[Array, " k"]
    loosening: Float[ArrayLike, ""] = 1.0
    iterations_used: Int[ArrayLike, ""] = 0
    safeguard: "ShootingSafeguard | None" = None


# Trial kinds of the safeguarded Newton (see `_ShootingRootFinder`).
_NEWTON, _HALVED, _PICARD = 0, 1, 2
# A solve whose smallest accepted defect has not fallen by a tenth in this many
# evaluations stops: without an orbit nearby (the hopper's return map pushing
# every hop higher, or lower until it no longer lifts off) the safeguard's trials
# would otherwise wander through all the iterations. A stable orbit whose return
# map contracts by 0.95 a cycle, reached by return-map steps alone (each after two
# rejected Newton trials), still gains a tenth in six evaluations.
_PATIENCE = 8


def _stalled(guard: "ShootingSafeguard"):
    """Whether the solve has stalled: no progress for `_PATIENCE` evaluations in
    the first pass, twice that in the second, whose rejected Newton trials fall
    back to the return map at once (two evaluations per return-map iteration:
    the iterates of a stable orbit's return map may move away from it for a few
    cycles before they contract, as the hopper's do where its map is steeper
    than the diagonal on the way down to a low orbit)."""
    return guard.stale >= jnp.where(guard.strict, 2 * _PATIENCE, _PATIENCE)


class _ShootingState(NamedTuple):
    inner: Any  # the wrapped solver's state
    idle: Array  # the wrapped solver has stopped: cycles of zero length
    loosen: Array  # the next Newton evaluation's loosening
    at_tolerance: Array  # the last evaluation was at the settings' tolerance
    left: Array  # iterations left of the caller's budget
    done: Array  # iterations done
    picards: Array  # the caller's return-map iterations
    guard: ShootingSafeguard


def _max_abs(tree):
    return jnp.max(
        jnp.stack([jnp.max(jnp.abs(leaf)) for leaf in jax.tree.leaves(tree)])
    )


def _all_finite(tree):
    return jnp.all(
        jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)])
    )


class _ShootingRootFinder(optx.AbstractRootFinder):
    r"""A root finder as shooting runs it: a wrapped root finder (Newton's method
    by default) kept inside the model's domain, each residual evaluation told how
    loosely to integrate and whether the wrapped solver has stopped. The
    residual's last three arguments are `(idle, loosen, picard)`, its auxiliary
    output is `(cycle result, return-map image, variational pass or None)`
    (the pass's reduced Jacobian serves the monotonicity test); before them the
    caller passes its `budget` (may be traced), which stops the solve after that
    many iterations as `max_steps` would (a resumed solve's share of its iterations,
    so that a solve cut into rounds stops where the uncut one does), its
    return-map iterations and the first evaluation's loosening.

    **Safeguarded Newton.** Two passes in one loop. First the wrapped solver's
    own iterates, kept in the model's domain: a trial point whose cycle fails (a
    phase starts outside its mode, an event is not reached, a value is not
    finite) is rejected, and the next trial is taken from the best (last
    accepted) iterate $u_a$: half Newton's step from it, $u_a + \frac12\delta_a$,
    then the return map's own image $P(u_a)$, accepted whenever its cycle runs.
    Where the smallest accepted defect $|F|_\infty$ has not fallen by a tenth for
    `_PATIENCE` evaluations, a second pass starts from the guess (after the
    caller's return-map iterations) under the natural monotonicity test: the
    simplified Newton step at a trial, $|J_a^{-1}F(u)|$ with the best iterate's
    variational Jacobian (the trial's own Newton step without it), must be
    shorter than $|\delta_a|$ by a quarter for a full step and an eighth for a
    halved one, else the trial is rejected as above. The measure is a step, not
    the defect: it does not reward a region where the return map runs along the
    diagonal (a small defect, an orbit far away), into which Newton's steps can
    lead. No progress in the second pass ends the solve. Near an orbit every
    step is accepted, so the iterates are the wrapped solver's; on the hopper's
    orbit where plain Newton left the flight mode (a return map nearly tangent
    to the diagonal) the second pass converges. A solve ends without an orbit
    where the guess fails, a return-map image of an accepted iterate fails, both
    passes stall, or the iterations run out; a dead solve returns its best
    iterate. Natural monotonicity: Deuflhard 2011, *Newton Methods for Nonlinear
    Problems*, section 3.3; backtracking and fixed-point fallbacks: Dennis &
    Schnabel 1996, *Numerical Methods for Unconstrained Optimization and
    Nonlinear Equations*, section 6.5.

    **Inexact Newton.** Far from the root an iterate needs no cycle at the final
    tolerance: Newton's next error is about $C e_k^2$, so the residual need only be
    accurate to a fraction of that (Dembo, Eisenstat & Steihaug 1982, inexact Newton
    methods). The first evaluation integrates at the loosening the caller passes
    (`_LOOSE_TOL` for a rough guess, none for a warm start, whose first step a
    loose cycle would spoil); each later one at
    $\max(\text{tol}, \min(\text{\_LOOSE\_TOL}, c\,r^4))$ ($c$ =
    `_TOLERANCE_RULE`), where $r$ is the relative size of the step just taken (an
    estimate of $e_k$ is $C r^2$, of the next error $C^3 r^4$); a trial after a
    rejection at the settings' tolerance. The solver may stop only after an
    evaluation at the settings' own tolerance, so the reported orbit, its
    residual and its analysis (from the last evaluation) are computed as in a
    fixed-tolerance solve, and the two roots agree to the root finder's tolerance
    (the iterates' paths differ). The default step-size controller
    (`diffrax.PIDController`) is loosened; with any other the tolerance stays.
    On the hopper (tol 1e-10) a variational pass cost 40 / 75 / 165 us per lane
    at tolerances 1e-6 / 1e-8 / 1e-10 (32 lanes, CPU), and Newton takes the same
    3-5 iterations: `sweep_orbits` on the batch of 1024 ran 1929-2048 orbits/s
    before, 2727-2745 with the schedule (alternating runs; see
    docs/pages/performance.md).

    **Idle lanes.** `idle` is `True` once the wrapped solver has stopped
    (converged, failed or at a non-finite iterate), so that the residual runs a
    cycle of zero length. Under `vmap` the root finder's while loop runs its body
    for every lane until the last one stops, and discards the stopped lanes'
    results; their cycles still run, and the integration's while loop lasts as
    long as its slowest lane. A lane stopped at a cycle that ran to `t_max`
    (several times a period) then made every later iteration of its chunk as slow
    (on the hopper's batch with 10% of parameter sets without an orbit, a round
    of 64 lanes took 660 ms against 45-70 ms). The flag is the loop's own test:
    this solver's `terminate` and result at the state and iterate the loop tests
    next, computed in `step` after the update (as `optimistix`'s loop does), so an
    idle evaluation is always one whose result the loop discards."""

    solver: optx.AbstractRootFinder
    base_tol: ArrayLike | None  # None: never loosened
    loosen_max: ArrayLike  # `_loosen_max(settings)`
    # The memory a resumed solve starts with (None: a fresh one at the guess).
    safeguard: ShootingSafeguard | None = None

    @property
    def rtol(self):
        return self.solver.rtol

    @property
    def atol(self):
        return self.solver.atol

    @property
    def norm(self):
        return self.solver.norm

    def _terminate(self, fn, y, args, options, state, tags):
        terminate, result = self.solver.terminate(
            fn, y, args, options, state.inner, tags
        )
        # Return-map iterations (and the Newton step right after them, whose
        # contraction estimate compares it with one of theirs) do not diverge:
        # an unstable orbit's map moves away from it.
        pulled = (result == optx.RESULTS.nonlinear_divergence) & (
            state.done <= state.picards
        )
        terminate = terminate & ~pulled
        result = optx.RESULTS.where(pulled, optx.RESULTS.successful, result)
        # A rejected trial's inner state (a failed cycle's residual is zero)
        # decides nothing; a dead solve stops.
        terminate = (terminate & ~state.guard.rejected) | state.guard.dead
        result = optx.RESULTS.where(
            state.guard.dead, optx.RESULTS.nonlinear_divergence, result
        )
        failed = result != optx.RESULTS.successful
        done = terminate & (state.at_tolerance | failed)
        # Out of the caller's budget: stopped as at `max_steps`.
        spent = ~done & (state.left <= 0)
        result = optx.RESULTS.where(
            spent, optx.RESULTS.nonlinear_max_steps_reached, result
        )
        return done | spent, result

    def _stopped(self, fn, y, args, options, state, tags):
        terminate, result = self._terminate(fn, y, args, options, state, tags)
        return terminate | (result != optx.RESULTS.successful) | ~_all_finite(y)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        inner = self.solver.init(fn, y, args, options, f_struct, aux_struct, tags)
        # The iteration budget, the return-map iterations and the first
        # evaluation's loosening are the caller's (see the class).
        budget, picards, _, first, _ = args[-5:]
        budget = jnp.asarray(budget)
        fresh = ShootingSafeguard.fresh(y)
        if self.safeguard is None:
            guard = fresh
        else:
            # A memory with nothing evaluated is a fresh one at this guess (in
            # its pass: the second one keeps its guess).
            carried = self.safeguard
            fresh = dataclasses.replace(
                fresh,
                strict=carried.strict,
                start=jnp.where(carried.strict, carried.start, y),
            )
            new = jnp.isinf(carried.best_defect)
            # (A resumed solve is never a dead one.)
            guard = jax.tree.map(
                lambda f, g: jnp.where(new, f, g), fresh, self.safeguard
            )
        state = _ShootingState(
            inner=inner,
            idle=jnp.asarray(False),
            loosen=jnp.clip(first, 1.0, self.loosen_max),
            at_tolerance=jnp.asarray(False),  # no evaluation yet
            left=budget,
            done=jnp.zeros((), budget.dtype),
            picards=jnp.asarray(picards, budget.dtype),
            guard=guard,
        )
        stopped = self._stopped(fn, y, args, options, state, tags)
        return state._replace(idle=stopped)

    def _safeguard(self, y, new_y, aux, state):
        """The next trial point and the safeguard's state after the evaluation
        at `y` (`new_y`: the wrapped solver's step from it; see the class)."""
        guard = state.guard
        cycle_result, image = aux[0], aux[1]
        ran = _all_finite(y) & _all_finite(image) & (cycle_result == RESULTS.successful)
        defect = _max_abs(image - y)
        # Below the noise of a cycle at the root finder's tolerance a defect
        # that did not decrease is still accepted.
        scale = self.atol + self.rtol * _max_abs(y)
        # The guess, and the return map's images (the caller's return-map
        # iterations, the fallback trial): accepted whenever their cycle runs.
        # (`mapped`: the guess or one of the caller's return-map iterations.)
        mapped = (state.done <= state.picards) & (state.picards > 0)
        from_map = mapped | jnp.isinf(guard.best_defect) | (guard.trial == _PICARD)
        # Natural monotonicity (Deuflhard 2011, section 3.3): the simplified
        # Newton step at the trial, -J_a^{-1} F(trial) with the best iterate's
        # Jacobian, must be shorter than Newton's step from the best iterate, by a
        # quarter for a full step and an eighth for a halved one. The measure is
        # a step, not the defect: it does not reward a region where the return
        # map runs along the diagonal, whose defect is small but whose orbit is
        # far. Without the variational Jacobian the trial's own Newton step
        # stands in for the simplified one.
        evaluation = aux[2]
        if evaluation is None:
            jacobian = jnp.full(guard.best_jacobian.shape, jnp.nan, y.dtype)
            simplified = _max_abs(new_y - y)
        else:
            M = evaluation[2]
            jacobian = M - jnp.eye(M.shape[0], dtype=M.dtype)
            simplified = _max_abs(jnp.linalg.solve(guard.best_jacobian, image - y))
        factor = jnp.where(guard.trial == _NEWTON, 0.75, 0.875)
        accept = ran & (
            from_map
            | ~guard.strict
            | (simplified <= factor * _max_abs(guard.best_step))
            | (defect <= 100 * scale)
        )
        # The caller's return-map iterations are not judged: progress counts
        # from Newton's start, the last of their images (where a second pass
        # starts again).
        progress = accept & (defect < 0.9 * guard.least_defect)
        least = jnp.where(progress | mapped, defect, guard.least_defect)
        stale = jnp.where(progress | mapped, 0, guard.stale + 1).astype(jnp.int32)
        guard = dataclasses.replace(guard, start=jnp.where(mapped, y, guard.start))
        stalled = _stalled(dataclasses.replace(guard, stale=stale))
        # Nothing to fall back to where such a cycle fails; no progress under
        # the monotonicity test either.
        dead = (~ran & from_map) | (stalled & guard.strict)
        accepted = dataclasses.replace(
            guard,
            best_iterate=y,
            best_image=image,
            best_step=new_y - y,
            best_jacobian=jacobian,
            best_defect=defect,
            trial=jnp.asarray(_NEWTON, jnp.int32),
            least_defect=least,
            stale=stale,
            rejected=jnp.asarray(False),
            dead=dead,
        )
        # A non-finite Newton step (a singular Jacobian) is not worth halving.
        # In the second pass a rejected Newton step falls back to the return
        # map's image at once: where the orbit is stable that pass never takes
        # more than two evaluations per return-map iteration.
        halve = (guard.trial == _NEWTON) & _all_finite(guard.best_step) & ~guard.strict
        retry = jnp.where(
            halve, guard.best_iterate + 0.5 * guard.best_step, guard.best_image
        )
        rejected = dataclasses.replace(
            guard,
            trial=jnp.where(halve, _HALVED, _PICARD).astype(jnp.int32),
            least_defect=least,
            stale=stale,
            rejected=jnp.asarray(True),
            dead=dead,
        )
        new_guard = jax.tree.map(
            lambda a, r: jnp.where(accept, a, r), accepted, rejected
        )
        next_y = jnp.where(accept, new_y, retry)
        # Newton's own iterates made no progress: once more from the guess,
        # under the monotonicity test (a fresh memory; the next evaluation
        # decides nothing, so that the solve cannot stop before it).
        restart = stalled & ~guard.strict & ~dead
        again = dataclasses.replace(
            ShootingSafeguard.fresh(guard.start),
            strict=jnp.asarray(True),
            rejected=jnp.asarray(True),
        )
        new_guard = jax.tree.map(
            lambda a, r: jnp.where(restart, a, r), again, new_guard
        )
        return jnp.where(restart, guard.start, next_y), new_guard

    def step(self, fn, y, args, options, state, tags):
        *rest, _, _, _ = args
        # A return-map iteration: at the settings' tolerance, and a fixed-point
        # step u <- P(u) (the residual's Jacobian is then -I).
        picard = state.done < state.picards
        loosen_now = jnp.where(picard, jnp.ones_like(state.loosen), state.loosen)
        new_y, new_inner, aux = self.solver.step(
            fn, y, (*rest, state.idle, loosen_now, picard), options, state.inner, tags
        )
        next_y, guard = self._safeguard(y, new_y, aux, state)
        if self.base_tol is None:
            next_loosen = state.loosen
        else:
            need = _TOLERANCE_RULE * _relative_step(new_y, y) ** 4
            # A step that is NaN (a failed evaluation) asks for the tolerance.
            next_loosen = jnp.where(
                jnp.isfinite(need),
                jnp.clip(need / self.base_tol, 1.0, self.loosen_max),
                1.0,
            )
            next_loosen = jnp.where(picard, state.loosen, next_loosen)
            # A trial after a rejection: at the settings' tolerance.
            next_loosen = jnp.where(guard.rejected, 1.0, next_loosen)
        new_state = _ShootingState(
            inner=new_inner,
            idle=state.idle,
            loosen=next_loosen,
            at_tolerance=loosen_now <= 1,
            left=state.left - 1,
            done=state.done + 1,
            picards=state.picards,
            guard=guard,
        )
        # A dead solve returns its best iterate; one out of iterations its next
        # trial, where it resumes (with its memory, `guard`).
        next_y = jnp.where(guard.dead, guard.best_iterate, next_y)
        stopped = self._stopped(fn, next_y, args, options, new_state, tags)
        return next_y, new_state._replace(idle=stopped), aux

    def terminate(self, fn, y, args, options, state, tags):
        return self._terminate(fn, y, args, options, state, tags)

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return self.solver.postprocess(
            fn, y, aux, args, options, state.inner, tags, result
        )


def _solve(
    system,
    section,
    sequence,
    u_guess,
    params,
    settings,
    root_finder,
    max_iterations,
    jacobian,
    phase_observables,
    full=True,
    first_loosening=1.0,
    iterations_used=0,
    return_map_iterations=0,
    iteration_cap=None,
    safeguard=None,
):
    r"""The shooting solve, without derivatives (the caller stops them): the root
    finder on the return map, and the diagnosed variational pass at its result.
    `max_iterations` (may be traced; `iteration_cap`, static, bounds it);
    `first_loosening` (may be traced): the first Newton iteration's, clipped to
    `_ShootingRootFinder`'s range; `iterations_used` (may be traced): the
    iterations a resumed solve has already taken (it stops after
    `max_iterations - iterations_used` more, at least one);
    `return_map_iterations` (may be traced): fixed-point iterations
    $u \leftarrow P(u)$ at the settings' tolerance before Newton's, by the same
    residual (no second program; they count apart from `max_iterations`).
    Returns `(u, u_next, M, solution, monodromy, root_ok, last_result, n_steps,
    last_iterate, next_loosening, safeguard)`; `last_iterate` is the root
    finder's final iterate (finite: else `u`; the best one of a dead solve),
    where a solve cut short resumes, with the loosening of its next iteration
    and the safeguard's memory (`safeguard` in: a resumed solve's). Without
    `full` the passes carry the section's $k$ tangent columns only and
    `monodromy` is `None`."""
    forward = dfx.ForwardMode()
    damped = isinstance(root_finder, optx.AbstractLeastSquaresSolver)
    # A stopped lane's cycle ends at its start (t_max = t0 = 0). Only for root
    # finders: optimistix adds its own test to least-squares solvers and
    # minimisers, which the flag would not see.
    idles = isinstance(root_finder, optx.AbstractRootFinder)
    t_max = jnp.asarray(settings.t_max, jnp.result_type(float))

    def horizon(idle):
        return jnp.where(idle, jnp.zeros_like(t_max), t_max)

    if jacobian == "variational":
        # Without the analysis, Newton's passes carry the section's k tangent
        # columns only (on the hopper's minimal form 0.23 ms a pass against 0.26
        # ms with all n, with the XLA options of `hybrax._xla_cpu`). With it they
        # carry all n, so that the last one holds the saltation monodromy:
        # k-column passes and a final full one had run an analysed orbit in 6.0
        # ms against 8.2 ms (while a full pass took 1.5 ms), but the two kinds of
        # pass took 4 s more to compile (XLA 10 s against 7 s) and made a larger
        # program for the command line to load.
        return_map = _variational_return_map(
            system,
            section,
            sequence,
            settings,
            phase_observables,
            (u_guess, params, t_max, jnp.asarray(1.0, t_max.dtype)),
            full=full,
        )

        def residual(u, args):
            p, guess, _, _, idle, loosen, picard = args
            finite, u_eval = _finite_or(u, guess)
            u_next, (M, sol, monodromy) = return_map(u_eval, p, horizon(idle), loosen)
            F = _as_return_map_step(u, u_next - u_eval, picard)
            F = _residual_or_identity(u, F, finite, sol.result, damped)
            return F, (sol.result, u_next, (u_eval, u_next, M, sol, monodromy))

    else:

        def residual(u, args):
            p, guess, _, _, idle, loosen, picard = args
            finite, u_eval = _finite_or(u, guess)
            sol, _ = cycle(
                system,
                section.chart(u_eval, p),
                p,
                sequence,
                _for_iteration(settings, horizon(idle), loosen),
                forward,
                diagnose=False,
                # Newton's Jacobian of this residual is forward-mode AD.
                seed_tangents=True,
            )
            u_next = section.coordinates(sol.x_after[-1], p)
            F = _as_return_map_step(u, u_next - u_eval, picard)
            F = _residual_or_identity(u, F, finite, sol.result, damped)
            return F, (sol.result, u_next, None)

    root = optx.root_find(
        residual,
        (
            _ShootingRootFinder(
                root_finder, _base_tol(settings), _loosen_max(settings), safeguard
            )
            if idles
            else root_finder
        ),
        u_guess,
        args=(
            params,
            u_guess,
            jnp.maximum(max_iterations - jnp.asarray(iterations_used), 1)
            + return_map_iterations,
            return_map_iterations,
            jnp.asarray(False),
            jnp.asarray(first_loosening, t_max.dtype),
            jnp.asarray(False),
        ),
        max_steps=iteration_cap if idles else max_iterations,
        has_aux=True,
        throw=False,
    )
    last_result, _, last_evaluation = root.aux
    # A cycle at a loosened tolerance, or a rejected trial, decides nothing: when
    # the solve stopped after one (out of iterations), it is unfinished
    # (`shooting_failed`, where a sweep's rounds resume it), not failed by that
    # cycle's status. A dead solve failed by its last cycle.
    if idles:
        guard = root.state.guard
        # (A solve that stopped for want of progress failed by none of them.)
        stalled = _stalled(guard)
        confirmed = (root.state.at_tolerance & ~guard.rejected) | (
            guard.dead & ~stalled
        )
    else:
        confirmed = jnp.asarray(True)
    last_result = RESULTS.where(confirmed, last_result, RESULTS.successful)
    if last_evaluation is not None:
        # The variational Newton's last evaluation is a diagnosed variational
        # pass: the orbit is reported at that iterate (its update was below the
        # root finder's tolerance), with its residual, Jacobian, cycle and
        # observables; no pass is compiled and run again.
        u, u_next, M, sol, mono_s = last_evaluation
        sol = eqx.tree_at(
            lambda s: s.result,
            sol,
            RESULTS.where(confirmed, sol.result, RESULTS.shooting_failed),
        )
    else:
        # At the solution, the variational pass gives the residual, the reduced
        # Jacobian M = J + I (eqs. 32-33), the saltation-product monodromy (eq. 36)
        # and the cycle with its observables at once.
        _, u_eval = _finite_or(root.value, u_guess)
        u_next, M, sol, mono_s = _variational_map(
            system,
            section,
            sequence,
            settings,
            u_eval,
            params,
            phase_observables=phase_observables,
            full=full,
        )
        u = root.value
    root_ok = root.result == optx.RESULTS.successful
    _, last_iterate = _finite_or(root.value, u)
    next_loosening = root.state.loosen if idles else jnp.ones((), t_max.dtype)
    # A least-squares solver keeps no memory.
    guard = root.state.guard if idles else ShootingSafeguard.fresh(last_iterate)
    return (
        u,
        u_next,
        M,
        sol,
        mono_s,
        root_ok,
        last_result,
        root.stats["num_steps"],
        last_iterate,
        next_loosening,
        guard,
    )


def _assemble(
    system, section, sequence, params, u, u_next, M, sol, mono_s, mono_ad, info
):
    """The orbit and its Floquet analysis from one variational pass at `u` (and
    the AD monodromy, or `None`); `info` = `(root_ok, last_result, n_steps,
    residual_tol)` from the solve. Values of a failed orbit are NaN."""
    root_ok, last_result, n_steps, residual_tol = info
    residual_norm = jnp.max(jnp.abs(u_next - u))
    converged, result = _orbit_status(
        root_ok, last_result, sol, residual_norm, residual_tol, u
    )
    t_start = jnp.concatenate([jnp.zeros((1,), u.dtype), sol.t_events[:-1]])
    orbit = PeriodicOrbit(
        u=u,
        u_next=u_next,
        state=section.chart(u, params),
        cycle=sol,
        phase_durations=sol.t_events - t_start,
        period=sol.t_events[-1],
        reduced_jacobian=M,
        residual_norm=residual_norm,
        n_steps=n_steps,
        result=result,
        restart=ShootingStart(
            u=jax.lax.stop_gradient(u),
            loosening=jnp.ones((), u.dtype),
            iterations_used=jnp.zeros((), n_steps.dtype),
            safeguard=ShootingSafeguard.fresh(jax.lax.stop_gradient(u)),
        ),
    )
    orbit = masked_nan(orbit, converged)
    if mono_ad is None:
        # (The saltation monodromy alone: the analysis's first half.)
        return orbit, None if mono_s is None else masked_nan(mono_s, converged)
    mode0 = system.sources[sequence[0]]
    floquet = _floquet(system, section, orbit.state, params, mode0, mono_ad, mono_s)
    return orbit, masked_nan(floquet, converged)


class _Shooting(eqx.Module):
    """One shooting problem with its settings: `solve(params, u_guess)` gives the
    orbit and its analysis, its derivatives by the implicit function theorem at the
    solution (see `_orbit`)."""

    system: HybridSystem
    section: PoincareSection
    settings: Settings
    root_finder: optx.AbstractRootFinder
    # Run-time values (one compiled program serves every value) ...
    max_iterations: Int[ArrayLike, ""]
    residual_tol: Float[ArrayLike, ""]
    return_map_iterations: Int[ArrayLike, ""]
    first_loosening: Float[ArrayLike, ""]
    iterations_used: Int[ArrayLike, ""]
    safeguard: "ShootingSafeguard | None"
    # ... and the program's structure.
    analyse: bool = eqx.field(static=True)
    jacobian: str = eqx.field(static=True)
    phase_observables: bool = eqx.field(static=True)
    fallback: optx.AbstractRootFinder | None
    # The root finder's loop bound (`max_iterations` stops it earlier), and a
    # least-squares solver's iterations (which optimistix bounds itself).
    iteration_cap: int = eqx.field(static=True)
    least_squares_iterations: int = eqx.field(static=True)
    # False: the analysis stops at the saltation monodromy, which stands in the
    # Floquet slot of the outputs; `_floquet_analysis` adds the AD route in a
    # program of its own (see `find_periodic_orbit`).
    ad_monodromy: bool = eqx.field(static=True, default=True)

    @property
    def sequence(self):
        return resolve_sequence(self.system, self.section)[0]

    def _solve_with(self, root_finder, u_guess, params):
        return _solve(
            self.system,
            self.section,
            self.sequence,
            u_guess,
            params,
            self.settings,
            root_finder,
            self.max_iterations
            if isinstance(root_finder, optx.AbstractRootFinder)
            else self.least_squares_iterations,
            self.jacobian,
            self.phase_observables,
            # The saltation monodromy only for the Floquet analysis.
            full=self.analyse,
            first_loosening=self.first_loosening,
            iterations_used=self.iterations_used,
            safeguard=self.safeguard,
            return_map_iterations=self.return_map_iterations,
            iteration_cap=self.iteration_cap,
        )

    def primal(self, params, u_guess):
        """The solve and its analysis, no derivatives: `(outputs, residuals)` with
        the residuals `(u, J, mono_ad, info)` the derivative rule needs."""
        params = jax.lax.stop_gradient(params)
        solved = self._solve_with(self.root_finder, u_guess, params)
        if self.fallback is not None:
            # The damped solver takes over where the first one did not converge
            # (under `vmap`, both run for every element).
            u, u_next, _, sol, _, root_ok, *_ = solved
            ok = (
                root_ok
                & (sol.result == RESULTS.successful)
                & (jnp.max(jnp.abs(u_next - u)) <= self.residual_tol)
            )
            solved = jax.lax.cond(
                ok,
                lambda: solved,
                lambda: self._solve_with(self.fallback, u_guess, params),
            )
        u, u_next, M, sol, mono_s, root_ok, last_result, n_steps, *resume = solved
        last_iterate, next_loosening, guard = resume
        _, last_iterate = _finite_or(last_iterate, u_guess)
        mono_ad = None
        if self.analyse and self.ad_monodromy:
            # The independent route: forward-mode AD through the composite flow.
            mono_ad = _ad_monodromy(
                self.system,
                self.section.chart(u, params),
                params,
                self.sequence,
                self.settings,
            )
        outputs = _assemble(
            self.system,
            self.section,
            self.sequence,
            params,
            u,
            u_next,
            M,
            sol,
            mono_s,
            mono_ad,
            (root_ok, last_result, n_steps, self.residual_tol),
        )
        # Kept finite where the orbit is NaN: the point to resume a solve from.
        # The return-map iterations, a solve's first, count apart.
        newton_steps = n_steps - jnp.minimum(n_steps, self.return_map_iterations)
        restart = ShootingStart(
            u=last_iterate,
            loosening=next_loosening,
            iterations_used=jnp.asarray(self.iterations_used) + newton_steps,
            safeguard=guard,
        )
        outputs = (
            eqx.tree_at(
                lambda o: o.restart, outputs[0], jax.lax.stop_gradient(restart)
            ),
            outputs[1],
        )
        J = M - jnp.eye(M.shape[0], dtype=M.dtype)
        info = (root_ok, last_result, n_steps, self.residual_tol, sol.t_events)
        return outputs, (outputs[0].u, J, mono_ad, info)

    def evaluate(self, u, params, mono_ad, info, adjoint, *, monodromy=True):
        """The outputs as functions of `(u, params)`: one variational pass with
        `adjoint`, differentiable. The AD monodromy's derivative is the saltation
        route's (their values agree to the integration tolerance).

        With `monodromy=False`, one plain cycle instead: the same values and
        derivatives except `reduced_jacobian` (zero, without derivative) and the
        Floquet analysis (`None`). For a derivative of outputs that do not
        depend on the monodromy: the variational equation's derivative takes the
        model's second derivatives (reverse mode through it took the hopper's
        `jax.grad` of the period 1.6-1.8 s more tracing)."""
        # Undiagnosed (a smaller program): the solve diagnosed this cycle already.
        # Should the pass find other events than the solve did (a dip only the
        # diagnosed pass catches), its derivatives would belong to another cycle:
        # they are NaN then.
        if monodromy:
            u_next, M, sol, mono_s = _variational_map(
                self.system,
                self.section,
                self.sequence,
                self.settings,
                u,
                params,
                phase_observables=self.phase_observables,
                diagnose=False,
                adjoint=adjoint,
                full=mono_ad is not None,
            )
        else:
            sol, u_next = self.next_section_state(
                u, params, adjoint, self.phase_observables
            )
            M = jnp.zeros((u.shape[0], u.shape[0]), u.dtype)
            mono_s = mono_ad = None
        root_ok, last_result, n_steps, residual_tol, t_events = info
        same = jnp.all(jnp.abs(sol.t_events - t_events) <= 1e-6 * (1 + t_events))
        sol = eqx.tree_at(
            lambda s: s.result,
            sol,
            RESULTS.where(same, sol.result, RESULTS.wrong_event_sequence),
        )
        info = (root_ok, last_result, n_steps, residual_tol)
        if mono_ad is not None:
            mono_ad = mono_s + jax.lax.stop_gradient(mono_ad - mono_s)
        return _assemble(
            self.system,
            self.section,
            self.sequence,
            params,
            u,
            u_next,
            M,
            sol,
            mono_s,
            mono_ad,
            info,
        )

    def next_section_state(self, u, params, adjoint, phase_observables=False):
        """One plain, undiagnosed cycle from the section state of `u`:
        `(solution, u_next)`."""
        sol, _ = cycle(
            self.system,
            self.section.chart(u, params),
            params,
            self.sequence,
            self.settings,
            adjoint,
            phase_observables=phase_observables,
            diagnose=False,
        )
        return sol, self.section.coordinates(sol.x_after[-1], params)


def _inexact(outputs):
    """The floating leaves of the outputs (the others `None`): what carries a
    derivative."""
    return eqx.filter(outputs, eqx.is_inexact_array)


def _tangent_parameters(params, t_params):
    """The parameters' tangent on their floating leaves (zeros where symbolic)."""
    return jax.tree_util.tree_map(
        lambda p, t: (
            (jnp.zeros_like(p) if t is None else t) if eqx.is_inexact_array(p) else None
        ),
        params,
        t_params,
        is_leaf=lambda x: x is None,
    )


def _orbit_tangent_impl(shooting, params, u, J, mono_ad, info, like, t_dynamic):
    r"""The outputs' tangent along the parameters' tangent `t_dynamic`, in forward
    mode: $\dot y = y_p\dot p + y_u\dot u$ with $\dot u = -J^{-1} P_p\dot p$ (the
    implicit function theorem at the root, $P_p\dot p$ the tangent of the next
    section state $u'$). One linearisation of the outputs in $(u, p)$ serves both
    terms."""
    del like
    dynamic, static = eqx.partition(params, eqx.is_inexact_array)

    def evaluate(u_, dynamic_):
        p = eqx.combine(dynamic_, static)
        return _inexact(shooting.evaluate(u_, p, mono_ad, info, dfx.ForwardMode()))

    _, linear = jax.linearize(evaluate, u, dynamic)
    along_p = linear(jnp.zeros_like(u), t_dynamic)
    du = -jnp.linalg.solve(J, along_p[0].u_next)
    along_u = linear(du, jax.tree_util.tree_map(jnp.zeros_like, t_dynamic))
    return jax.tree_util.tree_map(jnp.add, along_p, along_u)


def _orbit_tangent_abstract_eval(shooting, params, u, J, mono_ad, info, like, t):
    del shooting, params, u, J, mono_ad, info, t
    return like


def _orbit_tangent_jvp(primals, tangents):
    # The map is linear in `t_dynamic`; its other inputs are the primal solve's,
    # which carries no derivative of its own (second derivatives are not offered).
    *rest, t_dynamic = primals
    *t_rest, t_t_dynamic = tangents
    if any(t is not None for t in jax.tree_util.tree_leaves(t_rest)):
        raise NotImplementedError(
            "Second derivatives of orbit outputs (e.g. `jax.hessian`) are not "
            "supported."
        )
    out = eqxi.filter_primitive_bind(_orbit_tangent_p, *rest, t_dynamic)
    if t_t_dynamic is None:
        return out, jax.tree_util.tree_map(lambda _: None, out)
    t_t_dynamic = _tangent_parameters(t_dynamic, t_t_dynamic)
    return out, eqxi.filter_primitive_bind(_orbit_tangent_p, *rest, t_t_dynamic)


def _is_none(x):
    return x is None


def _zeros_where_none(cotangents, like):
    return jtu.tree_map(
        lambda ct, leaf: (
            (None if leaf is None else jnp.zeros_like(leaf)) if ct is None else ct
        ),
        cotangents,
        like,
        is_leaf=_is_none,
    )


def _orbit_tangent_transpose(inputs, cotangents):
    r"""The transpose of the tangent map, in reverse mode: one linearisation of
    the outputs in $(u, p)$ swept back twice, for their dependence on $(u, p)$
    and for $u$'s on $p$, $\bar p \mathrel{-}= P_p^\top w$ with
    $J^\top w = \bar u$."""
    shooting, params, u, J, mono_ad, info, like, _ = inputs
    adjoint = _reverse_adjoint(shooting.settings)
    dynamic, static = eqx.partition(params, eqx.is_inexact_array)
    # Cotangents of outputs that nothing reads come as `None` (symbolic zeros).
    orbit_cts, floquet_cts = cotangents
    monodromy = orbit_cts.reduced_jacobian is not None or any(
        ct is not None for ct in jtu.tree_leaves(floquet_cts, is_leaf=_is_none)
    )
    cotangents = (
        _zeros_where_none(orbit_cts, like[0]),
        _zeros_where_none(floquet_cts, like[1]) if monodromy else None,
    )

    def outputs(u_, dynamic_):
        p = eqx.combine(dynamic_, static)
        return _inexact(
            shooting.evaluate(u_, p, mono_ad, info, adjoint, monodromy=monodromy)
        )

    _, vjp_outputs = jax.vjp(outputs, u, dynamic)
    u_bar, p_bar = vjp_outputs(cotangents)
    w = jnp.linalg.solve(J.T, u_bar)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, cotangents)
    _, p_bar_implicit = vjp_outputs(eqx.tree_at(lambda o: o[0].u_next, zeros, -w))
    p_bar = jax.tree_util.tree_map(jnp.add, p_bar, p_bar_implicit)
    none = jax.tree_util.tree_map(lambda _: None, inputs[:-1])
    return (*none, p_bar)


# The derivative of an orbit is one linear map of the parameters' tangent, a
# primitive with a forward rule (its evaluation) and a reverse one (its transpose),
# as lineax does for linear solves: `jax.jvp`/`jax.jacfwd` and
# `jax.grad`/`jax.jacrev` then both work whatever `Settings.adjoint` says.
_orbit_tangent_p = eqxi.create_vprim(
    "hybrax_orbit_tangent",
    eqxi.filter_primitive_def(_orbit_tangent_impl),
    eqxi.filter_primitive_def(_orbit_tangent_abstract_eval),
    eqxi.filter_primitive_jvp(_orbit_tangent_jvp),
    eqxi.filter_primitive_transpose(materialise_zeros=False)(_orbit_tangent_transpose),
)


def _primal(shooting, params, u_guess):
    return shooting.primal(params, u_guess)


@eqx.filter_custom_jvp
def _orbit(params, u_guess, *, shooting):
    # Through one kept trace: JAX traces this function for the primal program and
    # the derivative rule below again; both reuse the first trace of the solve.
    return trace_once(_primal)(shooting, params, u_guess)[0]


@_orbit.def_jvp
def _orbit_jvp(primals, tangents, *, shooting):
    params, u_guess = primals
    t_params, _ = tangents
    outputs, (u, J, mono_ad, info) = trace_once(_primal)(shooting, params, u_guess)
    zeros = jax.tree_util.tree_map(_zero_tangent, outputs)
    if t_params is None:
        return outputs, zeros
    like = _inexact(outputs)
    tangent = eqxi.filter_primitive_bind(
        _orbit_tangent_p,
        shooting,
        params,
        u,
        J,
        mono_ad,
        info,
        like,
        _tangent_parameters(params, t_params),
    )
    # Integer outputs (codes, counts) keep their float0 zero tangents.
    return outputs, eqx.combine(
        tangent, eqx.filter(zeros, eqx.is_inexact_array, inverse=True)
    )


def _shoot(shooting, u_guess, params):
    # The orbit does not depend on the guess (derivatives flow through params).
    return _orbit(params, jax.lax.stop_gradient(u_guess), shooting=shooting)


def find_periodic_orbit(
    system: HybridSystem,
    section: PoincareSection,
    u_guess: "Float[Array, ' k'] | ShootingStart",
    params: Params,
    *,
    shooting: Shooting | None = None,
    settings: Settings | None = None,
    analyse: bool = True,
    phase_observables: bool = True,
    throw: bool = False,
) -> PeriodicOrbit:
    r"""Find a periodic orbit by shooting and, by default, analyse its stability.

    Solves $F(u) = \pi(P(\chi(u))) - u = 0$ (Zana et al. 2018 eq. 30) with an
    optimistix root finder (a [`hybrax.Shooting`][] holds it and its options);
    the return map $P$ runs one cycle of the section's
    transition sequence with the event engine of [`hybrax.simulate`][]. A solve
    that did not converge, whose residual exceeds the shooting's `residual_tol`
    (some solvers report success off a root), or whose cycle failed is never
    reported as converged: its status names the cause and its values are NaN.

    With `analyse=True` it also returns a [`hybrax.FloquetAnalysis`][]: the monodromy
    matrix by autodiff and by the saltation product, their discrepancy and the
    Floquet multipliers. Everything runs in one compiled function, under `jax.vmap`
    too.

    Every output is differentiable with respect to every floating leaf of
    `params`, by the implicit function theorem at the root ($\dot u = -J^{-1}
    F_p\dot p$ with $J = M - I$ from the variational pass; no differentiation
    through the root finder's iterations) and through one cycle at the solution.
    That derivative is one linear map of the parameters' tangent with a forward
    rule and its transpose (as `lineax.linear_solve` has), so both modes work
    with any `settings.adjoint`: `jax.jvp`, `jax.jacfwd`, `jax.linearize` (a
    tangent costs one forward pass of a cycle and of its variational pass) and
    `jax.grad`, `jax.jacrev`, `jax.value_and_grad` (a gradient costs one
    reverse pass, whatever the number of parameters). Second derivatives are not
    offered. The AD monodromy's derivative is the saltation product's (their
    values agree to the integration tolerance). A failed orbit's derivatives are
    NaN.

    **Arguments:**

    - `system`, `section`: the hybrid system and its [`hybrax.PoincareSection`][].
    - `u_guess`: initial guess of the reduced unknowns, or a
      [`hybrax.ShootingStart`][]: a rough guess's (`ShootingStart(u,
      loosening=math.inf)`), or `orbit.restart` to resume a solve cut short.
    - `params`: the parameter PyTree.
    - `shooting`: a [`hybrax.Shooting`][]: the root finder, `max_iterations`,
      `residual_tol`, the Jacobian of Newton's steps, return-map iterations and a
      fallback solver; default `hybrax.Shooting()` (the safeguarded
      `optimistix.Newton(rtol=1e-11, atol=1e-11)`, 40 iterations).
    - `settings`: a [`hybrax.Settings`][] for each cycle (its `t_max` bounds one
      cycle; both derivative modes work whatever its `adjoint`, see above).
    - `analyse`: also compute monodromy matrices and multipliers.
    - `phase_observables`: record the phase observables of the orbit's cycle
      (e.g. apex heights, `orbit.cycle.phase_observables`); `False` saves their
      cost (they need the cycle's dense output) when they are not wanted. Event
      observables (`orbit.T_c`, ...) are always recorded.
    - `throw`: raise an error carrying the status message if no orbit was found.

    **Safeguarded Newton.** A root finder such as the default Newton is kept
    inside the model's domain: a trial point whose cycle fails (its state leaves
    a mode, a phase is not viable, an event is not reached, a value is not
    finite) is rejected, and the next trial is half of Newton's step from the
    best iterate, then the return map's image of that iterate (accepted whenever
    its cycle runs). Where these iterates make no progress (the smallest defect
    $\max|F|$ not down by a tenth in 8 evaluations), a second pass starts from the
    guess with Deuflhard's natural monotonicity test on each step (the simplified
    Newton step at a trial, with the best iterate's Jacobian, must be shorter
    than Newton's step from the best iterate); no progress there either ends the
    solve. Near an orbit every Newton step is accepted, so the iterates are
    Newton's; far from one each rejection costs a cycle. A solve ends without an
    orbit where the guess fails, the return map's image of an accepted iterate
    fails, both passes stall, or the iterations run out; the orbit's
    `restart.safeguard` then holds the best iterate and its defect, and
    `orbit.describe_failure()` says which cycle failed.

    **Inexact Newton.** With the default step-size controller
    (`diffrax.PIDController`), an iteration far from the root integrates its
    cycle at a looser tolerance (never looser than 1e-5): after a step of
    relative size $r$, the next at about $r^4$, Newton's error two steps on
    (Dembo, Eisenstat & Steihaug 1982). The root finder stops only after an
    iteration at the settings' tolerance, whose cycle gives the reported orbit
    and its analysis: the root is the fixed-tolerance solve's to the root
    finder's tolerance.

    To follow an orbit as parameters change (a tuning loop, a sweep), start each
    solve from the previous `orbit.u` (warm start).

    **Returns:** the [`hybrax.PeriodicOrbit`][], its Floquet analysis in
    `orbit.floquet` (`None` when `analyse=False`).

    **Raises:** `ValueError` for bad arguments; with `throw=True`, an
    `equinox.EquinoxRuntimeError` when the orbit was not found.
    """
    check_float64("find_periodic_orbit")
    settings = resolve_settings(settings)
    _check_adjoint(settings)
    shooting = resolve_shooting(shooting)
    resolve_sequence(system, section)
    start = u_guess if isinstance(u_guess, ShootingStart) else ShootingStart(u_guess)
    u_guess = jnp.atleast_1d(jnp.asarray(start.u, dtype=jnp.result_type(float)))
    if u_guess.ndim != 1:
        raise ValueError(f"`u_guess` must be 1-D; got shape {u_guess.shape}.")
    if is_concrete(u_guess) and not bool(jnp.all(jnp.isfinite(u_guess))):
        raise ValueError(f"`u_guess` must be finite; got {np.asarray(u_guess)}.")
    _check_guess_shape(system, section, u_guess, params)
    safeguard = start.safeguard
    if safeguard is None:
        safeguard = ShootingSafeguard.fresh(u_guess)
    elif not isinstance(safeguard, ShootingSafeguard):
        raise ValueError(
            "`u_guess.safeguard` must be a solve's `orbit.restart.safeguard` or "
            f"None; got {type(safeguard).__name__}."
        )
    # Like the guess, the start carries no derivative.
    safeguard = jax.lax.stop_gradient(safeguard)
    max_iterations = shooting.max_iterations
    iterations_used = _check_used(start.iterations_used, max_iterations)
    # The return-map iterations come first: a resumed solve has taken them.
    map_iterations = _as_input(shooting.return_map_iterations, int)
    map_iterations = (
        np.where(iterations_used > 0, 0, map_iterations)
        if is_concrete(iterations_used) and is_concrete(map_iterations)
        else jnp.where(iterations_used > 0, 0, map_iterations)
    )
    params = canonical_params(params)
    # An eager analysed orbit runs as two programs (see `_solve_then_analyse`).
    inputs = (u_guess, params, settings, shooting, start, safeguard)
    split = analyse and all(map(is_concrete, jax.tree.leaves(inputs)))
    solve = _Shooting(
        system,
        section,
        settings,
        shooting.root_finder,
        max_iterations=_as_input(max_iterations, int),
        residual_tol=_as_input(shooting.residual_tol, float),
        return_map_iterations=map_iterations,
        first_loosening=_check_loosening(start.loosening),
        iterations_used=iterations_used,
        safeguard=safeguard,
        analyse=bool(analyse),
        jacobian=shooting.jacobian,
        phase_observables=bool(phase_observables),
        fallback=shooting.fallback,
        iteration_cap=iteration_cap(max_iterations),
        least_squares_iterations=max_iterations if shooting.least_squares else 0,
        ad_monodromy=not split,
    )
    label = system_label(system)
    if split:
        orbit, floquet = _solve_then_analyse(solve, u_guess, params, label)
    else:
        orbit, floquet = call(
            "the orbit search" + (" with its Floquet analysis" if analyse else ""),
            _shoot,
            (solve, u_guess, params),
            label=label,
        )
    if throw:
        orbit = raise_if_failed(orbit, orbit.result)
    return dataclasses.replace(orbit, floquet=floquet)


def _floquet_analysis(system, section, settings, state, params, mono_s, result):
    """The analysis's second half at a found orbit's state: the AD monodromy
    (forward mode through one cycle) and the multipliers of both routes, NaN
    where the orbit's `result` is not `successful`."""
    sequence = resolve_sequence(system, section)[0]
    mono_ad = _ad_monodromy(system, state, params, sequence, settings)
    mode0 = system.sources[sequence[0]]
    floquet = _floquet(system, section, state, params, mode0, mono_ad, mono_s)
    return masked_nan(floquet, result == RESULTS.successful)


def _solve_then_analyse(shooting, u_guess, params, label):
    """An eager analysed orbit as two programs: the solve with the saltation
    monodromy (`shooting.ad_monodromy` false), then the AD monodromy with the
    Floquet analysis. XLA compiles the first in another thread while the second
    is traced and compiled here (XLA compiles a program on one core and leaves
    the interpreter free). The values are those of the single program that a
    traced call (under `jax.jit`, `vmap` or a derivative) runs."""
    solve_program = prepare(
        "the orbit search with its saltation monodromy",
        _shoot,
        (shooting, u_guess, params),
        label=label,
        background=True,
    )
    # The analysis's inputs by their shapes (NumPy: nothing to dispatch).
    n, dtype = shooting.system.n_states, u_guess.dtype
    fixed = (shooting.system, shooting.section, shooting.settings)
    state, monodromy = np.zeros(n, dtype), np.zeros((n, n), dtype)
    analysis_program = prepare(
        "the AD monodromy and Floquet analysis",
        _floquet_analysis,
        (*fixed, state, params, monodromy, RESULTS.successful),
        label=label,
    )
    orbit, mono_s = solve_program(shooting, u_guess, params)
    floquet = analysis_program(*fixed, orbit.state, params, mono_s, orbit.result)
    return orbit, floquet


def _check_guess_shape(system, section, u_guess, params) -> None:
    """A `ValueError` where the guess has not as many entries as the section's
    coordinates (its chart would read past it, or leave entries unused)."""
    try:
        state = jax.eval_shape(section.chart, u_guess, params)
        coordinates = jax.eval_shape(section.coordinates, state, params)
    except (TypeError, IndexError, ValueError) as error:
        raise ValueError(
            f"`u_guess` of shape {u_guess.shape} does not fit the section's chart: "
            f"{error}"
        ) from None
    if state.shape != (system.n_states,):
        raise ValueError(
            f"the section's chart maps `u_guess` to a state of shape {state.shape}; "
            f"the system's states have shape ({system.n_states},)."
        )
    if coordinates.shape != u_guess.shape:
        raise ValueError(
            f"`u_guess` has {u_guess.shape[0]} entries; the section's coordinates "
            f"have {coordinates.shape[0] if coordinates.ndim else 0}."
        )


def _as_input(value, kind):
    """`value` as a run-time input of the compiled program (an array of the
    default `kind` dtype: NumPy where concrete, so that no device array is built
    per call)."""
    dtype = jnp.result_type(kind)
    if isinstance(value, jax.core.Tracer):
        return jnp.asarray(value, dtype)
    return np.asarray(value, dtype)


def iteration_cap(max_iterations: int) -> int:
    """The static bound of a shooting root finder's loop for `max_iterations`
    (a run-time value below it): one compiled program serves every
    `max_iterations` up to 64, and each power of two above."""
    return max(64, 1 << (int(max_iterations) - 1).bit_length())


def _check_used(iterations_used, max_iterations: int) -> Int[ArrayLike, ""]:
    """`iterations_used` as an int array (one compilation for every value): NumPy
    where concrete, which jit takes as an array argument without a device array
    built first (about 20 us a call)."""
    if isinstance(iterations_used, jax.core.Tracer):
        if jnp.shape(iterations_used) != () or not jnp.issubdtype(
            jnp.result_type(iterations_used), jnp.integer
        ):
            raise ValueError(
                "`ShootingStart.iterations_used` must be an integer scalar; got "
                "shape "
                f"{jnp.shape(iterations_used)}, dtype "
                f"{jnp.result_type(iterations_used)}."
            )
        return iterations_used
    value = np.asarray(iterations_used)
    if (
        value.shape != ()
        or not np.issubdtype(value.dtype, np.integer)
        or not 0 <= value < max_iterations
    ):
        raise ValueError(
            "`ShootingStart.iterations_used` must be an integer in [0, "
            "max_iterations); got "
            f"{iterations_used!r} (max_iterations {max_iterations})."
        )
    return value.astype(jnp.result_type(int))


def _check_loosening(first_loosening) -> Float[ArrayLike, ""]:
    """`first_loosening` as a float array (one compilation for every value), NumPy
    where concrete (as `_check_used`)."""
    dtype = jnp.result_type(float)
    if isinstance(first_loosening, jax.core.Tracer):
        if jnp.shape(first_loosening) != ():
            raise ValueError(
                "`ShootingStart.loosening` must be a scalar; got shape "
                f"{jnp.shape(first_loosening)}."
            )
        return jnp.asarray(first_loosening, dtype=dtype)
    value = np.asarray(first_loosening)
    if value.shape != () or value.dtype.kind not in "fiu" or not value >= 1:
        raise ValueError(
            f"`ShootingStart.loosening` must be a number >= 1; got {first_loosening!r}."
        )
    return value.astype(dtype)


@compiled("the monodromy", label=lambda system, *args: system_label(system))
def _analyse_state(system, section, state, params, settings):
    sequence, mode0 = resolve_sequence(system, section)
    dx_dx0, dt_dx0, sol = _cycle_jacobian(system, state, params, sequence, settings)
    mono_ad = _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol, sequence, params)
    u = section.coordinates(state, params)
    _, _, sol_s, mono_s = _variational_map(
        system, section, sequence, settings, u, params
    )
    ok = (sol.result == RESULTS.successful) & (sol_s.result == RESULTS.successful)
    floquet = _floquet(system, section, state, params, mode0, mono_ad, mono_s)
    return masked_nan(floquet, ok)


def monodromy(
    system: HybridSystem,
    section: PoincareSection,
    state: Float[Array, " n"],
    params: Params,
    *,
    settings: Settings | None = None,
) -> FloquetAnalysis:
    r"""Monodromy matrices (autodiff and saltation product) of one cycle started at
    `state` on the section, periodic or not: $\tilde\Phi$ is the Jacobian of the
    flow over the fixed duration of that cycle (eq. 36). See
    [`hybrax.find_periodic_orbit`][]. NaN if the cycle fails."""
    check_float64("monodromy")
    settings = resolve_settings(settings)
    if settings.adjoint is not None and not isinstance(
        settings.adjoint, dfx.ForwardMode
    ):
        raise ValueError(
            "`settings.adjoint`: `monodromy` is differentiable in forward mode only "
            f"(`diffrax.ForwardMode()` or None); got {type(settings.adjoint).__name__}."
        )
    state = jnp.asarray(state, dtype=jnp.result_type(float))
    if state.shape != (system.n_states,):
        raise ValueError(
            f"`state` must have shape ({system.n_states},); got {state.shape}."
        )
    return _analyse_state(system, section, state, canonical_params(params), settings)


@compiled("the return map", label=lambda system, *args: system_label(system))
def _poincare_map(system, section, u, params, settings, adjoint):
    sequence, _ = resolve_sequence(system, section)
    sol, _ = cycle(
        system, section.chart(u, params), params, sequence, settings, adjoint
    )
    u_next = section.coordinates(sol.x_after[-1], params)
    return masked_nan(u_next, sol.result == RESULTS.successful), sol


def poincare_map(
    system: HybridSystem,
    section: PoincareSection,
    u: Float[Array, " k"],
    params: Params,
    *,
    settings: Settings | None = None,
):
    r"""The return map in reduced coordinates, $u \mapsto \pi(P(\chi(u)))$.

    Runs one cycle of the section's transition sequence from the section state
    $\chi(u)$ and reads the unknowns off the state after the closing event. Pure and
    jittable; with the default `settings.adjoint` (reverse mode,
    `diffrax.RecursiveCheckpointAdjoint()`) differentiate it with `jax.grad`,
    `jax.jacrev`; with `diffrax.ForwardMode()`, with `jax.jacfwd`/`jax.jvp` (the
    event-time sensitivity included either way). Building block of shooting and
    continuation.

    **Returns:** `(u_next, solution)`; `solution.result` is `successful` only if the
    cycle ran as the section declares (`u_next` is NaN otherwise).
    """
    settings = resolve_settings(settings)
    adjoint = (
        dfx.RecursiveCheckpointAdjoint()
        if settings.adjoint is None
        else settings.adjoint
    )
    u = jnp.atleast_1d(jnp.asarray(u, dtype=jnp.result_type(float)))
    return _poincare_map(
        system, section, u, canonical_params(params), settings, adjoint
    )
