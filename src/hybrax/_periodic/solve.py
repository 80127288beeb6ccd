"""The shooting solve and the orbit program."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import ArrayLike, Float, Int

from .._hybrid import HybridSystem
from .._settings import (
    Settings,
)
from .._simulate import cycle_admissible, release_names, stacked_observables
from .._solution import RESULTS, masked_nan
from .cycle import (
    _ad_monodromy,
    _variational_return_map,
    cycle,
    resolve_sequence,
    variational_map,
)
from .floquet import _floquet
from .newton import (
    ShootingSafeguard,
    ShootingStart,
    _as_return_map_step,
    _base_tol,
    _finite_or,
    _for_iteration,
    _orbit_status,
    _residual_or_identity,
    _ShootingRootFinder,
    _stalled,
    loosen_max,
)
from .section import PeriodicOrbit, PoincareSection


def cycle_orbit(u, u_next, state, solution, reduced_jacobian, result, n_steps=None):
    r"""The [`hybrax.PeriodicOrbit`][] of one cycle from the section state `state`
    with unknowns `u` and their image `u_next`: the phase durations and the
    period from the cycle's event times, the residual $\max|u' - u|$, the given
    reduced Jacobian and status, and a fresh restart at `u`. The one way an
    orbit is assembled: by the shooting, for a tuning step's open cycle, and for
    the points of a branch."""
    dtype = u.dtype
    if n_steps is None:
        n_steps = jnp.zeros((), jnp.int32)
    t_start = jnp.concatenate([jnp.zeros((1,), dtype), solution.t_events[:-1]])
    return PeriodicOrbit(
        u=u,
        u_next=u_next,
        state=state,
        cycle=solution,
        phase_durations=solution.t_events - t_start,
        period=solution.t_events[-1],
        reduced_jacobian=reduced_jacobian,
        residual_norm=jnp.max(jnp.abs(u_next - u)),
        n_steps=n_steps,
        result=result,
        restart=ShootingStart(
            u=jax.lax.stop_gradient(u),
            loosening=jnp.ones((), dtype),
            iterations_used=jnp.zeros((), n_steps.dtype),
            safeguard=ShootingSafeguard.fresh(jax.lax.stop_gradient(u)),
        ),
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
    `monodromy` is `None`.

    It is one function because it builds one traced program: the root finder's loop and
    the diagnosed pass share the residual, its options and the safeguard's state."""
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
        # columns only (a cheaper pass than one with all n). With it they carry
        # all n, so that the last one holds the saltation monodromy: k-column
        # passes and a final full one would run an analysed orbit faster, but two
        # kinds of pass compile for seconds longer and make a larger program for
        # the command line to load.
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
                root_finder, _base_tol(settings), loosen_max(settings), safeguard
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
        u_next, M, sol, mono_s = variational_map(
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
    system,
    section,
    sequence,
    params,
    u,
    u_next,
    M,
    sol,
    mono_s,
    mono_ad,
    info,
    guard_tol,
):
    """The orbit and its Floquet analysis from one variational pass at `u` (and
    the AD monodromy, or `None`); `info` = `(root_ok, last_result, n_steps,
    residual_tol)` from the solve. Values of a failed orbit are NaN; a converged
    orbit that breaks a declared boundary keeps them, with the status
    `inadmissible_orbit`."""
    root_ok, last_result, n_steps, residual_tol = info
    residual_norm = jnp.max(jnp.abs(u_next - u))
    converged, result = _orbit_status(
        root_ok, last_result, sol, residual_norm, residual_tol, u
    )
    # Its phases' starts and its impacts' release velocities, which every cycle
    # records. A declared clearance (a grazing boundary of continuation) is read
    # only where phase observables are recorded, so it does not decide a status
    # (which must not depend on `phase_observables`).
    E, dtype = sol.t_events.shape[0], sol.t_events.dtype
    release = stacked_observables(sol.observables, release_names(system), E, dtype)
    admissible = cycle_admissible(
        sol.guard_at_start, jnp.zeros((E, 0), dtype), release, guard_tol
    )
    result = RESULTS.where(converged & ~admissible, RESULTS.inadmissible_orbit, result)
    orbit = cycle_orbit(
        u, u_next, section.chart(u, params), sol, M, result, n_steps=n_steps
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
            self.settings.guard_tol,
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
        model's second derivatives (reverse mode through it adds seconds of
        tracing to a `jax.grad` of the period)."""
        # Undiagnosed (a smaller program): the solve diagnosed this cycle already.
        # Should the pass find other events than the solve did (a dip only the
        # diagnosed pass catches), its derivatives would belong to another cycle:
        # they are NaN then. In forward mode the loop carries its tangents from
        # the start: one transformation of its body instead of three.
        seed = isinstance(adjoint, dfx.ForwardMode)
        if monodromy:
            u_next, M, sol, mono_s = variational_map(
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
                seed_tangents=seed,
            )
        else:
            sol, u_next = self.next_section_state(
                u, params, adjoint, self.phase_observables, seed_tangents=seed
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
            self.settings.guard_tol,
        )

    def next_section_state(
        self, u, params, adjoint, phase_observables=False, *, seed_tangents=False
    ):
        """One plain, undiagnosed cycle from the section state of `u`:
        `(solution, u_next)` (`seed_tangents`: see `run_events`)."""
        sol, _ = cycle(
            self.system,
            self.section.chart(u, params),
            params,
            self.sequence,
            self.settings,
            adjoint,
            phase_observables=phase_observables,
            diagnose=False,
            seed_tangents=seed_tangents,
        )
        return sol, self.section.coordinates(sol.x_after[-1], params)


def iteration_cap(max_iterations: int) -> int:
    """The static bound of a shooting root finder's loop for `max_iterations`
    (a run-time value below it): one compiled program serves every
    `max_iterations` up to 64, and each power of two above."""
    return max(64, 1 << (int(max_iterations) - 1).bit_length())
