"""The tuning's minimiser steps on its objective's evaluation (`Evaluated`): the
iterates equal those of the same optimistix solver stepping on the objective
itself, for a minimiser and for the existence stage's least-squares solver."""

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

from hybrax._tune.problem import (
    Evaluated,
    evaluates_once,
    minimiser_init,
    minimiser_step,
)


TAGS = frozenset()


def _rosenbrock(y, args):
    scale = args
    value = (1 - y[0]) ** 2 + scale * (y[1] - y[0] ** 2) ** 2
    return value, {"value": value, "first": y[0]}


def _residual(z, args):
    # Underdetermined (two residuals, three unknowns), as the existence stage's
    # periodicity defect with its parameters is.
    r = jnp.stack([z[0] ** 2 + z[1] - 1.0, jnp.sin(z[2]) + z[0] * z[1] - args])
    return r, {"norm": jnp.sum(r**2)}


def _iterates(solver, fn, y, args, derivative, steps: int, on_evaluation: bool):
    """`steps` steps of `solver` from `y` by the tuning's step programs, each on
    `fn` itself or on its evaluation at `state.y_eval` (value, `derivative`,
    aux) as the tuning steps."""
    f_struct, aux_struct = jax.eval_shape(lambda: fn(y, args))
    evaluate = jax.jit(
        lambda at: (at, *fn(at, args)[:1], derivative(at), fn(at, args)[1])
    )
    step_fn = Evaluated() if on_evaluation else fn
    evaluation = evaluate(y) if on_evaluation else args
    state = minimiser_init(solver, step_fn, y, evaluation, f_struct, aux_struct, TAGS)
    points, auxes = [], []
    for _ in range(steps):
        if on_evaluation:
            evaluation = evaluate(state.y_eval)
        y, state, aux = minimiser_step(solver, step_fn, y, evaluation, state, TAGS)
        points.append(np.asarray(y))
        auxes.append(jax.tree.map(np.asarray, aux))
    return np.stack(points), auxes


@pytest.mark.parametrize(
    "solver",
    [
        optx.BFGS(rtol=1e-10, atol=1e-10),
        optx.NonlinearCG(rtol=1e-10, atol=1e-10),
        optx.GradientDescent(learning_rate=1e-3, rtol=1e-10, atol=1e-10),
    ],
    ids=["bfgs", "nonlinear-cg", "gradient-descent"],
)
def test_a_minimiser_steps_on_the_evaluation_as_on_the_objective(solver):
    assert evaluates_once(solver)
    y0 = jnp.array([-1.2, 1.0])
    args = jnp.asarray(100.0)
    derivative = jax.grad(lambda y: _rosenbrock(y, args)[0])
    own, own_aux = _iterates(solver, _rosenbrock, y0, args, derivative, 25, False)
    evaluated, aux = _iterates(solver, _rosenbrock, y0, args, derivative, 25, True)
    # The same value and gradient reach the same arithmetic: equal to round-off.
    np.testing.assert_allclose(evaluated, own, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(
        [a["value"] for a in aux], [a["value"] for a in own_aux], rtol=1e-13
    )
    # And the steps go somewhere: downhill.
    assert _rosenbrock(evaluated[-1], args)[0] < 0.5 * _rosenbrock(y0, args)[0]


def test_levenberg_marquardt_steps_on_the_evaluation_as_on_the_residual():
    solver = optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)
    assert evaluates_once(solver)
    z0 = jnp.array([0.3, -0.4, 0.2])
    args = jnp.asarray(0.5)
    derivative = jax.jacfwd(lambda z: _residual(z, args)[0])
    own, _ = _iterates(solver, _residual, z0, args, derivative, 8, False)
    evaluated, aux = _iterates(solver, _residual, z0, args, derivative, 8, True)
    np.testing.assert_allclose(evaluated, own, rtol=1e-12, atol=1e-12)
    assert aux[-1]["norm"] < 1e-12  # a root of the underdetermined residual


def test_the_evaluation_is_nan_away_from_its_point_and_others_step_on_the_objective():
    y0 = jnp.array([0.5, 0.25])
    args = (y0, jnp.asarray(2.0), jnp.array([1.0, -3.0]), None)
    value, _ = Evaluated()(y0, args)
    assert float(value) == 2.0
    # Its derivative at the point is the gradient given.
    np.testing.assert_array_equal(
        jax.grad(lambda y: Evaluated()(y, args)[0])(y0), [1.0, -3.0]
    )
    assert np.isnan(float(Evaluated()(y0 + 1e-9, args)[0]))
    # A solver that evaluates elsewhere (a simplex's vertices) is not given it.
    assert not evaluates_once(optx.NelderMead(rtol=1e-6, atol=1e-6))
