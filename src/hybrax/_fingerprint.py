r"""A fingerprint of a computation's inputs that is the same in every process:
what a resumable result (a partial sweep or basin) records of the inputs it was
computed for, so that a resume with other inputs is refused (`hybrax._resume`).

A computation is determined by the code it runs (hybrax's own, the libraries',
and the model's functions) and by the structure, static values, shapes and dtypes
of its inputs. [`fingerprint`][] hashes exactly those, without tracing anything:
arrays by shape and dtype (their values are run-time inputs), Python values by
value, equinox Modules and dataclasses field by field, and functions by what they
compute:

- a function of an installed library (jax, diffrax, hybrax, ...) by its module and
  qualified name;
- any other function (a model defined in a script or a user's package) by its
  bytecode, its constants, the globals it reads and its closure, recursively;
- a class by its name and, for a user's class, its methods.

Two processes that build the same model from the same source get the same
fingerprint; editing a model's function, a constant it reads, or a captured array's
value changes it. An object whose identity cannot be made deterministic (an
arbitrary instance of an unknown type) makes the whole input unfingerprintable:
the record then says "unknown", which a resume does not compare.
"""

import dataclasses
import enum
import functools
import hashlib
import sys
import types

import equinox as eqx
import jax
import numpy as np


# Top-level packages whose functions are fingerprinted by name rather than by
# bytecode.
LIBRARIES = frozenset(
    {
        "builtins",
        "abc",
        "collections",
        "dataclasses",
        "enum",
        "functools",
        "itertools",
        "math",
        "operator",
        "typing",
        "numpy",
        "jax",
        "jaxlib",
        "jaxtyping",
        "equinox",
        "diffrax",
        "optimistix",
        "lineax",
        "hybrax",
    }
)


class Unfingerprintable(Exception):
    """An input holds an object whose fingerprint would differ between processes."""


def fingerprint(obj) -> str:
    """A hex digest of `obj` (see the module docstring); `Unfingerprintable` when
    some part of it cannot be fingerprinted deterministically."""
    return hashlib.sha256(repr(_Walker().walk(obj)).encode()).hexdigest()


def value_fingerprint(obj) -> str:
    """A hex digest of `obj` like [`fingerprint`][] that also counts the values of
    its arrays (what a result was computed from, not only the program that
    computed it); `Unfingerprintable` as there."""
    walker = _Walker()
    walker.constants = 1
    return hashlib.sha256(repr(walker.walk(obj)).encode()).hexdigest()


def _is_library(module_name: str | None) -> bool:
    return (module_name or "").split(".")[0] in LIBRARIES


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


_SKIPPED_CLASS_ATTRIBUTES = frozenset(
    {
        "__dict__",
        "__weakref__",
        "__doc__",
        "__module__",
        "__qualname__",
        "__annotations__",
        "__abstractmethods__",
        "_abc_impl",
        "__dataclass_fields__",
        "__dataclass_params__",
        "__match_args__",
        "__parameters__",
        "__orig_bases__",
        "__slots__",
    }
)


class _Walker:
    def __init__(self):
        self.active: set[int] = set()
        # Inside a function's closure, defaults or globals, or a class's
        # attributes, an array is a constant of the program: its value counts.
        self.constants = 0

    def walk(self, obj):
        if obj is None or isinstance(obj, bool | int | float | complex | str | bytes):
            return (type(obj).__name__, obj)
        if isinstance(obj, jax.core.Tracer):
            raise Unfingerprintable("a traced value")
        if isinstance(obj, jax.Array | np.ndarray | np.generic):
            aval = ("array", tuple(np.shape(obj)), str(np.result_type(obj)))
            if not self.constants:
                return aval
            data = np.ascontiguousarray(np.asarray(obj))
            return (*aval, hashlib.sha256(data.tobytes()).hexdigest())
        if isinstance(obj, jax.ShapeDtypeStruct):
            return ("array", tuple(obj.shape), str(obj.dtype))
        if isinstance(obj, np.dtype):
            return ("dtype", str(obj))
        if isinstance(obj, jax.tree_util.PyTreeDef):
            data = obj.node_data()
            node = None if data is None else (self.walk(data[0]), self.walk(data[1]))
            return ("treedef", node, tuple(self.walk(c) for c in obj.children()))
        if isinstance(obj, enum.Enum):
            return ("enum", self._class(type(obj)), obj.name)
        key = id(obj)
        if key in self.active:
            # A cycle (a recursive function, a class whose method names it).
            return ("cycle", type(obj).__qualname__, getattr(obj, "__qualname__", ""))
        self.active.add(key)
        try:
            return self._compound(obj)
        finally:
            self.active.discard(key)

    def _compound(self, obj):
        if isinstance(obj, tuple | list):
            return (type(obj).__name__, tuple(self.walk(x) for x in obj))
        if isinstance(obj, dict):
            items = sorted(obj.items(), key=lambda kv: repr(kv[0]))
            return ("dict", tuple((repr(k), self.walk(v)) for k, v in items))
        if isinstance(obj, frozenset | set):
            return (type(obj).__name__, tuple(sorted(repr(self.walk(x)) for x in obj)))
        if isinstance(obj, types.ModuleType):
            return ("module", obj.__name__)
        if isinstance(obj, type):
            return self._class(obj)
        if isinstance(obj, functools.partial):
            return (
                "partial",
                self.walk(obj.func),
                self.walk(obj.args),
                self.walk(obj.keywords),
            )
        if isinstance(obj, types.MethodType):
            return ("method", self.walk(obj.__self__), self.walk(obj.__func__))
        if isinstance(obj, types.FunctionType):
            return self._function(obj)
        if isinstance(obj, types.BuiltinFunctionType | types.BuiltinMethodType):
            return ("builtin", getattr(obj, "__module__", None), obj.__qualname__)
        if isinstance(obj, types.CodeType):
            return self._code(obj)
        if isinstance(obj, eqx.Module) or dataclasses.is_dataclass(obj):
            fields = tuple(
                (field.name, self.walk(getattr(obj, field.name, None)))
                for field in dataclasses.fields(obj)
            )
            return ("object", self._class(type(obj)), fields)
        if isinstance(obj, jax.custom_jvp | jax.custom_vjp):
            return (
                type(obj).__name__,
                self.walk(obj.fun),
                self.walk(getattr(obj, "jvp", None)),
                self.walk(getattr(obj, "fwd", None)),
                self.walk(getattr(obj, "bwd", None)),
            )
        if _is_library(type(obj).__module__):
            # A library's module-level instance (lineax's operator tags, equinox's
            # sentinels): by reference.
            module = sys.modules.get(type(obj).__module__)
            for name, value in vars(module or types).items():
                if value is obj:
                    return ("instance", type(obj).__module__, name)
        if callable(obj) and _is_library(type(obj).__module__):
            # A library's callable object (a jitted function, a ufunc): by name.
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is not None:
                return ("wrapped", self._class(type(obj)), self.walk(wrapped))
            name = getattr(obj, "__qualname__", getattr(obj, "__name__", None))
            if name is not None:
                return ("callable", type(obj).__module__, name)
        raise Unfingerprintable(f"an object of type {type(obj).__qualname__}")

    def _function(self, fn: types.FunctionType):
        self.constants += 1
        try:
            return self._function_parts(fn)
        finally:
            self.constants -= 1

    def _function_parts(self, fn: types.FunctionType):
        parts: list = []
        if _is_library(fn.__module__):
            parts.append(("library", fn.__module__, fn.__qualname__))
        else:
            parts.append(("code", self._code(fn.__code__)))
            globals_ = fn.__globals__
            for name in sorted(_global_names(fn.__code__)):
                if name in globals_:
                    parts.append(("global", name, self.walk(globals_[name])))
        parts.append(("defaults", self.walk(fn.__defaults__)))
        parts.append(("kwdefaults", self.walk(fn.__kwdefaults__)))
        if fn.__closure__:
            cells = []
            for cell in fn.__closure__:
                try:
                    contents = cell.cell_contents
                except ValueError:  # an empty cell
                    cells.append(("empty",))
                else:
                    cells.append(self.walk(contents))
            parts.append(("closure", tuple(cells)))
        return ("function", tuple(parts))

    def _code(self, code: types.CodeType):
        consts = tuple(
            self._code(c) if isinstance(c, types.CodeType) else self.walk(c)
            for c in code.co_consts
        )
        return (
            "code",
            hashlib.sha256(code.co_code).hexdigest(),
            consts,
            code.co_names,
            code.co_varnames,
            code.co_freevars,
            code.co_argcount,
            code.co_kwonlyargcount,
            code.co_flags,
        )

    def _class(self, cls: type):
        if _is_library(cls.__module__):
            return ("class", cls.__module__, cls.__qualname__)
        self.constants += 1
        try:
            return self._class_parts(cls)
        finally:
            self.constants -= 1

    def _class_parts(self, cls: type):
        members = []
        for name, value in sorted(vars(cls).items()):
            if name in _SKIPPED_CLASS_ATTRIBUTES:
                continue
            if isinstance(value, staticmethod | classmethod):
                value = value.__func__
            if isinstance(value, property):
                value = (value.fget, value.fset)
            members.append((name, self.walk(value)))
        bases = tuple(self._class(base) for base in cls.__bases__)
        return ("class", cls.__module__, cls.__qualname__, bases, tuple(members))
