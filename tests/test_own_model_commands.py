"""The own-model tutorial's runner on the command line, as its page says: the
page's model blocks (the set-up, the runner's, the section's and the bundle's)
are the module of a package that registers the bundle in the `hybrax.models`
entry-point group as the page's `pyproject.toml` lines say (a `.dist-info`
folder on the path, as pip leaves one), and each of the page's `hybrax`
commands runs in a process of its own, as typed there (with `--out` and
`--json` added). Each exits 0, writes its JSON and figures, and its numbers
agree with what the tutorial computes in Python (its shown outputs) and states
in its text."""

import csv
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib

import jax
import numpy as np
import pytest

from test_docs import PAGES, _blocks


pytestmark = pytest.mark.slow  # each command compiles its programs (~20 s each)

PAGE = PAGES / "tutorials" / "own-model.md"

# The blocks of the page that the module `myrunner.py` holds (the page says
# which), each found by a line of its own.
_MODULE_BLOCKS = (
    "import hybrax as hx",
    "class RunnerParams",
    "hx.PoincareSection(",
    "hx.ModelBundle(",
)

_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan")


def _numbers(text: str) -> list[float]:
    return [float(value) for value in _NUMBER.findall(text)]


def _fenced(language: str) -> list[str]:
    """The page's blocks of `language` (toml, sh)."""
    return re.findall(rf"^```{language}\n(.*?)^```", PAGE.read_text(), re.S | re.M)


def _block(marker: str) -> tuple[str, str | None]:
    """The page's one Python block that contains `marker`, and its shown output."""
    (found,) = [(code, shown) for code, shown in _blocks(PAGE) if marker in code]
    return found


def _stated(pattern: str) -> list[float]:
    """The numbers the page's text states where `pattern` (a regular expression
    with groups, its words as on the page, any line breaks) matches."""
    text = " ".join(PAGE.read_text().split())
    (found,) = re.findall(pattern, text)
    return [float(value) for value in np.atleast_1d(found)]


def _commands() -> dict[str, list[str]]:
    """The page's `hybrax` commands, by command name, as words."""
    (sh,) = _fenced("sh")
    commands = {}
    for line in sh.splitlines():
        if line.strip():
            words = shlex.split(line)
            assert words[0] == "hybrax", line
            commands[words[1]] = words
    return commands


def _tutorial():
    """What the tutorial's Python part prints: the orbit's apex height, period
    and leading multiplier, and the sweep's angles and |multiplier|s."""
    _, shown = _block("floquet = orbit.floquet")
    orbit_line, multipliers_line = shown.splitlines()[:2]
    apex, period = _numbers(orbit_line)
    multiplier = _numbers(multipliers_line)[0]
    code, shown = _block("hx.sweep_orbits(")
    (linspace,) = re.findall(r"linspace\(([^)]*)\)", code)
    start, stop, count = (float(v) for v in linspace.split(","))
    angles = np.linspace(start, stop, int(count))
    magnitudes = np.array(_numbers("\n".join(shown.splitlines()[1:])))
    assert magnitudes.shape == angles.shape
    return dict(
        apex=apex,
        period=period,
        multiplier=multiplier,
        angles=angles,
        magnitudes=magnitudes,
    )


#: The tutorial's model registered again with no presentation at all.
BARE = "runner-bare"


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """The tutorial's package, installed as its `pyproject.toml` lines say:
    `(folder on the path, model name)`."""
    root = tmp_path_factory.mktemp("runner-package")
    (toml,) = _fenced("toml")
    entries = tomllib.loads(toml)["project"]["entry-points"]["hybrax.models"]
    ((name, target),) = entries.items()
    module = target.split(":")[0]
    code = "\n\n".join(_block(marker)[0] for marker in _MODULE_BLOCKS)
    (root / f"{module}.py").write_text(code)
    info = root / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n"
    )
    # The same mathematics without a presentation (see
    # `test_a_model_without_presentation_runs_every_command`).
    (root / "barerunner.py").write_text(
        "import dataclasses\n\nimport hybrax as hx\n\nimport "
        f"{module}\n\n\ndef bundle():\n    return dataclasses.replace(\n"
        f"        {module}.bundle(), name={BARE!r}, "
        "presentation=hx.ModelPresentation()\n    )\n"
    )
    (info / "entry_points.txt").write_text(
        f"[hybrax.models]\n{name} = {target}\n{BARE} = barerunner:bundle\n"
    )
    return root, name


def _hybrax(root, words: list[str]) -> subprocess.CompletedProcess:
    """`hybrax WORDS` in a process of its own, in the package's folder with it on
    the path and the suite's compilation cache (conftest.py)."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        HYBRAX_CACHE_DIR=jax.config.jax_compilation_cache_dir,
    )
    return subprocess.run(
        [sys.executable, "-m", "hybrax", *words],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=900,
        check=False,
    )


def _run(plugin, command: str):
    """Run the page's `command` in a process of its own: `(JSON record, the
    figures' folder)`, once it exited 0 and wrote its figures as PNG files."""
    root, name = plugin
    words = _commands()[command]
    assert words[2] == name
    out, record = root / command, root / f"{command}.json"
    result = _hybrax(root, [*words[1:], "--out", str(out), "--json", str(record)])
    assert result.returncode == 0, f"{' '.join(words)}:\n{result.stderr[-4000:]}"
    figures = sorted(out.glob("*.png"))
    assert figures, f"{' '.join(words)} wrote no figure"
    for path in figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    return json.loads(record.read_text()), out


def _png(out) -> set[str]:
    return {path.name for path in out.glob("*.png")}


def _table(path) -> list[dict[str, str]]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_orbit(plugin):
    record, out = _run(plugin, "orbit")
    python = _tutorial()
    assert record["converged"] and record["status"] == "successful"
    assert record["state"][1] == pytest.approx(python["apex"], abs=1e-6)
    assert record["period"] == pytest.approx(python["period"], rel=1e-8)
    for route in ("multipliers_ad", "multipliers_saltation"):
        leading = record[route][0]
        assert leading[0] == pytest.approx(python["multiplier"], rel=1e-6)
        assert leading[1] == 0.0
    assert record["stable"] == (abs(python["multiplier"]) < 1)
    # The energy, declared an invariant: its multiplier 1.
    assert record["conserved_multipliers_ad"][0][0] == pytest.approx(1.0, abs=1e-6)
    assert {"orbit.png", "time_series.png", "energy.png"} <= _png(out)


def test_continue(plugin):
    record, out = _run(plugin, "continue")
    python = _tutorial()
    first, last = record["branch"][0], record["branch"][-1]
    assert first["alpha"] == record["start"]
    assert first["period"] == pytest.approx(python["period"], rel=1e-8)
    assert first["multiplier"] == pytest.approx(python["multiplier"], rel=1e-6)
    assert record["status"] == "reached_bound"
    assert last["alpha"] == pytest.approx(record["stop"])
    # One period doubling, where the tutorial's sweep has |nu| cross 1, where
    # the page says.
    ((doubling,),) = [record["period_doublings"]]
    assert doubling["located"] and doubling["multiplier"] == pytest.approx(-1.0)
    angles, magnitudes = python["angles"], python["magnitudes"]
    (crossing,) = np.flatnonzero((magnitudes[:-1] > 1) & (magnitudes[1:] < 1))
    assert angles[crossing] < doubling["alpha"] < angles[crossing + 1]
    (stated,) = _stated(r"period doubling at ([-\d.]+) rad")
    assert doubling["alpha"] == pytest.approx(stated, abs=5e-5)
    assert {"branch_period.png", "branch_multiplier.png"} <= _png(out)


def test_sweep(plugin):
    record, out = _run(plugin, "sweep")
    python = _tutorial()
    # Every orbit of the grid is found (the page says so).
    assert record["status"] == "finished" and record["complete"]
    assert record["converged"] == record["points"] and not record["failures"]
    rows = _table(out / "sweep.csv")
    assert len(rows) == record["points"]
    assert {row["status"] for row in rows} == {"successful"}
    for row in rows:
        assert (row["stable"] == "true") == (float(row["multiplier_abs"]) < 1)
    # At the default energy, the tutorial's sweep over the same angles.
    default = [row for row in rows if float(row["E"]) == 1800.0]
    assert len(default) == len(record["grid"]["alpha"])
    for row in default:
        (k,) = np.flatnonzero(np.isclose(python["angles"], float(row["alpha"])))
        assert float(row["multiplier_abs"]) == pytest.approx(
            python["magnitudes"][k], rel=1e-6
        )
    assert "sweep_heatmap.png" in _png(out)


def test_basin(plugin):
    record, out = _run(plugin, "basin")
    python = _tutorial()
    assert record["orbit_status"] == "successful" and record["complete"]
    # (Its record of the model lists the commands that run it.)
    assert set(_commands()) <= set(record["model"]["commands"])
    assert record["orbit"][0] == pytest.approx(python["apex"], abs=1e-6)
    # Every start reaches the orbit (the page says so).
    starts = record["grid"]["apex"]
    assert record["counts"]["orbit"] == len(starts)
    rows = _table(out / "basin.csv")
    assert [row["outcome"] for row in rows] == ["orbit"] * len(starts)
    for row in rows:
        assert float(row["final_apex"]) == pytest.approx(python["apex"], abs=1e-4)
    assert "basin_map.png" in _png(out)


def test_tune(plugin):
    record, out = _run(plugin, "tune")
    python = _tutorial()
    final = record["final"]
    assert final["orbit_found"] and final["stable"] and final["targets_met"]
    target = record["targets"]["apex"]
    assert final["apex"] == pytest.approx(target, abs=record["tolerance"])
    # The apex rises with the touchdown angle (the tutorial's derivative is
    # positive): the tuned angle is above the default 0.38 rad, where the page
    # says, with the multiplier it states.
    alpha = final["values"]["alpha"]
    assert target > python["apex"] and alpha > 0.38
    angle, multiplier = _stated(
        r"apex at 0\.94 m, ([-\d.]+) rad, with the multiplier ([-\d.]+)\."
    )
    assert alpha == pytest.approx(angle, abs=5e-5)
    assert final["multipliers"][0][0] == pytest.approx(multiplier, abs=5e-3)
    assert {"tune_path.png", "tune_multipliers.png"} <= _png(out)


@pytest.mark.parametrize(
    "words, argument",
    [
        (
            [
                "continue",
                "runner",
                "--param",
                "alhpa",
                "--start",
                "0.38",
                "--stop",
                "0.36",
            ],
            "--param",
        ),
        (["tune", "runner", "--vary", "alhpa", "--target", "apex=0.94"], "--vary"),
    ],
)
def test_a_misspelt_parameter_is_one_line_before_any_compile(plugin, words, argument):
    """The runner's `parameter` is `hx.FieldParameter`, which builds any name: a
    misspelt one is caught where the arguments are read (exit 2, one line naming
    the argument and the name), not as a traceback after the compile."""
    root, _ = plugin
    result = _hybrax(root, [*words, "--out", str(root / "typo")])
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert f"argument {argument}: 'alhpa' is not a parameter of 'runner'" in line
    assert "Traceback" not in result.stderr and "compiling" not in result.stderr


@pytest.mark.parametrize("command", ["orbit", "continue", "sweep", "basin", "tune"])
def test_a_model_without_presentation_runs_every_command(plugin, command):
    """The tutorial's mathematics alone (its bundle with `ModelPresentation()`:
    no figure specification, labels or hooks) runs each of the page's commands:
    exit 0, its JSON written, the numbers those of the presented model (the
    tutorial's outputs); `continue` writes the declared apex height at every
    point (`hybrax.branch_quantities`), the section state's height."""
    root, name = plugin
    words = [BARE if word == name else word for word in _commands()[command]]
    out, path = root / f"bare-{command}", root / f"bare-{command}.json"
    result = _hybrax(root, [*words[1:], "--out", str(out), "--json", str(path)])
    assert result.returncode == 0, f"{' '.join(words)}:\n{result.stderr[-4000:]}"
    assert "Traceback" not in result.stderr
    record = json.loads(path.read_text())
    python = _tutorial()
    if command == "orbit":
        assert record["period"] == pytest.approx(python["period"], rel=1e-8)
        assert record["apex"] == pytest.approx(python["apex"], abs=1e-6)
    elif command == "continue":
        first = record["branch"][0]
        assert first["period"] == pytest.approx(python["period"], rel=1e-8)
        for point in record["branch"]:
            assert point["apex"] == pytest.approx(point["state"][1], abs=1e-12)
        assert {"branch_period.png", "branch_multiplier.png"} <= _png(out)
    elif command == "sweep":
        assert record["converged"] == record["points"]
    elif command == "basin":
        assert record["counts"]["orbit"] == len(record["grid"]["apex"])
    else:
        assert record["final"]["targets_met"]
