"""Parameters declared once: every zoo model's parameter class declares each field
with its unit, meaning and range; the model's table and the eager checks derive
from those declarations."""

import dataclasses
import json
import pathlib
import re
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hybrax as hx
from hybrax import models
from hybrax._registry import REGISTRY
from hybrax.models.hopper import HopperParams


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


# `--params FILE` on the command line: each file ends in the parameters or one
# line naming `--params` and exit 2, before any computation. The command stops
# where it would read `--x0` (after the file's parameters and its stored state):
# `_Reached` there is a file accepted.


class _Reached(Exception):
    pass


def _run_with_params(path, monkeypatch_context):
    """`hybrax simulate hopper --params path` up to its computation: the
    parameters' values, or `(2, last line of stderr)`."""
    import contextlib
    import io

    import hybrax._cli.simulate as simulate
    from hybrax._cli import main

    taken = {}

    def reached(parser, model, text):
        raise _Reached

    original = simulate._make_params

    def make_params(parser, model, values):
        taken.update(values)
        return original(parser, model, values)

    monkeypatch_context.setattr(simulate, "_parse_state", reached)
    monkeypatch_context.setattr(simulate, "_make_params", make_params)
    err = io.StringIO()
    out = pathlib.Path(path).parent / "figures"
    argv = ["simulate", "hopper", "--params", str(path), "--x0=0,1,0,0"]
    try:
        with contextlib.redirect_stderr(err):
            main([*argv, "--out", str(out), "--no-figures", "-q"])
    except _Reached:
        return taken
    except SystemExit as stop:
        text = err.getvalue()
        assert "Traceback" not in text
        return stop.code, text.strip().splitlines()[-1]
    raise AssertionError("the command neither stopped nor reached its computation")


def _refused(path):
    with pytest.MonkeyPatch.context() as patch:
        outcome = _run_with_params(path, patch)
    assert isinstance(outcome, tuple), outcome
    code, line = outcome
    assert code == 2 and "--params" in line
    return line


def test_a_batch_in_a_saved_params_file_is_refused_by_name(tmp_path):
    """Parameters saved with an array for `k` were skipped (the default taken):
    now an error naming `k`. Saved as one number, it is taken."""
    hx.save(tmp_path / "k.npz", HopperParams(k=np.array([15000.0, 20000.0])))
    line = _refused(tmp_path / "k.npz")
    assert "k must be one number" in line and "k.npz" in line
    hx.save(tmp_path / "one.npz", HopperParams(k=17000.0))
    with pytest.MonkeyPatch.context() as patch:
        assert _run_with_params(tmp_path / "one.npz", patch)["k"] == 17000.0


def test_hostile_json_params_files_are_one_line(tmp_path, monkeypatch):
    """A 401-digit integer (was an `OverflowError`), JSON nested 100000 deep (a
    `RecursionError`), a file over the 64 MiB bound (read whole: `/dev/zero`
    read until memory ran out), a missing file, a foreign archive."""
    import hybrax._cli.params_files as params_files

    (tmp_path / "big.json").write_text('{"k": 1' + "0" * 400 + "}")
    assert "k must be a finite number" in _refused(tmp_path / "big.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in _refused(tmp_path / "deep.json")
    (tmp_path / "nan.json").write_text('{"params": {"k": NaN}}')
    assert "k must be a finite number" in _refused(tmp_path / "nan.json")
    (tmp_path / "bytes.json").write_bytes(b'{"k": "\xff"}')
    assert "neither JSON" in _refused(tmp_path / "bytes.json")
    assert "cannot read" in _refused(tmp_path / "missing.json")
    (tmp_path / "long.json").write_text('{"k": 15000.0}' + " " * 100)
    monkeypatch.setattr(params_files, "MAX_PARAMS_JSON_BYTES", 100)
    assert "larger than 100 bytes" in _refused(tmp_path / "long.json")
    monkeypatch.undo()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    record = {
        "schema": 1,
        "result": {
            "__class__": "tempfile:_TemporaryFileCloser",
            "fields": {"file": None, "name": str(victim), "delete": True},
        },
    }
    np.savez(tmp_path / "evil.npz", __hybrax__=np.array(json.dumps(record)))
    assert "_TemporaryFileCloser" in _refused(tmp_path / "evil.npz")
    assert victim.read_text() == "keep me"


_NAMES = [field.name for field in dataclasses.fields(HopperParams)]
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(10**300, 10**500)
    | st.floats()
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from([*_NAMES, "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(
    values=st.dictionaries(st.sampled_from([*_NAMES, "other"]), _VALUES, max_size=4),
    wrap=st.sampled_from([None, "params", "final"]),
)
def test_any_json_params_file_ends_in_params_or_one_line(values, wrap):
    """Random JSON: the values taken are exactly the finite numbers given for
    known names inside the model's rules (checked here against the rules the
    parameter class declares), else one line and exit 2."""
    data = values if wrap is None else {wrap: values}
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as p:
        path = pathlib.Path(folder) / "params.json"
        path.write_text(json.dumps(data))
        outcome = _run_with_params(path, p)
    good = set(values) <= set(_NAMES) and all(
        not isinstance(v, bool)
        and isinstance(v, int | float)
        and abs(v) < 1e300
        and v == v
        and _within_rule(name, float(v))
        for name, v in values.items()
    )
    if good:
        assert outcome == {name: float(v) for name, v in values.items()}
    else:
        assert isinstance(outcome, tuple) and outcome[0] == 2


def _within_rule(name, value):
    """Whether `value` keeps the declared bound of the hopper's field `name`
    (the hopper declares no relation between its fields)."""
    rule = {f.name: f.metadata["bound"] for f in dataclasses.fields(HopperParams)}
    return rule[name] is None or bool(rule[name].test(np.asarray(value)))


@settings(max_examples=40, deadline=None)
@given(
    value=st.one_of(
        st.floats(),
        st.integers(-(2**63), 2**63 - 1),
        st.booleans(),
        st.text(max_size=4),
        st.lists(st.floats(1e3, 1e5), min_size=0, max_size=3),
    )
)
def test_any_saved_value_of_k_ends_in_params_or_one_line(value):
    """A saved HopperParams whose `k` is anything (written by hand, as the class
    would refuse most): `k` is taken where it is one finite positive number,
    else one line naming `--params` and exit 2."""
    fields = {
        f.name: {"__float__": repr(float(f.default))}
        for f in dataclasses.fields(HopperParams)
    }
    arrays = {}
    if isinstance(value, list):
        arrays["a0"] = np.asarray(value, dtype=float)
        fields["k"] = {"__array__": "a0"}
    elif isinstance(value, float):
        fields["k"] = {"__float__": repr(value)}
    else:
        fields["k"] = value
    record = {
        "schema": 1,
        "result": {"__class__": "hybrax.models.hopper:HopperParams", "fields": fields},
    }
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as p:
        path = pathlib.Path(folder) / "params.npz"
        np.savez(path, __hybrax__=np.array(json.dumps(record)), **arrays)
        outcome = _run_with_params(path, p)
    number = (
        not isinstance(value, bool | str)
        and np.ndim(value) == 0
        and np.isfinite(float(value))
        and float(value) > 0
    )
    if number:
        assert outcome["k"] == float(value)
    else:
        assert isinstance(outcome, tuple) and outcome[0] == 2
