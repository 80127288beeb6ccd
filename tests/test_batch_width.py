"""A batch equals the loop of its single solves, whatever its width: under
`jax.vmap`, XLA's CPU code for a batch of 1, 8, 16, 32 or 64 lanes differs (vector
widths, remainders), so any decision taken on the last bits of a value (a tie at
an event, a sign test of a guard on its surface) could give lanes of the same
problem different statuses. The runner of `experiments/runner_model.py` (a model
of one's own: three modes, its stance starting on the lift-off guard's surface)
and the hopper are solved from two starts, cycled over the lanes, at each width
and against single solves: same statuses and Newton step counts, values equal to
1e-12."""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))
import runner_model  # noqa: E402


EQUAL_TOL = 1e-12  # a batch against single solves of the same problem
WIDTHS = (1, 8, 16, 32, 64)


def _runner():
    system, params = runner_model.runner()
    guess = runner_model.orbit_guess(params)
    return system, runner_model.section(), params, guess


def _hopper():
    system, _ = models.hopper.minimal()
    params = hx.canonical_params(models.hopper.make_params())
    guess = models.hopper.orbit_guess(params)
    return system, models.hopper.section("minimal"), params, guess


def _values(orbit):
    return {
        "u": orbit.u,
        "period": orbit.period,
        "reduced_jacobian": orbit.reduced_jacobian,
        "t_events": orbit.cycle.t_events,
    }


@pytest.mark.slow
@pytest.mark.parametrize("model", [_runner, _hopper], ids=["runner", "hopper"])
def test_batch_equals_loop_of_single_solves_at_every_width(model):
    system, section, params, guess = model()

    def solve(u):
        return hx.find_periodic_orbit(system, section, u, params, analyse=False)

    orbit = solve(guess)
    assert bool(orbit.succeeded), orbit.describe_failure()
    # The converged orbit (the start a user continues from) and the rough guess.
    starts = jnp.stack([orbit.u, guess])
    singles = [solve(u) for u in starts]
    batched = jax.jit(jax.vmap(solve))
    for width in WIDTHS:
        lanes = jnp.asarray(np.arange(width) % len(starts))
        batch = batched(starts[lanes])
        names = hx.status_name(batch.result)
        values = _values(batch)
        for lane, start in enumerate(np.asarray(lanes)):
            single = singles[start]
            where = f"width {width}, lane {lane}"
            assert names[lane] == hx.status_name(single.result)[0], where
            assert int(batch.n_steps[lane]) == int(single.n_steps), where
            for name, value in _values(single).items():
                np.testing.assert_allclose(
                    values[name][lane],
                    value,
                    rtol=EQUAL_TOL,
                    atol=EQUAL_TOL,
                    err_msg=f"{name}, {where}",
                )
