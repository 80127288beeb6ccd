"""A command's output folder holds one run's files, a write that fails after the
work is done keeps its results elsewhere, and no write leaves a partial file.

The runs are `hybrax simulate bouncing-ball` in-process (one small program,
compiled once for the module)."""

import errno
import importlib.metadata
import json
import math
import pathlib

import pytest

from hybrax import _io
from hybrax._cli import main


def _wrote(err: str) -> list[str]:
    return [line.split("wrote ", 1)[1] for line in err.splitlines() if "wrote " in line]


def _manifest(folder: pathlib.Path, kind: str = "simulate") -> dict:
    return json.loads((folder / _io.MANIFEST).read_text())["runs"][kind]


def test_a_folder_holds_one_runs_files(tmp_path, capsys):
    """A second run of a command into a folder removes the files of the first
    that it does not write (its JSON here), keeps the files it writes again and
    files no run wrote, and lists its own files in the folder's manifest."""
    out = tmp_path / "out"
    first = ["simulate", "bouncing-ball", "--out", str(out)]
    assert main([*first, "--json", str(out / "run.json")]) == 0
    written = _wrote(capsys.readouterr().out)
    assert str(out / "run.json") in written
    assert sorted(_manifest(out)["files"]) == sorted(
        pathlib.Path(path).name for path in written
    )
    (out / "notes.txt").write_text("the user's own file")

    assert main(first) == 0
    captured = capsys.readouterr()
    assert "run.json" in captured.err.splitlines()[-1]  # said, on its own line
    assert not (out / "run.json").exists()
    assert (out / "notes.txt").read_text() == "the user's own file"
    files = _manifest(out)["files"]
    assert sorted(files) == sorted(
        pathlib.Path(path).name for path in _wrote(captured.out)
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*files, "notes.txt", _io.MANIFEST]
    )
    assert _manifest(out)["command"] == "hybrax " + " ".join(first)


def test_each_kind_of_run_keeps_its_own_files(tmp_path):
    """The manifest per kind of run: a `simulate` beside an `orbit` in one folder
    leaves the orbit's files; the next `orbit` removes only its predecessor's
    files that it does not write again; a file written by both is the latest
    writer's (not removed by the other's next run)."""
    out = tmp_path / "out"
    out.mkdir()

    def run(kind, names):
        _io.start_run()
        for name in names:
            _io.write_file(out / name, lambda temporary: temporary.write_text(kind))
        return _io.finish_folder(out, kind, f"hybrax {kind}")

    assert run("orbit", ["orbit.png", "energy.png", "orbit.json"]) == []
    assert run("simulate", ["time_series.png", "energy.png"]) == []
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["orbit.png", "energy.png", "orbit.json", "time_series.png", _io.MANIFEST]
    )
    assert _manifest(out, "orbit")["files"] == ["orbit.json", "orbit.png"]
    assert run("orbit", ["orbit.png"]) == ["orbit.json"]
    assert (out / "energy.png").read_text() == "simulate"
    assert run("simulate", ["time_series.png"]) == ["energy.png"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["orbit.png", "time_series.png", _io.MANIFEST]
    )
    assert _manifest(out, "orbit")["command"] == "hybrax orbit"


@pytest.mark.parametrize(
    "manifest", ["{ not json", '{"files": ["old.png"]}', '{"runs": {"orbit": {}}}']
)
def test_a_foreign_manifest_is_replaced_and_removes_nothing(tmp_path, manifest):
    """A manifest that is not one of this version's (unreadable, another layout,
    an entry without its files) is replaced; no file is removed on its word."""
    out = tmp_path / "out"
    out.mkdir()
    (out / _io.MANIFEST).write_text(manifest)
    (out / "old.png").write_text("kept")
    _io.start_run()
    _io.write_file(out / "new.png", lambda temporary: temporary.write_text("new"))
    assert _io.finish_folder(out, "orbit", "hybrax orbit") == []
    assert (out / "old.png").read_text() == "kept"
    assert _manifest(out, "orbit")["files"] == ["new.png"]


def test_a_write_that_fails_after_the_run_keeps_the_results(
    tmp_path, capsys, monkeypatch
):
    """The JSON's folder refuses the file after the simulation (a full disk):
    the run says where the JSON went instead, exits 1, and that file holds the
    run's record; nothing partial is left beside the wanted place."""
    out, json_folder = tmp_path / "out", tmp_path / "records"
    replace = _io._replace

    def full_disk(source, target):
        if pathlib.Path(target).parent == json_folder:
            raise OSError(errno.ENOSPC, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(_io, "_replace", full_disk)
    wanted = json_folder / "run.json"
    code = main(["simulate", "bouncing-ball", "--out", str(out), "--json", str(wanted)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1
    assert err.startswith("hybrax simulate: could not write ")
    assert str(wanted) in err and "No space left on device" in err
    rescued = pathlib.Path(err.rsplit("saved it as ", 1)[1].strip("'"))
    assert rescued.name == "run.json" and rescued.parent != json_folder
    record = json.loads(rescued.read_text())
    assert record["status"] == "successful"
    assert not wanted.exists() and list(json_folder.iterdir()) == []
    # The figures went to their folder as usual.
    assert (out / "energy.png").exists()


def test_a_write_is_all_or_nothing(tmp_path):
    """A writer that raises midway (a killed or failing run) leaves the file
    that was there, and no temporary beside it; one that succeeds replaces it
    whole, having written under a name with the same suffix beside it."""
    path = tmp_path / "result.json"
    path.write_text("the previous run's file")

    def half_then_fail(temporary):
        temporary.write_text("{ half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        _io.write_file(path, half_then_fail)
    assert path.read_text() == "the previous run's file"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]

    def whole(temporary):
        assert temporary.suffix == ".json" and temporary.parent == tmp_path
        temporary.write_text("new")

    assert _io.write_file(path, whole) == path
    assert path.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_figure_format_quiet_and_no_figures(tmp_path, capsys):
    """`--format svg --dpi 80 -q`: the figures as SVG, nothing on stdout, and
    the JSON records the version, its layout and the solver options (the
    library's defaults); a negative value may follow its option (`--x0 1,-2`:
    the first impact where 1 - 2 t - g t^2 / 2 = 0). The next run with
    `--no-figures` writes none and removes the first run's."""
    out = tmp_path / "out"
    argv = ["simulate", "bouncing-ball", "--out", str(out), "--json", str(out / "r")]
    assert main([*argv, "--format", "svg", "--dpi", "80", "-q", "--x0", "1,-2"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    figures = sorted(p.name for p in out.glob("*.svg"))
    assert figures == ["energy.svg", "phase_portrait.svg", "time_series.svg"]
    assert not list(out.glob("*.png"))
    assert (out / "energy.svg").read_text().lstrip().startswith("<?xml")
    record = json.loads((out / "r").read_text())
    assert record["hybrax"] == importlib.metadata.version("hybrax")
    assert record["schema"] == 1
    assert record["settings"] == {"tol": 1e-10, "t_max": 50.0, "max_ode_steps": 4096}
    assert record["x0"] == [1.0, -2.0]
    g = record["params"]["g"]
    first = (-2 + math.sqrt(4 + 2 * g)) / g
    assert record["events"][0]["t"] == pytest.approx(first, rel=1e-9)

    assert main([*argv, "--no-figures"]) == 0
    captured = capsys.readouterr()
    assert "wrote" in captured.out and ".svg" not in captured.out
    assert not list(out.glob("*.svg")) and not list(out.glob("*.png"))
    assert "energy.svg" in captured.err  # the removal is said
