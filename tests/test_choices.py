"""The settings' plain choices are enumerations: a member or its string value
gives the same settings (and the same compiled program), anything else is a
`ValueError` that names the argument and the choices."""

import json

import jax
import pytest

import hybrax as hx


CASES = [
    (hx.ContinuationSettings, "method", hx.ContinuationMethod),
    (hx.Shooting, "jacobian", hx.ShootingJacobian),
    (hx.TuneSettings, "mode", hx.GradientMode),
    (hx.SweepSettings, "order", hx.SweepOrder),
]


@pytest.mark.parametrize("settings_type, name, choice", CASES)
def test_a_member_and_its_value_are_the_same_setting(settings_type, name, choice):
    for member in choice:
        by_member = settings_type(**{name: member})
        by_value = settings_type(**{name: member.value})
        assert getattr(by_member, name) is member
        assert getattr(by_value, name) is member
        # One tree structure (static fields included): a compiled program
        # keyed on it serves both spellings.
        assert jax.tree_util.tree_structure(by_member) == (
            jax.tree_util.tree_structure(by_value)
        )
        # Written to JSON, a choice is its plain string.
        assert json.loads(json.dumps({name: getattr(by_value, name)})) == {
            name: member.value
        }


@pytest.mark.parametrize("settings_type, name, choice", CASES)
@pytest.mark.parametrize("bad", ["nonsense", 3, None, ["auto"]])
def test_other_values_name_the_argument(settings_type, name, choice, bad):
    if bad is None and choice is hx.SweepOrder:
        # `order=None` keeps its meaning: the batch's own order.
        assert settings_type(order=None).order is hx.SweepOrder.BATCH
        return
    with pytest.raises(ValueError, match=f"`{name}` must be one of"):
        settings_type(**{name: bad})
