"""Periodic orbits over a batch of parameters: [`hybrax.sweep_orbits`][], its
[`hybrax.SweepSettings`][] and its result, [`hybrax.OrbitSweep`][].
"""

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array, Complex, Int

from .._choices import SweepOrder, as_choice
from .._compile import announcing_progress
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._misc import check_float64
from .._periodic import (
    FloquetAnalysis,
    PeriodicOrbit,
    PoincareSection,
)
from .._progress import Progress
from .._resume import Record, check_resume, record_fields, record_tree, record_value
from .._settings import (
    Settings,
    Shooting,
    check_iterations,
    resolve_options,
    resolve_settings,
    resolve_shooting,
)
from .._solution import RESULTS, Interrupted, status_code, status_name
from .._sweep_defaults import (
    SWEEP_JACOBIAN,
    SWEEP_MAP_ITERATIONS,
    SWEEP_MAX_ITERATIONS,
    SWEEP_NEIGHBOURS,
    SWEEP_STRATEGIES as SWEEP_STRATEGIES,
    SWEEP_T_MAX,
)
from . import executor, rounds
from .executor import (
    _gathered,
    _local_count,
    _plan,
    sorted_multipliers_batch,
)
from .rounds import (
    _INADMISSIBLE,
    _NOT_FOUND,
    _NOT_RUN,
    _fallback_strategies,
    _fresh_safeguards,
    _OrbitSolve,
    _run_rounds,
    _Stopped,
)


# The default lanes per device of an orbit sweep's compiled call on CPU. Wider
# chunks run clean batches faster, but under `vmap` a slow element holds every
# lane of its chunk, so wider chunks lose throughput on batches with sets without
# an orbit. Since the tight iterations run together at the queue's end (rounds of
# 4), a chunk's lanes finish their rounds alike and 64 lanes keep the clean gain
# without that loss; 128 lanes lose it again (figures: the performance page,
# "Figures behind the defaults").
_CPU_LANES = 64


def _cpu_lanes(n: int, n_devices: int) -> int:
    """The default lanes per device of a CPU chunk for `n` elements: `_CPU_LANES`
    where the batch fills two such chunks per core, else half as many, so that a
    small batch still gives every core chunks (in one chunk it would run on one
    core while the others idle)."""
    if n >= 2 * executor.host_cores() * _CPU_LANES * n_devices:
        return _CPU_LANES
    return _CPU_LANES // 2


# The default Newton iterations of a round (`sweep_orbits`' `round_iterations`):
# on a CPU 4, and a solve that needs a fifth tight iteration finishes it at the
# queue's end with the others; on an accelerator 5, since there the chunk is the
# whole batch and the elements left after 4 rounds do not fit the eighth of the
# chunk they would move to, so rounds of 4 ran slower there than longer ones.
_CPU_ROUNDS = 4


_ACCELERATOR_ROUNDS = 5


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
    - `found_by`: the strategy that found each element's orbit (its admissible
      orbit, or where there is none an `inadmissible_orbit`), as a position in
      `hybrax.SWEEP_STRATEGIES` (`"guess"`, `"neighbour"`, `"return_map"`; see
      [`hybrax.sweep_orbits`][]), -1 where none did; `strategy_names` their names
      (`""` for none).
    - `neighbour_starts`: from how many converged neighbours' orbits the element
      was solved (0 where its guess, or its warm start, found its orbit). An
      element without an orbit was tried from its guess, from these neighbours'
      orbits and, where the shooting has return-map iterations, after them; its
      status is that of the solve from its guess.
    - `inputs`: what the sweep was computed for, as `(name, value)` pairs of
      strings: the system, the section, the guess, the parameter batch (each
      leaf's values), `analyse`, `phase_observables`, the shooting and settings
      field by field, and `sweep_settings.warm_start` and `.neighbours` (numbers
      as JSON, the rest as digests; see `resume` in [`hybrax.sweep_orbits`][]).
      Kept by [`hybrax.save`][]; `()` on a sweep made otherwise.
    """

    orbit: PeriodicOrbit
    multipliers: Complex[Array, "B k"]
    found_by: Int[Array, " B"]
    neighbour_starts: Int[Array, " B"]
    inputs: Record = eqx.field(static=True, default=())

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
    def strategy_names(self) -> list[str]:
        """The name of the strategy that found each element's orbit (`""` for
        none)."""
        names = SWEEP_STRATEGIES
        return [names[k] if k >= 0 else "" for k in np.asarray(self.found_by)]

    @property
    def leading_multiplier(self) -> np.ndarray:
        """The nontrivial multiplier of largest modulus of each element."""
        return np.asarray(self.multipliers)[:, 0]


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


def _inputs(
    system,
    section,
    u_guess,
    params_batch,
    analyse,
    phase_observables,
    shooting: Shooting,
    settings: Settings,
    plan_options,
) -> Record:
    """The record of what a sweep computes (`OrbitSweep.inputs`): everything that
    changes its results."""
    return (
        record_value("system", system)
        + record_value("section", section)
        + record_value("u_guess", u_guess)
        + record_tree("params_batch", params_batch)
        + record_value("analyse", bool(analyse))
        + record_value("phase_observables", bool(phase_observables))
        + record_fields("shooting", shooting)
        + record_fields("settings", settings)
        + record_value("sweep_settings.warm_start", bool(plan_options.warm_start))
        + record_value("sweep_settings.neighbours", int(plan_options.neighbours))
    )


def _resumed(resume, n, inputs: Record, solve) -> OrbitSweep:
    """`resume` (an interrupted sweep of `n` elements, of the same `inputs`)
    with its `not_run` elements replaced by `solve(rows)`'s; Ctrl-C there raises
    [`hybrax.Interrupted`][] with the merged sweep so far."""
    if not isinstance(resume, OrbitSweep) or np.shape(resume.found_by) != (n,):
        raise ValueError(
            f"`resume` must be the OrbitSweep of an interrupted sweep of this batch "
            f"({n} elements); got {type(resume).__name__} of shape "
            f"{np.shape(getattr(resume, 'found_by', None))}."
        )
    check_resume(resume.inputs, inputs, "sweep")
    rows = np.flatnonzero(status_code(resume.result) == _NOT_RUN)
    if not rows.size:
        return resume

    def merged(part):
        part = dataclasses.replace(part, inputs=resume.inputs)

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
    changes an element's orbit (except `warm_start` and `neighbours`, which change
    its starts); they change the time.

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
      of the chunk's fresh elements' loose first iterations). Rounds of 4 with
      these moves take less CPU time per orbit than rounds of 5 in place, on
      clean batches and on batches with sets without an orbit.
      On an accelerator, where the chunk is the whole batch, rounds of 4
      leave more elements than an eighth of the chunk (below). Under `vmap` an
      element costs its chunk as much as its slowest lane, so a slow element
      holds lanes for one round instead of all its iterations; within a round,
      a lane whose root finder has stopped runs zero-length cycles; so rounds
      shorten most the batches with sets without an orbit, whose solves run
      every iteration they may.
      Once the queue is empty, the elements still iterating move to a chunk
      smaller by a power of 8 where one of at least 4096 lanes per device holds
      them, instead of the full chunk's idle lanes repeating their cycles. A
      round as long as most elements need (on the hopper most converge in 4-5
      iterations, a few need 8) sends the few that need more to that smaller
      chunk: on an accelerator rounds of 5 ran faster than rounds of 8; on a
      CPU the two ran alike.
    - `order`: the order in which elements take lanes when the batch is larger than a
      chunk, a [`hybrax.SweepOrder`][] (or its value). `"defect"` (default): by the
      return-map defect $\max_i |P(u_0) - u_0|_i$ at each element's start, largest first
      (one forward cycle per element, in chunks, before the solves): the elements that
      need many iterations or have no orbit start first, and their last rounds do not
      hold chunks of idle lanes at the end (the extra cycle costs a small part of a
      clean batch's time). `"batch"` (or `None`): batch order. The results do not depend
      on it (lanes are independent); only the time does.
    - `warm_start`: each element that takes a lane after some orbits have
      converged starts from the orbit of the converged element nearest to it in
      parameters (float leaves, each scaled to unit spread over the batch; among
      the newest 4096) instead of `u_guess` (the return-map iterations still
      apply). Without return-map iterations this saves Newton iterations on
      dense grids and small boxes but not time there (a warm batch ran slower
      than a cold one in `experiments/bench_sweep.py`),
      since the iterations saved are the loose, cheap ones and a solve still
      ends with two at the settings' tolerance; the orbits agree with the default's to
      the root finder's tolerance, but no longer bitwise, and depend on the batch
      (its order, chunks and processes). Where several orbits coexist a
      neighbour's may pull an element to another branch than its guess would
      (on a hopper grid it finds more orbits, some of them the other orbit of
      their parameter set): use continuation to follow one branch.
      Default off.
    - `neighbours`: solve each element without an orbit from its guess again from
      the orbit of each converged element among its `neighbours` nearest elements
      in parameters (scaled as for `warm_start`), nearest first, before the
      return-map strategy (see [`hybrax.sweep_orbits`][]); where one converges it
      replaces the first result (possibly an orbit of another branch where several
      coexist, as with `warm_start`). Default 8: on a two-parameter grid, a
      point's grid neighbours (an element deep in a region without orbits, with
      no converged element among them, is not solved from orbits across it); 0
      tries none.
    """

    chunk_size: int | None = eqx.field(static=True, default=None)
    devices: tuple[Any, ...] | None = eqx.field(
        static=True, default=None, converter=lambda d: None if d is None else tuple(d)
    )
    distributed: bool = eqx.field(static=True, default=False)
    round_iterations: int | None | str = eqx.field(static=True, default="auto")
    order: SweepOrder = eqx.field(
        static=True,
        default=SweepOrder.DEFECT,
        converter=lambda value: as_choice(
            SweepOrder, SweepOrder.BATCH if value is None else value, "order"
        ),
    )
    warm_start: bool = eqx.field(static=True, default=False)
    neighbours: int = eqx.field(static=True, default=SWEEP_NEIGHBOURS)

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
        if (
            isinstance(self.neighbours, bool)
            or not isinstance(self.neighbours, int | np.integer)
            or self.neighbours < 0
        ):
            raise ValueError(
                f"`neighbours` must be a non-negative integer; got {self.neighbours!r}."
            )
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

    An element is reported without an orbit only after every strategy a user
    would try singly has failed; they run in turn, each on the elements still
    without an orbit, and `OrbitSweep.found_by` records which one found each
    orbit (`hybrax.SWEEP_STRATEGIES`):

    1. `"guess"`: Newton from the element's guess $u_i$, exactly
       `find_periodic_orbit(system, section, hybrax.ShootingStart(u_i,
       loosening=math.inf), params_i, shooting=dataclasses.replace(shooting,
       return_map_iterations=0), ...)` (the first iteration at the loosest
       tolerance: the start is rough);
    2. `"neighbour"`: the same from the orbit $u_j$ of each converged element
       among its nearest elements (`sweep_settings.neighbours`, default 8: on a
       two-parameter grid, a point's grid neighbours), nearest first;
    3. `"return_map"`: the shooting's `return_map_iterations` from the guess (which
       pull a start towards a stable orbit, but near a fold can drift into its slow
       ghost and away from an orbit Newton finds directly: they never replace
       Newton from the guess), then Newton, with `loosening=1.0`.

    So each element equals a loop of single solves. Its multipliers are
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
      `find_periodic_orbit`. In a batch the slowest element sets the pace, so a
      hopeless element must be cheap: the defaults are the sweep's, shared with
      `hybrax sweep` (so that both compute the same map): `Shooting(max_iterations=10,
      return_map_iterations=30, jacobian="variational")` and `Settings(t_max=5.0)`
      (otherwise `Settings()`'s), and `phase_observables=False` (the cycle's phase
      observables are recorded only on request). Failed elements are NaN with
      their status.
    - `resume`: the `partial` sweep of an earlier call on this batch that was
      interrupted ([`hybrax.Interrupted`][]): its finished elements are kept as
      they are and only those with the status `not_run` are solved (their retry
      from a neighbour's orbit looks among themselves). It must have been
      computed for the same inputs as this call (its `inputs`: the system,
      section, guess, parameter values, `analyse`, `phase_observables`,
      shooting, settings, `warm_start` and `neighbours`; an input that cannot be
      fingerprinted, an object of an unknown type, is not compared): anything
      else is a `ValueError` naming `resume` and what differs. Default `None`.

    **Returns:** an [`hybrax.OrbitSweep`][] (NumPy arrays, batch axis first).

    **Raises:** `ValueError` for a malformed batch or guess, or a `resume` of
    other inputs. On Ctrl-C, once the
    rounds running have ended, [`hybrax.Interrupted`][] whose `partial` is the
    sweep so far: every finished element as an uninterrupted sweep gives it
    (before its retry from a neighbour, if that had not finished), the others
    with the status `not_run` and NaN values (`partial` is `None` when no
    element had finished, and always with `distributed`).
    """
    check_float64("sweep_orbits")
    params_batch, n = _batch_params(params_batch)
    settings = resolve_settings(
        Settings(t_max=SWEEP_T_MAX) if settings is None else settings
    )
    shooting = resolve_shooting(
        Shooting(
            max_iterations=SWEEP_MAX_ITERATIONS,
            return_map_iterations=SWEEP_MAP_ITERATIONS,
            jacobian=SWEEP_JACOBIAN,
        )
        if shooting is None
        else shooting
    )
    plan_options = resolve_options(sweep_settings, SweepSettings, "sweep_settings")
    inputs = _inputs(
        system,
        section,
        u_guess,
        params_batch,
        analyse,
        phase_observables,
        shooting,
        settings,
        plan_options,
    )
    if resume is not None:
        return _resumed(
            resume,
            n,
            inputs,
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
    guess, u_batch = _guesses(u_guess, n)
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
    bar = Progress(plan.n_local, progress and jax.process_index() == 0, "orbits")
    interrupted = False
    try:
        with announcing_progress(bar.enabled, bar.write):
            queue = None
            if order == "defect" and plan.n_local > plan.size:
                queue = rounds._queue_by_defect(fn, static, dynamic, u_batch, plan)
            orbit, found_by = _run_rounds(
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
            orbit, found_by, neighbour_starts = _fallback_strategies(
                fn,
                static,
                dynamic,
                u_batch,
                plan,
                max_iterations,
                orbit,
                found_by,
                plan_options.neighbours,
            )
    except _Stopped as stopped:
        if distributed:  # the other processes' rows cannot be gathered
            raise Interrupted(None) from None
        orbit, found_by = stopped.orbit, stopped.found_by
        neighbour_starts, interrupted = stopped.neighbour_starts, True
    except KeyboardInterrupt:  # before any element finished
        raise Interrupted(None) from None
    finally:
        bar.close()
    orbit, found_by, neighbour_starts = _gathered(
        (orbit, found_by, neighbour_starts), n, distributed
    )
    orbit, multipliers, code = _flagged(orbit, ok)
    out = OrbitSweep(
        orbit=orbit,
        multipliers=multipliers,
        found_by=np.where(ok, found_by, _NOT_FOUND).astype(np.int8),
        neighbour_starts=np.where(ok, neighbour_starts, 0),
        inputs=inputs,
    )
    if interrupted:
        n_run = int(np.sum(code != _NOT_RUN))
        raise Interrupted(out, f"interrupted after {n_run} of {n} elements")
    return out


def _guesses(u_guess, n: int):
    """`(guess function or None, guess batch (n, k) or None)` of `u_guess`: a
    callable, one guess for all or one per element; a `ValueError` otherwise."""
    if callable(u_guess):
        return u_guess, None
    u = np.asarray(u_guess, dtype=jnp.result_type(float))
    if u.ndim == 1:
        u = np.broadcast_to(u, (n, u.shape[0]))
    if u.ndim != 2 or u.shape[0] != n:
        raise ValueError(
            "`u_guess` must have shape (k,) or (batch, k) with batch = "
            f"{n}; got {np.shape(u_guess)}."
        )
    return None, u


def _flagged(orbit, ok):
    """The batched orbit with the elements that were not solved (`ok` false:
    non-finite parameters or guess) blanked to NaN with the status
    `nonfinite_parameters`, the sorted multipliers of the converged ones (NaN
    elsewhere) and every element's status code."""
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
    # An orbit that breaks a declared boundary keeps its values, multipliers too.
    kept = (code == 0) | (code == _INADMISSIBLE)
    converged = kept[:, None, None]
    multipliers = sorted_multipliers_batch(
        np.where(converged, np.asarray(orbit.reduced_jacobian), np.nan)
    )
    return orbit, multipliers, code
