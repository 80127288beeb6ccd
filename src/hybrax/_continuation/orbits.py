"""Client: periodic orbits of a hybrid system."""

from collections.abc import Callable

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._continuation_parameter import (
    AbstractParameter,
    as_parameter,
)
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._misc import canonical_params, check_float64
from .._periodic import (
    PoincareSection,
    resolve_sequence,
)
from .._settings import (
    Settings,
    resolve_settings,
)
from .._solution import RESULTS, status_message, status_name
from .assembly import _empty_orbit_branch, _orbit_branch
from .corrector import _Corrector, _cycle_outcome, _Options, _Point, _residual_only
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
from .maps import check_doubling, check_switch_start
from .problems import _ReturnMapResidual, clearance_names, release_names
from .results import Branch, SpecialPoint
from .settings import ContinuationSettings, resolve_continuation_settings


def _several_guesses(u0) -> list | None:
    """`u0` as a list of guesses where it holds several (a list or tuple of
    arrays, or a 2-D array), else `None` (one guess, checked by `check_u0`)."""
    if isinstance(u0, list | tuple) and u0 and all(np.ndim(g) >= 1 for g in u0):
        return list(u0)
    if np.ndim(u0) == 2:
        return list(u0)
    return None


def continue_orbits(
    system: HybridSystem,
    section: PoincareSection,
    u0: Float[Array, " k"] | list | SpecialPoint,
    params: Params,
    parameter: AbstractParameter | str,
    *,
    start: float | None = None,
    stop: float | tuple[float, float] | None = None,
    direction: int | None = None,
    continuation_settings: ContinuationSettings | None = None,
    settings: Settings | None = None,
    throw: bool = False,
) -> Branch:
    r"""Follow a branch of periodic orbits in one scalar parameter, from a guess or
    from a period doubling of another branch.

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

    Started from a period doubling of a branch, it switches onto the branch of
    period-2 orbits (two cycles of `section`), the zeros of
    $F_2(u, \lambda) = \pi(P^2(\chi(u); p(\lambda))) - u$ (the return map of
    [`hybrax.period_doubled_section`][]). Where $M$ has the multiplier $-1$ with
    eigenvector $v$, the new branch leaves tangent to $(v, 0)$ (Kuznetsov 2004,
    sec. 4.4): its first point solves $F_2 = 0$ on the hyperplane
    $(v, 0)\cdot(z - z_p) = 0$ through $z_p = (u^* + a v, \lambda^*)$, $a$ the
    settings' `switch_amplitude`.

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
      corrected at fixed $\lambda$ first; or several guesses (a list of arrays,
      or an array of shape `(n, k)`), tried in order until one starts the branch
      (the branch of the first that does; else the last one's, `start_failed`);
      or a period doubling ([`hybrax.SpecialPoint`][] of kind
      `"period_doubling"`) of a branch of this `section` (for the next level of
      a cascade, the doubled section), to switch onto its period-2 branch.
    - `params`: the parameter PyTree (its value of the continued parameter is
      replaced by `start`).
    - `parameter`: a [`hybrax.AbstractParameter`][] (e.g. a
      [`hybrax.FieldParameter`][] for a field in scaled units) or a field name.
    - `start`: the initial value of $\lambda$; default its value in `params`.
      None from a period doubling: the branch starts at the doubling, and the
      side it leaves on is found, not given.
    - `stop`: the value the branch is followed towards from `start`; it ends
      where it leaves `[min(start, stop), max(start, stop)]` (a last point is
      placed on the bound). Or a range `(low, high)` around `start`, with
      `direction`.
    - `direction`: `+1` or `-1`, the initial sign of $d\lambda$; default the sign
      of `stop - start` (required where `stop` is a range).
    - `continuation_settings`: a [`hybrax.ContinuationSettings`][]: the method,
      its steps, the location of special points, the corrector, the period
      bound `max_period` and the `switch_amplitude`; default
      `ContinuationSettings()`.
    - `settings`: a [`hybrax.Settings`][] for each cycle (see
      [`hybrax.poincare_map`][]); its `guard_tol` is also how far past a guard a
      phase may start and still count as admissible (`Branch.admissible`).
    - `throw`: raise if no orbit is found at the start; by default (`False`)
      return an empty branch whose result is `RESULTS.start_failed`, as every
      routine reports a failure by its result.

    **Returns:** a [`hybrax.Branch`][] (from a period doubling, of period-2
    orbits: `E` twice the events of `section`).

    **Raises:** `ValueError` for bad arguments; with `throw=True`, an
    `equinox.EquinoxRuntimeError` (a `RuntimeError`) if the start fails (from a
    period doubling: no period-2 orbit is found near it).

    !!! note

        Special points are detected by sign changes between consecutive points, so
        two folds closer together than one step cancel out; `max_step` bounds the
        step. Where the cycle's event sequence changes along the branch (grazing,
        a non-smooth point of a hybrid system) no step beyond it converges to an
        admissible cycle and the continuation stops with `RESULTS.min_step_reached`. One
        corrector is compiled per system, section, parameter and integration
        setting, and serves every step, method and parameter value.

    !!! example

        The hopper in $D_G = d_G / (2\sqrt{k m})$ through its first two folds:

        ```python
        def damping_scale(p):
            return 2 * jnp.sqrt(p.k * p.m)

        D_G = hybrax.FieldParameter("d_G", damping_scale, name="D_G")
        system = models.hopper.minimal()[0]
        section = models.hopper.section("minimal")
        params = hybrax.canonical_params(models.hopper.make_params(D_G=-0.005))
        branch = hybrax.continue_orbits(
            system, section, models.hopper.orbit_guess(params, 0.3), params, D_G,
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
    Bifurcation Theory, sec. 4.4 and 10.2.
    """
    check_float64("continue_orbits")
    parameter = as_parameter(parameter, params)
    continuation = resolve_continuation_settings(continuation_settings)
    if isinstance(u0, SpecialPoint):
        check_switch_start(start, "start")
        return _switch_at_doubling(
            system, section, u0, params, parameter, stop, settings, continuation, throw
        )
    if start is None:
        start = _value_in(parameter, params)
    guesses = _several_guesses(u0)
    if guesses is not None:
        for guess in guesses:
            branch = continue_orbits(
                system,
                section,
                guess,
                params,
                parameter,
                start=start,
                stop=stop,
                direction=direction,
                continuation_settings=continuation,
                settings=settings,
                throw=throw,
            )
            if branch.result != RESULTS.start_failed:
                break
        return branch
    start, low, high, direction = _resolve_range(start, stop, direction)
    u0 = check_u0(u0)
    return follow_orbits(
        system,
        section,
        params,
        parameter,
        lambda corrector: start_at_parameter(
            corrector, u0, start, direction, continuation
        ),
        f"at {parameter.name} = {start:g} from `u0`",
        low=low,
        high=high,
        direction=direction,
        settings=settings,
        continuation=continuation,
        throw=throw,
    )


def _value_in(parameter: AbstractParameter, params) -> float:
    """The continued parameter's value in `params`, as the default start."""
    try:
        value = np.asarray(parameter.get(params), dtype=float)
    except Exception as error:
        raise ValueError(
            f"`start`: give the start value; {parameter.name} could not be read "
            f"from `params` ({error})."
        ) from None
    if value.shape != ():
        raise ValueError(
            f"`start`: give the start value; {parameter.name} in `params` is not "
            f"a scalar (shape {value.shape})."
        )
    return float(value)


def follow_orbits(
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
    settings,
    continuation: ContinuationSettings,
    throw,
    check_start: Callable[[_Point], str | None] | None = None,
) -> Branch:
    """The driver of the hybrid-orbit clients: the first point from
    `start_point`, then [`_follow`][] with the `max_period` stop of
    `continuation`."""
    settings = _forward_mode_settings(settings)
    resolve_sequence(system, section)
    residual = _ReturnMapResidual(
        system, section, parameter, canonical_params(params), settings
    )
    options = _Options(continuation.corrector, continuation.max_iterations)
    corrector = _Corrector(residual, options, continuation.residual_tol)
    first = _first_point(start_point, corrector)
    missing = f"no periodic orbit found {where}"
    if not first.ok and corrector.last_prediction is not None:
        # Newton from a cycle that cannot run has only a NaN residual to show:
        # the cycle's own status is the cause.
        cause = cycle_failure(residual, corrector.last_prediction)
        if cause is not None:
            missing += f": {describe_cycle_failure(*cause)}"
    failure = _start_failure(
        first,
        missing,
        "orbit",
        parameter.name,
        (low, high),
        check_start,
    )
    if failure is not None:
        if throw:
            raise eqx.EquinoxRuntimeError(failure)
        return _empty_orbit_branch(
            parameter.name, continuation.method, RESULTS.start_failed, failure
        )
    if direction is None:  # a switched branch: natural steps go where it leaves
        direction = 1 if first.tangent[-1] >= 0 else -1

    max_period = continuation.max_period

    def beyond_max_period(point: _Point) -> tuple[RESULTS, str] | None:
        period = float(point.aux.t_events[-1])
        if max_period is not None and period > max_period:
            message = f"period {period:.6g} above max_period = {max_period:g}"
            return RESULTS.max_period_reached, message
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
        _orbit_branch(
            trace,
            parameter.name,
            continuation.method,
            settings.guard_tol,
            clearance_names(system),
            release_names(system),
        )
    )


def cycle_failure(
    residual: _ReturnMapResidual, z
) -> tuple[str, str | None, str | None] | None:
    """How the cycle of `residual` at `z` (the unknowns, then the parameter)
    fails: `(status, mode, transition)`, the mode it ended in and the
    transition that caused the stop (`None` where the status names none), or
    `None` where the cycle runs."""
    result, mode, cause = _cycle_outcome(residual, jnp.asarray(z, dtype=float))
    status = status_name(result)[0]
    if status == "successful":
        return None
    system = residual.system
    mode, cause = int(mode), int(cause)
    mode_name = system.modes[mode].name if 0 <= mode < len(system.modes) else None
    transition = (
        system.transitions[cause].name if 0 <= cause < len(system.transitions) else None
    )
    return status, mode_name, transition


def start_cycle_failure(
    system, section, parameter, params, u0, start, settings=None
) -> tuple[str, str | None, str | None] | None:
    """[`cycle_failure`][] of `u0` at `parameter` = `start`, the cycle that
    [`hybrax.continue_orbits`][] corrects first (`None` where it runs): for a
    caller that explains a start that failed in its own words."""
    residual = _ReturnMapResidual(
        system,
        section,
        as_parameter(parameter, params),
        canonical_params(params),
        _forward_mode_settings(settings),
    )
    z = jnp.concatenate([jnp.asarray(u0, dtype=float), jnp.asarray([start], float)])
    return cycle_failure(residual, z)


def describe_cycle_failure(status: str, mode: str | None, transition: str | None):
    """One clause: the status that stopped a cycle, where, and its message,
    e.g. `"its cycle ends with mode_not_viable in mode flight, at the
    touchdown guard: A phase would end at the instant it starts: ..."`."""
    message = status_message(getattr(RESULTS, status))[0]
    # The status's pointer to `cause_transition`: named here instead.
    message = message.split(" `cause_transition`")[0]
    where = "" if mode is None else f" in mode {mode}"
    if transition is not None:
        where += f", at the {transition} guard"
    return f"its cycle ends with {status}{where}: {message.rstrip('.')}"


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


def _switch_at_doubling(
    system, section, point, params, parameter, stop, settings, continuation, throw
) -> Branch:
    """The branch of period-2 orbits that leaves the period doubling `point` (see
    `continue_orbits`)."""
    check_doubling(point)
    if continuation.switch_amplitude is None:
        # The period-2 branch leaves the bifurcation like a parabola in the
        # parameter; when the first amplitude lands the corrector back on the
        # period-1 branch, smaller ones are tried before giving up.
        amplitudes = [continuation.initial_step * f for f in (1, 1 / 3, 1 / 10, 1 / 30)]
    else:
        amplitudes = [continuation.switch_amplitude]
    _, low, high, _ = _resolve_range(point.parameter, stop, 1, "u0.parameter")
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
        branch = follow_orbits(
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
            settings=settings,
            continuation=continuation,
            throw=throw and last,
            check_start=check_start,
        )
        # A start that already lies past the bound (one point, then out) also
        # asks for a smaller amplitude: the parabola was entered too far out.
        overshot = bool(branch.result == RESULTS.reached_bound)
        overshot = overshot and branch.n_points < 2
        started = not bool(branch.result == RESULTS.start_failed)
        if started and not (overshot and not last):
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
