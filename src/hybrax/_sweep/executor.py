"""Batched evaluation: one compiled `jit(vmap(fn))` over a batch of inputs, cut into
chunks that bound memory, sharded over the local devices, and optionally split
across the processes of a multi-host run ([`hybrax.sweep`][]).
"""

import concurrent.futures
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.tree_util as jtu
import numpy as np
from jaxtyping import PyTree

from .._compile import announcing_progress, compiled
from .._misc import is_concrete
from .._periodic import (
    modulus_key,
)
from .._program_store import StoredModel, traced_model
from .._progress import Progress


_AXIS = "batch"


def process_slice(
    n: int, process_index: int | None = None, process_count: int | None = None
) -> slice:
    r"""The contiguous part of a batch of `n` elements that one process evaluates.

    Process $i$ of $P$ takes elements $[i c, \min((i + 1) c, n))$ with
    $c = \lceil n / P\rceil$ (the last processes may get fewer, or none).

    **Arguments:**

    - `n`: the number of elements of the batch.
    - `process_index`: $i$; default `jax.process_index()`.
    - `process_count`: $P$; default `jax.process_count()`.

    **Returns:** the `slice` of process $i$'s elements; with one process
    `slice(0, n)`.
    """
    if process_index is None:
        process_index = jax.process_index()
    if process_count is None:
        process_count = jax.process_count()
    per = -(-int(n) // int(process_count))
    start = min(int(n), int(process_index) * per)
    return slice(start, min(int(n), start + per))


def _batch_size(dynamic) -> int:
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in _leaves(dynamic)}
    if not sizes:
        raise ValueError("`batch` holds no arrays: there is nothing to sweep over.")
    if None in sizes:
        raise ValueError(
            "`batch`: every array leaf needs a leading batch axis; got a 0-d array."
        )
    if len(sizes) > 1:
        raise ValueError(
            "`batch`: array leaves disagree on the batch size (leading axis): "
            f"{sorted(sizes)}."
        )
    size = int(sizes.pop())
    if size == 0:
        raise ValueError("`batch` is empty: its leading axis has length 0.")
    return size


def _leaves(tree):
    return [leaf for leaf in jtu.tree_leaves(tree) if leaf is not None]


def _take(dynamic, index):
    """`dynamic[index]` leaf by leaf, on the host (NumPy)."""
    return jtu.tree_map(lambda leaf: np.asarray(leaf)[index], dynamic)


def _vmapped(fn, static, out_static: list):
    """`vmap` of `fn` over the dynamic part of an element; the non-array part of
    the output is recorded in `out_static` when traced (vmap returns arrays only)."""

    def one(element_dynamic):
        out = fn(eqx.combine(element_dynamic, static))
        out_dynamic, out_st = eqx.partition(out, eqx.is_array)
        if not out_static:
            out_static.append(out_st)
        return out_dynamic

    return jax.vmap(one)


def _chunk_model(arguments: dict) -> "StoredModel | None":
    """The model of a chunk's `fn` for the store of traced programs, where `fn`
    is hybrax's (an orbit solve): at one element of the chunk."""
    element = eqx.combine(
        jtu.tree_map(
            lambda leaf: jax.ShapeDtypeStruct(
                leaf.shape[1:], leaf.dtype, weak_type=leaf.weak_type
            ),
            arguments["dynamic"],
        ),
        arguments["static"],
    )
    return traced_model(arguments["fn"], element)


@compiled("a sweep chunk", model=_chunk_model)
def _evaluate(fn, static, dynamic, sharding):
    """One chunk: `vmap(fn)` over the leading axis of `dynamic`. With a
    `NamedSharding` the chunk arrives split over its mesh along the batch axis and
    the outputs are constrained to the same split, so XLA's SPMD partitioner runs
    each device on its own slice (the while loops' exit tests become all-reduces:
    every device runs until the slowest element of the chunk is done)."""
    # Not `jax.shard_map`: inside it, equinox's closure conversion (used by
    # optimistix, hence by diffrax's event root finding) compares argument
    # shardings and rejects its own arguments (equinox 0.13.8, jax 0.10.2).
    out_static: list = []
    out_dynamic = _vmapped(fn, static, out_static)(dynamic)
    if sharding is not None:
        out_dynamic = jax.lax.with_sharding_constraint(out_dynamic, sharding)
    return eqx.combine(out_dynamic, out_static[0])


def sweep(
    fn: Callable[[PyTree], PyTree],
    batch: PyTree,
    *,
    chunk_size: int | None = None,
    progress: bool = False,
    devices: Sequence[jax.Device] | None = None,
    distributed: bool = False,
    desc: str = "sweep",
) -> PyTree:
    r"""Evaluate `fn` on every element of `batch` in one compiled `jit(vmap(fn))`.

    The element $i$ is `batch` with every array leaf indexed at `[i]`; non-array
    leaves are shared (and static). The batch is cut into chunks of `chunk_size`
    elements, the last one padded (by repeating its last element) to the same size,
    so there is one compilation whatever the batch size; the padding is dropped from
    the result. Each chunk is split over `devices` along the batch axis: it is
    placed with a `jax.sharding.NamedSharding` of a `Mesh` over the devices and
    `PartitionSpec("batch")`, and XLA's SPMD partitioner runs each device on its
    slice; the chunk size is rounded up to a multiple of the device count.

    Under `vmap` every while loop (integration steps, Newton iterations) runs until
    the slowest element of its chunk and device finishes: an element that fails
    slowly costs the whole chunk that time. Give `fn` bounded work (step and
    iteration limits) and report failures through status codes, not exceptions.

    On a single CPU device, as many chunks as the process has cores run at once,
    each called from its own host thread (XLA runs one call on one thread); on
    accelerators chunks run one after another, the next one prepared while the
    last runs.

    `sweep` is an eager driver (a Python loop over chunks), not itself traceable;
    `fn` is traced once per chunk shape and reused by later calls with an equal
    `fn` (equal `eqx.Module`s or the same function).

    **Arguments:**

    - `fn`: `fn(element) -> PyTree` for one element; a function or a callable
      `eqx.Module` (whose array fields are shared by all elements).
    - `batch`: a PyTree whose array leaves all have the same leading axis.
    - `chunk_size`: elements per compiled call (bounds memory); default: the
      whole batch in one call.
    - `progress`: show a progress bar over chunks (tqdm if installed, else a line
      on stderr).
    - `devices`: devices to shard each chunk over; default `jax.local_devices()`.
    - `distributed`: split the batch across processes (see the note below: each
      process evaluates `process_slice(n)` on its local devices and the results
      are all-gathered). Works, and changes nothing, with one process.
    - `desc`: the label of the progress bar.

    **Returns:** the outputs of `fn`, each array leaf with the leading batch axis,
    as NumPy arrays (on the host; chunks are fetched as they finish).

    **Raises:** `ValueError` if `batch` has no arrays, leaves of different batch
    sizes, or traced ones (`sweep` called under a JAX transformation), or
    `chunk_size` is not positive.

    !!! note "Several hosts"

        Every process runs the same script: call `jax.distributed.initialize()`
        before anything else touches JAX, build the *whole* batch on every
        process, and pass `distributed=True`:

        ```py
        import jax
        jax.distributed.initialize()  # coordinator, process id/count from env
        jax.config.update("jax_enable_x64", True)
        import hybrax as hx

        out = hx.sweep_orbits(
            system, section, guess, params,
            sweep_settings=hx.SweepSettings(distributed=True),
        )
        # every process now holds the results of the whole batch, in order
        ```

        Process $i$ of $P$ (`jax.process_index()`, `jax.process_count()`)
        evaluates the contiguous slice [`hybrax.process_slice`][]`(n)` on its own
        `jax.local_devices()` (padded to the common length $\lceil n/P\rceil$),
        and `jax.experimental.multihost_utils.process_allgather` gathers the
        slices, so every process returns the full result. With one process
        ($P = 1$, e.g. without `jax.distributed.initialize()`) the slice is the
        whole batch and the gather returns it unchanged: the same script runs on
        a laptop and on a cluster. To keep each host's part to itself (no gather;
        e.g. one output file per host), slice yourself:
        `sweep(fn, tree_map(lambda a: a[process_slice(n)], batch))`.

    !!! example

        ```python
        def energy(x):
            return 0.5 * jnp.sum(x ** 2)

        hx.sweep(energy, np.random.rand(10_000, 4), chunk_size=1024)  # (10000,)
        ```
    """
    dynamic, static = eqx.partition(batch, eqx.is_array)
    if not all(is_concrete(leaf) for leaf in jtu.tree_leaves(dynamic)):
        # The chunks run from a host loop into NumPy arrays: a traced batch would
        # fail deep inside with JAX's bare `TracerArrayConversionError`.
        raise ValueError(
            "`batch` is traced: `hx.sweep` is an eager driver and does not run "
            "under jax.jit, jax.vmap, jax.grad or jax.jacfwd; inside a "
            "transformation call `jax.vmap(fn)(batch)` instead."
        )
    n = _batch_size(dynamic)
    plan = _plan(n, chunk_size, devices, distributed)
    bar = Progress(plan.n_local, progress and jax.process_index() == 0, desc)
    try:
        with announcing_progress(bar.enabled, bar.write):
            stacked = _run_chunks(fn, static, dynamic, plan, bar)
    finally:
        bar.close()
    return _gathered(stacked, n, distributed)


class _Plan(eqx.Module):
    """Where a batch runs: this process's elements (`local_index`, padded to the
    processes' common length `n_local`), the chunk `size`, and the placement of
    a chunk (`target`: a device or a sharding; `sharding` for the outputs)."""

    local_index: np.ndarray
    n_local: int
    size: int
    target: Any
    sharding: Any


def _local_count(n: int, distributed: bool) -> int:
    """The elements one process evaluates: all `n`, or with `distributed` its
    padded share (every process evaluates as many, so the gathered shapes agree)."""
    return -(-n // jax.process_count()) if distributed else n


def _plan(n, chunk_size, devices, distributed) -> _Plan:
    if n == 0:
        raise ValueError("`batch` is empty (its leading axis has length 0).")
    if chunk_size is not None and int(chunk_size) < 1:
        raise ValueError(f"`chunk_size` must be positive; got {chunk_size}.")
    devices = list(jax.local_devices() if devices is None else devices)
    if not devices:
        raise ValueError("`devices` must name at least one device.")
    n_dev = len(devices)
    if n_dev > 1:
        mesh = jax.sharding.Mesh(np.array(devices), (_AXIS,))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(_AXIS))
        target = sharding
    else:
        sharding = None
        target = devices[0]

    if distributed:
        part = process_slice(n)
        n_local = _local_count(n, distributed)
        local_index = np.arange(part.start, part.stop)
        local_index = np.concatenate(
            [local_index, np.full(n_local - local_index.size, max(part.stop - 1, 0))]
        ).astype(int)
    else:
        local_index = np.arange(n)
        n_local = n

    size = n_local if chunk_size is None else min(int(chunk_size), n_local)
    size = n_dev * -(-max(size, 1) // n_dev)
    return _Plan(local_index, n_local, size, target, sharding)


def host_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _streams(plan, n_chunks: int, rounds: bool = False) -> int:
    """How many chunks run at once, each called from its own host thread.

    On one CPU device: one per core. XLA runs a call on one thread (a solver's
    loops compile to single kernels), and calls from different threads run
    concurrently (two calls from two threads take little longer than one; from
    one thread, twice as long). Elsewhere a
    call already uses the whole device (or every device of a sharded chunk):
    two chunk calls, so that one is prepared and fetched while the other runs
    (`rounds`: one, since the elements of a round's chunk depend on the last).
    Never more than `n_chunks`. JAX compiles a program once when several threads
    first call it together (the others wait for it)."""
    if plan.sharding is None and plan.target.platform == "cpu":
        cores = host_cores()
    else:
        cores = 1 if rounds else 2
    return max(1, min(cores, n_chunks))


def _in_threads(tasks, n_threads: int, stop: threading.Event | None = None) -> list:
    """The results of `tasks` (callables without arguments), run on `n_threads`
    host threads, in order (one thread and no `stop`: the caller's own). As
    soon as one raises, or the caller is interrupted (Ctrl-C), `stop` is set
    (for tasks that loop: they end their round and return) and the tasks not
    started are dropped; the error is raised once the running ones have
    returned."""

    if n_threads == 1 and stop is None:
        # In the caller's thread: a pool's thread start and hand-over cost more
        # than a small chunk's program (the hopper's 8 orbits: 4.5 ms).
        return [task() for task in tasks]

    failed = threading.Event()

    def guarded(task):
        # A task not started when another has failed is dropped here, whatever
        # the caller's thread has seen yet.
        if failed.is_set():
            return None
        try:
            return task()
        except BaseException:
            failed.set()
            if stop is not None:
                stop.set()
            raise

    pool = concurrent.futures.ThreadPoolExecutor(n_threads)
    # Each task in a copy of the caller's context (where compilations are
    # announced, see `hybrax._compile.announcing`).
    futures = [
        pool.submit(contextvars.copy_context().run, guarded, task) for task in tasks
    ]
    try:
        concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
        for future in futures:  # the failure first, not the tasks queued before it
            if future.done() and future.exception() is not None:
                raise future.exception()
        return [future.result() for future in futures]
    except BaseException:
        if stop is not None:
            stop.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# Matrices per host thread in `sorted_multipliers_batch` (below this, one thread).
_EIG_PIECE = 4096


def sorted_multipliers_batch(matrices: np.ndarray) -> np.ndarray:
    r"""`hybrax._periodic.sorted_multipliers` of a batch of small real matrices
    `(B, k, k)`, on the host: NumPy's LAPACK `geev` in threads (NumPy releases the
    GIL), NaN rows for non-finite matrices, in the library's one order
    (`modulus_key`). Not differentiable: for the results of a sweep, which leave
    the device anyway.

    Why not on the device: JAX's LAPACK path on a GPU copies the batch to the
    host and runs `geev` one matrix after another in one thread, and cuSOLVER's
    `geev` is slower still (see `hybrax._periodic.spectrum._eigenvalues`); a
    sweep on a GPU with the eigenvalues here is no slower than with them in its
    program."""
    matrices = np.asarray(matrices, dtype=float)
    out = np.full(matrices.shape[:-1], np.nan, dtype=complex)
    rows = np.flatnonzero(np.all(np.isfinite(matrices), axis=(-2, -1)))
    n_pieces = max(1, min(host_cores(), rows.size // _EIG_PIECE))

    def piece(rows):
        eig = np.linalg.eigvals(matrices[rows])
        order = np.argsort(modulus_key(eig, np), axis=-1, kind="stable")
        out[rows] = np.take_along_axis(eig, order, axis=-1)

    pieces = np.array_split(rows, n_pieces)
    _in_threads([functools.partial(piece, r) for r in pieces], n_pieces)
    return out


class _FirstCallAlone:
    """Within one sweep: the first call of the chunk program at each chunk size
    runs alone (it traces and compiles the program), while the host threads that
    need that size meanwhile wait for it, so that each size compiles once rather
    than once per thread; later calls run at once, side by side."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sizes: dict[int, threading.Lock] = {}
        self._ready: set[int] = set()

    def __call__(self, size: int, call):
        if size in self._ready:
            return call()
        with self._lock:
            first = self._sizes.setdefault(size, threading.Lock())
        with first:
            if size in self._ready:
                return call()
            out = call()
            self._ready.add(size)
            return out


def _run_chunks(fn, static, dynamic, plan, bar):
    """`fn` on this process's elements in chunks (the last one padded by
    repeating its last element), `_streams` of them at once; host arrays in
    element order."""
    size, n_local = plan.size, plan.n_local
    n_chunks = -(-n_local // size)
    padded = np.concatenate(
        [plan.local_index, np.full(n_chunks * size - n_local, plan.local_index[-1])]
    ).astype(int)

    first_call_alone = _FirstCallAlone()

    def run(c):
        index = padded[c * size : (c + 1) * size]
        chunk = jax.device_put(_take(dynamic, index), plan.target)
        out = first_call_alone(
            size, lambda: jax.device_get(_evaluate(fn, static, chunk, plan.sharding))
        )
        bar.update(min(size, n_local - c * size))
        return out

    outputs = _in_threads(
        [functools.partial(run, c) for c in range(n_chunks)], _streams(plan, n_chunks)
    )
    out_static = eqx.filter(outputs[0], eqx.is_array, inverse=True)
    stacked = jtu.tree_map(
        lambda *parts: np.concatenate(parts)[:n_local],
        *[eqx.filter(o, eqx.is_array) for o in outputs],
    )
    return eqx.combine(stacked, out_static)


def _gathered(stacked, n, distributed):
    """With `distributed`, every process's slice gathered into the whole batch."""
    if not distributed:
        return stacked
    from jax.experimental import multihost_utils

    dynamic, static = eqx.partition(stacked, eqx.is_array)
    gathered = multihost_utils.process_allgather(dynamic, tiled=True)
    dynamic = jtu.tree_map(lambda leaf: np.asarray(leaf)[:n], gathered)
    return eqx.combine(dynamic, static)
