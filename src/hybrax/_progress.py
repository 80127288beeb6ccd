"""A progress bar for long host-side loops over compiled calls (sweeps, the
first-passage walks): tqdm where installed, else one line on stderr."""

import sys
import threading
import time


class Progress:
    """A progress bar over `total` units (a sweep's elements, the walks' steps):
    tqdm where installed, else one `\r`-updated line on stderr; nothing when
    disabled."""

    def __init__(self, total: int, enabled: bool, desc: str, unit: str = "el"):
        self.total = total
        self.done = 0
        self.enabled = enabled
        self.desc = desc
        self.start = time.perf_counter()
        self.bar = None
        self.note = None
        self._lock = threading.Lock()  # chunks finish in several threads
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self._line()
        else:
            self.bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)

    def _line(self):
        elapsed = time.perf_counter() - self.start
        percent = 100.0 * self.done / max(self.total, 1)
        note = f", {self.note}" if self.note else ""
        print(
            f"\r{self.desc}: {self.done}/{self.total} ({percent:.0f}%) "
            f"{elapsed:.1f} s{note}",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def update(self, count: int, note: str | None = None):
        """Advance by `count` elements; `note`: a few words shown after the
        count (e.g. how many walks are still walking)."""
        with self._lock:
            self.done += count
            self.note = note
            if not self.enabled:
                return
            if self.bar is not None:
                if note is not None:
                    self.bar.set_postfix_str(note, refresh=False)
                self.bar.update(count)
            else:
                self._line()

    def write(self, line: str):
        """Print `line` above the bar (a compilation's announcement)."""
        with self._lock:
            if self.bar is not None:
                self.bar.write(line, file=sys.stderr)
            else:
                print(f"\r{line}", file=sys.stderr, flush=True)
                self._line()

    def close(self):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
        else:
            print(file=sys.stderr, flush=True)
