r"""Basins of attraction: where the cycles from a grid of section states go.

Every start $u_0$ on the Poincaré section is iterated through the return map,
$u_{k+1} = \pi(P(\chi(u_k)))$, for $N$ cycles of the section's transition sequence,
all starts in one compiled `jit(vmap(...))` ([`hybrax.sweep`][]), and its fate is
classified: it settles on the given periodic orbit, settles on another periodic
orbit (its period identified), falls (a terminal transition fired), is still
moving after $N$ cycles, or its run failed otherwise (its status). This is the
computation of Schwab & Wisse (2001), "Basin of attraction of the simplest walking
model", Proc. ASME DETC, done on every device at once.
"""

import sys
from collections.abc import Sequence

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import canonical_params
from ._periodic import PeriodicOrbit, PoincareSection, resolve_sequence
from ._resume import Record, check_resume, record_fields, record_tree, record_value
from ._settings import Settings, resolve_settings
from ._simulate import run_events
from ._solution import RESULTS, STATUS_NAMES, Interrupted, status_code


#: The fates of a start, by their codes in `Basin.outcome`.
BASIN_OUTCOMES = ("orbit", "periodic", "falls", "unsettled", "failed")
_ORBIT, _PERIODIC, _FALLS, _UNSETTLED, _FAILED = range(len(BASIN_OUTCOMES))


class Basin(eqx.Module):
    r"""The result of [`hybrax.basin`][]: the fate of every start, with the
    leading shape of `starts` (a grid keeps its shape).

    - `starts`: the starts $u_0$ (section coordinates), shape `(*grid, k)`.
    - `outcome`: each start's fate, a code of `hybrax.BASIN_OUTCOMES`
      (`outcome_names()` spells them):
      - `"orbit"` (0): after the $N$ cycles it is within `tolerance` of the
        orbit's point $u^*$, or it is still converging to it in the orbit's
        linear neighbourhood (when the orbit is a stable
        [`hybrax.PeriodicOrbit`][]): there $e_{n+1} = M e_n$ for the
        deviation $e_n = u_n - u^*$ and the reduced Jacobian $M$, so the last
        step gives the deviation, $e_N = M (I - M)^{-1}(u_{N-1} - u_N)$, and
        the start's own $u_N - u^*$ equals it to `tolerance` (within 100
        `tolerance` of $u^*$);
      - `"periodic"` (1): it settled on another periodic orbit: the smallest $p
        \le$ `max_period` with $|u_N - u_{N-p}| \le$ `tolerance` (the period in
        cycles is `period`); an unstable orbit that a start passes close to also
        repeats for a while: more cycles tell them apart;
      - `"falls"` (2): a terminal transition fired (a walker's fall; status
        `terminal_event`);
      - `"unsettled"` (3): every cycle ran, and it neither reached the orbit nor
        repeated within `max_period` cycles (still converging, chaotic, or a
        longer period);
      - `"failed"` (4): its run stopped with another status (`result` says
        which: a missed event, the step limit, a grazing crossing, ...).
    - `period`: the settled period in cycles (1 for the orbit), 0 where none.
    - `cycles`: the cycles completed before the run stopped ($N$ if none
      failed).
    - `final`: the last section point reached, $u_N$ (or the last before a
      failure).
    - `distance`: $\max_i |u_{N,i} - u^*_i|$, NaN without an orbit.
    - `result`: the batched [`hybrax.RESULTS`][] of each start's run:
      `successful` where all $N$ cycles ran as the section declares.
    - `orbit`: the orbit's point $u^*$ (NaN without one); `n_cycles`,
      `tolerance`, `max_period`: as asked.
    """

    starts: Float[Array, "*grid k"]
    outcome: Int[Array, " *grid"]
    period: Int[Array, " *grid"]
    cycles: Int[Array, " *grid"]
    final: Float[Array, "*grid k"]
    distance: Float[Array, " *grid"]
    result: RESULTS
    orbit: Float[Array, " k"]
    n_cycles: int = eqx.field(static=True)
    tolerance: float = eqx.field(static=True)
    max_period: int = eqx.field(static=True)
    trail: Float[Array, "*grid w k"] | None = None
    inputs: Record = eqx.field(static=True, default=())

    @property
    def succeeded(self):
        """Where every cycle ran (`result` is `successful`), as every result of
        the library says; a start that falls did not succeed."""
        return self.result == RESULTS.successful

    def outcome_names(self) -> np.ndarray:
        """`outcome` spelt out (`"orbit"`, `"periodic"`, ...), same shape."""
        return np.asarray(BASIN_OUTCOMES, dtype=object)[np.asarray(self.outcome)]

    def counts(self) -> dict[str, int]:
        """How many starts have each outcome, in the order of `BASIN_OUTCOMES`."""
        codes = np.asarray(self.outcome).ravel()
        return {name: int(np.sum(codes == i)) for i, name in enumerate(BASIN_OUTCOMES)}


class _Cycles(eqx.Module):
    """`n_cycles` cycles of the return map from one start (the per-element
    function of a batched round): one run of the section's transition sequence
    repeated `n_cycles` times through the event loop, whose phases after a
    failure do no work. Returns the section point after each cycle (NaN after
    a failure), the status and the cycles completed."""

    system: HybridSystem
    section: PoincareSection
    params: Params
    settings: Settings
    n_cycles: int = eqx.field(static=True)

    def __call__(self, u0):
        sequence, _ = resolve_sequence(self.system, self.section)
        length = len(sequence)
        # The horizon is one cycle's: the run's is `n_cycles` of them.
        settings = eqx.tree_at(
            lambda s: s.t_max, self.settings, self.settings.t_max * self.n_cycles
        )
        x0 = self.section.chart(u0, self.params)
        solution, _, _ = run_events(
            self.system,
            x0,
            self.params,
            settings,
            dfx.RecursiveCheckpointAdjoint(),
            mode0=self.system.sources[sequence[0]],
            t0=jnp.zeros((), x0.dtype),
            sequence=tuple(sequence) * self.n_cycles,
            phase_observables=False,
        )
        ends = solution.x_after[length - 1 :: length]
        points = jax.vmap(lambda x: self.section.coordinates(x, self.params))(ends)
        return points, solution.result, solution.n_events // length


def basin(
    system: HybridSystem,
    section: PoincareSection,
    starts: Float[Array, "*grid k"],
    params: Params,
    *,
    orbit: PeriodicOrbit | Float[Array, " k"] | None = None,
    n_cycles: int = 20,
    tolerance: float = 1e-4,
    max_period: int = 8,
    settings: Settings | None = None,
    chunk_size: int | None = None,
    devices: Sequence[jax.Device] | None = None,
    progress: bool = False,
    resume: Basin | None = None,
) -> Basin:
    r"""The basin of attraction of a periodic orbit over a set of section states.

    From every start $u_0$ (reduced coordinates of `section`), iterate the return
    map $u_{k+1} = \pi(P(\chi(u_k)))$ for `n_cycles` cycles, each a run of the
    section's transition sequence as in [`hybrax.poincare_map`][], and classify
    where it went (see [`hybrax.Basin`][]): to the orbit, to another periodic
    orbit of period $p \le$ `max_period` cycles, a fall (a terminal transition),
    still unsettled, or a failed run. All starts run in one compiled
    `jit(vmap(...))` through [`hybrax.sweep`][], in chunks, on every local
    device: on a CPU in rounds of one cycle, the starts still moving gathered
    into full chunks for the next round (under `vmap` a chunk runs as long as its
    slowest start), on an accelerator in one round. A failure of one start is
    its own outcome and status and leaves the others exact.

    Reference: Schwab & Wisse (2001), "Basin of attraction of the simplest
    walking model", Proc. ASME Design Engineering Technical Conferences: the
    simplest walker's basin over $(\theta, \dot\theta)$ at heel strike is a thin
    sliver around its stable gait.

    `basin` is an eager batched driver, like [`hybrax.sweep`][], and its outcomes
    are classes, which have no derivative; differentiate the return map
    ([`hybrax.poincare_map`][]) instead.

    **Arguments:**

    - `system`, `section`: the model and its Poincaré section.
    - `starts`: the section states, shape `(*grid, k)` with `k` the section's
      unknowns (e.g. a grid `np.stack(np.meshgrid(a, b, indexing="ij"), -1)`).
    - `params`: the parameter PyTree.
    - `orbit`: the periodic orbit whose basin this is: a
      [`hybrax.PeriodicOrbit`][] (its point and its reduced Jacobian are used)
      or its point $u^*$; `None` classifies without one (a settled start is then
      `"periodic"`, period 1 included).
    - `n_cycles`: cycles run from each start (static: one compilation each).
    - `tolerance`: the distance (max norm, in the section's coordinates) within
      which a start has reached the orbit, and within which a settled start
      repeats.
    - `max_period`: the longest period, in cycles, that is identified.
    - `settings`: a [`hybrax.Settings`][]; its `t_max` is one cycle's horizon
      (a start's run has `n_cycles` times that).
    - `chunk_size`: starts per compiled call (default on a CPU: 256, or fewer
      to give every core a chunk; on an accelerator up to $2^{20}$).
    - `devices`, `progress`: as for [`hybrax.sweep`][].
    - `resume`: the `partial` basin of an earlier call that was interrupted
      ([`hybrax.Interrupted`][]): its finished starts are kept and those
      `not_run` go on from the cycle where they stopped, to the same result as an
      uninterrupted call. It must have been computed for the same inputs (its
      `inputs`: the system, section, starts, parameters, orbit, `n_cycles`,
      `tolerance`, `max_period` and settings; an input that cannot be
      fingerprinted is not compared). Default `None`.

    **Returns:** a [`hybrax.Basin`][].

    **Raises:** `ValueError` naming the argument for `starts` of the wrong
    shape or not finite, or a non-positive `n_cycles`, `tolerance`,
    `max_period` or `chunk_size`, or `max_period` not below `n_cycles`, or a
    failed `orbit`, or a `resume` of other inputs (naming what differs). On
    Ctrl-C, once the slice of starts running has ended,
    [`hybrax.Interrupted`][] whose `partial` is the basin so far: the starts
    that stopped (fell, failed, or ran every cycle) classified as the
    uninterrupted call does, the others with the status `not_run` and their
    `trail` (`partial` is `None`, or `resume`, when no cycle finished).
    """
    from ._sweep import host_cores

    settings = resolve_settings(settings)
    params = canonical_params(params)
    starts = _checked_starts(section, starts, params)
    _check_counts(n_cycles, tolerance, max_period, chunk_size)
    orbit_point, jacobian = _orbit_point(orbit, starts.shape[-1])
    inputs = (
        record_value("system", system)
        + record_value("section", section)
        + record_value("starts", starts)
        + record_tree("params", params)
        + record_value("orbit", orbit_point)
        + record_value("orbit.reduced_jacobian", jacobian)
        + record_value("n_cycles", int(n_cycles))
        + record_value("tolerance", float(tolerance))
        + record_value("max_period", int(max_period))
        + record_fields("settings", settings)
    )
    grid_shape = starts.shape[:-1]
    flat = starts.reshape(-1, starts.shape[-1])
    width = int(max_period) + 1
    if resume is None:
        state = _State.fresh(flat, int(n_cycles))
    else:
        state = _State.resumed(resume, inputs, grid_shape, int(n_cycles), width)
    before = state.progress
    on_cpu = jax.default_backend() == "cpu"
    if chunk_size is None:
        if on_cpu:
            chunk_size = max(1, min(_CHUNK, -(-flat.shape[0] // host_cores())))
        else:  # an accelerator's lanes: the whole batch, memory permitting
            chunk_size = min(flat.shape[0], _ACCELERATOR_CHUNK)
    # On a CPU, one cycle per round and the starts still moving gathered into
    # full chunks for the next (under `vmap` a chunk runs as long as its slowest
    # start: without compaction, one walker among fallen ones costs its chunk
    # all the cycles); on an accelerator, whose idle lanes cost little, one
    # round of every cycle.
    per_round = 1 if on_cpu else int(n_cycles)
    # A round runs in slices of a few chunks per core, so that Ctrl-C keeps
    # the slices finished (the starts of an unfinished one go on from the
    # cycle before).
    cores = host_cores() if on_cpu else 1
    interrupted = False
    try:
        _run_rounds(
            lambda cycles: _Cycles(system, section, params, settings, cycles),
            state,
            int(n_cycles),
            per_round,
            int(chunk_size),
            _SLICE_CHUNKS * cores * int(chunk_size),
            devices,
            progress,
        )
    except KeyboardInterrupt:
        interrupted = True
    codes, completed = state.progress
    moving = (codes == _OK) & (completed < n_cycles)
    if interrupted:
        if state.progress is before:  # nothing finished in this call
            raise Interrupted(resume, "interrupted before a cycle finished") from None
        codes = np.where(moving, status_code(RESULTS.not_run), codes)
    window = _windows(state.history, completed, width)
    outcome, period, distance = _classify(
        window, codes, orbit_point, jacobian, float(tolerance)
    )
    result = _results_of(codes)

    def shaped(a):
        return np.asarray(a).reshape(grid_shape + np.shape(a)[1:])

    out = Basin(
        starts=starts,
        outcome=shaped(outcome),
        period=shaped(period),
        cycles=shaped(completed),
        final=shaped(window[:, -1]),
        distance=shaped(distance),
        result=jax.tree.map(shaped, result),
        orbit=np.asarray(orbit_point),
        n_cycles=int(n_cycles),
        tolerance=float(tolerance),
        max_period=int(max_period),
        trail=shaped(window) if interrupted else None,
        inputs=inputs,
    )
    if interrupted:
        n_left = int(np.sum(moving))
        raise Interrupted(
            out, f"interrupted with {n_left} of {moving.size} starts still moving"
        ) from None
    return out


# Starts per compiled call on a CPU. Under `vmap` a chunk runs until its slowest
# start is done, so smaller chunks waste less on the rounds' few moving starts;
# 256 was not compared with other sizes (`experiments/bench_basin.py` times a
# basin at it).
_CHUNK = 256
# On an accelerator: its lanes want the whole batch (a chunk of 2^20 starts holds
# a few GB).
_ACCELERATOR_CHUNK = 1 << 20
# Chunks per core of one slice of a round (what Ctrl-C may lose).
_SLICE_CHUNKS = 4
_OK = int(status_code(RESULTS.successful))


class _State:
    """A basin in progress: every start's section points `history` `(n, N + 1,
    k)` (NaN beyond its cycles) and `progress`, `(status codes, cycles
    completed)`, replaced whole (one assignment) after each slice, so that
    Ctrl-C never leaves it half updated."""

    def __init__(self, history, codes, completed):
        self.history = history
        self.progress = (codes, completed)

    @classmethod
    def fresh(cls, flat, n_cycles):
        n, k = flat.shape
        history = np.full((n, n_cycles + 1, k), np.nan)
        history[:, 0] = flat
        return cls(history, np.full(n, _OK), np.zeros(n, dtype=int))

    @classmethod
    def resumed(cls, resume, inputs, grid_shape, n_cycles, width):
        """The state where the interrupted basin `resume` stopped: its starts'
        trails put back in place, those `not_run` moving again."""
        if not isinstance(resume, Basin) or np.shape(resume.outcome) != grid_shape:
            raise ValueError(
                "`resume` must be the Basin of an interrupted basin of these starts "
                f"(shape {grid_shape}); got {type(resume).__name__} of shape "
                f"{np.shape(getattr(resume, 'outcome', None))}."
            )
        check_resume(resume.inputs, inputs, "basin")
        codes = status_code(resume.result).ravel()
        completed = np.asarray(resume.cycles, dtype=int).ravel()
        n = codes.size
        trail = resume.trail
        if trail is None:
            trail = np.asarray(resume.final)[..., None, :]
        trail = np.asarray(trail, dtype=float).reshape(n, -1, np.shape(trail)[-1])
        history = np.full((n, n_cycles + 1, trail.shape[-1]), np.nan)
        w = trail.shape[1]
        rows = np.arange(n)
        for j in range(w):
            index = completed - w + 1 + j
            kept = index >= 0
            history[rows[kept], index[kept]] = trail[kept, j]
        not_run = codes == status_code(RESULTS.not_run)
        return cls(history, np.where(not_run, _OK, codes), completed)


def _run_rounds(
    cycles_fn, state, n_cycles, per_round, chunk, slice_size, devices, progress
):
    """Rounds of up to `per_round` cycles (`cycles_fn(cycles)` runs them from
    one start) over the starts still moving, each round's batch in slices of
    `slice_size` starts, each padded to whole chunks of `chunk` starts (one
    compilation); updates `state` after each slice. A start goes on from its
    own last cycle, so a round may hold starts at different cycles (those of a
    resumed basin)."""
    from ._sweep import sweep

    history = state.history
    n, _, k = history.shape
    while True:
        codes, completed = state.progress
        moving = np.flatnonzero((codes == _OK) & (completed < n_cycles))
        if moving.size == 0:
            break
        # As many cycles as every start still has (fewer than `per_round` only
        # for a resumed basin).
        step = int(min(per_round, np.min(n_cycles - completed[moving])))
        fn = cycles_fn(step)
        for first in range(0, moving.size, slice_size):
            rows = moving[first : first + slice_size]
            done = completed[rows]
            # Padded to whole chunks by NaN starts, which stop at once (status
            # `nonfinite_state`) and so cost their chunk nothing.
            batch = np.concatenate(
                [history[rows, done], np.full((-rows.size % chunk, k), np.nan)]
            )
            points, result, ran = sweep(
                fn, jnp.asarray(batch), chunk_size=chunk, devices=devices
            )
            points = np.asarray(points)[: rows.size]
            ran = np.asarray(ran)[: rows.size]
            # Beyond each start's completed cycles until `progress` says so.
            history[rows[:, None], done[:, None] + 1 + np.arange(step)] = points
            codes, completed = state.progress
            codes, completed = codes.copy(), completed.copy()
            completed[rows] = done + ran
            codes[rows] = status_code(result)[: rows.size]
            state.progress = (codes, completed)
        if progress:
            still = int(np.sum((codes == _OK) & (completed < n_cycles)))
            print(
                f"basin: {int(np.max(completed))}/{n_cycles} cycles, "
                f"{still}/{n} starts still moving",
                file=sys.stderr,
                flush=True,
            )


def _windows(history, completed, width):
    """The last `width` section points up to each start's last completed cycle
    (the start repeated where fewer cycles ran)."""
    index = completed[:, None] - width + 1 + np.arange(width)[None, :]
    index = np.clip(index, 0, None)
    return np.take_along_axis(history, index[..., None], axis=1)


def _results_of(codes) -> RESULTS:
    """The batched status of integer codes (positions in `STATUS_NAMES`)."""
    codes = np.asarray(codes)
    present = [int(code) for code in np.unique(codes)]

    def one(code):
        result = RESULTS.successful
        for c in present:
            status = getattr(RESULTS, STATUS_NAMES[c])
            result = RESULTS.where(code == c, status, result)
        return result

    return jax.device_get(jax.vmap(one)(jnp.asarray(codes)))


def _checked_starts(section, starts, params) -> np.ndarray:
    """`starts` as a float array `(*grid, k)` with `k` the section's unknowns."""
    starts = np.asarray(starts, dtype=float)
    if starts.ndim < 2:
        raise ValueError(
            "`starts` must have shape (*grid, k): one row of the section's k "
            f"unknowns per start; got shape {starts.shape}."
        )
    if starts.shape[-1] == 0 or starts.size == 0:
        raise ValueError(f"`starts` is empty (shape {starts.shape}).")
    if not np.all(np.isfinite(starts)):
        raise ValueError("`starts` must be finite.")
    state = jax.eval_shape(
        section.chart, jnp.asarray(starts[(0,) * (starts.ndim - 1)]), params
    )
    k = jax.eval_shape(
        section.coordinates, jax.ShapeDtypeStruct(state.shape, state.dtype), params
    ).shape[0]
    if starts.shape[-1] != k:
        raise ValueError(
            f"`starts` must have the section's {k} unknowns in its last axis; got "
            f"{starts.shape[-1]}."
        )
    return starts


def _check_counts(n_cycles, tolerance, max_period, chunk_size=None) -> None:
    counts = [("n_cycles", n_cycles), ("max_period", max_period)]
    if chunk_size is not None:
        counts.append(("chunk_size", chunk_size))
    for name, value in counts:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"`{name}` must be an integer; got {value!r}.")
        if value < 1:
            raise ValueError(f"`{name}` must be positive; got {value}.")
    if max_period >= n_cycles:
        raise ValueError(
            f"`max_period` ({max_period}) must be below `n_cycles` ({n_cycles}): a "
            "period is read off the last cycles."
        )
    if not (np.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"`tolerance` must be positive and finite; got {tolerance!r}.")


def _orbit_point(orbit, k: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The orbit's point $u^*$ (NaN without an orbit) and its reduced Jacobian
    $M$ where the orbit is stable (`None` otherwise or where unknown)."""
    if orbit is None:
        return np.full(k, np.nan), None
    jacobian = None
    if isinstance(orbit, PeriodicOrbit):
        if not bool(np.all(np.asarray(orbit.succeeded))):
            raise ValueError(
                "`orbit` is a periodic orbit that was not found (its result is "
                "not successful)."
            )
        if float(orbit.spectral_radius) < 1.0:
            jacobian = np.asarray(orbit.reduced_jacobian, dtype=float)
        point = np.asarray(orbit.u, dtype=float)
    else:
        point = np.asarray(orbit, dtype=float)
    if point.shape != (k,) or not np.all(np.isfinite(point)):
        raise ValueError(
            f"`orbit` must be a found periodic orbit or a finite point of the "
            f"section's {k} unknowns; got shape {point.shape}."
        )
    return point, jacobian


def _classify(window, codes, orbit_point, jacobian, tolerance):
    """`(outcome, period, distance)` of every start from its last iterates
    `window` `(n, max_period + 1, k)` (the last is $u_N$) and its status codes
    (see `Basin` for the rules); `jacobian` is the stable orbit's reduced
    Jacobian $M$, or `None`."""
    last = window[:, -1]
    distance = np.max(np.abs(last - orbit_point), axis=-1)
    n, width = window.shape[:2]
    period = np.zeros(n, dtype=int)
    for p in range(width - 1, 0, -1):  # the smallest period wins
        repeats = np.max(np.abs(last - window[:, -1 - p]), axis=-1) <= tolerance
        period = np.where(repeats, p, period)
    at_orbit = distance <= tolerance
    if jacobian is not None:
        # Still converging in the orbit's linear neighbourhood: e_N is
        # M (I - M)^-1 (u_{N-1} - u_N). A bound from the spectral radius alone
        # (|e_N| <= |u_N - u_{N-1}| / (1 - rho)) misses the eigenvectors'
        # conditioning and the rotation of complex multipliers: starts a few
        # tolerances from the orbit read as other orbits of period 1 to 4.
        k = jacobian.shape[0]
        gain = jacobian @ np.linalg.inv(np.eye(k) - jacobian)
        predicted = (window[:, -2] - last) @ gain.T
        explained = np.max(np.abs(last - orbit_point - predicted), axis=-1)
        at_orbit |= (explained <= tolerance) & (distance <= 100.0 * tolerance)
    ran = codes == status_code(RESULTS.successful)
    outcome = np.where(
        ran,
        np.where(at_orbit, _ORBIT, np.where(period > 0, _PERIODIC, _UNSETTLED)),
        np.where(codes == status_code(RESULTS.terminal_event), _FALLS, _FAILED),
    )
    period = np.where(ran & at_orbit, 1, np.where(ran, period, 0))
    return outcome, period, distance
