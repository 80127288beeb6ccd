r"""Results saved to a file and loaded back as they were.

A result ([`hybrax.HybridSolution`][], [`hybrax.PeriodicOrbit`][],
[`hybrax.OrbitSweep`][], [`hybrax.Branch`][], [`hybrax.SolutionBranch`][],
[`hybrax.TuneResult`][], a parameter PyTree, or any nesting of dataclasses,
`equinox.Module`s, tuples, lists, dicts, arrays and numbers) is written as one
NumPy `.npz` archive: every array under its own key, and one JSON record of the
structure (the classes by module and name, the numbers, strings and status
codes), the hybrax version and the archive's layout.

Loading treats the file as data only: nothing is pickled or imported, and the
only objects rebuilt are those of an explicit allow-list (hybrax's results, the
zoo's parameter classes, hybrax's status codes, and the classes the caller
passes), each through its own constructor, so that its checks run; any other
class the file names, and any damage, is a `ValueError` naming the file.
"""

import dataclasses
import importlib
import importlib.metadata
import io
import json
import pathlib
import warnings
import zipfile
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import numpy as np

from ._io import _write_renamed as write_renamed, open_bounded
from ._params import AbstractParams
from ._solution import RESULTS, STATUS_NAMES


# The archive's layout (raised when the record's meaning changes).
ARCHIVE_SCHEMA = 1
_RECORD = "__hybrax__"
# A status (an item of an `equinox.Enumeration` such as `RESULTS`).
_STATUS_ITEM = type(RESULTS.successful)
# The first bytes of a zip file (an `.npz` archive).
_ZIP_MAGIC = b"PK\x03\x04"

#: The most bytes `hybrax.load` reads: the file, and its arrays and record
#: unpacked (4 GiB).
MAX_ARCHIVE_BYTES = 1 << 32

# The classes a file may name, by `module:qualname`: hybrax's results (and the
# classes they hold) and the zoo's parameter classes. The names are this
# module's, never the file's: a file selects among them and imports nothing else.
_RESULT_CLASSES = (
    "hybrax._solution:HybridSolution",
    "hybrax._periodic.section:PeriodicOrbit",
    "hybrax._periodic.floquet:FloquetAnalysis",
    "hybrax._periodic.newton:ShootingStart",
    "hybrax._periodic.newton:ShootingSafeguard",
    "hybrax._sweep.orbits:OrbitSweep",
    "hybrax._continuation.results:Branch",
    "hybrax._continuation.results:SolutionBranch",
    "hybrax._continuation.results:SpecialPoint",
    "hybrax._continuation.curves:BifurcationCurve",
    "hybrax._basin:Basin",
    "hybrax._tune.results:TuneResult",
    "hybrax._tune.results:TuneStep",
    "hybrax._mechanics:ImpactResult",
)
_PARAMS_CLASSES = (
    "hybrax.models.hopper:HopperParams",
    "hybrax.models.compass_gait:CompassGaitParams",
    "hybrax.models.rimless_wheel:RimlessWheelParams",
    "hybrax.models.bouncing_ball:BallParams",
    "hybrax.models.jumper:JumperParams",
    "hybrax.models.biped5.dynamics:Biped5Params",
    "hybrax.models.simplest_walker:SimplestWalkerParams",
)
# The status enumerations a file may name, with their number of codes.
_STATUS_ENUMERATIONS = {"hybrax._solution:RESULTS": (RESULTS, len(STATUS_NAMES))}


def save(path, result: Any) -> pathlib.Path:
    """Save `result` to `path` (a `.npz` archive; written under a temporary name
    and renamed, so an interrupted save leaves the previous file or none), to
    be read back by [`hybrax.load`][].

    **Arguments:**

    - `path`: the file to write (any suffix; `.npz` is usual).
    - `result`: a result of the library or any nesting of dataclasses,
      `equinox.Module`s, tuples, lists, dicts, arrays and numbers. What cannot be
      stored as data is saved as `None`: a function, an object that holds one
      (a system with its vector fields), and `TuneResult.problem` (which serves
      `objective_at`).

    **Returns:** the path written.

    **Example:**

    ```python
    orbit = hx.find_periodic_orbit(system, section, guess, params)
    hx.save("orbit.npz", orbit)
    again = hx.load("orbit.npz")  # the same arrays, bit for bit
    ```
    """
    path = pathlib.Path(path)
    content = archive_bytes(result)
    write_renamed(path, lambda temporary: temporary.write_bytes(content))
    return path


def archive_bytes(result: Any) -> bytes:
    """The content of the archive [`hybrax.save`][] writes for `result`."""
    arrays: dict[str, np.ndarray] = {}
    record = {
        "hybrax": importlib.metadata.version("hybrax"),
        "schema": ARCHIVE_SCHEMA,
        "result": _encode(result, arrays),
    }
    arrays[_RECORD] = np.array(json.dumps(record))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def load(path, *, classes: Sequence[type] = ()) -> Any:
    """The result saved at `path` by [`hybrax.save`][]: the same classes, and
    the same arrays bit for bit (as NumPy arrays).

    The file is read as data only: arrays, numbers, strings, tuples, lists,
    dicts, hybrax's status codes, and objects of hybrax's own result classes
    ([`hybrax.HybridSolution`][], [`hybrax.PeriodicOrbit`][],
    [`hybrax.OrbitSweep`][], [`hybrax.Branch`][], [`hybrax.SolutionBranch`][],
    [`hybrax.BifurcationCurve`][], [`hybrax.Basin`][], [`hybrax.TuneResult`][]
    and the classes they hold), of the zoo's parameter classes, and of
    `classes`. Each object is rebuilt through its class's constructor (so a
    parameter class checks its values again); nothing is unpickled or imported,
    and no other class is ever made. Files of up to 4 GiB (`MAX_ARCHIVE_BYTES`,
    also the bound on its unpacked content) are read.

    **Arguments:**

    - `path`: the file written by [`hybrax.save`][].
    - `classes`: further dataclasses or `equinox.Module`s (your own parameter
      class, say) that the file may hold; they are rebuilt by calling them with
      the saved fields.

    **Returns:** the saved result.

    **Raises:**

    - `FileNotFoundError` if there is no file at `path`.
    - `ValueError` naming `path` if the file is not such an archive (a JSON
      file, say, or one damaged in any way that shows), is too large, was
      written in a newer layout, or names a class not listed above; or naming
      `classes` if one of those is not a dataclass.
    """
    path = pathlib.Path(path)
    known = {}
    for cls in classes:
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(
                f"`classes` must hold dataclasses or equinox Modules; got {cls!r}."
            )
        known[_class_path(cls)] = cls
    name = f"`path`: {str(path)!r}"
    with open_bounded(path, MAX_ARCHIVE_BYTES, "`path`", _ZIP_MAGIC) as file:
        start = file.read(len(_ZIP_MAGIC))
        file.seek(0)
        if start != _ZIP_MAGIC:
            if start.lstrip()[:1] in (b"{", b"["):
                raise ValueError(
                    f"{name} looks like JSON (a command's `--json` record, say), "
                    "not a result saved by hybrax.save; read JSON with `json.load`."
                )
            raise ValueError(f"{name} is not a result saved by hybrax.save.")
        try:
            arrays = _read_arrays(file)
        except _Damaged as error:
            raise ValueError(f"{name} is not a result saved by hybrax: {error}.")
    if _RECORD not in arrays:
        raise ValueError(f"{name} is not a result saved by hybrax.")
    try:
        record = _read_record(arrays.pop(_RECORD))
        if record["schema"] > ARCHIVE_SCHEMA:
            raise ValueError(
                f"{name} was saved by hybrax {record.get('hybrax')} in layout "
                f"{record['schema']}; this version reads up to {ARCHIVE_SCHEMA}."
            )
        return _decode(record["result"], arrays, known)
    except _Damaged as error:
        raise ValueError(f"{name} is a damaged or foreign archive: {error}.")
    except RecursionError:
        raise ValueError(f"{name} is a damaged archive: nested too deeply.")


class _Damaged(Exception):
    """What is wrong with an archive, for `load` to name the file."""


def _read_arrays(file) -> dict[str, Any]:
    """Every member of the zip archive `file` as a NumPy array, by its name less
    `.npy`; the unpacked sizes bounded by `MAX_ARCHIVE_BYTES` before any is read,
    and each array's size as its header declares it by its member's size."""
    try:
        with zipfile.ZipFile(file) as archive:
            members = archive.infolist()
            if sum(member.file_size for member in members) > MAX_ARCHIVE_BYTES:
                raise _Damaged(f"it unpacks to more than {MAX_ARCHIVE_BYTES} bytes")
            arrays: dict[str, Any] = {}
            for member in members:
                if not member.filename.endswith(".npy"):
                    raise _Damaged(f"its entry {member.filename!r} is not an array")
                key = member.filename.removesuffix(".npy")
                with archive.open(member) as entry:
                    version = np.lib.format.read_magic(entry)
                    read_header = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, _, dtype = read_header(entry)
                    if dtype.hasobject:
                        raise _Damaged(f"its entry {key!r} holds Python objects")
                    if int(np.prod(shape, dtype=object)) * dtype.itemsize > (
                        member.file_size
                    ):
                        raise _Damaged(f"its entry {key!r} is cut short")
                with archive.open(member) as entry:
                    arrays[key] = np.lib.format.read_array(entry, allow_pickle=False)
    except _Damaged:
        raise
    # NumPy and zipfile report a damaged file in many ways (`BadZipFile`, a CRC
    # or zlib error, an unsupported compression, a bad header or size).
    except Exception as error:
        raise _Damaged(f"{type(error).__name__}: {error}") from None
    return arrays


def _read_record(entry: Any) -> dict:
    """The archive's JSON record, checked: a dict with an integer layout and a
    result."""
    if not (isinstance(entry, np.ndarray) and entry.shape == ()):
        raise _Damaged("its record is not one string")
    if entry.dtype.kind != "U":
        raise _Damaged("its record is not text")
    try:
        record = json.loads(str(entry))
    except ValueError as error:
        raise _Damaged(f"its record is not JSON ({error})") from None
    if not isinstance(record, dict):
        raise _Damaged(f"its record is a {type(record).__name__}, not an object")
    schema = record.get("schema")
    if isinstance(schema, bool) or not isinstance(schema, int) or schema < 1:
        raise _Damaged(f"its record's layout is {schema!r}, not a positive integer")
    if "result" not in record:
        raise _Damaged("its record holds no result")
    return record


def _encode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, _STATUS_ITEM):
        return {
            "__status__": _class_path(value._enumeration),
            "value": _encode(value._value, arrays),
        }
    if eqx.is_array(value) or isinstance(value, np.ndarray | np.generic):
        key = f"a{len(arrays)}"
        arrays[key] = np.asarray(value)
        return {"__array__": key}
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return {"__float__": repr(value)}  # NaN and infinities too
    if isinstance(value, complex):
        return {"__complex__": [repr(value.real), repr(value.imag)]}
    if isinstance(value, tuple | list):
        kind = "__tuple__" if isinstance(value, tuple) else "__list__"
        return {kind: [_encode(item, arrays) for item in value]}
    if isinstance(value, dict):
        return {
            "__dict__": [
                [_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()
            ]
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kept = dict(arrays)
        fields = {
            # A field marked `metadata={"archive": False}` (a result's handle on
            # the problem it solved) is not data: saved as None.
            field.name: _encode(getattr(value, field.name), arrays)
            if field.metadata.get("archive", True)
            else None
            for field in dataclasses.fields(value)
        }
        if _holds_dropped(fields):
            # An object that holds code (a system, an objective) cannot be made
            # again from data: dropped whole, not rebuilt with holes.
            arrays.clear()
            arrays.update(kept)
            return {"__dropped__": type(value).__name__}
        return {"__class__": _class_path(type(value)), "fields": fields}
    return {"__dropped__": type(value).__name__}


def _holds_dropped(encoded: Any) -> bool:
    if isinstance(encoded, dict):
        return "__dropped__" in encoded or any(
            _holds_dropped(item) for item in encoded.values()
        )
    if isinstance(encoded, list):
        return any(_holds_dropped(item) for item in encoded)
    return False


def _decode(value: Any, arrays: dict[str, Any], known: dict[str, type]) -> Any:
    """The value that `_encode` wrote as `value`, checked as it goes: each entry
    of the form `_encode` writes, classes and statuses from the allow-list."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if not isinstance(value, dict):
        raise _Damaged(f"a {type(value).__name__} stands where an entry belongs")
    keys = set(value)
    if keys == {"__array__"}:
        key = value["__array__"]
        if not isinstance(key, str) or key not in arrays:
            raise _Damaged(f"it names the array {key!r}, which it does not hold")
        return arrays[key]
    if keys == {"__float__"}:
        return _float(value["__float__"])
    if keys == {"__complex__"}:
        parts = value["__complex__"]
        if not (isinstance(parts, list) and len(parts) == 2):
            raise _Damaged(f"a complex number is {parts!r}")
        return complex(_float(parts[0]), _float(parts[1]))
    if keys == {"__tuple__"}:
        return tuple(_decode(item, arrays, known) for item in _list(value, "__tuple__"))
    if keys == {"__list__"}:
        return [_decode(item, arrays, known) for item in _list(value, "__list__")]
    if keys == {"__dict__"}:
        result = {}
        for pair in _list(value, "__dict__"):
            if not (isinstance(pair, list) and len(pair) == 2):
                raise _Damaged(f"a dict's item is {pair!r}")
            key = _decode(pair[0], arrays, known)
            try:
                hash(key)
            except TypeError:
                raise _Damaged(f"a dict's key is a {type(key).__name__}") from None
            result[key] = _decode(pair[1], arrays, known)
        return result
    if keys == {"__dropped__"}:
        return None
    if keys == {"__status__", "value"}:
        enumeration, size = _allowed(value["__status__"], _STATUS_ENUMERATIONS)
        code = _decode(value["value"], arrays, known)
        if not (
            isinstance(code, np.ndarray | np.generic)
            and code.dtype.kind in "iu"
            and np.all((code >= 0) & (code < size))
        ):
            raise _Damaged(f"a status code is {code!r}, not one of 0 to {size - 1}")
        return _STATUS_ITEM(code, enumeration)
    if keys == {"__class__", "fields"}:
        cls = _allowed(value["__class__"], known)
        fields = value["fields"]
        if not isinstance(fields, dict):
            raise _Damaged(f"the fields of a {cls.__name__} are not an object")
        decoded = {name: _decode(item, arrays, known) for name, item in fields.items()}
        return _build(cls, decoded)
    raise _Damaged(f"an entry has the keys {sorted(keys)}")


def _float(text: Any) -> float:
    if not isinstance(text, str):
        raise _Damaged(f"a float is {text!r}, not its text")
    try:
        return float(text)
    except ValueError:
        raise _Damaged(f"a float is {text!r}") from None


def _list(value: dict, kind: str) -> list:
    items = value[kind]
    if not isinstance(items, list):
        raise _Damaged(f"a {kind.strip('_')} holds a {type(items).__name__}")
    return items


def _allowed(path: Any, known: dict[str, Any]) -> Any:
    """The class (or status enumeration) named `module:qualname` in `known`, in
    the allow-list of hybrax's own results and parameter classes, or none."""
    if not isinstance(path, str):
        raise _Damaged(f"a class is named by {path!r}")
    if path in known:
        return known[path]
    if path in _RESULT_CLASSES or path in _PARAMS_CLASSES:
        module_name, _, qualname = path.partition(":")
        return getattr(importlib.import_module(module_name), qualname)
    raise _Damaged(
        f"it names {path!r}, which hybrax.load does not rebuild (it rebuilds "
        "hybrax's results and the zoo's parameters; pass other classes of yours "
        "as `classes`)"
    )


def _build(cls: type, fields: dict[str, Any]) -> Any:
    """`cls` made from its saved `fields` by its own constructor (its checks
    run); any failure of that is damage."""
    names = [field.name for field in dataclasses.fields(cls)]
    if any(not field.init for field in dataclasses.fields(cls)):
        raise _Damaged(f"its {cls.__name__} has fields its constructor does not take")
    if set(fields) != set(names):
        missing = sorted(set(names) - set(fields))
        extra = sorted(set(fields) - set(names))
        raise _Damaged(
            f"its {cls.__name__} lacks the fields {missing} or has the unknown "
            f"fields {extra}"
        )
    if issubclass(cls, AbstractParams):
        for name, field in fields.items():
            if not _is_real(field):
                raise _Damaged(f"its {cls.__name__}'s `{name}` is not a real number")
    try:
        # (A warning, such as equinox's about an array in a static field, is
        # damage too.)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return cls(**fields)
    except Exception as error:
        raise _Damaged(
            f"its {cls.__name__} cannot be rebuilt ({type(error).__name__}: {error})"
        ) from None


def _is_real(value: Any) -> bool:
    """Whether `value` is a real number or an array of them (bools excluded)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, np.ndarray | np.generic) and value.dtype.kind in "iuf"


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"
