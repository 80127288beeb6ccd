"""The orbit scheduler of [`hybrax.sweep_orbits`][]: shooting solves in rounds of a
few root-finder iterations with compaction, their order by defect, warm starts, and
the strategies tried before an element is reported without an orbit (Newton from
the guess, from the nearest converged neighbours' orbits, after return-map
iterations).
"""

import collections
import threading
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._hybrid import HybridSystem
from .._periodic import (
    PoincareSection,
    ShootingSafeguard,
    ShootingStart,
    find_periodic_orbit,
    loosen_max,
    loosened,
    poincare_map_with,
)
from .._program_store import StoredModel
from .._progress import Progress
from .._settings import (
    Settings,
    Shooting,
)
from .._solution import RESULTS, STATUS_NAMES, status_code
from . import executor
from .executor import _in_threads, _leaves, _run_chunks, _take


# Once the queue is empty, the elements still iterating after a round (those that
# did not finish in it, usually a few) move to a chunk smaller by a power of 8,
# of at least this many lanes per device (so that a batch compiles few sizes),
# instead of running in the full chunk whose idle lanes repeat them. On a GPU a
# pass over fewer lanes than this is bound by kernel launches, not lanes, so a
# smaller chunk would save little. CPU chunks of the default 64 lanes never shrink.
_TAIL_LANES = 4096


# The status code of an element an interrupt left unsolved, and of an orbit that
# breaks a boundary its model declares (found, values kept, not admissible).
_NOT_RUN = STATUS_NAMES.index("not_run")
_INADMISSIBLE = STATUS_NAMES.index("inadmissible_orbit")


# Where an orbit element's solve starts (see `_OrbitSolve`).
_RESUME, _FROM_GUESS, _FROM_U, _MAPPED_FROM_GUESS = 0, 1, 2, 3


# Positions in `SWEEP_STRATEGIES` (`OrbitSweep.found_by`).
_BY_GUESS, _BY_NEIGHBOUR, _BY_RETURN_MAP = 0, 1, 2
_NOT_FOUND = -1


class _OrbitSolve(eqx.Module):
    """`fn` of [`hybrax.sweep`][] for [`hybrax.sweep_orbits`][]: one orbit from one
    `(params, u, start, loosening, beyond, safeguard)` element. `start` is
    `_FROM_GUESS` (Newton from the guess), `_FROM_U` (Newton from `u`, a
    neighbour's orbit), `_MAPPED_FROM_GUESS` (the shooting's return-map iterations
    from the guess, then Newton) or `_RESUME` (`u`, the last iterate of an earlier
    round); `loosening` is the first Newton iteration's
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

    def _traced_model(self, element) -> StoredModel:
        """Where the solve's functions of the user's own are, for one (unbatched)
        `element`, for the store of traced programs (see
        [`hybrax._program_store.StoredModel`][])."""
        return StoredModel(self.system, self.section, element[0])

    def start(self, params, u, start):
        """Where the element's root finder starts (see the class)."""
        if self.guess is not None:
            guess = jnp.asarray(self.guess(params), dtype=jnp.result_type(float))
            from_guess = (start == _FROM_GUESS) | (start == _MAPPED_FROM_GUESS)
            u = jnp.where(from_guess, guess, u)
        return u

    def __call__(self, element):
        params, u, start, loosening, beyond, safeguard = element
        u = self.start(params, u, start)
        # Only the return-map strategy's first round takes return-map iterations
        # (run-time values: one program serves every strategy).
        shooting = eqx.tree_at(
            lambda s: s.return_map_iterations,
            self.shooting,
            jnp.where(
                start == _MAPPED_FROM_GUESS, self.shooting.return_map_iterations, 0
            ),
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

    def _traced_model(self, element) -> StoredModel:
        """As [`hybrax._sweep.rounds._OrbitSolve`][]'s."""
        return self.solve._traced_model(element)

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
    them while the queue still fills its chunk's other lanes. Queued last, such
    elements hold chunks of idle lanes for their last rounds."""
    quiet = Progress(plan.n_local, False, "")
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


def _pool(positions, *arrays):
    """At most `_WARM_POOL` of `positions` (evenly spaced in batch order), with the
    matching rows of `arrays`: bounds the host work per element for any batch."""
    positions = np.asarray(positions)
    arrays = tuple(np.asarray(a) for a in arrays)
    if positions.size <= _WARM_POOL:
        return (positions, *arrays)
    keep = np.linspace(0, positions.size - 1, _WARM_POOL).astype(int)
    return (positions[keep], *(a[keep] for a in arrays))


def _neighbourhood_radius(features, elements, k, block=1024):
    """For each of `elements`, the squared distance (in `features`) to its `k`-th
    nearest other element of the batch (among at most `_WARM_POOL` of them): the
    radius of its neighbourhood. On a grid, an interior point's eight nearest
    are its grid neighbours."""
    (others,) = _pool(np.arange(features.shape[0]))
    k = min(k, others.size - 1)
    radius = np.full(len(elements), np.inf)
    if k < 1:
        return radius
    for i in range(0, len(elements), block):
        rows = np.asarray(elements[i : i + block])
        distance = np.sum(
            (features[rows][:, None, :] - features[others][None]) ** 2, -1
        )
        distance = np.where(others[None, :] == rows[:, None], np.inf, distance)
        radius[i : i + block] = np.partition(distance, k - 1, axis=1)[:, k - 1]
    return radius


def _nearest_untried(
    features, elements, solved, solved_u, tried, radius=None, block=1024
):
    """For each of `elements`, the nearest `solved` element (in `features`) that is
    not among its row of `tried` (element positions, -1 for none) and lies within
    its squared `radius` (default: any distance), among at most `_WARM_POOL` of the
    solved (evenly spaced in batch order), in blocks of `block` elements (bounded
    memory for any batch). Returns `(nearest, u)`: its position (-1 where there is
    none) and its orbit `u`."""
    solved, solved_u = _pool(solved, solved_u)
    nearest = np.full(len(elements), -1)
    for i in range(0, len(elements), block):
        rows = np.asarray(elements[i : i + block])
        gaps = features[rows][:, None, :] - features[solved][None]
        distance = np.sum(gaps**2, axis=-1)
        used = np.any(solved[None, None, :] == tried[i : i + block, :, None], axis=1)
        if radius is not None:
            far = distance > radius[i : i + block, None] * (1 + 1e-9)
            used = used | far
        distance = np.where(used, np.inf, distance)
        best = np.argmin(distance, axis=1)
        found = np.isfinite(distance[np.arange(rows.size), best])
        nearest[i : i + block] = np.where(found, solved[best], -1)
    u = np.zeros((len(elements),) + solved_u.shape[1:], solved_u.dtype)
    position = {element: k for k, element in enumerate(solved.tolist())}
    for k, element in enumerate(nearest.tolist()):
        if element >= 0:
            u[k] = solved_u[position[element]]
    return nearest, u


def _fallback_strategies(
    fn, static, dynamic, u, plan, max_iterations, orbit, found_by, neighbours
):
    r"""The elements that found no orbit from their start solved again, by the
    strategies a user would try singly, in turn, each on the elements still without
    one:

    1. Newton from the orbit of each converged element among its `neighbours`
       nearest elements in parameters (`_parameter_features`; on a grid, an
       interior point's grid neighbours), nearest first, one pass per neighbour
       (the converged elements of the earlier passes count);
    2. the shooting's return-map iterations from the guess, then Newton (where
       `fn.shooting.return_map_iterations` > 0): cheap cycles that pull a start
       towards a stable orbit, last because near a fold they can drift into its
       slow ghost, away from an orbit Newton finds directly.

    An element "without an orbit" is any but `successful`: one whose orbit breaks
    a declared boundary (`inadmissible_orbit`) is solved again too, and keeps that
    orbit where no admissible one is found; an inadmissible orbit found by a later
    strategy replaces a failure. Returns the orbits (local rows) with those
    replaced (an element without any keeps its first solve's status), `found_by`
    updated
    (positions in `SWEEP_STRATEGIES`), and how many neighbours' orbits each
    element was solved from; every element's `n_steps` counts all its solves."""
    n_local = plan.n_local
    neighbour_starts = np.zeros(n_local, int)
    quiet = Progress(n_local, False, "")
    features = radius = None
    tried = np.full((n_local, max(neighbours, 1)), -1)
    u_all = np.array(u)

    def solve_again(order, starts, by):
        """One strategy on the elements `order`: merges the orbits it found."""
        nonlocal orbit
        try:
            again, _ = _run_rounds(
                fn,
                static,
                dynamic,
                u_all,
                plan,
                quiet,
                max_iterations,
                order,
                False,
                starts,
            )
            stopped = None
        except _Stopped as interrupted:
            # The solves that finished count; the others keep their last result.
            stopped, again = interrupted, interrupted.orbit
            order = order[np.asarray(status_code(again.result))[order] != _NOT_RUN]
        now = np.asarray(status_code(orbit.result))[order]
        new = np.asarray(status_code(again.result))[order]
        # An admissible orbit replaces anything; an inadmissible one (an orbit
        # that breaks a declared boundary) replaces only a failure.
        found = order[
            (new == 0) | ((new == _INADMISSIBLE) & (now != 0) & (now != _INADMISSIBLE))
        ]
        steps = np.array(orbit.n_steps)
        steps[order] += np.asarray(again.n_steps)[order]

        def merge(first, second):
            if not eqx.is_array(first):
                return first
            merged = np.array(first)
            merged[found] = np.asarray(second)[found]
            return merged

        orbit = eqx.tree_at(
            lambda o: o.n_steps, jtu.tree_map(merge, orbit, again), steps
        )
        found_by[found] = by
        return order, stopped

    try:
        for rank in range(neighbours):
            code = np.asarray(status_code(orbit.result))
            failed, solved = np.flatnonzero(code != 0), np.flatnonzero(code == 0)
            if not failed.size or not solved.size:
                break
            if features is None:
                features = _parameter_features(
                    _take(dynamic, plan.local_index), n_local
                )
                # Each element's neighbourhood: its `neighbours` nearest elements
                # (on a grid, an interior point's grid neighbours). A converged
                # element farther away is no neighbour: an element deep in a
                # region without orbits is not solved from orbits across it.
                radius = np.full(n_local, np.inf)
                radius[failed] = _neighbourhood_radius(features, failed, neighbours)
            nearest, u_nearest = _nearest_untried(
                features,
                failed,
                solved,
                np.asarray(orbit.u)[solved],
                tried[failed],
                radius[failed],
            )
            has = nearest >= 0
            failed, nearest, u_nearest = failed[has], nearest[has], u_nearest[has]
            if not failed.size:
                break
            tried[failed, rank] = nearest
            u_all[plan.local_index[failed]] = u_nearest
            starts = np.full(n_local, _FROM_GUESS, np.int8)
            starts[failed] = _FROM_U
            ran, stopped = solve_again(failed, starts, _BY_NEIGHBOUR)
            neighbour_starts[ran] += 1
            if stopped is not None:
                raise stopped
        if int(fn.shooting.return_map_iterations) > 0:
            failed = np.flatnonzero(np.asarray(status_code(orbit.result)) != 0)
            if failed.size:
                u_all = np.array(u)  # the guesses (a callable guess overrides them)
                starts = np.full(n_local, _FROM_GUESS, np.int8)
                starts[failed] = _MAPPED_FROM_GUESS
                _, stopped = solve_again(failed, starts, _BY_RETURN_MAP)
                if stopped is not None:
                    raise stopped
    except (_Stopped, KeyboardInterrupt):
        raise _Stopped(orbit, found_by, neighbour_starts) from None
    return orbit, found_by, neighbour_starts


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
    iterations, as from the guess). On a CPU `executor._streams` chunks run at once, one
    per core, each with its own rounds, taking elements from one shared queue
    (dealt in turn, a stream that drew the slow elements had run alone at the
    end). Returns the outputs of `fn` (host arrays, element order) with `n_steps`
    counting the iterations of all rounds. `starts`: each element's `start`
    (default `_FROM_GUESS`); only the rows of the queue are filled.

    It is one function because it is one host loop over rounds whose state (the queue,
    the lanes, the finished elements, the warm-start pool, the interrupt) each step
    reads and writes."""
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
    loosening = np.where(start == _MAPPED_FROM_GUESS, 1.0, np.inf)
    # Where each element started (`start` becomes `_RESUME` between rounds).
    origin = start.copy()
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

    first_call_alone = executor._FirstCallAlone()

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
                        start[fresh] = origin[fresh] = _FROM_U
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
            orbit = first_call_alone(
                lanes.size,
                lambda: jax.device_get(
                    executor._evaluate(fn, static, chunk, plan.sharding)
                ),
            )
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
            mapping = start[elements] == _MAPPED_FROM_GUESS
            map_steps = np.where(mapping, np.minimum(steps, map_iterations), 0)
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
    n_streams = executor._streams(plan, -(-n_local // size), rounds=True)
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
        raise _Stopped(partial, _found_by(partial, origin), np.zeros(n_local, int))
    orbit = eqx.combine(results[0], results[1])
    return orbit, _found_by(orbit, origin)


def _found_by(orbit, origin) -> np.ndarray:
    """The strategy (a position in `SWEEP_STRATEGIES`) that found each element's
    orbit in one `_run_rounds` call, from where each element started; `_NOT_FOUND`
    where it found none."""
    by_start = np.where(
        origin == _FROM_U,
        _BY_NEIGHBOUR,
        np.where(origin == _MAPPED_FROM_GUESS, _BY_RETURN_MAP, _BY_GUESS),
    )
    code = np.asarray(status_code(orbit.result))
    found = (code == 0) | (code == _INADMISSIBLE)
    return np.where(found, by_start, _NOT_FOUND).astype(np.int8)


class _Stopped(Exception):
    """Ctrl-C during the rounds: the local orbits so far (`_not_run` where
    unfinished), the strategy that found each one (positions in `SWEEP_STRATEGIES`)
    and the neighbours' orbits each element was solved from, for `sweep_orbits` to
    hand back."""

    def __init__(self, orbit, found_by, neighbour_starts):
        super().__init__("interrupted")
        self.orbit, self.found_by = orbit, found_by
        self.neighbour_starts = neighbour_starts


def _not_run(orbit, done):
    """`orbit` (host rows) with the rows not `done` blanked: NaN floats, -1
    integers, `False` booleans, every status `not_run` (a status's codes are
    not blanked to -1, which names no status: `hybrax.load` refuses it)."""

    def blank(leaf):
        if isinstance(leaf, RESULTS):
            return jtu.tree_map(
                lambda code, not_run: np.where(done, code, not_run),
                leaf,
                RESULTS.not_run,
            )
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

    return jtu.tree_map(blank, orbit, is_leaf=lambda leaf: isinstance(leaf, RESULTS))
