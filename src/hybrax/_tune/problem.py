"""The tuning's objective as programs: the penalised objective of an orbit with
its gradient, the existence stage's residual with its Jacobian, and the compiled
calls of the minimiser's steps, which step on those evaluations.
"""

from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import ArrayLike

from .._compile import compiled
from .._continuation_parameter import AbstractParameter
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._periodic import (
    PeriodicOrbit,
    PoincareSection,
    cycle,
    cycle_orbit,
    find_periodic_orbit,
    resolve_sequence,
)
from .._program_store import StoredModel, traced_model
from .._settings import (
    Settings,
    Shooting,
)
from .._solution import RESULTS, masked_nan


class OrbitDiagnostics(eqx.Module):
    """What an evaluation of the tuning objective reports besides its value
    (internal): the orbit's reduced unknowns `u`, `spectral_radius`,
    `multipliers` and status `result`, the targets' and bounds' `violations`,
    and the objective's `raw` value before its scale."""

    u: Any
    spectral_radius: Any
    multipliers: Any
    result: Any
    violations: Any
    raw: Any


class _Problem(eqx.Module):
    """The objective of [`hybrax.tune`][] as a function `f(y, args) -> (J, aux)`
    of the scaled values `y` of the varied parameters; `args` is the warm start.
    """

    system: HybridSystem
    section: PoincareSection
    params: Params
    vary: tuple[AbstractParameter, ...]
    scale: jax.Array
    objective: Callable[[PeriodicOrbit, Params], Any] | None
    constraints: tuple[Callable[[PeriodicOrbit, Params], Any], ...]
    tolerances: jax.Array
    # Run-time values: another bound, weight or iteration count compiles nothing.
    max_multiplier: ArrayLike | None
    stability_weight: ArrayLike
    objective_scale: ArrayLike
    settings: Settings
    shooting: Shooting

    def _traced_model(self) -> StoredModel:
        """Where the problem's functions of the user's own are, for the store of
        traced programs (see [`hybrax._program_store.StoredModel`][]): its
        model, the varied parameters, and the objective and constraints as
        functions of the orbit that an evaluation finds."""
        functions = (self.objective,) if self.objective is not None else ()
        return StoredModel(
            self.system,
            self.section,
            self.params,
            self.vary,
            functions + tuple(self.constraints),
            orbit_in_output=_evaluation_orbit,
        )

    def with_values(self, y):
        params = self.params
        for i, parameter in enumerate(self.vary):
            params = parameter.set(params, y[i] * self.scale[i])
        return params

    def value_of(self, orbit, params, widen):
        """The objective (over `objective_scale`) with its penalties, the
        constraints' violations and the objective itself, of a found `orbit` at
        `params`."""
        dtype = orbit.u.dtype
        if self.objective is None:
            raw = jnp.zeros((), dtype)
        else:
            raw = jnp.asarray(self.objective(orbit, params), dtype=dtype)
        value = raw / self.objective_scale
        violations = jnp.stack(
            [jnp.asarray(c(orbit, params), dtype=dtype) for c in self.constraints]
            or [jnp.zeros((), dtype)]
        )
        if self.constraints:
            value = value + jnp.sum((violations / (widen * self.tolerances)) ** 2)
        if self.max_multiplier is not None:
            # Aim a hair inside the bound (0.1%), so that the balance of the
            # penalty against the objective leaves the result strictly below it.
            bound = self.max_multiplier * (1 - 1e-3)
            excess = jnp.maximum(orbit.spectral_radius - bound, 0.0)
            value = value + self.stability_weight * excess**2
        return value, violations, raw

    def solved(self, y, args):
        """The objective (as `value_of`), the diagnostics the host reads, and
        the orbit found at `y` from the guess in `args`."""
        u_guess, widen = args
        params = self.with_values(y)
        orbit = find_periodic_orbit(
            self.system,
            self.section,
            u_guess,
            params,
            shooting=self.shooting,
            settings=self.settings,
            analyse=False,
        )
        value, violations, raw = self.value_of(orbit, params, widen)
        aux = OrbitDiagnostics(
            u=orbit.u,
            spectral_radius=orbit.spectral_radius,
            multipliers=orbit.multipliers,
            result=orbit.result,
            violations=violations,
            raw=raw,
        )
        return value, aux, orbit

    def evaluate(self, y, args):
        value, aux, _ = self.solved(y, args)
        return value, jax.lax.stop_gradient((value, aux))

    def __call__(self, y, args):
        return self.evaluate(y, args)


@eqx.filter_custom_vjp
def _forward_gradient(y, args, problem):
    return problem.evaluate(y, args)


@_forward_gradient.def_fwd
def _forward_gradient_fwd(perturbed, y, args, problem):
    del perturbed

    def value(y_):
        f, aux = problem.evaluate(y_, args)
        return f, (f, aux)

    gradient, (f, aux) = jax.jacfwd(value, has_aux=True)(y)
    return (f, aux), gradient


@_forward_gradient.def_bwd
def _forward_gradient_bwd(gradient, grad_out, perturbed, y, args, problem):
    del perturbed, y, args, problem
    g_value = grad_out[0]
    return jnp.zeros_like(gradient) if g_value is None else g_value * gradient


class ForwardProblem(eqx.Module):
    """The same objective whose gradient is taken in forward mode (one tangent per
    varied parameter), presented to the minimiser as a reverse-mode rule."""

    problem: _Problem

    def __call__(self, y, args):
        return _forward_gradient(y, args, self.problem)


class _Seek(eqx.Module):
    r"""The existence stage of [`hybrax.tune`][]: the residual
    $r(u, y) = \big(P(u; p(y)) - u,\ c_i/\tau_i\big)$ of the periodicity defect
    and the constraints (read on the open cycle from $u$), for
    `optimistix.LevenbergMarquardt` over the unknowns and the varied parameters
    together; NaN where the cycle fails (the solver's trust region then
    shrinks)."""

    problem: _Problem
    settings: Settings
    n_unknowns: int = eqx.field(static=True)

    def __call__(self, z, width):
        problem = self.problem
        u, y = z[: self.n_unknowns], z[self.n_unknowns :]
        params = problem.with_values(y)
        sequence, _ = resolve_sequence(problem.system, problem.section)
        state = problem.section.chart(u, params)
        sol, _ = cycle(
            problem.system, state, params, sequence, self.settings, dfx.ForwardMode()
        )
        ok = sol.result == RESULTS.successful
        u_next = problem.section.coordinates(sol.x_after[-1], params)
        defect = u_next - u
        # The cycle as an open orbit, for the constraints' quantities (those of
        # the multipliers are NaN: there is no periodic orbit yet).
        open_orbit = cycle_orbit(
            u,
            u_next,
            state,
            sol,
            jnp.full((u.shape[0],) * 2, jnp.nan, z.dtype),
            sol.result,
        )
        violations = [
            jnp.asarray(c(open_orbit, params), dtype=z.dtype) / (width * tol)
            for c, tol in zip(problem.constraints, problem.tolerances)
        ]
        residual = (
            jnp.concatenate([defect, jnp.stack(violations)]) if violations else defect
        )
        residual = masked_nan(residual, ok)
        aux = (jnp.max(jnp.abs(defect)), sol.result)
        return residual, jax.lax.stop_gradient(aux)


@compiled("the existence stage's residual")
def _seek_evaluated(seek, z, width):
    """The existence stage's residual at `z` with its Jacobian (forward mode, one
    lane per unknown) and auxiliary output: `(residual, jacobian, aux)`."""

    def residual(z_):
        r, aux = seek(z_, width)
        return r, (r, aux)

    jacobian, (r, aux) = jax.jacfwd(residual, has_aux=True)(z)
    return r, jacobian, aux


@compiled("the tuning start values")
def _batched_values(problem, y):
    return jax.vmap(problem.with_values)(y)


@compiled("the tuning values")
def _values_of(problem, orbits, params):
    def one(orbit, params_):
        return problem.value_of(orbit, params_, jnp.ones((), orbit.u.dtype))[0]

    return jax.vmap(one)(orbits, params)


def _host(aux) -> tuple[np.ndarray, "OrbitDiagnostics"]:
    """`(f, diagnostics)` of an evaluation's auxiliary output, on the host (the
    status stays a `RESULTS` item)."""
    f, diagnostics = aux
    return np.asarray(f), OrbitDiagnostics(
        u=np.asarray(diagnostics.u),
        spectral_radius=np.asarray(diagnostics.spectral_radius),
        multipliers=np.asarray(diagnostics.multipliers),
        result=diagnostics.result,
        violations=np.asarray(diagnostics.violations),
        raw=np.asarray(diagnostics.raw),
    )


def _evaluation_orbit(output):
    """The orbit in the output of `_evaluated`."""
    return output[2]


def _problem_model(arguments: dict) -> "StoredModel | None":
    """The model of a tuning program's problem for the store of traced
    programs."""
    return traced_model(arguments["problem"])


@compiled("the tuning objective", model=_problem_model)
def _evaluated(problem, y, args, forward: bool):
    r"""The objective at `y` from the warm start in `args`, its gradient and the
    orbit found: `((f, aux), gradient, orbit)`, with `(f, aux)` as
    `problem.evaluate` gives them. The gradient is the orbit's implicit-function
    derivative, by `jax.grad` (reverse mode) or `jax.jacfwd` (`forward`).

    The tuning's one program with an orbit solve: the minimiser steps on its
    evaluations (see [`hybrax._tune.problem.Evaluated`][]), and the first
    evaluation, the result's orbit and the command line's verification come
    from it too."""

    def value(y_):
        f, aux, orbit = problem.solved(y_, args)
        return f, ((f, aux), orbit)

    differentiate = jax.jacfwd if forward else jax.grad
    gradient, ((f, aux), orbit) = differentiate(value, has_aux=True)(y)
    return jax.lax.stop_gradient((f, (f, aux))), gradient, orbit


@jax.custom_jvp
def _as_evaluated(y, y0, f0, derivative):
    return jnp.where(jnp.all(y == y0), f0, jnp.nan)


@_as_evaluated.defjvp
def _as_evaluated_jvp(primals, tangents):
    y, y0, f0, derivative = primals
    return _as_evaluated(y, y0, f0, derivative), derivative @ tangents[0]


class Evaluated(eqx.Module):
    r"""An objective as one compiled evaluation gave it, for a minimiser's step:
    with `args = (y0, f0, derivative, aux0)`, the value $f_0$ and `aux0` at
    $y_0$, with the tangent $\partial f\,\dot y$ = `derivative @ ẏ` there (the
    gradient of a scalar objective, the Jacobian of a residual); NaN at any
    other point.

    optimistix's gradient-based minimisers and least-squares solvers
    ([`hybrax._tune.problem.evaluates_once`][]) evaluate their objective once per
    step, by `jax.linearize` at the point that the step before proposed
    (`state.y_eval`). The host loop evaluates the objective there first, by
    its own program, and the minimiser's step program, given this function,
    then holds no orbit solve: the orbit's solve and its derivative compile
    once, not once for the objective's values and again inside the step. The
    step's arithmetic is unchanged: it receives the same value and gradient.
    """

    def __call__(self, y, args):
        y0, f0, derivative, aux0 = args
        return _as_evaluated(y, y0, f0, derivative), aux0


def evaluation_at(evaluate, at, last=None):
    """The arguments of [`hybrax._tune.problem.Evaluated`][] at `at`: `(at, f,
    derivative, aux)` from `evaluate(at) = ((f, aux), derivative, ...)`, or
    `last` where it was evaluated at `at` already (a minimiser's first step
    evaluates where its start was)."""
    if last is not None and np.array_equal(np.asarray(at), np.asarray(last[0])):
        return last
    (f, aux), derivative, *_ = evaluate(at)
    return (at, f, derivative, aux)


def evaluated_structs(evaluation):
    """`(f_struct, aux_struct)` for a minimiser's `init`, read off an evaluation
    (the arguments of [`hybrax._tune.problem.Evaluated`][]): `jax.eval_shape`
    would trace the objective again, in every process (seconds, where the
    compiled programs load from the cache)."""
    _, f, _, aux = evaluation
    return jax.tree.map(
        lambda leaf: jax.ShapeDtypeStruct(jnp.shape(leaf), jnp.result_type(leaf)),
        (f, aux),
    )


def evaluates_once(minimiser) -> bool:
    """Whether `minimiser`'s `init` does not evaluate the objective and each
    `step` evaluates it once, by `jax.linearize` at `state.y_eval` (so that it
    can step on [`hybrax._tune.problem.Evaluated`][]): optimistix's
    quasi-Newton (BFGS, DFP, L-BFGS), gradient (gradient descent, nonlinear CG)
    and Gauss-Newton (Gauss-Newton, Levenberg-Marquardt, dogleg) solvers."""
    return isinstance(
        minimiser,
        optx.AbstractQuasiNewton
        | optx.AbstractGradientDescent
        | optx.AbstractGaussNewton,
    )


@compiled("the tuning start")
def minimiser_init(minimiser, fn, y, args, f_struct, aux_struct, tags):
    """The minimiser's initial state (one compiled program, as optimistix's loop
    would build it; the host loop of `tune` and of the jumper's best jump steps
    it one evaluation at a time)."""
    return minimiser.init(fn, y, args, {}, f_struct, aux_struct, tags)


@compiled("the tuning step")
def minimiser_step(minimiser, fn, y, args, state, tags):
    """One step of the minimiser (compiled once per problem)."""
    return minimiser.step(fn, y, args, {}, state, tags)


@compiled("the tuning stop test")
def minimiser_terminate(minimiser, fn, y, args, state, tags):
    """The minimiser's stop test after a step (compiled once per problem)."""
    return minimiser.terminate(fn, y, args, {}, state, tags)
