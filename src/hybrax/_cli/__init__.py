"""The `hybrax` command line: `hybrax <command> <model> [options]`.

A thin argparse wrapper over the public API, one module per command (`simulate`,
`orbit`, `models`, `continuation`, `sweep`, `tune`, `basin`) and what they share in
`common` (the fields of their JSON files, with units and meanings, in
`json_fields`); it computes nothing the library does not. Each command module
registers a subparser (sharing `_add_common_model_args`) and sets as its defaults
`run=_run_<command>` (`(args, parser) -> int`) and `command_parser` (itself);
each model is a registered `hybrax.ModelBundle` (`hybrax.models.get_model`) that says
how to build its parameters, initial state, systems, Poincaré sections and orbit
guess, and in its `hybrax.ModelPresentation` its own summaries and figures; no
command holds model vocabulary. Exit codes: 0 success, 1 a run that did not
succeed (its status is printed and what was computed is still written), 2 bad
arguments (argparse's convention).
"""

import argparse
import contextlib
import importlib
import importlib.metadata
import io
import os
import re
import sys
import threading
from collections.abc import Sequence

from .common import (
    _PROG,
    SOLVER_POLICY,
    _check_outputs,
    _enable_cache,
    _enable_x64,
    _log_to_stderr,
)
from .interrupt import honour_interrupts, interrupted_line
from .models import _add_models
from .orbit import _add_orbit
from .simulate import _add_simulate


def _build_parser() -> argparse.ArgumentParser:
    from .._registry import model_names

    parser = argparse.ArgumentParser(
        prog=_PROG,
        description=(
            "Simulation and stability analysis of hybrid mechanical systems. "
            f"Models: {', '.join(model_names())} (`hybrax models` lists them)."
        ),
        epilog=SOLVER_POLICY,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {importlib.metadata.version('hybrax')}",
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="<command>", required=True
    )
    _add_models(subparsers)
    _add_simulate(subparsers)
    _add_orbit(subparsers)
    # Commands defined in their own modules register themselves here.
    for module_name in ("continuation", "sweep", "tune", "basin", "robustness"):
        importlib.import_module(f"hybrax._cli.{module_name}").add_parser(subparsers)
    return parser


def console() -> None:
    """The `hybrax` command and `python -m hybrax`: [`main`][hybrax._cli.main] on
    the process's arguments, then the process ends with its exit code.

    Once a command is done, the interpreter's teardown (XLA's CPU client and the
    thousands of loaded modules) takes a noticeable while; everything the command
    wrote is closed by then, so the process ends at once (`os._exit`) after flushing
    the standard streams. A Python thread still working (a program that a command which
    ended early was compiling in the background) gets the ordinary exit instead,
    which waits for it, so that no cache entry is cut short. A closed output pipe
    exits 1 quietly; other exceptions propagate as usual. An interrupted
    command (exit 130) ends at once.

    Before equinox is imported, it sets `EQX_ON_ERROR=nan` unless the environment
    sets it already: the anchors' runtime checks then give NaN (which the
    library's statuses report) instead of a host callback, so that JAX's
    persistent cache keeps every program between runs (see
    `hybrax._compile`)."""
    os.environ.setdefault("EQX_ON_ERROR", "nan")
    try:
        code = main()
    except SystemExit as exit_:
        code = exit_.code
    except BrokenPipeError:
        # The reader of the output went away (`hybrax ... | head -1`): exit 1
        # without a traceback; what is left to flush goes nowhere (Python's
        # documented recipe for SIGPIPE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    # A program still compiling in another thread (a command that ended early)
    # is waited for, so that no cache entry is cut short.
    others_busy = any(
        thread.is_alive() and not thread.daemon
        for thread in threading.enumerate()
        if thread is not threading.main_thread()
    )
    # After Ctrl-C the user waits for nothing, not even a compile in the
    # background (JAX reads a cache entry cut short with a warning, as a miss).
    others_busy = others_busy and code != 130
    if others_busy or not (code is None or isinstance(code, int)):
        raise SystemExit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`hybrax ... | head -1`)
            pass
    os._exit(code or 0)


def _finish_outputs(args: argparse.Namespace, argv, code: int) -> int:
    """After a run: make its `--out` folder hold one run's files of this command
    (those of its previous run that the folder's manifest lists and this run
    does not write again are removed; see `hybrax._io.finish_folder`), and say
    where each file went that could not be written to its own place (exit 1
    then: the outputs are not where asked)."""
    from .._io import FALLBACKS, finish_folder

    out = getattr(args, "out", None)
    if out is not None and out.is_dir():
        words = sys.argv[1:] if argv is None else list(argv)
        removed = finish_folder(out, args.command, " ".join(["hybrax", *words]))
        if removed:
            print(
                f"removed from {str(out)!r} the files of the previous "
                f"`{args.command}` run that this one does not write: "
                f"{', '.join(removed)}",
                file=sys.stderr,
            )
    for wanted, written, reason in FALLBACKS:
        print(
            f"hybrax {args.command}: could not write {str(wanted)!r} ({reason}); "
            f"saved it as {str(written)!r}",
            file=sys.stderr,
        )
    if FALLBACKS and code == 0:
        return 1
    return code


# A value that starts like a negative number (`-1,0.5`, `-1e-3`, `-inf`), which
# argparse would take for an option.
_NEGATIVE_VALUE = re.compile(r"-(\d|\.\d|inf|nan)", re.IGNORECASE)


def _negative_values_attached(argv: list[str]) -> list[str]:
    """`argv` with each negative value that follows a long option attached to it
    (`--x0 -1,0.5` becomes `--x0=-1,0.5`): argparse reads a token that starts
    with `-` as an option unless it is a plain number, and no command takes a
    negative number as a positional argument."""
    joined: list[str] = []
    for token in argv:
        previous = joined[-1] if joined else ""
        if (
            previous.startswith("--")
            and "=" not in previous
            and _NEGATIVE_VALUE.match(token)
        ):
            joined[-1] = f"{previous}={token}"
        else:
            joined.append(token)
    return joined


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on `argv` (default `sys.argv[1:]`); returns the exit
    code. Argument errors raise `SystemExit(2)` with a one-line message; an
    interrupt (Ctrl-C) returns 130 after one line, also while JAX compiles (see
    `hybrax._cli.interrupt`)."""
    parser = _build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    # `--help`, `--version` and usage errors end here, before JAX is imported.
    args = parser.parse_args(_negative_values_attached(argv))
    _enable_x64()
    # Errors found after parsing print the subcommand's usage: hand its parser on.
    _check_outputs(args.command_parser, args)
    from .._compile import announcing

    _enable_cache()
    from .._io import FigureOptions, start_run

    start_run(
        FigureOptions(
            format=getattr(args, "format", "png"), dpi=getattr(args, "dpi", 150)
        )
    )
    quiet = getattr(args, "quiet", False)
    try:
        with honour_interrupts(args.command) as watch, contextlib.ExitStack() as stack:
            if quiet:  # results and progress go nowhere; warnings still print
                stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
            elif getattr(args, "verbose", False):
                # The log holds the announcements too: printed once, from it.
                stack.enter_context(_log_to_stderr())
                stack.enter_context(
                    announcing(lambda line: None, label=getattr(args, "model", None))
                )
            else:
                stack.enter_context(announcing(label=getattr(args, "model", None)))
            code = args.run(args, args.command_parser)
            if watch is not None and watch.lost(code):
                # Ctrl-C swallowed on its way to the command: honoured here.
                raise KeyboardInterrupt
        return _finish_outputs(args, argv, code)
    except KeyboardInterrupt:
        # Outputs are written whole at the end (under temporary names): an
        # interrupted run leaves none of its own, and no partial file.
        print(interrupted_line(args.command), file=sys.stderr)
        return 130
