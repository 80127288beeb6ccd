"""Results."""

import dataclasses

import equinox as eqx
import numpy as np
from jaxtyping import Bool, Complex, Float, Int

from .._solution import RESULTS


SPECIAL_POINT_KINDS = (
    "fold",
    "period_doubling",
    "neimark_sacker",
    "force_reversal",
    "grazing",
    "release_reversal",
)


class SpecialPoint(eqx.Module):
    r"""A located special point of a branch.

    - `kind`: `"fold"` (limit point, saddle-node: a real multiplier is $+1$,
      $\det F_u = 0$, the branch turns back in $\lambda$), `"period_doubling"`
      (flip: a real multiplier is $-1$, $\det(M + I) = 0$; a branch of twice the
      period bifurcates) or `"neimark_sacker"` (torus: a complex pair
      $e^{\pm i\theta}$ on the unit circle, $\det(M \odot M - I) = 0$); on
      a branch of periodic orbits also `"force_reversal"`, a hybrid boundary:
      the phase that event `event` starts begins on its guard (its
      `guard_at_start` changes sign; for the hopper, the ground force right
      after touchdown, which past it would have to pull: `Branch.admissible`
      turns `False`), and `"grazing"`, where a declared [`hybrax.Clearance`][]
      of the phase that ends at event `event` (named `observable`) reaches
      zero: the motion touches its obstacle tangentially inside the phase
      (beyond it the clearance is negative and `Branch.admissible` is
      `False`), and `"release_reversal"`, where the release velocity
      `observable` of the impact at event `event` changes sign (the contact it
      releases, the compass gait's trailing foot, would stay on the ground:
      beyond it the impact model does not hold and `Branch.admissible` is
      `False`); on a [`hybrax.BifurcationCurve`][], the codimension-two
      kinds `"cusp"`, `"fold_flip"`, `"resonance_1_1"` and `"resonance_1_2"`,
      and where the curve meets another: a `"force_reversal"` on a
      bifurcation's curve, a `"fold"`, `"period_doubling"` or
      `"neimark_sacker"` on a force reversal's.
    - `index`: the position of this point in the branch's arrays.
    - `parameter`: $\lambda$ there; `u`: the unknowns there.
    - `multipliers`: the eigenvalues of the multiplier matrix $M$ there, by
      decreasing modulus (`None` without one); `multiplier_matrix`: $M$.
    - `test_value`: the located test function (ideally 0).
    - `located`: whether the root search on the test function converged.
    - `event`: for a `"force_reversal"`, the index of the event whose next
      phase starts on its guard; for a `"grazing"`, the index of the phase
      that grazes (phase $k$ ends at event $k$); for a `"release_reversal"`,
      the event's; `None` otherwise.
    - `observable`: for a `"grazing"`, the name of the clearance; for a
      `"release_reversal"`, of the release velocity; `None` otherwise.
    - `state`, `phase_durations`, `period`: for periodic orbits of a hybrid system
      ([`hybrax.continue_orbits`][]): the section state, the durations of the
      phases of one cycle and their sum; `None` otherwise.
    """

    kind: str
    index: int
    parameter: float
    u: Float[np.ndarray, " k"]
    multipliers: Complex[np.ndarray, " k"] | None
    multiplier_matrix: Float[np.ndarray, "k k"] | None
    test_value: float
    located: bool
    event: int | None = None
    observable: str | None = eqx.field(static=True, default=None)
    state: Float[np.ndarray, " n"] | None = None
    phase_durations: Float[np.ndarray, " E"] | None = None
    period: float | None = None

    @property
    def critical_multiplier(self) -> complex:
        r"""The multiplier that crosses: the one nearest $+1$ (fold), $-1$ (period
        doubling), or of the pair with $\nu_i\nu_j$ nearest 1 the one with
        positive imaginary part (Neimark-Sacker)."""
        if self.multipliers is None:
            raise ValueError("This branch has no multiplier matrix.")
        nu = self.multipliers
        if self.kind == "neimark_sacker":
            i, j = _closest_pair(nu)
            return complex(nu[i] if nu[i].imag >= 0 else nu[j])
        target = 1.0 if self.kind == "fold" else -1.0
        return complex(nu[np.argmin(np.abs(nu - target))])


class _SpecialPointViews(eqx.Module):
    """The filtered views of `special_points` that every branch offers."""

    special_points: eqx.AbstractVar[tuple[SpecialPoint, ...]]
    parameter: eqx.AbstractVar[np.ndarray]
    result: eqx.AbstractVar[RESULTS]

    @property
    def succeeded(self) -> bool:
        """Whether the continuation gave a branch: it started and was not
        interrupted (it stopped at a bound, `max_points`, `max_period` or
        `min_step`; `result` says which)."""
        return not bool(
            (self.result == RESULTS.start_failed) | (self.result == RESULTS.interrupted)
        )

    @property
    def n_points(self) -> int:
        """The number of points $N$."""
        return int(self.parameter.shape[0])

    def select(self, index):
        """The points `index` (an integer array, a slice or a boolean mask along
        the points) as a branch of their own, of the same type: every per-point
        array and `kind` indexed; the labels, `result` and `special_points` (whose
        `index` refers to this branch) kept as they are."""
        names = [
            field.name
            for field in dataclasses.fields(self)
            if not field.metadata.get("static")
            and field.name not in ("special_points", "result")
            and getattr(self, field.name) is not None
        ]
        picked = np.arange(self.n_points)[index]

        def pick(value):
            if isinstance(value, dict):  # named quantities, each per point
                return {key: np.asarray(v)[picked] for key, v in value.items()}
            return np.asarray(value)[picked]

        return dataclasses.replace(
            self,
            **{name: pick(getattr(self, name)) for name in names},
            kind=tuple(self.kind[i] for i in np.atleast_1d(picked)),
        )

    @property
    def folds(self) -> tuple[SpecialPoint, ...]:
        """The located folds, in the order met."""
        return tuple(p for p in self.special_points if p.kind == "fold")

    @property
    def period_doublings(self) -> tuple[SpecialPoint, ...]:
        """The located period doublings, in the order met."""
        return tuple(p for p in self.special_points if p.kind == "period_doubling")

    @property
    def neimark_sackers(self) -> tuple[SpecialPoint, ...]:
        """The located Neimark-Sacker (torus) points, in the order met."""
        return tuple(p for p in self.special_points if p.kind == "neimark_sacker")

    @property
    def force_reversals(self) -> tuple[SpecialPoint, ...]:
        """The located force reversals (a phase that starts on its guard), in
        the order met."""
        return tuple(p for p in self.special_points if p.kind == "force_reversal")

    @property
    def grazings(self) -> tuple[SpecialPoint, ...]:
        """The located grazings (a declared clearance reaching zero inside a
        phase), in the order met."""
        return tuple(p for p in self.special_points if p.kind == "grazing")

    @property
    def release_reversals(self) -> tuple[SpecialPoint, ...]:
        """The located release reversals (the release velocity of an impact
        changing sign), in the order met."""
        return tuple(p for p in self.special_points if p.kind == "release_reversal")


class SolutionBranch(_SpecialPointViews):
    r"""The result of [`hybrax.continue_zeros`][] and
    [`hybrax.continue_fixed_points`][]: $N$ points of a branch of zeros of
    $F(u, \lambda)$, in the order followed, as NumPy arrays.

    Per point (leading axis $N$): `parameter` ($\lambda$), `u` `(N, k)`,
    `tangent` (the oriented unit tangent $(du, d\lambda)$ in the scaled
    coordinates, `(N, k + 1)`; its last entry changes sign at folds),
    `multiplier_matrix` $M$ `(N, k, k)`, `multipliers` (its eigenvalues by
    decreasing modulus, `(N, k)`) and `stable` (all $|\nu_i| < 1$), each `None`
    without a multiplier matrix; `kind` (`"start"`, `"regular"`, `"fold"`,
    `"period_doubling"`, `"neimark_sacker"` or `"end"`, a point placed on a bound
    of the parameter range); `residual_norm` ($\max|F|$); `newton_steps`.

    Besides: `special_points` (every located [`hybrax.SpecialPoint`][], also
    present in the arrays at its `index`) and its views `folds`,
    `period_doublings`, `neimark_sackers`; `iterates` ($m$ for fixed points of
    $g^m$, `None` for [`hybrax.continue_zeros`][]); `parameter_name`, `method`,
    `result` (a [`hybrax.RESULTS`][] member saying why the continuation
    stopped: `reached_bound`, `max_points_reached`, `min_step_reached`,
    `start_failed`; `interrupted` on the `partial` of [`hybrax.Interrupted`][]),
    `succeeded`, `message` and `n_rejected` (rejected steps).

    A branch is a PyTree (an `eqx.Module`): its leaves are its per-point arrays,
    its `result` and its special points' arrays; the labels (`parameter_name`,
    `method`, `kind`, `message`, ...) are static. `select(index)` gives some of
    its points as a branch.
    """

    parameter_name: str = eqx.field(static=True)
    method: str = eqx.field(static=True)
    iterates: int | None = eqx.field(static=True)
    parameter: Float[np.ndarray, " N"]
    u: Float[np.ndarray, "N k"]
    tangent: Float[np.ndarray, "N k+1"]
    multiplier_matrix: Float[np.ndarray, "N k k"] | None
    multipliers: Complex[np.ndarray, "N k"] | None
    stable: Bool[np.ndarray, " N"] | None
    kind: tuple[str, ...] = eqx.field(static=True)
    residual_norm: Float[np.ndarray, " N"]
    newton_steps: Int[np.ndarray, " N"]
    special_points: tuple[SpecialPoint, ...]
    result: RESULTS
    message: str = eqx.field(static=True)
    n_rejected: int = eqx.field(static=True)


class Branch(_SpecialPointViews):
    r"""The result of [`hybrax.continue_orbits`][]: $N$ periodic orbits along a
    branch, in the order followed, as NumPy arrays (stable and unstable ones).

    Per point (leading axis $N$):

    - `parameter`: $\lambda$; `u`: reduced unknowns `(N, k)`; `state`: the section
      state $\chi(u)$ `(N, n)`.
    - `tangent`: the oriented unit tangent $(du, d\lambda)$ in the continuation's
      scaled coordinates `(N, k + 1)` (its last entry changes sign at folds).
    - `t_events`, `phase_durations`: event times and phase durations of one cycle
      `(N, E)` (the phase that starts at the section first); `period`: their sum.
    - `x_before`, `x_after`: the states at each event `(N, E, n)`.
    - `observables`: the event observables that the model's transitions declare
      (`Transition(observe=...)`), by name, each `(N, E, ...)` (NaN at an event
      whose transition does not report it), as in
      [`hybrax.HybridSolution`][]`.observables`: for a mechanical impact the
      energy lost and kept, `"T_c"` and `"T_a"`, and its impulse; for an impact
      that releases a contact ([`hybrax.ImpactRelabel`][]`(release=...)`) the
      release velocity, named in `release_names`. A model without impacts has
      none of these. Where a release velocity is below `-guard_tol` the released
      contact would stay and `admissible` is `False`; where it crosses zero the
      branch has a `"release_reversal"` special point.
    - `guard_at_start`: the sign-normalised guard of each phase's mode right after
      its event `(N, E)`. Negative means the orbit enters that phase already past
      one of its guards (for the hopper, `guard_at_start[:, 0] < 0`: the ground
      would have to pull right after touchdown); `admissible` is `False` there.
    - `phase_observables`: the model's declared [`hybrax.Clearance`][]s, by the
      names in `clearance_names`, each `(N, E)`: its minimum over each phase (NaN
      where a phase has no interior minimum of it). Where one is below
      `-guard_tol` the orbit passes through its obstacle and `admissible` is
      `False`; where it crosses zero the branch has a `"grazing"` special point.
    - `reduced_jacobian`: $M = \partial P/\partial u$ `(N, k, k)`; `multipliers`:
      its eigenvalues (the nontrivial Floquet multipliers) by decreasing modulus
      `(N, k)`; `stable`: all $|\nu_i| < 1$.
    - `kind`: `"start"`, `"regular"`, `"fold"`, `"period_doubling"`,
      `"neimark_sacker"` or `"end"` (a point placed on a bound of the parameter
      range).
    - `residual_norm`: $\max|F|$; `newton_steps`: corrector iterations.

    Besides: `special_points` (every located [`hybrax.SpecialPoint`][], also
    present in the arrays at its `index`) and its views `folds`,
    `period_doublings`, `neimark_sackers`, `force_reversals`, `grazings` and
    `release_reversals`;
    `parameter_name`, `method`,
    `result` (a [`hybrax.RESULTS`][] member saying why the continuation stopped:
    `reached_bound`, `max_points_reached`, `max_period_reached`,
    `min_step_reached`, `start_failed`; `interrupted` on the `partial` of
    [`hybrax.Interrupted`][]), `succeeded`, `message` and `n_rejected` (rejected
    steps).

    A branch is a PyTree (an `eqx.Module`): its leaves are its per-point arrays,
    its `result` and its special points' arrays; the labels (`parameter_name`,
    `method`, `kind`, `message`, ...) are static. `select(index)` gives some of
    its points as a branch.
    """

    parameter_name: str = eqx.field(static=True)
    method: str = eqx.field(static=True)
    parameter: Float[np.ndarray, " N"]
    u: Float[np.ndarray, "N k"]
    state: Float[np.ndarray, "N n"]
    tangent: Float[np.ndarray, "N k+1"]
    t_events: Float[np.ndarray, "N E"]
    phase_durations: Float[np.ndarray, "N E"]
    period: Float[np.ndarray, " N"]
    x_before: Float[np.ndarray, "N E n"]
    x_after: Float[np.ndarray, "N E n"]
    observables: dict[str, Float[np.ndarray, "N E ..."]]
    guard_at_start: Float[np.ndarray, "N E"]
    phase_observables: dict[str, Float[np.ndarray, "N E"]]
    admissible: Bool[np.ndarray, " N"]
    reduced_jacobian: Float[np.ndarray, "N k k"]
    multipliers: Complex[np.ndarray, "N k"]
    stable: Bool[np.ndarray, " N"]
    kind: tuple[str, ...] = eqx.field(static=True)
    residual_norm: Float[np.ndarray, " N"]
    newton_steps: Int[np.ndarray, " N"]
    special_points: tuple[SpecialPoint, ...]
    result: RESULTS
    message: str = eqx.field(static=True)
    n_rejected: int = eqx.field(static=True)
    clearance_names: tuple[str, ...] = eqx.field(static=True, default=())
    release_names: tuple[str, ...] = eqx.field(static=True, default=())


def _closest_pair(nu: np.ndarray) -> tuple[int, int]:
    """The pair $i < j$ whose product $\\nu_i\\nu_j$ is nearest 1."""
    pairs = [(i, j) for i in range(len(nu)) for j in range(i + 1, len(nu))]
    return min(pairs, key=lambda ij: abs(nu[ij[0]] * nu[ij[1]] - 1.0))
