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

from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, Complex, Float, Int

from ._custom_types import Params
from ._hybrid import HybridSystem, MechanicalVectorField
from ._simulate import (
    RESULTS,
    _simulate_sequence,
    canonical_params,
    check_float64,
)


class PoincareSection(eqx.Module):
    r"""A Poincaré section given by the transition that closes one cycle.

    **Arguments:**

    - `sequence`: names (or indices) of the transitions of one cycle, in order; the
      last one defines the section (e.g. `("touchdown", "liftoff")`). A simulated
      cycle that fires another sequence is reported as `wrong_event_sequence`.
    - `chart`: `chart(u, params) -> x`, the state on the section for the reduced
      unknowns `u`; the states the section fixes are not unknowns.
    - `coordinates`: `coordinates(x, params) -> u`, reading the unknowns off a state.
    """

    sequence: tuple[int | str, ...] = eqx.field(static=True)
    chart: Callable[[Array, Params], Array]
    coordinates: Callable[[Array, Params], Array]

    def __check_init__(self):
        if len(self.sequence) < 1:
            raise ValueError("`sequence` must name at least one transition.")


class PeriodicOrbit(eqx.Module):
    r"""The result of [`hybrax.find_periodic_orbit`][].

    - `u`: the reduced unknowns at the section; `state`: the full section state.
    - `t_events`, `x_before`, `x_after`, `T_c`, `T_a`, `guard_at_start`: the events of
      one cycle (see [`hybrax.HybridSolution`][]); `phase_durations`: time in each
      phase; `period`: their sum.
    - `reduced_jacobian`: $M = J + I$ (eqs. 32-33), $J = \partial F/\partial u$.
    - `residual_norm`: $\max|F(u)|$ at the returned point; `n_steps`: Newton
      iterations; `result`: a [`hybrax.RESULTS`][] (`successful` only if the solver
      converged, the residual is below tolerance and the cycle ran as declared).
    """

    u: Float[Array, " k"]
    state: Float[Array, " n"]
    t_events: Float[Array, " E"]
    x_before: Float[Array, "E n"]
    x_after: Float[Array, "E n"]
    T_c: Float[Array, " E"]
    T_a: Float[Array, " E"]
    guard_at_start: Float[Array, " E"]
    phase_durations: Float[Array, " E"]
    period: Float[Array, ""]
    reduced_jacobian: Float[Array, "k k"]
    residual_norm: Float[Array, ""]
    n_steps: Int[Array, ""]
    result: RESULTS

    @property
    def converged(self):
        """Whether this is a valid periodic orbit."""
        return self.result == RESULTS.successful


class _Settings(eqx.Module):
    solver: Any
    stepsize_controller: Any
    root_finder: Any
    max_steps: int = eqx.field(static=True)
    t_max: float = eqx.field(static=True)


def _settings(rtol, atol, solver, max_steps, t_max):
    return _Settings(
        solver=dfx.Tsit5() if solver is None else solver,
        stepsize_controller=dfx.PIDController(rtol=rtol, atol=atol),
        root_finder=optx.Newton(rtol=1e-12, atol=1e-12),
        max_steps=int(max_steps),
        t_max=float(t_max),
    )


def _resolve_sequence(system: HybridSystem, section: PoincareSection):
    sequence = tuple(system.transition_index(k) for k in section.sequence)
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


def _cycle(system, x0, params, sequence, settings, adjoint):
    return _simulate_sequence(
        system,
        x0,
        params,
        jnp.zeros((), x0.dtype),
        jnp.asarray(settings.t_max, x0.dtype),
        sequence,
        settings.solver,
        settings.stepsize_controller,
        settings.root_finder,
        adjoint,
        settings.max_steps,
        1e-9,
    )


def _cycle_result(sol, sequence):
    expected = jnp.asarray(sequence, dtype=jnp.int32)
    right_sequence = jnp.all(sol.transitions == expected)
    return RESULTS.where(
        sol.result == RESULTS.successful,
        RESULTS.where(right_sequence, RESULTS.successful, RESULTS.wrong_event_sequence),
        sol.result,
    )


def _cycle_jacobian(system, x0, params, sequence, settings):
    """One cycle from `x0` and its forward-mode Jacobian: `(x_e, t_e)`, their
    derivatives with respect to `x0`, and the simulation."""

    def flow(x):
        sol = _cycle(system, x, params, sequence, settings, dfx.ForwardMode())
        return (sol.x_after[-1], sol.t_events[-1]), sol

    (dx_dx0, dt_dx0), sol = jax.jacfwd(flow, has_aux=True)(x0)
    return dx_dx0, dt_dx0, sol


def _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol, params):
    # Phi~ = d x_e^+ / d x0 - f^+(x_e^+) d t_e / d x0: the flow over the fixed
    # duration t_e, continued past the last event with the post-event field.
    f_plus = jax.lax.switch(
        sol.mode_final,
        [m.vector_field for m in system.modes],
        sol.t_events[-1],
        sol.x_after[-1],
        params,
    )
    return dx_dx0 - jnp.outer(f_plus, dt_dx0)


def _variational_map(system, section, sequence, settings, u, params):
    r"""The return map and its Jacobian from the variational equations and saltation
    matrices (no AD through the solver): `(u_next, M, solution, monodromy)` with
    $M = \pi_x(\tilde\Phi + f^+\,\partial t_e/\partial x_0)\chi_u$."""
    x0 = section.chart(u, params)
    sol, monodromy, dt_dx0 = _simulate_sequence(
        system,
        x0,
        params,
        jnp.zeros((), x0.dtype),
        jnp.asarray(settings.t_max, x0.dtype),
        sequence,
        settings.solver,
        settings.stepsize_controller,
        settings.root_finder,
        # A plain while loop: nothing differentiates through this solve (its
        # derivative is the variational one), and checkpointing costs time.
        dfx.ForwardMode(),
        settings.max_steps,
        1e-9,
        True,
    )
    x_end = sol.x_after[-1]
    field_after = system.modes[system.targets[sequence[-1]]].vector_field
    f_plus = field_after(sol.t_events[-1], x_end, params)
    dx_dx0 = monodromy + jnp.outer(f_plus, dt_dx0)
    chart_jac = jax.jacfwd(section.chart)(u, params)
    coord_jac = jax.jacfwd(section.coordinates)(x_end, params)
    M = coord_jac @ dx_dx0 @ chart_jac
    return (
        section.coordinates(x_end, params),
        M,
        _with_cycle_result(sol, sequence),
        (monodromy),
    )


def _variational_return_map(system, section, sequence, settings):
    r"""The return map $u \mapsto u'$ whose derivative in $u$ is the variational
    Jacobian $M$ (a `jax.custom_jvp`): Newton then needs one augmented solve per
    iteration instead of forward-mode AD through the solver."""

    @jax.custom_jvp
    def return_map(u, params):
        return _variational_map(system, section, sequence, settings, u, params)[0]

    def return_map_jvp(primals, tangents):
        u, params = primals
        du, dparams = tangents
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
        u_next, M, _, _ = _variational_map(
            system, section, sequence, settings, u, params
        )
        if isinstance(du, SymbolicZero):
            return u_next, jnp.zeros_like(u_next)
        return u_next, M @ du

    return_map.defjvp(return_map_jvp, symbolic_zeros=True)
    return return_map


def _shoot_and_analyse(
    system,
    section,
    u_guess,
    params,
    settings,
    root_solver,
    max_iterations,
    residual_tol,
    analyse,
    jacobian,
):
    sequence, mode0 = _resolve_sequence(system, section)

    if jacobian == "variational":
        return_map = _variational_return_map(system, section, sequence, settings)

        def residual(u, p):
            return return_map(u, p) - u

    else:

        def residual(u, p):
            x0 = section.chart(u, p)
            sol = _cycle(system, x0, p, sequence, settings, dfx.ForwardMode())
            return section.coordinates(sol.x_after[-1], p) - u

    root = optx.root_find(
        residual,
        root_solver,
        u_guess,
        args=params,
        max_steps=max_iterations,
        throw=False,
    )
    u = root.value
    state = section.chart(u, params)
    # At the solution, the variational pass gives the residual, the reduced Jacobian
    # M = J + I (eqs. 32-33) and the saltation-product monodromy (eq. 36) at once.
    u_next, M, sol, mono_s = _variational_map(
        system, section, sequence, settings, u, params
    )
    F = u_next - u
    residual_norm = jnp.max(jnp.abs(F))
    ok = (
        (root.result == optx.RESULTS.successful)
        & (residual_norm <= residual_tol)
        & jnp.all(jnp.isfinite(u))
    )
    # A failed shooting solve is reported as such first (its last iterate may have
    # wandered where the cycle itself fails); then a cycle that failed at the root.
    result = RESULTS.where(ok, sol.result, RESULTS.shooting_failed)
    t_start = jnp.concatenate([jnp.zeros((1,), u.dtype), sol.t_events[:-1]])
    orbit = PeriodicOrbit(
        u=u,
        state=state,
        t_events=sol.t_events,
        x_before=sol.x_before,
        x_after=sol.x_after,
        T_c=sol.T_c,
        T_a=sol.T_a,
        guard_at_start=sol.guard_at_start,
        phase_durations=sol.t_events - t_start,
        period=sol.t_events[-1],
        reduced_jacobian=M,
        residual_norm=residual_norm,
        n_steps=root.stats["num_steps"],
        result=result,
    )
    if not analyse:
        return orbit, None
    # The independent route: forward-mode AD through the composite flow.
    dx_dx0, dt_dx0, sol_ad = _cycle_jacobian(system, state, params, sequence, settings)
    mono_ad = _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol_ad, params)
    return orbit, _floquet(system, state, params, mode0, mono_ad, mono_s)


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
    - `multipliers_ad`, `multipliers_saltation`: eigenvalues of $B^T\tilde\Phi B$,
      the trivial one removed, sorted by decreasing modulus.
    - `trivial_ad`, `trivial_saltation`: the trivial multiplier (ideally 1).
    """

    monodromy_ad: Float[Array, "n n"]
    monodromy_saltation: Float[Array, "n n"]
    max_discrepancy: Float[Array, ""]
    tangent_basis: Float[Array, "n r"]
    multipliers_ad: Complex[Array, " r-1"]
    multipliers_saltation: Complex[Array, " r-1"]
    trivial_ad: Complex[Array, ""]
    trivial_saltation: Complex[Array, ""]

    @property
    def leading_multiplier(self):
        """The nontrivial multiplier of largest modulus (autodiff)."""
        return self.multipliers_ad[0]


def floquet_multipliers(
    monodromy: Float[Array, "n n"], tangent_basis: Float[Array, "n r"] | None = None
) -> tuple[Complex[Array, ""], Complex[Array, " r-1"]]:
    r"""Floquet multipliers: the eigenvalues $\nu_i$ of $B^T\tilde\Phi B$.

    The trivial multiplier (the flow direction; 1 for an autonomous orbit, Zana et al.
    2018 section 3.5) is taken as the eigenvalue closest to 1 and returned apart; the
    others are sorted by decreasing modulus. The orbit is asymptotically stable if all
    nontrivial $|\nu_i| < 1$.

    **Returns:** `(trivial, nontrivial)`.
    """
    if tangent_basis is not None:
        monodromy = tangent_basis.T @ monodromy @ tangent_basis
    eig = jnp.linalg.eigvals(monodromy)
    trivial_index = jnp.argmin(jnp.abs(eig - 1.0))
    trivial = eig[trivial_index]
    others = jnp.delete(eig, trivial_index, assume_unique_indices=True)
    order = jnp.argsort(-jnp.abs(others))
    return trivial, others[order]


def _floquet(system, state, params, mode0, mono_ad, mono_s):
    basis = constraint_tangent_basis(system, mode0, state, params)
    trivial_ad, mult_ad = floquet_multipliers(mono_ad, basis)
    trivial_s, mult_s = floquet_multipliers(mono_s, basis)
    return FloquetAnalysis(
        monodromy_ad=mono_ad,
        monodromy_saltation=mono_s,
        max_discrepancy=jnp.max(jnp.abs(mono_ad - mono_s)),
        tangent_basis=basis,
        multipliers_ad=mult_ad,
        multipliers_saltation=mult_s,
        trivial_ad=trivial_ad,
        trivial_saltation=trivial_s,
    )


_find_and_analyse = eqx.filter_jit(_shoot_and_analyse)


def find_periodic_orbit(
    system: HybridSystem,
    section: PoincareSection,
    u_guess: Float[Array, " k"],
    params: Params,
    *,
    root_solver: optx.AbstractRootFinder | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    solver: dfx.AbstractAdaptiveSolver | None = None,
    max_steps: int = 4096,
    t_max: float = 50.0,
    max_iterations: int = 40,
    residual_tol: float = 1e-8,
    analyse: bool = True,
    jacobian: str = "autodiff",
) -> tuple[PeriodicOrbit, FloquetAnalysis | None]:
    r"""Find a periodic orbit by shooting and, by default, analyse its stability.

    Solves $F(u) = \pi(P(\chi(u))) - u = 0$ (Zana et al. 2018 eq. 30) with an
    optimistix root finder (default `optimistix.Newton(rtol=1e-11, atol=1e-11)`); the
    return map $P$ runs one cycle of the section's transition sequence with
    [`hybrax.simulate`][]. A solve that did not converge, whose residual exceeds
    `residual_tol` (some solvers report success off a root), or whose cycle failed is
    flagged in `orbit.result` and never reported as converged.

    With `analyse=True` it also returns a [`hybrax.FloquetAnalysis`][]: the monodromy
    matrix by autodiff and by the saltation product, their discrepancy and the
    Floquet multipliers. Everything runs in one compiled function, under `jax.vmap`
    too.

    **Arguments:**

    - `system`, `section`: the hybrid system and its [`hybrax.PoincareSection`][].
    - `u_guess`: initial guess of the reduced unknowns.
    - `params`: the parameter PyTree.
    - `root_solver`: any `optimistix.AbstractRootFinder`.
    - `rtol`, `atol`, `solver`, `max_steps`, `t_max`: integration settings per cycle.
    - `max_iterations`: root-finder iteration limit.
    - `residual_tol`: the largest $\max|F|$ accepted as an orbit.
    - `analyse`: also compute monodromy matrices and multipliers.
    - `jacobian`: how Newton differentiates the return map. `"autodiff"` (default):
      forward-mode AD through diffrax, which also lets `jax.grad`/`jax.jvp` reach
      the orbit through the parameters (implicit function theorem).
      `"variational"`: the first variational equation integrated with the state
      and the saltation matrices at the events (one augmented solve per
      iteration); derivatives with respect to the parameters are then unavailable.

    **Returns:** `(orbit, floquet)`; `floquet` is `None` when `analyse=False`.
    """
    check_float64("find_periodic_orbit")
    if root_solver is None:
        root_solver = optx.Newton(rtol=1e-11, atol=1e-11)
    if int(max_iterations) < 1:
        raise ValueError(f"`max_iterations` must be positive; got {max_iterations}.")
    _resolve_sequence(system, section)
    u_guess = jnp.atleast_1d(jnp.asarray(u_guess, dtype=jnp.result_type(float)))
    if u_guess.ndim != 1:
        raise ValueError(f"`u_guess` must be 1-D; got shape {u_guess.shape}.")
    if jacobian not in ("variational", "autodiff"):
        raise ValueError(
            f"`jacobian` must be 'variational' or 'autodiff'; got {jacobian!r}."
        )
    settings = _settings(rtol, atol, solver, max_steps, t_max)
    return _find_and_analyse(
        system,
        section,
        u_guess,
        canonical_params(params),
        settings,
        root_solver,
        int(max_iterations),
        float(residual_tol),
        bool(analyse),
        jacobian,
    )


@eqx.filter_jit
def _analyse_state(system, section, state, params, settings):
    sequence, mode0 = _resolve_sequence(system, section)
    dx_dx0, dt_dx0, sol = _cycle_jacobian(system, state, params, sequence, settings)
    mono_ad = _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol, params)
    u = section.coordinates(state, params)
    _, _, _, mono_s = _variational_map(system, section, sequence, settings, u, params)
    return _floquet(system, state, params, mode0, mono_ad, mono_s)


def monodromy(
    system: HybridSystem,
    section: PoincareSection,
    state: Float[Array, " n"],
    params: Params,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    solver: dfx.AbstractAdaptiveSolver | None = None,
    max_steps: int = 4096,
    t_max: float = 50.0,
) -> FloquetAnalysis:
    r"""Monodromy matrices (autodiff and saltation product) of one cycle started at
    `state` on the section, periodic or not: $\tilde\Phi$ is the Jacobian of the flow
    over the fixed duration of that cycle (eq. 36). See
    [`hybrax.find_periodic_orbit`][]."""
    check_float64("monodromy")
    settings = _settings(rtol, atol, solver, max_steps, t_max)
    state = jnp.asarray(state, dtype=jnp.result_type(float))
    return _analyse_state(system, section, state, canonical_params(params), settings)


@eqx.filter_jit
def _poincare_map(system, section, u, params, settings):
    sequence, _ = _resolve_sequence(system, section)
    sol = _cycle(
        system,
        section.chart(u, params),
        params,
        sequence,
        settings,
        dfx.ForwardMode(),
    )
    u_next = section.coordinates(sol.x_after[-1], params)
    return u_next, _with_cycle_result(sol, sequence)


def _with_cycle_result(sol, sequence):
    return eqx.tree_at(lambda s: s.result, sol, _cycle_result(sol, sequence))


def poincare_map(
    system: HybridSystem,
    section: PoincareSection,
    u: Float[Array, " k"],
    params: Params,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    solver: dfx.AbstractAdaptiveSolver | None = None,
    max_steps: int = 4096,
    t_max: float = 50.0,
):
    r"""The return map in reduced coordinates, $u \mapsto \pi(P(\chi(u)))$.

    Runs one cycle of the section's transition sequence from the section state
    $\chi(u)$ and reads the unknowns off the state after the closing event. Pure and
    jittable; differentiate it with `jax.jacfwd`/`jax.jvp` (forward mode through
    the event chain, event-time sensitivity included). Building block of shooting
    and continuation.

    **Returns:** `(u_next, solution)`; `solution.result` is `successful` only if the
    cycle ran as the section declares.
    """
    settings = _settings(rtol, atol, solver, max_steps, t_max)
    u = jnp.atleast_1d(jnp.asarray(u, dtype=jnp.result_type(float)))
    return _poincare_map(system, section, u, canonical_params(params), settings)
