"""A batch equals the loop of its single solves, whatever its width: under
`jax.vmap`, XLA's CPU code for a batch of 1, 8, 16, 32 or 64 lanes differs (vector
widths, remainders), so any decision taken on the last bits of a value (a tie at
an event, a sign test of a guard on its surface) could give lanes of the same
problem different statuses. The runner of `experiments/runner_model.py` (a model
of one's own: three modes, its stance starting on the lift-off guard's surface)
and every zoo model with orbits are solved from two starts (the orbit and the
model's guess), cycled over the lanes, at each width and against single solves:
same statuses and Newton step counts, values equal to 1e-12. The own-model
tutorial's SLIP runner (its stance starts on the lift-off guard's surface after
a touchdown found by a root find) joins them at the touchdown angle where a
width-16 batch once read `grazing_event` in every lane, and its orbit sweep
gives the same statuses and orbits at every chunk size."""

import pathlib
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models
from test_docs import PAGES, _blocks


sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))
import runner_model  # noqa: E402


EQUAL_TOL = 1e-12  # a batch against single solves of the same problem
WIDTHS = (1, 8, 16, 32, 64)


def _runner():
    system, params = runner_model.runner()
    guess = runner_model.orbit_guess(params)
    return system, runner_model.section(), params, guess


#: The own-model tutorial's touchdown angle where a user's batch of 16 identical
#: lanes read `grazing_event` (68.5714 degrees from the horizontal).
TUTORIAL_ALPHA = float(np.deg2rad(90.0 - 68.5714))


def _tutorial_model():
    """The own-model tutorial's runner and section, built from the page's
    blocks as a reader types them."""
    page = PAGES / "tutorials" / "own-model.md"
    namespace = {}
    for marker in ("import hybrax as hx", "class RunnerParams", "hx.PoincareSection("):
        (code,) = [code for code, _ in _blocks(page) if marker in code]
        exec(code, namespace)
    return namespace["runner"], namespace["section"], namespace["RunnerParams"]


def _tutorial():
    system, section, runner_params = _tutorial_model()
    params = hx.canonical_params(runner_params(alpha=TUTORIAL_ALPHA))
    return system, section, params, jnp.array([0.94])


def _zoo(name):
    """A zoo model's default form, parameters and orbit guess."""
    bundle = models.get_model(name)
    form = bundle.forms[bundle.default_form]
    params = hx.canonical_params(bundle.make_params())
    guess = jnp.asarray(bundle.orbit_guess(params), dtype=float)
    return form.system(), form.section(), params, guess


#: Every model of the zoo that has periodic orbits.
ZOO = [
    name
    for name in models.model_names()
    if name in models.REGISTRY and models.get_model(name).has_orbits
]


def _values(orbit):
    return {
        "u": orbit.u,
        "period": orbit.period,
        "reduced_jacobian": orbit.reduced_jacobian,
        "t_events": orbit.cycle.t_events,
    }


@pytest.mark.slow
@pytest.mark.parametrize("model", ["runner", "tutorial", *ZOO])
def test_batch_equals_loop_of_single_solves_at_every_width(model):
    builders = {"runner": _runner, "tutorial": _tutorial}
    system, section, params, guess = builders.get(model, lambda: _zoo(model))()

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
                # Rounding differs between XLA's batched and single programs by
                # a few ulps of the array's largest entries, whichever entry it
                # lands on: equal to 1e-12 of the array's scale (the five-link
                # biped's reduced Jacobian, entries up to 5.9, differed by 1.7e-12
                # in an entry of 0.3 at width 1).
                value = np.asarray(value)
                scale = max(1.0, float(np.max(np.abs(value))))
                np.testing.assert_allclose(
                    values[name][lane],
                    value,
                    rtol=0,
                    atol=EQUAL_TOL * scale,
                    err_msg=f"{name}, {where}",
                )


@pytest.mark.slow
def test_tutorial_sweep_is_the_same_at_every_chunk_size():
    """The tutorial runner's 64-point orbit sweep (touchdown angle by energy,
    the top rows past the model's domain) at the default chunk size, 8 and 1:
    the same status for every element (successful orbits and infeasible starts
    both occur) and orbits equal to 1e-12."""
    system, section, runner_params = _tutorial_model()
    params = hx.canonical_params(runner_params())
    angle, energy = np.meshgrid(
        np.linspace(0.30, 0.45, 8), np.linspace(1500.0, 2100.0, 8), indexing="ij"
    )
    batch = eqx.tree_at(
        lambda p: (p.alpha, p.E),
        params,
        (jnp.asarray(angle.ravel()), jnp.asarray(energy.ravel())),
    )
    sweeps = {
        chunk: hx.sweep_orbits(
            system,
            section,
            jnp.array([0.94]),
            batch,
            sweep_settings=hx.SweepSettings(chunk_size=chunk),
        )
        for chunk in (None, 8, 1)
    }
    reference = sweeps[None]
    names = np.asarray(hx.status_name(reference.result))
    assert {"successful", "infeasible_initial_state"} <= set(names)
    found = names == "successful"
    for chunk in (8, 1):
        sweep = sweeps[chunk]
        np.testing.assert_array_equal(
            np.asarray(hx.status_name(sweep.result)), names, err_msg=f"chunk {chunk}"
        )
        np.testing.assert_allclose(
            np.asarray(sweep.orbit.u)[found],
            np.asarray(reference.orbit.u)[found],
            rtol=0,
            atol=EQUAL_TOL,
            err_msg=f"chunk {chunk}",
        )
