"""Output files that cannot be lost, mixed or left half-written: a probe write
before a command computes; each file written under a temporary name beside its
place, then renamed onto it (`os.replace`, atomic on one file system), so that a
run killed mid-write leaves the previous file or none, never a partial one; a
fallback folder where a write fails after the work is done; and a manifest per
output folder, so that a folder holds one run's files only."""

import contextlib
import dataclasses
import io
import json
import os
import pathlib
import stat
import tempfile
from collections.abc import Callable
from typing import BinaryIO


def probe_writable(folder: pathlib.Path) -> str | None:
    """Create `folder` (and its missing parents), write and remove a file in it,
    and remove the folders it created: `None` if that worked, else why not (the
    operating system's reason). A place that passes takes the run's files."""
    folder = pathlib.Path(folder)
    created = []
    missing = folder
    while not missing.exists() and missing != missing.parent:
        created.append(missing)
        missing = missing.parent
    if missing.exists() and not missing.is_dir():
        return f"{str(missing)!r} is not a directory"
    probe = folder / f".hybrax-write-probe-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        return f"cannot write in {str(folder)!r} ({error.strerror or error})"
    finally:
        for path in created:  # (deepest first)
            with contextlib.suppress(OSError):
                path.rmdir()
    return None


@contextlib.contextmanager
def open_bounded(path: pathlib.Path, limit: int, argument: str, prefix: bytes = b""):
    """Open the input file `path` for reading in binary, refusing one of more
    than `limit` bytes: a regular file by its size (then read as needed), any
    other (a pipe, a device such as `/dev/zero`) by reading at most `limit + 1`
    bytes of it, or only its first bytes where they are not `prefix` (the
    format's magic bytes: the caller refuses that file without reading on). A
    missing file is a `FileNotFoundError`; one that cannot be read or is too
    large a `ValueError` that names `argument` and the file."""
    name = f"{argument}: {str(path)!r}"
    try:
        file = open(path, "rb")  # noqa: SIM115 (closed below)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise ValueError(f"{name} cannot be read ({error.strerror or error}).")
    with file:
        try:
            regular = stat.S_ISREG(os.fstat(file.fileno()).st_mode)
            if regular:
                size = os.fstat(file.fileno()).st_size
                content: BinaryIO = file
            else:
                data = file.read(len(prefix))
                if data == prefix:
                    data += file.read(limit + 1 - len(data))
                size = len(data)
                content = io.BytesIO(data)
        except OSError as error:
            raise ValueError(f"{name} cannot be read ({error.strerror or error}).")
        if size > limit:
            raise ValueError(
                f"{name} is larger than {limit} bytes, the most hybrax reads here."
            )
        yield content


def read_bounded(path: pathlib.Path, limit: int, argument: str) -> bytes:
    """The content of the input file `path`, of at most `limit` bytes (see
    `open_bounded`)."""
    with open_bounded(path, limit, argument) as file:
        try:
            content = file.read(limit + 1)
        except OSError as error:
            raise ValueError(
                f"{argument}: {str(path)!r} cannot be read ({error.strerror or error})."
            )
    if len(content) > limit:  # (it grew since it was opened)
        raise ValueError(
            f"{argument}: {str(path)!r} is larger than {limit} bytes, the most "
            "hybrax reads here."
        )
    return content


MANIFEST = "hybrax-manifest.json"

# The files this process has written (their final places), and those written to
# the fallback folder instead of their own place: `(wanted, written, reason)`.
WRITTEN: list[pathlib.Path] = []
FALLBACKS: list[tuple[pathlib.Path, pathlib.Path, str]] = []
_FALLBACK_FOLDER: list[pathlib.Path] = []


@dataclasses.dataclass(frozen=True)
class FigureOptions:
    """How a run writes its figures: `format` (one of `FIGURE_FORMATS`, the
    file suffix) at `dpi` dots per inch (raster formats). Set per run by
    `start_run` (the command line's `--format` and `--dpi`)."""

    format: str = "png"
    dpi: float = 150.0


FIGURE_FORMATS = ("png", "pdf", "svg")
_FIGURES = [FigureOptions()]


def start_run(figures: FigureOptions | None = None) -> None:
    """Forget the files of an earlier run in this process (the command line's
    `main` may run several) and set how this run writes figures."""
    WRITTEN.clear()
    FALLBACKS.clear()
    _FIGURES[0] = FigureOptions() if figures is None else figures


def write_figure(path, figure) -> pathlib.Path:
    """Write a matplotlib `figure` at `path` with its suffix replaced by the
    run's figure format, at the run's dpi (see `FigureOptions`), through
    `write_file`; returns the path written."""
    options = _FIGURES[0]
    path = pathlib.Path(path).with_suffix(f".{options.format}")
    return write_file(
        path,
        lambda temporary: figure.savefig(
            temporary, dpi=options.dpi, format=options.format
        ),
    )


def write_file(path, write: Callable[[pathlib.Path], object]) -> pathlib.Path:
    """Write one file: `write(temporary)` writes it under a temporary name beside
    `path` (with the same suffix, so that writers that read the format from it
    still do), which is then renamed onto `path`; a run killed mid-write leaves
    the previous file or none.

    Where that fails after the work is done (the folder removed, the disk full,
    a permission changed since the probe), the file goes to a fallback folder
    (`hybrax-rescue-<pid>` in the system's temporary folder) instead and the
    call is recorded in `FALLBACKS` for the command line to report. Returns the
    path written."""
    path = pathlib.Path(path)
    try:
        _write_renamed(path, write)
    except OSError as error:
        rescued = _fallback_folder() / path.name
        _write_renamed(rescued, write)
        FALLBACKS.append((path, rescued, error.strerror or str(error)))
        WRITTEN.append(rescued)
        return rescued
    WRITTEN.append(path)
    return path


def _write_renamed(path: pathlib.Path, write) -> None:
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    try:
        write(temporary)
        _replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _replace(source: pathlib.Path, target: pathlib.Path) -> None:
    os.replace(source, target)


def _fallback_folder() -> pathlib.Path:
    if not _FALLBACK_FOLDER:
        folder = pathlib.Path(tempfile.gettempdir()) / f"hybrax-rescue-{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=True)
        _FALLBACK_FOLDER.append(folder)
    return _FALLBACK_FOLDER[0]


def finish_folder(folder, kind: str, command: str) -> list[str]:
    """Make `folder` hold one run's files of each kind of run (`kind`: the
    command's name, e.g. `"orbit"`): remove the files that the folder's
    manifest lists for the previous run of that kind and this run did not write
    (a figure this run does not make, left from a run of another model or
    options, or one that failed), and record this run in the manifest
    (`hybrax-manifest.json`: per kind, the command and the files it wrote
    there). The files of other kinds of run stay (a `simulate` beside an
    `orbit` in one folder), except those this run wrote anew, which are its
    own now. Files that no hybrax run wrote are never touched. Returns the
    names removed."""
    folder = pathlib.Path(folder)
    manifest = folder / MANIFEST
    here = folder.resolve()
    mine = sorted(
        {
            str(path.resolve().relative_to(here))
            for path in WRITTEN
            if path.resolve().is_relative_to(here) and path.name != MANIFEST
        }
    )
    runs: dict[str, dict] = {}
    # An unreadable or foreign manifest is replaced (nothing of it is removed).
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError, KeyError):
        runs = {
            str(name): {"command": str(run["command"]), "files": list(run["files"])}
            for name, run in json.loads(manifest.read_text())["runs"].items()
        }
    previous = runs.pop(kind, {"files": []})["files"]
    removed = []
    for name in previous:
        stale = (folder / name).resolve()
        if name in mine or not stale.is_relative_to(here) or stale == here:
            continue
        with contextlib.suppress(OSError):
            stale.unlink()
            removed.append(name)
    for run in runs.values():
        run["files"] = [name for name in run["files"] if name not in mine]
    if mine:
        runs[kind] = {"command": command, "files": mine}
    runs = {name: run for name, run in sorted(runs.items()) if run["files"]}
    if runs or previous:
        text = json.dumps({"runs": runs}, indent=2) + "\n"
        write_file(manifest, lambda temporary: temporary.write_text(text))
        WRITTEN.pop()  # (the manifest lists the runs' own files only)
    return removed
