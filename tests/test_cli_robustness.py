"""`hybrax robustness`: usage errors before any computation, a run's files and
their agreement (the walks' interval holds the chain's estimate), and Ctrl-C."""

import csv
import json

import numpy as np
import pytest

from helpers import interrupt_command
from hybrax._cli import main


@pytest.mark.parametrize(
    "argv, named",
    [
        (["robustness", "rimless-wheel"], "--terrain"),
        (["robustness", "rimless-wheel", "--terrain", "s=0.1"], "--terrain"),
        (["robustness", "rimless-wheel", "--terrain", "sigma=0.1,x"], "--terrain"),
        (["robustness", "rimless-wheel", "--terrain", "sigma=0,0.1"], "--terrain"),
        (["robustness", "rimless-wheel", "--terrain", "sigma=-1"], "--terrain"),
        (["robustness", "bouncing-ball", "--terrain", "sigma=0.01"], "model"),
        (
            ["robustness", "rimless-wheel", "--terrain", "sigma=0.01"]
            + ["--disturbance", "height", "--mesh", "u0=1:2:5"],
            "--mesh",
        ),
        (
            ["robustness", "rimless-wheel", "--terrain", "sigma=0.01"]
            + ["--disturbance", "push"],
            "--disturbance",
        ),
        (
            ["robustness", "rimless-wheel", "--terrain", "sigma=0.01"]
            + ["--mesh", "u0=2:1:10"],
            "--mesh",
        ),
        (
            ["robustness", "compass-gait", "--terrain", "sigma=0.01"]
            + ["--mesh", "alpha=0.1:0.3:5"],
            "--mesh",
        ),
        (
            ["robustness", "rimless-wheel", "--terrain", "sigma=0.01"]
            + ["--walkers", "0"],
            "--walkers",
        ),
        (
            ["robustness", "compass-gait", "--terrain", "sigma=0.01"]
            + ["--mesh", "reachable=0"],
            "--mesh",
        ),
        (
            ["robustness", "compass-gait", "--terrain", "sigma=0.01"]
            + ["--mesh", "reachable=fine"],
            "--mesh",
        ),
        (
            ["robustness", "compass-gait", "--terrain", "sigma=0.01"]
            + ["--mesh", "reachable=0.3", "--mesh", "theta=0.1:0.3:5"],
            "--mesh",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, named, capsys, tmp_path):
    """Each bad argument ends the command with exit status 2 and one line naming
    it, before any orbit is sought (no compilation line)."""
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--out", str(tmp_path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert named in err.strip().splitlines()[-1]
    assert "compiling" not in err and "Traceback" not in err


@pytest.mark.slow
def test_a_run_writes_its_rows_and_the_methods_agree(tmp_path):
    """Two roughness levels of the rimless wheel: the table, the JSON and the
    figure; the walks' estimate is within its 95% interval's width (about four
    standard errors) of the chain's expected steps, and the mean first-passage
    time falls as the terrain gets rougher."""
    out, path = tmp_path / "out", tmp_path / "robustness.json"
    code = main(
        ["robustness", "rimless-wheel", "--terrain", "sigma=0.015,0.03"]
        + ["--walkers", "500", "--max-steps", "400", "--out", str(out)]
        + ["--json", str(path)]
    )
    assert code == 0
    record = json.loads(path.read_text())
    rows = record["rows"]
    assert [row["sigma"] for row in rows] == [0.015, 0.03]
    for row in rows:
        width = row["mfpt_high"] - row["mfpt_low"]
        assert abs(row["mfpt_walks"] - row["mfpt_mesh"]) < width, row
        assert row["falls"] <= 500 and row["walks_ended_otherwise"] == 0
    assert rows[0]["mfpt_walks"] > rows[1]["mfpt_walks"]
    with open(out / "robustness.csv") as table:
        read = list(csv.DictReader(table))
    np.testing.assert_allclose(
        [float(r["mfpt_walks"]) for r in read], [r["mfpt_walks"] for r in rows]
    )
    assert (out / "mfpt.png").stat().st_size > 0
    assert record["gait_sensitivity"] > 0


@pytest.mark.slow
def test_a_reachable_mesh_from_the_command_line(tmp_path):
    """`--mesh reachable=0.5` on the rimless wheel: the chain on the states the
    walks reach is within 1% of the independent exact chain of its closed-form
    step map (29.40 against 29.44 measured), and the JSON and the table record
    the mesh and its states."""
    from test_first_passage import SIGMA, _reference_chain

    out, path = tmp_path / "out", tmp_path / "robustness.json"
    code = main(
        ["robustness", "rimless-wheel", "--terrain", f"sigma={SIGMA}"]
        + ["--mesh", "reachable=0.5", "--walkers", "200", "--max-steps", "500"]
        + ["--no-figures", "--quiet", "--out", str(out), "--json", str(path)]
    )
    assert code == 0
    record = json.loads(path.read_text())
    assert record["mesh"] == {"reachable": 0.5}
    (row,) = record["rows"]
    centres, expected, _ = _reference_chain(SIGMA)
    reference = np.interp(record["orbit"][0], centres, expected)
    np.testing.assert_allclose(row["mfpt_mesh"], reference, rtol=0.01)
    assert row["mesh_states"] > 10 and row["mesh_outside"] == 0
    assert row["mesh_ended"] == 0
    with open(out / "robustness.csv") as table:
        (read,) = list(csv.DictReader(table))
    assert int(read["mesh_states"]) == row["mesh_states"]


@pytest.mark.slow
def test_a_chain_whose_steps_end_otherwise_says_so(tmp_path, capsys):
    """The simplest walker's steps limited to 80 integrator steps, which the
    orbit's cycle needs fewer of and the slower steps that the disturbed walks
    and the reachable mesh at sigma = 0.002 rad reach exceed: those steps end
    `max_steps_reached`, a failure that is no fall. The command notes the
    walks that ended so and the mesh states whose steps did (the chain counts
    them as falls), and the JSON records both."""
    path = tmp_path / "robustness.json"
    code = main(
        ["robustness", "simplest-walker", "--terrain", "sigma=0.002"]
        + ["--mesh", "reachable=0.5", "--walkers", "100", "--max-steps", "200"]
        + ["--max-ode-steps", "80"]
        + ["--no-figures", "--quiet", "--out", str(tmp_path / "out")]
        + ["--json", str(path)]
    )
    assert code == 0
    (row,) = json.loads(path.read_text())["rows"]
    assert row["mesh_ended"] > 0.01 and row["walks_ended_otherwise"] > 0
    err = capsys.readouterr().err
    assert "ended in a failure that is no fall; the chain counts it as a fall" in err
    assert "ended in a failure that is no fall (max_steps_reached)" in err


@pytest.mark.slow
def test_a_step_height_runs_on_the_full_state_and_the_methods_agree(tmp_path):
    """`--disturbance height` on the rimless wheel: the cycles run on the full
    state after heel strike, so the chain's mesh is over the state's names
    (theta, omega; a 2-D mesh) and starts from the orbit's state; the walks'
    estimate and the chain's expected steps agree within the walks' interval's
    width at two roughness levels."""
    out, path = tmp_path / "out", tmp_path / "robustness.json"
    code = main(
        ["robustness", "rimless-wheel", "--disturbance", "height"]
        + ["--terrain", "sigma=0.02,0.05", "--walkers", "500", "--max-steps", "200"]
        + ["--mesh", "theta=-0.5:-0.1:41", "--mesh", "omega=0.3:2:41"]
        + ["--no-figures", "--quiet", "--out", str(out), "--json", str(path)]
    )
    assert code == 0
    record = json.loads(path.read_text())
    assert record["disturbance"] == "height" and record["unit"] == "m"
    assert list(record["mesh"]) == ["theta", "omega"]
    for row in record["rows"]:
        width = row["mfpt_high"] - row["mfpt_low"]
        assert abs(row["mfpt_walks"] - row["mfpt_mesh"]) < width, row
    assert record["rows"][0]["mfpt_walks"] > record["rows"][1]["mfpt_walks"]


@pytest.mark.slow
def test_ctrl_c_during_the_walks_exits_130_with_one_line(tmp_path):
    """SIGINT once the walks' program compiles: exit 130 within seconds and the
    command's one line (the walks return to Python every `WALK_CHUNK` steps);
    no table written."""
    code, waited, lines = interrupt_command(
        ["robustness", "rimless-wheel", "--terrain", "sigma=0.005"]
        + ["--max-steps", "100000", "--no-figures", "--out", str(tmp_path / "out")],
        "compiled the first-passage walks",
        env={"HYBRAX_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert code == 130, lines
    assert waited < 30, waited
    assert "hybrax robustness: interrupted; no output of this run was written" in (
        lines
    )
    assert not any("Traceback" in line for line in lines)
    assert not (tmp_path / "out" / "robustness.csv").exists()


@pytest.mark.slow
def test_orbit_reports_the_gait_sensitivity_norm(tmp_path, capsys):
    """`hybrax orbit rimless-wheel` prints and writes the norm of its declared
    slope disturbance on its step time: the closed form sqrt(D^2 + B^2 C^2 /
    (1 - A^2)) of the wheel's step map (A = cos^2 2 alpha, B from the step map,
    C and D from quadrature of the step time)."""
    from scipy.integrate import quad

    path = tmp_path / "orbit.json"
    assert main(["orbit", "rimless-wheel", "--no-figures", "--json", str(path)]) == 0
    printed = capsys.readouterr().out
    entry = json.loads(path.read_text())["gait_sensitivity"]["slope"]
    alpha, gamma, g = np.pi / 8, 0.08, 9.81
    c2 = np.cos(2 * alpha) ** 2
    omega = np.sqrt(4 * g * np.sin(alpha) * np.sin(gamma) * c2 / (1 - c2))

    def step_time(w, d):
        start, end = gamma + d - alpha, gamma + d + alpha
        rate = lambda theta: 1 / np.sqrt(w**2 + 2 * g * (np.cos(start) - np.cos(theta)))  # noqa: E731
        return quad(rate, start, end, epsabs=1e-13, epsrel=1e-13)[0]

    h = 1e-5
    C = (step_time(omega + h, 0) - step_time(omega - h, 0)) / (2 * h)
    D = (step_time(omega, h) - step_time(omega, -h)) / (2 * h)
    B = c2 * 4 * g * np.sin(alpha) * np.cos(gamma) / (2 * omega)
    norm = np.sqrt(D**2 + B**2 * C**2 / (1 - c2**2))
    assert entry["status"] == "successful" and entry["unit"] == "rad"
    np.testing.assert_allclose(entry["norm"], norm, rtol=1e-6)
    np.testing.assert_allclose(entry["norms"]["period"], norm, rtol=1e-6)
    assert "gait sensitivity norm" in printed and f"{norm:.6g}" in printed


def test_help_names_every_zoo_model_with_disturbances(capsys):
    """`hybrax robustness --help` lists the zoo's models that declare
    disturbances, each of them and no other (read from their bundles)."""
    from hybrax.models import REGISTRY, get_model

    with pytest.raises(SystemExit):
        main(["robustness", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    listed = help_text.split("Models that declare disturbances:")[1]
    listed = {name.strip(" .") for name in listed.split(".")[0].split(",")}
    declared = {name for name in REGISTRY if get_model(name).disturbances}
    assert listed == declared
