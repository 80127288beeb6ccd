"""The hybrid data model: earliest crossing wins, construction errors."""

import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx


def _drift(t, x, params):
    return jnp.stack([params["v"], jnp.zeros_like(x[1])])


def _wall(position):
    # Positive while x < position; fires when x crosses it going right.
    return lambda t, x, params: position - x[0]


def _mark(value):
    return lambda t, x, params: jnp.stack([x[0], jnp.asarray(value, x.dtype)])


def _system(order):
    transitions = {
        "far": hx.Transition("move", "stop", _wall(2.0), False, _mark(2.0), "far"),
        "near": hx.Transition("move", "stop", _wall(1.2), False, _mark(1.0), "near"),
    }
    modes = (
        hx.Mode(_drift, "move"),
        hx.Mode(lambda t, x, p: jnp.zeros_like(x), "stop"),
    )
    return hx.HybridSystem(modes, [transitions[k] for k in order], n_states=2)


@pytest.mark.parametrize("order", [("far", "near"), ("near", "far")])
def test_earliest_crossing_wins_whatever_the_order(order):
    system = _system(order)
    params = {"v": jnp.asarray(1.0)}
    sol = hx.simulate(system, jnp.array([0.5, 0.0]), params, n_events=1)
    assert sol.result == hx.RESULTS.successful
    assert system.transitions[int(sol.transitions[0])].name == "near"
    np.testing.assert_allclose(sol.t_events[0], 0.7, atol=1e-12)
    np.testing.assert_allclose(sol.x_after[0], [1.2, 1.0], atol=1e-12)
    assert int(sol.mode_final) == system.mode_index("stop")


def test_construction_errors():
    mode = hx.Mode(_drift, "move")
    with pytest.raises(ValueError, match="source"):
        hx.HybridSystem(
            [mode], [hx.Transition("fly", "move", _wall(1.0), False)], n_states=2
        )
    with pytest.raises(ValueError, match="names"):
        hx.HybridSystem([mode, mode], [], n_states=2)
    with pytest.raises(ValueError, match="n_states"):
        hx.HybridSystem([mode], [], n_states=0)
    with pytest.raises(ValueError, match="vector_field"):
        hx.Mode(3.0, "bad")
