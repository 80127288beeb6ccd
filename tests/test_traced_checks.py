"""Every path is checked: eager checks run on concrete values only (also inside a
caller's `jax.jit` that closes over them), traced values are checked inside the
program and reported as statuses, and hostile arguments are `ValueError`s naming
the argument."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models
from hybrax._params import params_in_domain
from hybrax._registry import REGISTRY


HOPPER, _ = models.hopper.minimal()
# Canonical parameters (JAX arrays), as a second call and most scripts hold them.
HOPPER_PARAMS = jax.tree.map(
    lambda v: jnp.asarray(v, float), models.hopper.HopperParams()
)
HOPPER_X0 = models.hopper.default_state(HOPPER_PARAMS)
BALL, BALL_PARAMS = models.bouncing_ball.bouncing_ball()
BALL_X0 = jnp.array([1.0, 0.0])
N_EVENTS = 4


def test_jit_closing_over_state_and_parameters_equals_eager():
    """Closed over, `x0` and the parameters are concrete constants of the trace;
    the eager domain check must not convert a staged value to NumPy."""
    eager = hx.simulate(HOPPER, HOPPER_X0, HOPPER_PARAMS, n_events=N_EVENTS)

    @jax.jit
    def scaled_times(k):
        return (
            hx.simulate(HOPPER, HOPPER_X0, HOPPER_PARAMS, n_events=N_EVENTS).t_events
            * k
        )

    np.testing.assert_allclose(scaled_times(1.0), eager.t_events, atol=1e-13)


def test_closed_over_state_outside_its_mode_still_raises():
    x0 = HOPPER_X0.at[0].set(-1.0)  # the upper mass below the foot
    with pytest.raises(ValueError, match="x0"):
        jax.jit(lambda k: hx.simulate(HOPPER, x0, HOPPER_PARAMS, n_events=2).t_final)(
            1.0
        )


def test_traced_t_max_before_the_start_is_a_status():
    @jax.jit
    def run(t_max):
        settings = hx.Settings(t_max=t_max)
        return hx.simulate(
            HOPPER, HOPPER_X0, HOPPER_PARAMS, n_events=N_EVENTS, settings=settings
        )

    sol = run(-1.0)
    assert hx.status_name(sol.result) == ["invalid_time_span"]
    assert np.all(np.isnan(sol.t_events))


@pytest.fixture(scope="module")
def ball_of_restitution():
    @jax.jit
    @jax.vmap
    def run(e):
        params = eqx.tree_at(lambda p: p.e, BALL_PARAMS, e)
        return hx.simulate(BALL, BALL_X0, params, n_events=N_EVENTS)

    return run


def test_traced_restitution_outside_its_bound_is_a_status(ball_of_restitution):
    """A restitution of 1.5 rebounds ever faster: no ball does that. Under jit and
    vmap, the lane outside the declared bound fails with NaN values; the other
    lane is untouched."""
    sol = ball_of_restitution(jnp.array([0.5, 1.5]))
    assert hx.status_name(sol.result) == ["successful", "parameters_out_of_domain"]
    assert np.all(np.isfinite(sol.t_events[0]))
    assert np.all(np.isnan(sol.t_events[1]))
    assert np.all(np.isnan(sol.x_after[1]))
    assert "outside its declared domain" in hx.status_message(sol.result)[1]


def test_nonfinite_parameters_keep_their_own_status(ball_of_restitution):
    sol = ball_of_restitution(jnp.array([jnp.nan, 0.5]))
    assert hx.status_name(sol.result) == ["nonfinite_parameters", "successful"]


def _outside(bound):
    """A value that `bound` refuses."""
    for value in (-1e3, -1.0, 0.0, 0.5, 1.0, 1.5, 1e3):
        if not np.all(bound.test(np.asarray(value))):
            return value
    raise AssertionError(f"no value found outside {bound.rule}")


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_model_flags_each_out_of_bound_field_when_traced(name):
    """For each bounded field of every zoo model, a value outside its bound set
    past the eager check (`eqx.tree_at`, as a traced value is) fails the check the
    run makes in its program, under jit."""
    params = models.get_model(name).make_params()
    check = jax.jit(params_in_domain)
    assert bool(check(params))
    bounded = [f for f in dataclasses.fields(params) if f.metadata.get("bound")]
    assert bounded
    for field in bounded:
        bad = eqx.tree_at(
            lambda p, f=field: getattr(p, f.name),
            params,
            jnp.asarray(_outside(field.metadata["bound"]), float),
        )
        assert not bool(check(bad)), field.name


def test_a_declared_relation_between_fields_is_checked_when_traced():
    params = models.biped5.Biped5Params()
    swapped = eqx.tree_at(
        lambda p: (p.phase_start, p.phase_end),
        params,
        (jnp.asarray(params.phase_end), jnp.asarray(params.phase_start)),
    )
    assert bool(jax.jit(params_in_domain)(params))
    assert not bool(jax.jit(params_in_domain)(swapped))


def test_status_code_reads_a_status_name():
    assert int(hx.status_code("successful")) == 0
    assert int(hx.status_code("zeno")) == hx.STATUS_NAMES.index("zeno")
    assert int(hx.status_code(hx.RESULTS.zeno)) == int(hx.status_code("zeno"))
    with pytest.raises(ValueError, match="not a status name.*successful"):
        hx.status_code("succesful")
    with pytest.raises(ValueError, match="`result`"):
        hx.status_code(3)


def test_a_complex_initial_state_is_refused():
    with pytest.raises(ValueError, match="`x0` must hold real numbers"):
        hx.simulate(BALL, BALL_X0 + 1j, BALL_PARAMS, n_events=2)
    with pytest.raises(ValueError, match="`x0` must hold real numbers"):
        jax.jit(lambda x: hx.simulate(BALL, x, BALL_PARAMS, n_events=2).t_final)(
            BALL_X0 + 1j
        )


def test_poincare_map_refuses_more_unknowns_than_the_section_has():
    system, params = models.rimless_wheel.rimless_wheel()
    section = models.rimless_wheel.section()
    with pytest.raises(ValueError, match="`u` has 3 entries"):
        hx.poincare_map(system, section, jnp.array([1.0, 2.0, 3.0]), params)
    with pytest.raises(ValueError, match="`u` must hold real numbers"):
        hx.poincare_map(system, section, jnp.array([1.0 + 1j]), params)
    with pytest.raises(ValueError, match="`u_guess` must hold real numbers"):
        hx.find_periodic_orbit(system, section, jnp.array([1.0 + 1j]), params)
