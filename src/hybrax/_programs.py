r"""The one mechanism by which hybrax compiles its programs.

Every routine that runs a compiled computation (simulation, orbit search, sweep
chunk, tuning step, continuation corrector) calls [`call`][] (or [`prepare`][], to
compile ahead) instead of `jax.jit`. Its arguments are split as `equinox.filter_jit`
splits them: arrays are run-time inputs, everything else (the model's functions,
flags, structure) is static. Then:

1. **In memory**, one compiled program per function, static part and input
   shapes/dtypes: a second call with other array values (parameters, tolerances,
   `t_max`, iteration counts, tuning targets) compiles nothing. A model built
   again from the same code (new function objects) finds the program by its
   fingerprint (below).
2. **Between processes**, once [`hybrax.enable_compilation_cache`][] has been
   called: the traced and lowered program is serialised with `jax.export` under a
   key from [`hybrax._fingerprint.fingerprint`][] of the function and its
   arguments (bytecode of a model's functions, values of static options, shapes of
   arrays) with the versions of JAX, the libraries and hybrax's own source. A later
   process loads it (milliseconds; no tracing) and JAX's persistent compilation
   cache gives the executable (no XLA compilation). The programs carry no host
   callbacks, so both caches accept them whatever `EQX_ON_ERROR` is.
3. **Announced**: each compilation is logged (logger `"hybrax"`, level INFO) as it
   starts and when done, with its seconds (trace, lowering, XLA); inside
   [`announcing`][] (the command line, routines called with `progress=True`) the
   same lines go to stderr.

Called with traced arguments (inside a user's `jax.jit`, `jax.grad`, `jax.vmap`),
[`call`][] evaluates the function inline: the user's transformation compiles it.
The orbit's solve and its derivative rules are kept between processes there too
([`inline`][]): a user's `jax.jit(jax.grad(...))` of an orbit quantity embeds
them as exported modules, and JAX's persistent cache keeps the user's program.
"""

import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import importlib
import importlib.metadata
import io
import logging
import os
import pathlib
import pickle
import sys
import threading
import time

import equinox as eqx
import jax
import jax.extend.core as jex_core
import jax.tree_util as jtu
from jax.interpreters import batching, mlir, partial_eval as pe
from jax.interpreters.partial_eval import DynamicJaxprTracer

from ._callback_free import callback_free, callback_free_jaxpr
from ._fingerprint import LIBRARIES, Unfingerprintable, fingerprint


_LOGGER = logging.getLogger("hybrax")


# ---------------------------------------------------------------------------
# Announcements
# ---------------------------------------------------------------------------

_REPORT = None  # where compilation lines go besides the log (None: nowhere)
_LABEL = None  # the name announcements give every program's model (None: its own)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def announcing(report=_to_stderr, label: str | None = None):
    """Within the block, each compilation's lines also go to `report` (one string
    per call; default: a line on stderr), naming the model `label` (e.g. the
    command line's model name) where given. Process-wide: compilations in other
    threads (the command line compiles two programs at once) are announced too."""
    global _REPORT, _LABEL
    previous = _REPORT, _LABEL
    _REPORT, _LABEL = report, label
    try:
        yield
    finally:
        _REPORT, _LABEL = previous


@contextlib.contextmanager
def announcing_progress(enabled: bool, report=_to_stderr):
    """[`announcing`][] for a library call with `progress=True` (`enabled`):
    its compilations are reported to `report` (e.g. the progress bar's own
    writer) unless the caller already announces them (the command line)."""
    if not enabled or _REPORT is not None:
        yield
        return
    with announcing(report):
        yield


def announce(line: str) -> None:
    """Log `line` (logger `"hybrax"`, INFO) and, inside [`announcing`][], report
    it."""
    _LOGGER.info(line)
    report = _REPORT
    if report is not None:
        report(line)


@dataclasses.dataclass(frozen=True)
class CompileRecord:
    """What one compilation cost, in seconds: `trace` (Python tracing), `lower`
    (to StableHLO), `xla` (XLA's compilation, or loading its executable from
    JAX's persistent cache), `load` (reading a kept program), and whether the
    traced program came from the cache between processes (`cached`)."""

    what: str
    label: str
    trace: float
    lower: float
    xla: float
    load: float
    cached: bool

    @property
    def total(self) -> float:
        return self.trace + self.lower + self.xla + self.load


#: Every compilation of this process, in order (read by `experiments/`).
COMPILATIONS: list[CompileRecord] = []


# ---------------------------------------------------------------------------
# The persistent cache
# ---------------------------------------------------------------------------

_CACHE_DIR: str | None = None


def default_cache_dir() -> str | None:
    """`$HYBRAX_CACHE_DIR` if set (empty disables the cache), else
    `$XDG_CACHE_HOME/hybrax/jax` or `~/.cache/hybrax/jax`."""
    if "HYBRAX_CACHE_DIR" in os.environ:
        return os.environ["HYBRAX_CACHE_DIR"] or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(base), "hybrax", "jax")


def enable_compilation_cache(path: str | os.PathLike | None = None) -> str | None:
    r"""Keep every program hybrax compiles between processes, so that a second run
    of the same script or command neither traces nor compiles them again.

    Two caches work together: hybrax keeps each traced and lowered program
    (serialised with `jax.export`, keyed by a fingerprint of the model's
    functions and the options' static values, see `hybrax._programs`), and JAX's
    persistent compilation cache keeps the XLA executables (every compilation,
    no minimum time or size). A program of a model whose functions cannot be
    fingerprinted (see the log) is compiled as usual. A JAX cache directory
    already configured (by `JAX_COMPILATION_CACHE_DIR` or an earlier call) is kept:
    JAX reads the setting at its first compilation, so call this once, before the
    first computation; the command line does.

    **Arguments:**

    - `path`: the cache directory; default `$HYBRAX_CACHE_DIR` (empty: no cache),
      else `$XDG_CACHE_HOME/hybrax/jax` or `~/.cache/hybrax/jax`.

    **Returns:** the cache directory in use, or `None` when disabled.
    """
    global _CACHE_DIR
    path = default_cache_dir() if path is None else os.fspath(path)
    if path is None:
        return None
    current = jax.config.jax_compilation_cache_dir
    if current:
        path = current
    else:
        jax.config.update("jax_compilation_cache_dir", path)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    _CACHE_DIR = path
    return path


@functools.cache
def _source_fingerprint() -> str:
    """A hash of hybrax's source files: edited code never reuses a stale program."""
    digest = hashlib.sha256()
    root = pathlib.Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def _versions() -> tuple[str, ...]:
    names = ("jax", "jaxlib", "equinox", "diffrax", "optimistix", "lineax", "numpy")
    versions = []
    for name in names:
        try:
            versions.append(f"{name}={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name}=?")
    return tuple(versions)


def _environment() -> tuple[str, ...]:
    """What else changes a traced program: the backend, JAX's numeric settings,
    and equinox's runtime-check mode (read once, when equinox is imported)."""
    from equinox import _config as eqx_config  # read only

    return (
        jax.default_backend(),
        f"x64={jax.config.jax_enable_x64}",
        f"rank={jax.config.jax_numpy_rank_promotion}",
        f"dtype={jax.config.jax_numpy_dtype_promotion}",
        f"matmul={jax.config.jax_default_matmul_precision}",
        f"eqx_on_error={eqx_config.EQX_ON_ERROR}",
    )


def _persistent_key(what: str, fn, args) -> str | None:
    """The key of a program between processes, or `None` (logged) where its
    inputs cannot be fingerprinted."""
    try:
        inputs = fingerprint((fn, args))
    except Unfingerprintable as error:
        if _CACHE_DIR is not None:
            _LOGGER.info(
                "%s: not kept between processes (its inputs hold %s)", what, error
            )
        return None
    parts = (what, _source_fingerprint(), *_versions(), *_environment(), inputs)
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]
    slug = "".join(c if c.isalnum() else "-" for c in what)[:40]
    return f"{slug}-{digest}"


# ---------------------------------------------------------------------------
# Outputs as arrays and a picklable structure
# ---------------------------------------------------------------------------


@functools.cache
def _module_objects(module_name: str) -> dict[int, str]:
    module = sys.modules.get(module_name)
    if module is None:
        return {}
    return {id(value): name for name, value in vars(module).items()}


class _Pickler(pickle.Pickler):
    """Pickles a library's module-level instances (lineax's operator tags,
    equinox's sentinels: compared by identity) by reference, so that they
    unpickle as the same objects."""

    def persistent_id(self, obj):
        if isinstance(obj, type) or callable(obj):
            return None
        module_name = type(obj).__module__
        if module_name.split(".")[0] not in LIBRARIES:
            return None
        name = _module_objects(module_name).get(id(obj))
        if name is None or getattr(sys.modules[module_name], name) is not obj:
            return None
        return (module_name, name)


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid):
        module_name, name = pid
        return getattr(importlib.import_module(module_name), name)


def _dumps(obj) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer).dump(obj)
    return buffer.getvalue()


def _loads(data: bytes):
    return _Unpickler(io.BytesIO(data)).load()


def _encode(tree):
    """Split a PyTree of arrays, tuples, lists, dicts, `None`, equinox Modules and
    other Python values into its arrays and a picklable spec (classes by
    reference, field names, static values): JAX's own treedefs of equinox Modules
    do not survive pickling."""
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
        if eqx.is_array(node):
            leaves.append(node)
            return ("leaf",)
        return ("value", node)

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
        if kind == "value":
            return node[1]
        return next(it)

    return build(spec)


# ---------------------------------------------------------------------------
# Programs
# ---------------------------------------------------------------------------


class _Program:
    """A compiled program of flat array inputs, with the structure of its
    outputs. `compiled` may be a future of it (compiled in the background): a
    call waits for it."""

    def __init__(self, compiled, out_spec):
        self.compiled = compiled
        self.out_spec = out_spec

    def __call__(self, dynamic):
        compiled = self.compiled
        if isinstance(compiled, concurrent.futures.Future):
            compiled = compiled.result()
        return _decode(self.out_spec, compiled(*dynamic))


#: Where programs prepared with `background=True` are compiled by XLA (which
#: releases the interpreter: the caller traces the next program meanwhile).
COMPILER_THREADS = "hybrax-xla"
_COMPILER = concurrent.futures.ThreadPoolExecutor(
    max(1, min(4, os.cpu_count() or 1)), thread_name_prefix=COMPILER_THREADS
)
_PENDING: set = set()


def _in_background(compile_it) -> concurrent.futures.Future:
    future = _COMPILER.submit(compile_it)
    with _LOCK:
        _PENDING.add(future)

    def done(finished):
        with _LOCK:
            _PENDING.discard(finished)

    future.add_done_callback(done)
    return future


def compiling_in_background() -> bool:
    """Whether XLA is still compiling a program prepared with `background=True`
    (its threads, named `COMPILER_THREADS`, otherwise only wait for work)."""
    with _LOCK:
        return any(not future.done() for future in _PENDING)


_MEMORY: dict = {}
_LOCK = threading.Lock()


def _split(args):
    leaves, treedef = jtu.tree_flatten(args)
    is_array = tuple(eqx.is_array(leaf) for leaf in leaves)
    dynamic = [leaf for leaf, a in zip(leaves, is_array) if a]
    static = tuple(None if a else leaf for leaf, a in zip(leaves, is_array))
    return treedef, is_array, static, dynamic


def _aval(leaf):
    aval = jax.typeof(leaf)
    return (aval.shape, aval.dtype, getattr(aval, "weak_type", False))


def _flat_function(fn, treedef, is_array, static, out_box):
    def flat(*dynamic):
        it = iter(dynamic)
        leaves = [next(it) if a else s for a, s in zip(is_array, static)]
        out = fn(*jtu.tree_unflatten(treedef, leaves))
        out_leaves, spec = _encode(out)
        out_box.append(spec)
        return out_leaves

    return flat


def _structs(dynamic):
    return [
        jax.ShapeDtypeStruct(*_aval(leaf)[:2], weak_type=_aval(leaf)[2])
        for leaf in dynamic
    ]


def _compile(
    what, label, fn, args, treedef, is_array, static, dynamic, original, background
) -> _Program:
    if _LABEL is not None:
        label = f" for {_LABEL}"
    out_box: list = []
    flat = _flat_function(fn, treedef, is_array, static, out_box)
    # The fingerprint also finds a program this process has built already for an
    # equal model whose objects are new (a second `hx.tune` call builds its
    # problem anew): without it, each such call would load or compile again.
    key = _persistent_key(what, original, args)
    if key is not None:
        with _LOCK:
            built = _BUILT.get(key)
        if built is not None:
            return built
    program = _build(what, label, flat, dynamic, out_box, key, background)
    if key is not None:
        with _LOCK:
            _BUILT[key] = program
    return program


#: The programs this process has built or loaded, by fingerprint key.
_BUILT: dict[str, "_Program"] = {}


def _build(what, label, flat, dynamic, out_box, key, background) -> "_Program":
    """Load the program kept under `key` (in the cache directory), or trace,
    keep and compile it; with `background`, XLA compiles it in another thread
    (the returned program waits for it when called)."""
    path = None
    if key is not None and _CACHE_DIR is not None:
        path = pathlib.Path(_CACHE_DIR) / "programs" / key
    if path is not None and path.exists():
        start = time.perf_counter()
        try:
            blob = _loads(path.read_bytes())
            exported = jax.export.deserialize(blob["program"])
            out_spec = blob["out_spec"]
        except Exception:  # a stale or foreign file: rebuild it below
            path.unlink(missing_ok=True)
        else:
            loaded = time.perf_counter()
            compiled = jax.jit(exported.call).lower(*dynamic).compile()
            record = CompileRecord(
                what,
                label,
                0.0,
                0.0,
                time.perf_counter() - loaded,
                loaded - start,
                True,
            )
            _finish(record, kept=True)
            return _Program(compiled, out_spec)
    announce(
        f"compiling {what}{label}"
        + (" (first run; cached afterwards) ..." if path is not None else " ...")
    )
    start = time.perf_counter()
    exported = None
    structs = _structs(dynamic)
    with _measuring() as durations, _building():
        program = callback_free(flat, structs)
        if program is None:
            _LOGGER.info("%s: not kept between processes (a host callback)", what)
            program, path = flat, None
        if path is not None:
            exported = _keep(path, program, structs, out_box, what)
        if exported is None:
            lowered = jax.jit(program).trace(*structs).lower()
        else:
            # The kept program's own compilation, which later processes find in
            # JAX's cache (a direct lowering would have another key).
            lowered = jax.jit(exported.call).lower(*dynamic)
    before_xla = time.perf_counter() - start
    trace, lower = durations["trace"], durations["lower"]
    kept = path is not None and exported is not None

    def compile_it():
        xla_start = time.perf_counter()
        compiled = lowered.compile()
        xla = time.perf_counter() - xla_start + max(before_xla - trace - lower, 0.0)
        _finish(CompileRecord(what, label, trace, lower, xla, 0.0, False), kept=kept)
        return compiled

    if background:
        return _Program(_in_background(compile_it), out_box[-1])
    return _Program(compile_it(), out_box[-1])


_DURATION_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
}
_MEASURES: dict[int, dict] = {}


def _on_duration(event: str, duration: float, **kwargs) -> None:
    durations = _MEASURES.get(threading.get_ident())
    if durations is not None and event in _DURATION_EVENTS:
        durations[_DURATION_EVENTS[event]] += duration


@functools.cache
def _listen() -> None:
    jax.monitoring.register_event_duration_secs_listener(_on_duration)


@contextlib.contextmanager
def _measuring():
    """JAX's own tracing and lowering seconds of this thread's compilation."""
    _listen()
    durations = {"trace": 0.0, "lower": 0.0}
    _MEASURES[threading.get_ident()] = durations
    try:
        yield durations
    finally:
        _MEASURES.pop(threading.get_ident(), None)


def _write(path: pathlib.Path, data: bytes) -> None:
    """`data` into `path` whole or not at all (another process may read it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _keep(path: pathlib.Path, program, structs, out_box, what: str):
    """Lower and serialise the program for later processes; returns it as
    exported, or `None` where it cannot be kept (that only costs later processes
    a compilation: logged, never raised)."""
    try:
        exported = jax.export.export(jax.jit(program))(*structs)
        _write(path, _dumps({"program": exported.serialize(), "out_spec": out_box[-1]}))
    except Exception as error:  # a program or output JAX cannot serialise
        _LOGGER.info("%s: not kept between processes (%s)", what, error)
        return None
    return exported


def _finish(record: CompileRecord, kept: bool) -> None:
    COMPILATIONS.append(record)
    if record.cached:
        announce(
            f"loaded {record.what}{record.label} from the cache ({record.total:.1f} s)"
        )
    else:
        announce(
            f"compiled {record.what}{record.label} in {record.total:.1f} s "
            f"(trace {record.trace:.1f} s, lowering {record.lower:.1f} s, "
            f"XLA {record.xla:.1f} s)" + ("; cached for later runs" if kept else "")
        )


def system_label(system) -> str:
    """How announcements name a hybrid system: by its modes."""
    names = [getattr(mode, "name", "?") for mode in getattr(system, "modes", ())]
    return f" for the system of modes {', '.join(names)}" if names else ""


def _memory_key(fn, treedef, static, dynamic):
    try:
        key = (fn, treedef, static, tuple(_aval(leaf) for leaf in dynamic))
        hash(key)
        return key
    except TypeError:  # an unhashable static value: key by fingerprint
        try:
            return ("fingerprint", fingerprint((fn, treedef, static)))
        except Unfingerprintable:
            return None


@functools.cache
def _jitted(fn):
    return eqx.filter_jit(fn)


class _Applied:
    """`fn(*args, **kwargs)` of one `(args, kwargs)` argument, equal (and hashed)
    by `fn`: one program per function, whatever call it came from."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, packed):
        args, kwargs = packed
        return self.fn(*args, **kwargs)

    def __eq__(self, other):
        return isinstance(other, _Applied) and other.fn is self.fn

    def __hash__(self):
        return hash((_Applied, self.fn))


def _lookup(what, label, fn, packed, background=False):
    treedef, is_array, static, dynamic = _split((packed,))
    applied = _Applied(fn)
    key = _memory_key(applied, treedef, static, dynamic)

    def build():
        return _compile(
            what,
            label,
            applied,
            (packed,),
            treedef,
            is_array,
            static,
            dynamic,
            fn,
            background,
        )

    if key is None:
        return build(), dynamic
    with _LOCK:
        entry = _MEMORY.get(key)
        if entry is None:
            # The first thread compiles; others asking meanwhile wait for it.
            entry = _MEMORY[key] = concurrent.futures.Future()
            owner = True
        else:
            owner = False
    if owner:
        try:
            entry.set_result(build())
        except BaseException as error:
            with _LOCK:
                del _MEMORY[key]
            entry.set_exception(error)
            raise
    return entry.result(), dynamic


def _traced(packed) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jtu.tree_leaves(packed))


def prepare(
    what: str, fn, args=(), kwargs=None, *, label: str = "", background: bool = False
):
    """The compiled program of `fn(*args, **kwargs)` for these arguments' static
    part and shapes, compiled now if not compiled before (see the module
    docstring); returns a callable taking `(*args, **kwargs)` of the same
    structure. `what` names the program in announcements ("the orbit search"),
    `label` the model (" for compass-gait"). Called with traced arguments
    (inside a user's transformation) it returns `fn` under `equinox.filter_jit`:
    the caller's transformation compiles it, as one program under an eager
    `jax.vmap` or `jax.grad`. With `background`, the caller traces the program
    and XLA compiles it in another thread: the caller goes on (to trace the next
    program) and the first call waits for it."""
    packed = (tuple(args), dict(kwargs or {}))
    if _traced(packed):
        return _jitted(fn)
    program, _ = _lookup(what, label, fn, packed, background)

    def run(*call_args, **call_kwargs):
        return program(_split(((call_args, call_kwargs),))[3])

    return run


def call(what: str, fn, args=(), kwargs=None, *, label: str = ""):
    """`fn(*args, **kwargs)` through its compiled program (see [`prepare`][])."""
    packed = (tuple(args), dict(kwargs or {}))
    if _traced(packed):
        return _jitted(fn)(*packed[0], **packed[1])
    program, dynamic = _lookup(what, label, fn, packed)
    return program(dynamic)


def compiled(what: str, label=None):
    """A decorator: the function's calls go through [`call`][] as the program
    `what`; `label(*args, **kwargs)` names the model in announcements."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            name = "" if label is None else label(*args, **kwargs)
            return call(what, fn, args, kwargs, label=name)

        return wrapper

    return decorate


# ---------------------------------------------------------------------------
# Inside a caller's transformation
# ---------------------------------------------------------------------------

_BUILDING = threading.local()


@contextlib.contextmanager
def _building():
    """While hybrax traces one of its own programs (which is kept as a whole, see
    `_build`), `inline` evaluates its function in that trace."""
    before = getattr(_BUILDING, "active", False)
    _BUILDING.active = True
    try:
        yield
    finally:
        _BUILDING.active = before


def _batched(leaves) -> bool:
    """Whether a leaf is traced by another transformation than a plain trace of
    a `jax.jit` (by `jax.vmap`, above all)."""
    return any(
        isinstance(leaf, jax.core.Tracer) and not isinstance(leaf, DynamicJaxprTracer)
        for leaf in leaves
    )


class _Kept:
    """A function kept between processes for callers' programs: the structure
    and shapes of its outputs (known without tracing it, once kept), and its
    programs by the outputs the caller uses (`variant`), each a `jax.export`
    module of the function's callback-free jaxpr with the unused outputs' code
    removed, as JAX removes it from a traced function. Equal by identity (a
    primitive's parameter)."""

    def __init__(self, what, label, key, flat, structs, out_spec, out_structs):
        self.what, self.label, self.key = what, label, key
        self.flat, self.structs = flat, structs
        self.out_spec, self.out_structs = out_spec, out_structs
        self.jaxpr = None  # the callback-free closed jaxpr, once traced here
        self.trace_seconds = 0.0
        self.variants: dict = {}

    def traced(self):
        """The callback-free closed jaxpr (`None` where a callback stays)."""
        if self.jaxpr is None:
            start = time.perf_counter()
            with _building():
                self.jaxpr = callback_free_jaxpr(self.flat, self.structs)
            # (Reported with the first program exported from it.)
            self.trace_seconds += time.perf_counter() - start
        return self.jaxpr

    def variant(self, used: tuple[int, ...]):
        """The exported program of the outputs `used` (their indices)."""
        with _LOCK:
            exported = self.variants.get(used)
        if exported is not None:
            return exported
        mask = "".join("1" if i in used else "0" for i in range(len(self.out_structs)))
        suffix = hashlib.sha256(mask.encode()).hexdigest()[:12]
        path = pathlib.Path(_CACHE_DIR) / "programs" / f"{self.key}-{suffix}"
        if path.exists():
            start = time.perf_counter()
            try:
                exported = jax.export.deserialize(bytearray(path.read_bytes()))
            except Exception:  # a stale or foreign file: rebuild it below
                path.unlink(missing_ok=True)
            else:
                load = time.perf_counter() - start
                record = CompileRecord(self.what, self.label, 0.0, 0.0, 0.0, load, True)
                _finish(record, kept=True)
        if exported is None:
            program = _restricted(self.traced(), used)
            with _measuring() as durations, _building():
                exported = jax.export.export(jax.jit(program))(*self.structs)
            trace, self.trace_seconds = self.trace_seconds, 0.0
            record = CompileRecord(
                self.what, self.label, trace, durations["lower"], 0.0, 0.0, False
            )
            _finish(record, kept=True)
            try:
                _write(path, exported.serialize())
            except OSError as error:  # only later processes lose it
                _LOGGER.info("%s: not kept between processes (%s)", self.what, error)
        with _LOCK:
            return self.variants.setdefault(used, exported)


def _restricted(closed, used):
    """The function of a closed jaxpr's outputs `used`, the code of the others
    removed (every input kept: the caller passes them all)."""
    mask = [i in used for i in range(len(closed.jaxpr.outvars))]
    jaxpr, used_consts, _ = pe.dce_jaxpr_consts(closed.jaxpr, mask, instantiate=True)
    consts = [c for c, u in zip(closed.consts, used_consts) if u]
    run = jex_core.jaxpr_as_fun(jex_core.ClosedJaxpr(jaxpr, consts))
    return lambda *args: run(*args)


# A kept function called in a caller's program (see `inline`).
_kept_p = jex_core.Primitive("hybrax_kept_program")
_kept_p.multiple_results = True


def _kept_abstract_eval(*avals, kept, used):
    del avals
    return [
        jax.core.ShapedArray(s.shape, s.dtype, weak_type=s.weak_type)
        for s in (kept.out_structs[i] for i in used)
    ]


def _kept_impl(*args, kept, used):
    # (Only where a caller evaluates the primitive outside a trace.)
    return list(jax.jit(kept.variant(used).call)(*args))


def _kept_lowering(ctx, *args, kept, used):
    exported = kept.variant(used)
    lower = mlir.lower_fun(lambda *a: exported.call(*a), multiple_results=True)
    return lower(ctx, *args)


def _kept_batching(args, dims, *, kept, used):
    # An exported module has fixed shapes: batched, the function itself, traced.
    def restricted(*flat_args):
        outputs = kept.flat(*flat_args)
        return [outputs[i] for i in used]

    outputs = jax.vmap(restricted, in_axes=list(dims))(*args)
    return outputs, [0] * len(outputs)


def _kept_dce(used_outputs, eqn):
    # JAX's dead-code elimination reaches into the kept program: its variant
    # computes only the outputs the caller's program uses.
    if not any(used_outputs):
        return [False] * len(eqn.invars), None
    used = tuple(i for i, u in zip(eqn.params["used"], used_outputs) if u)
    outvars = [v for v, u in zip(eqn.outvars, used_outputs) if u]
    new_eqn = eqn.replace(params={**eqn.params, "used": used}, outvars=outvars)
    return [True] * len(eqn.invars), new_eqn


_kept_p.def_impl(_kept_impl)
_kept_p.def_abstract_eval(_kept_abstract_eval)
mlir.register_lowering(_kept_p, _kept_lowering)
batching.primitive_batchers[_kept_p] = _kept_batching
pe.dce_rules[_kept_p] = _kept_dce


def _kept_function(what, label, fn, packed):
    """The kept form of `fn(*packed)` for these arguments' static part and
    shapes (see `_Kept`), and the arguments' array leaves; `None` where it
    cannot be kept."""
    treedef, is_array, static, dynamic = _split((packed,))
    # The traced inputs by their shapes (a tracer anywhere else is refused).
    shapes = jtu.tree_map(
        lambda leaf: (
            jax.ShapeDtypeStruct(*_aval(leaf)[:2]) if eqx.is_array(leaf) else leaf
        ),
        packed,
    )
    key = _persistent_key(what, fn, (shapes,))
    if key is None:
        return None, dynamic
    with _LOCK:
        kept = _KEPT.get(key)
    if kept is not None:
        return kept, dynamic
    out_box: list = []
    flat = _flat_function(_Applied(fn), treedef, is_array, static, out_box)
    structs = _structs(dynamic)
    path = pathlib.Path(_CACHE_DIR) / "programs" / f"{key}-outputs"
    kept = None
    if path.exists():
        try:
            out_spec, out_structs = _loads(path.read_bytes())
        except Exception:  # a stale or foreign file: rebuild it below
            path.unlink(missing_ok=True)
        else:
            kept = _Kept(what, label, key, flat, structs, out_spec, out_structs)
    if kept is None:
        announce(f"tracing {what}{label} (first run; kept afterwards) ...")
        kept = _Kept(what, label, key, flat, structs, None, None)
        closed = kept.traced()
        if closed is None:
            _LOGGER.info("%s: not kept between processes (a host callback)", what)
            return None, dynamic
        kept.out_spec = out_box[-1]
        kept.out_structs = [
            jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
            for a in closed.out_avals
        ]
        try:
            _write(path, _dumps((kept.out_spec, kept.out_structs)))
        except Exception as error:  # only later processes lose it
            _LOGGER.info("%s: not kept between processes (%s)", what, error)
    with _LOCK:
        kept = _KEPT.setdefault(key, kept)
    return kept, dynamic


#: The functions kept for callers' programs, by fingerprint key.
_KEPT: dict[str, _Kept] = {}


def inline(what: str, fn, args=(), *, label: str = "", direct=None):
    """`fn(*args)` inside a caller's transformation (a user's `jax.jit` of an
    orbit routine, or of its `jax.grad`) as a program kept between processes.

    Where [`hybrax.enable_compilation_cache`][] is on, the function is traced
    once without host callbacks (as [`call`][] keeps its programs), and the
    caller's program embeds it as a `jax.export` module of the outputs that
    program uses (JAX's dead-code elimination reaches into it, see `_Kept`): a
    second process loads the module instead of tracing the function again, and
    since the caller's program then holds no host callback either, JAX's
    persistent cache keeps its executable. Batched (under `jax.vmap`), without
    the cache, or inside one of hybrax's own programs (kept as a whole), it is
    `direct(*args)` (default `fn`; e.g. `fn` through `hybrax._misc.trace_once`).
    For functions that are not differentiated: the insides of derivative
    rules (the orbit's solve, tangent and transpose)."""
    direct = fn if direct is None else direct
    packed = (tuple(args), {})
    leaves = jtu.tree_leaves(packed)
    if (
        _CACHE_DIR is None
        or getattr(_BUILDING, "active", False)
        or not _traced(packed)
        or _batched(leaves)
    ):
        return direct(*args)
    kept, dynamic = _kept_function(what, label, fn, packed)
    if kept is None:
        return direct(*args)
    used = tuple(range(len(kept.out_structs)))
    return _decode(kept.out_spec, _kept_p.bind(*dynamic, kept=kept, used=used))
