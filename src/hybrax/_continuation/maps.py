"""Clients: zeros and fixed points of maps."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .._misc import check_float64
from .assembly import _empty_solution_branch, _solution_branch
from .corrector import _Corrector, _Options, _Point, _residual_only
from .driver import (
    _first_point,
    _follow,
    _interrupted_or,
    _resolve_range,
    _start_failure,
    _start_on_doubled_branch,
    check_u0,
    start_at_parameter,
)
from .problems import _AbstractResidual, _FixedPointResidual, _ZerosResidual
from .results import SolutionBranch, SpecialPoint
from .settings import ContinuationSettings, resolve_continuation_settings


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
            raise eqx.EquinoxRuntimeError(failure)
        return _empty_solution_branch(
            parameter_name, settings.method, iterates, k, failure
        )
    if direction is None:  # a switched branch: natural steps go where it leaves
        direction = 1 if first.tangent[-1] >= 0 else -1
    trace = _follow(corrector, first, low, high, direction, settings, parameter_name)
    return _interrupted_or(
        _solution_branch(trace, parameter_name, settings.method, iterates)
    )


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
    stop: float | tuple[float, float] | None = None,
    direction: int | None = None,
    parameter_name: str = "lambda",
    continuation_settings: ContinuationSettings | None = None,
    throw: bool = False,
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
    - `stop`: the value the branch is followed towards from `lam0`; it ends where
      it leaves `[min(lam0, stop), max(lam0, stop)]` (a last point on the bound).
      Or a range `(low, high)` around `lam0`, with `direction`.
    - `direction`: `+1` or `-1`, the initial sign of $d\lambda$; default the sign
      of `stop - lam0` (required where `stop` is a range).
    - `parameter_name`: the label of $\lambda$.
    - `continuation_settings`: a [`hybrax.ContinuationSettings`][] (method, steps,
      location, the corrector); default `ContinuationSettings()`.
    - `throw`: raise if no zero is found at the start; by default (`False`)
      return an empty branch whose result is `RESULTS.start_failed`, as every
      routine reports a failure by its result.

    **Returns:** a [`hybrax.SolutionBranch`][].

    **Raises:** `ValueError` for bad arguments; with `throw=True`, an
    `equinox.EquinoxRuntimeError` (a `RuntimeError`) if the start fails.

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
    settings = resolve_continuation_settings(continuation_settings)
    lam0, low, high, direction = _resolve_range(lam0, stop, direction, "lam0")
    u0 = check_u0(u0)
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
        lambda corrector, s: start_at_parameter(corrector, u0, lam0, direction, s),
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
    u0: Float[Array, " k"] | SpecialPoint,
    lam0: float | None = None,
    args: PyTree = None,
    *,
    iterates: int = 1,
    stop: float | tuple[float, float] | None = None,
    direction: int | None = None,
    parameter_name: str = "lambda",
    continuation_settings: ContinuationSettings | None = None,
    throw: bool = False,
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
    (Kuznetsov 2004, sec. 10.2).

    Started from a period doubling of such a branch, it switches onto the branch
    of period-$2m$ orbits that bifurcates there and follows it. At the doubling
    $(u^*, \lambda^*)$ of $g^m$ (a multiplier $-1$ with eigenvector $v$),
    $F_2(u, \lambda) = g^{2m}(u, \lambda) - u$ has a pitchfork: besides the
    period-$m$ branch, a branch of period-$2m$ orbits leaves $(u^*, \lambda^*)$
    tangent to $(v, 0)$, with $\lambda - \lambda^* = O(a^2)$ at amplitude $a$
    (Kuznetsov 2004, sec. 4.4). Its first point solves $F_2 = 0$ on the hyperplane
    $(v, 0)\cdot(z - z_p) = 0$ through $z_p = (u^* + a v, \lambda^*)$; the
    continuation of $F_2$ follows it away from the doubling. One call per level of
    a period-doubling cascade.

    **Arguments:**

    - `fn`: the map, `fn(u, lam, args) -> u_next`, a JAX function.
    - `u0`: a guess of a point of the orbit at $\lambda$ = `lam0` (for $m > 1$:
      any of its $m$ points), corrected at fixed $\lambda$; or a period doubling
      ([`hybrax.SpecialPoint`][] of kind `"period_doubling"`) of a branch of
      period-$m$ orbits, to switch onto the period-$2m$ branch there (its
      distance from the doubling is `continuation_settings.switch_amplitude`).
    - `lam0`: the initial value of $\lambda$ (none where `u0` is a period
      doubling: it starts at the doubling's parameter, and the side the new
      branch leaves on is found, not given).
    - `args`: any PyTree passed to `fn` (traced: changing it does not recompile).
    - `iterates`: $m$: the period of the branch (from a period doubling: of the
      branch it lies on; the new branch has $2m$).
    - `stop`: the value the branch is followed towards from `lam0`; it ends where
      it leaves `[min(lam0, stop), max(lam0, stop)]` (a last point on the bound).
      Or a range `(low, high)` around `lam0`, with `direction`.
    - `direction`: `+1` or `-1`, the initial sign of $d\lambda$; default the sign
      of `stop - lam0` (required where `stop` is a range).
    - `parameter_name`: the label of $\lambda$.
    - `continuation_settings`: a [`hybrax.ContinuationSettings`][] (method, steps,
      location, the corrector); default `ContinuationSettings()`.
    - `throw`: raise if no fixed point is found at the start; by default
      (`False`) return an empty branch whose result is `RESULTS.start_failed`.

    **Returns:** a [`hybrax.SolutionBranch`][] (its `iterates` is $m$, or $2m$ from
    a period doubling; its `u` is one point of each orbit).

    **Raises:** `ValueError` for bad arguments; with `throw=True`, an
    `equinox.EquinoxRuntimeError` (a `RuntimeError`) if the start fails (from a
    period doubling also where the corrector falls back onto the period-$m$
    branch, or the new branch leaves on the side outside the range).

    !!! example

        The logistic map $x \mapsto r x (1 - x)$: its fixed point $1 - 1/r$ loses
        stability in a period doubling at $r = 3$.

        ```python
        def logistic(x, r, args):
            return r * x * (1 - x)

        branch = hybrax.continue_fixed_points(logistic, 0.6, 2.5, stop=3.6)
        branch.period_doublings[0].parameter  # 3.0

        # Its cascade: r = 3, then 1 + sqrt(6), ...
        doubling = branch.period_doublings[0]
        period_2 = hybrax.continue_fixed_points(logistic, doubling, stop=3.6)
        period_4 = hybrax.continue_fixed_points(
            logistic, period_2.period_doublings[0], iterates=2, stop=3.6
        )
        period_2.period_doublings[0].parameter  # 1 + sqrt(6) = 3.449490
        ```

    **References:** H. B. Keller (1977); Yu. A. Kuznetsov (2004), Elements of
    Applied Bifurcation Theory, ch. 4 (sec. 4.4, branch switching) and sec. 10.2;
    R. Seydel (2010), Practical Bifurcation and Stability Analysis, ch. 5 (sec.
    5.6, branch switching) and ch. 7.
    """
    check_float64("continue_fixed_points")
    if not callable(fn):
        raise ValueError("`fn` must be callable as fn(u, lam, args).")
    iterates = _check_iterates(iterates)
    settings = resolve_continuation_settings(continuation_settings)
    if isinstance(u0, SpecialPoint):
        check_switch_start(lam0, "lam0")
        return _switch_at_doubling(
            fn, u0, args, iterates, stop, parameter_name, settings, throw
        )
    if lam0 is None:
        raise ValueError("Give `lam0`, the parameter's value at `u0`.")
    lam0, low, high, direction = _resolve_range(lam0, stop, direction, "lam0")
    u0 = check_u0(u0)
    k = u0.shape[0]
    _check_map(fn, args, k)
    return _continue_solutions(
        _FixedPointResidual(fn, args, iterates),
        lambda corrector, s: start_at_parameter(corrector, u0, lam0, direction, s),
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


def check_switch_start(start, name: str) -> None:
    """A branch switched at a period doubling starts at the doubling's
    parameter: a `ValueError` naming `name` where a start was given too."""
    if start is not None:
        raise ValueError(
            f"`{name}`: a branch switched at a period doubling starts at the "
            f"doubling's parameter; give no `{name}`."
        )


def check_doubling(point: SpecialPoint) -> SpecialPoint:
    """`point`, checked to be a period doubling that a branch can be switched at."""
    if point.kind != "period_doubling":
        raise ValueError(
            f"`u0` must be a guess or a period doubling; got a {point.kind}."
        )
    if point.multiplier_matrix is None:
        raise ValueError("`u0` has no multiplier matrix to switch branches with.")
    return point


def _switch_at_doubling(
    fn, point, args, iterates, stop, parameter_name, settings, throw
) -> SolutionBranch:
    """The period-$2m$ branch of `fn` that leaves the period doubling `point` of
    its period-$m$ branch (see `continue_fixed_points`)."""
    special = check_doubling(point)
    amplitude = (
        settings.initial_step
        if settings.switch_amplitude is None
        else settings.switch_amplitude
    )
    # The direction in lambda is found by the first point; a placeholder here.
    lam0, low, high, _ = _resolve_range(special.parameter, stop, 1, "u0.parameter")
    k = special.u.shape[0]
    _check_map(fn, args, k)
    period_m = _FixedPointResidual(fn, args, iterates)

    def check_start(first: _Point) -> str | None:
        # Both branches solve F_2 = 0: a first point that g^m leaves in place is
        # back on the period-m branch.
        F_m = _residual_only(period_m, jnp.asarray(first.z))
        if not float(jnp.max(jnp.abs(F_m))) >= 0.05 * amplitude:
            return (
                f"the corrector fell back onto the period-{iterates} branch; try "
                "a smaller `switch_amplitude`"
            )
        return None

    return _continue_solutions(
        _FixedPointResidual(fn, args, 2 * iterates),
        lambda corrector, s: _start_on_doubled_branch(corrector, special, amplitude, s),
        k=k,
        low=low,
        high=high,
        direction=None,
        parameter_name=parameter_name,
        iterates=2 * iterates,
        continuation_settings=settings,
        throw=throw,
        check_start=check_start,
    )
