r"""Batched evaluation: one compiled `jit(vmap(fn))` over a batch of inputs, cut into
chunks that bound memory, sharded over the local devices, and optionally split
across the processes of a multi-host run. Each element carries its own status, so
a failed element spoils no other. See [`hybrax.sweep`][] for running one sweep on
several hosts.
"""

import collections
import concurrent.futures
import dataclasses
import functools
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array, Bool, Complex, PyTree

from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import check_float64
from ._periodic import (
    FloquetAnalysis,
    PeriodicOrbit,
    PoincareSection,
    ShootingSafeguard,
    ShootingStart,
    find_periodic_orbit,
    loosen_max,
    loosened,
    modulus_key,
    poincare_map_with,
)
from ._programs import announcing_progress, compiled
from ._settings import (
    Settings,
    Shooting,
    check_iterations,
    resolve_options,
    resolve_settings,
    resolve_shooting,
)
from ._solution import RESULTS, STATUS_NAMES, Interrupted, status_code, status_name


_AXIS = "batch"
# The default lanes per device of an orbit sweep's compiled call on CPU. Under
# `vmap` a slow element holds every lane of its chunk: a hopper batch of 1024 on
# 2 cores (one chunk per core at once) had run 1518 / 2155 / 2204 / 2272
# orbits/s in chunks of 16 / 32 / 64 / 128 lanes, and with 10% of sets without
# an orbit 1063 / 1202 / 786 / 523 valid orbits/s. Since the fifth tight
# iterations run together at the queue's end (rounds of 4), the chunks' lanes
# finish their rounds alike, and wider chunks pay: medians of five alternating
# calls in one process, 32 / 48 / 64 lanes, clean 2587 / 2970 / 3403 orbits/s,
# infeasible 2068 / 2024 / 2134 valid orbits/s (64 against 128 in another:
# clean 3442 / 3543, infeasible 2127 / 1236).
_CPU_LANES = 64


def _cpu_lanes(n: int, n_devices: int) -> int:
    """The default lanes per device of a CPU chunk for `n` elements: `_CPU_LANES`
    where the batch fills two such chunks per core, else half as many, so that a
    small batch still gives every core chunks (a batch of 64 in one 64-lane chunk
    ran 1033 orbits/s on one core, against 1717-1807 in two of 32)."""
    if n >= 2 * _host_cores() * _CPU_LANES * n_devices:
        return _CPU_LANES
    return _CPU_LANES // 2


# Once the queue is empty, the elements still iterating after a round (those that
# did not finish in it, usually a few) move to a chunk smaller by a power of 8,
# of at least this many lanes per device (so that a batch compiles few sizes),
# instead of running in the full chunk whose idle lanes repeat them. On an H100 a
# variational pass over 1e5 lanes takes 264 ms and over 1e4 lanes 62 ms (bound
# by kernel launches below that). CPU chunks of the default 64 lanes never shrink.
_TAIL_LANES = 4096
# The default Newton iterations of a round (`sweep_orbits`' `round_iterations`):
# on a CPU 4, and a solve that needs a fifth tight iteration finishes it at the
# queue's end with the others; on an accelerator 5, since there the chunk is the
# whole batch and the elements left after 4 (17,613 of 1e5 hopper orbits) did not
# fit the eighth of the chunk they would move to (on an H100, 70,291 against
# 77,828 orbits/s in rounds of 4 and 8).
_CPU_ROUNDS = 4
_ACCELERATOR_ROUNDS = 5


# ---------------------------------------------------------------------------
# Generic batched evaluation
# ---------------------------------------------------------------------------


def process_slice(
    n: int, process_index: int | None = None, process_count: int | None = None
) -> slice:
    r"""The contiguous part of a batch of `n` elements that one process evaluates.

    Process $i$ of $P$ takes elements $[i c, \min((i + 1) c, n))$ with
    $c = \lceil n / P\rceil$ (the last processes may get fewer, or none). Defaults:
    `jax.process_index()` and `jax.process_count()`; with one process the slice is
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


class _Progress:
    """A progress bar over elements: tqdm where installed, else one `\r`-updated
    line on stderr; nothing when disabled."""

    def __init__(self, total: int, enabled: bool, desc: str):
        self.total = total
        self.done = 0
        self.enabled = enabled
        self.desc = desc
        self.start = time.perf_counter()
        self.bar = None
        self._lock = threading.Lock()  # chunks finish in several threads
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self._line()
        else:
            self.bar = tqdm(total=total, desc=desc, unit="el", file=sys.stderr)

    def _line(self):
        elapsed = time.perf_counter() - self.start
        percent = 100.0 * self.done / max(self.total, 1)
        print(
            f"\r{self.desc}: {self.done}/{self.total} ({percent:.0f}%) {elapsed:.1f} s",
            end="",
            file=sys.stderr,
            flush=True,
        )

    def update(self, count: int):
        with self._lock:
            self.done += count
            if not self.enabled:
                return
            if self.bar is not None:
                self.bar.update(count)
            else:
                self._line()

    def write(self, line: str):
        """Print `line` above the bar (a compilation's announcement)."""
        with self._lock:
            if self.bar is not None:
                self.bar.write(line, file=sys.stderr)
            else:
                print(f"\r{line}", file=sys.stderr, flush=True)
                self._line()

    def close(self):
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
        else:
            print(file=sys.stderr, flush=True)


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


@compiled("a sweep chunk")
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
    sizes, or `chunk_size` is not positive.

    !!! note "Several hosts"

        Every process runs the same script: call `jax.distributed.initialize()`
        before anything else touches JAX, build the *whole* batch on every
        process, and pass `distributed=True`:

        ```python
        import jax
        jax.distributed.initialize()  # coordinator, process id/count from env
        jax.config.update("jax_enable_x64", True)
        import hybrax as hx

        out = hx.sweep_orbits(system, section, guess, params, distributed=True)
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
    n = _batch_size(dynamic)
    plan = _plan(n, chunk_size, devices, distributed)
    bar = _Progress(plan.n_local, progress and jax.process_index() == 0, desc)
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


def _host_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _streams(plan, n_chunks: int, rounds: bool = False) -> int:
    """How many chunks run at once, each called from its own host thread.

    On one CPU device: one per core. XLA runs a call on one thread (a solver's
    loops compile to single kernels), and calls from different threads run
    concurrently (a 64-lane variational pass of the hopper: 10.0 ms alone, 13.2
    ms for two from two threads, 20.3 ms for two from one thread). Elsewhere a
    call already uses the whole device (or every device of a sharded chunk):
    two chunk calls, so that one is prepared and fetched while the other runs
    (`rounds`: one, since the elements of a round's chunk depend on the last).
    Never more than `n_chunks`. JAX compiles a program once when several threads
    first call it together (the others wait for it)."""
    if plan.sharding is None and plan.target.platform == "cpu":
        cores = _host_cores()
    else:
        cores = 1 if rounds else 2
    return max(1, min(cores, n_chunks))


def _in_threads(tasks, n_threads: int, stop: threading.Event | None = None) -> list:
    """The results of `tasks` (callables without arguments), run on `n_threads`
    host threads, in order. As soon as one raises, or the caller is interrupted
    (Ctrl-C), `stop` is set (for tasks that loop) and the tasks not started are
    dropped; the error is raised once the running ones have returned."""

    def guarded(task):
        try:
            return task()
        except BaseException:
            if stop is not None:
                stop.set()
            raise

    pool = concurrent.futures.ThreadPoolExecutor(n_threads)
    futures = [pool.submit(guarded, task) for task in tasks]
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
    `geev` is slower still (see `hybrax._periodic.spectrum._eigenvalues`). On an H100 a
    sweep of 1e5 hopper orbits took 1.285 s with the eigenvalues in its program
    and 1.238 s with them here."""
    matrices = np.asarray(matrices, dtype=float)
    out = np.full(matrices.shape[:-1], np.nan, dtype=complex)
    rows = np.flatnonzero(np.all(np.isfinite(matrices), axis=(-2, -1)))
    n_pieces = max(1, min(_host_cores(), rows.size // _EIG_PIECE))

    def piece(rows):
        eig = np.linalg.eigvals(matrices[rows])
        order = np.argsort(modulus_key(eig, np), axis=-1, kind="stable")
        out[rows] = np.take_along_axis(eig, order, axis=-1)

    pieces = np.array_split(rows, n_pieces)
    _in_threads([functools.partial(piece, r) for r in pieces], n_pieces)
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

    def run(c):
        index = padded[c * size : (c + 1) * size]
        chunk = jax.device_put(_take(dynamic, index), plan.target)
        out = jax.device_get(_evaluate(fn, static, chunk, plan.sharding))
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


# ---------------------------------------------------------------------------
# Periodic orbits over a batch of parameters
# ---------------------------------------------------------------------------


class OrbitSweep(eqx.Module):
    r"""The result of [`hybrax.sweep_orbits`][]: one periodic orbit per batch
    element, as NumPy arrays with a leading batch axis $B$.

    - `orbit`: a batched [`hybrax.PeriodicOrbit`][] (its `result` the status of each
      element).
    - `multipliers`: the eigenvalues of the reduced Jacobian `orbit.reduced_jacobian`
      ($M = J + I$, eqs. 32-33 of Zana et al. 2018) sorted by decreasing modulus,
      shape `(B, k)`: the nontrivial Floquet multipliers (the trivial 1 is removed by
      the section; for the hopper the second is the 0 of landing on the lift-off
      surface). NaN where no orbit was found.
    - `floquet` (`orbit.floquet`): a batched [`hybrax.FloquetAnalysis`][] with
      `analyse=True`, else `None`.
    - `result` (`orbit.result`): the batched [`hybrax.RESULTS`][] status of each
      element; `succeeded` where it is `successful`; `status_names` its names
      (`hybrax.status_code(out.result)` gives integer codes, positions in
      `hybrax.STATUS_NAMES`).
    - `retried`: whether the element, without an orbit from its guess, was solved
      again from its nearest converged neighbour's orbit (`retry=True`). An
      element without an orbit that was retried has none on the family of its
      neighbours' orbits either; one that was not had no converged neighbour
      (or `retry=False`); its status is that of the first solve.
    """

    orbit: PeriodicOrbit
    multipliers: Complex[Array, "B k"]
    retried: Bool[Array, " B"]

    @property
    def result(self) -> RESULTS:
        """The status of each element (`orbit.result`)."""
        return self.orbit.result

    @property
    def floquet(self) -> FloquetAnalysis | None:
        """The batched Floquet analysis (`analyse=True`), else `None`."""
        return self.orbit.floquet

    @property
    def status_names(self) -> list[str]:
        """The status name of each element, e.g. `"shooting_failed"`."""
        return status_name(self.orbit.result)

    @property
    def succeeded(self) -> np.ndarray:
        """Whether each element is a valid periodic orbit (its `result` is
        `successful`)."""
        return np.asarray(self.orbit.result == RESULTS.successful)

    @property
    def leading_multiplier(self) -> np.ndarray:
        """The nontrivial multiplier of largest modulus of each element."""
        return np.asarray(self.multipliers)[:, 0]


# The status code of an element an interrupt left unsolved.
_NOT_RUN = STATUS_NAMES.index("not_run")

# Where an orbit element's solve starts (see `_OrbitSolve`).
_RESUME, _FROM_GUESS, _FROM_U = 0, 1, 2


class _OrbitSolve(eqx.Module):
    """`fn` of [`hybrax.sweep`][] for [`hybrax.sweep_orbits`][]: one orbit from one
    `(params, u, start, loosening, beyond, safeguard)` element. `start` is
    `_FROM_GUESS` (the guess, then the return-map iterations), `_FROM_U` (`u`, a
    warm start, then the return-map iterations) or `_RESUME` (`u`, the last iterate
    of an earlier round, without them); `loosening` is the first Newton iteration's
    (`ShootingStart.loosening`), `beyond` the iterations of this round past the
    element's share of the sweep's `max_iterations` (its
    `ShootingStart.iterations_used`: a solve's last round stops where the uncut
    solve would), `safeguard` the safeguarded Newton's memory where it stopped
    (empty for a fresh start). `shooting.max_iterations` is a round's. The
    iteration counts and tolerances are run-time values (one program serves them
    all)."""

    system: HybridSystem
    section: PoincareSection
    guess: Any  # a callable `guess(params)`, or None (the element carries it)
    settings: Settings
    shooting: Shooting
    analyse: bool = eqx.field(static=True)
    phase_observables: bool = eqx.field(static=True)

    def start(self, params, u, start):
        """Where the element's root finder starts (see the class)."""
        if self.guess is not None:
            guess = jnp.asarray(self.guess(params), dtype=jnp.result_type(float))
            u = jnp.where(start == _FROM_GUESS, guess, u)
        return u

    def __call__(self, element):
        params, u, start, loosening, beyond, safeguard = element
        u = self.start(params, u, start)
        # A resumed round takes no return-map iterations (its first round did).
        shooting = eqx.tree_at(
            lambda s: s.return_map_iterations,
            self.shooting,
            jnp.where(start == _RESUME, 0, self.shooting.return_map_iterations),
        )
        orbit = find_periodic_orbit(
            self.system,
            self.section,
            # See `_run_rounds`: for a resumed solve where it stopped, so that
            # cutting a solve into rounds changes none of its iterates. A fresh
            # start's memory is empty (`_fresh_safeguards`).
            ShootingStart(u, loosening, beyond, safeguard),
            params,
            shooting=shooting,
            settings=self.settings,
            analyse=self.analyse,
            phase_observables=self.phase_observables,
        )
        # The multipliers are computed on the host once the batch is back
        # (`sorted_multipliers_batch`).
        return orbit


class _StartDefect(eqx.Module):
    r"""`fn` of [`hybrax.sweep`][] giving an orbit element's return-map defect at
    its start $u_0$, $\max_i |P(u_0) - u_0|_i$ ($\infty$ where the cycle fails):
    one forward cycle at the loosest tolerance of a shooting iteration
    (`_periodic.newton._LOOSE_TOL`), a fraction of a Newton iteration's variational
    pass."""

    solve: _OrbitSolve

    def __call__(self, element):
        params, u, start, *_ = element
        solve = self.solve
        u = solve.start(params, u, start)
        # At the loosest tolerance of a Newton iteration: the defect only orders
        # the queue.
        loose = loosened(solve.settings, loosen_max(solve.settings))
        # NaN where the cycle failed.
        u_next, _ = poincare_map_with(
            solve.system, solve.section, u, params, loose, dfx.ForwardMode()
        )
        defect = jnp.max(jnp.abs(u_next - u))
        return jnp.where(jnp.isfinite(defect), defect, jnp.inf)


def _queue_by_defect(fn, static, dynamic, u, plan):
    """This process's elements (positions `0 .. plan.n_local - 1`) ordered by their
    start's return-map defect, largest first (a failed cycle's infinite defect
    first; stable). Newton's iterations grow with the defect, and parameter sets
    without an orbit have large defects or fail: the longest jobs first, as in
    scheduling. An element whose cycle fails leaves after the first rounds, which
    hold the slow cycles (to `t_max`) together; one that needs many rounds runs
    them while the queue still fills its chunk's other lanes. Queued last (the
    order before), such elements had held chunks of idle lanes for their last
    rounds: on a 2-core CPU the hopper batch of 1024 with 10% of sets without an
    orbit ran 1163 valid orbits/s queued smallest first and 1280 largest first
    (clean: 1999 and 2097 orbits/s)."""
    quiet = _Progress(plan.n_local, False, "")
    n = u.shape[0]
    element = (
        dynamic,
        np.asarray(u),
        np.full(n, _FROM_GUESS, np.int8),
        np.full(n, np.inf),
        np.zeros(n, int),
        _fresh_safeguards(np.asarray(u)),
    )
    defect = _run_chunks(_StartDefect(fn), static, element, plan, quiet)
    return np.argsort(-np.asarray(defect), kind="stable")


def _fresh_safeguards(u) -> ShootingSafeguard:
    """Empty safeguard memories (nothing evaluated yet), one per row of `u`
    (host arrays)."""
    n = u.shape[0]
    return ShootingSafeguard(
        best_iterate=np.zeros_like(u),
        best_image=np.zeros_like(u),
        best_step=np.zeros_like(u),
        best_jacobian=np.full(u.shape + u.shape[1:], np.nan, u.dtype),
        best_defect=np.full(n, np.inf, u.dtype),
        trial=np.zeros(n, np.int32),
        least_defect=np.full(n, np.inf, u.dtype),
        stale=np.zeros(n, np.int32),
        strict=np.zeros(n, bool),
        start=np.zeros_like(u),
        rejected=np.zeros(n, bool),
        dead=np.zeros(n, bool),
    )


# The converged orbits (the newest) among which a warm start looks for the nearest:
# bounds the host work per round for any batch size.
_WARM_POOL = 4096


def _parameter_features(dynamic, n) -> np.ndarray:
    """Each element's float parameters as a row, every column scaled to unit spread
    over the batch (constant columns dropped): the metric of the warm starts."""
    columns = [
        np.asarray(leaf, float).reshape(n, -1)
        for leaf in _leaves(dynamic)
        if np.issubdtype(np.asarray(leaf).dtype, np.floating)
    ]
    if not columns:
        return np.zeros((n, 0))
    features = np.concatenate(columns, axis=1)
    spread = np.std(features, axis=0)
    keep = spread > 0
    return features[:, keep] / spread[keep]


def _nearest_solved(features, elements, solved, solved_u):
    """For each of `elements`, the orbit `u` of the nearest `solved` element."""
    gaps = features[np.asarray(elements)][:, None, :] - features[list(solved)][None]
    return np.asarray(solved_u)[np.argmin(np.sum(gaps**2, axis=-1), axis=1)]


def _nearest_orbits(features, elements, solved, solved_u, block=1024):
    """`_nearest_solved` for many `elements` against many `solved` ones: among at
    most `_WARM_POOL` of the solved (evenly spaced in batch order), in blocks of
    `block` elements (bounded memory for any batch)."""
    solved = np.asarray(solved)
    solved_u = np.asarray(solved_u)
    if solved.size > _WARM_POOL:
        keep = np.linspace(0, solved.size - 1, _WARM_POOL).astype(int)
        solved, solved_u = solved[keep], solved_u[keep]
    return np.concatenate(
        [
            _nearest_solved(features, elements[i : i + block], solved, solved_u)
            for i in range(0, len(elements), block)
        ]
    )


def _retry_from_neighbours(fn, static, dynamic, u, plan, max_iterations, orbit):
    r"""The elements without an orbit solved once more, each from the orbit of the
    converged element nearest to it in parameters (`_parameter_features`; a warm
    start where the element's own guess was too far from its family's orbit).
    Returns the orbits (local rows) with those that now converged replaced, every
    retried element's `n_steps` counting both solves, and the mask of the
    retried elements (those without an orbit while some element had one)."""
    n_local = plan.n_local
    code = np.asarray(status_code(orbit.result))
    solved = np.flatnonzero(code == 0)
    failed = np.flatnonzero(code != 0)
    retried = np.zeros(n_local, bool)
    if not solved.size or not failed.size:
        return orbit, retried
    features = _parameter_features(_take(dynamic, plan.local_index), n_local)
    u_all = np.array(u)
    u_all[plan.local_index[failed]] = _nearest_orbits(
        features, failed, solved, np.asarray(orbit.u)[solved]
    )
    starts = np.full(n_local, _FROM_GUESS, np.int8)
    starts[failed] = _FROM_U
    quiet = _Progress(n_local, False, "")
    try:
        again = _run_rounds(
            fn,
            static,
            dynamic,
            u_all,
            plan,
            quiet,
            max_iterations,
            order=failed,
            starts=starts,
        )
        stopped = None
    except _Stopped as interrupted:
        # The retries that finished count; the others keep their first solve.
        stopped, again = interrupted, interrupted.orbit
        failed = failed[np.asarray(status_code(again.result))[failed] != _NOT_RUN]
    except KeyboardInterrupt:  # before any retry finished
        raise _Stopped(orbit, retried) from None
    retried[failed] = True
    found = failed[np.asarray(status_code(again.result))[failed] == 0]
    steps = np.array(orbit.n_steps)
    steps[failed] += np.asarray(again.n_steps)[failed]

    def merge(first, second):
        if not eqx.is_array(first):
            return first
        merged = np.array(first)
        merged[found] = np.asarray(second)[found]
        return merged

    orbit = jtu.tree_map(merge, orbit, again)
    orbit = eqx.tree_at(lambda o: o.n_steps, orbit, steps)
    if stopped is not None:
        raise _Stopped(orbit, retried) from None
    return orbit, retried


def _tail_size(size: int, n_live: int, n_devices: int) -> int:
    """The lanes of the chunk that runs `n_live` remaining elements once the queue
    is empty: `size` divided by 8 while that holds them and keeps at least
    `_TAIL_LANES` lanes per device."""
    per_device = size // n_devices
    while per_device // 8 >= _TAIL_LANES and (per_device // 8) * n_devices >= n_live:
        per_device //= 8
    return per_device * n_devices


def _run_rounds(
    fn,
    static,
    dynamic,
    u,
    plan,
    bar,
    max_iterations,
    order=None,
    warm_start=False,
    starts=None,
):
    r"""Orbit solves in rounds of `fn.shooting.max_iterations` root-finder
    iterations, with compaction: a chunk of `plan.size` lanes runs one round; an element
    that converged or failed leaves its lane, which the next element of the queue takes,
    and an element that ran out of the round's iterations resumes from its last iterate
    while it has used fewer than `max_iterations` (its last round stops at that many):
    in its lane while its iterations are loosened, else from the queue's end (see
    `sweep_orbits`' `round_iterations`). Under `vmap` a lane costs as much as the
    chunk's slowest, so a slow element holds its chunk for one round only, not for all
    its iterations. Once the queue is empty, the remaining elements run in a smaller
    chunk where they fit one (`_tail_size`).

    `dynamic`: the parameters' arrays, `u`: the guesses (host arrays, rows in
    element order); `order`: the queue (this process's element positions), by
    default their order. With `warm_start`, an element that takes a lane once some
    have converged starts from the orbit of the converged element nearest in
    parameters (`_parameter_features`) instead of its guess (then the return-map
    iterations, as from the guess). On a CPU `_streams` chunks run at once, one
    per core, each with its own rounds, taking elements from one shared queue
    (dealt in turn, a stream that drew the slow elements had run alone at the
    end). Returns the outputs of `fn` (host arrays, element order) with `n_steps`
    counting the iterations of all rounds. `starts`: each element's `start`
    (default `_FROM_GUESS`); only the rows of the queue are filled."""
    size, n_local = plan.size, plan.n_local
    per_round = fn.shooting.max_iterations
    u = np.array(u[plan.local_index])
    start = (
        np.full(n_local, _FROM_GUESS, np.int8)
        if starts is None
        else np.array(starts, np.int8)
    )
    # The first iteration's loosening (`ShootingStart.loosening`):
    # where it stopped for a resumed solve; else the loosest, unless the
    # return-map iterations have pulled the start near its orbit (a loose
    # cycle's error would spoil the first step there). A warm start from a
    # neighbour's orbit starts loosest too: on the hopper batch of 1024 it ran
    # 1.02-1.11x the cold batch so, 0.89-0.93x at the settings' tolerance.
    map_iterations = int(fn.shooting.return_map_iterations)
    loosening = np.full(n_local, 1.0 if map_iterations else np.inf)
    used = np.zeros(n_local, int)  # Newton iterations
    # Where a resumed solve's safeguarded Newton stopped (empty for the others).
    safeguards = _fresh_safeguards(u)
    mapped = np.zeros(n_local, int)  # return-map iterations
    queue = np.arange(n_local) if order is None else np.asarray(order)
    n_devices = 1 if plan.sharding is None else len(plan.sharding.device_set)
    # The finished outputs, allocated from the first round's (`results[0]`), and
    # their static part (`results[1]`).
    results = [None, None]
    if warm_start:
        features = _parameter_features(_take(dynamic, plan.local_index), n_local)
    # The newest converged elements and their orbits (read and extended together).
    solved = collections.deque(maxlen=_WARM_POOL)
    solved_u = collections.deque(maxlen=_WARM_POOL)
    lock = threading.Lock()
    stop = threading.Event()  # set when a stream failed or the caller interrupted
    finished = []  # the elements whose outputs are stored (for an interrupt)

    # The queue, shared by the streams (read and extended under `lock`):
    # `waiting[0][waiting[1]:]` are still waiting.
    waiting = [queue, 0]

    def take(n_free):
        """Up to `n_free` waiting elements, and whether the queue is now empty."""
        with lock:
            queue, head = waiting
            entering = queue[head : head + n_free]
            waiting[1] = head + entering.size
            return entering, waiting[1] == queue.size

    def run_stream():
        """Rounds in a chunk of its own, taking its elements from the shared queue.
        Streams share the element arrays above but no element (their writes are
        disjoint)."""
        lanes = np.full(size, -1)
        while not stop.is_set():
            # Array operations throughout, not loops over lanes: on an accelerator a
            # chunk holds the whole batch (1e5 lanes and more).
            free = np.flatnonzero(lanes < 0)
            entering, drained = take(free.size)
            free = free[: entering.size]
            lanes[free] = entering
            if warm_start:
                # For the elements entering for the first time (a resumed one
                # goes on from its last iterate).
                fresh = entering[start[entering] == _FROM_GUESS]
                with lock:
                    if solved and fresh.size:
                        u[fresh] = _nearest_solved(features, fresh, solved, solved_u)
                        start[fresh] = _FROM_U
            live = lanes >= 0
            if not live.any():
                return
            if drained:
                n_live = int(live.sum())
                smaller = _tail_size(lanes.size, n_live, n_devices)
                if smaller < lanes.size:
                    lanes = np.concatenate([lanes[live], np.full(smaller - n_live, -1)])
                    live = lanes >= 0
            # Idle lanes repeat a live element (their results are dropped).
            elements = np.where(live, lanes, lanes[live][0])
            chunk = jax.device_put(
                (
                    _take(dynamic, plan.local_index[elements]),
                    u[elements],
                    start[elements],
                    loosening[elements],
                    # The round's iterations beyond the element's share of
                    # `max_iterations` (`ShootingStart.iterations_used`): its
                    # last round stops where an uncut solve would.
                    np.maximum(0, per_round - (max_iterations - used[elements])),
                    jtu.tree_map(lambda leaf: leaf[elements], safeguards),
                ),
                plan.target,
            )
            # One transfer of all leaves (NumPy arrays back).
            orbit = jax.device_get(_evaluate(fn, static, chunk, plan.sharding))
            out_dynamic, static_part = eqx.partition(orbit, eqx.is_array)
            with lock:
                if results[0] is None:
                    results[0] = jtu.tree_map(
                        lambda leaf: np.empty((n_local,) + leaf.shape[1:], leaf.dtype),
                        out_dynamic,
                    )
                    results[1] = static_part
            rows = results[0]
            steps = np.asarray(orbit.n_steps)
            # A fresh solve's first iterations are its return-map iterations
            # (see `find_periodic_orbit`): they count apart from Newton's.
            fresh = start[elements] != _RESUME
            map_steps = np.where(fresh, np.minimum(steps, map_iterations), 0)
            steps = steps - map_steps
            unfinished = np.asarray(orbit.result == RESULTS.shooting_failed) & (
                steps >= per_round
            )
            converged = np.asarray(orbit.result == RESULTS.successful)
            live_lanes = np.flatnonzero(live)
            elements = lanes[live_lanes]  # distinct
            used[elements] += steps[live_lanes]
            mapped[elements] += map_steps[live_lanes]
            resume = unfinished[live_lanes] & (used[elements] < max_iterations)
            u[elements[resume]] = np.asarray(orbit.restart.u)[live_lanes[resume]]

            def keep(row, leaf, targets=elements[resume], lanes=live_lanes[resume]):
                row[targets] = leaf[lanes]
                return row

            jtu.tree_map(keep, safeguards, orbit.restart.safeguard)
            start[elements[resume]] = _RESUME
            next_loosening = np.asarray(orbit.restart.loosening)[live_lanes]
            loosening[elements[resume]] = next_loosening[resume]
            # A resumed solve whose next iteration is at the settings' tolerance
            # (near its orbit: usually one more) leaves its lane for the queue's
            # end, so that the tail runs such iterations together. Kept in its
            # lane, it made its chunk's next elements pay a tight cycle for their
            # loose first iteration. A solve still taking large (loose) steps keeps
            # its lane: among fresh elements it costs little, and at the end it
            # would hold chunks of idle lanes for its rounds.
            requeue = resume & (next_loosening <= 1)
            if requeue.any():
                with lock:
                    waiting[0] = np.concatenate([waiting[0], elements[requeue]])
                lanes[live_lanes[requeue]] = -1
            finished_lanes = live_lanes[~resume]
            if warm_start:
                newly_solved = finished_lanes[converged[finished_lanes]]
                with lock:
                    solved.extend(lanes[newly_solved])
                    solved_u.extend(np.asarray(orbit.u)[newly_solved])
            if finished_lanes.size:
                targets = lanes[finished_lanes]

                def store(row, leaf, targets=targets, finished_lanes=finished_lanes):
                    row[targets] = leaf[finished_lanes]
                    return row

                jtu.tree_map(store, rows, out_dynamic)
                rows.n_steps[targets] = used[targets] + mapped[targets]
                with lock:
                    finished.extend(targets.tolist())
                lanes[finished_lanes] = -1
                bar.update(len(finished_lanes))

    # Several streams, each a chunk of its own, share the queue.
    n_streams = _streams(plan, -(-n_local // size), rounds=True)
    try:
        _in_threads([run_stream] * n_streams, n_streams, stop)
    except KeyboardInterrupt:
        # `_in_threads` has let the running rounds end and store their finished
        # elements; the rest were not solved.
        if results[0] is None:
            raise
        done = np.zeros(n_local, bool)
        done[finished] = True
        partial = _not_run(eqx.combine(results[0], results[1]), done)
        partial.n_steps[~done] = (used + mapped)[~done]
        raise _Stopped(partial, np.zeros(n_local, bool)) from None
    return eqx.combine(results[0], results[1])


class _Stopped(Exception):
    """Ctrl-C during the rounds: the local orbits so far (`_not_run` where
    unfinished) and the retried mask, for `sweep_orbits` to hand back."""

    def __init__(self, orbit, retried):
        super().__init__("interrupted")
        self.orbit, self.retried = orbit, retried


def _not_run(orbit, done):
    """`orbit` (host rows) with the rows not `done` blanked: NaN floats, -1
    integers, `False` booleans, the status `not_run`."""

    def blank(leaf):
        if not eqx.is_array(leaf):
            return leaf
        leaf = np.array(leaf)
        if np.issubdtype(leaf.dtype, np.inexact):
            leaf[~done] = np.nan
        elif leaf.dtype == bool:
            leaf[~done] = False
        else:
            leaf[~done] = -1
        return leaf

    result = jtu.tree_map(
        lambda code, not_run: np.where(done, code, not_run),
        orbit.result,
        RESULTS.not_run,
    )
    return eqx.tree_at(lambda o: o.result, jtu.tree_map(blank, orbit), result)


def _rows(tree, rows, n):
    """The elements `rows` of a batch PyTree (leaves with leading axis `n`)."""
    return jtu.tree_map(
        lambda leaf: (
            np.asarray(leaf)[rows]
            if eqx.is_array_like(leaf) and np.ndim(leaf) >= 1 and np.shape(leaf)[0] == n
            else leaf
        ),
        tree,
    )


def _resumed(resume, n, solve) -> OrbitSweep:
    """`resume` (an interrupted sweep of `n` elements) with its `not_run`
    elements replaced by `solve(rows)`'s; Ctrl-C there raises
    [`hybrax.Interrupted`][] with the merged sweep so far."""
    if not isinstance(resume, OrbitSweep) or np.shape(resume.retried) != (n,):
        raise ValueError(
            f"`resume` must be the OrbitSweep of an interrupted sweep of this batch "
            f"({n} elements); got {type(resume).__name__} of shape "
            f"{np.shape(getattr(resume, 'retried', None))}."
        )
    rows = np.flatnonzero(status_code(resume.result) == _NOT_RUN)
    if not rows.size:
        return resume

    def merged(part):
        def put(whole, piece):
            if not eqx.is_array(whole):
                return whole
            whole = np.array(whole)
            whole[rows] = np.asarray(piece)
            return whole

        return jtu.tree_map(put, resume, part)

    try:
        part = solve(rows)
    except Interrupted as stop:
        if stop.partial is None:
            raise Interrupted(resume, str(stop)) from None
        whole = merged(stop.partial)
        n_run = int(np.sum(status_code(whole.result) != _NOT_RUN))
        raise Interrupted(whole, f"interrupted after {n_run} of {n} elements") from None
    return merged(part)


def _float_leaf(leaf) -> bool:
    return isinstance(leaf, float | np.floating) or (
        eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.floating)
    )


def _batch_params(params_batch):
    """Float leaves as NumPy arrays of the default float dtype, scalars broadcast
    to the batch size; returns `(params, n)`."""
    dtype = jnp.result_type(float)
    sizes = {
        np.shape(leaf)[0]
        for leaf in jtu.tree_leaves(params_batch)
        if _float_leaf(leaf) and np.ndim(leaf) >= 1
    }
    if len(sizes) != 1:
        raise ValueError(
            "`params_batch` needs float leaves with one common leading batch axis "
            f"(scalar leaves are shared); got batch sizes {sorted(sizes) or 'none'}."
        )
    n = sizes.pop()
    if n == 0:
        raise ValueError("`params_batch` is empty: its leading axis has length 0.")

    def convert(leaf):
        if not _float_leaf(leaf):
            return leaf
        leaf = np.asarray(leaf, dtype=dtype)
        return np.broadcast_to(leaf, (n,)) if leaf.ndim == 0 else leaf

    return jtu.tree_map(convert, params_batch), n


def _guess_size(guess, params_batch) -> int:
    """The length of the unknowns `guess(params)` returns (traced, not run)."""
    one = jtu.tree_map(
        lambda leaf: leaf[0] if eqx.is_array(leaf) else leaf, params_batch
    )
    return int(jax.eval_shape(guess, one).shape[0])


def _finite_rows(tree, n) -> np.ndarray:
    ok = np.ones(n, bool)
    for leaf in jtu.tree_leaves(tree):
        if eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.inexact):
            ok &= np.all(np.isfinite(np.asarray(leaf).reshape(n, -1)), axis=1)
    return ok


class SweepSettings(eqx.Module):
    r"""How [`hybrax.sweep_orbits`][] runs its batch: in chunks on which devices
    and processes, and how the solves are scheduled in them. None of these
    changes an element's orbit (except `warm_start` and `retry`, which change its
    start); they change the time.

    - `devices`, `distributed`: see [`hybrax.sweep`][].
    - `chunk_size`: the lanes of one compiled call (see below); default on CPU 64
      per device where the batch fills two such chunks per core, else 32 (so
      that every core gets chunks; a slow element holds every lane of its chunk,
      and wider ones lost the throughput of batches with sets without an orbit),
      the whole batch on accelerators.
    - `round_iterations`: the root-finder iterations of one round; `None`: one
      round of the shooting's `max_iterations`; `"auto"` (default): 4 on a CPU, 5 on an
      accelerator (about what Newton's method takes from a fair guess; see
      below). The solves run in rounds with
      compaction: after each round the elements that converged or failed leave
      their lanes to the next elements of the batch, and those that ran out of
      the round's iterations resume from their last iterate (Newton's iterates
      do not depend on where a run was cut) while they have used fewer than
      `max_iterations`, and stop at that many as an uncut solve does (with a
      least-squares `root_finder`, in whole rounds: at least that many).
      A resumed solve still taking loose steps keeps its lane; one whose next
      iteration is at the settings' tolerance (near its orbit, usually one more)
      moves to the queue's end, so that such iterations run together once the
      fresh elements have entered (kept in its lane, its tight cycle set the pace
      of the chunk's fresh elements' loose first iterations). On the hopper
      batch of 1024 of `experiments/bench_sweep.py` (2-core CPU), rounds of 4
      with these moves against rounds of 5 in place (32-lane chunks): 0.599
      against 0.634 ms of CPU per orbit clean, 0.705 against 0.797 with 10% of
      sets without an orbit (medians of six alternating calls in one process).
      On an accelerator, where the chunk is the whole batch, rounds of 4 had
      left more elements than an eighth of the chunk (below). Under `vmap` an
      element costs its chunk as much as its slowest lane, so a slow element
      holds lanes for one round instead of all its iterations; within a round,
      a lane whose root finder has stopped runs zero-length cycles. On the
      hopper (these defaults, `t_max` 5), a batch of 1024 with 10% of parameter
      sets without an orbit: 0.98 s in rounds of 5 against 1.34 s in one round,
      both in batch order (`experiments/bench_sweep.py`, 32-lane chunks, two at
      once on a 2-core CPU; 72 s as one chunk of 1024 lanes).
      Once the queue is empty, the elements still iterating move to a chunk
      smaller by a power of 8 where one of at least 4096 lanes per device holds
      them (on an H100, one chunk of 1e5 lanes with 10% of sets without an
      orbit: 17.5 s in rounds of 8 against 32.1 s in one round). A round as long
      as most elements need sends the few that need more to that smaller chunk:
      on an H100, a clean batch of 1e6 hopper orbits (most converge in 4-5
      iterations, a few need 8) ran at 107,605 orbits/s in rounds of 5 against
      72,216 in rounds of 8; on the CPU (64-lane chunks, one at a time) 5 and 8
      gave the same throughput, clean (1203 orbits/s) and with 10% infeasible
      sets (601 and 591 valid orbits/s).
    - `order`: the order in which elements take lanes when the batch is larger
      than a chunk. `"defect"` (default): by the return-map defect
      $\max_i |P(u_0) - u_0|_i$ at each element's start, largest first (one
      forward cycle per element, in chunks, before the solves): the elements
      that need many iterations or have no orbit start first, and their last
      rounds do not hold chunks of idle lanes at the end (on the batch above:
      0.77 s against 1.0 s; on the clean batch the extra cycle costs about 0.04
      s of 0.5 s).
      `None`: batch order. The results do not depend on it (lanes are
      independent); only the time does.
    - `warm_start`: each element that takes a lane after some orbits have
      converged starts from the orbit of the converged element nearest to it in
      parameters (float leaves, each scaled to unit spread over the batch; among
      the newest 4096) instead of `u_guess` (the return-map iterations still
      apply). Without return-map iterations this saves Newton iterations on
      dense grids and small boxes (hopper batch of 1024 above: 3.7 against 4.1 on
      average) but not time there: 0.87-0.90x the cold batch's orbits/s
      (`experiments/bench_sweep.py`, calls alternating with the cold batch's),
      since the iterations saved are the loose, cheap ones and a solve still
      ends with two at the settings' tolerance; the orbits agree with the default's to
      the root finder's tolerance, but no longer bitwise, and depend on the batch
      (its order, chunks and processes). Where several orbits coexist a
      neighbour's may pull an element to another branch than its guess would
      (on a 32 x 32 hopper grid it found 868 orbits against 660, some of them the
      other orbit of their parameter set): use continuation to follow one branch.
      Default off.
    - `retry`: solve each element without an orbit once more, from the orbit of
      the converged element nearest to it in parameters (scaled as for
      `warm_start`), before reporting it (`OrbitSweep.retried`); where it
      converges it replaces the first result (possibly an orbit of another
      branch where several coexist, as with `warm_start`). Default on: an element
      is reported without an orbit only where neither its guess nor its
      nearest neighbour's orbit leads to one.
    """

    chunk_size: int | None = eqx.field(static=True, default=None)
    devices: tuple[Any, ...] | None = eqx.field(
        static=True, default=None, converter=lambda d: None if d is None else tuple(d)
    )
    distributed: bool = eqx.field(static=True, default=False)
    round_iterations: int | None | str = eqx.field(static=True, default="auto")
    order: str | None = eqx.field(static=True, default="defect")
    warm_start: bool = eqx.field(static=True, default=False)
    retry: bool = eqx.field(static=True, default=True)

    def __check_init__(self):
        if self.chunk_size is not None:
            check_iterations(self.chunk_size, "chunk_size")
        if isinstance(self.round_iterations, str):
            if self.round_iterations != "auto":
                raise ValueError(
                    "`round_iterations` must be a positive integer, None or "
                    f"'auto'; got {self.round_iterations!r}."
                )
        elif self.round_iterations is not None:
            check_iterations(self.round_iterations, "round_iterations")
        if self.order not in ("defect", None):
            raise ValueError(f"`order` must be 'defect' or None; got {self.order!r}.")
        if self.devices is not None and not self.devices:
            raise ValueError("`devices` must name at least one device, or be None.")


def sweep_orbits(
    system: HybridSystem,
    section: PoincareSection,
    u_guess: Any,
    params_batch: Params,
    *,
    analyse: bool = False,
    shooting: Shooting | None = None,
    settings: Settings | None = None,
    sweep_settings: SweepSettings | None = None,
    phase_observables: bool = False,
    progress: bool = False,
    resume: OrbitSweep | None = None,
) -> OrbitSweep:
    r"""Periodic orbits and their multipliers for a batch of parameter sets, with
    [`hybrax.find_periodic_orbit`][] under one compiled `jit(vmap(...))` (see
    [`hybrax.sweep`][] for chunks, devices and processes).

    Element $i$ solves exactly what `find_periodic_orbit(system, section,
    hybrax.ShootingStart(u_i, loosening=L), params_i, shooting=shooting,
    analyse=analyse, ...)` solves, with `L = math.inf` (the first Newton iteration
    at the loosest tolerance: the start is rough) or, with the shooting's
    `return_map_iterations` (which pull the start near a stable orbit), `L =
    1.0`; so the sweep equals a loop of single solves. Its multipliers are
    the eigenvalues of the reduced Jacobian $M$ sorted by decreasing modulus
    (with `analyse=True` the full [`hybrax.FloquetAnalysis`][] too, several
    times slower). Each element carries its status; a failed element is flagged
    and affects no other. An element with non-finite parameters or guess is not
    solved: its status is `nonfinite_parameters` and its values NaN (solving it
    would only hold up its chunk until every step limit is spent).

    **Arguments:**

    - `system`, `section`: as for [`hybrax.find_periodic_orbit`][].
    - `u_guess`: the guess of the reduced unknowns: one array `(k,)` for all
      elements, one per element `(B, k)`, or a callable `u_guess(params) -> (k,)`
      applied to each element's parameters (e.g. `hybrax.models.hopper.orbit_guess`).
    - `params_batch`: the parameter PyTree with float leaves of leading axis $B$;
      scalar leaves are shared by all elements (broadcast).
    - `sweep_settings`: a [`hybrax.SweepSettings`][]: chunks, devices, processes
      and how the solves are scheduled (default: `SweepSettings()`).
    - `progress`: a progress bar (see [`hybrax.sweep`][]).
    - `analyse`: also return the Floquet analysis (monodromy by AD and saltation).
    - `shooting`, `settings`, `phase_observables`: passed to
      `find_periodic_orbit` (same defaults, except `phase_observables=False`: the
      cycle's phase observables are recorded only on request). In a batch the
      slowest element sets the pace: smaller `settings.t_max`,
      `settings.max_steps` and `shooting.max_iterations` bound what a hopeless
      element costs. Failed elements are NaN with their status.
    - `resume`: the `partial` sweep of an earlier call on this batch that was
      interrupted ([`hybrax.Interrupted`][]): its finished elements are kept as
      they are and only those with the status `not_run` are solved (their retry
      from a neighbour's orbit looks among themselves). Default `None`.

    **Returns:** an [`hybrax.OrbitSweep`][] (NumPy arrays, batch axis first).

    **Raises:** `ValueError` for a malformed batch or guess. On Ctrl-C, once the
    rounds running have ended, [`hybrax.Interrupted`][] whose `partial` is the
    sweep so far: every finished element as an uninterrupted sweep gives it
    (before its retry from a neighbour, if that had not finished), the others
    with the status `not_run` and NaN values (`partial` is `None` when no
    element had finished, and always with `distributed`).
    """
    check_float64("sweep_orbits")
    params_batch, n = _batch_params(params_batch)
    if resume is not None:
        return _resumed(
            resume,
            n,
            lambda rows: sweep_orbits(
                system,
                section,
                u_guess
                if callable(u_guess) or np.ndim(u_guess) < 2
                else np.asarray(u_guess)[rows],
                _rows(params_batch, rows, n),
                analyse=analyse,
                shooting=shooting,
                settings=settings,
                sweep_settings=sweep_settings,
                phase_observables=phase_observables,
                progress=progress,
            ),
        )
    if callable(u_guess):
        guess, u_batch = u_guess, None
    else:
        u = np.asarray(u_guess, dtype=jnp.result_type(float))
        if u.ndim == 1:
            u = np.broadcast_to(u, (n, u.shape[0]))
        if u.ndim != 2 or u.shape[0] != n:
            raise ValueError(
                "`u_guess` must have shape (k,) or (batch, k) with batch = "
                f"{n}; got {np.shape(u_guess)}."
            )
        guess, u_batch = None, u
    settings = resolve_settings(settings)
    shooting = resolve_shooting(shooting)
    plan_options = resolve_options(sweep_settings, SweepSettings, "sweep_settings")
    chunk_size, devices = plan_options.chunk_size, plan_options.devices
    distributed, order = plan_options.distributed, plan_options.order
    max_iterations = shooting.max_iterations
    local_devices = list(jax.local_devices() if devices is None else devices)
    # (No device at all is refused by `_plan`.)
    on_cpu = bool(local_devices) and local_devices[0].platform == "cpu"
    round_iterations = plan_options.round_iterations
    if round_iterations == "auto":
        round_iterations = _CPU_ROUNDS if on_cpu else _ACCELERATOR_ROUNDS
    per_round = max_iterations if round_iterations is None else round_iterations
    fn = _OrbitSolve(
        system,
        section,
        guess,
        settings,
        # A round's iterations (`_run_rounds` counts the solve's).
        dataclasses.replace(shooting, max_iterations=min(per_round, max_iterations)),
        bool(analyse),
        bool(phase_observables),
    )

    # Non-finite elements are replaced by a finite one for the solve and flagged.
    ok = _finite_rows((params_batch, u_batch), n)
    substitute = int(np.argmax(ok)) if ok.any() else None
    if substitute is not None and not ok.all():
        rows = np.where(ok, np.arange(n), substitute)
        params_batch = jtu.tree_map(
            lambda leaf: leaf[rows] if eqx.is_array(leaf) else leaf, params_batch
        )
        u_batch = None if u_batch is None else u_batch[rows]

    if u_batch is None:
        u_batch = np.zeros((n, _guess_size(guess, params_batch)))
    dynamic, static = eqx.partition(params_batch, eqx.is_array)
    # An element is (params, u, start, loosening, beyond, safeguard).
    no_memory = jtu.tree_map(lambda _: None, _fresh_safeguards(np.zeros((0, 0))))
    static = (static, None, None, None, None, no_memory)
    if chunk_size is None:
        devices = local_devices
        if on_cpu:
            lanes = _cpu_lanes(_local_count(n, distributed), len(devices))
            chunk_size = lanes * len(devices)
    plan = _plan(n, chunk_size, devices, distributed)
    bar = _Progress(plan.n_local, progress and jax.process_index() == 0, "orbits")
    interrupted = False
    try:
        with announcing_progress(bar.enabled, bar.write):
            queue = None
            if order == "defect" and plan.n_local > plan.size:
                queue = _queue_by_defect(fn, static, dynamic, u_batch, plan)
            orbit = _run_rounds(
                fn,
                static,
                dynamic,
                u_batch,
                plan,
                bar,
                max_iterations,
                queue,
                plan_options.warm_start,
            )
            retried = np.zeros(plan.n_local, bool)
            if plan_options.retry:
                orbit, retried = _retry_from_neighbours(
                    fn, static, dynamic, u_batch, plan, max_iterations, orbit
                )
    except _Stopped as stopped:
        if distributed:  # the other processes' rows cannot be gathered
            raise Interrupted(None) from None
        orbit, retried, interrupted = stopped.orbit, stopped.retried, True
    except KeyboardInterrupt:  # before any element finished
        raise Interrupted(None) from None
    finally:
        bar.close()
    orbit, retried = _gathered((orbit, retried), n, distributed)
    retried = np.asarray(retried) & ok
    if not ok.all():
        bad = ~ok

        def blank(leaf):
            if not eqx.is_array(leaf):
                return leaf
            leaf = np.array(leaf)
            if np.issubdtype(leaf.dtype, np.inexact):
                leaf[bad] = np.nan
            return leaf

        result = jtu.tree_map(
            lambda code, bad_code: np.where(ok, code, bad_code),
            orbit.result,
            RESULTS.nonfinite_parameters,
        )
        orbit = eqx.tree_at(lambda o: o.result, jtu.tree_map(blank, orbit), result)
    code = status_code(orbit.result)
    converged = (code == 0)[:, None, None]
    multipliers = sorted_multipliers_batch(
        np.where(converged, np.asarray(orbit.reduced_jacobian), np.nan)
    )
    out = OrbitSweep(orbit=orbit, multipliers=multipliers, retried=retried)
    if interrupted:
        n_run = int(np.sum(code != _NOT_RUN))
        raise Interrupted(out, f"interrupted after {n_run} of {n} elements")
    return out
