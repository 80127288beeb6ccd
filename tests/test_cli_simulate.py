"""`hybrax simulate hopper` and the `hybrax.plot` figures it writes.

The CLI runs in-process (`hybrax._cli.main`) so that its jitted simulation compiles
once per module; the runs below share shapes (2 hops, 200 samples per phase) and so
one compilation. `hybrax.plot` draws on `matplotlib.figure.Figure` (no pyplot), so
no backend needs choosing.
"""

import json
import subprocess
import sys
import threading

import jax.numpy as jnp
import numpy as np
import pytest

import hybrax
import hybrax._cli
import hybrax.models.hopper_figures
import hybrax.plot
from helpers import ORACLE_TOL
from hybrax import models
from hybrax._cli import main
from reference_hopper import (
    HopperParams as ReferenceParams,
    flight_state,
    liftoff_time,
    touchdown_time,
)


HOPS = 2
N_SAVE = 200
T_MAX = 50.0


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """One default 2-hop run: its exit code, output directory and JSON."""
    out = tmp_path_factory.mktemp("simulate")
    code = main(
        [
            "simulate",
            "hopper",
            "--hops",
            str(HOPS),
            "--out",
            str(out / "figures"),
            "--json",
            str(out / "run.json"),
        ]
    )
    return code, out, json.loads((out / "run.json").read_text())


@pytest.fixture(scope="module")
def solution():
    """The same run through the API (a cache hit of the CLI's compilation)."""
    params = models.hopper.make_params()
    system = models.hopper.minimal()[0]
    x0 = models.hopper.default_state(params)
    sol = hybrax.simulate(
        system,
        x0,
        params,
        n_events=2 * HOPS,
        settings=hybrax.Settings(t_max=T_MAX),
        n_save=N_SAVE,
    )
    return system, params, sol


def test_writes_figures_and_json(cli_run):
    code, out, data = cli_run
    assert code == 0
    for name in ("phase_portraits.png", "energy.png"):
        path = out / "figures" / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["status"] == "successful"
    assert data["form"] == "minimal"
    assert data["params"]["m"] == 75.0 and data["params"]["d_G"] == -80.0
    kinds = [event["kind"] for event in data["events"]]
    assert kinds == ["touchdown", "liftoff"] * HOPS
    x0 = np.asarray(models.hopper.default_state(models.hopper.make_params()))
    np.testing.assert_allclose(data["x0"], x0, rtol=0, atol=1e-15)
    for event in data["events"]:
        if event["kind"] == "liftoff":
            assert event.get("T_c") is None and event.get("T_a") is None
            assert event["state_before"] == event["state_after"]


def test_first_hop_matches_reference(cli_run):
    _, _, data = cli_run
    p = ReferenceParams()
    x0 = np.asarray(data["x0"])
    t_td = touchdown_time(x0, p)
    x_pre = flight_state(x0, t_td, p)
    x_post = x_pre.copy()
    x_post[[1, 3]] = 0.0
    t_lo = t_td + liftoff_time(x_post, p)

    touchdown, liftoff = data["events"][:2]
    assert abs(touchdown["t"] - t_td) < ORACLE_TOL
    np.testing.assert_allclose(
        touchdown["state_before"], x_pre, rtol=0, atol=ORACLE_TOL
    )
    np.testing.assert_allclose(
        touchdown["state_after"], x_post, rtol=0, atol=ORACLE_TOL
    )
    assert abs(liftoff["t"] - t_lo) < ORACLE_TOL


def test_energy_split_at_touchdowns(cli_run):
    _, _, data = cli_run
    params = data["params"]
    m_U = params["mu"] * params["m"]
    m_L = (1 - params["mu"]) * params["m"]
    touchdowns = [e for e in data["events"] if e["kind"] == "touchdown"]
    assert len(touchdowns) == HOPS
    for event in touchdowns:
        _, _, v_U, v_L = event["state_before"]
        kinetic = 0.5 * (m_U * v_U**2 + m_L * v_L**2)
        assert event["T_c"] + event["T_a"] == pytest.approx(kinetic, rel=1e-12)
        assert event["T_c"] == pytest.approx(0.5 * m_L * v_L**2, rel=1e-12)


def test_prints_event_table(cli_run, capsys, tmp_path):
    del cli_run
    code = main(
        ["simulate", "hopper", "--hops", str(HOPS), "--set", "D_G=-0.02"]
        + ["--out", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "touchdown" in out and "liftoff" in out
    assert "T_c [J]" in out and "status: successful" in out


def test_the_default_start_lands_with_the_ground_pushing(cli_run):
    """The model's default start (at rest, spring at its static length, foot
    0.15 m up) lands with the ground pushing: every ground phase starts inside
    its mode, and the JSON says the run is admissible."""
    _, _, data = cli_run
    assert data["admissible"] is True and data["boundary_violations"] == []
    touchdowns = [e for e in data["events"] if e["kind"] == "touchdown"]
    assert all(event["guard_after"] > 0 for event in touchdowns)


def test_a_start_where_the_ground_pulls_is_not_admissible(tmp_path, capsys):
    """From rest with the spring at its static length 0.1 m up, the foot lands
    while the spring is stretched: right after touchdown the ground would have
    to pull, N = m_L g - k (z_U - L0) - d_G v_U < 0 (closed form of the flight).
    The run goes on and keeps exit code 0, but its status line and JSON say that
    it is not admissible, with the force."""
    p = ReferenceParams()
    x0 = np.array([0.1 + p.L0 - p.mu * p.m * p.g / p.k, 0.1, 0.0, 0.0])
    z_U, _, v_U, _ = flight_state(x0, touchdown_time(x0, p), p)
    force = (1 - p.mu) * p.m * p.g - p.k * (z_U - p.L0) - p.d_G * v_U
    assert force < -200  # the ground pulls with about 240 N
    code = main(
        ["simulate", "hopper", "--hops", str(HOPS), "--no-figures"]
        + ["--x0", ",".join(repr(float(v)) for v in x0)]
        + ["--out", str(tmp_path), "--json", str(tmp_path / "run.json")]
    )
    assert code == 0
    out = capsys.readouterr().out
    status = out.strip().splitlines()[-2]
    assert status.startswith("status: successful (4 of 4 events, t = ")
    assert status.endswith(
        f"; inadmissible after touchdown 1: the ground pulls, contact force "
        f"{force:+.1f} N)"
    )
    assert "note: not admissible after touchdown 1" in out
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["status"] == "successful" and data["admissible"] is False
    (violation,) = data["boundary_violations"]
    assert violation["kind"] == "force_reversal" and violation["mode"] == "ground"
    assert (violation["event"], violation["event_kind"]) == (1, "touchdown")
    assert violation["value"] * p.m * p.g == pytest.approx(force, rel=1e-7)
    assert violation["value"] == data["events"][0]["guard_after"]


# Slow: 10-20 s cold, over the fast set's share (run by .ci/run).
@pytest.mark.slow
def test_a_released_contact_that_stays_is_not_admissible(tmp_path, capsys):
    """The compass gait with a short upper leg (b = 0.2, a = 1): from the
    fourth heel strike on, the trailing foot's normal velocity after the impact
    is negative (it would stay on the slope); the model has no words of its own
    for it, so the status line names the observable and its value."""
    code = main(
        ["simulate", "compass-gait", "--set", "b=0.2", "--set", "a=1.0"]
        + ["--no-figures", "--out", str(tmp_path)]
        + ["--json", str(tmp_path / "run.json")]
    )
    assert code == 0
    status = capsys.readouterr().out.strip().splitlines()[-2]
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["admissible"] is False
    first = data["boundary_violations"][0]
    assert first["kind"] == "release_reversal" and first["value"] < 0
    assert first["name"] == "trailing_normal_velocity"
    assert first["event_kind"] == "heelstrike"
    assert f"; inadmissible at heelstrike {first['event']}: the released contact" in (
        status
    )
    assert f"trailing_normal_velocity = {first['value']:+.3g})" in status


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in a temporary directory, so the default `--out` lands there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "argument, names",
    [
        ("--set=foo=1", ["foo", "--set"]),
        ("--set=m=-1", ["`m`", "--set"]),
        ("--set=k=0", ["`k`"]),
        ("--set=m=abc", ["'m'", "number"]),
        ("--set=m", ["NAME=VALUE"]),
        ("--x0=1,2,3", ["--x0", "4"]),
        ("--form=reduced", ["--form", "reduced"]),
    ],
)
def test_bad_arguments_exit_2(in_tmp, capsys, argument, names):
    with pytest.raises(SystemExit) as info:
        main(["simulate", "hopper", "--hops", str(HOPS), argument])
    assert info.value.code == 2
    err = capsys.readouterr().err
    message = err.strip().splitlines()[-1]
    assert "Traceback" not in err
    for name in names:
        assert name in message
    assert not list(in_tmp.iterdir())


def test_degenerate_run_says_what_happened(tmp_path, capsys):
    """Negative flight damping pulls the foot back at lift-off: not a successful
    run with events piling up at one instant, but a stop that names the cause."""
    code = main(
        [
            "simulate",
            "hopper",
            "--set",
            "d_F=-150",
            "--hops",
            str(HOPS),
            "--out",
            str(tmp_path / "figures"),
            "--json",
            str(tmp_path / "run.json"),
        ]
    )
    assert code == 1
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "mode_not_viable" in text
    assert "flight mode is not viable" in text and "pulled back" in text
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["status"] == "mode_not_viable"
    assert [event["kind"] for event in data["events"]] == ["touchdown", "liftoff"]


def test_below_ground_exits_1(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "simulate",
            "hopper",
            "--hops",
            str(HOPS),
            "--x0",
            "1.0,-0.1,0,0",
            "--out",
            str(out),
            "--json",
            str(tmp_path / "run.json"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 1
    text = captured.out + captured.err
    assert "infeasible_initial_state" in text
    assert "initial state" in text
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["status"] == "infeasible_initial_state"
    assert data["events"] == []
    assert data["x0"] == [1.0, -0.1, 0.0, 0.0]


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert hybrax.__version__ in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    assert "simulate" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2


def test_python_dash_m():
    result = subprocess.run(
        [sys.executable, "-m", "hybrax", "--version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"hybrax {hybrax.__version__}"


def test_console_exits_with_the_code_once_threads_are_done(monkeypatch, tmp_path):
    """The `hybrax` entry point ends the process with `main`'s exit code (after
    flushing), or a `SystemExit`'s, or 1 when its output pipe closed; while a
    non-daemon thread still works it exits the ordinary way (which waits for
    the thread)."""
    exits = []
    monkeypatch.setattr(hybrax._cli.os, "_exit", exits.append)
    for outcome, code in ((lambda: 0, 0), (lambda: 1, 1), (lambda: sys.exit(2), 2)):
        monkeypatch.setattr(hybrax._cli, "main", lambda outcome=outcome: outcome())
        hybrax._cli.console()
        assert exits[-1] == code
    # A closed output pipe: stdout goes to the null device, exit code 1.
    redirected = []
    monkeypatch.setattr(hybrax._cli.os, "dup2", lambda *a: redirected.append(a))
    stdout = (tmp_path / "stdout").open("w")
    monkeypatch.setattr(hybrax._cli.sys, "stdout", stdout)

    def broken_pipe():
        raise BrokenPipeError

    monkeypatch.setattr(hybrax._cli, "main", broken_pipe)
    hybrax._cli.console()
    assert exits[-1] == 1 and redirected[0][1] == stdout.fileno()
    stdout.close()
    monkeypatch.setattr(hybrax._cli, "main", lambda: sys.exit(2))
    release = threading.Event()
    worker = threading.Thread(target=release.wait)
    worker.start()
    try:
        with pytest.raises(SystemExit) as info:
            hybrax._cli.console()
        assert info.value.code == 2 and len(exits) == 4
    finally:
        release.set()
        worker.join()
    # Once the thread is done, the fast exit again.
    hybrax._cli.console()
    assert exits[-1] == 2 and len(exits) == 5


def test_python_dash_m_bad_argument_exits_2():
    result = subprocess.run(
        [sys.executable, "-m", "hybrax", "orbit", "no-such-model"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("hybrax orbit: error: argument model")
    )


def _labels(ax):
    return {line.get_label() for line in ax.get_lines()}


def test_phase_portraits_content(solution):
    system, params, sol = solution
    trajectory = hybrax.plot.Trajectory.from_solution(sol, system)
    assert trajectory.phase_modes == ("flight", "ground") * HOPS
    assert trajectory.event_kinds == ("touchdown", "liftoff") * HOPS
    assert trajectory.x_phase.shape == (2 * HOPS, N_SAVE, 4)

    fig = hybrax.models.hopper_figures.phase_portraits(trajectory, params)
    upper, lower = fig.axes
    assert "z_U" in upper.get_xlabel() and "[m]" in upper.get_xlabel()
    assert r"\dot z_U" in upper.get_ylabel() and "[m/s]" in upper.get_ylabel()
    assert "z_L" in lower.get_xlabel() and r"\dot z_L" in lower.get_ylabel()
    for ax in (upper, lower):
        assert {"flight", "ground", "touchdown", "lift-off"} <= _labels(ax)

    # The lift-off surface lambda_g = 0: z_U = L0 + (m_L g - d_G v_U) / k.
    (surface,) = [ln for ln in upper.get_lines() if "lambda_g" in ln.get_label()]
    z, v = surface.get_data()
    np.testing.assert_allclose(
        z, params.L0 + (params.m_L * params.g - params.d_G * v) / params.k
    )
    # The touchdown surface z_L = 0 and a dashed jump v_L^- -> 0 per touchdown.
    (ground_line,) = [ln for ln in lower.get_lines() if "z_L = 0" in ln.get_label()]
    np.testing.assert_array_equal(ground_line.get_xdata(), [0, 0])
    jumps = [ln for ln in lower.get_lines() if ln.get_linestyle() == "--"]
    assert len(jumps) == HOPS
    v_minus = sorted(ln.get_ydata()[0] for ln in jumps)
    expected = np.asarray(sol.x_before)[0::2, 3]
    np.testing.assert_allclose(v_minus, sorted(expected))
    for ln in jumps:
        assert ln.get_ydata()[1] == 0.0
    # Flight phases are drawn with their samples.
    flight = [ln for ln in upper.get_lines() if ln.get_color() == "tab:blue"]
    assert sum(len(ln.get_xdata()) for ln in flight) == HOPS * N_SAVE


def test_energy_history_content(solution):
    system, params, sol = solution
    trajectory = hybrax.plot.Trajectory.from_solution(sol, system)
    fig = hybrax.models.hopper_figures.energy_history(trajectory, params)
    (ax,) = fig.axes
    assert "[s]" in ax.get_xlabel() and "[J]" in ax.get_ylabel()
    lines = {line.get_label(): line for line in ax.get_lines()}
    kinetic, potential, total = (
        lines["kinetic $T$"],
        lines["potential $V$"],
        lines["total $T + V$"],
    )
    np.testing.assert_allclose(
        total.get_ydata(), kinetic.get_ydata() + potential.get_ydata()
    )
    texts = [text.get_text() for text in ax.texts]
    assert sum("T_c" in text for text in texts) == HOPS
    assert sum("T_a" in text for text in texts) == HOPS
    # The labels sit in the band no curve crosses (above every kinetic energy,
    # below every potential and total): they cover no data.
    top_kinetic = np.nanmax(kinetic.get_ydata())
    bottom = np.nanmin(np.r_[potential.get_ydata(), total.get_ydata()])
    for text in ax.texts:
        if text.get_text():
            assert top_kinetic < text.xy[1] < bottom
    # The total drops by T_c across each touchdown (end of one phase, start of the
    # next).
    E = np.asarray(total.get_ydata()).reshape(2 * HOPS, N_SAVE)
    for k in range(0, 2 * HOPS, 2):
        drop = E[k, -1] - E[k + 1, 0]
        assert drop == pytest.approx(float(sol.T_c[k]), rel=1e-9)


# Slow: 17 s cold (the constrained form's simulation compiled for the command);
# the fast set keeps the constrained form's events against the closed form.
@pytest.mark.slow
def test_constrained_form_matches_minimal(cli_run, tmp_path):
    _, _, minimal = cli_run
    code = main(
        [
            "simulate",
            "hopper",
            "--hops",
            str(HOPS),
            "--form",
            "constrained",
            "--out",
            str(tmp_path),
            "--json",
            str(tmp_path / "run.json"),
        ]
    )
    assert code == 0
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["form"] == "constrained"
    for a, b in zip(data["events"], minimal["events"], strict=True):
        assert a["kind"] == b["kind"]
        assert abs(a["t"] - b["t"]) < ORACLE_TOL
        np.testing.assert_allclose(
            a["state_before"], b["state_before"], rtol=0, atol=ORACLE_TOL
        )


def test_plots_of_a_failed_run(solution):
    system, params, _ = solution
    below = jnp.array([1.0, -0.1, 0.0, 0.0])
    sol = hybrax.simulate(
        system,
        below,
        params,
        n_events=2 * HOPS,
        settings=hybrax.Settings(t_max=T_MAX),
        n_save=N_SAVE,
    )
    trajectory = hybrax.plot.Trajectory.from_solution(sol, system)
    assert trajectory.t_events.shape == (0,)
    assert trajectory.t_phase.shape[0] == 0
    # Empty figures (surfaces only), no error.
    assert (
        len(hybrax.models.hopper_figures.phase_portraits(trajectory, params).axes) == 2
    )
    assert (
        len(hybrax.models.hopper_figures.energy_history(trajectory, params).axes) == 1
    )


def test_params_file_gives_parameters_and_start(cli_run, tmp_path, capsys):
    """`--params FILE` (a `hybrax tune` result's `final`: parameters and the
    orbit's state) sets the parameters and the start, `--set` overrides the file;
    a missing file or an unknown name is one line and exit 2."""
    _, _, data = cli_run
    start = [v + 0.01 for v in data["x0"]]
    stored = {"final": {"params": {"k": 16000.0, "d_G": -70.0}, "state": start}}
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps(stored))
    code = main(
        ["simulate", "hopper", "--hops", str(HOPS), "--params", str(path)]
        + ["--set", "d_G=-75", "--out", str(tmp_path / "f")]
        + ["--json", str(tmp_path / "run.json")]
    )
    assert code == 0
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["params"]["k"] == 16000.0 and run["params"]["d_G"] == -75.0
    assert run["x0"] == start
    for bad, message in (
        (tmp_path / "missing.json", "cannot read"),
        (tmp_path / "unknown.json", "unknown hopper parameter 'spring'"),
    ):
        if bad.name == "unknown.json":
            bad.write_text(json.dumps({"params": {"spring": 1.0}}))
        with pytest.raises(SystemExit) as info:
            main(["simulate", "hopper", "--params", str(bad)])
        assert info.value.code == 2
        assert message in capsys.readouterr().err.strip().splitlines()[-1]
