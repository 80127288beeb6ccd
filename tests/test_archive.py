"""`hx.save` and `hx.load`: results come back as they were (the same classes,
static fields and statuses, every array bit for bit), from a file that holds no
pickled code."""

import dataclasses
import gc
import json
import pathlib
import re
import sys
import tempfile
import zipfile

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hybrax as hx
import hybrax._archive as archive_module
from helpers import assert_same_result
from hybrax import models
from hybrax.models import bouncing_ball
from hybrax.models.hopper import HopperParams


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


# A file is data: hostile and damaged archives. The archives below are written
# by hand (NumPy's `savez` with a JSON record), not by `hx.save`, so that they
# hold what a hostile or damaged file may hold.


def _archive(path, record, **arrays):
    """An `.npz` file holding `arrays` and the record `record` (a JSON value, or
    text taken as it is)."""
    text = record if isinstance(record, str) else json.dumps(record)
    np.savez(path, __hybrax__=np.array(text), **arrays)
    return path


def _small_result():
    """A result of every kind of entry, made without a computation: a special
    point (a hybrax result class), parameters, a status, numbers and arrays."""
    point = hx.SpecialPoint(
        kind="fold",
        index=3,
        parameter=0.25,
        u=np.array([1.0, 2.0]),
        multipliers=np.array([1.0 + 0.5j, 0.2]),
        multiplier_matrix=None,
        test_value=-1e-3,
        located=True,
        event=None,
        observable=None,
        state=None,
        phase_durations=None,
        period=None,
    )
    return {
        "point": point,
        "params": HopperParams(k=20000.0),
        "status": hx.RESULTS.successful,
        "x": (1.5, float("inf"), 2 - 1j, [np.arange(3), "text", None, True]),
    }


def test_a_file_naming_another_class_makes_nothing(tmp_path):
    """A file naming a class outside hybrax's results and parameters (here one
    whose `__del__` removes the file it names) is refused and nothing of it is
    made: the file it names is still there. A module of hybrax that the
    allow-list does not name is not even imported."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    closer = {
        "__class__": "tempfile:_TemporaryFileCloser",
        "fields": {"file": None, "name": str(victim), "delete": True},
    }
    path = _archive(tmp_path / "evil.npz", {"schema": 1, "result": closer})
    with pytest.raises(ValueError, match="evil.npz.*tempfile:_TemporaryFileCloser"):
        hx.load(path)
    gc.collect()
    assert victim.read_text() == "keep me"

    for name in ("hybrax.__main__:main", "builtins:object", "os:system"):
        record = {"schema": 1, "result": {"__class__": name, "fields": {}}}
        path = _archive(tmp_path / "other.npz", record)
        with pytest.raises(ValueError, match=re.escape(name)):
            hx.load(path)
    assert "hybrax.__main__" not in sys.modules
    status = {"__status__": "diffrax:RESULTS", "value": 0}
    with pytest.raises(ValueError, match="diffrax:RESULTS"):
        hx.load(_archive(tmp_path / "status.npz", {"schema": 1, "result": status}))


def test_objects_are_made_by_their_constructors(tmp_path):
    """A class of the caller's is rebuilt only where `classes` names it, by
    calling it (its `__post_init__` runs); a parameter class's checks run on
    the file's values (a stiffness of -1 breaks the rule k > 0)."""
    made = []

    @dataclasses.dataclass
    class Mine:
        a: float
        b: list

        def __post_init__(self):
            made.append((self.a, self.b))

    hx.save(tmp_path / "mine.npz", Mine(1.5, [2]))
    made.clear()
    with pytest.raises(ValueError, match="mine.npz.*Mine"):
        hx.load(tmp_path / "mine.npz")
    again = hx.load(tmp_path / "mine.npz", classes=[Mine])
    assert type(again) is Mine and (again.a, again.b) == (1.5, [2])
    assert made == [(1.5, [2])]
    with pytest.raises(ValueError, match="`classes`"):
        hx.load(tmp_path / "mine.npz", classes=[len])

    fields = {
        f.name: {"__float__": repr(float(f.default))}
        for f in dataclasses.fields(HopperParams)
    }
    fields["k"] = {"__float__": "-1.0"}
    record = {"__class__": "hybrax.models.hopper:HopperParams", "fields": fields}
    path = _archive(tmp_path / "k.npz", {"schema": 1, "result": record})
    with pytest.raises(ValueError, match=r"k.npz.*`k` must be > 0"):
        hx.load(path)


def test_the_allow_list_is_the_zoos_parameter_classes():
    """Every zoo model's parameter class is loadable, and only those."""
    from hybrax._archive import _PARAMS_CLASSES
    from hybrax._registry import REGISTRY

    classes = {type(models.get_model(name).make_params()) for name in REGISTRY}
    assert {f"{c.__module__}:{c.__qualname__}" for c in classes} == set(_PARAMS_CLASSES)


_SPECIAL_POINT = "hybrax._continuation.results:SpecialPoint"


@pytest.mark.parametrize(
    ("record", "arrays", "named"),
    [
        ({"schema": "1", "result": 1}, {}, "layout"),
        ([1, 2], {}, "list"),
        ({"schema": 1, "result": {"__array__": "a0"}}, {}, "'a0'"),
        ({"schema": 1}, {}, "no result"),
        ("{not json", {}, "JSON"),
        ({"schema": 1, "result": [1, 2]}, {}, "list"),
        ({"schema": 1, "result": {"__tuple__": 3}}, {}, "tuple"),
        ({"schema": 1, "result": {"__dict__": [[{"__list__": []}, 1]]}}, {}, "key"),
        ({"schema": 1, "result": {"__float__": 1.5}}, {}, "float"),
        ({"schema": 1, "result": {"__complex__": ["1"]}}, {}, "complex"),
        ({"schema": 1, "result": {"__mystery__": 1}}, {}, "__mystery__"),
        (
            {"schema": 1, "result": {"__status__": "hybrax._solution:RESULTS",
                                     "value": {"__array__": "a0"}}},
            {"a0": np.array(99)},
            "status",
        ),
        (
            {"schema": 1, "result": {"__status__": "hybrax._solution:RESULTS",
                                     "value": {"__array__": "a0"}}},
            {"a0": np.array(0.5)},
            "status",
        ),
        (
            {"schema": 1, "result": {"__class__": _SPECIAL_POINT,
                                     "fields": {"kind": "fold"}}},
            {},
            "lacks the fields",
        ),
        (
            {"schema": 1, "result": {"__class__": _SPECIAL_POINT, "fields": [1]}},
            {},
            "fields",
        ),
        (
            {"schema": 1, "result": {
                "__class__": "hybrax.models.hopper:HopperParams",
                "fields": {f.name: "text" for f in dataclasses.fields(HopperParams)},
            }},
            {},
            "not a real number",
        ),
        ({"schema": 1, "result": None}, {"extra.bin": None}, "not an array"),
    ],
)  # fmt: skip
def test_a_damaged_archive_is_a_value_error_naming_it(tmp_path, record, arrays, named):
    """Each is a `ValueError` naming the file and what is wrong (these were a
    `TypeError`, `AttributeError`, `KeyError`, or a result of the wrong kind)."""
    path = tmp_path / "damaged.npz"
    if "extra.bin" in arrays:  # a member that is not an array
        _archive(path, record)
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr("extra.bin", b"\x00" * 8)
    else:
        _archive(path, record, **arrays)
    with pytest.raises(ValueError, match="damaged.npz") as info:
        hx.load(path)
    assert named in str(info.value)


def test_json_missing_and_oversized_files(tmp_path, monkeypatch):
    """A JSON file is named as such (not an advice about pickles); a missing
    file is a `FileNotFoundError`; a file over the bound, or one that unpacks
    to more, a `ValueError` naming it; `/dev/zero` ends at once."""
    (tmp_path / "run.json").write_text('{"params": {"k": 1.0}}')
    with pytest.raises(ValueError, match="run.json.*JSON") as info:
        hx.load(tmp_path / "run.json")
    assert "pickle" not in str(info.value)
    with pytest.raises(FileNotFoundError):
        hx.load(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="`path`.*is not a result"):
        hx.load("/dev/zero")
    with pytest.raises(ValueError, match="`path`.*cannot be read"):
        hx.load(tmp_path)

    hx.save(tmp_path / "big.npz", np.zeros(1000))
    size = (tmp_path / "big.npz").stat().st_size
    monkeypatch.setattr(archive_module, "MAX_ARCHIVE_BYTES", size - 1)
    with pytest.raises(ValueError, match=f"big.npz.*larger than {size - 1} bytes"):
        hx.load(tmp_path / "big.npz")
    # Deflated, it is smaller than the bound but unpacks to more.
    np.savez_compressed(
        tmp_path / "bomb.npz",
        __hybrax__=np.array(json.dumps({"schema": 1, "result": None})),
        a0=np.zeros(100_000),
    )
    monkeypatch.setattr(archive_module, "MAX_ARCHIVE_BYTES", 100_000)
    assert (tmp_path / "bomb.npz").stat().st_size < 100_000
    with pytest.raises(ValueError, match="bomb.npz.*unpacks to more than 100000"):
        hx.load(tmp_path / "bomb.npz")


# Property-based: any damage ends in a result or a `ValueError`.

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["__array__", "a0", "__float__", "__tuple__", _SPECIAL_POINT]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(
        st.sampled_from(
            ["__array__", "__float__", "__complex__", "__tuple__", "__list__",
             "__dict__", "__status__", "value", "__class__", "fields", "schema",
             "result", "kind", "x"]
        ) | st.text(max_size=4),
        inner,
        max_size=3,
    ),
    max_leaves=8,
)  # fmt: skip


def _paths(value, prefix=()):
    """Every place in a JSON value, as the keys and indices leading to it."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved `_small_result()`: its bytes, record and arrays."""
    path = tmp_path_factory.mktemp("saved") / "small.npz"
    hx.save(path, _small_result())
    with np.load(path) as archive:
        arrays = {key: archive[key] for key in archive.files}
    record = json.loads(str(arrays.pop("__hybrax__")))
    return path.read_bytes(), record, arrays


def test_the_small_result_round_trips(saved, tmp_path):
    content, _, _ = saved
    (tmp_path / "small.npz").write_bytes(content)
    again = hx.load(tmp_path / "small.npz")
    expected = _small_result()
    assert type(again["point"]) is hx.SpecialPoint
    assert_same_result(expected["point"], again["point"])
    assert type(again["params"]) is HopperParams and again["params"].k == 20000.0
    assert bool(again["status"] == hx.RESULTS.successful)
    assert again["x"][:3] == (1.5, float("inf"), 2 - 1j)
    np.testing.assert_array_equal(again["x"][3][0], np.arange(3))
    assert again["x"][3][1:] == ["text", None, True]


def _outcome(path):
    """`hx.load(path)`: the result, or the `ValueError` (which names the file);
    any other exception fails the test."""
    try:
        return hx.load(path)
    except ValueError as error:
        assert str(path.name) in str(error)
        return error


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_flipped_bytes_end_in_a_result_or_a_value_error(saved, data):
    content, _, _ = saved
    damaged = bytearray(content)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(damaged) - 1))
        damaged[at] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        damaged = damaged[: data.draw(st.integers(0, len(damaged)))]
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "flipped.npz"
        path.write_bytes(bytes(damaged))
        _outcome(path)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_a_changed_record_or_array_ends_in_a_result_or_a_value_error(saved, data):
    """An entry of the record replaced by random JSON, removed or renamed; an
    array removed, renamed or of another type."""
    _, record, arrays = saved
    record, arrays = json.loads(json.dumps(record)), dict(arrays)
    for _ in range(data.draw(st.integers(1, 3))):
        places = [p for p in _paths(record) if p]
        change = data.draw(st.sampled_from(["replace", "remove", "rename", "array"]))
        if change == "array" or not places:
            key = data.draw(st.sampled_from(sorted(arrays) or ["a0"]))
            arrays.pop(key, None)
            new = data.draw(
                st.sampled_from([None, "a0", "a9", "x"])
            )  # removed, or renamed
            if new is not None:
                arrays[new] = data.draw(
                    st.sampled_from(
                        [np.array(7), np.array("s"), np.zeros((2, 0)), np.array([0.5])]
                    )
                )
            continue
        place = data.draw(st.sampled_from(places))
        parent = record
        for step in place[:-1]:
            parent = parent[step]
        if change == "replace":
            parent[place[-1]] = data.draw(_JSON)
        elif isinstance(parent, dict):
            value = parent.pop(place[-1])
            if change == "rename":
                parent[data.draw(_JSON.filter(lambda k: isinstance(k, str)))] = value
        else:
            parent.pop(place[-1])
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "changed.npz"
        _archive(path, record, **arrays)
        _outcome(path)
