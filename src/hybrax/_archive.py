r"""Results saved to a file and loaded back as they were.

A result ([`hybrax.HybridSolution`][], [`hybrax.PeriodicOrbit`][],
[`hybrax.OrbitSweep`][], [`hybrax.Branch`][], [`hybrax.SolutionBranch`][],
[`hybrax.TuneResult`][], a parameter PyTree, or any nesting of dataclasses,
`equinox.Module`s, tuples, lists, dicts, arrays and numbers) is written as one
NumPy `.npz` archive: every array under its own key, and one JSON record of the
structure (the classes by module and name, the numbers, strings and status
codes), the hybrax version and the archive's layout. Nothing is pickled, so
loading a file runs no code from it; classes are looked up in the modules of
hybrax and in modules the loading process has already imported.
"""

import dataclasses
import importlib
import importlib.metadata
import io
import json
import pathlib
import sys
import zipfile
from typing import Any

import equinox as eqx
import numpy as np

from ._io import _write_renamed as write_renamed
from ._solution import RESULTS


# The archive's layout (raised when the record's meaning changes).
ARCHIVE_SCHEMA = 1
_RECORD = "__hybrax__"
# A status (an item of an `equinox.Enumeration` such as `RESULTS`).
_STATUS_ITEM = type(RESULTS.successful)


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


def load(path) -> Any:
    """The result saved at `path` by [`hybrax.save`][]: the same classes, and
    the same arrays bit for bit (as NumPy arrays).

    **Raises:** `ValueError` if `path` is not such an archive, was written in a
    newer layout, or names a class that no loaded module defines.
    """
    path = pathlib.Path(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"`path`: {str(path)!r} is not a saved result ({error}).")
    if _RECORD not in arrays:
        raise ValueError(f"`path`: {str(path)!r} is not a result saved by hybrax.")
    record = json.loads(str(arrays.pop(_RECORD)))
    if record.get("schema", 0) > ARCHIVE_SCHEMA:
        raise ValueError(
            f"`path`: {str(path)!r} was saved by hybrax {record.get('hybrax')} in "
            f"layout {record['schema']}; this version reads up to {ARCHIVE_SCHEMA}."
        )
    return _decode(record["result"], arrays)


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


def _decode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if not isinstance(value, dict):
        return value
    if "__array__" in value:
        return arrays[value["__array__"]]
    if "__float__" in value:
        return float(value["__float__"])
    if "__complex__" in value:
        real, imag = value["__complex__"]
        return complex(float(real), float(imag))
    if "__tuple__" in value:
        return tuple(_decode(item, arrays) for item in value["__tuple__"])
    if "__list__" in value:
        return [_decode(item, arrays) for item in value["__list__"]]
    if "__dict__" in value:
        return {_decode(k, arrays): _decode(v, arrays) for k, v in value["__dict__"]}
    if "__dropped__" in value:
        return None
    if "__status__" in value:
        enumeration = _resolve(value["__status__"])
        return _STATUS_ITEM(_decode(value["value"], arrays), enumeration)
    if "__class__" in value:
        cls = _resolve(value["__class__"])
        result = object.__new__(cls)
        for name, field in value["fields"].items():
            # As the class stored it: no conversion, no checks (they ran when it
            # was made).
            object.__setattr__(result, name, _decode(field, arrays))
        return result
    raise ValueError(f"unknown entry in a saved result: {sorted(value)}")


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve(path: str) -> type:
    """The class at `module:qualname`, from hybrax or a module already imported
    (loading a file never imports other code)."""
    module_name, _, qualname = path.partition(":")
    if module_name.split(".")[0] == "hybrax":
        module = importlib.import_module(module_name)
    elif module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        raise ValueError(
            f"a saved result needs the class {qualname!r} of module "
            f"{module_name!r}; import that module before `hybrax.load`."
        )
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(f"a saved result needs {path!r}, which is not defined.")
    return target
