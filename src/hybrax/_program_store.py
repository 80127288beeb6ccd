r"""Traced programs kept between processes with `jax.export`, so that a second
process of the same script skips tracing as well as compiling.

JAX's persistent compilation cache keeps executables, keyed by their program
text; to know the text, a new process traces the program again (the hopper's
analysed orbit: about 4 s per program). With the store on
([`hybrax.enable_compilation_cache`][]), a public routine called outside any
transformation of the caller's exports its program the first time
(`jax.export.export`, JAX's public, versioned serialization of a lowered
program), writes it to the store, and calls it through `Exported.call`; a later
process with the same key deserializes it and calls it, tracing nothing of its
own, and JAX's persistent cache has the executable of that call.

**The key.** A program is found again only where everything that shaped it is
equal: hybrax's own source (a digest of the package's files), the versions of
Python, JAX, jaxlib, equinox, diffrax, optimistix, lineax and NumPy, the backend,
the float width and `EQX_ON_ERROR`, the routine, and each argument's tree
structure, static leaves and array shapes and dtypes. A static leaf enters the
key by value (numbers, strings, tuples, NumPy dtypes) or, for a function or
class defined at the top of a module of hybrax or of its anchors (JAX, NumPy,
equinox, diffrax, optimistix, lineax), by its module and name: their code is
in the key through the versions and the source digest. A function of the
user's own (a model's vector field, guard, reset, chart) says by its name
nothing of what it computes: the key holds instead, for the program's model
(`StoredModel`: its system, section, parameters and continuation parameters,
which a routine names by the `model` of `hybrax._compile.compiled`; by default
its arguments `system`, `section`, `params` and `parameter`; a sweep's orbit
solve and a continuation's residual name the model they hold), the jaxprs,
with their constants, of every function of the system and section as the
library calls them (`HybridSystem._traced_roles`,
`PoincareSection._traced_roles`), of each parameter's `set` and of each
function of an orbit (a tuning objective or constraint, traced on the orbit's
structure: see `OrbitUnknown`), of their forward-mode derivative and of their
reverse-mode derivative (so that a function's own `jax.custom_jvp` or
`jax.custom_vjp` rule enters too; a rule for a rule's own derivative does
not); tracing them takes milliseconds where the program takes seconds. A
function of the user's own anywhere in the arguments must be one of the
model's, and a class of the user's own a reset of its system
(`hybrax.AbstractReset`) or a node of its parameters; otherwise (a sweep's
guess function, a Module of the user's own as a vector field) the program is
not stored and is traced in every process as before.

**Files run no code.** A stored file is a header of JSON (the key in full, the
output's tree structure, its static leaves, the SHA-256 of what follows) and
the `jax.export` serialization (a flatbuffer holding StableHLO), read only
once its digest matches. The output's tree is rebuilt
from types found by module and name among modules already imported, of the
packages above, and never imported on a file's word; anything else in a file
(another type, a damaged or foreign file, another key) makes it unused, with a
line on the `"hybrax"` logger, and the program is traced and written again.
A program whose key traces functions of an orbit it finds (a tuning
objective) has a second file beside it, of the same form without a payload:
the orbit's tree structure, static leaves, shapes and dtypes, under the key
before those traces (`OrbitUnknown`).
A tree is written as equinox flattens a Module (a tuple of its static values,
equinox 0.13.3 and later); with an equinox that flattens otherwise, no program
holding a Module is stored (`supported`).
"""

import enum
import functools
import hashlib
import importlib.metadata
import json
import logging
import os
import pathlib
import platform
import sys
import tempfile
import typing
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._misc import merge_leaves


_LOGGER = logging.getLogger("hybrax")

#: The version of the file format; a file of another is not used.
FORMAT = 1
_MAGIC = b"hybrax traced program\n"
_ORBIT_MAGIC = b"hybrax orbit structure\n"
# Packages whose top-level functions and classes may enter a key by name, and
# whose classes may rebuild a stored output's tree.
_PACKAGES = frozenset(
    {
        "hybrax",
        "jax",
        "jaxlib",
        "numpy",
        "equinox",
        "diffrax",
        "optimistix",
        "lineax",
        "builtins",
    }
)
_DISTRIBUTIONS = (
    "jax",
    "jaxlib",
    "equinox",
    "diffrax",
    "optimistix",
    "lineax",
    "numpy",
)


class NotStorable(Exception):
    """A program that the store does not keep; the message says why."""


# ---------------------------------------------------------------------------
# Where the store is
# ---------------------------------------------------------------------------

_DIRECTORY: list = [None]


def set_directory(path: "str | os.PathLike | None") -> None:
    """Keep traced programs in `path` from now on (`None`: keep none)."""
    _DIRECTORY[0] = None if path is None else pathlib.Path(path)


def directory() -> "pathlib.Path | None":
    """The store's directory, or `None` while the store is off."""
    return _DIRECTORY[0]


# ---------------------------------------------------------------------------
# Encoding values and tree structures as JSON
# ---------------------------------------------------------------------------


def _resolve(module: str, qualname: str):
    """The object `module:qualname` among modules already imported, of the
    packages above; `None` if there is none. Nothing is imported."""
    if module.split(".", 1)[0] not in _PACKAGES:
        return None
    if (module, qualname) == ("builtins", "NoneType"):  # not a builtins name
        return type(None)
    found = sys.modules.get(module)
    for part in qualname.split("."):
        if found is None or part.startswith("<"):
            return None
        found = getattr(found, part, None)
    return found


def _name(value) -> str:
    """`module:qualname` of a top-level function or class of the packages
    above, which resolves to `value` itself."""
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None)
    if (
        not isinstance(module, str)
        or not isinstance(qualname, str)
        or _resolve(module, qualname) is not value
    ):
        raise NotStorable(
            f"{getattr(value, '__qualname__', type(value).__qualname__)} (of "
            f"{module}) is not a top-level function or class of hybrax or its "
            f"anchors"
        )
    return f"{module}:{qualname}"


@functools.cache
def _sentinels() -> tuple:
    """equinox's placeholders in a Module's tree structure, as its own
    flattening of an empty Module gives them (not read from a private module)."""

    class _Empty(eqx.Module):
        pass

    _, aux = jtu.tree_structure(_Empty()).node_data()
    if type(aux) is not tuple:  # another form of equinox's: no Module is stored
        return ()
    return tuple(a for a in aux if not isinstance(a, (str, int, float, type(None))))


class _Probe(eqx.Module):
    value: float
    name: str = eqx.field(static=True)


@functools.cache
def supported() -> bool:
    """Whether this equinox flattens a Module into a form the store reads and
    writes (a tuple of its static values: equinox 0.13.3 and later); where not,
    no program whose inputs or outputs hold a Module is stored."""
    try:
        _decode_tree(_encode_tree(jtu.tree_structure(_Probe(0.0, "probe"))))
    except (NotStorable, ValueError):
        return False
    return True


def _encode(value, own: "list | None" = None):
    """A JSON value for a static value (see the module docstring). With `own` (a
    list), a function or class of the user's own is appended to it and entered
    by its place there (its traces then enter the key: see `_behaviour`);
    without, it raises `NotStorable`."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is tuple:
        return {"tuple": [_encode(v, own) for v in value]}
    if type(value) is list:
        return {"list": [_encode(v, own) for v in value]}
    if type(value) is dict:
        return {"dict": [[_encode(k, own), _encode(v, own)] for k, v in value.items()]}
    if isinstance(value, np.dtype):
        return {"dtype": value.str}
    if isinstance(value, enum.Enum):
        return {"enum": [_name(type(value)), value.name]}
    for index, sentinel in enumerate(_sentinels()):
        if value is sentinel:
            return {"sentinel": index}
    if isinstance(value, type) or callable(value):
        try:
            return {"named": _name(value)}
        except NotStorable:
            if own is None:
                raise
        own.append(value)
        return {"own": len(own) - 1}
    raise NotStorable(f"a static value of type {type(value).__qualname__}")


def _decode(value):
    """The inverse of `_encode`; raises `ValueError` on anything else."""
    if value is None or type(value) in (bool, int, float, str):
        return value
    if type(value) is dict and len(value) == 1:
        ((tag, inner),) = value.items()
        if tag in ("tuple", "list") and type(inner) is list:
            items = [_decode(v) for v in inner]
            return tuple(items) if tag == "tuple" else items
        if tag == "dict" and type(inner) is list:
            pairs = [_decode(pair) for pair in inner if type(pair) is list]
            if len(pairs) == len(inner) and all(len(p) == 2 for p in pairs):
                return dict(pairs)
        if tag == "enum" and type(inner) is list and len(inner) == 2:
            kind = _decode({"named": inner[0]})
            if issubclass(kind, enum.Enum) and inner[1] in kind.__members__:
                return kind[inner[1]]
        if tag == "dtype" and type(inner) is str:
            return np.dtype(inner)
        if tag == "sentinel" and type(inner) is int and 0 <= inner < len(_sentinels()):
            return _sentinels()[inner]
        if tag == "named" and type(inner) is str and inner.count(":") == 1:
            found = _resolve(*inner.split(":"))
            if isinstance(found, type):  # only classes rebuild a tree
                return found
    raise ValueError(f"not a stored value: {str(value)[:80]}")


def _encode_tree(treedef, own: "list | None" = None) -> object:
    data = treedef.node_data()
    if data is None:
        return None  # a leaf
    kind, aux = data
    children = [_encode_tree(c, own) for c in treedef.children()]
    return [_encode(kind, own), _encode(aux, own), children]


_LEAF = jtu.tree_structure(0)


def _decode_tree(value):
    if value is None:
        return _LEAF
    if type(value) is not list or len(value) != 3 or type(value[2]) is not list:
        raise ValueError("not a stored tree structure")
    kind = _decode(value[0])
    if not isinstance(kind, type):
        raise ValueError("not a stored tree structure")
    children = [_decode_tree(c) for c in value[2]]
    return jtu.PyTreeDef.from_node_data_and_children(
        jtu.default_registry, (kind, _decode(value[1])), children
    )


# ---------------------------------------------------------------------------
# The key
# ---------------------------------------------------------------------------


@functools.cache
def _environment() -> tuple:
    """What shapes every program of this process besides its arguments: hybrax's
    source (a digest of its files), the versions, the backend and the options
    that change a traced program."""
    digest = hashlib.sha256()
    root = pathlib.Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    versions = []
    for name in _DISTRIBUTIONS:
        try:
            versions.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            versions.append((name, None))
    return (
        FORMAT,
        digest.hexdigest(),
        platform.python_version(),
        versions,
        jax.default_backend(),
    )


def _aval(leaf) -> list:
    aval = jax.typeof(leaf)
    return [list(aval.shape), np.dtype(aval.dtype).str, bool(aval.weak_type)]


class StoredModel(typing.NamedTuple):
    """Where a program's functions of the user's own are, for its key: the
    hybrid `system`, its Poincaré `section` (or `None`), the `params` they are
    called with (as one element of the program sees them: unbatched) and the
    continuation or tuning `parameters` set in them
    ([`hybrax.AbstractParameter`][]), and `orbit_functions` of the user's own
    called as `f(orbit, params)` on a periodic orbit (a tuning objective and
    constraints). Their traces need the orbit's structure: `orbit` (with
    `jax.ShapeDtypeStruct` leaves) where the arguments hold it, else
    `orbit_in_output(output)` locates it in the program's output, and the store
    keeps it beside the program (see `key`). A routine names its model by the
    `model` of [`hybrax._compile.compiled`][]."""

    system: typing.Any
    section: typing.Any = None
    params: typing.Any = None
    parameters: tuple = ()
    orbit_functions: tuple = ()
    orbit: typing.Any = None
    orbit_in_output: typing.Any = None


def named_model(arguments: dict) -> "StoredModel | None":
    """The model of a routine whose arguments `system`, `section`, `params` and
    `parameter` are it (the default of [`hybrax._compile.compiled`][])."""
    if "system" not in arguments or "params" not in arguments:
        return None
    parameter = arguments.get("parameter")
    return StoredModel(
        arguments["system"],
        arguments.get("section"),
        arguments["params"],
        () if parameter is None else (parameter,),
    )


def traced_model(value, *args) -> "StoredModel | None":
    """`value._traced_model(*args)` for a Module of hybrax's that holds a model
    (a sweep's orbit solve, a continuation's residual), else `None`."""
    method = getattr(type(value), "_traced_model", None)
    if method is None or not type(value).__module__.startswith("hybrax."):
        return None
    return method(value, *args)


def _own(tree) -> list:
    """The functions and classes of the user's own in `tree` (as `_encode`
    finds them in its structure and its leaves that are not arrays)."""
    found: list = []
    leaves, treedef = jtu.tree_flatten(tree)
    _encode_tree(treedef, found)
    for leaf in leaves:
        if not isinstance(leaf, jax.ShapeDtypeStruct):
            try:
                _encode(leaf, found)
            except NotStorable:  # refused in the arguments' key already
                pass
    return found


def _check_covered(model: StoredModel, own: list) -> None:
    """Raise `NotStorable` unless the model's traces say what every function and
    class of the user's own in a program's arguments computes: a function must
    be one of the model's, a class one of its parameters' types or a class of
    its system that the system's traces cover (a reset)."""
    in_system, in_params = _own(model.system), _own(model.params)
    others = _own((model.section, model.parameters, model.orbit_functions))
    functions = {
        id(value)
        for value in in_system + in_params + others
        if not isinstance(value, type)
    }
    for value in own:
        if isinstance(value, type):
            covered = any(value is found for found in in_params) or (
                any(value is found for found in in_system)
                and model.system._covers_class(value)
            )
        else:
            covered = id(value) in functions
        if not covered:
            kind = "class" if isinstance(value, type) else "function"
            raise NotStorable(
                f"{getattr(value, '__qualname__', value)}, a {kind} of the user's "
                f"own that the model's traces do not cover"
            )


def abstract(leaf) -> "jax.ShapeDtypeStruct | None":
    """The shape, dtype and weak type of an array (or tracer) as a
    `jax.ShapeDtypeStruct`; `None` for `None`."""
    return None if leaf is None else _abstract_of(jax.typeof(leaf))


def _abstract_of(aval) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _behaviour(model: "StoredModel | None", own: list) -> str:
    """A digest of what a model of the user's own functions computes: the jaxprs
    (with their constants) of every function of its system and section as the
    library calls them (`HybridSystem._traced_roles`,
    `PoincareSection._traced_roles`) and of its parameters' `set`, of their
    forward-mode derivative and of their reverse-mode derivative (a function's
    own derivative rule enters only so), and the resets' released
    observables."""
    if model is None or model.system is None or model.params is None:
        names = ", ".join(getattr(value, "__qualname__", "?") for value in own)
        raise NotStorable(
            f"{names}, of the user's own, in a program of no model whose traces "
            f"would cover them"
        )
    _check_covered(model, own)
    abstract, static = eqx.partition(
        model, lambda leaf: isinstance(leaf, jax.ShapeDtypeStruct)
    )

    def roles(arrays, t, x, value):
        found = eqx.combine(arrays, static)
        params = found.params
        out = {"system": found.system._traced_roles(t, x, params)}
        if found.section is not None:
            out["section"] = found.section._traced_roles(x, params)
        out["parameters"] = tuple(p.set(params, value) for p in found.parameters)
        if found.orbit is not None:
            out["orbit functions"] = tuple(
                f(found.orbit, params) for f in found.orbit_functions
            )
        return out

    def ones(tree):
        return jtu.tree_map(
            lambda v: jnp.ones_like(v) if eqx.is_inexact_array(v) else None, tree
        )

    def forward(*primals):
        return eqx.filter_jvp(roles, primals, ones(primals))

    def reverse(*primals):
        out, pull = eqx.filter_vjp(roles, *primals)
        return pull(ones(out))

    dtype = jnp.result_type(float)
    inputs = (
        abstract,
        jax.ShapeDtypeStruct((), dtype),
        jax.ShapeDtypeStruct((model.system.n_states,), dtype),
        jax.ShapeDtypeStruct((), dtype),
    )
    digest = hashlib.sha256(repr(model.system._released_roles()).encode())
    for function in (roles, forward, reverse):
        closed = jax.make_jaxpr(function)(*inputs)
        digest.update(str(closed).encode())
        for constant in closed.consts:
            constant = np.asarray(constant)
            digest.update(f"{constant.dtype.str}{constant.shape}".encode())
            digest.update(constant.tobytes())
    return digest.hexdigest()


def key(
    routine: Callable,
    what: str,
    keys,
    arrays,
    names,
    model: Callable[[dict], "StoredModel | None"] = named_model,
) -> str:
    """The key of a program (JSON text): see the module docstring; `names` are
    the routine's parameter names of its arguments, in order, and `model` gives
    the program's [`StoredModel`][] from its arguments by name (rebuilt with
    `jax.ShapeDtypeStruct`s for arrays), where functions of the user's own are.
    Raises `NotStorable` where a static leaf cannot enter it."""
    argument_keys, keyword_names = keys
    arguments, own = [], []
    for name, argument, part in zip(names, argument_keys, arrays):
        arguments.append(
            [
                name,
                _encode_tree(argument.treedef, own),
                [_encode(leaf, own) for leaf in argument.static],
                [None if leaf is None else _aval(leaf) for leaf in part],
            ]
        )
    found = None
    if own:
        values = {
            name: merge_leaves(
                argument.treedef, argument.static, [abstract(leaf) for leaf in part]
            )
            for name, argument, part in zip(names, argument_keys, arrays)
        }
        found = model(values)
    text = json.dumps(
        [
            _environment(),
            [
                bool(jax.config.jax_enable_x64),
                str(jax.config.jax_default_matmul_precision),
                os.environ.get("EQX_ON_ERROR", ""),
            ],
            f"{routine.__module__}:{routine.__qualname__}",
            what,
            list(keyword_names),
            arguments,
            _behaviour(found and found._replace(orbit=None), own) if own else None,
        ],
        sort_keys=True,
    )
    if found is None or not found.orbit_functions:
        return text
    # Functions of an orbit: traced on its structure, from the arguments or,
    # for a program that finds the orbit, as the store kept it beside the
    # program under the key so far (everything that shapes the orbit).
    orbit = found.orbit if found.orbit is not None else _load_orbit(text)
    if orbit is None:
        if found.orbit_in_output is None:
            raise NotStorable("functions of an orbit, with no orbit to trace them on")
        raise OrbitUnknown(text, found.orbit_in_output)
    return json.dumps([text, _behaviour(found._replace(orbit=orbit), own)])


class OrbitUnknown(Exception):
    """A program's key needs the structure of the orbit that the program finds,
    which no earlier run kept: once the program is exported, `keep_orbit`
    keeps it (from the program's output), and the key can be completed."""

    def __init__(self, partial_key: str, locate: Callable):
        super().__init__("the structure of the program's orbit is not kept yet")
        self.partial_key, self.locate = partial_key, locate

    def keep_orbit(self, exported, tree, static) -> None:
        """Keep the orbit's structure, located in the exported program's output
        (`tree` and `static` as `save` takes them)."""
        outputs = iter(exported.out_avals)
        output = merge_leaves(
            tree,
            static,
            [None if s is not None else _abstract_of(next(outputs)) for s in static],
        )
        self.keep(self.locate(output))

    def keep(self, orbit) -> None:
        """Keep `orbit`'s structure (a tree with `jax.ShapeDtypeStruct` leaves
        for its arrays) under the partial key."""
        leaves, treedef = jtu.tree_flatten(orbit)
        header = {
            "tree": _encode_tree(treedef),
            "static": [
                None if isinstance(leaf, jax.ShapeDtypeStruct) else _encode(leaf)
                for leaf in leaves
            ],
            "avals": [
                [list(leaf.shape), np.dtype(leaf.dtype).str, bool(leaf.weak_type)]
                if isinstance(leaf, jax.ShapeDtypeStruct)
                else None
                for leaf in leaves
            ],
        }
        _write_file(_ORBIT_MAGIC, self.partial_key, header)


def _load_orbit(partial_key: str):
    """The orbit's structure kept under the key (see `OrbitUnknown`), with
    `jax.ShapeDtypeStruct` leaves, or `None` (none kept, or a file that is not
    used: logged)."""
    found = _read_file(_ORBIT_MAGIC, partial_key)
    if found is None:
        return None
    path, blob = found
    try:
        header, _ = _header(blob, _ORBIT_MAGIC, partial_key)
        treedef = _decode_tree(header["tree"])
        static, avals = header["static"], header["avals"]
        if not (type(static) is list and type(avals) is list):
            raise ValueError("not a stored orbit")
        if not len(static) == len(avals) == treedef.num_leaves:
            raise ValueError("its leaves do not match its tree")
        leaves = [
            _decode(value)
            if aval is None
            else jax.ShapeDtypeStruct(
                tuple(int(n) for n in aval[0]), np.dtype(aval[1]), weak_type=aval[2]
            )
            for value, aval in zip(static, avals)
        ]
        return jtu.tree_unflatten(treedef, leaves)
    except Exception as error:  # a damaged or foreign file: kept again
        _LOGGER.info(f"orbit structure {path.name} not used ({error})")
        return None


# ---------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------


# A file is its kind's first line, the length of its header (8 bytes, little
# endian), the header (JSON: the format, the key in full and what the kind
# keeps) and a payload.
_SUFFIXES = {_MAGIC: ".hxp", _ORBIT_MAGIC: ".hxo"}


def _path(key_text: str, magic: bytes = _MAGIC) -> pathlib.Path:
    name = hashlib.sha256(key_text.encode()).hexdigest()
    return directory() / (name + _SUFFIXES[magic])


def _read_file(magic: bytes, key_text: str):
    """`(path, bytes)` of the file of the kind `magic` kept under the key, or
    `None` where there is none."""
    path = _path(key_text, magic)
    try:
        return path, path.read_bytes()
    except OSError:
        return None


def _header(blob: bytes, magic: bytes, key_text: str) -> tuple[dict, bytes]:
    """`(header, payload)` of a file of the kind `magic` under the key; raises
    `ValueError` for anything else."""
    if not blob.startswith(magic):
        raise ValueError(f"not a {magic.decode().strip()}")
    rest = blob[len(magic) :]
    size = int.from_bytes(rest[:8], "little")
    header = json.loads(rest[8 : 8 + size].decode())
    if type(header) is not dict or header.get("format") != FORMAT:
        raise ValueError("another format")
    if header.get("key") != key_text:
        raise ValueError("another program's key")
    return header, rest[8 + size :]


def _write_file(magic: bytes, key_text: str, header: dict, payload=b"") -> None:
    """Write a file of the kind `magic` under the key, atomically (a reader sees
    the old file or the new one); a failure is logged, not raised."""
    path = _path(key_text, magic)
    header = json.dumps({"format": FORMAT, "key": key_text, **header}).encode()
    blob = magic + len(header).to_bytes(8, "little") + header + payload
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as file:
            file.write(blob)
        os.replace(file.name, path)
    except OSError as error:
        _LOGGER.info(f"traced program not kept ({error})")


def load(key_text: str):
    """`(exported, output tree, output's static leaves)` stored under the key, or
    `None` (none stored, or a file that is not used: logged)."""
    found = _read_file(_MAGIC, key_text)
    if found is None:
        return None
    path, blob = found
    try:
        header, payload = _header(blob, _MAGIC, key_text)
        if header.get("sha256") != hashlib.sha256(payload).hexdigest():
            raise ValueError("its program's bytes are not those written")
        tree = _decode_tree(header["tree"])
        static = [_decode(v) for v in header["static"]]
        exported = jax.export.deserialize(bytearray(payload))
        if tree.num_leaves != len(static) or len(exported.out_avals) != sum(
            leaf is None for leaf in static
        ):
            raise ValueError("its outputs do not match its tree")
    except Exception as error:  # a damaged or foreign file: traced again
        _LOGGER.info(f"traced program {path.name} not used ({error}); tracing again")
        return None
    return exported, tree, static


def save(key_text: str, exported, tree, static) -> None:
    """Write the program under the key (atomically: a reader sees the old file or
    the new one). A failure to write is logged, not raised."""
    payload = bytes(exported.serialize())
    header = {
        "sha256": hashlib.sha256(payload).hexdigest(),
        "tree": _encode_tree(tree),
        "static": [_encode(v) for v in static],
    }
    _write_file(_MAGIC, key_text, header, payload)
