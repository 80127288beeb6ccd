r"""Two-parameter continuation: curves of folds, period doublings and
Neimark-Sacker points of fixed points of maps (and so of periodic orbits, through
their return map), with the codimension-two points met along them."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .._continuation_parameter import AbstractParameter, as_parameter
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._misc import canonical_params, check_float64
from .._periodic import PoincareSection, resolve_sequence, variational_map
from .._program_store import StoredModel
from .._settings import Settings, with_controlled_tangents
from .._simulate import Tables
from .._solution import RESULTS
from .driver import _resolve_range, start_at_parameter
from .maps import _check_iterates, _continue_solutions
from .orbits import _forward_mode_settings
from .problems import (
    _AbstractResidual,
    _iterate,
    _second_compound,
    boundary_tests,
    branch_test_functions,
    clearance_names,
    release_names,
    watched_return_map,
)
from .results import SolutionBranch, SpecialPoint, _closest_pair
from .settings import ContinuationSettings, resolve_continuation_settings


#: The codimension-one points whose curves are followed.
CURVE_KINDS = ("fold", "period_doubling", "neimark_sacker")

# The hybrid boundaries a curve can follow: the guard at a phase's start, a
# declared clearance, an impact's release velocity.
BOUNDARY_KINDS = ("force_reversal", "grazing", "release_reversal")
#: The codimension-two points located along them.
CODIM2_KINDS = ("cusp", "fold_flip", "resonance_1_1", "resonance_1_2")


def _defining_test(kind: str, M):
    r"""The scalar that vanishes on the curve: $\det(M - I)$ (fold),
    $\det(M + I)$ (period doubling), $\det(M \odot M - I)$ (Neimark-Sacker)."""
    k = M.shape[0]
    eye = jnp.eye(k, dtype=M.dtype)
    if kind == "fold":
        return jnp.linalg.det(M - eye)
    if kind == "period_doubling":
        return jnp.linalg.det(M + eye)
    C = _second_compound(M, jnp)
    return jnp.linalg.det(C - jnp.eye(C.shape[0], dtype=M.dtype))


class _CurveResidual(_AbstractResidual):
    r"""$G(u, \lambda, \mu) = [g^m(u, \lambda, \mu) - u;\ \tau(D_u g^m)]$ with
    $\tau$ the curve's defining test function; $z = (u, \lambda, \mu)$, the
    continuation's unknowns $(u, \lambda)$ and its parameter $\mu$."""

    fn: Callable
    args: PyTree
    kind: str = eqx.field(static=True)
    iterates: int = eqx.field(static=True)

    def _map(self, u, lam, mu):
        return _iterate(
            lambda v, lam_, args: self.fn(v, lam_, mu, args),
            u,
            lam,
            self.args,
            self.iterates,
        )

    def _jacobian(self, u, lam, mu):
        return jax.jacfwd(lambda v: self._map(v, lam, mu))(u)

    def __call__(self, z):
        k = z.shape[0] - 2
        u, lam, mu = z[:k], z[k], z[k + 1]
        F = self._map(u, lam, mu) - u
        test = _defining_test(self.kind, self._jacobian(u, lam, mu))
        G = jnp.concatenate([F, test[None]])
        return G, jnp.all(jnp.isfinite(G)), None

    def multiplier_matrix(self, z, jacobian):
        del jacobian
        k = z.shape[0] - 2
        return self._jacobian(z[:k], z[k], z[k + 1])

    def test_functions(self, jacobian, M, aux) -> dict[str, float]:
        r"""The codimension-two points of the curve, from the multipliers $\nu_i$
        other than the critical one $\nu_c$ ($+1$ on a fold curve, $-1$ on a
        period-doubling curve): a fold-flip where another one passes $-1$ (fold
        curve: $\prod_{i \ne c}(\nu_i + 1)$) or $+1$ (period-doubling curve:
        $\prod_{i \ne c}(\nu_i - 1)$); a 1:1 resonance where another passes
        $+1$ on a fold curve, a 1:2 resonance where another passes $-1$ on a
        period-doubling curve. On a Neimark-Sacker curve, with the critical pair
        $e^{\pm i\theta}$ (real with product 1 beyond a resonance), the 1:1 and
        1:2 resonances are the zeros of $\cos\theta \mp 1$ (Kuznetsov 2004, sec.
        9.5 and 10.3). A fold curve's cusp is where it reverses in the parameter
        plane (`_cusp_test`). The curve's other turns in $\lambda$ or $\mu$ are
        not special."""
        del aux
        values = {"cusp": _cusp_test(jacobian)} if self.kind == "fold" else {}
        nu = np.linalg.eigvals(M).astype(complex)
        if nu.shape[0] < 2:
            return values
        if self.kind == "neimark_sacker":
            i, j = _closest_pair(nu)
            cos_theta = float(np.real(nu[i] + nu[j])) / 2.0
            return {"resonance_1_1": cos_theta - 1.0, "resonance_1_2": cos_theta + 1.0}
        critical = 1.0 if self.kind == "fold" else -1.0
        others = np.delete(nu, np.argmin(np.abs(nu - critical)))
        plus = float(np.real(np.prod(others - 1.0)))
        minus = float(np.real(np.prod(others + 1.0)))
        if self.kind == "fold":
            return {**values, "fold_flip": minus, "resonance_1_1": plus}
        return {"fold_flip": plus, "resonance_1_2": minus}

    def crosses_zero(self, kind, located, ends):
        """The cusp's test function changes sign also where its orientation
        does (`_cusp_test`), away from any cusp, by a jump: a located cusp
        must be a zero, small against the step's ends."""
        if kind != "cusp":
            return True
        return abs(located) <= 1e-3 * max(abs(e) for e in ends)


def _cusp_test(jacobian: np.ndarray) -> float:
    r"""The signed speed of a fold curve in the parameter plane, zero at a cusp.

    On the curve $F(u, \lambda, \mu) = 0$ with $F_u$ singular (left null
    vector $p$), its unit tangent $t = (t_u, t_\lambda, t_\mu)$ (the null
    vector of the extended Jacobian) satisfies $p^\top F_\lambda t_\lambda +
    p^\top F_\mu t_\mu = 0$: the curve moves in the parameter plane along
    $(p^\top F_\mu, -p^\top F_\lambda)$, at the signed speed

    $$\psi = \operatorname{sign}(p^\top t_u)\,
    \frac{t_\lambda\,p^\top F_\mu - t_\mu\,p^\top F_\lambda}
    {\lVert(p^\top F_\lambda, p^\top F_\mu)\rVert}.$$

    At a cusp the fold's quadratic normal-form coefficient vanishes, the
    tangent is the critical eigenvector $(q, 0, 0)$ and the curve reverses in
    the plane: $\psi$ passes through zero (Kuznetsov 2004, sec. 9.2, the cusp
    of maps, and sec. 10.2). The factor $\operatorname{sign}(p^\top t_u)$ makes $\psi$
    independent of the signs that the singular value decompositions give $p$
    and $t$ (near a cusp $t_u \approx q$ and $p^\top q \ne 0$); where
    $p^\top t_u$ itself changes sign, far from any cusp, $\psi$ jumps across
    zero instead, which `crosses_zero` tells apart."""
    k = jacobian.shape[0] - 1
    F_u, F_lam, F_mu = jacobian[:k, :k], jacobian[:k, k], jacobian[:k, k + 1]
    p = np.linalg.svd(F_u)[0][:, -1]
    t = np.linalg.svd(jacobian)[2][-1]
    normal = np.hypot(p @ F_lam, p @ F_mu)
    speed = (t[k] * (p @ F_mu) - t[k + 1] * (p @ F_lam)) / normal
    return float(np.sign(p @ t[:k]) * speed)


class BifurcationCurve(eqx.Module):
    r"""The result of [`hybrax.continue_bifurcation_curve`][] and
    [`hybrax.continue_orbit_curve`][]: $N$ points of a curve of folds, period
    doublings, Neimark-Sacker points or hybrid boundaries in the plane
    of two parameters $(\lambda, \mu)$, in the order followed.

    - `kind`: the curve's codimension-one point (`"fold"`, `"period_doubling"`,
      `"neimark_sacker"`, or for periodic orbits `"force_reversal"`,
      `"grazing"` and `"release_reversal"`: hybrid boundaries);
      `parameter_names`: $(\lambda, \mu)$'s labels.
    - `branch`: the [`hybrax.SolutionBranch`][] of the extended system in the
      unknowns $(u, \lambda)$ and the parameter $\mu$; its special points are
      the codimension-two points met (kinds `"cusp"`: two folds meet and the
      fold curve reverses in the parameter plane; `"fold_flip"`: a fold and a
      period doubling at once; `"resonance_1_1"`, `"resonance_1_2"`: a double
      multiplier $+1$ or $-1$), and for periodic orbits the points where the
      curve meets another (see [`hybrax.continue_orbit_curve`][]), each with
      `parameter` $= \mu$ and `u` $= (u, \lambda)$ there.
    - Views: `lam`, `mu` `(N,)`; `u` `(N, k)`; `multipliers` `(N, k)` (one of
      them on $+1$, $-1$ or a pair on the unit circle all along a
      bifurcation's curve);
      `special_points`; `result` (why the continuation stopped) and
      `succeeded`.
    """

    kind: str = eqx.field(static=True)
    parameter_names: tuple[str, str] = eqx.field(static=True)
    branch: SolutionBranch

    @property
    def lam(self) -> Float[np.ndarray, " N"]:
        """The first parameter $\\lambda$ along the curve."""
        return np.asarray(self.branch.u)[:, -1]

    @property
    def mu(self) -> Float[np.ndarray, " N"]:
        """The second parameter $\\mu$ along the curve."""
        return np.asarray(self.branch.parameter)

    @property
    def u(self) -> Float[np.ndarray, "N k"]:
        """The fixed point $u$ along the curve."""
        return np.asarray(self.branch.u)[:, :-1]

    @property
    def multipliers(self):
        """The eigenvalues of $D_u g^m$ along the curve, by decreasing modulus."""
        return self.branch.multipliers

    @property
    def special_points(self) -> tuple[SpecialPoint, ...]:
        """The located codimension-two points, in the order met."""
        return self.branch.special_points

    @property
    def result(self) -> RESULTS:
        """Why the continuation stopped (the extended branch's `result`)."""
        return self.branch.result

    @property
    def succeeded(self) -> bool:
        """Whether the curve was followed (it started and was not interrupted)."""
        return self.branch.succeeded


def continue_bifurcation_curve(
    fn: Callable[
        [Float[Array, " k"], Float[Array, ""], Float[Array, ""], PyTree],
        Float[Array, " k"],
    ],
    point: SpecialPoint,
    mu0: float,
    args: PyTree = None,
    *,
    iterates: int = 1,
    stop: float | tuple[float, float] | None = None,
    direction: int | None = None,
    parameter_names: tuple[str, str] = ("lambda", "mu"),
    continuation_settings: ContinuationSettings | None = None,
    throw: bool = False,
) -> BifurcationCurve:
    r"""Follow a fold, period doubling or Neimark-Sacker point of a branch of
    fixed points of a map $g(u, \lambda, \mu)$ (or of its $m$-th iterate) in a
    second parameter $\mu$.

    The point found at $\mu_0$ on a one-parameter branch (by
    [`hybrax.continue_fixed_points`][] of $u \mapsto g(u, \lambda, \mu_0)$) is
    continued by pseudo-arclength (Keller 1977, as
    [`hybrax.continue_zeros`][]) in the extended system

    $$g^m(u, \lambda, \mu) - u = 0,\qquad \tau(D_u g^m(u, \lambda, \mu)) = 0,$$

    unknowns $(u, \lambda)$ and parameter $\mu$, with the test function of the
    point's kind: $\tau = \det(M - I)$ (fold), $\det(M + I)$ (period
    doubling), $\det(M \odot M - I)$ (Neimark-Sacker, the bialternate product);
    $M = D_u g^m$ by `jax.jacfwd` and the system's Jacobian by a second one
    (Kuznetsov 2004, sec. 10.2; Govaerts 2000). Along the curve the
    codimension-two points are located as special points (see
    [`hybrax.BifurcationCurve`][]): cusps on fold curves (where the fold's
    quadratic coefficient vanishes, two folds meet and the curve reverses in
    the parameter plane), fold-flips on fold and period-doubling curves, 1:1
    resonances on fold and Neimark-Sacker curves, 1:2 resonances on
    period-doubling and Neimark-Sacker curves.

    For a periodic orbit of a hybrid system, $g$ is its return map
    ([`hybrax.poincare_map`][] with `Settings(adjoint=diffrax.ForwardMode())`)
    with both parameters set in its PyTree; the curve's points are then the
    orbit's bifurcations in the parameter plane.

    **Arguments:**

    - `fn`: the map, `fn(u, lam, mu, args) -> u_next`, a JAX function
      differentiable twice by `jax.jacfwd`.
    - `point`: a [`hybrax.SpecialPoint`][] of kind `"fold"`, `"period_doubling"`
      or `"neimark_sacker"`, located on a branch of `fn(., ., mu0, args)` (its
      `u` and `parameter` start the curve).
    - `mu0`: the second parameter's value at `point`.
    - `args`: any PyTree passed to `fn`.
    - `iterates`: $m$ (the branch's `iterates`).
    - `stop`, `direction`: the range of $\mu$, as for
      [`hybrax.continue_zeros`][].
    - `parameter_names`: the labels of $(\lambda, \mu)$.
    - `continuation_settings`: a [`hybrax.ContinuationSettings`][] (its
      `parameter_scale` is $\mu$'s).
    - `throw`: raise if the start fails (default: an empty curve whose result
      is `start_failed`).

    **Returns:** a [`hybrax.BifurcationCurve`][].

    **Raises:** `ValueError` for a point of another kind or bad arguments.

    !!! example

        The Hénon map $(x, y) \mapsto (1 - a x^2 + y, b x)$: its fixed point
        period-doubles at $a = 3(1 - b)^2/4$.

        ```python
        def henon(u, a, b, args):
            return jnp.array([1 - a * u[0] ** 2 + u[1], b * u[0]])

        branch = hybrax.continue_fixed_points(
            lambda u, a, args: henon(u, a, 0.3, args), [0.6, 0.2], 0.2, stop=0.5
        )
        curve = hybrax.continue_bifurcation_curve(
            henon, branch.period_doublings[0], 0.3, stop=-1.5
        )
        # curve.lam == 3 (1 - curve.mu)^2 / 4; a 1:2 resonance at (a, b) = (3, -1)
        ```

    **References:** H. B. Keller (1977); W. Govaerts (2000), Numerical Methods
    for Bifurcations of Dynamical Equilibria, SIAM; Yu. A. Kuznetsov (2004),
    Elements of Applied Bifurcation Theory, sec. 9.5 and 10.2.
    """
    check_float64("continue_bifurcation_curve")
    if not callable(fn):
        raise ValueError("`fn` must be callable as fn(u, lam, mu, args).")
    if not isinstance(point, SpecialPoint) or point.kind not in CURVE_KINDS:
        raise ValueError(
            "`point` must be a hybrax.SpecialPoint of kind "
            f"{', '.join(CURVE_KINDS)}; got "
            f"{getattr(point, 'kind', type(point).__name__)!r}."
        )
    iterates = _check_iterates(iterates)
    if len(parameter_names) != 2:
        raise ValueError(
            f"`parameter_names` must name (lambda, mu); got {parameter_names!r}."
        )
    settings = resolve_continuation_settings(continuation_settings)
    mu0, low, high, direction = _resolve_range(mu0, stop, direction, "mu0")
    u_start = np.concatenate([np.asarray(point.u, float), [float(point.parameter)]])
    k = u_start.shape[0] - 1
    if point.kind == "neimark_sacker" and k < 2:
        raise ValueError("A Neimark-Sacker curve needs at least two unknowns.")
    try:
        out = jax.eval_shape(
            lambda u: fn(u, u_start[k], mu0, args), jnp.zeros(k, jnp.result_type(float))
        )
    except Exception as error:
        raise ValueError(f"`fn` failed on the start point: {error}") from error
    if getattr(out, "shape", None) != (k,):
        raise ValueError(
            f"`fn` must return an array of the shape of `u`, ({k},); got "
            f"{getattr(out, 'shape', type(out).__name__)}."
        )
    residual = _CurveResidual(fn, args, point.kind, iterates)
    return _follow_curve(
        residual,
        u_start,
        (mu0, low, high, direction),
        tuple(parameter_names),
        iterates,
        settings,
        throw,
    )


def _follow_curve(
    residual, u_start, span, parameter_names, iterates, settings, throw
) -> BifurcationCurve:
    r"""The curve of `residual`'s kind from `u_start` $= (u, \lambda)$ over
    `span` $= (\mu_0$, low, high, direction$)$."""
    mu0, low, high, direction = span
    branch = _continue_solutions(
        residual,
        lambda corrector, s: start_at_parameter(corrector, u_start, mu0, direction, s),
        k=u_start.shape[0],
        low=low,
        high=high,
        direction=direction,
        parameter_name=parameter_names[1],
        iterates=iterates,
        continuation_settings=settings,
        throw=throw,
    )
    return BifurcationCurve(residual.kind, parameter_names, branch)


#: The tangent pass's tolerances against the cycle's: its test function must be
#: smooth to the corrector's Newton tolerance (1e-11), and controlled at the
#: cycle's rtol 1e-10 the five-link biped's $\det(M + I)$ is smooth to 4e-10.
TANGENT_TIGHTENING = 0.01


class _OrbitReturnMap(eqx.Module):
    r"""The return map of a periodic orbit as a map of two parameters,
    $g(u, \lambda, \mu) = \pi(P(\chi(u); p(\lambda, \mu)))$ (one `eqx.Module`
    per problem, so that the curve's corrector compiles once for it)."""

    system: HybridSystem
    section: PoincareSection
    parameter: AbstractParameter
    parameter2: AbstractParameter
    settings: Settings
    tangent_settings: Settings

    def _traced_model(self, params) -> StoredModel:
        """Where the map's functions of the user's own are, at `params`, for the
        store of traced programs (see [`hybrax._program_store.StoredModel`][])."""
        return StoredModel(
            self.system, self.section, params, (self.parameter, self.parameter2)
        )

    def reduced_jacobian(self, u, lam, mu, params):
        r"""$M = D_u\,\pi(P(\chi(u)))$ from the first variational equation
        integrated with its error controlled (`Settings.control_tangents`): a
        curve's test function $\tau(M)$ must be smooth in $(u, \lambda, \mu)$ to
        the corrector's tolerance. Through the state's steps alone (forward-mode
        AD, or the variational part following the state), the five-link
        biped's $\det(M + I)$ jumps by about 3e-5 where the step sequence
        changes, and its period-doubling curve stopped after three points."""
        p = self.parameter2.set(self.parameter.set(params, lam), mu)
        sequence, _ = resolve_sequence(self.system, self.section)
        _, M, _, _ = variational_map(
            self.system,
            self.section,
            sequence,
            self.tangent_settings,
            u,
            p,
            diagnose=False,
            full=False,
        )
        return M

    def cycle(self, u, lam, mu, params):
        """`(u_next, (guard_at_start, clearance, release), ran)`: the return
        map, the guard of each event's next phase at its start
        (differentiable: from the event's time and state after the reset),
        the declared clearances of each phase `(E, C)` and release velocities
        of each event `(E, R)`, and whether the cycle ran as declared."""
        p = self.parameter2.set(self.parameter.set(params, lam), mu)
        u_next, sol, clearance, release = watched_return_map(
            self.system, self.section, u, p, self.settings
        )
        sequence, _ = resolve_sequence(self.system, self.section)
        guards = []
        for event, transition in enumerate(sequence):
            mode = self.system.targets[transition]
            guards.append(
                Tables(self.system, mode).guard_at_start(
                    mode, sol.t_events[event], sol.x_after[event], p
                )
            )
        ran = sol.result == RESULTS.successful
        return u_next, (jnp.stack(guards), clearance, release), ran

    def __call__(self, u, lam, mu, params):
        return self.cycle(u, lam, mu, params)[0]


class _OrbitCurveResidual(_CurveResidual):
    r"""The curve of a periodic orbit's fold, period doubling, Neimark-Sacker
    point or hybrid boundary in two parameters: $G = [P(u) - u;\ \tau]$ with
    $\tau$ the defining test function of a bifurcation, for a force reversal
    the guard of event `event`'s next phase at its start, for a grazing the
    clearance `observable` of phase `event`, for a release reversal the
    release velocity `observable` of event `event`. Its auxiliary
    output is every such guard and clearance, whose sign changes along a
    bifurcation's curve are where it meets a hybrid boundary; along a
    boundary's curve, the folds, period doublings and Neimark-Sacker points
    are where it meets those curves."""

    event: int | None = eqx.field(static=True)
    guard_tol: float = eqx.field(static=True)
    observable: str | None = eqx.field(static=True, default=None)

    def _traced_model(self) -> StoredModel:
        """Where the residual's functions of the user's own are, for the store of
        traced programs (see [`hybrax._program_store.StoredModel`][])."""
        return self.fn._traced_model(self.args)

    def __call__(self, z):
        k = z.shape[0] - 2
        u, lam, mu = z[:k], z[k], z[k + 1]
        u_next, boundaries, ran = self.fn.cycle(u, lam, mu, self.args)
        guards, clearance, release = boundaries
        if self.kind == "force_reversal":
            test = guards[self.event]
        elif self.kind == "grazing":
            names = clearance_names(self.fn.system)
            test = clearance[self.event, names.index(self.observable)]
        elif self.kind == "release_reversal":
            names = release_names(self.fn.system)
            test = release[self.event, names.index(self.observable)]
        else:
            test = _defining_test(self.kind, self._jacobian(u, lam, mu))
        G = jnp.concatenate([u_next - u, test[None]])
        return G, ran & jnp.all(jnp.isfinite(G)), boundaries

    def _jacobian(self, u, lam, mu):
        return self.fn.reduced_jacobian(u, lam, mu, self.args)

    def _boundary(self) -> str | None:
        """The test function's key of the boundary this curve follows."""
        if self.kind == "force_reversal":
            return f"force_reversal@{self.event}"
        if self.kind in BOUNDARY_KINDS:
            return f"{self.kind}@{self.event}@{self.observable}"
        return None

    def test_functions(self, jacobian, M, aux) -> dict[str, float]:
        """The codimension-two points of a bifurcation's curve and where it
        meets a hybrid boundary (`force_reversal@k`: the guard of event $k$'s
        next phase at its start changes sign; `grazing@k@name`: a clearance
        of phase $k$ does; `release_reversal@k@name`: a release velocity of
        event $k$ does); on a boundary's curve, where it meets a fold,
        period doubling or Neimark-Sacker curve (the branch's test functions
        on $M$) or another boundary."""
        if self.kind in BOUNDARY_KINDS:
            k = M.shape[0]
            values = branch_test_functions(
                np.concatenate([M - np.eye(k), np.zeros((k, 1))], axis=1), M
            )
        else:
            values = super().test_functions(jacobian, M, None)
        guards, clearance, release = aux
        system = self.fn.system
        for event, guard in enumerate(np.asarray(guards, dtype=float)):
            if np.isfinite(guard):
                values[f"force_reversal@{event}"] = float(guard)
        values.update(boundary_tests("grazing", clearance, clearance_names(system)))
        values.update(
            boundary_tests("release_reversal", release, release_names(system))
        )
        values.pop(self._boundary(), None)
        return values

    def bracket_tolerance(self, kind: str) -> float:
        """As on branches: a guard that sits on its surface by construction
        never brackets a boundary."""
        return self.guard_tol if kind.startswith("force_reversal") else 0.0


def continue_orbit_curve(
    system: HybridSystem,
    section: PoincareSection,
    point: SpecialPoint,
    params: Params,
    parameter: AbstractParameter | str,
    parameter2: AbstractParameter | str,
    *,
    stop: float | tuple[float, float] | None = None,
    direction: int | None = None,
    settings: Settings | None = None,
    continuation_settings: ContinuationSettings | None = None,
    throw: bool = False,
) -> BifurcationCurve:
    r"""Follow a fold, period doubling, Neimark-Sacker point or hybrid boundary
    (force reversal, grazing, release reversal) of a branch of periodic orbits
    of a hybrid system in a second parameter.

    [`hybrax.continue_bifurcation_curve`][] on the orbit's return map
    $g(u, \lambda, \mu) = \pi(P(\chi(u); p(\lambda, \mu)))$ (see
    [`hybrax.poincare_map`][]), differentiated twice in forward mode through
    the event chain: the curve's points solve $P(u) = u$ with a multiplier
    $+1$ (fold), $-1$ (period doubling) or a pair on the unit circle
    (Neimark-Sacker), in the plane of `parameter` ($\lambda$) and `parameter2`
    ($\mu$). A force reversal's curve is the hybrid boundary where the phase
    after event $k$ (`point.event`) starts on its guard: $P(u) = u$ with that
    guard $h_k = 0$ at the phase's start (`Branch.guard_at_start`), in the
    extended system in place of the test function (differentiated once); a
    grazing's is the boundary where the declared [`hybrax.Clearance`][]
    `point.observable` of phase `point.event` is zero, $P(u) = u$ and
    $c_k = 0$ (differentiated once: at the interior minimum $c_k$'s
    derivative is that of the clearance at fixed time); a release reversal's
    is the boundary where the release velocity `point.observable` of the
    impact at event `point.event` is zero.

    Where a curve meets another, its special points say so: along a
    bifurcation's curve, besides its codimension-two points, a
    `"force_reversal"` (with its `event`), a `"grazing"` or a
    `"release_reversal"` (with its `event` and `observable`) where the orbit
    crosses a hybrid boundary (beyond it the curve's orbits are not
    admissible); along a boundary's curve, a `"fold"`, `"period_doubling"` or
    `"neimark_sacker"` where the boundary meets that curve, and another
    boundary's kind where it meets that boundary.

    **Arguments:**

    - `system`, `section`: the hybrid system and its Poincaré section.
    - `point`: a special point of a [`hybrax.Branch`][] followed in
      `parameter` by [`hybrax.continue_orbits`][] at `params`: a fold, period
      doubling, Neimark-Sacker point, force reversal, grazing or release
      reversal.
    - `params`: the parameter PyTree of that branch (its value of `parameter2`
      is where the curve starts).
    - `parameter`, `parameter2`: [`hybrax.AbstractParameter`][]s or field names.
    - `stop`, `direction`: the range of `parameter2`: the value it is followed
      towards, or `(low, high)` around its value in `params` with `direction`.
    - `settings`: a [`hybrax.Settings`][] for each cycle (forward mode).
    - `continuation_settings`, `throw`: as for
      [`hybrax.continue_bifurcation_curve`][].

    **Returns:** a [`hybrax.BifurcationCurve`][] with `parameter_names` the two
    parameters' names.

    **Raises:** `ValueError` for bad arguments.

    !!! note

        A bifurcation's corrector differentiates the cycle twice in forward
        mode: it compiles once per system, section, parameters and settings
        (minutes on a CPU for the zoo's walkers), then each point costs a few
        corrector iterations. A force
        boundary's differentiates it once. A bifurcation's test function
        $\tau(M)$ takes $M$ from the first variational equation integrated
        with its error controlled (`Settings.control_tangents`) at tolerances
        100 times tighter than the cycle's, so that it is smooth to the
        corrector's tolerance on models with fast decaying modes.
    """
    check_float64("continue_orbit_curve")
    parameter = as_parameter(parameter, params)
    parameter2 = as_parameter(parameter2, params)
    if parameter.name == parameter2.name:
        raise ValueError(
            f"`parameter2` must differ from `parameter` ({parameter.name!r})."
        )
    params = canonical_params(params)
    resolve_sequence(system, section)
    kinds = (*CURVE_KINDS, *BOUNDARY_KINDS)
    if not isinstance(point, SpecialPoint) or point.kind not in kinds:
        raise ValueError(
            f"`point` must be a hybrax.SpecialPoint of kind {', '.join(kinds)}; "
            f"got {getattr(point, 'kind', type(point).__name__)!r}."
        )
    if point.kind == "force_reversal" and point.event is None:
        raise ValueError("`point` is a force reversal without its `event`.")
    declared = {"grazing": clearance_names, "release_reversal": release_names}
    if point.kind in declared:
        names = declared[point.kind](system)
        if point.event is None or point.observable not in names:
            raise ValueError(
                f"`point` is a {point.kind} without its `event` and the name of "
                "one of the quantities the system declares for it "
                f"({', '.join(names) or 'none'}); got event {point.event!r}, "
                f"observable {point.observable!r}."
            )
    settings = _forward_mode_settings(settings)
    span = _resolve_range(float(parameter2.get(params)), stop, direction, "parameter2")
    u_start = np.concatenate([np.asarray(point.u, float), [float(point.parameter)]])
    if point.kind == "neimark_sacker" and u_start.shape[0] < 3:
        raise ValueError("A Neimark-Sacker curve needs at least two unknowns.")
    residual = _OrbitCurveResidual(
        _OrbitReturnMap(
            system,
            section,
            parameter,
            parameter2,
            settings,
            with_controlled_tangents(settings, TANGENT_TIGHTENING),
        ),
        params,
        point.kind,
        1,
        point.event,
        float(settings.guard_tol),
        point.observable,
    )
    return _follow_curve(
        residual,
        u_start,
        span,
        (parameter.name, parameter2.name),
        1,
        resolve_continuation_settings(continuation_settings),
        throw,
    )
