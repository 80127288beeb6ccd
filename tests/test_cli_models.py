"""Every registered model through every command it supports (`hybrax models`), with
the rimless wheel's and the bouncing ball's closed forms as references, and bad
paths and values refused with exit code 2 before any computation.

The wheel (McGeer 1990; Coleman, Chatterjee & Ruina 1997), spokes 2 alpha apart on
a slope gamma, g / l = 9.81 / s^2: after each heel strike the stance rate is
omega* = sqrt(4 (g/l) sin(alpha) sin(gamma) c / (1 - c)) with c = cos^2(2 alpha),
the multiplier of the step map is c, and an orbit exists only where the wheel
vaults over the top: omega*^2 > 2 (g/l) (1 - cos(gamma - alpha)).
"""

import json
import math
import re

import numpy as np
import pytest

from helpers import run_cli as _run
from hybrax._registry import model_names


G = 9.81
ALPHA = math.pi / 8  # the wheel's default


def _omega_star(gamma, alpha=ALPHA):
    c = math.cos(2 * alpha) ** 2
    return math.sqrt(4 * G * math.sin(alpha) * math.sin(gamma) * c / (1 - c))


def _vaults(gamma, alpha):
    return _omega_star(gamma, alpha) ** 2 > 2 * G * (1 - math.cos(gamma - alpha))


def test_models_lists_every_model_with_its_parameters():
    code, out, _ = _run(["models"])
    assert code == 0
    for name in model_names():
        assert f"{name}:" in out
    assert "rimless-wheel" in out and "gamma" in out
    assert re.search(r"^    gamma +0\.08  rad +slope$", out, re.M)
    _assert_table_is_aligned(out)
    # A derived parameter shows its value at the defaults and its unit, not
    # "derived" in place of either; the compass gait's ratios are dimensionless.
    assert re.search(
        r"^    D_G +-0\.0377124  1 +derived: dimensionless ground damping", out, re.M
    )
    assert re.search(r"^    mu +0\.5  1 +derived: mass ratio", out, re.M)
    assert not re.search(r"^    \S+ +\S* +derived +", out, re.M)
    # -q: accepted as by every command, and prints nothing (results go nowhere).
    code, quiet, err = _run(["models", "-q"])
    assert (code, quiet, err) == (0, "", "")
    # One model by name: its own block only; an unknown name is a usage error.
    code, one, _ = _run(["models", "rimless-wheel"])
    assert code == 0
    assert one.startswith("rimless-wheel:") and re.search(r"0\.08  rad +slope", one)
    assert [name for name in model_names() if f"{name}:" in one] == ["rimless-wheel"]
    code, _, err = _run(["models", "walker"])
    assert code == 2 and "Traceback" not in err
    assert _run(["models", "-q", "walker"])[0] == 2
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith(
            "invalid choice: 'walker' (choose from "
            + ", ".join(map(repr, model_names()))
            + ")"
        )
    )


def _assert_table_is_aligned(out):
    """Each model's parameter table: every row's default ends, and its unit and
    meaning start, in the column of the header's; a wrapped meaning goes on
    under its column; no line is wider than 100 columns."""
    assert max(map(len, out.splitlines())) <= 100
    for block in out.strip().split("\n\n"):
        lines = block.splitlines()
        header = next(
            i for i, line in enumerate(lines) if line.startswith("    parameter ")
        )
        end = lines[header].index("default") + len("default")
        unit = lines[header].index("unit")
        meaning = lines[header].index("meaning")
        for line in lines[header + 1 :]:
            if line.startswith("  orbit quantities"):
                break
            if line[4] == " ":  # a wrapped meaning
                assert line[:meaning].strip() == "" and line[meaning] != " "
                continue
            assert line[end - 1] != " " and line[end] == " ", line
            assert line[unit - 1] == " " and line[unit] != " ", line
            assert line[meaning - 1] == " " and line[meaning] != " ", line


def test_models_json_says_which_parameters_are_derived(capsys):
    """`models --json` keeps `default` (`None` for a derived parameter) and adds
    `derived` and `value`, the derived parameter's value at the defaults (the
    hopper's D_G = d_G / (2 sqrt(k m)))."""
    from hybrax._cli import main

    assert main(["models", "--json", "hopper", "compass-gait"]) == 0
    listing = json.loads(capsys.readouterr().out)
    D_G = listing["hopper"]["parameters"]["D_G"]
    assert D_G["default"] is None and D_G["derived"] and D_G["unit"] == "1"
    assert D_G["value"] == pytest.approx(-80 / (2 * math.sqrt(15000 * 75)), rel=1e-12)
    k = listing["hopper"]["parameters"]["k"]
    assert not k["derived"] and k["value"] == k["default"] == 15000
    for name in ("mu", "a_ratio"):
        ratio = listing["compass-gait"]["parameters"][name]
        assert ratio["unit"] == "1" and ratio["value"] == pytest.approx(0.5)


# Slow: 15 s cold through the command line.
@pytest.mark.slow
def test_wheel_orbit_is_the_closed_form(tmp_path):
    code, out, _ = _run(
        ["orbit", "rimless-wheel", "--set", "gamma=0.1", "--out", str(tmp_path)]
        + ["--json", str(tmp_path / "orbit.json")]
    )
    assert code == 0, out
    data = json.loads((tmp_path / "orbit.json").read_text())
    assert data["converged"] and data["stable"]
    assert data["state_names"] == ["theta", "omega"]
    np.testing.assert_allclose(data["state"][0], 0.1 - ALPHA, atol=1e-12)
    np.testing.assert_allclose(data["state"][1], _omega_star(0.1), rtol=1e-9)
    c = math.cos(2 * ALPHA) ** 2
    np.testing.assert_allclose(data["multipliers_saltation"][0][0], c, atol=1e-9)
    np.testing.assert_allclose(data["multipliers_ad"][0][0], c, atol=1e-8)
    assert data["max_discrepancy"] < 1e-7
    assert len(data["phase_durations"]) == 1
    # The wheel's declared quantities (hx.Quantity) in the JSON and the summary,
    # against the closed forms: the rate after heel strike and |nu| = cos^2 2a.
    np.testing.assert_allclose(data["speed"], _omega_star(0.1), rtol=1e-9)
    np.testing.assert_allclose(data["multiplier"], c, atol=1e-8)
    (line,) = [line for line in out.splitlines() if line.split()[:1] == ["speed"]]
    assert f"{data['speed']:.10g} rad/s" in line and "after heel strike" in line
    # One period in the portrait plane (the simulation's own portrait of the
    # same plane is not written again).
    assert (tmp_path / "orbit.png").is_file()
    assert not (tmp_path / "phase_portrait.png").exists()
    # Its walk drawn as stick figures: at each heel strike the frame moves to the
    # next spoke's foot, which lies on the slope.
    assert (tmp_path / "stick_figure.png").is_file()
    assert (tmp_path / "animation.gif").is_file()
    # The same run with the animation as an MP4 video (same programs, nothing
    # compiles again).
    video = tmp_path / "video"
    code, _, _ = _run(
        ["orbit", "rimless-wheel", "--set", "gamma=0.1", "--out", str(video)]
        + ["--animation", "mp4"]
    )
    assert code == 0
    assert (video / "animation.mp4").stat().st_size > 0
    assert not (video / "animation.gif").exists()
    from hybrax.models import get_model

    wheel = get_model("rimless-wheel")
    params = wheel.make_params(gamma=0.1)
    at_strike = np.array([0.1 + ALPHA, 1.0])
    foot = wheel.presentation.frame_shift(at_strike, params)
    np.testing.assert_allclose(foot[1], -foot[0] * math.tan(0.1), atol=1e-14)
    np.testing.assert_allclose(np.hypot(*foot), 2 * math.sin(ALPHA), rtol=1e-14)
    # On level ground no orbit exists (the closed form has none): the command
    # says so first (no homotopy from the defaults is tried), then the failure,
    # whose advice names no option the command lacks.
    code, _, err = _run(
        ["orbit", "rimless-wheel", "--set", "gamma=0", "--out", str(tmp_path / "level")]
    )
    lines = err.strip().splitlines()
    assert code == 1
    assert lines[-2].startswith("note: with gamma = 0 <= 0") and "no periodic" in err
    assert lines[-1].startswith("no periodic orbit found")
    assert "`t_max`" not in err and "`max_steps`" not in err
    assert "following the orbit from the model's defaults" not in err


# Slow: 13 s cold through the command line.
@pytest.mark.slow
def test_wheel_continuation_in_slope_follows_the_closed_form(tmp_path):
    code, out, err = _run(
        ["continue", "rimless-wheel", "--start", "0.1", "--stop", "0.15"]
        + ["--out", str(tmp_path), "--json", str(tmp_path / "branch.json")]
    )
    assert code == 0, out
    data = json.loads((tmp_path / "branch.json").read_text())
    assert data["parameter"] == "gamma" and len(data["branch"]) > 3
    # A progress line per point on stderr, naming the point's parameter value.
    lines = re.findall(r"point (\d+): gamma = (\S+)", err)
    assert len(lines) >= len(data["branch"]) - 2, err
    for index, gamma in lines:
        assert float(gamma) == pytest.approx(data["branch"][int(index)]["gamma"])
    c = math.cos(2 * ALPHA) ** 2
    for point in data["branch"]:
        np.testing.assert_allclose(
            point["state"][1], _omega_star(point["gamma"]), rtol=1e-7
        )
        np.testing.assert_allclose(point["multiplier"], c, atol=1e-7)
        assert point["stable"]
    assert data["folds"] == [] and data["period_doublings"] == []
    assert (tmp_path / "branch_multiplier.png").is_file()


# Slow: 17 s cold (the wheel's continuation through the command line, twice).
@pytest.mark.slow
def test_wheel_continuation_interrupted_keeps_its_branch_and_resumes(
    tmp_path, monkeypatch
):
    """Ctrl-C after the branch's second point: exit 130, one line naming the
    `--start` to go on from, and the JSON and figure of the points so far (the
    closed form's orbits); the re-run from there reaches `--stop`."""
    import hybrax._continuation.driver

    announce = hybrax._continuation.driver.announce

    def interrupting(line):
        announce(line)
        if line.startswith("  point 2:"):
            raise KeyboardInterrupt

    monkeypatch.setattr(hybrax._continuation.driver, "announce", interrupting)
    argv = ["continue", "rimless-wheel", "--stop", "0.15", "--out", str(tmp_path)]
    argv += ["--json", str(tmp_path / "branch.json")]
    code, out, err = _run(argv + ["--start", "0.1"])
    assert code == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("hybrax continue: interrupted after 3 points")
    data = json.loads((tmp_path / "branch.json").read_text())
    assert data["status"] == "interrupted" and len(data["branch"]) == 3
    for point in data["branch"]:
        np.testing.assert_allclose(
            point["state"][1], _omega_star(point["gamma"]), rtol=1e-7
        )
    assert (tmp_path / "branch_multiplier.png").is_file()
    resume = re.search(r"--start (\S+)\)", last).group(1)
    assert float(resume) == data["branch"][-1]["gamma"]
    monkeypatch.setattr(hybrax._continuation.driver, "announce", announce)
    code, out, err = _run(argv + ["--start", resume])
    assert code == 0, err
    data = json.loads((tmp_path / "branch.json").read_text())
    assert data["branch"][0]["gamma"] == float(resume)
    assert data["branch"][-1]["gamma"] == pytest.approx(0.15, abs=1e-12)


# Slow: 14 s cold (the wheel's own sweep programs through the command line); the
# fast set keeps the hopper's sweep against single solves and its command's table.
@pytest.mark.slow
def test_wheel_sweep_finds_orbits_exactly_where_the_wheel_vaults(tmp_path):
    code, out, _ = _run(
        ["sweep", "rimless-wheel", "--grid", "gamma=0.04:0.12:3"]
        + ["--grid", "alpha=0.3:0.5:3", "--no-progress", "--out", str(tmp_path)]
        + ["--quantity", "speed"]
    )
    assert code == 0, out
    with np.load(tmp_path / "sweep.npz") as npz:  # closed: no ResourceWarning
        table = dict(npz)
    for i, gamma in enumerate(table["grid_gamma"]):
        for j, alpha in enumerate(table["grid_alpha"]):
            assert bool(table["converged"][i, j]) == _vaults(gamma, alpha)
            if table["converged"][i, j]:
                np.testing.assert_allclose(
                    table["multiplier_abs"][i, j], math.cos(2 * alpha) ** 2, atol=1e-8
                )
                # The mapped quantity: the speed after heel strike, closed form.
                c = math.cos(2 * alpha) ** 2
                speed = math.sqrt(
                    4 * G * math.sin(alpha) * math.sin(gamma) * c / (1 - c)
                )
                np.testing.assert_allclose(table["speed"][i, j], speed, rtol=1e-9)
            else:
                assert np.isnan(table["speed"][i, j])
    assert (tmp_path / "sweep_heatmap.png").is_file()


@pytest.mark.slow
def test_wheel_tune_meets_a_speed_at_the_closed_form_slope(tmp_path):
    """The slope at which the wheel rolls at 1.3 rad/s after heel strike, by
    gradient: sin(gamma) = omega^2 (1 - c) / (4 (g/l) sin(alpha) c). `orbit
    --params` takes the result back: the tuned slope and its stored orbit (theta
    = gamma - alpha after heel strike)."""
    code, out, _ = _run(
        ["tune", "rimless-wheel", "--vary", "gamma", "--target", "speed=1.3"]
        + ["--tolerance", "1e-7", "--no-progress", "--out", str(tmp_path)]
        + ["--json", str(tmp_path / "tune.json")]
    )
    assert code == 0, out
    final = json.loads((tmp_path / "tune.json").read_text())["final"]
    c = math.cos(2 * ALPHA) ** 2
    gamma = math.asin(1.3**2 * (1 - c) / (4 * G * math.sin(ALPHA) * c))
    np.testing.assert_allclose(final["values"]["gamma"], gamma, rtol=1e-6)
    code, out, _ = _run(
        ["orbit", "rimless-wheel", "--params", str(tmp_path / "tune.json")]
        + ["--out", str(tmp_path / "orbit"), "--json", str(tmp_path / "orbit.json")]
    )
    assert code == 0, out
    orbit = json.loads((tmp_path / "orbit.json").read_text())
    np.testing.assert_allclose(orbit["state"], final["state"], atol=1e-8)
    np.testing.assert_allclose(
        orbit["state"][0], final["values"]["gamma"] - ALPHA, atol=1e-12
    )


@pytest.mark.slow
def test_wheel_tune_interrupted_keeps_its_history_and_resumes(tmp_path, monkeypatch):
    """Ctrl-C after the third evaluation (raised from the tuning's callback, as
    a signal would arrive between steps): exit 130 with one line saying where the
    history and its best point went; the JSON holds those three evaluations, and
    its final point is the one with the lowest objective, with its parameters;
    `--params` of that file resumes there (the re-run's first evaluation is at
    that slope). (After the tuning test above: its programs are compiled.)"""
    import hybrax._tune as tune_module

    real = tune_module.tune

    def interrupt_after(n):
        def tune(*args, callback, **kwargs):
            def step_then_stop(step):
                callback(step)
                if step.step == n - 1:
                    raise KeyboardInterrupt

            return real(*args, callback=step_then_stop, **kwargs)

        return tune

    monkeypatch.setattr(tune_module, "tune", interrupt_after(3))
    first = tmp_path / "first.json"
    options = ["--tolerance", "1e-7", "--no-progress", "--out", str(tmp_path)]
    code, _, err = _run(
        ["tune", "rimless-wheel", "--vary", "gamma", "--target", "speed=1.3"]
        + options
        + ["--json", str(first)]
    )
    assert code == 130 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert "interrupted after 3 evaluation(s)" in line and str(first) in line
    data = json.loads(first.read_text())
    assert data["status"] == "interrupted"
    assert [step["step"] for step in data["history"]] == [0, 1, 2]
    best = min(
        (step for step in data["history"] if step["orbit_found"]),
        key=lambda step: step["objective"],
    )
    assert data["final"]["values"] == best["values"]
    assert data["final"]["params"]["gamma"] == best["values"]["gamma"]

    monkeypatch.setattr(tune_module, "tune", interrupt_after(1))
    again = tmp_path / "again.json"
    code, _, err = _run(
        ["tune", "rimless-wheel", "--vary", "gamma", "--target", "speed=1.3"]
        + ["--params", str(first)]
        + options
        + ["--json", str(again)]
    )
    assert code == 130
    resumed = json.loads(again.read_text())["history"][0]["values"]["gamma"]
    np.testing.assert_allclose(resumed, best["values"]["gamma"], rtol=1e-12)


def test_ball_simulate_is_the_closed_form(tmp_path):
    """Dropped from 1 m with e = 0.8: impacts at sqrt(2h/g) and then every
    2 e^k v_1 / g."""
    code, out, _ = _run(
        ["simulate", "bouncing-ball", "--cycles", "4", "--out", str(tmp_path)]
        + ["--json", str(tmp_path / "run.json")]
    )
    assert code == 0, out
    data = json.loads((tmp_path / "run.json").read_text())
    v1 = math.sqrt(2 * G)
    times = [math.sqrt(2 / G)]
    for k in range(1, 4):
        times.append(times[-1] + 2 * 0.8**k * v1 / G)
    np.testing.assert_allclose([e["t"] for e in data["events"]], times, rtol=1e-8)
    assert [e["kind"] for e in data["events"]] == ["impact"] * 4
    for name in ("time_series.png", "phase_portrait.png", "energy.png"):
        assert (tmp_path / name).is_file()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["orbit", "bouncing-ball"], "no periodic orbits"),
        (["continue", "bouncing-ball"], "no continuation"),
        (["orbit", "rimless-wheel", "--tol", "2"], "must lie in (0, 1)"),
        (["continue", "rimless-wheel", "--tol", "0"], "must lie in (0, 1)"),
        (["sweep", "rimless-wheel", "--tol=-1e-9"], "must lie in (0, 1)"),
        (["orbit", "rimless-wheel", "--set", "D_G=1"], "unknown parameter"),
        (["orbit", "rimless-wheel", "--form", "constrained"], "invalid choice"),
        (["simulate", "rimless-wheel", "--x0", "1,2,3"], "expected 2"),
        (["tune", "rimless-wheel", "--vary", "k", "--target", "speed=1"], "unknown"),
        (["orbit", "no-such-model"], "invalid choice"),
        (["sweep", "rimless-wheel", "--quantity", "T_c"], "unknown quantity"),
    ],
)
def test_bad_values_exit_2(argv, words):
    code, _, err = _run(argv)
    assert code == 2
    assert words in err
    # argparse's usage, then one line with the error.
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(f"hybrax {argv[0]}: error:")


@pytest.mark.parametrize("command", ["simulate", "orbit", "continue", "sweep"])
def test_bad_paths_exit_2_before_computing(tmp_path, command):
    a_file = tmp_path / "file"
    a_file.write_text("")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    model = "bouncing-ball" if command == "simulate" else "rimless-wheel"
    cases = [
        (["--out", str(a_file)], "is not a directory"),
        (["--json", str(tmp_path)], "is a directory"),
        (["--json", str(a_file / "x.json")], "is not a directory"),
        (["--out", str(tmp_path / "file" / "sub")], "is not a directory"),
    ]
    import os

    if os.geteuid() != 0:  # root writes anywhere
        cases.append((["--out", str(locked / "out")], "cannot write"))
    for extra, words in cases:
        code, out, err = _run([command, model, *extra])
        assert code == 2, (extra, out)
        assert words in err
        assert out == ""  # nothing was computed


def test_derived_parameters_work_on_traced_values():
    """The hopper's D_G sets d_G = 2 D_G sqrt(k m): a gradient reaches it, and the
    bundle's continuation parameter reads and sets it under jit."""
    import jax

    from hybrax import models

    slope = jax.grad(lambda D: models.hopper.make_params(D_G=D).d_G)(-0.03)
    np.testing.assert_allclose(slope, 2 * math.sqrt(15000.0 * 75.0), rtol=1e-14)
    bundle = models.get_model("hopper")
    params = bundle.make_params()
    D_G = bundle.parameter("D_G")
    moved = jax.jit(D_G.set)(params, -0.02)
    np.testing.assert_allclose(D_G.get(moved), -0.02, rtol=1e-14)
    with pytest.raises(ValueError, match="unknown model"):
        models.get_model("walker")
    with pytest.raises(ValueError, match="forms"):
        type(bundle)(
            name="x",
            description="x",
            parameters={},
            make_params=dict,
            parameter=str,
            state_names=("x",),
            default_state=str,
            forms={},
        )


def test_verbose_prints_the_librarys_log_and_excludes_quiet(capsys):
    """`-v` sends the `hybrax` logger's records (each compilation, what is kept
    between runs) to stderr for the run, and only for it; with `-q` it is a usage
    error."""
    import logging

    from hybrax._cli.common import _log_to_stderr

    code, _, err = _run(["simulate", "bouncing-ball", "-q", "-v"])
    assert code == 2 and "not allowed with argument -q" in err.splitlines()[-1]
    logger = logging.getLogger("hybrax")
    with _log_to_stderr():
        logger.info("compiled the simulation in 1.0 s")
    logger.info("after the run")
    err = capsys.readouterr().err
    assert "hybrax: compiled the simulation in 1.0 s" in err
    assert "after the run" not in err


# Slow: about 20 s warm through the command line (one continuation).
@pytest.mark.slow
def test_a_curve_whose_point_is_not_on_the_branch_exits_1(tmp_path):
    """`continue --curve KIND` where the model can have such a point but the
    branch has none: the branch is reported, then one line saying so, exit 1
    (it exited 0)."""
    code, out, err = _run(
        ["continue", "rimless-wheel", "--max-points", "3", "--no-figures"]
        + ["--curve", "period-doubling", "--param2", "alpha", "--stop2", "0.3"]
        + ["--out", str(tmp_path), "--json", str(tmp_path / "branch.json")]
    )
    assert code == 1, out + err
    assert "no located period-doubling point on the branch" in err
    data = json.loads((tmp_path / "branch.json").read_text())
    assert data["curve"]["status"] == "no_point" and data["branch"]


# Slow: about 30 s cold (the hopper's continuation corrector compiles).
@pytest.mark.slow
def test_a_start_that_cannot_run_names_its_cause(tmp_path):
    """`continue` where every guess's cycle fails (the hopper with negative
    flight damping: the foot is pulled back into the ground at lift-off) names
    the cycle's status, its message and the model's explanation, not only a NaN
    residual."""
    code, out, err = _run(
        ["continue", "hopper", "--set", "d_F=-150", "--max-points", "5"]
        + ["--no-figures", "--out", str(tmp_path)]
    )
    assert code == 1, out + err
    line = err.strip().splitlines()[-2]
    assert "mode_not_viable in mode flight" in line and "pile up" in line
    assert "flight damping" in err.strip().splitlines()[-1]
