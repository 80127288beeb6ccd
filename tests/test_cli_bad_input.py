"""Bad command-line input ends before any computation with one line naming the
argument and exit status 2; outputs are test-written first and written under a
temporary name, so that a run never loses its results to an unwritable place or
leaves a partial file. No JAX program runs here."""

import pytest

from hybrax import _compile
from hybrax._cli import main


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["simulate", "hopper", "--cycles", "99999999999999999999"], "--cycles"),
        (["simulate", "hopper", "--cycles", "0"], "--cycles"),
        (["simulate", "hopper", "--t-max", "inf"], "--t-max"),
        (["sweep", "hopper", "--t-max", "inf"], "--t-max"),
        (["sweep", "hopper", "--t-max", "nan"], "--t-max"),
        (["sweep", "hopper", "--grid", "mu=0.7:0.9:100000000000"], "--grid"),
        (
            ["sweep", "hopper", "--grid", "mu=0.7:0.9:2000"]
            + ["--grid", "D_G=-0.07:0:2000"],
            "--grid",
        ),
        (["sweep", "hopper", "--chunk", "0"], "--chunk"),
        (["sweep", "hopper", "--max-iterations", "10000000"], "--max-iterations"),
        (["continue", "hopper", "--start", "nan"], "--start"),
        (["continue", "hopper", "--stop", "inf"], "--stop"),
        (["continue", "hopper", "--max-points", "99999999999"], "--max-points"),
        (["continue", "hopper", "--max-step", "-1"], "--max-step"),
        (["tune", "hopper", "--max-steps", "0", "--minimize", "period"], "--max-steps"),
        # A declared yes/no condition is no number to tune or map.
        (
            ["tune", "hopper", "--vary", "k", "--target", "pulling_after_touchdown=0"],
            "--target",
        ),
        (
            ["tune", "hopper", "--vary", "k", "--minimize", "pulling_after_touchdown"],
            "--minimize",
        ),
        (["sweep", "hopper", "--quantity", "pulling_after_touchdown"], "--quantity"),
        (["simulate", "hopper", "--set", "L0=-1"], "--set"),
        (["orbit", "hopper", "--set", "L0=0"], "--set"),
        (["simulate", "hopper", "--x0=0.5,0.6,0,0"], "--x0"),
        (["simulate", "hopper", "--form", "constrained", "--x0=0.5,0.6,0,0"], "--x0"),
        (["continue", "simplest-walker", "--start=-0.01", "--stop", "0.01"], "--start"),
        (["continue", "simplest-walker", "--start", "0.01", "--stop", "0.6"], "--stop"),
        (["orbit", "hopper", "--out", "/proc/hybrax_out"], "--out"),
        (["orbit", "hopper", "--json", "/proc/nope/run.json"], "--json"),
        (
            ["continue", "hopper", "--curve", "grazing"]
            + ["--param2", "mu", "--stop2", "0.9"],
            "--curve",
        ),
    ],
)
def test_bad_numbers_and_places_are_usage_errors(argv, named, capsys, tmp_path):
    """Each ends with exit 2 and one line naming its argument (no traceback, no
    computation), and leaves no folder behind."""
    if "--out" not in argv:
        argv = [*argv, "--out", str(tmp_path / "figures")]
    with _compile.recorded() as records, pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert not records, [record.what for record in records]
    lines = capsys.readouterr().err.strip().splitlines()
    assert named in lines[-1] and "Traceback" not in "\n".join(lines)
    assert not (tmp_path / "figures").exists()


def test_a_bad_value_in_a_params_file_is_blamed_on_the_file(capsys, tmp_path):
    """A value from `--params` that breaks a parameter's rule names the file and
    the parameter (it was blamed on `--set`); a good file with a bad `--set`
    names `--set`."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"params": {"L0": -1.0}}')
    with pytest.raises(SystemExit) as info:
        main(["simulate", "hopper", "--params", str(bad), "--out", str(tmp_path)])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert info.value.code == 2
    assert "--params" in line and "bad.json" in line and "L0" in line
    good = tmp_path / "good.json"
    good.write_text('{"params": {"L0": 1.1}}')
    with pytest.raises(SystemExit) as info:
        main(["simulate", "hopper", "--params", str(good), "--set", "mu=2"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert info.value.code == 2 and "--set" in line and "mu" in line


def test_an_interrupt_is_one_line_and_exit_130(monkeypatch, capsys, tmp_path):
    """Ctrl-C during a command's computation ends it with one line on stderr
    (no traceback) and exit status 130, and leaves no output of the run."""
    import hybrax._cli.simulate as cli

    def interrupted(args, parser):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_run_simulate", interrupted)
    out = tmp_path / "figures"
    assert main(["simulate", "hopper", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hybrax simulate: interrupted; no output of this run was written"]
    assert not out.exists() or not any(out.iterdir())


def test_status_advice_names_the_commands_own_options():
    """The library's advice names `Settings` fields; a command's message names
    its own option, or gives the advice without one where it has none."""
    import hybrax as hx
    from hybrax._cli.common import _for_command

    (late,) = hx.status_message(hx.RESULTS.event_not_reached)
    (steps,) = hx.status_message(hx.RESULTS.max_steps_reached)
    assert "--t-max" in _for_command(late, ("--t-max",))
    assert "`" not in _for_command(late) and "t_max" not in _for_command(late)
    assert "max_steps" not in _for_command(steps)
    assert "--max-ode-steps" in _for_command(steps, ("--max-ode-steps",))


def test_library_arguments_are_value_errors_naming_them():
    """An unknown parameter name in `vary` or `parameter` (it raised an
    `AttributeError` from inside the solve), a non-finite guess (it ran to
    `shooting_failed`) and an empty batch (a reshape error) are `ValueError`s
    naming the argument, raised before anything compiles."""
    import jax.numpy as jnp
    import numpy as np

    import hybrax as hx
    from hybrax.models import hopper

    system, section = hopper.minimal()[0], hopper.section()
    params = hx.canonical_params(hopper.HopperParams())
    guess = hopper.orbit_guess(params)
    with pytest.raises(ValueError, match="`vary`: .*'foo'.*d_G"):
        hx.tune(system, section, guess, params, lambda o, p: o.period, vary=["foo"])
    with pytest.raises(ValueError, match="`parameter`: .*'foo'"):
        hx.continue_orbits(system, section, guess, params, "foo", start=0, stop=1)
    with pytest.raises(ValueError, match="`u_guess` must be finite"):
        hx.find_periodic_orbit(system, section, jnp.array([np.nan, 1.0]), params)
    empty = hx.canonical_params(hopper.HopperParams(mu=np.zeros(0), d_G=np.zeros(0)))
    with pytest.raises(ValueError, match="`params_batch` is empty"):
        hx.sweep_orbits(system, section, guess, empty)
    with pytest.raises(ValueError, match="`u_guess` has 3 entries.* 2"):
        hx.find_periodic_orbit(system, section, jnp.ones(3), params)
    with pytest.raises(ValueError, match="`params`"):
        hx.simulate(system, jnp.array([1.2, 0.2, 0.0, 0.0]), None, n_events=1)
    with pytest.raises(ValueError, match="`x0` lies outside mode 'flight'.*above"):
        hx.simulate(system, jnp.array([0.5, 0.6, 0.0, 0.0]), params, n_events=1)
    with pytest.raises(ValueError, match="`L0` must be > 0"):
        hopper.make_params(L0=0.0)


def test_help_and_usage_errors_import_no_jax():
    """`hybrax --help`, a command's `--help`, `--version` and an argument that
    does not parse end before JAX (or equinox, diffrax) is imported: they
    answer in a fraction of a second."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from hybrax._cli import main\n"
        "for argv in (['--help'], ['--version'], ['orbit', '--help'],\n"
        "             ['sweep', '--help'], ['orbit', 'hopper', '--tol', 'x']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('jax', 'jaxlib', 'equinox', 'diffrax', 'optimistix')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert "argument --tol: not a number: 'x'" in done.stderr


def test_every_command_has_the_solver_options_with_the_librarys_defaults():
    """`--tol`, `--t-max` and `--max-ode-steps` in every command, their defaults
    those of `hx.Settings` except where the command's help says why (orbit's
    tolerance, sweep's time limit); a negative value may follow its option."""
    import hybrax as hx
    from hybrax import _cli
    from hybrax._cli import common

    settings = hx.Settings()
    assert float(settings.stepsize_controller.rtol) == common.TOL
    assert float(settings.stepsize_controller.atol) == common.TOL
    assert float(settings.t_max) == common.T_MAX
    assert settings.max_steps == common.MAX_ODE_STEPS
    parser = _cli._build_parser()
    expected = {
        "simulate": (common.TOL, common.T_MAX),
        "orbit": (1e-12, common.T_MAX),
        "continue": (common.TOL, common.T_MAX),
        "sweep": (common.TOL, 5.0),
        "tune": (common.TOL, common.T_MAX),
    }
    for command, (tol, t_max) in expected.items():
        args = parser.parse_args([command, "hopper"])
        assert (args.tol, args.t_max) == (tol, t_max), command
        assert args.max_ode_steps == common.MAX_ODE_STEPS
        made = common.solver_settings(args)
        assert float(made.t_max) == t_max and made.max_steps == common.MAX_ODE_STEPS
    attached = _cli._negative_values_attached
    argv = ["simulate", "hopper", "--x0", "-1,2", "--t-max", "3", "--set", "a=-1"]
    assert attached(argv) == [
        "simulate",
        "hopper",
        "--x0=-1,2",
        "--t-max",
        "3",
        "--set",
        "a=-1",
    ]
    assert attached(["continue", "x", "--start", "-1e-3"])[-1] == "--start=-1e-3"
    args = parser.parse_args(attached(["continue", "hopper", "--start", "-.5"]))
    assert args.start == -0.5


def test_wide_states_fold_to_the_tables_width():
    """The biped's ten-entry states: every line of the event table within 100
    columns, each state whole on its own lines; a two-entry state stays on one
    line per event."""
    import numpy as np

    from hybrax._cli.common import _event_table, _format_state, _params_lines
    from hybrax.plot import Trajectory

    def trajectory(n):
        x = np.linspace(-1.0, 1.0, 2 * n).reshape(2, n)
        return Trajectory(
            t_phase=np.zeros((0, 1)),
            x_phase=np.zeros((0, 1, n)),
            phase_modes=(),
            t_events=np.array([0.6, 1.2]),
            event_kinds=("heelstrike", "heelstrike"),
            x_before=x,
            x_after=-x,
            T_c=np.array([3.07, 3.08]),
            T_a=np.array([53.7, 52.0]),
        )

    wide = _event_table(trajectory(10))
    assert all(len(line) <= 100 for line in wide)
    text = " ".join(" ".join(wide).split())
    for state in (*trajectory(10).x_before, *trajectory(10).x_after):
        assert " ".join(_format_state(state).split()) in text
    narrow = _event_table(trajectory(2))
    assert len(narrow) == 3  # the header and one line per event
    assert all(len(line) <= 100 for line in narrow)
    names = {f"parameter_{i}": float(i) for i in range(40)}
    lines = _params_lines(names).splitlines()
    assert len(lines) > 1 and all(len(line) <= 100 for line in lines)


def test_models_json_lists_every_model_with_its_defaults(capsys):
    import json

    from hybrax._cli import main
    from hybrax.models import get_model, model_names

    assert main(["models", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert sorted(listing) == model_names()
    wheel = listing["rimless-wheel"]
    assert wheel["parameters"]["alpha"]["unit"] == "rad"
    assert "tune" in wheel["commands"] and wheel["state"] == ["theta", "omega"]
    defaults = get_model("rimless-wheel").make_params()
    for name, entry in wheel["parameters"].items():
        if hasattr(defaults, name):
            assert entry["default"] == float(getattr(defaults, name))


def test_an_mp4_without_its_optional_dependency_is_refused_first(
    monkeypatch, capsys, tmp_path
):
    """`--animation mp4` where imageio-ffmpeg is not installed: one line naming
    the option and the install command, exit 2, before any computation."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: (
            None if name == "imageio_ffmpeg" else find_spec(name, *args)
        ),
    )
    with pytest.raises(SystemExit) as info:
        main(["simulate", "hopper", "--animation", "mp4", "--out", str(tmp_path)])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert info.value.code == 2
    assert "--animation" in line and 'pip install "hybrax[video]"' in line
    # An unknown format is a usage error too.
    with pytest.raises(SystemExit) as info:
        main(["simulate", "hopper", "--animation", "avi"])
    assert info.value.code == 2


def test_basin_derives_its_max_period_from_steps(monkeypatch, capsys, tmp_path):
    """A valid `--steps` below the default `--max-period` runs with the longest
    period it can read off (no error about an option that was not given); a
    `--max-period` given and not below `--steps` is still refused."""
    import hybrax._basin
    import hybrax._periodic

    class Reached(Exception):
        pass

    class Failed:
        succeeded = False

        def __init__(self):
            from hybrax._solution import RESULTS

            self.result = RESULTS.shooting_failed

    seen = {}

    def basin(*args, **kwargs):
        seen.update(kwargs)
        raise Reached

    monkeypatch.setattr(
        hybrax._periodic, "find_periodic_orbit", lambda *a, **k: Failed()
    )
    monkeypatch.setattr(hybrax._basin, "basin", basin)
    argv = ["basin", "hopper", "--steps", "6", "--out", str(tmp_path)]
    with pytest.raises(Reached):
        main(argv)
    assert seen["n_cycles"] == 6 and seen["max_period"] == 5
    assert "--max-period" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main([*argv, "--max-period", "6"])
    assert info.value.code == 2
    assert "--max-period" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["hopper", "--curve", "grazing", "--param2", "mu"], "clearance"),
        (
            ["hopper", "--form", "constrained", "--curve", "release-reversal"]
            + ["--param2", "mu"],
            "release velocity",
        ),
        (
            ["rimless-wheel", "--curve", "neimark-sacker", "--param2", "alpha"],
            "two or more section unknowns",
        ),
    ],
)
def test_a_curve_the_model_cannot_have_is_refused_first(argv, why, capsys, tmp_path):
    """`continue --curve KIND` where no branch of the model can have such a
    point (a quantity it does not declare, too few unknowns) ends before the
    branch is computed, exit 2, one line naming --curve and why."""
    import hybrax._cli.continuation as cli

    def branch(*args, **kwargs):
        raise AssertionError("the branch was computed")

    argv = ["continue", *argv, "--stop2", "0.3", "--out", str(tmp_path / "figures")]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "_branch_from_guesses", branch)
        with pytest.raises(SystemExit) as info:
            main(argv)
    assert info.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--curve" in line and why in line and "no branch" in line
    assert not (tmp_path / "figures").exists()
