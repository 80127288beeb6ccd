"""The safeguarded, inexact Newton of the shooting solve."""

import dataclasses
from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike, Float, Int

from .._settings import (
    Settings,
)
from .._solution import RESULTS


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
    return loosened(_with_horizon(settings, t_max), loosen)


def _base_tol(settings: Settings):
    """The default controller's tolerance, `max(rtol, atol)` (a run-time value);
    `None` for any other controller (never loosened)."""
    controller = settings.stepsize_controller
    if not isinstance(controller, dfx.PIDController):
        return None
    return jnp.maximum(controller.rtol, controller.atol)


def loosen_max(settings: Settings):
    """The largest loosening: to `_LOOSE_TOL` (1 where that is not looser)."""
    tol = _base_tol(settings)
    return 1.0 if tol is None else jnp.maximum(1.0, _LOOSE_TOL / tol)


def loosened(settings: Settings, loosen) -> Settings:
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
        """The memory of a solve starting at `u`: nothing evaluated yet (NumPy
        arrays where `u` is concrete: nothing dispatched for an eager call)."""
        return cls(*cls._fresh_fields(u))

    @staticmethod
    def _fresh_fields(u) -> tuple:
        """`fresh`'s fields in their order, as a tuple (an orbit call packs
        them into its run-time values without building a Module)."""
        xp = jnp if isinstance(u, jax.core.Tracer) else np
        u = xp.asarray(u)
        return (
            u,  # best_iterate
            u,  # best_image
            xp.zeros_like(u),  # best_step
            xp.full(u.shape * 2, np.nan, u.dtype),  # best_jacobian
            xp.full((), np.inf, u.dtype),  # best_defect
            xp.asarray(_NEWTON, np.int32),  # trial
            xp.full((), np.inf, u.dtype),  # least_defect
            xp.asarray(0, np.int32),  # stale
            xp.asarray(False),  # strict
            u,  # start
            xp.asarray(False),  # rejected
            xp.asarray(False),  # dead
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
    A cycle at a loose tolerance costs a fraction of one at the settings' own,
    and Newton takes as many iterations, so a sweep runs more orbits per second
    (see docs/pages/performance.md).

    **Idle lanes.** `idle` is `True` once the wrapped solver has stopped
    (converged, failed or at a non-finite iterate), so that the residual runs a
    cycle of zero length. Under `vmap` the root finder's while loop runs its body
    for every lane until the last one stops, and discards the stopped lanes'
    results; their cycles still run, and the integration's while loop lasts as
    long as its slowest lane. A lane stopped at a cycle that ran to `t_max`
    (several times a period) then made every later iteration of its chunk as
    slow. The flag is the loop's own test:
    this solver's `terminate` and result at the state and iterate the loop tests
    next, computed in `step` after the update (as `optimistix`'s loop does), so an
    idle evaluation is always one whose result the loop discards."""

    solver: optx.AbstractRootFinder
    base_tol: ArrayLike | None  # None: never loosened
    loosen_max: ArrayLike  # `loosen_max(settings)`
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
