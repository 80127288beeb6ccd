"""Output files that cannot be lost or left half-written: a probe write before a
command computes, and each file written under a temporary name beside its place,
then renamed onto it (`os.replace`, atomic on one file system), so that a run
killed mid-write leaves the previous file or none, never a partial one."""

import contextlib
import os
import pathlib
from collections.abc import Iterator


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
def atomic_path(path) -> Iterator[pathlib.Path]:
    """A temporary path beside `path` (with the same suffix, so that writers that
    read the format from it still do), renamed onto `path` when the block
    succeeds and removed when it fails."""
    path = pathlib.Path(path)
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
