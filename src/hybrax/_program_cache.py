"""Keep traced-and-lowered programs between runs of the command line.

JAX's persistent compilation cache stores XLA executables, but every new process
still traces and lowers the Python program first, which for an orbit search with its
monodromy takes several seconds. `cached_call` serialises the lowered program with
`jax.export` next to the compilation cache, keyed by the program's name, the input
shapes and dtypes, the JAX version and a fingerprint of hybrax's own source; a later
run deserialises it (milliseconds) and its compilation is then a cache hit too.
"""

import dataclasses
import functools
import hashlib
import importlib.metadata
import os
import pathlib
import pickle
import threading

import equinox as eqx
import jax


def _encode(tree):
    """Split a PyTree of arrays, tuples, lists, dicts, `None` and equinox Modules into
    its leaves and a picklable spec (classes by reference, field names, static field
    values). JAX's own treedefs of equinox Modules do not survive pickling."""
    leaves = []

    def walk(node):
        if isinstance(node, eqx.Module):
            fields = []
            for field in dataclasses.fields(node):
                value = getattr(node, field.name)
                if field.metadata.get("static", False):
                    fields.append((field.name, "static", value))
                else:
                    fields.append((field.name, "child", walk(value)))
            return ("module", type(node), fields)
        if isinstance(node, tuple | list):
            return (type(node).__name__, [walk(child) for child in node])
        if isinstance(node, dict):
            return ("dict", [(key, walk(node[key])) for key in sorted(node)])
        if node is None:
            return ("none",)
        leaves.append(node)
        return ("leaf",)

    spec = walk(tree)
    return leaves, spec


def _decode(spec, leaves):
    it = iter(leaves)

    def build(node):
        kind = node[0]
        if kind == "module":
            obj = object.__new__(node[1])
            for name, how, value in node[2]:
                object.__setattr__(
                    obj, name, value if how == "static" else build(value)
                )
            return obj
        if kind in ("tuple", "list"):
            children = [build(child) for child in node[1]]
            return tuple(children) if kind == "tuple" else children
        if kind == "dict":
            return {key: build(child) for key, child in node[1]}
        if kind == "none":
            return None
        return next(it)

    return build(spec)


@functools.cache
def _source_fingerprint() -> str:
    """A hash of hybrax's source files: edited code never reuses a stale program."""
    digest = hashlib.sha256()
    root = pathlib.Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _key(name: str, leaves, in_tree) -> str:
    digest = hashlib.sha256()
    parts = [
        name,
        jax.__version__,
        importlib.metadata.version("jaxlib"),
        _source_fingerprint(),
        str(in_tree),
        str(jax.config.jax_enable_x64),
        jax.default_backend(),
    ]
    parts += [f"{leaf.shape}{leaf.dtype}" for leaf in leaves]
    digest.update("|".join(parts).encode())
    return f"{name}-{digest.hexdigest()[:24]}"


def program(name: str, fn, *args, cache_dir: str | None):
    """The compiled program of `fn` (a pure JAX function of array PyTrees) for the
    shapes and dtypes of `args`, compiled now: its lowered form is read from
    `cache_dir` if kept there by an earlier run, else traced, lowered and kept.
    Returns a callable taking arguments of those shapes. Without a cache
    directory, or for a program that cannot be exported, a plain compilation.

    Compiling ahead lets a caller compile two programs at once (XLA releases the
    interpreter while it compiles).
    """
    leaves, in_tree = jax.tree_util.tree_flatten(args)

    def plain():
        compiled = jax.jit(fn).lower(*args).compile()
        return lambda *a: compiled(*a)

    if cache_dir is None:
        return plain()
    folder = pathlib.Path(cache_dir) / "programs"
    path = folder / (_key(name, leaves, in_tree) + ".bin")
    exported, out_spec = None, None
    if path.exists():
        try:
            blob = pickle.loads(path.read_bytes())
            exported = jax.export.deserialize(blob["program"])
            out_spec = blob["out_spec"]
        except Exception:  # a stale or foreign file: rebuild it below
            path.unlink(missing_ok=True)
            exported = None
    if exported is None:
        out_spec_box = []

        def flat_fn(*flat):
            out = fn(*jax.tree_util.tree_unflatten(in_tree, flat))
            out_leaves, spec = _encode(out)
            out_spec_box.append(spec)
            return out_leaves

        try:
            exported = jax.export.export(jax.jit(flat_fn))(
                *[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves]
            )
            out_spec = out_spec_box[-1]
            blob = {"program": exported.serialize(), "out_spec": out_spec}
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
            tmp.write_bytes(pickle.dumps(blob))
            tmp.replace(path)
        except Exception:  # e.g. a program that cannot be exported: just run it
            return plain()
    compiled = jax.jit(exported.call).lower(*leaves).compile()

    def run(*a):
        return _decode(out_spec, compiled(*jax.tree_util.tree_leaves(a)))

    return run


def cached_call(name: str, fn, *args, cache_dir: str | None):
    """Evaluate `fn(*args)` through [`program`][]: a lowered program kept in
    `cache_dir` between runs."""
    return program(name, fn, *args, cache_dir=cache_dir)(*args)


def default_cache_dir() -> str | None:
    """`$HYBRAX_CACHE_DIR` if set (empty disables the cache), else
    `$XDG_CACHE_HOME/hybrax/jax` or `~/.cache/hybrax/jax`."""
    if "HYBRAX_CACHE_DIR" in os.environ:
        return os.environ["HYBRAX_CACHE_DIR"] or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(base), "hybrax", "jax")


def enable_compilation_cache(path: str | os.PathLike | None = None) -> str | None:
    """Turn on JAX's persistent compilation cache, so that the next process that runs
    the same programs (an orbit search, a sweep) skips their XLA compilation.

    Every compilation is cached (no minimum compile time or entry size). A cache
    directory already configured (by `JAX_COMPILATION_CACHE_DIR`, or by an earlier
    call) is kept as it is: JAX reads the setting at its first compilation. Call it
    once, before the first computation; the command line does.

    **Arguments:**

    - `path`: the cache directory; default `$HYBRAX_CACHE_DIR` (empty: no cache),
      else `$XDG_CACHE_HOME/hybrax/jax` or `~/.cache/hybrax/jax`.

    **Returns:** the cache directory in use, or `None` when disabled.
    """
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    path = default_cache_dir() if path is None else os.fspath(path)
    if path is None:
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return path
