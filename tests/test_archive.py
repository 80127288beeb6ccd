"""`hx.save` and `hx.load`: results come back as they were (the same classes,
static fields and statuses, every array bit for bit), from a file that holds no
pickled code."""

import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from helpers import assert_same_result
from hybrax.models import bouncing_ball


def logistic(x, r, args):
    return r * x * (1 - x)


def test_a_simulation_and_a_branch_round_trip(tmp_path):
    ball, params = bouncing_ball.bouncing_ball()
    solution = hx.simulate(ball, jnp.array([1.0, 0.0]), params, n_events=3)
    hx.save(tmp_path / "run.npz", solution)
    again = hx.load(tmp_path / "run.npz")
    assert type(again) is hx.HybridSolution
    assert_same_result(solution, again)
    assert hx.status_name(again.result) == ["successful"]

    branch = hx.continue_fixed_points(logistic, jnp.array([0.6]), 2.5, stop=3.3)
    hx.save(tmp_path / "branch.npz", branch)
    again = hx.load(tmp_path / "branch.npz")
    assert type(again) is hx.SolutionBranch and again.kind == branch.kind
    assert_same_result(branch, again)
    (doubling,) = again.period_doublings  # the special points' own class
    assert type(doubling) is hx.SpecialPoint
    assert doubling.parameter == branch.period_doublings[0].parameter
    assert_same_result(
        (doubling.u, doubling.multipliers, doubling.multiplier_matrix),
        (lambda p: (p.u, p.multipliers, p.multiplier_matrix))(
            branch.period_doublings[0]
        ),
    )


def test_what_is_not_data_is_dropped_and_bad_files_are_refused(tmp_path):
    nested = {"f": jnp.sin, "x": (1.5, float("nan"), 2 + 3j, [np.arange(3)])}
    hx.save(tmp_path / "n.npz", nested)
    again = hx.load(tmp_path / "n.npz")
    assert again["f"] is None
    assert again["x"][0] == 1.5 and np.isnan(again["x"][1])
    assert again["x"][2] == 2 + 3j
    np.testing.assert_array_equal(again["x"][3][0], np.arange(3))
    (tmp_path / "plain.npz").write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="`path`"):
        hx.load(tmp_path / "plain.npz")
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    with pytest.raises(ValueError, match="not a result saved by hybrax"):
        hx.load(tmp_path / "other.npz")
