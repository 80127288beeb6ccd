"""The `--params` files of the commands: a JSON object of parameter values, or an
archive written by `hx.save` (a tuning result, an orbit), read with a size
bound and checked field by field."""

import argparse
import dataclasses
import json
import math
import pathlib
from typing import Any

import numpy as np


MAX_PARAMS_JSON_BYTES = 1 << 26


def _read_params_json(path: pathlib.Path) -> Any:
    """The JSON content of the file `path`, read with a bound; a `ValueError`
    (or `FileNotFoundError`) saying what is wrong otherwise."""
    from .._io import read_bounded

    text = read_bounded(path, MAX_PARAMS_JSON_BYTES, "argument --params")
    try:
        return json.loads(text.decode("utf-8"))
    except RecursionError:
        raise ValueError(
            f"argument --params: {str(path)!r} holds JSON nested too deeply"
        ) from None
    except ValueError:
        raise ValueError(
            f"argument --params: {str(path)!r} is neither JSON nor a result "
            "saved by hybrax.save"
        ) from None


def _read_params_file(
    parser: argparse.ArgumentParser, model, path: pathlib.Path
) -> dict[str, float]:
    """The parameter values of a `--params` file (checked: one line and exit 2
    on a bad file)."""
    if _is_archive(path):
        data = _params_of_archive(parser, model, path)
    else:
        try:
            data = _read_params_json(path)
        except FileNotFoundError as error:
            parser.error(
                f"argument --params: cannot read {str(path)!r}: {error.strerror}"
            )
        except ValueError as error:
            parser.error(str(error).rstrip("."))
    if isinstance(data, dict) and isinstance(data.get("final"), dict):
        data = data["final"]
    if isinstance(data, dict) and isinstance(data.get("params"), dict):
        data = data["params"]
    if not isinstance(data, dict):
        parser.error(f"argument --params: {str(path)!r} holds no parameter object")
    values: dict[str, float] = {}
    for name, value in data.items():
        if name not in model.parameters:
            parser.error(
                f"argument --params: unknown {model.name} parameter {name!r} in "
                f"{str(path)!r}"
            )
        number = _finite_number(value)
        if number is None:
            parser.error(
                f"argument --params: {name} must be a finite number, got "
                f"{_shown(value)} in {str(path)!r}"
            )
        values[name] = number
    return values


def _finite_number(value) -> float | None:
    """`value` as a finite float where it is a real number (not a bool) that
    is one (a 400-digit integer is not), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _shown(value, width: int = 60) -> str:
    """`repr(value)`, cut to `width` characters (a file's value may be huge)."""
    text = (
        repr(value)
        if not isinstance(value, int) or value.bit_length() < 200
        else (f"an integer of {len(str(abs(value)))} digits")
    )
    return text if len(text) <= width else f"{text[: width - 3]}..."


def _is_archive(path: pathlib.Path) -> bool:
    """Whether `path` is a zip file (as `hybrax.save` writes), by its first bytes."""
    try:
        with open(path, "rb") as file:
            return file.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def _load_archive(
    parser: argparse.ArgumentParser, path: pathlib.Path, classes=(), argument="--params"
):
    from .._archive import load

    try:
        return load(path, classes=classes)
    except FileNotFoundError as error:
        parser.error(
            f"argument {argument}: cannot read {str(path)!r}: {error.strerror}"
        )
    except ValueError as error:
        parser.error(
            f"argument {argument}: {error}".replace("`path`: ", "").rstrip(".")
        )


def _params_of_archive(parser, model, path: pathlib.Path) -> dict:
    """The parameters held by a result saved with `hybrax.save`: a
    `hybrax.TuneResult` (its tuned parameters) or the model's parameter object
    itself, as a NAME: VALUE dictionary; a field that is not one number (a
    batch of values) is an error naming it."""
    expected = type(model.make_params())
    saved = _load_archive(parser, path, classes=(expected,))
    params = getattr(saved, "params", saved)
    if not isinstance(params, expected):
        parser.error(
            f"argument --params: {str(path)!r} holds no {model.name} parameters "
            f"(a {type(saved).__name__}; save a hybrax.TuneResult of this model or "
            f"its {expected.__name__})"
        )
    values = {}
    for field in dataclasses.fields(params):
        value = np.asarray(getattr(params, field.name))
        if value.ndim != 0:
            parser.error(
                f"argument --params: {field.name} must be one number, got an array "
                f"of shape {value.shape} in {str(path)!r}"
            )
        values[field.name] = value.item()
    return values


def _params_file_vector(path: pathlib.Path | None, key: str, size: int, model=None):
    """A vector stored beside the parameters of a `--params` file (a `hybrax tune`
    result's final orbit `u` or `state`, in its JSON or as a saved
    `hybrax.TuneResult` of `model`), or None where there is none of that size.
    The file has been checked by `_read_params_file` (a file changed since then
    gives None)."""
    if path is None:
        return None
    classes = () if model is None else (type(model.make_params()),)
    if _is_archive(path):
        from .._archive import load

        try:
            saved = load(path, classes=classes)
        except (OSError, ValueError):
            return None
        orbit = getattr(saved, "orbit", None)
        value = None if orbit is None else np.asarray(getattr(orbit, key, None))
        if (
            value is None
            or value.shape != (size,)
            or value.dtype.kind not in "iuf"
            or not np.all(np.isfinite(value))
        ):
            return None
        return value.astype(float)
    try:
        data = _read_params_json(path)
    except (OSError, ValueError):
        return None
    for place in (data.get("final"), data) if isinstance(data, dict) else ():
        if isinstance(place, dict):
            value = place.get(key)
            if isinstance(value, list) and len(value) == size:
                numbers = [_finite_number(v) for v in value]
                if all(number is not None for number in numbers):
                    return np.asarray(numbers, dtype=float)
    return None
