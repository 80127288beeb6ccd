"""`Settings(control_tangents=True)`: the step controller also controls the
error of the first variational equation. A state resting on a mode that decays
at 300/s, as the five-link biped's joints do (-270/s): the state's own error is
zero, so its steps grow without bound and a tangent that only follows them is
not integrated at all; under control, the saltation route's fundamental matrix
equals its closed form $e^{-300}$ to the tolerance."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import pytest

import hybrax as hx


RATE = 300.0  # 1/s, the fast mode's decay rate


def _field(t, x, p):
    return jnp.stack([-p["a"] * x[0], jnp.ones_like(x[1])])


def _before_tick(t, x, p):  # positive until the clock reaches 1 s
    return 1.0 - x[1]


def _restart(t, x, p):
    return x.at[1].set(0.0)


SYSTEM = hx.HybridSystem(
    [hx.Mode(_field, "run")],
    [hx.Transition("run", "run", _before_tick, False, _restart, "tick")],
    n_states=2,
)
SECTION = hx.PoincareSection(
    ("tick",),
    lambda u, p: jnp.stack([u[0], jnp.zeros_like(u[0])]),
    lambda x, p: x[0:1],
)
PARAMS = {"a": jnp.asarray(RATE)}


def test_controlled_tangents_follow_a_fast_decaying_mode():
    """The fast mode's entry of the monodromy is $e^{-300}$ (about 5e-131): with
    the tangents controlled the saltation route gives it to 1e-8, and its
    discrepancy against the AD route (which follows the state's steps) shows
    that route's error instead of hiding it."""
    state = jnp.array([0.0, 0.0])
    settings = hx.Settings(control_tangents=True)
    floquet = jax.jit(
        lambda x: hx.monodromy(SYSTEM, SECTION, x, PARAMS, settings=settings)
    )(state)
    exact = math.exp(-RATE)
    assert abs(float(floquet.monodromy_saltation[0, 0]) - exact) < 1e-8
    assert float(floquet.max_discrepancy) > 1.0


@pytest.mark.slow
def test_controlled_tangents_keep_a_resolved_flow_unchanged():
    """Away from the fast mode's rest point the state's steps resolve it, and
    both settings give the closed form $e^{-300 t}$ of the flow to 1e-8."""
    state = jnp.array([1.0, 0.0])
    for control in (False, True):
        settings = hx.Settings(control_tangents=control)
        floquet = hx.monodromy(SYSTEM, SECTION, state, PARAMS, settings=settings)
        assert abs(float(floquet.monodromy_saltation[0, 0])) < 1e-8


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_control_tangents_must_be_a_bool(value):
    with pytest.raises(ValueError, match="control_tangents"):
        hx.Settings(control_tangents=value)


def test_curves_tangent_settings_keep_every_other_field():
    """The settings a curve's tangent pass runs with: `control_tangents` on and
    the controller's tolerances tightened, every other field as given (the
    settings are built again, so a field left out would fall back to its
    default without a word)."""
    import diffrax as dfx
    import optimistix as optx

    from hybrax._settings import with_controlled_tangents

    given = hx.Settings(
        solver=dfx.Dopri5(),
        rtol=1e-9,
        atol=1e-8,
        event_root_finder=optx.Newton(rtol=1e-11, atol=1e-11),
        adjoint=dfx.ForwardMode(),
        max_steps=777,
        t_max=7.0,
        guard_tol=1e-7,
        constraint_tol=1e-6,
        dip_tol=None,
    )
    tangent = with_controlled_tangents(given, 0.01)
    assert tangent.control_tangents and not given.control_tangents
    assert float(tangent.stepsize_controller.rtol) == pytest.approx(1e-11)
    assert float(tangent.stepsize_controller.atol) == pytest.approx(1e-10)
    for field in dataclasses.fields(hx.Settings):
        if field.name in ("control_tangents", "stepsize_controller"):
            continue
        a, b = getattr(given, field.name), getattr(tangent, field.name)
        assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
            if hasattr(x, "shape"):
                assert float(x) == float(y), field.name
            else:
                assert x is y, field.name
