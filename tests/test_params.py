"""Parameters declared once: every zoo model's parameter class declares each field
with its unit, meaning and range; the model's table and the eager checks derive
from those declarations."""

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models
from hybrax._registry import REGISTRY


ZOO = sorted(REGISTRY)


def _params_class(name):
    return type(models.get_model(name).make_params())


@pytest.mark.parametrize("name", ZOO)
def test_every_field_is_declared_once_and_tabled(name):
    """The bundle's table starts with the class's fields, each with the unit and
    meaning of its declaration; every default lies inside its bound."""
    bundle = models.get_model(name)
    cls = _params_class(name)
    assert issubclass(cls, hx.AbstractParams)
    table = hx.parameter_table(cls)
    fields = dataclasses.fields(cls)
    assert list(table) == [field.name for field in fields]
    assert list(bundle.parameters)[: len(table)] == list(table)
    for field in fields:
        unit, description = field.metadata["unit"], field.metadata["description"]
        assert bundle.parameters[field.name] == f"{unit}, {description}"
        assert unit and description
        bound = field.metadata["bound"]
        if bound is not None:
            assert bool(np.all(bound.test(np.asarray(field.default, float))))


@pytest.mark.parametrize("name", ZOO)
def test_values_outside_a_bound_are_refused_and_traced_ones_pass(name):
    """For each bounded field, a concrete value outside the bound (and a NaN in
    any field) is a `ValueError` naming the field; the same values traced under
    `jit` build the parameters unchecked (a run reports them by its status)."""
    cls = _params_class(name)
    for field in dataclasses.fields(cls):
        with pytest.raises(ValueError, match=f"`{field.name}` must be finite"):
            cls(**{field.name: np.nan})
        bound = field.metadata["bound"]
        if bound is None:
            continue
        bad = next(
            v
            for v in (-1.0, 0.0, 2.0, 1e3, -1e3, 0.5)
            if not bool(np.all(bound.test(np.asarray(v))))
        )
        with pytest.raises(
            ValueError, match=re.escape(f"`{field.name}` must be {bound.rule}")
        ):
            cls(**{field.name: bad})
        built = jax.jit(lambda v, f=field.name: getattr(cls(**{f: v}), f))(bad)
        assert float(built) == bad


def test_a_users_class_gets_the_check_and_the_table():
    class SpringParams(hx.AbstractParams):
        k: float = hx.parameter_field(100.0, "N/m", "stiffness", bound=hx.POSITIVE)
        c: float = hx.parameter_field(0.1, "N s/m", "damping", bound=hx.NONNEGATIVE)
        r: float = hx.parameter_field(0.5, "1", "share", bound=hx.between(0.2, 0.8))

    assert hx.parameter_table(SpringParams) == {
        "k": "N/m, stiffness",
        "c": "N s/m, damping",
        "r": "1, share",
    }
    assert SpringParams(k=jnp.asarray(3.0)).k == 3.0
    with pytest.raises(ValueError, match=r"Spring parameter `k` must be > 0; got -1"):
        SpringParams(k=-1.0)
    with pytest.raises(ValueError, match=r"`r` must be in \(0.2, 0.8\)"):
        SpringParams(r=0.9)
    # Batched values are checked element by element.
    with pytest.raises(ValueError, match="`c` must be >= 0"):
        SpringParams(c=np.array([0.0, -0.1]))
    with pytest.raises(ValueError, match="`bound`"):
        hx.parameter_field(1.0, "m", "length", bound="positive")

    class Loose(hx.AbstractParams):
        k: float = 1.0

    with pytest.raises(ValueError, match="parameter_field"):
        hx.parameter_table(Loose)


@pytest.mark.parametrize("name", ZOO)
def test_every_model_module_names_its_pieces_alike(name):
    """Each zoo module offers `make_params`, `default_state(params)` (the
    bundle's) and, where the model has orbits, `section(form="minimal")`
    refusing a form it does not have."""
    import importlib

    module = importlib.import_module(f"hybrax.models.{REGISTRY[name]}")
    bundle = models.get_model(name)
    params = bundle.make_params()
    assert bundle.default_state is module.default_state
    state = module.default_state(params)
    assert np.shape(state) == (len(bundle.state_names),)
    assert np.all(np.isfinite(np.asarray(state)))
    if bundle.has_orbits:
        assert isinstance(module.section(), hx.PoincareSection)
        with pytest.raises(ValueError, match="`form`"):
            module.section("no-such-form")
