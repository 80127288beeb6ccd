"""What a resumable result was computed for, and the check that a resume is the
same computation.

A partial sweep, basin or other resumable result carries a record of its inputs
(`inputs`): pairs `(name, value)` of strings, JSON-able and so kept by
[`hybrax.save`][] and [`hybrax.load`][]. A number, string or flag is recorded as
its JSON text (so that an error can say both values); anything else (a model's
system, parameter arrays, a solver) as a hex digest of its structure and values
([`hybrax._fingerprint.value_fingerprint`][]), or as `"unknown"` where it cannot
be fingerprinted (an arbitrary object of a user's type), which is then not
compared. Resuming with a record that differs in any field is a `ValueError` that
names `resume` and the fields.
"""

import dataclasses
import json
import numbers

import jax.tree_util as jtu
import numpy as np

from ._fingerprint import Unfingerprintable, fingerprint, value_fingerprint


Record = tuple[tuple[str, str], ...]

# A value that cannot be fingerprinted: not compared.
UNKNOWN = "unknown"
# The prefix of a digest (JSON text never starts with it).
_DIGEST = "sha256:"


def _scalar(value):
    """`value` as a JSON number, flag or string, or `None` where it is none."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Number) or (
        isinstance(value, np.ndarray | np.generic) or hasattr(value, "dtype")
    ):
        array = np.asarray(value)
        if array.shape == () and array.dtype.kind in "biuf":
            item = array.item()
            return item if np.isfinite(item) else repr(float(item))
    raise TypeError


def _entry(value) -> str:
    try:
        return json.dumps(_scalar(value))
    except TypeError:
        pass
    try:
        return _DIGEST + value_fingerprint(value)
    except Unfingerprintable:
        return UNKNOWN


def record_value(name: str, value) -> Record:
    """`((name, entry),)`: a number, flag or string as JSON, else a digest."""
    return ((name, _entry(value)),)


def record_fields(name: str, value) -> Record:
    """A dataclass or `equinox.Module` (a [`hybrax.Shooting`][], say) field by
    field, `name.field` each, so that a difference names its field."""
    return tuple(
        (f"{name}.{field.name}", _entry(getattr(value, field.name, None)))
        for field in dataclasses.fields(value)
    )


def record_tree(name: str, tree) -> Record:
    """A parameter PyTree: its structure as `name`, and each leaf as `name`
    followed by its path (`name.mu`): a scalar as JSON, an array as a digest
    of its values."""
    try:
        structure = _DIGEST + fingerprint(tree)  # arrays by shape and dtype
    except Unfingerprintable:
        structure = UNKNOWN
    leaves = jtu.tree_flatten_with_path(tree)[0]
    return ((name, structure),) + tuple(
        (f"{name}{jtu.keystr(path)}", _entry(leaf)) for path, leaf in leaves
    )


def check_resume(record, expected: Record, what: str) -> None:
    """A `ValueError` naming `resume` and every field in which `record` (the
    resume's) differs from `expected` (this call's); `what` names the
    computation ("sweep", "basin")."""
    if not record:
        raise ValueError(
            f"`resume` holds no record of what its {what} was computed for (it "
            f"was saved by an older hybrax); run the {what} again."
        )
    theirs = dict(record)
    differences = []
    for name, entry in expected:
        other = theirs.get(name)
        if other == entry or UNKNOWN in (other, entry):
            continue
        if other is None:
            differences.append(f"{name} (not in `resume`)")
        elif _DIGEST in entry + other:
            differences.append(f"{name} (another value)")
        else:
            differences.append(f"{name} ({other} there, {entry} here)")
    for name in theirs.keys() - dict(expected).keys():
        differences.append(f"{name} (only in `resume`)")
    if differences:
        raise ValueError(
            f"`resume` is a {what} of other inputs than this call's: "
            + "; ".join(differences)
            + f". Resume a {what} only with the inputs it was started with."
        )
