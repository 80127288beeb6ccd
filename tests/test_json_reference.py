"""The JSON reference (`hybrax._cli.json_fields`) describes every field of the
command line's JSON files, with a unit and a meaning, and
`docs/pages/json-reference.md` is its output.

The fast commands run in-process (`hybrax models --json`, `hybrax simulate
bouncing-ball`, `hybrax orbit rimless-wheel` with and without an orbit) and
their files' keys are checked; for the commands too slow for the fast set
(`continue`, `sweep`, `basin`, `tune`) the keys that their writers' code builds
are read from the source, and the runs themselves are checked in the slow set.
Every file a command writes is checked as it is written besides
(`common._write_json` warns of a field the reference lacks, which the test
configuration makes an error)."""

import argparse
import ast
import inspect
import json
import pathlib

import pytest

from hybrax._cli import (
    basin,
    common,
    continuation,
    curve,
    json_fields,
    main,
    orbit,
    simulate,
    sweep,
    tune,
)


PAGE = pathlib.Path(__file__).parent.parent / "docs" / "pages" / "json-reference.md"
FIELDS = json_fields.FIELDS


def _described(section: str, record: dict, generic=()) -> None:
    missing = json_fields.undescribed(section, record, generic)
    assert not missing, f"{section}: fields the reference lacks: {missing}"


def test_the_json_reference_page_is_current():
    """`json-reference.md` is what `json_fields.reference_markdown()` writes
    (`python -m hybrax._cli.json_fields > docs/pages/json-reference.md` after a
    change), and the site's navigation lists it."""
    assert PAGE.read_text() == json_fields.reference_markdown()
    nav = (PAGE.parent.parent / "mkdocs.yml").read_text()
    assert "JSON reference: json-reference.md" in nav


def test_every_field_has_a_unit_and_a_meaning():
    """Each section says what writes it; each field has a unit (`1`, `-`, the
    model's, or a unit such as `s`) and a meaning that is a sentence; every
    command with `--json` has its section, and a model's parameters or
    quantities are described generically (the model's units)."""
    from hybrax._cli import _build_parser

    assert set(json_fields.WRITTEN_BY) == set(FIELDS)
    for section, fields in FIELDS.items():
        assert fields, section
        for name, (unit, meaning) in fields.items():
            assert unit in ("1", "-", json_fields.MODEL_UNITS, "s", "J"), (
                section,
                name,
            )
            start = meaning[:1]
            assert (start.isupper() or start == "`") and meaning.endswith("."), (
                section,
                name,
            )
            assert "|" not in meaning, (section, name)
    commands = next(
        action
        for action in _build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    for name, command in commands.choices.items():
        if any("--json" in action.option_strings for action in command._actions):
            assert name in FIELDS, name
    for section in ("simulate", "orbit", "continue", "sweep", "basin", "tune"):
        assert FIELDS[section]["hybrax"] and FIELDS[section]["schema"]
    for section, name in (
        ("simulate", "params"),
        ("simulate", "x0"),
        ("orbit", "state"),
        ("orbit", "<summary>"),
        ("tune: final", "<quantity>"),
        ("continue: curve", "<PARAM2>"),
    ):
        assert FIELDS[section][name][0] == json_fields.MODEL_UNITS
    assert "hybrax models MODEL" in FIELDS["simulate"]["params"][1]


def test_complex_numbers_are_said_to_be_pairs():
    """Every field that holds complex numbers (`common._pairs`) says that they
    are `[re, im]` pairs, and so does the page's conventions."""
    complex_fields = [
        ("orbit", "reduced_jacobian_eigenvalues"),
        ("orbit", "multipliers_ad"),
        ("orbit", "multipliers_saltation"),
        ("orbit", "trivial_multiplier_ad"),
        ("orbit", "trivial_multiplier_saltation"),
        ("orbit", "conserved_multipliers_ad"),
        ("orbit", "conserved_multipliers_saltation"),
        ("tune", "history"),
        ("tune: final", "multipliers"),
    ]
    for section, name in complex_fields:
        assert "`[re, im]`" in FIELDS[section][name][1], (section, name)
    # The writers that use `_pairs` are those above.
    for module, names in ((orbit, 7), (tune, 2)):
        assert inspect.getsource(module).count("_pairs(") == names, module
    assert "Complex numbers" in json_fields.reference_markdown()


def test_the_sweep_and_basin_say_whether_they_ran_to_the_end_apart_from_status():
    """`complete` says whether a sweep or basin ran to the end; the old
    `status` (`finished`, outside the library's statuses) stays for older
    readers and the reference says so; every other status field holds the
    library's words or says which others it may hold."""
    import hybrax

    assert "finished" not in hybrax.STATUS_NAMES
    for section in ("sweep", "basin"):
        assert "Flag" in FIELDS[section]["complete"][1]
        assert "not a library status" in FIELDS[section]["status"][1]
    for command in (sweep, basin):
        source = inspect.getsource(command)
        assert '"complete": not interrupted' in source
        assert '"interrupted" if interrupted else "finished"' in source


def test_a_field_the_reference_lacks_is_a_warning_and_the_file_is_kept(tmp_path):
    path = tmp_path / "run.json"
    with pytest.warns(json_fields.UndescribedFieldWarning, match="'extra'"):
        common._write_json(path, {"model": "m", "extra": 1}, "simulate")
    data = json.loads(path.read_text())
    assert data["extra"] == 1 and data["model"] == "m" and data["schema"] == 1
    # A generic key (a model's quantity) is described by its placeholder, a
    # nested record by its own section.
    common._write_json(path, {"period": 1.0, "apex": 2.0}, "orbit", generic=["apex"])
    with pytest.warns(json_fields.UndescribedFieldWarning, match="'bad'"):
        common._write_json(
            path,
            {"final": {"u": [0.0], "bad": 1}},
            "tune",
            records={"final": ("tune: final", ())},
        )
    with pytest.warns(json_fields.UndescribedFieldWarning, match="'apex'"):
        common._write_json(path, {"apex": 2.0}, "simulate", generic=["apex"])


def test_models_json_is_described(capsys):
    assert main(["models", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    _described("models", data, generic=data)
    for record in data.values():
        _described("models: MODEL", record)


def test_simulate_json_is_described(tmp_path):
    path = tmp_path / "run.json"
    argv = ["simulate", "bouncing-ball", "--no-figures", "--json", str(path)]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    _described("simulate", json.loads(path.read_text()))


# The found orbit's run is slow (19 s of the fast set's cold run: it compiles the
# compass gait's analysed orbit); the run without an orbit stays in the fast set.
@pytest.mark.parametrize(
    "sets",
    [pytest.param([], marks=pytest.mark.slow), ["--set", "gamma=0"]],
    ids=["found", "none"],
)
def test_orbit_json_is_described(tmp_path, sets):
    """The rimless wheel's orbit, and the file without an orbit (level ground:
    its orbit fields `null`, the best iterate added)."""
    path = tmp_path / "orbit.json"
    argv = ["orbit", "rimless-wheel", *sets, "--no-figures", "--json", str(path)]
    code = main([*argv, "--out", str(tmp_path / "out")])
    assert code == (1 if sets else 0)
    data = json.loads(path.read_text())
    # The wheel's declared quantities stand for the summary's fields.
    from hybrax.models import get_model

    _described("orbit", data, generic=get_model("rimless-wheel").quantities)
    assert ("best_iterate" in data) == bool(sets)


# -- The writers' code: the keys each one builds --------------------------------


def _keys_built(module, builders=()) -> set[str]:
    """The constant keys of the top-level record that `module`'s code builds:
    the dict displays passed to `_write_json`, assigned to `payload` or returned
    by the functions `builders` (their `dict(...)` keywords too), the keys set
    by `payload[KEY] = ...` and `payload.update(...)`, and the names split out of
    a string for `dict.fromkeys(keys)` (an orbit's fields left `null`). Keys
    computed at run time (a model's quantities, a parameter's name) are not
    read: the reference's fields in angle brackets stand for them."""
    tree = ast.parse(inspect.getsource(module))
    keys: set[str] = set()

    def dict_keys(node):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    keys.add(key.value)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "dict"
        ):
            keys.update(k.arg for k in node.keywords if k.arg is not None)

    def is_payload(node):
        return isinstance(node, ast.Name) and node.id == "payload"

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in builders:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return):
                    dict_keys(inner.value)
        elif isinstance(node, ast.Call):
            func = node.func
            name = getattr(func, "attr", getattr(func, "id", None))
            if name == "_write_json" and len(node.args) > 1:
                dict_keys(node.args[1])
            if name == "update" and is_payload(getattr(func, "value", None)):
                keys.update(k.arg for k in node.keywords if k.arg is not None)
                for arg in node.args:
                    dict_keys(arg)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if is_payload(target):
                    dict_keys(node.value)
                if (
                    isinstance(target, ast.Subscript)
                    and is_payload(target.value)
                    and isinstance(target.slice, ast.Constant)
                ):
                    keys.add(target.slice.value)
                if isinstance(target, ast.Name) and target.id == "keys":
                    # `"state period ...".split()`, the orbit's fields set null
                    call = node.value
                    text = getattr(getattr(call, "func", None), "value", None)
                    if isinstance(text, ast.Constant):
                        keys.update(text.value.split())
    return keys


# (module, the section its top-level record belongs to, the functions that
# return that record or a part of it, keys that the module's code must build)
WRITERS = [
    (simulate, "simulate", (), {"events", "t_final"}),
    (orbit, "orbit", ("_orbit_payload", "_orbit_values"), {"best_iterate", "period"}),
    (continuation, "continue", ("_continue_payload",), {"branch", "cascade", "end"}),
    (curve, "continue: curve", ("follow_curve",), {"codim2", "max_points"}),
    (sweep, "sweep", (), {"complete", "status", "found_by"}),
    (basin, "basin", (), {"complete", "status", "counts"}),
    (tune, "tune", ("_tune_record",), {"history", "final", "verification"}),
]


@pytest.mark.parametrize(
    "module, section, builders, expected",
    WRITERS,
    ids=[section for _, section, _, _ in WRITERS],
)
def test_every_key_a_writer_builds_is_described(module, section, builders, expected):
    """The reference describes every key the writer builds, and no field that
    it does not build (the branch's boundaries come from
    `curve.boundary_records`, checked below)."""
    keys = _keys_built(module, builders)
    assert expected <= keys, expected - keys  # the reading finds the record
    _described(section, dict.fromkeys(keys))
    stale = {
        name
        for name in FIELDS[section]
        if not name.startswith("<") and name not in ("hybrax", "schema")
    }
    stale -= keys | {"force_reversals", "grazings", "release_reversals"}
    assert not stale, f"{section}: described but never written: {stale}"


def test_the_continuation_boundaries_and_tune_final_are_described():
    """The branch's boundary records (`curve.boundary_records`, keys in a table)
    and the final point of `tune` (a nested record)."""
    source = inspect.getsource(curve.boundary_records)
    for key in ("force_reversals", "grazings", "release_reversals"):
        assert f'"{key}"' in source
        assert key in FIELDS["continue"]
    finals = [
        value
        for node in ast.walk(ast.parse(inspect.getsource(tune)))
        if isinstance(node, ast.Dict)
        for key, value in zip(node.keys, node.values)
        if getattr(key, "value", None) == "final" and isinstance(value, ast.Dict)
    ]
    assert len(finals) == 2  # the finished tuning's and the interrupted one's
    for inner in finals:
        names = {k.value for k in inner.keys if isinstance(k, ast.Constant)}
        assert {"params", "u"} <= names
        _described("tune: final", dict.fromkeys(names))


# -- The slow commands, run --------------------------------------------------


# Each compiles its own programs (about 15 s cold apiece).
@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "rimless-wheel", "--grid", "gamma=0.05:0.08:2", "--no-progress"],
        ["basin", "simplest-walker", "--steps", "4", "--max-period", "2"]
        + ["--grid", "theta=0.15:0.2:2"],
        ["continue", "rimless-wheel", "--start", "0.1", "--stop", "0.11"]
        + ["--max-points", "3"],
        ["tune", "rimless-wheel", "--vary", "gamma", "--target", "speed=1.3"]
        + ["--max-steps", "2", "--no-progress"],
    ],
    ids=["sweep", "basin", "continue", "tune"],
)
def test_the_slow_commands_json_is_described(tmp_path, argv):
    path = tmp_path / "run.json"
    main([*argv, "--no-figures", "--out", str(tmp_path / "out"), "--json", str(path)])
    data = json.loads(path.read_text())
    generic = {"sweep": ["starts_past_guard"]}.get(argv[0], ())
    _described(argv[0], data, generic)
    if argv[0] == "basin":
        _described("models: MODEL", data["model"])
    if argv[0] == "tune":
        from hybrax.models import get_model

        quantities = get_model("rimless-wheel").quantities
        _described("tune: final", data["final"], generic=quantities)
    if argv[0] in ("sweep", "basin"):
        assert data["complete"] is True and data["status"] == "finished"
