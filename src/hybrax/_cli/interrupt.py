"""Ctrl-C honoured whatever JAX is doing: a command's run inside `honour_interrupts`.

Python runs a signal's handler in the main thread between two bytecodes. While
XLA compiles, the main thread sits in C++ for tens of seconds and the handler
waits; and where the handler does run, its `KeyboardInterrupt` may land inside a
garbage-collection callback (JAX's `_xla_gc_callback`), where Python prints
"Exception ignored in ..." and goes on: the interrupt is lost and the run
continues to its end (exit 0).

So the signal is also written to a socket (`signal.set_wakeup_fd`, done by the
C-level handler at once), and a watcher thread checks that each interrupt
reaches the command as a `KeyboardInterrupt`: one swallowed (seen by
`sys.unraisablehook`) is raised again by the watcher (`_thread.interrupt_main`;
from the hook itself the handler would run inside the hook, and Python would
print it as an exception ignored there), and one not
delivered within `GRACE_S` seconds, or a second Ctrl-C, ends the process with
the command line's one line and exit status 130. A `KeyboardInterrupt` that
reached the command lets it finish as documented (`sweep` and `continue` write
what finished, and return 130). One swallowed where no hook sees it (caught by
code that the command does not own, as once inside JAX's compile under load)
would leave a run that goes on as if there had been no Ctrl-C: a command that
writes nothing when interrupted (`models`, `simulate`, `orbit`, `robustness`)
ends within `GRACE_S` seconds of the signal whatever happened to its
`KeyboardInterrupt`, and for the others `honour_interrupts` yields its watch,
whose `lost(code)` tells the command line to end with the one line and 130 all
the same.
"""

import _thread
import contextlib
import os
import signal
import socket
import sys
import threading
import time


# Seconds an interrupt may take to reach the command as a `KeyboardInterrupt`.
GRACE_S = 3.0

# The commands that write nothing when interrupted: once Ctrl-C came they have
# nothing left to do but end.
_WRITE_NOTHING = ("models", "simulate", "orbit", "robustness")


def interrupted_line(command: str) -> str:
    return f"hybrax {command}: interrupted; no output of this run was written"


class _Watch:
    def __init__(self, command: str):
        self.command = command
        self.ends_at_once = command in _WRITE_NOTHING
        self.arrived = 0  # SIGINTs signalled (the watcher counts them)
        self.delivered = 0  # SIGINTs raised as KeyboardInterrupt and not lost
        self.closed = False
        self.swallowed = False  # a KeyboardInterrupt lost in a callback, to raise again
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.writer.setblocking(False)

    def handler(self, signum, frame):
        self.delivered += 1
        raise KeyboardInterrupt

    def unraisable(self, unraisable, previous):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            # Swallowed (raised inside a callback that cannot raise): raised
            # again by the watcher, not here, where the handler would run inside
            # this hook and be printed as an exception ignored in it.
            self.delivered -= 1
            self.swallowed = True
        else:
            previous(unraisable)

    def lost(self, code: int) -> bool:
        """Whether a Ctrl-C came during the run and the run ended as if none had
        (an exit status other than the 130 of a command that handled it)."""
        with contextlib.suppress(BlockingIOError, OSError):
            self.arrived += self.reader.recv(64).count(signal.SIGINT.value)
        return code != 130 and (self.arrived > 0 or self.delivered > 0)

    def end(self) -> None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            print(interrupted_line(self.command), file=sys.stderr, flush=True)
        os._exit(130)

    def watch(self) -> None:
        since = None
        while not self.closed:
            with contextlib.suppress(BlockingIOError, OSError):
                data = self.reader.recv(64)
                self.arrived += data.count(signal.SIGINT.value)
            if self.arrived >= 2:  # Ctrl-C again: the user insists
                self.end()
            if self.swallowed:
                self.swallowed = False
                _thread.interrupt_main()
            if self.delivered < self.arrived or (self.ends_at_once and self.arrived):
                since = time.monotonic() if since is None else since
                if time.monotonic() - since > GRACE_S:
                    self.end()
            else:
                since = None
            time.sleep(0.05)


@contextlib.contextmanager
def honour_interrupts(command: str):
    """Within: Ctrl-C reaches the command as a `KeyboardInterrupt` within
    `GRACE_S` seconds, or ends the process with exit status 130 and one line.
    Yields the watch (see `_Watch.lost`), or `None` where it does nothing:
    outside the main thread, or where SIGINT has a handler other than Python's
    default."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield None
        return
    watch = _Watch(command)
    previous_hook = sys.unraisablehook
    previous_fd = signal.set_wakeup_fd(watch.writer.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGINT, watch.handler)
    sys.unraisablehook = lambda unraisable: watch.unraisable(unraisable, previous_hook)
    thread = threading.Thread(
        target=watch.watch, name="hybrax-interrupt-watch", daemon=True
    )
    thread.start()
    try:
        yield watch
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(previous_fd)
        sys.unraisablehook = previous_hook
        watch.closed = True
        thread.join()
        watch.reader.close()
        watch.writer.close()
