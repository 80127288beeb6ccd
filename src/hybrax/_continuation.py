r"""Numerical continuation of zeros, fixed points and periodic orbits in one scalar
parameter.

The core follows a curve (branch) of zeros of $F(u, \lambda) = 0$, $u \in
\mathbb{R}^k$ and $\lambda$ a scalar, by Keller's (1977) pseudo-arclength
continuation: with $z = (u, \lambda)$, the unit tangent $t$ spanning the null space
of $[F_u\ F_\lambda]$ and a step $h$, the predictor $z_p = z_n + h\,t_n$ is
corrected by solving

$$F(z) = 0, \qquad t_n \cdot (z - z_p) = 0$$

with Newton's method (optimistix). Natural-parameter continuation (fix $\lambda$,
solve $F(u, \lambda) = 0$) is the other `method`; it cannot pass a fold. Its clients:

- [`hybrax.continue_zeros`][]: any $F$, with an optional multiplier matrix $M$;
- [`hybrax.continue_fixed_points`][]: fixed points of a map, $F = g^m(u) - u$ with
  $M = D_u g^m$ ($m = 1$: fixed points, $m > 1$: period-$m$ orbits), and
  [`hybrax.continue_period_doubled`][], which switches onto the period-$2m$ branch
  at a period doubling;
- [`hybrax.continue_branch`][]: periodic orbits of a hybrid system,
  $F(u, \lambda) = \pi(P(\chi(u); p(\lambda))) - u$ with the return map $P$ of
  [`hybrax.poincare_map`][] and $M = F_u + I$ the reduced Jacobian (Zana et al.
  2018 eqs. 32-33), whose eigenvalues are the nontrivial Floquet multipliers;
  [`hybrax.continue_branch_period_doubled`][] switches onto its period-2 orbits
  (the return map of [`hybrax.period_doubled_section`][]) at a period doubling.

Step control lives in [`hybrax.ContinuationSettings`][]; every located special point
is a [`hybrax.SpecialPoint`][] told apart by its `kind`.

Along a branch, with $\nu_i$ the eigenvalues of $M$ (Kuznetsov 2004, sec. 10.2;
Seydel 2010, ch. 5):

- a fold is where a real multiplier passes $+1$: $\det F_u$ $(= \prod(\nu_i - 1)$
  when $F_u = M - I)$ changes sign, and so does the $\lambda$-component of the
  oriented tangent;
- a period doubling (flip) is where a real multiplier passes $-1$:
  $\det(M + I) = \prod(\nu_i + 1)$ changes sign;
- a Neimark-Sacker (torus) point is where a complex pair crosses the unit circle:
  $\det(M \odot M - I) = \prod_{i<j}(\nu_i\nu_j - 1)$ changes sign, $M \odot M$
  the bialternate product (here the second compound matrix, whose eigenvalues are
  the $\nu_i\nu_j$, $i < j$). It also vanishes at a neutral saddle (real
  $\nu_i\nu_j = 1$), which is discarded after location.

Each is located by the Illinois variant of regula falsi on its test function
between the two points that bracket it.
"""

import abc
import dataclasses
import math
from collections.abc import Callable
from typing import Any, Literal

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Complex, Float, Int, PyTree

from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import canonical_params, check_float64
from ._parameters import (
    AbstractParameter as AbstractParameter,
    FieldParameter as FieldParameter,
    FunctionParameter as FunctionParameter,
    _as_parameter as _as_parameter,
)
from ._periodic import (
    PoincareSection,
    poincare_map,
    resolve_sequence,
    sorted_multipliers,
)
from ._programs import announce, compiled
from ._settings import (
    Settings,
    check_iterations,
    resolve_root_finder,
    resolve_settings,
)
from ._solution import RESULTS, Interrupted


# ---------------------------------------------------------------------------
# Step control
# ---------------------------------------------------------------------------

_METHODS = ("pseudo-arclength", "natural")


class ContinuationSettings(eqx.Module):
    r"""How a branch is followed: the predictor-corrector method, its step control
    and the location of special points. The one place where their defaults live.

    The step $h$ (scaled arclength, or $|\Delta\lambda|$ for `"natural"`) starts
    at `initial_step`; it grows by `growth` after a corrector that converged in at
    most `fast_newton` iterations, shrinks by `shrink` after more than
    `slow_newton`, and halves after a failure: no convergence, an invalid point, a
    correction longer than `max_correction` times the step, or a tangent that
    turned so that $t_{n+1}\cdot t_n <$ `min_tangent_cos` (both guard against
    jumping to a neighbouring branch). Below `min_step` the continuation stops.
    Lengths and tangents are taken in the scaled coordinates $(u, \lambda/\theta)$,
    $\theta$ = `parameter_scale`.

    **Arguments:**

    - `method`: `"pseudo-arclength"` (Keller 1977) or `"natural"` (fixed
      $\lambda$; stops at a fold).
    - `initial_step`, `min_step`, `max_step`: the first, smallest and largest step.
    - `max_points`: the most points of a branch (located special points included).
    - `parameter_scale`: $\theta$; about the size of the expected change of
      $\lambda$ per unit change of $u$ balances the steps.
    - `locate`: locate special points (otherwise they are not reported).
    - `locate_tol`, `max_locate_iterations`: the tolerance on the chord (scaled
      coordinates) and the iteration limit of their location.
    - `corrector`: the root finder of the corrector (Newton on the extended
      system), any `optimistix.AbstractRootFinder`; default
      `optimistix.Newton(rtol=1e-11, atol=1e-11)`.
    - `max_iterations`: the corrector's iteration limit.
    - `residual_tol`: the largest $\max|F|$ accepted as a point of the branch.
    - `fast_newton`, `slow_newton`, `growth`, `shrink`, `min_tangent_cos`,
      `max_correction`: the step adaptation above.

    **References:** R. Seydel (2010), Practical Bifurcation and Stability Analysis,
    sec. 4.6 (step control).
    """

    method: Literal["pseudo-arclength", "natural"] = eqx.field(
        static=True, default="pseudo-arclength"
    )
    initial_step: float = eqx.field(static=True, default=0.02, converter=float)
    min_step: float = eqx.field(static=True, default=1e-6, converter=float)
    max_step: float = eqx.field(static=True, default=0.2, converter=float)
    max_points: int = eqx.field(static=True, default=500)
    parameter_scale: float = eqx.field(static=True, default=1.0, converter=float)
    locate: bool = eqx.field(static=True, default=True)
    locate_tol: float = eqx.field(static=True, default=1e-11, converter=float)
    max_locate_iterations: int = eqx.field(static=True, default=60)
    corrector: optx.AbstractRootFinder = eqx.field(
        default=None, converter=lambda finder: resolve_root_finder(finder, "corrector")
    )
    max_iterations: int = eqx.field(static=True, default=12)
    residual_tol: float = eqx.field(static=True, default=1e-8, converter=float)
    fast_newton: int = eqx.field(static=True, default=3)
    slow_newton: int = eqx.field(static=True, default=6)
    growth: float = eqx.field(static=True, default=1.5, converter=float)
    shrink: float = eqx.field(static=True, default=0.7, converter=float)
    min_tangent_cos: float = eqx.field(static=True, default=0.8, converter=float)
    max_correction: float = eqx.field(static=True, default=1.0, converter=float)

    def __check_init__(self):
        if self.method not in _METHODS:
            raise ValueError(
                "`method` must be 'pseudo-arclength' or 'natural'; got "
                f"{self.method!r}."
            )
        if not 0 < self.min_step <= self.initial_step <= self.max_step:
            raise ValueError(
                "Need 0 < `min_step` <= `initial_step` <= `max_step`; got "
                f"{self.min_step}, {self.initial_step}, {self.max_step}."
            )
        if isinstance(self.max_points, bool) or int(self.max_points) < 1:
            raise ValueError(f"`max_points` must be positive; got {self.max_points}.")
        if not (self.parameter_scale > 0 and math.isfinite(self.parameter_scale)):
            raise ValueError(
                f"`parameter_scale` must be positive; got {self.parameter_scale}."
            )
        check_iterations(self.max_iterations)
        if int(self.max_locate_iterations) < 1:
            raise ValueError(
                "`max_locate_iterations` must be positive; got "
                f"{self.max_locate_iterations}."
            )
        for name in ("locate_tol", "residual_tol", "growth", "max_correction"):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"`{name}` must be positive; got {getattr(self, name)}."
                )
        if not 0 < self.shrink < 1:
            raise ValueError(f"`shrink` must lie in (0, 1); got {self.shrink}.")
        if not -1 <= self.min_tangent_cos < 1:
            raise ValueError(
                f"`min_tangent_cos` must lie in [-1, 1); got {self.min_tangent_cos}."
            )


def _resolve_continuation_settings(
    continuation_settings: ContinuationSettings | None,
) -> ContinuationSettings:
    """`continuation_settings`, or the defaults; a clear error for anything
    else."""
    if continuation_settings is None:
        return ContinuationSettings()
    if not isinstance(continuation_settings, ContinuationSettings):
        raise ValueError(
            "`continuation_settings` must be a hybrax.ContinuationSettings; got "
            f"{type(continuation_settings).__name__}."
        )
    return continuation_settings


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------

SPECIAL_POINT_KINDS = ("fold", "period_doubling", "neimark_sacker")


@dataclasses.dataclass(frozen=True, eq=False)
class SpecialPoint:
    r"""A located special point of a branch.

    - `kind`: `"fold"` (limit point, saddle-node: a real multiplier is $+1$,
      $\det F_u = 0$, the branch turns back in $\lambda$), `"period_doubling"`
      (flip: a real multiplier is $-1$, $\det(M + I) = 0$; a branch of twice the
      period bifurcates) or `"neimark_sacker"` (torus: a complex pair
      $e^{\pm i\theta}$ on the unit circle, $\det(M \odot M - I) = 0$).
    - `index`: the position of this point in the branch's arrays.
    - `parameter`: $\lambda$ there; `u`: the unknowns there.
    - `multipliers`: the eigenvalues of the multiplier matrix $M$ there, by
      decreasing modulus (`None` without one); `multiplier_matrix`: $M$.
    - `test_value`: the located test function (ideally 0).
    - `located`: whether the root search on the test function converged.
    - `state`, `phase_durations`, `period`: for periodic orbits of a hybrid system
      ([`hybrax.continue_branch`][]): the section state, the durations of the
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


class _SpecialPointViews:
    """The filtered views of `special_points` that every branch offers."""

    special_points: tuple[SpecialPoint, ...]
    parameter: np.ndarray

    @property
    def n_points(self) -> int:
        """The number of points $N$."""
        return int(self.parameter.shape[0])

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


@dataclasses.dataclass(frozen=True, eq=False)
class SolutionBranch(_SpecialPointViews):
    r"""The result of [`hybrax.continue_zeros`][], [`hybrax.continue_fixed_points`][]
    and [`hybrax.continue_period_doubled`][]: $N$ points of a branch of zeros of
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
    `status` (why the continuation stopped: `"reached_bound"`, `"max_points"`,
    `"min_step"`, `"start_failed"`; `"interrupted"` on the `partial` of
    [`hybrax.Interrupted`][]), `message` and `n_rejected` (rejected steps).
    """

    parameter_name: str
    method: str
    iterates: int | None
    parameter: Float[np.ndarray, " N"]
    u: Float[np.ndarray, "N k"]
    tangent: Float[np.ndarray, "N k+1"]
    multiplier_matrix: Float[np.ndarray, "N k k"] | None
    multipliers: Complex[np.ndarray, "N k"] | None
    stable: Bool[np.ndarray, " N"] | None
    kind: tuple[str, ...]
    residual_norm: Float[np.ndarray, " N"]
    newton_steps: Int[np.ndarray, " N"]
    special_points: tuple[SpecialPoint, ...]
    status: str
    message: str
    n_rejected: int


@dataclasses.dataclass(frozen=True, eq=False)
class Branch(_SpecialPointViews):
    r"""The result of [`hybrax.continue_branch`][]: $N$ periodic orbits along a
    branch, in the order followed, as NumPy arrays (stable and unstable ones).

    Per point (leading axis $N$):

    - `parameter`: $\lambda$; `u`: reduced unknowns `(N, k)`; `state`: the section
      state $\chi(u)$ `(N, n)`.
    - `tangent`: the oriented unit tangent $(du, d\lambda)$ in the continuation's
      scaled coordinates `(N, k + 1)` (its last entry changes sign at folds).
    - `t_events`, `phase_durations`: event times and phase durations of one cycle
      `(N, E)` (the phase that starts at the section first); `period`: their sum.
    - `x_before`, `x_after`: the states at each event `(N, E, n)`; `T_c`, `T_a`:
      energy lost and kept at each event `(N, E)` (NaN where the reset reports
      none).
    - `guard_at_start`: the sign-normalised guard of each phase's mode right after
      its event `(N, E)`. Negative means the orbit enters that phase already past
      one of its guards (for the hopper, `guard_at_start[:, 0] < 0`: the ground
      would have to pull right after touchdown); `admissible` is `False` there.
    - `reduced_jacobian`: $M = \partial P/\partial u$ `(N, k, k)`; `multipliers`:
      its eigenvalues (the nontrivial Floquet multipliers) by decreasing modulus
      `(N, k)`; `stable`: all $|\nu_i| < 1$.
    - `kind`: `"start"`, `"regular"`, `"fold"`, `"period_doubling"`,
      `"neimark_sacker"` or `"end"` (a point placed on a bound of the parameter
      range).
    - `residual_norm`: $\max|F|$; `newton_steps`: corrector iterations.

    Besides: `special_points` (every located [`hybrax.SpecialPoint`][], also
    present in the arrays at its `index`) and its views `folds`,
    `period_doublings` and `neimark_sackers`; `parameter_name`, `method`, `status`
    (why the continuation stopped: `"reached_bound"`, `"max_points"`,
    `"max_period"`, `"min_step"`, `"start_failed"`; `"interrupted"` on the
    `partial` of [`hybrax.Interrupted`][]), `message` and `n_rejected` (rejected
    steps).
    """

    parameter_name: str
    method: str
    parameter: Float[np.ndarray, " N"]
    u: Float[np.ndarray, "N k"]
    state: Float[np.ndarray, "N n"]
    tangent: Float[np.ndarray, "N k+1"]
    t_events: Float[np.ndarray, "N E"]
    phase_durations: Float[np.ndarray, "N E"]
    period: Float[np.ndarray, " N"]
    x_before: Float[np.ndarray, "N E n"]
    x_after: Float[np.ndarray, "N E n"]
    T_c: Float[np.ndarray, "N E"]
    T_a: Float[np.ndarray, "N E"]
    guard_at_start: Float[np.ndarray, "N E"]
    admissible: Bool[np.ndarray, " N"]
    reduced_jacobian: Float[np.ndarray, "N k k"]
    multipliers: Complex[np.ndarray, "N k"]
    stable: Bool[np.ndarray, " N"]
    kind: tuple[str, ...]
    residual_norm: Float[np.ndarray, " N"]
    newton_steps: Int[np.ndarray, " N"]
    special_points: tuple[SpecialPoint, ...]
    status: str
    message: str
    n_rejected: int


# ---------------------------------------------------------------------------
# The problems: F(z) = 0, with its validity, auxiliary output and multipliers
# ---------------------------------------------------------------------------


def _register_branch_pytree(cls) -> None:
    """Make a branch a PyTree whose leaves are its stacked per-point arrays (labels,
    status and special points are metadata): `jax.tree.map` over a branch maps its
    arrays, e.g. to select points or convert them."""
    labels = {
        "parameter_name",
        "method",
        "iterates",
        "kind",
        "special_points",
        "status",
        "message",
        "n_rejected",
    }
    fields = [f.name for f in dataclasses.fields(cls)]
    jax.tree_util.register_dataclass(
        cls,
        data_fields=[f for f in fields if f not in labels],
        meta_fields=[f for f in fields if f in labels],
    )


_register_branch_pytree(SolutionBranch)
_register_branch_pytree(Branch)


class _AbstractResidual(eqx.Module):
    """$F(z)$ of a continuation problem, $z = (u, \\lambda)$. `__call__(z)` returns
    `(F, valid, aux)`: the residual, whether the evaluation is meaningful (a cycle
    that ran as declared), and per-point data kept with the point (or `None`)."""

    @abc.abstractmethod
    def __call__(self, z: Float[Array, " k+1"]) -> tuple[Array, Array, Any]:
        """`(F, valid, aux)` at `z`."""

    @abc.abstractmethod
    def multiplier_matrix(
        self, z: Float[Array, " k+1"], jacobian: Float[Array, "k k+1"]
    ) -> Float[Array, "k k"] | None:
        """The multiplier matrix at the solution `z`, given $[F_u\\ F_\\lambda]$
        there; `None` when the problem has none."""


class _ZerosResidual(_AbstractResidual):
    fn: Callable
    multiplier_fn: Callable | None
    args: PyTree

    def __call__(self, z):
        u, lam = z[:-1], z[-1]
        F = jnp.asarray(self.fn(u, lam, self.args), dtype=z.dtype)
        return F, jnp.all(jnp.isfinite(F)), None

    def multiplier_matrix(self, z, jacobian):
        if self.multiplier_fn is None:
            return None
        return jnp.asarray(self.multiplier_fn(z[:-1], z[-1], self.args), z.dtype)


def _iterate(fn, u, lam, args, iterates):
    # A fori_loop with static bounds: one trace of `fn` whatever the iterate count,
    # and forward-mode differentiable (it lowers to a scan).
    return jax.lax.fori_loop(0, iterates, lambda _, v: fn(v, lam, args), u)


class _FixedPointResidual(_AbstractResidual):
    fn: Callable
    args: PyTree
    iterates: int = eqx.field(static=True)

    def __call__(self, z):
        u, lam = z[:-1], z[-1]
        F = _iterate(self.fn, u, lam, self.args, self.iterates) - u
        return F, jnp.all(jnp.isfinite(F)), None

    def multiplier_matrix(self, z, jacobian):
        k = z.shape[0] - 1
        return jacobian[:, :k] + jnp.eye(k, dtype=z.dtype)


class _CycleRecord(eqx.Module):
    state: Float[Array, " n"]
    t_events: Float[Array, " E"]
    x_before: Float[Array, "E n"]
    x_after: Float[Array, "E n"]
    T_c: Float[Array, " E"]
    T_a: Float[Array, " E"]
    guard_at_start: Float[Array, " E"]


class _ReturnMapResidual(_AbstractResidual):
    system: HybridSystem
    section: PoincareSection
    parameter: AbstractParameter
    params: Params
    settings: Settings

    def __call__(self, z):
        k = z.shape[0] - 1
        u, lam = z[:k], z[k]
        p = self.parameter.set(self.params, lam)
        u_next, sol = poincare_map(
            self.system, self.section, u, p, settings=self.settings
        )
        record = _CycleRecord(
            state=self.section.chart(u, p),
            t_events=sol.t_events,
            x_before=sol.x_before,
            x_after=sol.x_after,
            T_c=sol.T_c,
            T_a=sol.T_a,
            guard_at_start=sol.guard_at_start,
        )
        return u_next - u, sol.result == RESULTS.successful, record

    def multiplier_matrix(self, z, jacobian):
        # M = F_u + I = dP/du, the reduced Jacobian (Zana et al. 2018 eqs. 32-33).
        k = z.shape[0] - 1
        return jacobian[:, :k] + jnp.eye(k, dtype=z.dtype)


# ---------------------------------------------------------------------------
# The compiled corrector
# ---------------------------------------------------------------------------


class _Options(eqx.Module):
    root_finder: optx.AbstractRootFinder
    max_iterations: int = eqx.field(static=True)


class _Correction(eqx.Module):
    z: Float[Array, " k+1"]
    jacobian: Float[Array, "k k+1"]
    multiplier_matrix: Float[Array, "k k"] | None
    residual_norm: Float[Array, ""]
    n_steps: Int[Array, ""]
    ok: Bool[Array, ""]
    aux: Any


@compiled("the continuation corrector")
def _correct(residual: _AbstractResidual, z_pred, w, options: _Options):
    """Newton on $[F(z); w \\cdot (z - z_p)] = 0$ from $z_p$, then one forward-mode
    pass at the solution for $[F_u\\ F_\\lambda]$ and the auxiliary output. One
    compilation per problem serves every predictor, every hyperplane and every
    parameter value."""

    def augmented(z, _):
        F, _, _ = residual(z)
        return jnp.concatenate([F, jnp.dot(w, z - z_pred)[None]])

    root = optx.root_find(
        augmented,
        options.root_finder,
        z_pred,
        max_steps=options.max_iterations,
        throw=False,
    )
    z = root.value

    def with_aux(z):
        F, valid, aux = residual(z)
        return F, (F, valid, aux)

    # The primal residual comes back as auxiliary output: no third trace of F
    # just to evaluate it.
    jacobian, (F, valid, aux) = jax.jacfwd(with_aux, has_aux=True)(z)
    root_ok = (root.result == optx.RESULTS.successful) & jnp.all(jnp.isfinite(z))
    return _Correction(
        z=z,
        jacobian=jacobian,
        multiplier_matrix=residual.multiplier_matrix(z, jacobian),
        residual_norm=jnp.max(jnp.abs(F)),
        n_steps=root.stats["num_steps"],
        ok=root_ok & valid,
        aux=aux,
    )


@compiled("the continuation residual")
def _residual_only(residual: _AbstractResidual, z):
    """$F(z)$ alone (compiled: the hybrid return map is slow to run eagerly)."""
    F, _, _ = residual(z)
    return F


# ---------------------------------------------------------------------------
# Points on the host
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Point:
    z: np.ndarray
    jacobian: np.ndarray
    M: np.ndarray | None
    residual_norm: float
    n_steps: int
    ok: bool
    aux: Any
    tangent: np.ndarray | None = None  # scaled, unit, oriented
    kind: str = "regular"

    @property
    def lam(self) -> float:
        return float(self.z[-1])

    @property
    def u(self) -> np.ndarray:
        return self.z[:-1]

    def test_functions(self) -> dict[str, float]:
        """The test functions of the special points this point can tell."""
        k = self.z.shape[0] - 1
        values = {"fold": float(np.linalg.det(self.jacobian[:, :k]))}
        if self.M is not None:
            values["period_doubling"] = float(np.linalg.det(self.M + np.eye(k)))
            if k >= 2:
                values["neimark_sacker"] = _neimark_sacker_test(self.M)
        return values


def _second_compound(M: np.ndarray) -> np.ndarray:
    """The bialternate product $M \\odot M$: the matrix of the $2\\times 2$ minors
    $\\det M[\\{p, q\\}, \\{r, s\\}]$, $p < q$, $r < s$ (Kuznetsov 2004, sec. 10.2.2);
    its eigenvalues are the products $\\nu_i\\nu_j$, $i < j$."""
    k = M.shape[0]
    pairs = [(p, q) for p in range(k) for q in range(p + 1, k)]
    C = np.empty((len(pairs), len(pairs)))
    for a, (p, q) in enumerate(pairs):
        for b, (r, s) in enumerate(pairs):
            C[a, b] = M[p, r] * M[q, s] - M[p, s] * M[q, r]
    return C


def _neimark_sacker_test(M: np.ndarray) -> float:
    """$\\det(M \\odot M - I) = \\prod_{i<j}(\\nu_i\\nu_j - 1)$."""
    C = _second_compound(M)
    return float(np.linalg.det(C - np.eye(C.shape[0])))


def _closest_pair(nu: np.ndarray) -> tuple[int, int]:
    """The pair $i < j$ whose product $\\nu_i\\nu_j$ is nearest 1."""
    pairs = [(i, j) for i in range(len(nu)) for j in range(i + 1, len(nu))]
    return min(pairs, key=lambda ij: abs(nu[ij[0]] * nu[ij[1]] - 1.0))


def _is_torus_point(M: np.ndarray) -> bool:
    """Whether the pair with $\\nu_i\\nu_j \\approx 1$ is complex (a Neimark-Sacker
    point) rather than real (a neutral saddle, $\\nu_j = 1/\\nu_i$)."""
    nu = np.linalg.eigvals(M).astype(complex)
    i, j = _closest_pair(nu)
    return bool(min(abs(nu[i].imag), abs(nu[j].imag)) > 1e-8 * max(1.0, abs(nu[i])))


class _Corrector:
    """Calls the compiled corrector and converts its output to a `_Point`."""

    def __init__(self, residual: _AbstractResidual, options: _Options, residual_tol):
        self.residual = residual
        self.options = options
        self.residual_tol = residual_tol
        self.calls = 0

    def __call__(self, z_pred: np.ndarray, w: np.ndarray) -> _Point:
        self.calls += 1
        out = jax.device_get(
            _correct(
                self.residual,
                jnp.asarray(z_pred, dtype=float),
                jnp.asarray(w, dtype=float),
                self.options,
            )
        )
        jacobian = np.asarray(out.jacobian, dtype=float)
        M = None if out.multiplier_matrix is None else np.asarray(out.multiplier_matrix)
        ok = (
            bool(out.ok)
            and float(out.residual_norm) <= self.residual_tol
            and bool(np.all(np.isfinite(jacobian)))
            and (M is None or bool(np.all(np.isfinite(M))))
        )
        return _Point(
            z=np.asarray(out.z, dtype=float),
            jacobian=jacobian,
            M=None if M is None else np.asarray(M, dtype=float),
            residual_norm=float(out.residual_norm),
            n_steps=int(out.n_steps),
            ok=ok,
            aux=out.aux,
        )


# ---------------------------------------------------------------------------
# Tangents, location of special points
# ---------------------------------------------------------------------------


def _scale(k: int, parameter_scale: float) -> np.ndarray:
    """$D$ of the scaled coordinates $\\hat z = D z$, $D = \\mathrm{diag}(1, \\dots,
    1, 1/\\theta)$."""
    scale = np.ones(k + 1)
    scale[k] = 1.0 / parameter_scale
    return scale


def _parameter_direction(k: int) -> np.ndarray:
    e_lam = np.zeros(k + 1)
    e_lam[k] = 1.0
    return e_lam


def _null_vector(jacobian: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The unit null vector of $[F_u\\ F_\\lambda]\\,D^{-1}$ (scaled coordinates)."""
    _, _, vt = np.linalg.svd(jacobian / scale[None, :])
    t = vt[-1]
    return t / np.linalg.norm(t)


def _orient(t: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return -t if float(np.dot(t, reference)) < 0 else t


def _tangent(point: _Point, reference: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return _orient(_null_vector(point.jacobian, scale), reference)


def _locate(
    corrector: _Corrector,
    a: _Point,
    b: _Point,
    scale: np.ndarray,
    kind: str,
    xtol: float,
    max_iterations: int,
) -> tuple[_Point, float, bool]:
    """Illinois regula falsi on the chord $z(s) = z_a + s(z_b - z_a)$, $s \\in
    [0, 1]$, each trial corrected onto the branch on the hyperplane through $z(s)$
    orthogonal to the chord; the test function of `kind` changes sign between `a`
    and `b` (Seydel 2010, sec. 5.1)."""
    chord = b.z - a.z
    w = chord * scale**2  # orthogonal in the scaled coordinates
    s0, g0 = 0.0, a.test_functions()[kind]
    s1, g1 = 1.0, b.test_functions()[kind]
    best, g_best = (a, g0) if abs(g0) < abs(g1) else (b, g1)
    side = 0
    s_prev = None
    chord_length = np.max(np.abs(chord * scale))
    for _ in range(max_iterations):
        s = (s0 * g1 - s1 * g0) / (g1 - g0) if g1 != g0 else 0.5 * (s0 + s1)
        if not (min(s0, s1) < s < max(s0, s1)):
            s = 0.5 * (s0 + s1)
        point = corrector(a.z + s * chord, w)
        if not point.ok:
            # Fall back on bisection when a trial fails to converge.
            s = 0.5 * (s0 + s1)
            point = corrector(a.z + s * chord, w)
            if not point.ok:
                return best, g_best, False
        g = point.test_functions()[kind]
        if abs(g) <= abs(g_best):
            best, g_best = point, g
        if g == 0.0:
            return point, g, True
        # Illinois: halve the value kept at the end that stays put twice running,
        # so that regula falsi does not stall on one side.
        if (g > 0) == (g1 > 0):
            s1, g1 = s, g
            if side == 1:
                g0 *= 0.5
            side = 1
        else:
            s0, g0 = s, g
            if side == -1:
                g1 *= 0.5
            side = -1
        converged_s = abs(s1 - s0) * chord_length <= xtol
        converged_step = s_prev is not None and abs(s - s_prev) * chord_length <= (
            xtol * 1e-2
        )
        if converged_s or converged_step:
            return best, g_best, True
        s_prev = s
    return best, g_best, False


def _special_points_between(
    corrector: _Corrector,
    prev: _Point,
    new: _Point,
    scale: np.ndarray,
    settings: ContinuationSettings,
) -> list[tuple[_Point, str, float, bool]]:
    """The special points whose test functions change sign between `prev` and
    `new`, located, in the order met along the chord."""
    if not settings.locate:
        return []
    g_prev, g_new = prev.test_functions(), new.test_functions()
    chord = new.z - prev.z
    found = []
    for kind in SPECIAL_POINT_KINDS:
        if kind not in g_prev or not g_prev[kind] * g_new[kind] < 0:
            continue
        point, g, located = _locate(
            corrector,
            prev,
            new,
            scale,
            kind,
            settings.locate_tol,
            settings.max_locate_iterations,
        )
        if point is prev or point is new:
            continue
        if kind == "neimark_sacker" and not _is_torus_point(point.M):
            continue  # a neutral saddle: real nu_i nu_j = 1, no bifurcation
        point.tangent = _tangent(point, prev.tangent, scale)
        point.kind = kind
        s = float(np.dot(point.z - prev.z, chord) / np.dot(chord, chord))
        found.append((s, point, kind, g, located))
    found.sort(key=lambda item: item[0])
    return [item[1:] for item in found]


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Trace:
    """A followed branch on the host: its points, the `(index, kind, test value,
    located)` of its special points, and why it stopped."""

    points: list[_Point]
    specials: list[tuple[int, str, float, bool]]
    status: str
    message: str
    n_rejected: int


def _resolve_range(start, stop, bounds, direction, start_name="start"):
    """`(start, low, high, direction)` from the continuation's range arguments."""
    start = float(start)
    if not math.isfinite(start):
        raise ValueError(f"`{start_name}` must be finite; got {start}.")
    if bounds is None:
        if stop is None:
            raise ValueError("Give `stop` or `bounds`.")
        bounds = (min(start, float(stop)), max(start, float(stop)))
    low, high = (float(b) for b in bounds)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"`bounds` must be finite with low < high; got {bounds}.")
    if not low <= start <= high:
        raise ValueError(
            f"`{start_name}` = {start} must lie within `bounds` {tuple(bounds)}."
        )
    if direction is None:
        if stop is None or float(stop) == start:
            raise ValueError("Give `direction` (+1 or -1) when `stop` does not.")
        direction = 1 if float(stop) > start else -1
    if direction not in (1, -1):
        raise ValueError(f"`direction` must be +1 or -1; got {direction}.")
    return start, low, high, direction


def _predict(prev: _Point, h: float, direction: int, settings, scale):
    """`(z_pred, w, predicted length)`: the tangent predictor and the corrector's
    hyperplane $w \\cdot (z - z_p) = 0$ (orthogonal to the tangent, or fixed
    $\\lambda$ for natural continuation)."""
    k = prev.z.shape[0] - 1
    e_lam = _parameter_direction(k)
    if settings.method == "natural":
        t = prev.tangent / scale
        d_lam = direction * h
        if abs(t[k]) > 1e-12 * np.linalg.norm(t):
            z_pred = prev.z + t * (d_lam / t[k])
        else:
            z_pred = prev.z + d_lam * e_lam
        z_pred[k] = prev.lam + d_lam
        return z_pred, e_lam, float(np.linalg.norm((z_pred - prev.z) * scale))
    return prev.z + h * prev.tangent / scale, prev.tangent * scale, h


def _acceptable(new, prev, z_pred, predicted, h, settings, scale) -> bool:
    """Whether a corrected point is taken; sets its tangent."""
    if not new.ok:
        return False
    new.tangent = _tangent(new, prev.tangent, scale)
    correction = np.linalg.norm((new.z - z_pred) * scale)
    turned = float(np.dot(new.tangent, prev.tangent)) < settings.min_tangent_cos
    jumped = correction > settings.max_correction * predicted
    # On the last halving allowed, a turn or a jump is accepted rather than stop.
    return not ((turned or jumped) and h * 0.5 >= settings.min_step)


def _adapt_step(h: float, n_steps: int, settings) -> float:
    if n_steps <= settings.fast_newton:
        return min(h * settings.growth, settings.max_step)
    if n_steps > settings.slow_newton:
        return max(h * settings.shrink, settings.min_step)
    return h


def _finish_on_bound(corrector, prev, new, low, high, scale) -> _Point | None:
    """The last point on the bound that `new` crossed, on the branch's first
    crossing of it: predicted along the tangent at `prev` (the chord to `new` may
    cut across a fold just beyond the bound), then corrected at fixed $\\lambda$."""
    k = prev.z.shape[0] - 1
    bound = high if new.lam > high else low
    if abs(prev.lam - bound) <= 1e-14 * max(1.0, abs(bound)):
        return None  # already there
    t = prev.tangent / scale
    chord = new.z - prev.z
    predictions = [prev.z + (bound - prev.lam) / (new.lam - prev.lam) * chord]
    if abs(t[k]) > 0:
        along = prev.z + (bound - prev.lam) / t[k] * t
        if np.linalg.norm((along - prev.z) * scale) <= np.linalg.norm(chord * scale):
            predictions.insert(0, along)
    for z_pred in predictions:
        z_pred[k] = bound
        end = corrector(z_pred, _parameter_direction(k))
        if end.ok:
            end.tangent = _tangent(end, prev.tangent, scale)
            end.kind = "end"
            return end
    return None


def _follow(
    corrector: _Corrector,
    first: _Point,
    low: float,
    high: float,
    direction: int,
    settings: ContinuationSettings,
    parameter_name: str,
    stop_when: Callable[[_Point], tuple[str, str] | None] | None = None,
) -> _Trace:
    """Pseudo-arclength (or natural) continuation from `first` (whose tangent is
    set) until the branch leaves `[low, high]`, `max_points` are computed, the
    step falls below `min_step`, `stop_when(point)` returns `(status,
    message)`, or Ctrl-C interrupts it (status `"interrupted"`)."""
    scale = _scale(first.z.shape[0] - 1, settings.parameter_scale)
    first.kind = "start"
    points, specials = [first], []
    h = settings.initial_step
    n_rejected = 0
    status, message = "max_points", f"reached max_points = {settings.max_points}"
    try:
        while len(points) < settings.max_points:
            prev = points[-1]
            z_pred, w, predicted = _predict(prev, h, direction, settings, scale)
            new = corrector(z_pred, w)
            if not _acceptable(new, prev, z_pred, predicted, h, settings, scale):
                n_rejected += 1
                h *= 0.5
                if h < settings.min_step:
                    status = "min_step"
                    message = (
                        f"step below min_step = {settings.min_step:g} at "
                        f"{parameter_name} = {prev.lam:.8g}"
                    )
                    if settings.method == "natural":
                        message += " (a fold stops natural continuation)"
                    break
                continue
            for point, kind, g, located in _special_points_between(
                corrector, prev, new, scale, settings
            ):
                if low <= point.lam <= high and len(points) < settings.max_points:
                    # The point first: an interrupt between the two lines leaves
                    # no special point without its point.
                    points.append(point)
                    specials.append((len(points) - 1, kind, g, located))
                    label = kind.replace("_", " ")
                    announce(f"  {label} at {parameter_name} = {point.lam:.8g}")
            if not low <= new.lam <= high:
                end = _finish_on_bound(corrector, prev, new, low, high, scale)
                if end is not None and len(points) < settings.max_points:
                    points.append(end)
                status, message = "reached_bound", f"left [{low:g}, {high:g}]"
                break
            if len(points) >= settings.max_points:
                break
            points.append(new)
            # A line per point (the command line's progress; else the log's).
            announce(
                f"  point {len(points) - 1}: {parameter_name} = {new.lam:.8g} "
                f"({new.n_steps} Newton steps, step {h:.3g})"
            )
            reason = None if stop_when is None else stop_when(new)
            if reason is not None:
                status, message = reason
                break
            h = _adapt_step(h, new.n_steps, settings)
    except KeyboardInterrupt:
        # The points accepted so far are whole (a point is appended once done).
        status = "interrupted"
        message = f"interrupted (Ctrl-C) after {len(points)} point(s)"
    return _Trace(points, specials, status, message, n_rejected)


def _start_at_parameter(corrector, u0, start, direction, settings) -> _Point:
    """The first point: `u0` corrected at fixed $\\lambda$ = `start`, its tangent
    oriented so that $d\\lambda$ has the sign of `direction`."""
    k = u0.shape[0]
    e_lam = _parameter_direction(k)
    first = corrector(np.concatenate([u0, [start]]), e_lam)
    if first.ok:
        first.tangent = _tangent(
            first, direction * e_lam, _scale(k, settings.parameter_scale)
        )
    return first


def _flip_eigenvector(M: np.ndarray) -> np.ndarray:
    """The real unit eigenvector of the multiplier nearest $-1$."""
    nu, vectors = np.linalg.eig(M)
    v = np.real(vectors[:, np.argmin(np.abs(nu + 1.0))])
    return v / np.linalg.norm(v)


def _start_on_doubled_branch(corrector, point: SpecialPoint, amplitude, settings):
    """The first point of the period-$2m$ branch that bifurcates at the period
    doubling `point` of a period-$m$ branch. There $g^{2m}$ has a pitchfork whose
    new branch leaves along $(v, 0)$, $v$ the eigenvector of the multiplier $-1$
    (Kuznetsov 2004, sec. 4.4): predict $z_p = z^* + a\\,(v, 0)$ and correct on the
    hyperplane $(v, 0)\\cdot(z - z_p) = 0$, which the period-$m$ branch crosses far
    from $z_p$ (at $\\Delta\\lambda = O(a)$ against $O(a^2)$)."""
    k = point.u.shape[0]
    v = _flip_eigenvector(point.multiplier_matrix)
    direction = np.concatenate([v, [0.0]])
    z_pred = np.concatenate([point.u + amplitude * v, [point.parameter]])
    first = corrector(z_pred, direction)
    if first.ok:
        first.tangent = _tangent(first, direction, _scale(k, settings.parameter_scale))
    return first


# ---------------------------------------------------------------------------
# Assembly of the results
# ---------------------------------------------------------------------------


def _multipliers(M: np.ndarray) -> np.ndarray:
    """The multipliers of `M` in the library's one ordering (by decreasing modulus,
    a complex pair with its positive imaginary part first)."""
    return np.asarray(sorted_multipliers(jnp.asarray(M)), dtype=complex)


def _durations(t_events: np.ndarray) -> np.ndarray:
    return np.diff(np.concatenate([[0.0], t_events]))


def _special_point(trace: _Trace, index, kind, g, located, **extras) -> SpecialPoint:
    point = trace.points[index]
    return SpecialPoint(
        kind=kind,
        index=index,
        parameter=point.lam,
        u=point.u.copy(),
        multipliers=None if point.M is None else _multipliers(point.M),
        multiplier_matrix=None if point.M is None else point.M.copy(),
        test_value=float(g),
        located=bool(located),
        **extras,
    )


def _solution_branch(
    trace: _Trace, parameter_name: str, method: str, iterates: int | None
) -> SolutionBranch:
    points = trace.points
    has_multipliers = points[0].M is not None
    M = np.stack([p.M for p in points]) if has_multipliers else None
    multipliers = None if M is None else np.stack([_multipliers(m) for m in M])
    return SolutionBranch(
        parameter_name=parameter_name,
        method=method,
        iterates=iterates,
        parameter=np.array([p.lam for p in points]),
        u=np.stack([p.u for p in points]),
        tangent=np.stack([p.tangent for p in points]),
        multiplier_matrix=M,
        multipliers=multipliers,
        stable=None
        if multipliers is None
        else np.all(np.abs(multipliers) < 1.0, axis=1),
        kind=tuple(p.kind for p in points),
        residual_norm=np.array([p.residual_norm for p in points]),
        newton_steps=np.array([p.n_steps for p in points], dtype=int),
        special_points=tuple(
            _special_point(trace, *special) for special in trace.specials
        ),
        status=trace.status,
        message=trace.message,
        n_rejected=trace.n_rejected,
    )


def _empty_solution_branch(parameter_name, method, iterates, k, message):
    return SolutionBranch(
        parameter_name=parameter_name,
        method=method,
        iterates=iterates,
        parameter=np.zeros(0),
        u=np.zeros((0, k)),
        tangent=np.zeros((0, k + 1)),
        multiplier_matrix=None,
        multipliers=None,
        stable=None,
        kind=(),
        residual_norm=np.zeros(0),
        newton_steps=np.zeros(0, dtype=int),
        special_points=(),
        status="start_failed",
        message=message,
        n_rejected=0,
    )


def _orbit_branch(trace: _Trace, parameter_name, method, guard_tol) -> Branch:
    points = trace.points
    records = [p.aux for p in points]
    M = np.stack([p.M for p in points])
    multipliers = np.stack([_multipliers(m) for m in M])
    t_events = np.stack([np.asarray(r.t_events, dtype=float) for r in records])
    durations = np.stack([_durations(t) for t in t_events])
    guard = np.stack([np.asarray(r.guard_at_start, dtype=float) for r in records])

    def stacked(name):
        return np.stack([np.asarray(getattr(r, name), dtype=float) for r in records])

    specials = tuple(
        _special_point(
            trace,
            index,
            kind,
            g,
            located,
            state=stacked("state")[index].copy(),
            phase_durations=durations[index].copy(),
            period=float(t_events[index, -1]),
        )
        for index, kind, g, located in trace.specials
    )
    return Branch(
        parameter_name=parameter_name,
        method=method,
        parameter=np.array([p.lam for p in points]),
        u=np.stack([p.u for p in points]),
        state=stacked("state"),
        tangent=np.stack([p.tangent for p in points]),
        t_events=t_events,
        phase_durations=durations,
        period=t_events[:, -1].copy(),
        x_before=stacked("x_before"),
        x_after=stacked("x_after"),
        T_c=stacked("T_c"),
        T_a=stacked("T_a"),
        guard_at_start=guard,
        admissible=np.all(guard >= -guard_tol, axis=1),
        reduced_jacobian=M,
        multipliers=multipliers,
        stable=np.all(np.abs(multipliers) < 1.0, axis=1),
        kind=tuple(p.kind for p in points),
        residual_norm=np.array([p.residual_norm for p in points]),
        newton_steps=np.array([p.n_steps for p in points], dtype=int),
        special_points=specials,
        status=trace.status,
        message=trace.message,
        n_rejected=trace.n_rejected,
    )


def _empty_orbit_branch(parameter_name, method, status, message) -> Branch:
    def empty(*shape, dtype=float):
        return np.zeros((0, *shape), dtype=dtype)

    return Branch(
        parameter_name=parameter_name,
        method=method,
        parameter=empty(),
        u=empty(0),
        state=empty(0),
        tangent=empty(0),
        t_events=empty(0),
        phase_durations=empty(0),
        period=empty(),
        x_before=empty(0, 0),
        x_after=empty(0, 0),
        T_c=empty(0),
        T_a=empty(0),
        guard_at_start=empty(0),
        admissible=empty(dtype=bool),
        reduced_jacobian=empty(0, 0),
        multipliers=empty(0, dtype=complex),
        stable=empty(dtype=bool),
        kind=(),
        residual_norm=empty(),
        newton_steps=empty(dtype=int),
        special_points=(),
        status=status,
        message=message,
        n_rejected=0,
    )


# ---------------------------------------------------------------------------
# Clients: zeros and fixed points of maps
# ---------------------------------------------------------------------------


def _check_u0(u0) -> np.ndarray:
    u0 = np.atleast_1d(np.asarray(u0, dtype=float))
    if u0.ndim != 1:
        raise ValueError(f"`u0` must be 1-D; got shape {u0.shape}.")
    return u0


def _check_shape(name, fn, shape, *operands):
    try:
        out = jax.eval_shape(fn, *operands)
    except Exception as error:
        raise ValueError(f"`{name}` failed on the start point: {error}") from error
    if getattr(out, "shape", None) != shape:
        raise ValueError(
            f"`{name}` must return an array of shape {shape}; got "
            f"{getattr(out, 'shape', type(out).__name__)}."
        )


def _start_failure(first, missing, noun, name, bounds, check_start) -> str | None:
    """Why a branch cannot start from `first`: no solution there, a start outside
    `bounds`, or the client's own `check_start`; `None` if it can."""
    low, high = bounds
    if not first.ok:
        return (
            f"{missing} (residual {first.residual_norm:.3g}, {first.n_steps} "
            "Newton steps)"
        )
    if not low <= first.lam <= high:
        return (
            f"the start {noun} has {name} = {first.lam:.8g}, outside "
            f"[{low:g}, {high:g}]"
        )
    return None if check_start is None else check_start(first)


def _continue_solutions(
    residual: _AbstractResidual,
    start_point: Callable[[_Corrector, ContinuationSettings], _Point],
    *,
    k: int,
    low: float,
    high: float,
    direction: int | None,
    parameter_name: str,
    iterates: int | None,
    continuation_settings: ContinuationSettings,
    throw: bool,
    check_start: Callable[[_Point], str | None] | None = None,
) -> SolutionBranch:
    """The driver shared by the zero and map clients: the first point from
    `start_point`, then [`_follow`][]."""
    settings = continuation_settings
    options = _Options(settings.corrector, settings.max_iterations)
    corrector = _Corrector(residual, options, settings.residual_tol)
    first = _first_point(start_point, corrector, settings)
    failure = _start_failure(
        first,
        "no solution found at the start",
        "point",
        parameter_name,
        (low, high),
        check_start,
    )
    if failure is not None:
        if throw:
            raise RuntimeError(failure)
        return _empty_solution_branch(
            parameter_name, settings.method, iterates, k, failure
        )
    if direction is None:  # a switched branch: natural steps go where it leaves
        direction = 1 if first.tangent[-1] >= 0 else -1
    trace = _follow(corrector, first, low, high, direction, settings, parameter_name)
    return _interrupted_or(
        _solution_branch(trace, parameter_name, settings.method, iterates)
    )


def _interrupted_or(branch):
    """`branch`, or [`hybrax.Interrupted`][] raised with it where Ctrl-C stopped
    its continuation."""
    if branch.status == "interrupted":
        raise Interrupted(branch, branch.message)
    return branch


def _first_point(start_point, *args):
    """`start_point(*args)`; Ctrl-C there is [`hybrax.Interrupted`][] without a
    branch."""
    try:
        return start_point(*args)
    except KeyboardInterrupt:
        raise Interrupted(None, "interrupted before the first point") from None


def continue_zeros(
    fn: Callable[[Float[Array, " k"], Float[Array, ""], PyTree], Float[Array, " k"]],
    u0: Float[Array, " k"],
    lam0: float,
    args: PyTree = None,
    *,
    multiplier_matrix: Callable[
        [Float[Array, " k"], Float[Array, ""], PyTree], Float[Array, "k k"]
    ]
    | None = None,
    stop: float | None = None,
    bounds: tuple[float, float] | None = None,
    direction: int | None = None,
    parameter_name: str = "lambda",
    continuation_settings: ContinuationSettings | None = None,
    throw: bool = True,
) -> SolutionBranch:
    r"""Follow a branch of zeros of $F(u, \lambda) = 0$ in the scalar $\lambda$.

    Pseudo-arclength continuation (Keller 1977): with $z = (u, \lambda)$, the
    tangent $t_n$ is the unit null vector of $[F_u\ F_\lambda]$ (by `jax.jacfwd`),
    oriented so that $t_n \cdot t_{n-1} > 0$; the predictor $z_p = z_n + h\,t_n$ is
    corrected by an optimistix root finder on

    $$F(z) = 0,\qquad t_n\cdot(z - z_p) = 0,$$

    which passes folds. Step control as in [`hybrax.ContinuationSettings`][].
    Folds ($\det F_u$ changes sign) are located by regula falsi (Illinois) on the
    test function along the chord between the two points that bracket them, and
    inserted as points of the branch. With a `multiplier_matrix` $M(u, \lambda)$
    (the Jacobian of the map whose fixed points the zeros are, so that a
    multiplier crossing $+1$ is a fold), its eigenvalues give the stability, and
    period doublings ($\det(M + I)$) and Neimark-Sacker points
    ($\det(M \odot M - I)$, the bialternate product) are located too.

    **Arguments:**

    - `fn`: `fn(u, lam, args) -> F`, a JAX function with `F` of the shape of `u`.
    - `u0`: a guess of $u$ at $\lambda$ = `lam0`, corrected at fixed $\lambda$.
    - `lam0`: the initial value of $\lambda$.
    - `args`: any PyTree passed to `fn` (traced: changing it does not recompile).
    - `multiplier_matrix`: `multiplier_matrix(u, lam, args) -> M`, or `None`.
    - `stop`: the branch is followed from `lam0` towards `stop`, and ends where it
      leaves `[min(lam0, stop), max(lam0, stop)]` (a last point on the bound).
    - `bounds`: `(low, high)` instead of the range given by `stop`.
    - `direction`: `+1` or `-1`, the initial sign of $d\lambda$; default the sign
      of `stop - lam0` (required without `stop`).
    - `parameter_name`: the label of $\lambda$.
    - `continuation_settings`: a [`hybrax.ContinuationSettings`][] (method, steps,
      location, the corrector); default `ContinuationSettings()`.
    - `throw`: raise if no zero is found at the start; otherwise return an empty
      branch with status `"start_failed"`.

    **Returns:** a [`hybrax.SolutionBranch`][].

    **Raises:** `ValueError` for bad arguments; `RuntimeError` if the start fails
    and `throw=True`.

    !!! note

        One corrector is compiled per `fn` (and `multiplier_matrix`): pass the
        same function object (not a lambda made per call) to reuse it.

    **References:** H. B. Keller (1977), Numerical solution of bifurcation and
    nonlinear eigenvalue problems; R. Seydel (2010), Practical Bifurcation and
    Stability Analysis, ch. 4-5; Yu. A. Kuznetsov (2004), Elements of Applied
    Bifurcation Theory, sec. 10.2.
    """
    check_float64("continue_zeros")
    if not callable(fn):
        raise ValueError("`fn` must be callable as fn(u, lam, args).")
    if multiplier_matrix is not None and not callable(multiplier_matrix):
        raise ValueError("`multiplier_matrix` must be callable or None.")
    settings = _resolve_continuation_settings(continuation_settings)
    lam0, low, high, direction = _resolve_range(lam0, stop, bounds, direction, "lam0")
    u0 = _check_u0(u0)
    k = u0.shape[0]
    u_spec = jax.ShapeDtypeStruct((k,), jnp.result_type(float))
    lam_spec = jax.ShapeDtypeStruct((), jnp.result_type(float))
    _check_shape("fn", lambda u, lam: fn(u, lam, args), (k,), u_spec, lam_spec)
    if multiplier_matrix is not None:
        _check_shape(
            "multiplier_matrix",
            lambda u, lam: multiplier_matrix(u, lam, args),
            (k, k),
            u_spec,
            lam_spec,
        )
    residual = _ZerosResidual(fn, multiplier_matrix, args)
    return _continue_solutions(
        residual,
        lambda corrector, s: _start_at_parameter(corrector, u0, lam0, direction, s),
        k=k,
        low=low,
        high=high,
        direction=direction,
        parameter_name=parameter_name,
        iterates=None,
        continuation_settings=settings,
        throw=throw,
    )


def _check_iterates(iterates) -> int:
    if isinstance(iterates, bool) or int(iterates) != iterates or int(iterates) < 1:
        raise ValueError(f"`iterates` must be a positive integer; got {iterates!r}.")
    return int(iterates)


def continue_fixed_points(
    fn: Callable[[Float[Array, " k"], Float[Array, ""], PyTree], Float[Array, " k"]],
    u0: Float[Array, " k"],
    lam0: float,
    args: PyTree = None,
    *,
    iterates: int = 1,
    stop: float | None = None,
    bounds: tuple[float, float] | None = None,
    direction: int | None = None,
    parameter_name: str = "lambda",
    continuation_settings: ContinuationSettings | None = None,
    throw: bool = True,
) -> SolutionBranch:
    r"""Follow a branch of fixed points of a map $g(u, \lambda)$, or of period-$m$
    orbits: the zeros of

    $$F(u, \lambda) = g^m(u, \lambda) - u,$$

    $g^m$ the $m$-th iterate ($m$ = `iterates`), with the multiplier matrix
    $M = D_u g^m = F_u + I$, the product of the Jacobians of $g$ along the orbit.
    A client of [`hybrax.continue_zeros`][] (pseudo-arclength continuation, Keller
    1977): the branch's stability ($|\nu_i| < 1$) and its folds ($\det(M - I)$),
    period doublings ($\det(M + I)$) and Neimark-Sacker points
    ($\det(M \odot M - I) = \prod_{i<j}(\nu_i\nu_j - 1)$) come with it
    (Kuznetsov 2004, sec. 10.2). [`hybrax.continue_period_doubled`][] switches onto
    the period-$2m$ branch at a period doubling.

    **Arguments:**

    - `fn`: the map, `fn(u, lam, args) -> u_next`, a JAX function.
    - `iterates`: $m$.
    - the others as for [`hybrax.continue_zeros`][].

    **Returns:** a [`hybrax.SolutionBranch`][] (its `iterates` is $m$).

    **Raises:** `ValueError` for bad arguments; `RuntimeError` if the start fails
    and `throw=True`.

    !!! example

        The logistic map $x \mapsto r x (1 - x)$: its fixed point $1 - 1/r$ loses
        stability in a period doubling at $r = 3$.

        ```python
        def logistic(x, r, args):
            return r * x * (1 - x)

        branch = hybrax.continue_fixed_points(logistic, 0.6, 2.5, stop=3.2)
        branch.period_doublings[0].parameter  # 3.0
        ```

    **References:** H. B. Keller (1977); Yu. A. Kuznetsov (2004), Elements of
    Applied Bifurcation Theory, ch. 4 and sec. 10.2; R. Seydel (2010), Practical
    Bifurcation and Stability Analysis, ch. 5 and 7.
    """
    check_float64("continue_fixed_points")
    if not callable(fn):
        raise ValueError("`fn` must be callable as fn(u, lam, args).")
    iterates = _check_iterates(iterates)
    settings = _resolve_continuation_settings(continuation_settings)
    lam0, low, high, direction = _resolve_range(lam0, stop, bounds, direction, "lam0")
    u0 = _check_u0(u0)
    k = u0.shape[0]
    _check_map(fn, args, k)
    return _continue_solutions(
        _FixedPointResidual(fn, args, iterates),
        lambda corrector, s: _start_at_parameter(corrector, u0, lam0, direction, s),
        k=k,
        low=low,
        high=high,
        direction=direction,
        parameter_name=parameter_name,
        iterates=iterates,
        continuation_settings=settings,
        throw=throw,
    )


def _check_map(fn, args, k):
    u_spec = jax.ShapeDtypeStruct((k,), jnp.result_type(float))
    lam_spec = jax.ShapeDtypeStruct((), jnp.result_type(float))
    _check_shape("fn", lambda u, lam: fn(u, lam, args), (k,), u_spec, lam_spec)


def _period_doubling_of(branch, point) -> SpecialPoint:
    if isinstance(point, SpecialPoint):
        if point.kind != "period_doubling":
            raise ValueError(f"`point` must be a period doubling; got a {point.kind}.")
        special = point
    else:
        doublings = branch.period_doublings
        if isinstance(point, bool) or not isinstance(point, int):
            raise ValueError(
                f"`point` must be an int or a hybrax.SpecialPoint; got {point!r}."
            )
        if not -len(doublings) <= point < len(doublings):
            raise ValueError(
                f"`point` = {point}: the branch has {len(doublings)} period doublings."
            )
        special = doublings[point]
    if special.multiplier_matrix is None:
        raise ValueError("`point` has no multiplier matrix to switch branches with.")
    return special


def continue_period_doubled(
    fn: Callable[[Float[Array, " k"], Float[Array, ""], PyTree], Float[Array, " k"]],
    branch: SolutionBranch,
    args: PyTree = None,
    *,
    point: int | SpecialPoint = 0,
    amplitude: float | None = None,
    stop: float | None = None,
    bounds: tuple[float, float] | None = None,
    parameter_name: str | None = None,
    continuation_settings: ContinuationSettings | None = None,
    throw: bool = True,
) -> SolutionBranch:
    r"""Switch onto the period-$2m$ branch that bifurcates at a period doubling of
    a branch of period-$m$ orbits of $g$, and follow it.

    At a period doubling $(u^*, \lambda^*)$ of $g^m$ (a multiplier $-1$ with
    eigenvector $v$), $F_2(u, \lambda) = g^{2m}(u, \lambda) - u$ has a pitchfork:
    besides the period-$m$ branch, a branch of period-$2m$ orbits leaves
    $(u^*, \lambda^*)$ tangent to $(v, 0)$, with $\lambda - \lambda^* = O(a^2)$ at
    amplitude $a$ (Kuznetsov 2004, sec. 4.4). Its first point is $F_2 = 0$ on the
    hyperplane $(v, 0)\cdot(z - z_p) = 0$ through $z_p = (u^* + a v, \lambda^*)$,
    then pseudo-arclength continuation of $F_2$ ([`hybrax.continue_fixed_points`][]
    with `iterates` $= 2m$) follows it, away from the period doubling. One call per
    level of a period-doubling cascade.

    **Arguments:**

    - `fn`: the map of `branch`, `fn(u, lam, args) -> u_next`.
    - `branch`: a [`hybrax.SolutionBranch`][] of [`hybrax.continue_fixed_points`][]
      (or of this function) with a located period doubling.
    - `args`: as for `branch`.
    - `point`: which of `branch.period_doublings` (an index), or the
      [`hybrax.SpecialPoint`][] itself.
    - `amplitude`: $a$, the distance from $u^*$ of the first point along $v$;
      default `continuation_settings.initial_step`.
    - `stop`, `bounds`: the range of $\lambda$ as for
      [`hybrax.continue_zeros`][], with $\lambda^*$ as the start; the side the
      new branch leaves on is found, not given.
    - `parameter_name`: default `branch.parameter_name`.
    - `continuation_settings`, `throw`: as for [`hybrax.continue_zeros`][].

    **Returns:** a [`hybrax.SolutionBranch`][] with `iterates` $= 2m$; its `u` is
    one point of each period-$2m$ orbit.

    **Raises:** `ValueError` for bad arguments; `RuntimeError` if no period-$2m$
    orbit is found near the period doubling (or the corrector falls back onto the
    period-$m$ branch, or the new branch leaves on the side outside the range)
    and `throw=True`.

    !!! example

        The logistic map's cascade: $r = 3$, then $1 + \sqrt 6$, ...

        ```python
        fixed = hybrax.continue_fixed_points(logistic, 0.6, 2.5, stop=3.6)
        period_2 = hybrax.continue_period_doubled(logistic, fixed, stop=3.6)
        period_4 = hybrax.continue_period_doubled(logistic, period_2, stop=3.6)
        period_2.period_doublings[0].parameter  # 1 + sqrt(6) = 3.449490
        ```

    **References:** Yu. A. Kuznetsov (2004), Elements of Applied Bifurcation
    Theory, sec. 4.4 and 10.2; R. Seydel (2010), Practical Bifurcation and
    Stability Analysis, sec. 5.6 (branch switching) and ch. 7.
    """
    check_float64("continue_period_doubled")
    if not isinstance(branch, SolutionBranch) or branch.iterates is None:
        raise ValueError(
            "`branch` must be a hybrax.SolutionBranch of continue_fixed_points."
        )
    if not callable(fn):
        raise ValueError("`fn` must be callable as fn(u, lam, args).")
    special = _period_doubling_of(branch, point)
    settings = _resolve_continuation_settings(continuation_settings)
    if amplitude is None:
        amplitude = settings.initial_step
    amplitude = float(amplitude)
    if not (math.isfinite(amplitude) and amplitude > 0):
        raise ValueError(f"`amplitude` must be positive; got {amplitude}.")
    # The direction in lambda is found by the first point; a placeholder here.
    lam0, low, high, _ = _resolve_range(special.parameter, stop, bounds, 1, "point")
    k = special.u.shape[0]
    _check_map(fn, args, k)
    iterates = 2 * branch.iterates
    period_m = _FixedPointResidual(fn, args, branch.iterates)

    def check_start(first: _Point) -> str | None:
        # Both branches solve F_2 = 0: a first point that g^m leaves in place is
        # back on the period-m branch.
        F_m = _residual_only(period_m, jnp.asarray(first.z))
        if not float(jnp.max(jnp.abs(F_m))) >= 0.05 * amplitude:
            return (
                f"the corrector fell back onto the period-{branch.iterates} branch; "
                "try a smaller `amplitude`"
            )
        return None

    return _continue_solutions(
        _FixedPointResidual(fn, args, iterates),
        lambda corrector, s: _start_on_doubled_branch(corrector, special, amplitude, s),
        k=k,
        low=low,
        high=high,
        direction=None,
        parameter_name=branch.parameter_name
        if parameter_name is None
        else parameter_name,
        iterates=iterates,
        continuation_settings=settings,
        throw=throw,
        check_start=check_start,
    )


# ---------------------------------------------------------------------------
# Client: periodic orbits of a hybrid system
# ---------------------------------------------------------------------------


def continue_branch(
    system: HybridSystem,
    section: PoincareSection,
    u0: Float[Array, " k"],
    params: Params,
    parameter: AbstractParameter | str,
    *,
    start: float,
    stop: float | None = None,
    bounds: tuple[float, float] | None = None,
    direction: int | None = None,
    max_period: float | None = None,
    continuation_settings: ContinuationSettings | None = None,
    settings: Settings | None = None,
    throw: bool = True,
) -> Branch:
    r"""Follow a branch of periodic orbits in one scalar parameter.

    Pseudo-arclength continuation (Keller 1977): with $z = (u, \lambda)$ and
    $F(u, \lambda) = \pi(P(\chi(u); p(\lambda))) - u$ (see
    [`hybrax.poincare_map`][]), the tangent $t_n$ is the unit null vector of
    $[F_u\ F_\lambda]$ (by `jax.jacfwd` through the event chain), oriented so that
    $t_n \cdot t_{n-1} > 0$; the predictor $z_p = z_n + h\,t_n$ is corrected by
    `optimistix.Newton` on

    $$F(z) = 0,\qquad t_n\cdot(z - z_p) = 0,$$

    which passes folds, where $\lambda$ turns back. Lengths and the tangent are
    taken in the scaled coordinates $(u, \lambda/\theta)$, $\theta$ =
    `parameter_scale`. Step control as in [`hybrax.ContinuationSettings`][]: by
    default the step $h$ grows by 1.5 after a corrector that converged in at most
    3 iterations, shrinks by 0.7 after more than 6, and halves after a failure (no
    convergence, a cycle that left the section's event sequence, a correction
    longer than the step, or a tangent that turned by more than about 37
    degrees); below `min_step` the continuation stops. The hybrid-orbit client of
    the generic core of [`hybrax.continue_zeros`][].

    With `method="natural"`, $\lambda$ advances by $h$ (tangent predictor) and
    $F(u, \lambda) = 0$ is solved at fixed $\lambda$; it stops at a fold.

    At every point the reduced Jacobian $M = F_u + I$ gives the nontrivial
    multipliers. Folds ($\det F_u = \prod(\nu_i - 1)$ changes sign), period
    doublings ($\det(F_u + 2I)$ changes sign) and Neimark-Sacker points
    ($\det(M \odot M - I) = \prod_{i<j}(\nu_i\nu_j - 1)$ changes sign at a
    complex pair) between two points are located by regula falsi (Illinois) on the
    test function along the chord, each trial corrected onto the branch, and
    inserted as points of the branch (`Branch.special_points`).

    **Arguments:**

    - `system`, `section`: the hybrid system and its [`hybrax.PoincareSection`][].
    - `u0`: a guess of the reduced unknowns of the orbit at $\lambda$ = `start`,
      corrected at fixed $\lambda$ first.
    - `params`: the parameter PyTree (its value of the continued parameter is
      replaced by `start`).
    - `parameter`: a [`hybrax.AbstractParameter`][] (e.g. a
      [`hybrax.FieldParameter`][] for a field in scaled units) or a field name.
    - `start`: the initial value of $\lambda$.
    - `stop`: the branch is followed from `start` towards `stop`, and ends where
      it leaves `[min(start, stop), max(start, stop)]` (a last point is placed on
      the bound).
    - `bounds`: `(low, high)` instead of the range given by `stop`.
    - `direction`: `+1` or `-1`, the initial sign of $d\lambda$; default the sign
      of `stop - start` (required without `stop`).
    - `max_period`: stop once an orbit's period exceeds this.
    - `continuation_settings`: a [`hybrax.ContinuationSettings`][]: the method,
      its steps, the location of special points and the corrector; default
      `ContinuationSettings()`.
    - `settings`: a [`hybrax.Settings`][] for each cycle (see
      [`hybrax.poincare_map`][]); its `guard_tol` is also how far past a guard a
      phase may start and still count as admissible (`Branch.admissible`).
    - `throw`: raise if no orbit is found at the start; otherwise return an empty
      branch with status `"start_failed"`.

    **Returns:** a [`hybrax.Branch`][].

    **Raises:** `ValueError` for bad arguments; `RuntimeError` if the start fails
    and `throw=True`.

    !!! note

        Special points are detected by sign changes between consecutive points, so
        two folds closer together than one step cancel out; `max_step` bounds the
        step. Where the cycle's event sequence changes along the branch (grazing,
        a non-smooth point of a hybrid system) no step beyond it converges to an
        admissible cycle and the continuation stops with status `"min_step"`. One
        corrector is compiled per system, section, parameter and integration
        setting, and serves every step, method and parameter value.

    !!! example

        The hopper in $D_G = d_G / (2\sqrt{k m})$ through its first two folds:

        ```python
        def damping_scale(p):
            return 2 * jnp.sqrt(p.k * p.m)

        D_G = hybrax.FieldParameter("d_G", damping_scale, name="D_G")
        system, section = models.minimal_hopper(), models.hopper_section()
        params = hybrax.canonical_params(models.hopper_params(D_G=-0.005))
        branch = hybrax.continue_branch(
            system, section, models.orbit_guess(params, 0.3), params, D_G,
            start=-0.005, stop=-0.04,
            continuation_settings=hybrax.ContinuationSettings(
                parameter_scale=0.01, max_step=0.1
            ),
        )
        [fold.parameter for fold in branch.folds]  # [-0.035439, -0.023735]
        ```

    **References:** H. B. Keller (1977), Numerical solution of bifurcation and
    nonlinear eigenvalue problems; R. Seydel (2010), Practical Bifurcation and
    Stability Analysis, ch. 4-5; Yu. A. Kuznetsov (2004), Elements of Applied
    Bifurcation Theory, sec. 10.2.
    """
    check_float64("continue_branch")
    parameter = _as_parameter(parameter, params)
    continuation = _resolve_continuation_settings(continuation_settings)
    start, low, high, direction = _resolve_range(start, stop, bounds, direction)
    u0 = _check_u0(u0)
    return _continue_orbits(
        system,
        section,
        params,
        parameter,
        lambda corrector: _start_at_parameter(
            corrector, u0, start, direction, continuation
        ),
        f"at {parameter.name} = {start:g} from `u0`",
        low=low,
        high=high,
        direction=direction,
        max_period=max_period,
        settings=settings,
        continuation=continuation,
        throw=throw,
    )


def _continue_orbits(
    system,
    section,
    params,
    parameter: AbstractParameter,
    start_point: Callable[[_Corrector], _Point],
    where: str,
    *,
    low,
    high,
    direction,
    max_period,
    settings,
    continuation: ContinuationSettings,
    throw,
    check_start: Callable[[_Point], str | None] | None = None,
) -> Branch:
    """The driver of the hybrid-orbit clients: the first point from
    `start_point`, then [`_follow`][] with the `max_period` stop."""
    settings = _forward_mode_settings(settings)
    resolve_sequence(system, section)
    residual = _ReturnMapResidual(
        system, section, parameter, canonical_params(params), settings
    )
    options = _Options(continuation.corrector, continuation.max_iterations)
    corrector = _Corrector(residual, options, continuation.residual_tol)
    first = _first_point(start_point, corrector)
    failure = _start_failure(
        first,
        f"no periodic orbit found {where}",
        "orbit",
        parameter.name,
        (low, high),
        check_start,
    )
    if failure is not None:
        if throw:
            raise RuntimeError(failure)
        return _empty_orbit_branch(
            parameter.name, continuation.method, "start_failed", failure
        )
    if direction is None:  # a switched branch: natural steps go where it leaves
        direction = 1 if first.tangent[-1] >= 0 else -1

    def beyond_max_period(point: _Point) -> tuple[str, str] | None:
        period = float(point.aux.t_events[-1])
        if max_period is not None and period > max_period:
            message = f"period {period:.6g} above max_period = {max_period:g}"
            return "max_period", message
        return None

    trace = _follow(
        corrector,
        first,
        low,
        high,
        direction,
        continuation,
        parameter.name,
        beyond_max_period,
    )
    return _interrupted_or(
        _orbit_branch(trace, parameter.name, continuation.method, settings.guard_tol)
    )


def period_doubled_section(section: PoincareSection) -> PoincareSection:
    r"""The section of the twice-iterated return map $P^2$: the same chart and
    coordinates, the transition sequence repeated twice. Its fixed points are the
    period-2 orbits of $P$ (two cycles of `section` each).

    **Arguments:**

    - `section`: a [`hybrax.PoincareSection`][].

    **Returns:** a [`hybrax.PoincareSection`][] with `sequence` = `2 * sequence`.
    """
    if not isinstance(section, PoincareSection):
        raise ValueError(
            f"`section` must be a hybrax.PoincareSection; got {type(section).__name__}."
        )
    return PoincareSection(
        tuple(section.sequence) * 2, section.chart, section.coordinates
    )


def continue_branch_period_doubled(
    system: HybridSystem,
    section: PoincareSection,
    point: SpecialPoint,
    params: Params,
    parameter: AbstractParameter | str,
    *,
    stop: float | None = None,
    bounds: tuple[float, float] | None = None,
    amplitude: float | None = None,
    max_period: float | None = None,
    settings: Settings | None = None,
    continuation_settings: ContinuationSettings | None = None,
    throw: bool = True,
) -> Branch:
    r"""Switch onto the branch of period-2 orbits (two cycles of `section`) that
    bifurcates at a period doubling of a [`hybrax.continue_branch`][] branch, and
    follow it.

    With $P$ the return map of `section`, the period-2 orbits are the zeros of
    $F_2(u, \lambda) = \pi(P^2(\chi(u); p(\lambda))) - u$, the return map of
    [`hybrax.period_doubled_section`][]. At the period doubling $(u^*,
    \lambda^*)$, where $M = \partial P/\partial u$ has the multiplier $-1$ with
    eigenvector $v$, the new branch leaves tangent to $(v, 0)$ (Kuznetsov 2004,
    sec. 4.4): its first point solves $F_2 = 0$ on the hyperplane
    $(v, 0)\cdot(z - z_p) = 0$ through $z_p = (u^* + a v, \lambda^*)$, then
    pseudo-arclength continuation (Keller 1977) follows it, as
    [`hybrax.continue_period_doubled`][] does for maps.

    **Arguments:**

    - `system`, `section`: the hybrid system and the section of the branch that
      holds `point` (for the next level of a cascade, the doubled section).
    - `point`: a period doubling ([`hybrax.SpecialPoint`][] of kind
      `"period_doubling"`) of that branch.
    - `params`, `parameter`, `max_period`, `settings`, `throw`: as for
      [`hybrax.continue_branch`][].
    - `stop`, `bounds`: the range of $\lambda$, with `point.parameter` as start;
      the side the new branch leaves on is found, not given.
    - `amplitude`: $a$; default `continuation_settings.initial_step`, then a third,
      a tenth and a thirtieth of it where the corrector falls back onto the
      period-1 branch or the first period-2 orbit already lies past the bound.
    - `continuation_settings`: a [`hybrax.ContinuationSettings`][].

    **Returns:** a [`hybrax.Branch`][] of period-2 orbits (`E` = twice the events
    of `section`).

    **Raises:** `ValueError` for bad arguments; `RuntimeError` if no period-2 orbit
    is found near the period doubling and `throw=True`.

    **References:** Yu. A. Kuznetsov (2004), Elements of Applied Bifurcation
    Theory, sec. 4.4; R. Seydel (2010), Practical Bifurcation and Stability
    Analysis, sec. 5.6.
    """
    check_float64("continue_branch_period_doubled")
    parameter = _as_parameter(parameter, params)
    if not isinstance(point, SpecialPoint) or point.kind != "period_doubling":
        raise ValueError("`point` must be a hybrax.SpecialPoint of a period doubling.")
    continuation = _resolve_continuation_settings(continuation_settings)
    if amplitude is None:
        # The period-2 branch leaves the bifurcation like a parabola in the
        # parameter; when the first amplitude lands the corrector back on the
        # period-1 branch, smaller ones are tried before giving up.
        amplitudes = [continuation.initial_step * f for f in (1, 1 / 3, 1 / 10, 1 / 30)]
    else:
        amplitudes = [float(amplitude)]
        if not (math.isfinite(amplitudes[0]) and amplitudes[0] > 0):
            raise ValueError(f"`amplitude` must be positive; got {amplitude}.")
    _, low, high, _ = _resolve_range(point.parameter, stop, bounds, 1, "point")
    resolve_sequence(system, section)
    params = canonical_params(params)
    once = _ReturnMapResidual(
        system, section, parameter, params, _forward_mode_settings(settings)
    )

    branch = None
    for k, size in enumerate(amplitudes):

        def check_start(first: _Point, size=size) -> str | None:
            # Both branches solve F_2 = 0: an orbit that one cycle leaves in place
            # is back on the period-1 branch.
            F = _residual_only(once, jnp.asarray(first.z))
            if not float(jnp.max(jnp.abs(F))) >= 0.05 * size:
                return "the corrector fell back onto the period-1 branch"
            return None

        last = k == len(amplitudes) - 1
        branch = _continue_orbits(
            system,
            period_doubled_section(section),
            params,
            parameter,
            lambda corrector, size=size: _start_on_doubled_branch(
                corrector, point, size, continuation
            ),
            f"near the period doubling at {parameter.name} = {point.parameter:g} "
            f"(amplitude {size:g})",
            low=low,
            high=high,
            direction=None,
            max_period=max_period,
            settings=settings,
            continuation=continuation,
            throw=throw and last,
            check_start=check_start,
        )
        # A start that already lies past the bound (one point, then out) also
        # asks for a smaller amplitude: the parabola was entered too far out.
        overshot = branch.status == "reached_bound" and branch.n_points < 2
        if branch.status != "start_failed" and not (overshot and not last):
            break
    return branch


def _forward_mode_settings(settings: Settings | None) -> Settings:
    """`settings` with `diffrax.ForwardMode()` as adjoint: the corrector
    differentiates the return map with `jax.jacfwd`."""
    settings = resolve_settings(settings)
    if settings.adjoint is not None and not isinstance(
        settings.adjoint, dfx.ForwardMode
    ):
        raise ValueError(
            "`settings.adjoint`: continuation differentiates the return map in "
            "forward mode (`diffrax.ForwardMode()` or None); got "
            f"{type(settings.adjoint).__name__}."
        )
    return eqx.tree_at(
        lambda s: s.adjoint, settings, dfx.ForwardMode(), is_leaf=lambda x: x is None
    )
