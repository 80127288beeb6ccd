"""The tuning's objective as programs: the penalised objective of an orbit, its
forward-mode gradient, the existence stage's residual, and the compiled calls of
the minimiser's steps.
"""

from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

from .._custom_types import Params
from .._hybrid import HybridSystem
from .._parameters import AbstractParameter
from .._periodic import (
    PeriodicOrbit,
    PoincareSection,
    ShootingSafeguard,
    ShootingStart,
    cycle,
    find_periodic_orbit,
    resolve_sequence,
)
from .._programs import compiled
from .._settings import (
    Settings,
    Shooting,
)
from .._solution import RESULTS, masked_nan


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
        aux = (
            orbit.u,
            orbit.spectral_radius,
            orbit.multipliers,
            orbit.result,
            violations,
            raw,
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
        open_orbit = PeriodicOrbit(
            u=u,
            u_next=u_next,
            state=state,
            cycle=sol,
            phase_durations=sol.t_events
            - jnp.concatenate([jnp.zeros(1, z.dtype), sol.t_events[:-1]]),
            period=sol.t_events[-1],
            reduced_jacobian=jnp.full((u.shape[0],) * 2, jnp.nan, z.dtype),
            residual_norm=jnp.max(jnp.abs(defect)),
            n_steps=jnp.zeros((), jnp.int32),
            result=sol.result,
            restart=ShootingStart(u, safeguard=ShootingSafeguard.fresh(u)),
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


@compiled("the orbit seek step")
def _seek_value(seek, z, width):
    return seek(z, width)


@compiled("the tuning start values")
def _batched_values(problem, y):
    return jax.vmap(problem.with_values)(y)


@compiled("the tuning values")
def _values_of(problem, orbits, params):
    def one(orbit, params_):
        return problem.value_of(orbit, params_, jnp.ones((), orbit.u.dtype))[0]

    return jax.vmap(one)(orbits, params)


def _host(aux):
    f, (u, rho, multipliers, result, violations, raw) = aux
    return (
        np.asarray(f),
        (
            np.asarray(u),
            np.asarray(rho),
            np.asarray(multipliers),
            result,
            np.asarray(violations),
            np.asarray(raw),
        ),
    )


@compiled("the tuning objective")
def _value(problem, y, args):
    """`(problem.evaluate(y, args), orbit)`: the objective with its diagnostics,
    and the orbit found (the tuning's result takes it from here, so that no
    other orbit program compiles)."""
    value, aux, orbit = problem.solved(y, args)
    return (value, (value, aux)), orbit


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
