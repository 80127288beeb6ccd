r"""The mean first-passage time of a gait on stochastic terrain (Byl & Tedrake
2009, "Metastable walking machines", Int. J. Robotics Research 28(8)): the
expected number of steps before a fall when every step meets an independent
disturbance $d_k \sim \mathcal N(0, \sigma^2)$ (the slope of each step), two
ways that check each other.

- **Walks**: batched Monte Carlo walks of the disturbed return map
  $u_{k+1} = P(u_k, d_k)$ from the orbit, each to its fall or to a step limit.
- **Mesh**: the return map on a mesh of section states times a quadrature of
  the disturbance, in one batched computation; the Markov chain that it defines
  on the mesh (images interpolated onto the mesh, the fall absorbing), and its
  expected steps to absorption.

A walk's *first passage* is the step that fails as the model declares it: a
fall (a terminal event: a walker's hip coming down, the rimless wheel's stall)
or a step that cannot end as the section declares (the compass gait's swing foot
below the ground where its strike arms, a grazing touchdown, ...). A numerical
failure, or a disturbance that takes the parameters out of the model's domain,
ends a walk without a passage (`CENSORING`). The first-passage time of a walk is
the number of the step of its passage, counted from 1.
"""

import math
import typing
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._compile import announcing_progress, compiled, system_label
from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import canonical_params
from ._periodic import PeriodicOrbit, PoincareSection, resolve_sequence
from ._progress import Progress
from ._robustness import Disturbance, disturbed_cycle
from ._settings import Settings, resolve_settings
from ._solution import NUMERICAL_FAILURES, RESULTS, status_code, status_name


class FirstPassageWalks(eqx.Module):
    r"""The result of [`hybrax.first_passage_walks`][].

    - `mfpt`: the mean first-passage time in steps, $S/F$: the steps walked by
      all walks (each to its fall, or to `max_steps`) over the falls, the
      maximum-likelihood estimate for a constant chance of falling per step
      (with no walk cut at `max_steps`, the mean of the walks' first-passage
      times). Infinite where no walk fell.
    - `interval`: its 95% confidence interval, from the falls' count as a
      Poisson variable ($\chi^2$ bounds): `(low, high)`.
    - `steps`: `(walkers,)`, each walk's first-passage time (the step of its
      passage, from 1), or `-1` where it walked `max_steps` without one or
      ended without one (`ended`).
    - `falls`: how many walks passed (fell or failed a step as the model
      declares; `passages` counts them by status); `steps_walked`: $S$.
    - `ended`: how many walks ended without a passage (a numerical failure, or
      parameters outside the model's domain): they count as walked up to their
      last step; `result` is then that failure's status (of the first such
      walk), else `successful`.
    - `passages`: status name -> walks whose passage it was (e.g.
      `terminal_event`, `armed_beyond_guard`).
    """

    mfpt: float
    interval: tuple[float, float]
    steps: Int[np.ndarray, " walkers"]
    falls: int
    steps_walked: int
    ended: int
    result: RESULTS
    passages: dict


class FirstPassageMesh(eqx.Module):
    r"""The result of [`hybrax.first_passage_mesh`][].

    - `mfpt`: the expected steps to the fall from `start` (the orbit), from
      $m = (I - T)^{-1}\mathbf 1$ at the mesh states ($T$ the chain's
      transitions between mesh states; its missing mass is the fall):
      interpolated multilinearly on a product mesh, at the first state of a
      reachable mesh (which is `start`).
    - `metastable_mfpt`: $1/(1 - \lambda_2)$, $\lambda_2$ the largest
      eigenvalue of $T$ (the second of the chain with its absorbing fall): the
      mean first-passage time of the quasi-stationary walk.
    - `eigenvalue`: $\lambda_2$.
    - `states`: `(M, k)`, the mesh states (a product mesh's in row-major order
      over the axes of `mesh`).
    - `expected_steps`: $m$ at each mesh state (on a product mesh's shape; `(M,)`
      on a reachable mesh).
    - `fall_probability`: each mesh state's chance of falling in its next step
      (shaped as `expected_steps`).
    - `transitions`: $T$, `(M, M)`, a SciPy sparse matrix (CSR).
    - `outside`: the largest share of a state's next step that the mesh does not
      cover: moved onto a product mesh's boundary, or in a cell of a reachable
      mesh that holds no state once `max_states` was reached (the mesh should
      cover the walk's states: widen it where this is not small).
    - `ended`: the largest share of a state's next step that ended without a
      passage (a numerical failure, parameters outside the model's domain;
      counted as a fall).
    """

    mfpt: float
    metastable_mfpt: float
    eigenvalue: float
    states: np.ndarray
    expected_steps: np.ndarray
    fall_probability: np.ndarray
    transitions: typing.Any
    outside: float
    ended: float


class ReachableMesh(eqx.Module):
    r"""A mesh of the section states that the disturbed walks reach from
    `start`, for [`hybrax.first_passage_mesh`][]: where the walks' states lie
    near a thinner set than a box (a section of several unknowns), a mesh of
    that set. A variant of the meshing of Saglam & Byl (2014), "Robust policies
    via meshing for metastable rough terrain walking", Robotics: Science and
    Systems, which adds an image farther than a threshold from every mesh
    state; here one state per cell.

    The state space is cut into cells of side `spacing` in units of the
    stationary spread of the linearised disturbed walk: along the principal
    axes of $\Sigma = A \Sigma A^\top + \sigma^2 B B^\top$ ($A$, $B$ the
    return map's Jacobians in the unknowns and the disturbance at `start`),
    each in its own standard deviation. A section of several unknowns holds the
    walks' states near a thin set whose narrow direction the walk barely
    spreads along; cells as wide there as along the set put each image on a
    state far off it in its own units, and the chain falls too often (the
    simplest walker's chain settled 24% below its walks with cells scaled per
    unknown by one step's spread, and agrees with them in these units). Starting
    from $u_0$ = `start`, the return map is evaluated at every new mesh state
    and disturbance node; an image in a cell that holds no mesh state becomes
    one, until no step reaches a new cell or the mesh holds `max_states`. Each
    image then moves to its nearest mesh state (in the same units) in the
    chain.

    - `spacing`: the cells' side (smaller: more states, a finer chain). At the
      default 0.5 the rimless wheel's mesh has 22 states (slopes of
      $\sigma$ = 0.015 rad), the simplest walker's 5129 (0.001 rad); the
      compass gait's (three unknowns) has 5126 at spacing 1 (0.01 rad).
    - `max_states`: the most mesh states (the exploration stops there, and
      `FirstPassageMesh.outside` reports the share of steps it left uncovered).
    """

    spacing: float = eqx.field(static=True, default=0.5)
    max_states: int = eqx.field(static=True, default=20_000)

    def __check_init__(self):
        if not (
            isinstance(self.spacing, int | float)
            and not isinstance(self.spacing, bool)
            and math.isfinite(self.spacing)
            and self.spacing > 0
        ):
            raise ValueError(
                f"`spacing` must be a positive number; got {self.spacing!r}."
            )
        _check_count(self.max_states, "max_states")


def _check_sigma(sigma) -> float:
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"`sigma` must be a positive number; got {sigma!r}.")
    return sigma


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer; got {value!r}.")
    return value


def _check_disturbance(disturbance) -> None:
    if not isinstance(disturbance, Disturbance):
        raise ValueError(
            "`disturbance` must be a hybrax.Disturbance; got "
            f"{type(disturbance).__name__}."
        )


def first_passage_walks(
    system: HybridSystem,
    section: PoincareSection,
    orbit: PeriodicOrbit,
    params: Params,
    disturbance: Disturbance,
    sigma: float,
    *,
    walkers: int = 1000,
    max_steps: int = 1000,
    seed: int = 0,
    lanes: int | None = None,
    settings: Settings | None = None,
    progress: bool = False,
) -> FirstPassageWalks:
    r"""The mean first-passage time by Monte Carlo walks: `walkers` walks of the
    disturbed return map $u_{k+1} = P(u_k, d_k)$ from the orbit's unknowns, with
    $d_k \sim \mathcal N(0, \sigma^2)$ drawn independently for every step and
    walk (`jax.random`, reproducible from `seed`), each to its first passage or
    to `max_steps`. The first passage is the step that fails as the model
    declares it: a fall (a terminal event: a walker's hip coming down, the
    rimless wheel's stall) or a step that cannot end as the section declares
    (the compass gait's swing foot below the ground where its strike arms, a
    grazing touchdown, ...); a numerical failure or a disturbance that takes the
    parameters out of the model's domain ends a walk without one. The walks
    run in `lanes` at a time, one batched step of every lane at a time (one
    compiled program; `jax.vmap` over the lanes): a lane whose walk ends
    takes the next walk, so that no lane idles until the batch's slowest walk
    falls (in calls of `WALK_CHUNK` (64) steps, between which Ctrl-C is
    honoured). Walk $w$'s disturbance at its step $s$ comes from
    `jax.random.fold_in(fold_in(key(seed), w), s)`, the same for any `lanes`.

    The estimate is $\widehat{\mathrm{MFPT}} = S/F$ with $S$ the steps walked
    and $F$ the falls, and its 95% interval
    $[2S/\chi^2_{0.975}(2F + 2),\ 2S/\chi^2_{0.025}(2F)]$ (the falls as a
    Poisson count over the exposure $S$).

    **Arguments:**

    - `system`, `section`: the hybrid system and its Poincaré section.
    - `orbit`: the [`hybrax.PeriodicOrbit`][] the walks start from (on
      `section`; where the disturbance names its own section, the walks run on
      that one from the same state, [`hybrax.Disturbance.start`][]).
    - `params`: the parameters of the orbit.
    - `disturbance`: the [`hybrax.Disturbance`][] of each step (a walker's
      slope of the next step, `ModelBundle.disturbances`).
    - `sigma`: the disturbance's standard deviation (its unit).
    - `walkers`, `max_steps`: how many walks, and the most steps of each.
    - `seed`: the seed of the disturbances.
    - `lanes`: how many walks run at a time (at most `walkers`). Default: 64
      on a CPU (1000 walks of the compass gait in 64 lanes walked 3.4-4.4
      times the steps per second of 1000 lanes on a 2-core CPU,
      `experiments/bench_walks.py`), 65 536 on an accelerator (not yet
      measured there: a guess at a GPU's width).
    - `settings`: the [`hybrax.Settings`][] of the cycles.
    - `progress`: a progress bar on stderr over the walks (tqdm where
      installed), advanced after each call of `WALK_CHUNK` steps by the walks
      that ended, with the number of walks walking.

    **Returns:** a [`hybrax.FirstPassageWalks`][] (host-side NumPy values: not
    for `jax.jit`).

    **Raises:** `ValueError` naming `sigma`, `walkers`, `max_steps`, `seed`,
    `lanes`, `orbit` (an orbit that did not converge) or `disturbance`.
    """
    sigma = _check_sigma(sigma)
    walkers = _check_count(walkers, "walkers")
    max_steps = _check_count(max_steps, "max_steps")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative integer; got {seed!r}.")
    _check_disturbance(disturbance)
    if not bool(orbit.succeeded):
        raise ValueError("`orbit` did not converge: the walks start from an orbit.")
    settings = resolve_settings(settings)
    resolve_sequence(system, section)  # a section that is no path: ValueError
    params = canonical_params(params)
    start = disturbance.start(section, jnp.asarray(orbit.u, float), params)
    section = disturbance.cycle_section(section)
    resolve_sequence(disturbance.cycle_system(system), section)
    if lanes is None:
        cpu = jax.default_backend() == "cpu"
        lanes = CPU_WALK_LANES if cpu else ACCELERATOR_WALK_LANES
    lanes = min(_check_count(lanes, "lanes"), walkers)
    bar = Progress(walkers, progress, "walks", unit="walk")
    try:
        with announcing_progress(bar.enabled, bar.write):
            steps, raw = jax.device_get(
                _walk(
                    system,
                    section,
                    settings,
                    disturbance,
                    walkers,
                    lanes,
                    max_steps,
                    start,
                    params,
                    jnp.asarray(sigma, float),
                    jax.random.key(seed),
                    bar,
                )
            )
    finally:
        bar.close()
    steps = np.asarray(steps)
    results = _as_results(np.asarray(raw))
    fell, other = _outcomes(results)
    # Each walk's steps: to its fall, to its other failure, or all of them.
    walked = np.where(fell | other, steps, max_steps)
    falls, total = int(fell.sum()), int(walked.sum())
    mfpt, interval = _poisson_estimate(total, falls)
    names = np.asarray(status_name(results))
    passages = {str(n): int(np.sum(names[fell] == n)) for n in np.unique(names[fell])}
    result = RESULTS.successful
    if other.any():
        first = int(np.flatnonzero(other)[0])
        result = jax.tree_util.tree_map(lambda leaf: leaf[first], results)
    return FirstPassageWalks(
        mfpt=mfpt,
        interval=interval,
        steps=np.where(fell, steps, -1),
        falls=falls,
        steps_walked=total,
        ended=int(other.sum()),
        result=result,
        passages=passages,
    )


def _next_and_status(system, section, settings, disturbance, params):
    """`(u, d) -> (u_next, status value)`: one disturbed cycle of the walks and
    the mesh."""

    def one(u, d):
        u_next, solution, _ = disturbed_cycle(
            system, section, settings, disturbance, u, params, d, observed=False
        )
        return u_next, _raw(solution.result)

    return one


def _raw(result):
    """A status's one leaf, its integer value (batched where it is)."""
    return jax.tree_util.tree_leaves(result)[0]


def _as_results(raw):
    """The statuses whose values are `raw` (a host array of `_raw` values)."""
    return jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(RESULTS.successful), [raw]
    )


#: The statuses of a step that end a walk without a first passage: the
#: integration broke down, or the disturbance took the parameters out of the
#: model's domain (the model says nothing there).
CENSORING = NUMERICAL_FAILURES | {"parameters_out_of_domain", "nonfinite_parameters"}


def _outcomes(results):
    """`(passage, ended otherwise)` flags of each status: a step that fails as
    the model declares it (a fall, or a step that cannot end as the section
    declares) is the walk's first passage; a numerical failure or parameters
    outside the model's domain end it without one (`CENSORING`)."""
    names = np.asarray(status_name(results)).reshape(np.shape(status_code(results)))
    failed = names != "successful"
    censored = np.isin(names, sorted(CENSORING))
    return failed & ~censored, censored


def _poisson_estimate(total: int, falls: int):
    """`S/F` and its 95% interval for `falls` falls in `total` steps."""
    from scipy.stats import chi2

    if falls == 0:
        low = 2 * total / chi2.ppf(0.975, 2) if total else 0.0
        return math.inf, (float(low), math.inf)
    low = 2 * total / chi2.ppf(0.975, 2 * falls + 2)
    high = 2 * total / chi2.ppf(0.025, 2 * falls)
    return total / falls, (float(low), float(high))


#: The walks' default lanes on a CPU, where a batch gains little past 32-64
#: lanes (`experiments/bench_vmap_gain.py`), and on an accelerator.
CPU_WALK_LANES = 64
ACCELERATOR_WALK_LANES = 65_536


#: Steps per call of the walks' program: the walks return to Python between
#: calls, where Ctrl-C is honoured (one XLA call cannot be interrupted).
WALK_CHUNK = 64


def _walk(
    system,
    section,
    settings,
    disturbance,
    walkers,
    lanes,
    max_steps,
    u0,
    params,
    sigma,
    key,
    bar,
):
    """Each walk's last step (its passage or other end, else `max_steps`) and
    the raw status it ended with, `(walkers,)` each: `lanes` walks at a time,
    in calls of at most `WALK_CHUNK` batched steps (the progress `bar` advanced
    by the walks that ended in each)."""
    successful = np.asarray(_raw(RESULTS.successful))
    carry = (
        jnp.asarray(lanes, jnp.int32),
        jnp.arange(lanes, dtype=jnp.int32),
        jnp.zeros((lanes,), jnp.int32),
        jnp.broadcast_to(u0, (lanes, u0.shape[0])),
        jnp.full((walkers,), max_steps, jnp.int32),
        jnp.full((walkers,), successful),
    )
    limit = jnp.asarray(max_steps, jnp.int32)
    while True:
        carry = _walk_chunk(
            system, section, settings, disturbance, carry, limit, u0, params, sigma, key
        )
        assigned, walker = int(carry[0]), np.asarray(carry[1])
        walking = int(np.sum(walker >= 0))
        bar.update(assigned - walking - bar.done, f"{walking} walking")
        if not walking:
            return carry[4], carry[5]


@compiled(
    "the first-passage walks", label=lambda system, *_, **__: system_label(system)
)
def _walk_chunk(
    system, section, settings, disturbance, carry, limit, u0, params, sigma, key
):
    """At most `WALK_CHUNK` batched steps of the walks in the lanes (`carry`:
    the walks assigned so far; each lane's walk, `-1` where none is left, its
    steps and unknowns; each walk's last step and raw status). A lane whose
    walk ends takes the next walk from `u0`: the lanes stay busy until the last
    walks, where a batch of every walk would idle the lanes of those that fell
    until its slowest falls. Walk `w`'s disturbance at its step `s` is drawn
    from `fold_in(fold_in(key, w), s)`: the same whatever the lanes."""
    dtype = carry[3].dtype
    walkers = carry[4].shape[0]
    successful = jnp.asarray(_raw(RESULTS.successful))
    one = _next_and_status(system, section, settings, disturbance, params)

    def draw(walker, step):
        stream = jax.random.fold_in(jax.random.fold_in(key, walker), step)
        return sigma * jax.random.normal(stream, (), dtype)

    def walking(state):
        count, (_, walker, *_) = state
        return (count < WALK_CHUNK) & jnp.any(walker >= 0)

    def step(state):
        count, (assigned, walker, taken, u, steps, codes) = state
        active = walker >= 0
        d = jax.vmap(draw)(jnp.maximum(walker, 0), taken)
        u_next, code = jax.vmap(one)(u, d)
        taken = taken + 1
        ended = active & ((code != successful) | (taken >= limit))
        # Where the walk ended, its record; the index past the end drops the
        # other lanes' writes.
        record = jnp.where(ended, walker, walkers)
        steps = steps.at[record].set(taken, mode="drop")
        codes = codes.at[record].set(code, mode="drop")
        following = assigned + jnp.cumsum(ended, dtype=jnp.int32) - 1
        walker = jnp.where(ended, jnp.where(following < walkers, following, -1), walker)
        assigned = jnp.minimum(assigned + jnp.sum(ended, dtype=jnp.int32), walkers)
        u = jnp.where(ended[:, None], u0, u_next)
        taken = jnp.where(ended, 0, taken)
        return count + 1, (assigned, walker, taken, u, steps, codes)

    return jax.lax.while_loop(walking, step, (jnp.zeros((), jnp.int32), carry))[1]


def first_passage_mesh(
    system: HybridSystem,
    section: PoincareSection,
    params: Params,
    disturbance: Disturbance,
    sigma: float,
    mesh: Sequence[Float[Array, " m"]] | ReachableMesh,
    *,
    start: Float[Array, " k"],
    bins: int = 201,
    width: float = 5.0,
    settings: Settings | None = None,
) -> FirstPassageMesh:
    r"""The mean first-passage time by the Markov chain on a mesh (Byl & Tedrake
    2009): the disturbed return map $P(u_i, d_j)$ at every mesh state $u_i$ and
    disturbance node $d_j$, in batched computations (one compiled program,
    `jax.vmap` over the pairs), defines the chain's transitions
    $T_{il} = \sum_j w_j\,\phi_l(P(u_i, d_j))$, with $\phi_l$ the weights that
    put an image on mesh state $l$, and the fall absorbing (a step that passes,
    as [`hybrax.first_passage_walks`][] defines it, leaves the mesh: the row's
    missing mass). The expected steps to the fall solve $(I - T)\,m =
    \mathbf 1$; the metastable estimate is $1/(1 - \lambda_2)$ with
    $\lambda_2$ the largest eigenvalue of $T$.

    Two meshes:

    - **A product mesh** (`mesh` one axis of values per unknown): $\phi_l$ are
      multilinear interpolation weights (an image outside the box is moved onto
      its boundary). With one section unknown (the rimless wheel) a few hundred
      values agree with an exact chain to about 1%. With more, the walks'
      states lie near a thinner set than a box, and interpolation spreads them
      into the box's failing corners: on the simplest walker (2 unknowns) and
      the compass gait (3), boxes of 15-50% around the orbit with 9-41 values
      per axis gave 3 to 30 times fewer or more steps than the walks.
    - **A reachable mesh** ([`hybrax.ReachableMesh`][]): the states the walks
      reach from `start`, one per occupied cell of the linearised walk's
      stationary spread; $\phi_l$ puts an image on its nearest mesh state. On
      the wheel it matches an exact chain to 0.05%; on the simplest walker
      (2 unknowns) it agrees with the walks from spacing 0.5 on (116.8 steps
      at $\sigma$ = 0.001 rad against 116.7 [113.2, 120.4]); on the compass
      gait (3) spacing 1 is 11-12% below the walks, spacing 0.5 4% (within
      their interval at $\sigma$ = 0.02 rad; the robustness guide has the
      figures). Check it against the walks.

    The disturbance $d \sim \mathcal N(0, \sigma^2)$ is cut into `bins` equal
    intervals over $\pm$`width`$\,\sigma$, each node $d_j$ at an interval's
    centre with its probability $w_j$ (the tails beyond go to the end
    intervals): a fall chance is resolved to about one interval's probability.

    **Arguments:**

    - `system`, `section`, `params`, `disturbance`: as for
      [`hybrax.first_passage_walks`][].
    - `sigma`: the disturbance's standard deviation.
    - `mesh`: one increasing 1-D array of values per unknown of the section
      the cycles run on (`section`, or the disturbance's own where it names
      one); the mesh is their product ($M = \prod m_i$ states: for sections of
      one to three unknowns). Or a [`hybrax.ReachableMesh`][].
    - `start`: the unknowns the reported `mfpt` starts from (the orbit's
      `u`; on the disturbance's own section, `disturbance.start(section,
      orbit.u, params)`).
    - `bins`, `width`: the disturbance's quadrature.
    - `settings`: the [`hybrax.Settings`][] of the cycles.

    **Returns:** a [`hybrax.FirstPassageMesh`][] (host-side: the chain's
    linear algebra runs in SciPy; not for `jax.jit`).

    **Raises:** `ValueError` naming `sigma`, `mesh`, `start`, `bins`, `width` or
    `disturbance`.
    """
    sigma = _check_sigma(sigma)
    bins = _check_count(bins, "bins")
    if not (math.isfinite(float(width)) and float(width) > 0):
        raise ValueError(f"`width` must be a positive number; got {width!r}.")
    _check_disturbance(disturbance)
    start = np.asarray(start, dtype=float).reshape(-1)
    if not np.all(np.isfinite(start)):
        raise ValueError("`start` must be finite.")
    reachable = isinstance(mesh, ReachableMesh)
    if not reachable:
        axes = _checked_axes(mesh, start)
    settings = resolve_settings(settings)
    section = disturbance.cycle_section(section)
    # A section that is no path: ValueError.
    resolve_sequence(disturbance.cycle_system(system), section)
    edges = np.linspace(-width, width, bins + 1)
    from scipy.stats import norm

    cdf = norm.cdf(edges)
    cdf[0], cdf[-1] = 0.0, 1.0  # the tails into the end intervals
    weights = np.diff(cdf)
    nodes = sigma * 0.5 * (edges[1:] + edges[:-1])

    def images(points):
        """The images `(n, J, k)` of `points` and which went on (neither a
        passage nor another end), which ended otherwise, `(n, J)` each: in calls
        of `MESH_CHUNK` states (one program serves every mesh)."""
        parts = []
        for first in range(0, points.shape[0], MESH_CHUNK):
            part = points[first : first + MESH_CHUNK]
            padded = np.concatenate(
                [part, np.repeat(part[:1], MESH_CHUNK - part.shape[0], 0)]
            )
            image, codes = jax.device_get(
                _mesh_images(
                    system,
                    section,
                    settings,
                    disturbance,
                    jnp.asarray(padded),
                    canonical_params(params),
                    jnp.asarray(nodes),
                )
            )
            fell, other = _outcomes(_as_results(np.asarray(codes)[: part.shape[0]]))
            parts.append((np.asarray(image)[: part.shape[0]], ~(fell | other), other))
        return [np.concatenate(values) for values in zip(*parts)]

    if reachable:
        states, rows, cols, shares, outside, other, at_start = _reachable_chain(
            images, mesh, start, weights, nodes, sigma
        )
        shape = (states.shape[0],)
    else:
        states, rows, cols, shares, outside, other, at_start = _product_chain(
            images, axes, start, weights
        )
        shape = tuple(axis.size for axis in axes)
    from scipy import sparse
    from scipy.sparse import linalg as sparse_linalg

    n_states = states.shape[0]
    transitions = sparse.csr_matrix((shares, (rows, cols)), shape=(n_states, n_states))
    fall_probability = 1.0 - np.asarray(transitions.sum(axis=1)).ravel()
    if n_states <= 500:
        spectrum = np.linalg.eigvals(transitions.toarray())
    else:
        spectrum = sparse_linalg.eigs(
            transitions, k=1, which="LM", return_eigenvectors=False
        )
    eigenvalue = float(np.max(np.abs(spectrum)))
    if eigenvalue < 1 - 1e-12:
        identity = sparse.identity(n_states, format="csc")
        expected = np.atleast_1d(
            sparse_linalg.spsolve(identity - transitions.tocsc(), np.ones(n_states))
        )
    else:  # a set of states that no step leaves: no fall from there
        expected = np.full(n_states, math.inf)
    return FirstPassageMesh(
        mfpt=float(sum(share * expected[index] for index, share in at_start)),
        metastable_mfpt=1.0 / (1.0 - eigenvalue) if eigenvalue < 1 else math.inf,
        eigenvalue=eigenvalue,
        states=states,
        expected_steps=expected.reshape(shape),
        fall_probability=fall_probability.reshape(shape),
        transitions=transitions,
        outside=float(outside.max()),
        ended=float((other * weights).sum(axis=1).max()),
    )


def _checked_axes(mesh, start) -> list:
    """A product mesh's axes, checked against `start` (`ValueError` naming
    `mesh` or `start`)."""
    if not isinstance(mesh, Sequence) or isinstance(mesh, str):
        raise ValueError(
            "`mesh` must be one 1-D array of values per section unknown, or a "
            f"hybrax.ReachableMesh; got {type(mesh).__name__}."
        )
    axes = [np.asarray(axis, dtype=float) for axis in mesh]
    if len(axes) != start.shape[0]:
        raise ValueError(
            f"`mesh` must give one axis per section unknown ({start.shape[0]}, as "
            f"`start`); got {len(axes)}."
        )
    for i, axis in enumerate(axes):
        if axis.ndim != 1 or axis.size < 2 or not np.all(np.diff(axis) > 0):
            raise ValueError(
                f"`mesh[{i}]` must be an increasing 1-D array of at least 2 values."
            )
    if not all(a[0] <= s <= a[-1] for a, s in zip(axes, start)):
        raise ValueError("`start` must lie inside the mesh.")
    return axes


def _product_chain(images, axes, start, weights):
    """The chain's entries on the product mesh of `axes`: `(states, rows,
    cols, shares, outside, other, at_start)`, `at_start` the `(index, weight)`
    pairs that interpolate `start`."""
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, len(axes))
    image, went, other = images(points)
    shape = tuple(axis.size for axis in axes)
    n_states = points.shape[0]
    low, high = [a[0] for a in axes], [a[-1] for a in axes]
    rows, cols, shares = [], [], []
    outside = np.zeros(n_states)
    for j, weight in enumerate(weights):
        ok = went[:, j]
        moved = np.where(ok[:, None], image[:, j], points)
        left = np.any((moved < low) | (moved > high), 1)
        outside += weight * (ok & left)
        for index, share in _interpolation(axes, moved, shape):
            rows.append(np.flatnonzero(ok))
            cols.append(index[ok])
            shares.append(weight * share[ok])
    at_start = [
        (int(index[0]), float(share[0]))
        for index, share in _interpolation(axes, start[None], shape)
    ]
    rows, cols, shares = map(np.concatenate, (rows, cols, shares))
    return points, rows, cols, shares, outside, other, at_start


#: Mesh states per call of the mesh's return maps (a fixed shape, so that one
#: compiled program serves every mesh and every call).
MESH_CHUNK = 128


def _whitening(images, start, image, went, weights, nodes, sigma):
    r"""The matrix `W` `(k, k)` that maps a step from `start` to the mesh's
    units, `z = (u - start) @ W`: the principal axes of the stationary spread
    of the linearised disturbed walk, each divided by its standard deviation.
    The spread solves $\Sigma = A \Sigma A^\top + \sigma^2 B B^\top$
    (`scipy.linalg.solve_discrete_lyapunov`), with $A = \partial P/\partial
    u$ and $B = \partial P/\partial d$ at (`start`, 0) by central differences
    of the chain's own program (one call, no second program to compile: they
    shape the cells, the chain's values come from the return maps). A
    direction is given at least 1% of the largest standard deviation. Where
    $A$ is not contracting, or the step has no spread, each unknown is scaled
    by the root-mean-square of one disturbed step from `start` instead.

    `image`, `went`: `images` of `start` alone, `(1, J, k)` and `(1, J)`."""
    k = start.size
    share = weights * went[0]
    moved = np.where(went[0][:, None], image[0] - start, 0.0)  # NaN where fallen
    spread = np.sqrt(np.sum(share[:, None] * moved**2, 0) / max(share.sum(), 1e-300))
    # An unknown that one step does not move: any scale serves it.
    scale = np.where(np.isfinite(spread) & (spread > 0), spread, 1.0)
    by_spread = np.diag(1.0 / scale)
    moment = np.sum(share * nodes**2)
    if not moment > 0:
        return by_spread
    response = np.sum((share * nodes)[:, None] * moved, 0) / moment
    offset = 1e-2 * scale
    probed, probe_went, _ = images(
        np.concatenate([start + np.diag(offset), start - np.diag(offset)])
    )
    centre = int(np.argmin(np.abs(nodes)))
    if not np.all(probe_went[:, centre]):
        return by_spread
    jacobian = ((probed[:k, centre] - probed[k:, centre]) / (2.0 * offset[:, None])).T
    if not (
        np.all(np.isfinite(jacobian))
        and np.all(np.isfinite(response))
        and np.max(np.abs(np.linalg.eigvals(jacobian))) < 1.0
    ):
        return by_spread
    from scipy.linalg import solve_discrete_lyapunov

    covariance = solve_discrete_lyapunov(
        jacobian, sigma**2 * np.outer(response, response)
    )
    variances, axes = np.linalg.eigh(0.5 * (covariance + covariance.T))
    if not (np.all(np.isfinite(variances)) and variances[-1] > 0):
        return by_spread
    deviations = np.sqrt(np.maximum(variances, 1e-4 * variances[-1]))
    return axes / deviations


def _reachable_chain(images, mesh, start, weights, nodes, sigma):
    """The chain's entries on the states reachable from `start` (see
    [`ReachableMesh`][hybrax.ReachableMesh]), as `_product_chain` returns them;
    `start` is state 0."""
    from scipy.spatial import cKDTree

    image, went, other = images(start[None])
    whitening = _whitening(images, start, image, went, weights, nodes, sigma)

    def units(points):
        return (points - start) @ whitening

    def cell(points):
        return [tuple(c) for c in np.floor(units(points) / mesh.spacing).astype(int)]

    states, known = [start], {cell(start[None])[0]}
    all_images, all_went, all_other = [image], [went], [other]
    frontier = image[went]
    while True:
        new = []
        for point, key in zip(frontier, cell(frontier)):
            if key not in known and len(states) + len(new) < mesh.max_states:
                known.add(key)
                new.append(point)
        if not new:
            break
        states.extend(new)
        image, went, other = images(np.asarray(new))
        all_images.append(image)
        all_went.append(went)
        all_other.append(other)
        frontier = image[went]
    states = np.asarray(states)
    image, went, other = map(np.concatenate, (all_images, all_went, all_other))
    n_states, n_nodes = went.shape
    tree = cKDTree(units(states))
    flat = image.reshape(n_states * n_nodes, -1)
    moved = np.where(went.reshape(-1)[:, None], flat, start)
    _, nearest = tree.query(units(moved))
    uncovered = np.asarray([key not in known for key in cell(moved)])
    ok = went.reshape(-1)
    share = np.broadcast_to(weights, (n_states, n_nodes)).reshape(-1)
    rows = np.repeat(np.arange(n_states), n_nodes)
    outside = np.sum((share * (ok & uncovered)).reshape(n_states, n_nodes), 1)
    return states, rows[ok], nearest[ok], share[ok], outside, other, [(0, 1.0)]


def _interpolation(axes, values, shape):
    """The multilinear interpolation of `values` `(N, k)` on the product mesh
    `axes` (clamped onto its box): `(flat index, weight)` pairs of its `2^k`
    corners, each `(N,)`."""
    lower, upper = [], []
    for axis, value in zip(axes, values.T):
        clamped = np.clip(value, axis[0], axis[-1])
        i = np.clip(np.searchsorted(axis, clamped, side="right") - 1, 0, axis.size - 2)
        t = (clamped - axis[i]) / (axis[i + 1] - axis[i])
        lower.append((i, 1.0 - t))
        upper.append((i + 1, t))
    corners = []
    for choice in np.ndindex(*([2] * len(axes))):
        picks = [upper[a] if c else lower[a] for a, c in enumerate(choice)]
        index = np.ravel_multi_index(tuple(p[0] for p in picks), shape)
        weight = np.prod([p[1] for p in picks], axis=0)
        corners.append((index, weight))
    return corners


@compiled(
    "the mesh of return maps", label=lambda system, *_, **__: system_label(system)
)
def _mesh_images(system, section, settings, disturbance, points, params, nodes):
    """The disturbed return map at every mesh point and node, `(M, J, k)`, and
    each cycle's status code `(M, J)`."""
    one = _next_and_status(system, section, settings, disturbance, params)

    per_node = jax.vmap(one, in_axes=(None, 0))
    return jax.vmap(per_node, in_axes=(0, None))(points, nodes)
