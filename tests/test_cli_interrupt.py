"""Ctrl-C is honoured during compilation (exit 130 and one line within seconds,
whatever JAX is doing), and the command line's advice and usage checks say only
what holds: no advice to raise a limit where the model says no orbit exists, no
curve in one parameter twice."""

import os
import signal
import subprocess
import sys
import time

import pytest

import hybrax as hx
from helpers import interrupt_command
from hybrax._cli import main
from hybrax._cli.common import _for_command


INTERRUPTED = "hybrax orbit: interrupted; no output of this run was written"


def test_ctrl_c_during_a_compile_exits_130_at_once(tmp_path):
    """`hybrax orbit hopper` with an empty cache, SIGINT two seconds into its
    first compile: the process ends within a few seconds with exit status 130
    and the one line (it had swallowed the interrupt in a JAX garbage-collection
    callback and run on to the end, exit 0)."""
    code, waited, lines = interrupt_command(
        ["orbit", "hopper", "--no-figures", "--out", str(tmp_path / "out")],
        "compiling",
        env={"HYBRAX_CACHE_DIR": str(tmp_path / "cache")},
        after_s=2.0,
        wait_s=120,
        exit_s=30,
    )
    assert code == 130, lines
    assert waited < 10, waited
    # Its one line (a compilation's own closing line may race it to stderr).
    assert INTERRUPTED in lines, lines
    assert not any(
        "Traceback" in line or "Exception ignored" in line for line in lines
    ), lines


@pytest.mark.parametrize(
    "extra",
    [
        ["--param2", "D_G"],  # the model's default --param
        ["--param", "mu", "--start", "0.7", "--stop", "0.9", "--param2", "mu"],
        ["--param", "d_G", "--start=-10", "--stop=-20", "--param2", "D_G"],
    ],
)
def test_a_curve_in_the_continued_parameter_is_a_usage_error(extra, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main(
            ["continue", "hopper", "--curve", "fold", "--stop2", "0.5"]
            + [*extra, "--out", str(tmp_path)]
        )
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "--param2: must differ from the continued parameter" in lines[-1]


def test_no_advice_to_raise_a_limit_where_the_model_says_no_orbit_exists():
    (steps,) = hx.status_message(hx.RESULTS.max_steps_reached)
    (late,) = hx.status_message(hx.RESULTS.event_not_reached)
    options = ("--t-max", "--max-ode-steps")
    assert "--max-ode-steps" in _for_command(steps, options)
    for message in (steps, late):
        quiet = _for_command(message, options, advise=False)
        assert "Try" not in quiet and "Increase" not in quiet
        assert "max_steps" not in quiet and "--max-ode-steps" not in quiet
    assert _for_command(steps, options, advise=False) == (
        "The maximum number of solver steps was reached."
    )


def test_an_interrupt_swallowed_on_its_way_is_still_honoured(
    monkeypatch, capsys, tmp_path
):
    """A Ctrl-C whose `KeyboardInterrupt` is caught by code the command does not
    own (here a stand-in that swallows it and returns 0; under load, something
    inside JAX's compile did) ends the run with the one line and exit 130, not
    with exit 0 as if no Ctrl-C had come."""
    import hybrax._cli.models as models_command

    def swallowing(args, parser):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)  # the handler runs here
        except KeyboardInterrupt:
            pass
        return 0

    monkeypatch.setattr(models_command, "_run_models", swallowing)
    assert main(["models"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "hybrax models: interrupted; no output of this run was written"
    )
    # Without a Ctrl-C the same run ends as it says.
    monkeypatch.setattr(models_command, "_run_models", lambda args, parser: 0)
    assert main(["models"]) == 0


_SWALLOW_AND_GO_ON = """
import os, signal, time
import hybrax._cli.models as models_command
from hybrax._cli import main

def swallowing(args, parser):
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    time.sleep(30)  # runs on as if no Ctrl-C had come
    return 0

models_command._run_models = swallowing
raise SystemExit(main(["models"]))
"""


def test_a_command_that_writes_nothing_ends_within_seconds_of_a_swallowed_interrupt():
    """`models`, `simulate` and `orbit` write nothing when interrupted: a Ctrl-C
    whose `KeyboardInterrupt` was swallowed ends them within seconds (exit 130,
    the one line), not after the rest of their run."""
    lines = _interrupted_within_seconds(_SWALLOW_AND_GO_ON)
    assert "hybrax models: interrupted; no output of this run was written" in lines


def _interrupted_within_seconds(script: str) -> list[str]:
    """Run `script` in a fresh process: it must end with exit status 130 within
    20 s; its lines on stderr."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 130, done.stderr
    assert time.monotonic() - began < 20
    return done.stderr.splitlines()


_SWALLOWED_IN_A_DESTRUCTOR = """
import os, signal, time
import hybrax._cli.models as models_command
from hybrax._cli import main

class Slow:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # the handler runs here, where Python cannot raise

def swallowing(args, parser):
    Slow()
    time.sleep(30)  # the interrupt, raised again, lands here
    return 0

models_command._run_models = swallowing
raise SystemExit(main(["models"]))
"""


def test_an_interrupt_lost_in_a_callback_is_raised_again_without_a_traceback():
    """A `KeyboardInterrupt` raised where Python cannot raise it (a destructor,
    as JAX's garbage-collection callback during a compile) is raised again in the
    command, which ends with the one line and exit 130, printing no "Exception
    ignored" traceback (raised again from the unraisable hook itself, the handler
    ran inside that hook and Python printed it)."""
    assert _interrupted_within_seconds(_SWALLOWED_IN_A_DESTRUCTOR) == [
        "hybrax models: interrupted; no output of this run was written"
    ]
