"""Gradient-based tuning: `hybrax tune` on the paper's hopper."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models
from hybrax._cli import main


PARAMS = hx.canonical_params(models.hopper.make_params())


def _central_differences(fn, theta, h):
    columns = []
    for i in range(theta.shape[0]):
        step = h * abs(float(theta[i]))
        plus = np.asarray(fn(theta.at[i].add(step)))
        minus = np.asarray(fn(theta.at[i].add(-step)))
        columns.append((plus - minus) / (2 * step))
    return np.stack(columns, axis=1)


@pytest.mark.slow
def test_tune_command_meets_the_apex_target(tmp_path):
    """`hybrax tune hopper`: the (d_G, k) whose upper mass hops to 1.15 m (to 1 mm)
    with the smallest multiplier, from the paper's parameters. The result is a
    stable orbit, found again from scratch, and a constrained minimum: by central
    differences there, the gradients of the multiplier and of the apex are
    parallel (first-order optimality on the target curve)."""
    code = main(
        ["tune", "hopper", "--vary", "d_G,k", "--target", "apex_upper=1.15"]
        + ["--minimize", "multiplier", "--no-progress", "--out", str(tmp_path)]
        + ["--json", str(tmp_path / "tune.json")]
    )
    assert code == 0
    data = json.loads((tmp_path / "tune.json").read_text())
    final = data["final"]
    assert final["orbit_found"] and final["stable"] and final["targets_met"]
    assert data["status"] in ("successful", "targets_met")
    assert abs(final["apex_upper"] - 1.15) < 1e-3
    assert data["history"] and {"objective", "values", "multipliers"} <= set(
        data["history"][0]
    )
    assert (tmp_path / "tune_path.png").is_file()
    # Re-found from scratch at the tuned parameters, and first-order optimal.
    system, section = models.hopper.minimal()[0], models.hopper.section()

    @jax.jit
    def apex_and_radius(theta):
        p = eqx.tree_at(lambda q: (q.d_G, q.k), PARAMS, tuple(theta))
        # From the model's plain guess: plain Newton overshot here into a
        # non-viable flight, the safeguarded one cuts such steps back.
        orbit = hx.find_periodic_orbit(
            system, section, models.hopper.orbit_guess(p), p, analyse=False
        )
        apex = orbit.cycle.phase_observables["apex_upper"][0]
        return jnp.stack([apex, orbit.spectral_radius])

    theta = jnp.array([final["values"]["d_G"], final["values"]["k"]])
    np.testing.assert_allclose(
        apex_and_radius(theta), [final["apex_upper"], final["multiplier"]], atol=1e-6
    )
    gradients = _central_differences(apex_and_radius, theta, h=1e-4)
    scaled = gradients * np.abs(np.asarray(theta))  # per relative change
    cross = scaled[0, 0] * scaled[1, 1] - scaled[0, 1] * scaled[1, 0]
    norms = np.linalg.norm(scaled[0]) * np.linalg.norm(scaled[1])
    assert abs(cross) / norms < 1e-2
