r"""How hybrax compiles its programs: `jax.jit` with the model static, JAX's
persistent compilation cache, and a line for each compilation.

Every routine that runs a compiled computation (simulation, orbit search, sweep
chunk, tuning step, continuation corrector) is a function decorated with
[`compiled`][]. Its arguments are split as `equinox.filter_jit` splits them
(arrays are run-time inputs; the model's functions, flags and structure are
static), so a second call with other array values (parameters, tolerances,
`t_max`, iteration counts, tuning targets) compiles nothing; the static parts go
to `jax.jit` as one hashable static argument, and the split of an equinox Module
(a model's system and section, settings, parameters) is kept by identity for
its next call (the last `SPLIT_MEMO_SIZE` (64) Modules), so that a call costs
about what its program costs under the caller's own `jax.jit`. Called with
traced arguments (inside a user's `jax.jit`, `jax.grad` or `jax.vmap`, or inside
another of hybrax's programs), it is part of the caller's program.

Between processes, JAX's own persistent compilation cache keeps the executables
([`enable_compilation_cache`][]), and hybrax's store of traced programs
(`hybrax._program_store`, `jax.export`) the programs of calls made outside a
transformation: a later process loads those instead of tracing them, traces
the others again (a second or more), and loads every executable instead of
compiling it. JAX keys an
executable by its program text, and a host callback's address changes from one
process to the next: a program with one is compiled again in every process. The
library asks the anchors for results instead of callbacks (`throw=False` in
diffrax, optimistix and lineax; its own checks are statuses), with one exception
it cannot reach: optimistix's implicit derivative (`optimistix.ImplicitAdjoint`,
through which diffrax differentiates an event's time, as the AD monodromy
does) calls `lineax.linear_solve` with its default `throw=True`, which equinox
turns into a host callback unless `EQX_ON_ERROR=nan` is set before equinox is
imported. The command line sets it; in a script, set it in the environment (see
the compilation how-to; the upstream report is in the performance guide).

Each compilation is logged on the `"hybrax"` logger (level INFO) as it starts
(when its tracing starts) and when done, with its seconds (trace, lowering,
XLA); inside [`announcing`][] (the command line, routines called with
`progress=True`) the same lines go to stderr. The records are kept in a bounded
list ([`COMPILATIONS`][], the last 256; read by `experiments/`), which
[`hybrax.clear_caches`][] empties with JAX's own caches and the kept splits.
"""

import collections
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import logging
import os
import sys
import threading
import typing
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from . import _program_store
from ._misc import forget_canonical, merge_leaves


_LOGGER = logging.getLogger("hybrax")

# Where compilation lines go besides the log (`None`: nowhere), and the name they
# give the model (`None`: the program's own label). Context variables: a thread
# that compiles for the caller (`compile_in_background`) runs in a copy of the
# caller's context.
_REPORT: contextvars.ContextVar = contextvars.ContextVar("hybrax_report", default=None)
_LABEL: contextvars.ContextVar = contextvars.ContextVar("hybrax_label", default=None)


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def announcing(report: Callable[[str], None] = _to_stderr, label: str | None = None):
    """Within the block, each compilation's lines also go to `report` (one string
    per call; default: a line on stderr), naming the model `label` (e.g. the
    command line's model name) where given."""
    reporter = _Reporter(report)
    report_token = _REPORT.set(reporter)
    label_token = _LABEL.set(label)
    try:
        yield
    finally:
        reporter.open = False
        _REPORT.reset(report_token)
        _LABEL.reset(label_token)


class _Reporter:
    """`report` until the block of [`announcing`][] that set it ends: a program
    compiling in a thread that copied the context (the command line's
    simulation beside its orbit search) and outlives the block reports nothing
    into whatever its caller runs next (the lines still go to the log)."""

    def __init__(self, report: Callable[[str], None]):
        self.report = report
        self.open = True

    def __call__(self, line: str) -> None:
        if self.open:
            self.report(line)


@contextlib.contextmanager
def announcing_progress(enabled: bool, report: Callable[[str], None] = _to_stderr):
    """[`announcing`][] for a library call with `progress=True` (`enabled`): its
    compilations are reported to `report` (e.g. the progress bar's own writer)
    unless the caller already announces them (the command line)."""
    if not enabled or _REPORT.get() is not None:
        yield
        return
    with announcing(report):
        yield


def announce(line: str) -> None:
    """Log `line` (logger `"hybrax"`, INFO) and, inside [`announcing`][], report
    it."""
    _LOGGER.info(line)
    report = _REPORT.get()
    if report is not None:
        report(line)


@dataclasses.dataclass(frozen=True)
class CompileRecord:
    """What one compilation cost, in seconds: `trace` (Python tracing), `lower`
    (to StableHLO), `xla` (XLA's compilation, or reading its executable from
    JAX's persistent cache), and whether the executable came from that cache
    (`cached`), and whether its traced program came from hybrax's store of
    traced programs (`stored`; see [`enable_compilation_cache`][])."""

    what: str
    label: str
    trace: float
    lower: float
    xla: float
    cached: bool
    stored: bool = False

    @property
    def total(self) -> float:
        return self.trace + self.lower + self.xla


#: The compilations of this process, the last 256 (read by `experiments/`).
COMPILATIONS: collections.deque = collections.deque(maxlen=256)
#: How many times each program (by its `what`) was compiled in this process.
COUNTS: collections.Counter = collections.Counter()
_RECORDERS: list[list] = []


@contextlib.contextmanager
def recorded():
    """The compilations of the block (any thread), as a list of
    [`CompileRecord`][]s filled as they finish."""
    records: list = []
    _RECORDERS.append(records)
    try:
        yield records
    finally:
        _RECORDERS.remove(records)


# ---------------------------------------------------------------------------
# JAX's persistent cache
# ---------------------------------------------------------------------------


def default_cache_dir() -> str | None:
    """`$HYBRAX_CACHE_DIR` if set (empty disables the cache), else
    `$XDG_CACHE_HOME/hybrax/jax` or `~/.cache/hybrax/jax`."""
    if "HYBRAX_CACHE_DIR" in os.environ:
        return os.environ["HYBRAX_CACHE_DIR"] or None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return os.path.join(os.path.expanduser(base), "hybrax", "jax")


#: The folder of JAX's cache directory that holds hybrax's traced programs.
TRACED_PROGRAMS = "hybrax-traced"


def enable_compilation_cache(
    path: str | os.PathLike | None = None, *, keep_traced: bool | None = None
) -> str | None:
    r"""Turn on JAX's persistent compilation cache for every program, so that a
    second run of the same script or command loads each executable instead of
    compiling it, and hybrax's store of traced programs, so that it loads each
    program instead of tracing it where the store keeps it.

    This is JAX's own cache (`jax_compilation_cache_dir`), with its thresholds
    lowered so that every program is kept (`jax_persistent_cache_min_compile_time_secs`
    0, `jax_persistent_cache_min_entry_size_bytes` -1): the call changes those
    three `jax.config` options, for the whole process, and nothing else. A JAX
    cache directory already configured (by `JAX_COMPILATION_CACHE_DIR` or an
    earlier call) is kept. JAX reads the setting at its first compilation: call
    this once, before the first computation; the command line does.

    A program that holds a host callback is compiled again in every process (its
    address is part of the program). Programs that differentiate an event's time
    (the analysed orbit, gradients of orbit quantities) hold one unless
    `EQX_ON_ERROR=nan` is set in the environment before equinox is imported (see
    `hybrax._compile`); a note on the `"hybrax"` logger says so when it is not.

    The store of traced programs (`keep_traced`, in the folder
    `hybrax-traced` of the cache directory): a routine called outside any
    transformation of the caller's exports its program with `jax.export` the
    first time and writes it there; a later process with the same key (hybrax's
    source, the versions of Python, JAX and the anchors, the backend, the
    routine, its arguments' structure, static values, shapes and dtypes) loads
    it and traces nothing of it: the hopper's analysed orbit in 0.7-1.0 s
    instead of about 5 s. A model of the caller's own functions is keyed by
    their traces (and their derivatives'), taken at the call in milliseconds:
    a function changed between runs is a new key. What is not stored, and is
    traced in every process as before: the caller's own `jax.jit`, `jax.grad`,
    `jax.jacfwd` or `jax.vmap` of a routine, a function of the caller's own
    outside the model (a tuning objective, a continuation's parameter), and a
    class of the caller's own in the system other than a reset. A stored file
    runs no code: a damaged or foreign one is not used (a line on the
    `"hybrax"` logger), and its program is traced and written again.

    **Arguments:**

    - `path`: the cache directory; default `$HYBRAX_CACHE_DIR` (empty: no cache),
      else `$XDG_CACHE_HOME/hybrax/jax` or `~/.cache/hybrax/jax`.
    - `keep_traced`: also keep traced programs; `False` turns the store off.
      Default: on, unless `$HYBRAX_KEEP_TRACED` is `0` (which the command line
      follows too).

    **Returns:** the cache directory in use, or `None` when disabled.
    """
    path = default_cache_dir() if path is None else os.fspath(path)
    if path is None:
        return None
    current = jax.config.jax_compilation_cache_dir
    if current:
        path = current
    else:
        jax.config.update("jax_compilation_cache_dir", path)
    if keep_traced is None:
        keep_traced = os.environ.get("HYBRAX_KEEP_TRACED", "1") != "0"
    _program_store.set_directory(
        os.path.join(path, TRACED_PROGRAMS) if keep_traced else None
    )
    if current:
        return current
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    if os.environ.get("EQX_ON_ERROR") != "nan":
        _LOGGER.info(
            "EQX_ON_ERROR is not 'nan': programs that differentiate an event's time "
            "hold a host callback and are compiled again in every process"
        )
    return path


def clear_caches() -> None:
    """Empty every cache of compiled programs in this process: JAX's
    (`jax.clear_caches`, which holds every program hybrax compiled, each bounded
    by JAX), hybrax's records of compilations, its kept argument splits (the
    last `SPLIT_MEMO_SIZE` (64) Modules passed to a compiled routine, held until
    then), its device copies of small NumPy inputs (the last
    `DEVICE_CONSTANTS_SIZE` (256)) and the parameter Modules it found canonical
    (the last 64). The persistent cache on disk stays; a later
    call traces and compiles (or loads) its program again."""
    jax.clear_caches()
    COMPILATIONS.clear()
    COUNTS.clear()
    with _SPLITS_LOCK:
        _SPLITS.clear()
    with _CONSTANTS_LOCK:
        _CONSTANTS.clear()
    forget_canonical()


# ---------------------------------------------------------------------------
# Watching a compilation
# ---------------------------------------------------------------------------

_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_XLA = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT = "/jax/compilation_cache/cache_hits"
_CACHE_MISS = "/jax/compilation_cache/cache_misses"


class _Watch:
    """The compilation of one top-level call, if it compiles: JAX's monitoring
    events of this thread while the call runs."""

    def __init__(self, what: str, label: "str | Callable[[], str]"):
        # `label` may be a function of no arguments: it is called only where the
        # call compiles (most calls do not).
        self.what, self.label = what, label
        self.on_compile = getattr(_WATCHING, "on_compile", None)
        self.announced = False
        self.trace = self.lower = self.xla = 0.0
        self.cache_hits = self.cache_misses = 0
        self.stored = False


_WATCHING = threading.local()
_LISTENING = threading.Lock()
_listening = False


def _on_duration(event: str, duration: float, **kwargs) -> None:
    watch = getattr(_WATCHING, "watch", None)
    if watch is None:
        return
    if event == _TRACE:  # nested traces lie within the outer one
        watch.trace = max(watch.trace, duration)
    elif event == _LOWER:
        watch.lower += duration
    elif event == _XLA:
        watch.xla += duration


def _on_event(event: str, **kwargs) -> None:
    watch = getattr(_WATCHING, "watch", None)
    if watch is not None and event == _CACHE_HIT:
        watch.cache_hits += 1
    elif watch is not None and event == _CACHE_MISS:
        watch.cache_misses += 1


def _listen() -> None:
    """Register the monitoring listeners, once per process (on the first call of
    a compiled routine, not at import)."""
    global _listening
    if _listening:
        return
    with _LISTENING:
        if not _listening:
            jax.monitoring.register_event_duration_secs_listener(_on_duration)
            jax.monitoring.register_event_listener(_on_event)
            _listening = True


class _watching:
    """While a top-level call runs: its `_Watch` in this thread, recorded and
    announced afterwards where the call compiled (a class, not a generator: it
    is entered on every call)."""

    __slots__ = ("watch",)

    def __init__(self, what: str, label: "str | Callable[[], str]"):
        if not _listening:
            _listen()
        if getattr(_WATCHING, "watch", None) is not None:
            # A hybrax routine called eagerly inside another's body.
            self.watch = None
        else:
            self.watch = _WATCHING.watch = _Watch(what, label)

    def __enter__(self):
        return self.watch

    def __exit__(self, error_type, *error) -> None:
        watch = self.watch
        if watch is None:
            return
        _WATCHING.watch = None
        if watch.announced and error_type is None:
            _record(watch)


def _record(watch: _Watch) -> None:
    """Record and announce the compilation a watched call made."""
    what = watch.what
    record = CompileRecord(
        what,
        watch.label,
        watch.trace,
        watch.lower,
        watch.xla,
        # Loaded: every executable the call asked for came from JAX's
        # cache (a call also compiles small programs of JAX's own).
        watch.cache_hits > 0 and watch.cache_misses == 0,
        watch.stored,
    )
    COMPILATIONS.append(record)
    COUNTS[what] += 1
    for records in list(_RECORDERS):
        records.append(record)
    if record.cached and record.stored:
        announce(
            f"loaded {what}{record.label} in {record.total:.1f} s: its traced "
            f"program from hybrax's store, its executable from the cache (lowering "
            f"{record.lower:.1f} s, loading {record.xla:.1f} s)"
        )
    elif record.cached:
        announce(
            f"compiled {what}{record.label} in {record.total:.1f} s, its "
            f"executable from the cache (trace {record.trace:.1f} s, lowering "
            f"{record.lower:.1f} s, loading {record.xla:.1f} s)"
        )
    else:
        announce(
            f"compiled {what}{record.label} in {record.total:.1f} s "
            f"(trace {record.trace:.1f} s, lowering {record.lower:.1f} s, "
            f"XLA {record.xla:.1f} s)"
        )


def _announce_tracing(stored: bool = False, what: str | None = None) -> None:
    """In a program's body while it is traced: the first such body of a watched
    call announces that its program is being compiled (`stored`: loaded from
    the store of traced programs instead, announced when done); a body traced
    outside any watched call (the routine `what` inside a transformation of
    the caller's) says so on the log."""
    watch = getattr(_WATCHING, "watch", None)
    if watch is None and what is not None:
        _LOGGER.info(
            f"tracing {what} inside a transformation (jax.jit, jax.grad, "
            f"jax.vmap, ...): part of that program, which JAX traces in every "
            f"process (hybrax's store keeps the programs of calls made outside "
            f"one)"
        )
    if watch is None or watch.announced:
        return
    watch.announced = True
    watch.stored = stored
    if callable(watch.label):
        watch.label = watch.label()
    label = _LABEL.get()
    if label is not None:
        watch.label = f" for {label}"
    if not stored:
        announce(f"compiling {watch.what}{watch.label} ...")
    if watch.on_compile is not None:
        watch.on_compile()


@contextlib.contextmanager
def when_compiling(callback: Callable[[], None]):
    """Within the block, where the next compiled routine called in this thread
    compiles its program, `callback()` runs as its tracing starts (e.g. to compile
    the program that will run next in another thread meanwhile)."""
    before = getattr(_WATCHING, "on_compile", None)
    _WATCHING.on_compile = callback
    try:
        yield
    finally:
        _WATCHING.on_compile = before


# ---------------------------------------------------------------------------
# Compiled routines
# ---------------------------------------------------------------------------


class _StaticOut(eqx.Module):
    """A program's non-array outputs, carried out of `jax.jit` in the output's
    tree structure (a pytree without leaves)."""

    value: object = eqx.field(static=True)


class _Key:
    """An argument's tree structure and static leaves: hashable (the hash
    computed once), compared by value; it selects the program."""

    __slots__ = ("treedef", "static", "_hash")

    def __init__(self, treedef, static: tuple):
        self.treedef, self.static = treedef, static
        self._hash = hash((treedef, static))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (
            isinstance(other, _Key)
            and self._hash == other._hash
            and self.treedef == other.treedef
            and self.static == other.static
        )


class _Split(typing.NamedTuple):
    """One argument split as `equinox.filter_jit` splits it: its array leaves
    (run-time inputs; `None` where a leaf is static) and its `_Key`."""

    arrays: tuple
    key: _Key
    traced: bool


#: The splits of the last `SPLIT_MEMO_SIZE` Module arguments, by identity.
SPLIT_MEMO_SIZE = 64
_SPLITS: collections.OrderedDict = collections.OrderedDict()
_SPLITS_LOCK = threading.Lock()


#: Device arrays kept by a key of their value (the last
#: `DEVICE_CONSTANTS_SIZE`): JAX copies a NumPy argument to the device on every
#: call (about 3 us each), a device array it takes as it is. They hold the small
#: NumPy leaves of kept Modules (an orbit's settings and root finder hold ten)
#: and the run-time inputs a routine builds alike on every call (see
#: `device_constant`).
DEVICE_CONSTANTS_SIZE = 256
_SMALL_INPUT = 64  # elements
_CONSTANTS: collections.OrderedDict = collections.OrderedDict()
_CONSTANTS_LOCK = threading.Lock()


def device_constant(key, build: Callable[[], typing.Any]):
    """The device copy of `build()` (a pytree of NumPy arrays), kept under the
    hashable `key`, which must determine the value: a routine whose run-time
    inputs are the same call after call (its defaults) passes them without a
    copy. Built eagerly, even where a caller's trace is active (a constant, not
    a tracer); `clear_caches` empties the store."""
    kept = _CONSTANTS.get(key)
    if kept is not None:
        return kept
    with jax.ensure_compile_time_eval():
        value = jtu.tree_map(jnp.asarray, build())
    with _CONSTANTS_LOCK:
        _CONSTANTS[key] = value
        while len(_CONSTANTS) > DEVICE_CONSTANTS_SIZE:
            _CONSTANTS.popitem(last=False)
    return value


def as_routine_output(tree):
    """`tree`'s arrays as one routine passes another's outputs to it, the same
    for a program compiled ahead of that call (NumPy placeholders) and for the
    call itself: with the store of traced programs on, committed to the default
    device (JAX commits the outputs of a program that calls an `Exported`, a
    stored program's, and a committed argument selects another executable than
    an uncommitted one), else as they are; a traced leaf as it is."""
    if _program_store.directory() is None:
        return tree
    device = jax.devices()[0]

    def commit(leaf):
        if isinstance(leaf, jax.core.Tracer):
            return leaf
        return jax.device_put(leaf, device)

    with jax.ensure_compile_time_eval():
        return jtu.tree_map(commit, tree)


def _on_device(leaf):
    """A concrete NumPy leaf of a kept Module as a device array (a small one
    shared by value through `device_constant`); anything else as it is."""
    if isinstance(leaf, np.generic):
        leaf = np.asarray(leaf)
    if type(leaf) is not np.ndarray or leaf.dtype.kind not in "biuf":
        return leaf
    if leaf.size > _SMALL_INPUT:
        with jax.ensure_compile_time_eval():
            return jnp.asarray(leaf)
    key = ("leaf", leaf.dtype.str, leaf.shape, leaf.tobytes())
    return device_constant(key, lambda: leaf)


def _partition(tree) -> tuple:
    """`(array leaves, static leaves, treedef)` of `tree`: each leaf in one of the
    two tuples, `None` in the other."""
    leaves, treedef = jtu.tree_flatten(tree)
    arrays = tuple(leaf if eqx.is_array(leaf) else None for leaf in leaves)
    static = tuple(None if eqx.is_array(leaf) else leaf for leaf in leaves)
    return arrays, static, treedef


def _split(value) -> _Split:
    arrays, static, treedef = _partition(value)
    traced = any(isinstance(leaf, jax.core.Tracer) for leaf in arrays)
    return _Split(arrays, _Key(treedef, static), traced)


#: The keys of an argument that is one array, and of `None`.
_LEAF = jtu.tree_structure(0)
_ARRAY_KEY = _Key(_LEAF, (None,))
_NONE_SPLIT = _Split((), _Key(jtu.tree_structure(None), ()), False)


def _split_argument(value) -> _Split:
    """`_split` of `value`, memoized for equinox Modules (frozen: the same
    object splits the same way): a model's system and section, settings and
    parameters are passed again and again, and splitting them on every call
    cost more than the smaller programs run (the hopper's return map: 0.2 ms of
    0.5 ms). The memo holds the Module itself, so its identity cannot be reused
    while it is kept; a Module holding tracers is not kept. A kept Module's
    NumPy leaves are copied to the device once (Modules are immutable: an array
    changed in place after a call is not read again). An array and `None`
    split without a tree walk."""
    kept = _SPLITS.get(id(value))
    if kept is not None and kept[0] is value:
        return kept[1]
    if isinstance(value, jax.Array):
        return _Split((value,), _ARRAY_KEY, isinstance(value, jax.core.Tracer))
    if isinstance(value, np.ndarray):
        return _Split((value,), _ARRAY_KEY, False)
    if value is None:
        return _NONE_SPLIT
    if type(value) in (bool, int, str):
        return _Split((None,), _Key(_LEAF, (value,)), False)
    if not isinstance(value, eqx.Module):
        return _split(value)
    split = _split(value)
    if not split.traced:
        # Kept: its small NumPy leaves as device arrays, copied once.
        split = split._replace(arrays=tuple(map(_on_device, split.arrays)))
        with _SPLITS_LOCK:
            _SPLITS[id(value)] = (value, split)
            while len(_SPLITS) > SPLIT_MEMO_SIZE:
                _SPLITS.popitem(last=False)
    return split


class Compiled:
    """A function compiled with `jax.jit`, announced as `what` (see the module
    docstring). Call it as the function.

    Its arguments are split as `equinox.filter_jit` splits them: array leaves
    (JAX and NumPy) are run-time inputs, every other leaf is static and selects
    the program (functions by identity, numbers and strings by value). The
    split of a Module argument is memoized by identity (`SPLIT_MEMO_SIZE` (64)
    Modules, emptied by `clear_caches`), and the static parts go to
    `jax.jit` as one hashable static argument, so that a call runs through JAX's
    own dispatch: a public routine costs about what its program does under the
    caller's `jax.jit`."""

    def __init__(
        self,
        fn: Callable,
        what: str,
        label: Callable[..., str] | None,
        model: Callable = _program_store.named_model,
    ):
        self.what, self.label = what, label
        self.__wrapped__ = fn
        functools.update_wrapper(self, fn)
        self._signature = inspect.signature(fn)
        self._names = tuple(self._signature.parameters)
        self._model = model

        def run(keys, arrays):
            values = [
                merge_leaves(key.treedef, key.static, part)
                for key, part in zip(keys[0], arrays)
            ]
            n_positional = len(values) - len(keys[1])
            kwargs = dict(zip(keys[1], values[n_positional:]))
            return fn(*values[:n_positional], **kwargs)

        def output(out):
            arrays, static, treedef = _partition(out)
            if all(leaf is None for leaf in static):
                # Arrays only (as most programs'): JAX rebuilds the output.
                return out, None
            return arrays, _StaticOut((treedef, static))

        def body(keys, arrays):
            _announce_tracing(what=what)
            return output(run(keys, arrays))

        def stored_body(keys, arrays):
            n_positional = len(keys[0]) - len(keys[1])
            names = (*self._names[:n_positional], *keys[1])
            return output(_stored_run(fn, what, run, keys, arrays, names, model))

        name = getattr(fn, "__name__", "program")
        body.__name__ = body.__qualname__ = name
        stored_body.__name__ = stored_body.__qualname__ = name
        self._jitted = jax.jit(body, static_argnums=0)
        # The same program through the store of traced programs (the call's
        # static key selects it, as above).
        self._stored = jax.jit(stored_body, static_argnums=0)

    def _inputs(self, args, kwargs):
        """`(static key, run-time arrays, traced)` of a call."""
        if kwargs:
            bound = self._signature.bind(*args, **kwargs)
            args, kwargs = bound.args, bound.kwargs
        keys, arrays, traced = [], [], False
        for value in (*args, *kwargs.values()) if kwargs else args:
            split = _split_argument(value)
            keys.append(split.key)
            arrays.append(split.arrays)
            traced = traced or split.traced
        return (tuple(keys), tuple(kwargs)), tuple(arrays), traced

    def __call__(self, *args, **kwargs):
        keys, arrays, traced = self._inputs(args, kwargs)
        if traced:
            out, static = self._jitted(keys, arrays)
        else:
            label = "" if self.label is None else (lambda: self.label(*args, **kwargs))
            jitted = (
                self._jitted if _program_store.directory() is None else self._stored
            )
            with _watching(self.what, label):
                out, static = jitted(keys, arrays)
        return out if static is None else merge_leaves(*static.value, out)

    def compile(self, *args, **kwargs) -> None:
        """Trace and compile the program for these arguments now, without running
        it (a later call with arguments of the same structure, static parts,
        shapes and dtypes runs it at once). The arguments' values are not used."""
        keys, arrays, _ = self._inputs(args, kwargs)
        label = "" if self.label is None else self.label(*args, **kwargs)
        jitted = self._jitted if _program_store.directory() is None else self._stored
        with _watching(self.what, label):
            jitted.lower(keys, arrays).compile()

    def compile_in_background(self, *args, **kwargs) -> threading.Thread:
        """[`compile`][] in a thread of its own (XLA leaves the interpreter free
        while it compiles: the caller traces its next program meanwhile); `join`
        the returned thread before calling."""
        context = contextvars.copy_context()
        thread = threading.Thread(
            target=context.run,
            args=(self.compile, *args),
            kwargs=kwargs,
            name=f"hybrax: {self.what}",
        )
        thread.start()
        return thread


def _stored_run(
    fn: Callable, what: str, run: Callable, keys, arrays, names, model: Callable
):
    """`run(keys, arrays)` (the routine `fn`'s computation, traced) through the
    store of traced programs: the stored program for this call's key if there
    is one, else the program exported (`jax.export`) and stored; a program the
    store does not keep is traced as it is (see `hybrax._program_store`)."""
    flat = [leaf for part in arrays for leaf in part if leaf is not None]
    orbit_unknown = None
    try:
        key_text = _program_store.key(fn, what, keys, arrays, names, model)
    except _program_store.OrbitUnknown as unknown:
        # The key is completed once the program is exported (its orbit's
        # structure is in its output).
        key_text, orbit_unknown = None, unknown
    except Exception as reason:  # NotStorable, or a value the key cannot read
        _LOGGER.debug(f"{what}: not kept between processes ({reason})")
        _announce_tracing()
        return run(keys, arrays)
    found = None if key_text is None else _program_store.load(key_text)
    if found is None:
        _announce_tracing()
        shapes = [_program_store.abstract(leaf) for leaf in flat]
        kept: dict = {}

        def flat_program(*leaves):
            leaves = iter(leaves)
            parts = tuple(
                tuple(None if leaf is None else next(leaves) for leaf in part)
                for part in arrays
            )
            out_arrays, static, tree = _partition(run(keys, parts))
            kept.update(tree=tree, static=static)
            return tuple(leaf for leaf in out_arrays if leaf is not None)

        flat_program.__name__ = getattr(fn, "__name__", "program")
        try:
            exported = jax.export.export(jax.jit(flat_program))(*shapes)
        except Exception as reason:  # e.g. a host callback: traced as it is
            _LOGGER.info(f"{what}: not kept between processes ({reason})")
            return run(keys, arrays)
        try:
            if orbit_unknown is not None:
                orbit_unknown.keep_orbit(exported, kept["tree"], kept["static"])
                key_text = _program_store.key(fn, what, keys, arrays, names, model)
            _program_store.save(key_text, exported, kept["tree"], kept["static"])
        except Exception as reason:  # e.g. a folder that cannot be written
            _LOGGER.info(f"{what}: not kept between processes ({reason})")
        found = exported, kept["tree"], kept["static"]
    else:
        _announce_tracing(stored=True)
    exported, tree, static = found
    outputs = iter(exported.call(*flat))
    return merge_leaves(
        tree, static, [next(outputs) if s is None else None for s in static]
    )


def compiled(
    what: str,
    label: Callable[..., str] | None = None,
    model: Callable = _program_store.named_model,
):
    """A decorator: the function compiled as [`Compiled`][], announced as the
    program `what`; `label(*args, **kwargs)` names the model in announcements;
    `model(arguments)` gives, from the arguments by name, the
    [`hybrax._program_store.StoredModel`][] whose traces key a program of the
    user's own functions in the store of traced programs (by default the
    arguments `system`, `section`, `params` and `parameter`)."""

    def decorate(fn):
        return Compiled(fn, what, label, model)

    return decorate


def system_label(system) -> str:
    """How announcements name a hybrid system: by its modes."""
    names = [getattr(mode, "name", "?") for mode in getattr(system, "modes", ())]
    return f" for the system of modes {', '.join(names)}" if names else ""
