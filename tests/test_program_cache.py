"""The command line's program cache: a lowered program read back from disk gives the
same PyTree (equinox Modules and status enumerations included) as a direct call."""

import jax.numpy as jnp
import numpy as np

import hybrax as hx
from hybrax import models
from hybrax._program_cache import cached_call


def _program(x, params):
    sol = hx.simulate(models.bouncing_ball.bouncing_ball()[0], x, params, n_events=3)
    return sol, {"energy": params.m * params.g * x[0]}


def test_round_trip_through_the_cache(tmp_path):
    params = hx.canonical_params(models.bouncing_ball.BallParams(e=0.5))
    x0 = jnp.array([1.0, 0.0])
    first = cached_call("ball", _program, x0, params, cache_dir=str(tmp_path))
    assert list((tmp_path / "programs").glob("ball-*.bin"))
    second = cached_call("ball", _program, x0, params, cache_dir=str(tmp_path))
    direct = _program(x0, params)
    for got in (first, second):
        sol, extra = got
        assert isinstance(sol, hx.HybridSolution)
        assert sol.result == hx.RESULTS.successful
        np.testing.assert_array_equal(sol.t_events, direct[0].t_events)
        np.testing.assert_array_equal(sol.transitions, direct[0].transitions)
        np.testing.assert_array_equal(extra["energy"], direct[1]["energy"])
    # A failure status survives the trip as a status.
    bad = cached_call(
        "ball", _program, jnp.array([-1.0, 0.0]), params, cache_dir=str(tmp_path)
    )
    assert bad[0].result == hx.RESULTS.infeasible_initial_state
    assert "initial state" in hx.status_message(bad[0].result)[0]
