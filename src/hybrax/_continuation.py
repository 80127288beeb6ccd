r"""Numerical continuation of periodic orbits in one scalar parameter.

A periodic orbit is a zero of $F(u, \lambda) = \pi(P(\chi(u); p(\lambda))) - u$, the
return map of [`hybrax.poincare_map`][] minus the identity, with $u \in \mathbb{R}^k$
the reduced unknowns of a [`hybrax.PoincareSection`][] and $\lambda$ one scalar of
the parameter PyTree. Its solutions form curves (branches) in $(u, \lambda)$; they
can turn back in $\lambda$ (folds), so they are followed by Keller's (1977)
pseudo-arclength continuation: with $z = (u, \lambda)$, the unit tangent $t$
spanning the null space of $[F_u\ F_\lambda]$ and a step $h$, the predictor
$z_p = z_n + h\,t_n$ is corrected by solving

$$F(z) = 0, \qquad t_n \cdot (z - z_p) = 0$$

with Newton's method (optimistix). Natural-parameter continuation (fix $\lambda$,
solve $F(u, \lambda) = 0$) is the other `method`; it cannot pass a fold.

Stability comes with the Jacobian: $M = F_u + I = \partial P/\partial u$ is the
reduced Jacobian of the return map (Zana et al. 2018 eqs. 32-33), its eigenvalues the
nontrivial Floquet multipliers $\nu_i$. Along a branch, a fold is where a real
multiplier passes $+1$ ($\det F_u = \prod(\nu_i - 1)$ changes sign, and so does the
$\lambda$-component of the oriented tangent); a period doubling is where a real
multiplier passes $-1$ ($\det(F_u + 2I) = \prod(\nu_i + 1)$ changes sign). Both are
located by the Illinois variant of regula falsi on the test function between the
two points that bracket it (Seydel 2010, ch. 5; Kuznetsov 2004, ch. 10).
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
from jaxtyping import Array, Bool, Complex, Float, Int

from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import canonical_params, check_float64
from ._periodic import PoincareSection, poincare_map, resolve_sequence
from ._settings import (
    Settings,
    check_iterations,
    resolve_root_finder,
    resolve_settings,
)
from ._solution import RESULTS


# ---------------------------------------------------------------------------
# The continuation parameter
# ---------------------------------------------------------------------------


class AbstractParameter(eqx.Module):
    r"""Selects the scalar $\lambda$ of a parameter PyTree that continuation varies.

    Subclasses implement `get(params) -> scalar` and `set(params, value) -> params`
    (pure, traceable: `set` runs inside the compiled corrector with a traced
    `value`) and carry a `name` for tables and plots.
    """

    name: eqx.AbstractVar[str]

    @abc.abstractmethod
    def get(self, params: Params) -> Any:
        """The value of the parameter in `params`."""

    @abc.abstractmethod
    def set(self, params: Params, value: Any) -> Params:
        """A copy of `params` with the parameter set to `value`."""


def _field_of(params, field):
    if isinstance(params, dict):
        return params[field]
    return getattr(params, field)


class FieldParameter(AbstractParameter):
    r"""The field `field` of the parameters (an attribute, or a key of a dict),
    optionally in scaled units: $\lambda = $ `params.field / scale(params)`.

    **Arguments:**

    - `field`: the name of the field.
    - `scale`: `scale(params) -> scalar`, or `None` for $\lambda$ = the field
      itself. It must not depend on `field`. Use a module-level function (not a
      lambda made per call): it is part of what the compiled corrector is keyed on.
    - `name`: the label of $\lambda$; default `field`.

    !!! example

        The hopper's dimensionless ground damping $D_G = d_G / (2\sqrt{k m})$ while
        the parameters store $d_G$:

        ```python
        def damping_scale(p):
            return 2 * jnp.sqrt(p.k * p.m)

        D_G = hybrax.FieldParameter("d_G", damping_scale, name="D_G")
        ```
    """

    field: str = eqx.field(static=True)
    scale: Callable[[Params], Any] | None = None
    name: str = eqx.field(static=True, default="")

    def __check_init__(self):
        if not isinstance(self.field, str) or not self.field:
            raise ValueError(f"`field` must be a non-empty string; got {self.field!r}.")
        if self.scale is not None and not callable(self.scale):
            raise ValueError("`scale` must be callable as scale(params), or None.")

    def get(self, params: Params) -> Any:
        value = _field_of(params, self.field)
        return value if self.scale is None else value / self.scale(params)

    def set(self, params: Params, value: Any) -> Params:
        if self.scale is not None:
            value = value * self.scale(params)
        return eqx.tree_at(lambda p: _field_of(p, self.field), params, value)


class FunctionParameter(AbstractParameter):
    r"""A parameter given by a getter and a setter.

    **Arguments:**

    - `getter`: `getter(params) -> scalar`.
    - `setter`: `setter(params, value) -> params`, pure and traceable.
    - `name`: the label of $\lambda$.

    Use module-level functions: they key the compiled corrector.
    """

    getter: Callable[[Params], Any]
    setter: Callable[[Params, Any], Params]
    name: str = eqx.field(static=True, default="parameter")

    def __check_init__(self):
        if not (callable(self.getter) and callable(self.setter)):
            raise ValueError("`getter` and `setter` must be callable.")

    def get(self, params: Params) -> Any:
        return self.getter(params)

    def set(self, params: Params, value: Any) -> Params:
        return self.setter(params, value)


def _as_parameter(parameter) -> AbstractParameter:
    if isinstance(parameter, AbstractParameter):
        if isinstance(parameter, FieldParameter) and not parameter.name:
            return FieldParameter(parameter.field, parameter.scale, parameter.field)
        return parameter
    if isinstance(parameter, str):
        return FieldParameter(parameter, None, parameter)
    raise ValueError(
        "`parameter` must be a field name or a hybrax.AbstractParameter "
        f"(FieldParameter, FunctionParameter); got {type(parameter).__name__}."
    )


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Fold:
    r"""A fold (limit point, saddle-node) of a branch: a real multiplier is $+1$,
    $\det F_u = 0$, and the branch turns back in $\lambda$.

    - `index`: the position of this point in the [`hybrax.Branch`][] arrays.
    - `parameter`: $\lambda$ at the fold.
    - `u`, `state`: the reduced unknowns and the section state.
    - `phase_durations`, `period`: the durations of the phases of one cycle (for
      the hopper: flight, ground) and their sum.
    - `multipliers`: the nontrivial multipliers there (one of them $\approx 1$).
    - `test_value`: the located test function $\det F_u$ (ideally 0).
    - `located`: whether the root search on the test function converged.
    """

    index: int
    parameter: float
    u: Float[np.ndarray, " k"]
    state: Float[np.ndarray, " n"]
    phase_durations: Float[np.ndarray, " E"]
    period: float
    multipliers: Complex[np.ndarray, " k"]
    test_value: float
    located: bool


@dataclasses.dataclass(frozen=True, eq=False)
class PeriodDoubling:
    r"""A period-doubling (flip) point of a branch: a real multiplier is $-1$,
    $\det(F_u + 2I) = 0$; a branch of orbits of twice the period bifurcates.

    Fields as in [`hybrax.Fold`][] (`test_value` is $\det(F_u + 2I)$).
    """

    index: int
    parameter: float
    u: Float[np.ndarray, " k"]
    state: Float[np.ndarray, " n"]
    phase_durations: Float[np.ndarray, " E"]
    period: float
    multipliers: Complex[np.ndarray, " k"]
    test_value: float
    located: bool


@dataclasses.dataclass(frozen=True, eq=False)
class Branch:
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
    - `kind`: `"start"`, `"regular"`, `"fold"`, `"period_doubling"` or `"end"` (a
      point placed on a bound of the parameter range).
    - `residual_norm`: $\max|F|$; `newton_steps`: corrector iterations.

    Besides: `folds`, `period_doublings` (located special points, also present in
    the arrays at their `index`), `parameter_name`, `method`, `status` (why the
    continuation stopped: `"reached_bound"`, `"max_points"`, `"max_period"`,
    `"min_step"`, `"start_failed"`), `message` and `n_rejected` (rejected steps).
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
    folds: tuple[Fold, ...]
    period_doublings: tuple[PeriodDoubling, ...]
    status: str
    message: str
    n_rejected: int

    @property
    def n_points(self) -> int:
        """The number of points $N$."""
        return int(self.parameter.shape[0])


# ---------------------------------------------------------------------------
# The compiled corrector
# ---------------------------------------------------------------------------


class _Options(eqx.Module):
    settings: Settings
    root_finder: optx.AbstractRootFinder
    max_iterations: int = eqx.field(static=True)


class _Correction(eqx.Module):
    z: Float[Array, " k+1"]
    jacobian: Float[Array, "k k+1"]
    residual_norm: Float[Array, ""]
    n_steps: Int[Array, ""]
    root_ok: Bool[Array, ""]
    state: Float[Array, " n"]
    t_events: Float[Array, " E"]
    x_before: Float[Array, "E n"]
    x_after: Float[Array, "E n"]
    T_c: Float[Array, " E"]
    T_a: Float[Array, " E"]
    guard_at_start: Float[Array, " E"]
    result: RESULTS


def _return_map(system, section, parameter, params, z, options):
    k = z.shape[0] - 1
    u, lam = z[:k], z[k]
    p = parameter.set(params, lam)
    return poincare_map(system, section, u, p, settings=options.settings)


@eqx.filter_jit
def _correct(system, section, parameter, params, z_pred, w, options):
    """Newton on $[F(z); w \\cdot (z - z_p)] = 0$ from $z_p$, then one forward-mode
    pass at the solution for $[F_u\\ F_\\lambda]$ and the cycle's events. One
    compilation serves every predictor, every hyperplane and every parameter
    value."""
    k = z_pred.shape[0] - 1

    def augmented(z, _):
        u_next, _ = _return_map(system, section, parameter, params, z, options)
        return jnp.concatenate([u_next - z[:k], jnp.dot(w, z - z_pred)[None]])

    root = optx.root_find(
        augmented,
        options.root_finder,
        z_pred,
        max_steps=options.max_iterations,
        throw=False,
    )
    z = root.value

    def residual(z):
        u_next, sol = _return_map(system, section, parameter, params, z, options)
        F = u_next - z[:k]
        return F, (F, sol)

    # The primal residual comes back as auxiliary output: no third trace of the
    # cycle just to evaluate it.
    jacobian, (F, sol) = jax.jacfwd(residual, has_aux=True)(z)
    root_ok = (root.result == optx.RESULTS.successful) & jnp.all(jnp.isfinite(z))
    return _Correction(
        z=z,
        jacobian=jacobian,
        residual_norm=jnp.max(jnp.abs(F)),
        n_steps=root.stats["num_steps"],
        root_ok=root_ok,
        state=section.chart(z[:k], parameter.set(params, z[k])),
        t_events=sol.t_events,
        x_before=sol.x_before,
        x_after=sol.x_after,
        T_c=sol.T_c,
        T_a=sol.T_a,
        guard_at_start=sol.guard_at_start,
        result=sol.result,
    )


# ---------------------------------------------------------------------------
# Points on the host
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class _Point:
    z: np.ndarray
    jacobian: np.ndarray
    residual_norm: float
    n_steps: int
    ok: bool
    state: np.ndarray
    t_events: np.ndarray
    x_before: np.ndarray
    x_after: np.ndarray
    T_c: np.ndarray
    T_a: np.ndarray
    guard_at_start: np.ndarray
    tangent: np.ndarray | None = None  # scaled, unit, oriented
    kind: str = "regular"

    @property
    def lam(self) -> float:
        return float(self.z[-1])

    @property
    def M(self) -> np.ndarray:
        k = self.z.shape[0] - 1
        return self.jacobian[:, :k] + np.eye(k)

    def test_functions(self) -> tuple[float, float]:
        """$(\\det F_u, \\det(F_u + 2I))$: fold and period-doubling tests."""
        k = self.z.shape[0] - 1
        F_u = self.jacobian[:, :k]
        return (
            float(np.linalg.det(F_u)),
            float(np.linalg.det(F_u + 2.0 * np.eye(k))),
        )


class _Corrector:
    """Calls the compiled corrector and converts its output to a `_Point`."""

    def __init__(self, system, section, parameter, params, options, residual_tol):
        self.system = system
        self.section = section
        self.parameter = parameter
        self.params = params
        self.options = options
        self.residual_tol = residual_tol
        self.calls = 0

    def __call__(self, z_pred: np.ndarray, w: np.ndarray) -> _Point:
        self.calls += 1
        out = _correct(
            self.system,
            self.section,
            self.parameter,
            self.params,
            jnp.asarray(z_pred, dtype=float),
            jnp.asarray(w, dtype=float),
            self.options,
        )
        host = jax.device_get(
            (
                out.z,
                out.jacobian,
                out.residual_norm,
                out.n_steps,
                out.root_ok,
                out.state,
                out.t_events,
                out.x_before,
                out.x_after,
                out.T_c,
                out.T_a,
                out.guard_at_start,
                out.result == RESULTS.successful,
            )
        )
        (z, J, res, n, root_ok, state, t_ev, xb, xa, T_c, T_a, guard, cycle_ok) = host
        ok = (
            bool(root_ok)
            and bool(cycle_ok)
            and float(res) <= self.residual_tol
            and bool(np.all(np.isfinite(J)))
        )
        return _Point(
            z=np.asarray(z, dtype=float),
            jacobian=np.asarray(J, dtype=float),
            residual_norm=float(res),
            n_steps=int(n),
            ok=ok,
            state=np.asarray(state, dtype=float),
            t_events=np.asarray(t_ev, dtype=float),
            x_before=np.asarray(xb, dtype=float),
            x_after=np.asarray(xa, dtype=float),
            T_c=np.asarray(T_c, dtype=float),
            T_a=np.asarray(T_a, dtype=float),
            guard_at_start=np.asarray(guard, dtype=float),
        )


def _null_vector(jacobian: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The unit null vector of $[F_u\\ F_\\lambda]\\,D^{-1}$ (scaled coordinates
    $\\hat z = D z$, $D = \\mathrm{diag}(1, \\dots, 1, 1/\\theta)$)."""
    _, _, vt = np.linalg.svd(jacobian / scale[None, :])
    t = vt[-1]
    return t / np.linalg.norm(t)


def _orient(t: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return -t if float(np.dot(t, reference)) < 0 else t


def _locate(
    corrector: _Corrector,
    a: _Point,
    b: _Point,
    scale: np.ndarray,
    which: int,
    xtol: float,
    max_iterations: int,
) -> tuple[_Point, float, bool]:
    """Illinois regula falsi on the chord $z(s) = z_a + s(z_b - z_a)$, $s \\in
    [0, 1]$, each trial corrected onto the branch on the hyperplane through $z(s)$
    orthogonal to the chord; the test function `which` (0 fold, 1 period
    doubling) changes sign between `a` and `b`."""
    chord = b.z - a.z
    w = chord * scale**2  # orthogonal in the scaled coordinates
    s0, g0 = 0.0, a.test_functions()[which]
    s1, g1 = 1.0, b.test_functions()[which]
    best, g_best = (a, g0) if abs(g0) < abs(g1) else (b, g1)
    side = 0
    s_prev = None
    for _ in range(max_iterations):
        if g1 != g0:
            s = (s0 * g1 - s1 * g0) / (g1 - g0)
        else:
            s = 0.5 * (s0 + s1)
        if not (min(s0, s1) < s < max(s0, s1)):
            s = 0.5 * (s0 + s1)
        point = corrector(a.z + s * chord, w)
        if not point.ok:
            # Fall back on bisection when a trial fails to converge.
            s = 0.5 * (s0 + s1)
            point = corrector(a.z + s * chord, w)
            if not point.ok:
                return best, g_best, False
        g = point.test_functions()[which]
        if abs(g) <= abs(g_best):
            best, g_best = point, g
        if g == 0.0:
            return point, g, True
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
        converged_s = abs(s1 - s0) * np.max(np.abs(chord * scale)) <= xtol
        converged_step = (
            s_prev is not None
            and abs(s - s_prev) * np.max(np.abs(chord * scale)) <= xtol * 1e-2
        )
        if converged_s or converged_step:
            return best, g_best, True
        s_prev = s
    return best, g_best, False


def _empty_branch(parameter_name, method, status, message, n_rejected=0) -> Branch:
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
        folds=(),
        period_doublings=(),
        status=status,
        message=message,
        n_rejected=n_rejected,
    )


def _multipliers(M: np.ndarray) -> np.ndarray:
    eig = np.linalg.eigvals(M).astype(complex)
    return eig[np.argsort(-np.abs(eig), kind="stable")]


def _durations(t_events: np.ndarray) -> np.ndarray:
    return np.diff(np.concatenate([[0.0], t_events]))


def _assemble(
    points: list[_Point],
    specials: list[tuple[int, str, float, bool]],
    parameter_name: str,
    method: str,
    status: str,
    message: str,
    n_rejected: int,
    guard_tol: float,
) -> Branch:
    k = points[0].z.shape[0] - 1
    M = np.stack([p.M for p in points])
    multipliers = np.stack([_multipliers(m) for m in M])
    t_events = np.stack([p.t_events for p in points])
    durations = np.stack([_durations(p.t_events) for p in points])
    guard = np.stack([p.guard_at_start for p in points])
    folds, doublings = [], []
    for index, which, g, located in specials:
        p = points[index]
        record = dict(
            index=index,
            parameter=p.lam,
            u=p.z[:k].copy(),
            state=p.state.copy(),
            phase_durations=durations[index].copy(),
            period=float(t_events[index, -1]),
            multipliers=multipliers[index].copy(),
            test_value=float(g),
            located=bool(located),
        )
        if which == "fold":
            folds.append(Fold(**record))
        else:
            doublings.append(PeriodDoubling(**record))
    return Branch(
        parameter_name=parameter_name,
        method=method,
        parameter=np.array([p.lam for p in points]),
        u=np.stack([p.z[:k] for p in points]),
        state=np.stack([p.state for p in points]),
        tangent=np.stack([p.tangent for p in points]),
        t_events=t_events,
        phase_durations=durations,
        period=t_events[:, -1].copy(),
        x_before=np.stack([p.x_before for p in points]),
        x_after=np.stack([p.x_after for p in points]),
        T_c=np.stack([p.T_c for p in points]),
        T_a=np.stack([p.T_a for p in points]),
        guard_at_start=guard,
        admissible=np.all(guard >= -guard_tol, axis=1),
        reduced_jacobian=M,
        multipliers=multipliers,
        stable=np.all(np.abs(multipliers) < 1.0, axis=1),
        kind=tuple(p.kind for p in points),
        residual_norm=np.array([p.residual_norm for p in points]),
        newton_steps=np.array([p.n_steps for p in points], dtype=int),
        folds=tuple(folds),
        period_doublings=tuple(doublings),
        status=status,
        message=message,
        n_rejected=n_rejected,
    )


# ---------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------

# A step is grown when the corrector needs at most this many Newton iterations,
# and shrunk when it needs more than `_SLOW_NEWTON`.
_FAST_NEWTON = 3
_SLOW_NEWTON = 6
_GROWTH = 1.5
_SHRINK = 0.7
# Successive tangents (scaled, unit) must not turn by more than ~37 degrees, and a
# correction must not move farther than the step itself, or the step is retried
# shorter: both guard against jumping to a neighbouring branch.
_MIN_TANGENT_COS = 0.8
_MAX_CORRECTION = 1.0


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
    method: Literal["pseudo-arclength", "natural"] = "pseudo-arclength",
    step: float = 0.02,
    min_step: float = 1e-6,
    max_step: float = 0.2,
    max_points: int = 500,
    max_period: float | None = None,
    parameter_scale: float = 1.0,
    locate: bool = True,
    locate_tol: float = 1e-11,
    max_locate_iterations: int = 60,
    settings: Settings | None = None,
    root_finder: optx.AbstractRootFinder | None = None,
    max_iterations: int = 12,
    residual_tol: float = 1e-8,
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
    `parameter_scale`. The step $h$ grows by 1.5 after a corrector that converged
    in at most 3 iterations, shrinks by 0.7 after more than 6, and halves after a
    failure (no convergence, a cycle that left the section's event sequence, a
    correction longer than the step, or a tangent that turned by more than about
    37 degrees); below `min_step` the continuation stops.

    With `method="natural"`, $\lambda$ advances by $h$ (tangent predictor) and
    $F(u, \lambda) = 0$ is solved at fixed $\lambda$; it stops at a fold.

    At every point the reduced Jacobian $M = F_u + I$ gives the nontrivial
    multipliers. Folds ($\det F_u = \prod(\nu_i - 1)$ changes sign) and period
    doublings ($\det(F_u + 2I)$ changes sign) between two points are located by
    regula falsi (Illinois) on the test function along the chord, each trial
    corrected onto the branch, and inserted as points of the branch.

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
    - `method`: `"pseudo-arclength"` or `"natural"`.
    - `step`, `min_step`, `max_step`: initial, smallest and largest step (scaled
      arclength, or $|\Delta\lambda|$ for `"natural"`).
    - `max_points`: the most points computed (located special points included).
    - `max_period`: stop once an orbit's period exceeds this.
    - `parameter_scale`: $\theta$ above; about the size of the expected change
      of $\lambda$ per unit change of $u$ balances the steps.
    - `locate`, `locate_tol`, `max_locate_iterations`: locate folds and period
      doublings, to this tolerance on the chord in scaled coordinates.
    - `settings`: a [`hybrax.Settings`][] for each cycle (see
      [`hybrax.poincare_map`][]); its `guard_tol` is also how far past a guard a
      phase may start and still count as admissible (`Branch.admissible`).
    - `root_finder`: the corrector, any `optimistix.AbstractRootFinder`; default
      `optimistix.Newton(rtol=1e-11, atol=1e-11)`.
    - `max_iterations`: corrector iteration limit.
    - `residual_tol`: the largest $\max|F|$ accepted as an orbit.
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
            start=-0.005, stop=-0.04, parameter_scale=0.01, max_step=0.1,
        )
        [fold.parameter for fold in branch.folds]  # [-0.035439, -0.023735]
        ```

    **References:** H. B. Keller (1977), Numerical solution of bifurcation and
    nonlinear eigenvalue problems; R. Seydel (2010), Practical Bifurcation and
    Stability Analysis, ch. 4-5.
    """
    check_float64("continue_branch")
    parameter = _as_parameter(parameter)
    if method not in ("pseudo-arclength", "natural"):
        raise ValueError(
            f"`method` must be 'pseudo-arclength' or 'natural'; got {method!r}."
        )
    start = float(start)
    if not math.isfinite(start):
        raise ValueError(f"`start` must be finite; got {start}.")
    if bounds is None:
        if stop is None:
            raise ValueError("Give `stop` or `bounds`.")
        bounds = (min(start, float(stop)), max(start, float(stop)))
    low, high = (float(b) for b in bounds)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"`bounds` must be finite with low < high; got {bounds}.")
    if not low <= start <= high:
        raise ValueError(f"`start` = {start} must lie within `bounds` {bounds}.")
    if direction is None:
        if stop is None or float(stop) == start:
            raise ValueError("Give `direction` (+1 or -1) when `stop` does not.")
        direction = 1 if float(stop) > start else -1
    if direction not in (1, -1):
        raise ValueError(f"`direction` must be +1 or -1; got {direction}.")
    if not 0 < min_step <= step <= max_step:
        raise ValueError(
            "Need 0 < `min_step` <= `step` <= `max_step`; got "
            f"{min_step}, {step}, {max_step}."
        )
    if int(max_points) < 1:
        raise ValueError(f"`max_points` must be positive; got {max_points}.")
    if not (parameter_scale > 0 and math.isfinite(parameter_scale)):
        raise ValueError(f"`parameter_scale` must be positive; got {parameter_scale}.")
    max_iterations = check_iterations(max_iterations)
    settings = resolve_settings(settings)
    if settings.adjoint is not None and not isinstance(
        settings.adjoint, dfx.ForwardMode
    ):
        raise ValueError(
            "`settings.adjoint`: continuation differentiates the return map in "
            "forward mode (`diffrax.ForwardMode()` or None); got "
            f"{type(settings.adjoint).__name__}."
        )
    settings = eqx.tree_at(
        lambda s: s.adjoint, settings, dfx.ForwardMode(), is_leaf=lambda x: x is None
    )
    root_finder = resolve_root_finder(root_finder)
    resolve_sequence(system, section)
    u0 = np.atleast_1d(np.asarray(u0, dtype=float))
    if u0.ndim != 1:
        raise ValueError(f"`u0` must be 1-D; got shape {u0.shape}.")

    params = canonical_params(params)
    options = _Options(settings, root_finder, int(max_iterations))
    corrector = _Corrector(
        system, section, parameter, params, options, float(residual_tol)
    )
    k = u0.shape[0]
    # Scaled coordinates z^ = D z, D = diag(1, ..., 1, 1/theta).
    scale = np.ones(k + 1)
    scale[k] = 1.0 / parameter_scale
    e_lam = np.zeros(k + 1)
    e_lam[k] = 1.0

    def tangent_at(point: _Point, reference: np.ndarray) -> np.ndarray:
        return _orient(_null_vector(point.jacobian, scale), reference)

    first = corrector(np.concatenate([u0, [start]]), e_lam)
    if not first.ok:
        message = (
            f"no periodic orbit found at {parameter.name} = {start:g} from `u0` "
            f"(residual {first.residual_norm:.3g}, {first.n_steps} Newton steps)"
        )
        if throw:
            raise RuntimeError(message)
        return _empty_branch(parameter.name, method, "start_failed", message)
    first.tangent = tangent_at(first, direction * e_lam)
    first.kind = "start"
    points = [first]
    specials: list[tuple[int, str, float, bool]] = []
    h = float(step)
    n_rejected = 0
    status, message = "max_points", f"reached max_points = {max_points}"

    def finish_on_bound(prev: _Point, new: _Point) -> _Point | None:
        # The last point sits on the bound, on the branch's first crossing of it:
        # predicted along the tangent at `prev` (the chord to `new` may cut across
        # a fold just beyond the bound), then corrected at fixed lambda.
        bound = high if new.lam > high else low
        if abs(prev.lam - bound) <= 1e-14 * max(1.0, abs(bound)):
            return None  # already there
        t = prev.tangent / scale
        chord = new.z - prev.z
        predictions = [prev.z + (bound - prev.lam) / (new.lam - prev.lam) * chord]
        if abs(t[k]) > 0:
            along = prev.z + (bound - prev.lam) / t[k] * t
            if np.linalg.norm((along - prev.z) * scale) <= np.linalg.norm(
                chord * scale
            ):
                predictions.insert(0, along)
        for z_pred in predictions:
            z_pred[k] = bound
            end = corrector(z_pred, e_lam)
            if end.ok:
                end.tangent = tangent_at(end, prev.tangent)
                end.kind = "end"
                return end
        return None

    while len(points) < max_points:
        prev = points[-1]
        t_prev = prev.tangent
        if method == "natural":
            t_unscaled = t_prev / scale
            d_lam = direction * h
            if abs(t_unscaled[k]) > 1e-12 * np.linalg.norm(t_unscaled):
                z_pred = prev.z + t_unscaled * (d_lam / t_unscaled[k])
            else:
                z_pred = prev.z + d_lam * e_lam
            z_pred[k] = prev.lam + d_lam
            w = e_lam
            predicted = np.linalg.norm((z_pred - prev.z) * scale)
        else:
            z_pred = prev.z + h * t_prev / scale
            w = t_prev * scale
            predicted = h
        new = corrector(z_pred, w)
        accept = new.ok
        if accept:
            new.tangent = tangent_at(new, t_prev)
            correction = np.linalg.norm((new.z - z_pred) * scale)
            turned = float(np.dot(new.tangent, t_prev)) < _MIN_TANGENT_COS
            jumped = correction > _MAX_CORRECTION * predicted
            if (turned or jumped) and h * 0.5 >= min_step:
                accept = False
        if not accept:
            n_rejected += 1
            h *= 0.5
            if h < min_step:
                status = "min_step"
                message = (
                    f"step below min_step = {min_step:g} at {parameter.name} = "
                    f"{prev.lam:.8g}"
                    + (
                        " (a fold stops natural continuation)"
                        if method == "natural"
                        else ""
                    )
                )
                break
            continue

        # Special points between prev and new, in the order met along the chord.
        found = []
        if locate:
            g_prev, g_new = prev.test_functions(), new.test_functions()
            for which, label in ((0, "fold"), (1, "period_doubling")):
                if g_prev[which] * g_new[which] < 0:
                    point, g, located = _locate(
                        corrector,
                        prev,
                        new,
                        scale,
                        which,
                        locate_tol,
                        max_locate_iterations,
                    )
                    if point is prev or point is new:
                        continue
                    point.tangent = tangent_at(point, t_prev)
                    point.kind = label
                    s = float(
                        np.dot(point.z - prev.z, new.z - prev.z)
                        / np.dot(new.z - prev.z, new.z - prev.z)
                    )
                    found.append((s, point, label, g, located))
        found.sort(key=lambda item: item[0])
        for _, point, label, g, located in found:
            if low <= point.lam <= high and len(points) < max_points:
                specials.append((len(points), label, g, located))
                points.append(point)

        if not low <= new.lam <= high:
            end = finish_on_bound(prev, new)
            if end is not None and len(points) < max_points:
                points.append(end)
            status = "reached_bound"
            message = f"left [{low:g}, {high:g}]"
            break
        if len(points) >= max_points:
            break
        points.append(new)
        if max_period is not None and new.t_events[-1] > max_period:
            status = "max_period"
            message = f"period {new.t_events[-1]:.6g} above max_period = {max_period:g}"
            break
        if new.n_steps <= _FAST_NEWTON:
            h = min(h * _GROWTH, max_step)
        elif new.n_steps > _SLOW_NEWTON:
            h = max(h * _SHRINK, min_step)

    return _assemble(
        points,
        specials,
        parameter.name,
        method,
        status,
        message,
        n_rejected,
        settings.guard_tol,
    )
