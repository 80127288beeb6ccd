"""The public orbit routines: find_periodic_orbit, monodromy, poincare_map."""

import dataclasses
import math
import typing

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from .._compile import (
    as_routine_output,
    compiled,
    device_constant,
    system_label,
    when_compiling,
)
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._misc import (
    canonical_params,
    check_float64,
    float_dtype,
    int_dtype,
    is_concrete,
    real_array,
)
from .._settings import (
    Settings,
    Shooting,
    resolve_settings,
    resolve_shooting,
    simulation_adjoint,
)
from .._simulate import raise_if_failed
from .._solution import RESULTS, masked_nan
from .cycle import (
    _ad_monodromy,
    _check_adjoint,
    _cycle_jacobian,
    _monodromy_from_jacobian,
    cycle,
    resolve_sequence,
    variational_map,
)
from .derivative import _orbit
from .floquet import FloquetAnalysis, _floquet
from .newton import ShootingSafeguard, ShootingStart
from .section import PeriodicOrbit, PoincareSection
from .solve import _Shooting, iteration_cap


class _ShootingOptions(typing.NamedTuple):
    """The structure of an orbit program: [`_Shooting`][]'s static fields (every
    leaf static, so the tuple selects the program)."""

    analyse: bool
    jacobian: str
    phase_observables: bool
    iteration_cap: int
    least_squares_iterations: int
    ad_monodromy: bool


class _ShootingInputs(typing.NamedTuple):
    """The run-time values of an orbit program (one compiled program serves
    every value), packed into two vectors: each argument of a call is a
    transfer of its own, and these were 17 scalars and small arrays.

    - `reals`: `residual_tol`, `first_loosening`, then the safeguard's
      floating fields, raveled in their order;
    - `integers`: `max_iterations`, `return_map_iterations`,
      `iterations_used`, then the safeguard's integer and boolean fields.
    """

    reals: Float[ArrayLike, " r"]
    integers: Int[ArrayLike, " i"]

    @classmethod
    def pack(
        cls,
        *,
        max_iterations,
        residual_tol,
        return_map_iterations,
        first_loosening,
        iterations_used,
        safeguard: "ShootingSafeguard | None",
        u_guess,
    ) -> "_ShootingInputs":
        """The vectors of these values for a guess like `u_guess`: NumPy where
        every value is concrete, else `jax.numpy`.

        A fresh start (`safeguard` `None`) packs the memory of nothing
        evaluated: its defect `inf` is what the root finder reads (it starts a
        fresh memory at its first iterate, `_ShootingRootFinder.init`), so the
        vectors depend on the scalars and the guess's size alone, and are kept
        on the device under them (`hybrax._compile.device_constant`): a call
        with the shooting's defaults copies nothing."""
        scalars = (
            max_iterations,
            residual_tol,
            return_map_iterations,
            first_loosening,
            iterations_used,
        )
        if safeguard is not None:
            fields = [getattr(safeguard, f.name) for f in dataclasses.fields(safeguard)]
            return cls._vectors(scalars, fields)
        # (NumPy placeholders whatever `u_guess` is: only its shape counts, and
        # a kept constant must hold no tracer.)
        fields = ShootingSafeguard._fresh_fields(np.zeros(u_guess.shape, u_guess.dtype))
        if any(map(_is_tracer, scalars)):
            return cls._vectors(scalars, fields)
        key = (
            "fresh shooting inputs",
            *(np.asarray(value).item() for value in scalars),
            u_guess.shape,
            u_guess.dtype.str,
            int_dtype().str,
        )
        return device_constant(key, lambda: cls._vectors(scalars, fields))

    @classmethod
    def _vectors(cls, scalars, fields) -> "_ShootingInputs":
        max_iterations, residual_tol, map_iterations, loosening, used = scalars
        reals = [residual_tol, loosening]
        integers = [max_iterations, map_iterations, used]
        for field in fields:
            (reals if field.dtype.kind == "f" else integers).append(field)
        traced = any(map(_is_tracer, (*reals, *integers)))
        xp = jnp if traced else np

        def vector(values, dtype):
            return xp.concatenate([xp.ravel(xp.asarray(v, dtype)) for v in values])

        return cls(vector(reals, float_dtype()), vector(integers, int_dtype()))

    def unpack(self, u_guess) -> tuple:
        """`(max_iterations, residual_tol, return_map_iterations,
        first_loosening, iterations_used, safeguard)` for a guess like
        `u_guess`, the safeguard a [`hybrax.ShootingSafeguard`][]."""
        template = jax.eval_shape(ShootingSafeguard._fresh_fields, u_guess)
        # Where the safeguard's fields start in each vector (after the scalars).
        offsets = {"reals": 2, "integers": 3}
        fields = []
        for like in template:
            floating = jnp.issubdtype(like.dtype, jnp.floating)
            kind = "reals" if floating else "integers"
            start, size = offsets[kind], math.prod(like.shape)
            offsets[kind] = start + size
            values = getattr(self, kind)[start : start + size]
            fields.append(values.reshape(like.shape).astype(like.dtype))
        sizes = {"reals": self.reals.shape[0], "integers": self.integers.shape[0]}
        if offsets != sizes:
            raise ValueError(
                "`u_guess.safeguard` does not belong to a guess of shape "
                f"{u_guess.shape}."
            )
        return (
            self.integers[0],
            self.reals[0],
            self.integers[1],
            self.reals[1],
            self.integers[2],
            ShootingSafeguard(*fields),
        )


def _is_tracer(value) -> bool:
    return isinstance(value, jax.core.Tracer)


def _shooting(
    system, section, settings, root_finder, fallback, options, inputs, u_guess
):
    """The shooting problem of an orbit program, built when the program is traced
    from the parts a call passes (the model's Modules are split once and kept by
    `hybrax._compile`; a problem Module built on every call was split anew, its
    system and section with it, and cost more than a small program runs)."""
    *values, safeguard = inputs.unpack(u_guess)
    return _Shooting(
        system,
        section,
        settings,
        root_finder,
        *values,
        # The orbit does not depend on where a resumed solve stood.
        safeguard=jax.lax.stop_gradient(safeguard),
        fallback=fallback,
        **options._asdict(),
    )


def _shoot(
    system, section, settings, root_finder, fallback, options, inputs, u_guess, params
):
    _check_guess_shape(system, section, u_guess, params)
    shooting = _shooting(
        system, section, settings, root_finder, fallback, options, inputs, u_guess
    )
    # The orbit does not depend on the guess (derivatives flow through params).
    return _orbit(params, jax.lax.stop_gradient(u_guess), shooting=shooting)


def _shoot_analysed(
    system, section, settings, root_finder, fallback, options, inputs, u_guess, params
):
    """The orbit with its Floquet analysis (`None` without) in its `floquet`."""
    orbit, floquet = _shoot(
        system,
        section,
        settings,
        root_finder,
        fallback,
        options,
        inputs,
        u_guess,
        params,
    )
    return dataclasses.replace(orbit, floquet=floquet)


def _system_label(system, *args, **kwargs):
    return system_label(system)


_search = compiled("the orbit search", label=_system_label)(_shoot_analysed)
_analysed_search = compiled(
    "the orbit search with its Floquet analysis", label=_system_label
)(_shoot_analysed)
_saltation_search = compiled(
    "the orbit search with its saltation monodromy", label=_system_label
)(_shoot)

#: What a plain guess array stands for: `ShootingStart`'s defaults.
_START_DEFAULTS = {
    field.name: field.default
    for field in dataclasses.fields(ShootingStart)
    if field.name != "u"
}


def find_periodic_orbit(
    system: HybridSystem,
    section: PoincareSection,
    u_guess: "Float[Array, ' k'] | ShootingStart",
    params: Params,
    *,
    shooting: Shooting | None = None,
    settings: Settings | None = None,
    analyse: bool = True,
    phase_observables: bool = True,
    throw: bool = False,
) -> PeriodicOrbit:
    r"""Find a periodic orbit by shooting and, by default, analyse its stability.

    Solves $F(u) = \pi(P(\chi(u))) - u = 0$ (Zana et al. 2018 eq. 30) with an
    optimistix root finder (a [`hybrax.Shooting`][] holds it and its options);
    the return map $P$ runs one cycle of the section's
    transition sequence with the event engine of [`hybrax.simulate`][]. A solve
    that did not converge, whose residual exceeds the shooting's `residual_tol`
    (some solvers report success off a root), or whose cycle failed is never
    reported as converged: its status names the cause and its values are NaN.

    With `analyse=True` it also returns a [`hybrax.FloquetAnalysis`][]: the monodromy
    matrix by autodiff and by the saltation product, their discrepancy and the
    Floquet multipliers. Everything runs in one compiled function, under `jax.vmap`
    too.

    Every output is differentiable with respect to every floating leaf of
    `params`, by the implicit function theorem at the root ($\dot u = -J^{-1}
    F_p\dot p$ with $J = M - I$ from the variational pass; no differentiation
    through the root finder's iterations) and through one cycle at the solution.
    That derivative is one linear map of the parameters' tangent with a forward
    rule and its transpose (as `lineax.linear_solve` has), so both modes work
    with any `settings.adjoint`: `jax.jvp`, `jax.jacfwd`, `jax.linearize` (a
    tangent costs one forward pass of a cycle and of its variational pass) and
    `jax.grad`, `jax.jacrev`, `jax.value_and_grad` (a gradient costs one
    reverse pass, whatever the number of parameters). Second derivatives are not
    offered. The AD monodromy's derivative is the saltation product's (their
    values agree to the integration tolerance). A failed orbit's derivatives are
    NaN.

    **Arguments:**

    - `system`, `section`: the hybrid system and its [`hybrax.PoincareSection`][].
    - `u_guess`: initial guess of the reduced unknowns, or a
      [`hybrax.ShootingStart`][]: a rough guess's (`ShootingStart(u,
      loosening=math.inf)`), or `orbit.restart` to resume a solve cut short.
    - `params`: the parameter PyTree.
    - `shooting`: a [`hybrax.Shooting`][]: the root finder, `max_iterations`,
      `residual_tol`, the Jacobian of Newton's steps, return-map iterations and a
      fallback solver; default `hybrax.Shooting()` (the safeguarded
      `optimistix.Newton(rtol=1e-11, atol=1e-11)`, 40 iterations).
    - `settings`: a [`hybrax.Settings`][] for each cycle (its `t_max` bounds one
      cycle; both derivative modes work whatever its `adjoint`, see above).
    - `analyse`: also compute monodromy matrices and multipliers.
    - `phase_observables`: record the phase observables of the orbit's cycle
      (e.g. apex heights, `orbit.cycle.phase_observables`); `False` saves their
      cost (they need the cycle's dense output) when they are not wanted. Event
      observables (`orbit.T_c`, ...) are always recorded.
    - `throw`: raise an error carrying the status message if no orbit was found.

    **Safeguarded Newton.** A root finder such as the default Newton is kept
    inside the model's domain: a trial point whose cycle fails (its state leaves
    a mode, a phase is not viable, an event is not reached, a value is not
    finite) is rejected, and the next trial is half of Newton's step from the
    best iterate, then the return map's image of that iterate (accepted whenever
    its cycle runs). Where these iterates make no progress (the smallest defect
    $\max|F|$ not down by a tenth in 8 evaluations), a second pass starts from the
    guess with Deuflhard's natural monotonicity test on each step (the simplified
    Newton step at a trial, with the best iterate's Jacobian, must be shorter
    than Newton's step from the best iterate); no progress there either ends the
    solve. Near an orbit every Newton step is accepted, so the iterates are
    Newton's; far from one each rejection costs a cycle. A solve ends without an
    orbit where the guess fails, the return map's image of an accepted iterate
    fails, both passes stall, or the iterations run out; the orbit's
    `restart.safeguard` then holds the best iterate and its defect, and
    `orbit.describe_failure()` says which cycle failed.

    **Inexact Newton.** With the default step-size controller
    (`diffrax.PIDController`), an iteration far from the root integrates its
    cycle at a looser tolerance (never looser than 1e-5): after a step of
    relative size $r$, the next at about $r^4$, Newton's error two steps on
    (Dembo, Eisenstat & Steihaug 1982). The root finder stops only after an
    iteration at the settings' tolerance, whose cycle gives the reported orbit
    and its analysis: the root is the fixed-tolerance solve's to the root
    finder's tolerance.

    To follow an orbit as parameters change (a tuning loop, a sweep), start each
    solve from the previous `orbit.u` (warm start).

    **Returns:** the [`hybrax.PeriodicOrbit`][], its Floquet analysis in
    `orbit.floquet` (`None` when `analyse=False`).

    **Raises:** `ValueError` for bad arguments; with `throw=True`, an
    `equinox.EquinoxRuntimeError` when the orbit was not found.
    """
    check_float64("find_periodic_orbit")
    settings = resolve_settings(settings)
    _check_adjoint(settings)
    shooting = resolve_shooting(shooting)
    resolve_sequence(system, section)
    # (A plain guess is `ShootingStart(u_guess)`, read without building one.)
    if isinstance(u_guess, ShootingStart):
        start = {f.name: getattr(u_guess, f.name) for f in dataclasses.fields(u_guess)}
    else:
        start = dict(_START_DEFAULTS, u=u_guess)
    u_guess = real_array(start["u"], "u_guess")
    if u_guess.ndim == 0:
        u_guess = u_guess.reshape(1)
    if u_guess.ndim != 1:
        raise ValueError(f"`u_guess` must be 1-D; got shape {u_guess.shape}.")
    if is_concrete(u_guess) and not np.all(np.isfinite(u_guess)):
        raise ValueError(f"`u_guess` must be finite; got {np.asarray(u_guess)}.")
    # (The guess's size against the section's chart is checked when the
    # program is traced, once: `_shoot`.)
    safeguard = start["safeguard"]
    if safeguard is not None and not isinstance(safeguard, ShootingSafeguard):
        raise ValueError(
            "`u_guess.safeguard` must be a solve's `orbit.restart.safeguard` or "
            f"None; got {type(safeguard).__name__}."
        )
    max_iterations = shooting.max_iterations
    iterations_used = _check_used(start["iterations_used"], max_iterations)
    # The return-map iterations come first: a resumed solve has taken them.
    # (`_ShootingInputs.pack` gives every value its dtype.)
    map_iterations = shooting.return_map_iterations
    if is_concrete(iterations_used) and is_concrete(map_iterations):
        map_iterations = 0 if iterations_used > 0 else map_iterations
    else:
        map_iterations = jnp.where(iterations_used > 0, 0, map_iterations)
    params = canonical_params(params)
    inputs = _ShootingInputs.pack(
        max_iterations=max_iterations,
        residual_tol=shooting.residual_tol,
        return_map_iterations=map_iterations,
        first_loosening=_check_loosening(start["loosening"]),
        iterations_used=iterations_used,
        safeguard=safeguard,
        u_guess=u_guess,
    )
    # An eager analysed orbit runs as two programs (see `_solve_then_analyse`).
    split = analyse and all(
        map(is_concrete, jax.tree.leaves((u_guess, params, settings, shooting, inputs)))
    )
    options = _ShootingOptions(
        analyse=bool(analyse),
        jacobian=shooting.jacobian,
        phase_observables=bool(phase_observables),
        iteration_cap=iteration_cap(max_iterations),
        least_squares_iterations=max_iterations if shooting.least_squares else 0,
        ad_monodromy=not split,
    )
    parts = (
        system,
        section,
        settings,
        shooting.root_finder,
        shooting.fallback,
        options,
        inputs,
    )
    if split:
        orbit, floquet = _solve_then_analyse(parts, u_guess, params)
        orbit = dataclasses.replace(orbit, floquet=floquet)
    else:
        orbit = (_analysed_search if analyse else _search)(*parts, u_guess, params)
    if throw:
        orbit = raise_if_failed(orbit, orbit.result)
    return orbit


@compiled("the AD monodromy and Floquet analysis", label=_system_label)
def _floquet_analysis(system, section, settings, state, params, mono_s, result):
    """The analysis's second half at a found orbit's state: the AD monodromy
    (forward mode through one cycle) and the multipliers of both routes, NaN
    where no orbit converged (an `inadmissible_orbit` keeps them)."""
    sequence = resolve_sequence(system, section)[0]
    mono_ad = _ad_monodromy(system, state, params, sequence, settings)
    mode0 = system.sources[sequence[0]]
    floquet = _floquet(system, section, state, params, mode0, mono_ad, mono_s)
    converged = (result == RESULTS.successful) | (result == RESULTS.inadmissible_orbit)
    return masked_nan(floquet, converged)


def _solve_then_analyse(parts, u_guess, params):
    """An eager analysed orbit as two programs: the solve with the saltation
    monodromy (`options.ad_monodromy` false), then the AD monodromy with the
    Floquet analysis. Where the solve compiles, the analysis compiles meanwhile in
    a thread of its own (XLA compiles a program on one core and leaves the
    interpreter free for the other's tracing). The values are those of the single
    program that a traced call (under `jax.jit`, `vmap` or a derivative) runs."""
    # The analysis's inputs by their shapes (NumPy: nothing to dispatch).
    system, section, settings = fixed = parts[:3]
    n, dtype = system.n_states, u_guess.dtype
    state, monodromy, result = as_routine_output(
        (np.zeros(n, dtype), np.zeros((n, n), dtype), RESULTS.successful)
    )
    analysis_args = (*fixed, state, params, monodromy, result)
    threads = []

    def compile_analysis():
        threads.append(_floquet_analysis.compile_in_background(*analysis_args))

    with when_compiling(compile_analysis):
        orbit, mono_s = _saltation_search(*parts, u_guess, params)
    for thread in threads:
        thread.join()
    state, mono_s, result = as_routine_output((orbit.state, mono_s, orbit.result))
    floquet = _floquet_analysis(*fixed, state, params, mono_s, result)
    return orbit, floquet


def _check_guess_shape(system, section, u_guess, params, name="u_guess") -> None:
    """A `ValueError` naming `name` where the guess has not as many entries as
    the section's coordinates (its chart would read past it, or leave entries
    unused)."""
    try:
        state = jax.eval_shape(section.chart, u_guess, params)
        coordinates = jax.eval_shape(section.coordinates, state, params)
    except (TypeError, IndexError, ValueError) as error:
        raise ValueError(
            f"`{name}` of shape {u_guess.shape} does not fit the section's chart: "
            f"{error}"
        ) from None
    if state.shape != (system.n_states,):
        raise ValueError(
            f"the section's chart maps `{name}` to a state of shape {state.shape}; "
            f"the system's states have shape ({system.n_states},)."
        )
    if coordinates.shape != u_guess.shape:
        raise ValueError(
            f"`{name}` has {u_guess.shape[0]} entries; the section's coordinates "
            f"have {coordinates.shape[0] if coordinates.ndim else 0}."
        )


def _check_used(iterations_used, max_iterations: int) -> Int[ArrayLike, ""]:
    """`iterations_used` as an int array (one compilation for every value): NumPy
    where concrete, which jit takes as an array argument without a device array
    built first."""
    if isinstance(iterations_used, jax.core.Tracer):
        if jnp.shape(iterations_used) != () or not jnp.issubdtype(
            jnp.result_type(iterations_used), jnp.integer
        ):
            raise ValueError(
                "`ShootingStart.iterations_used` must be an integer scalar; got "
                "shape "
                f"{jnp.shape(iterations_used)}, dtype "
                f"{jnp.result_type(iterations_used)}."
            )
        return iterations_used
    value = np.asarray(iterations_used)
    if (
        value.shape != ()
        or not np.issubdtype(value.dtype, np.integer)
        or not 0 <= value < max_iterations
    ):
        raise ValueError(
            "`ShootingStart.iterations_used` must be an integer in [0, "
            "max_iterations); got "
            f"{iterations_used!r} (max_iterations {max_iterations})."
        )
    return value.astype(int_dtype())


def _check_loosening(first_loosening) -> Float[ArrayLike, ""]:
    """`first_loosening` as a float array (one compilation for every value), NumPy
    where concrete (as `_check_used`)."""
    dtype = float_dtype()
    if isinstance(first_loosening, jax.core.Tracer):
        if jnp.shape(first_loosening) != ():
            raise ValueError(
                "`ShootingStart.loosening` must be a scalar; got shape "
                f"{jnp.shape(first_loosening)}."
            )
        return jnp.asarray(first_loosening, dtype=dtype)
    value = np.asarray(first_loosening)
    if value.shape != () or value.dtype.kind not in "fiu" or not value >= 1:
        raise ValueError(
            f"`ShootingStart.loosening` must be a number >= 1; got {first_loosening!r}."
        )
    return value.astype(dtype)


@compiled("the monodromy", label=_system_label)
def _analyse_state(system, section, state, params, settings):
    sequence, mode0 = resolve_sequence(system, section)
    dx_dx0, dt_dx0, sol = _cycle_jacobian(system, state, params, sequence, settings)
    mono_ad = _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol, sequence, params)
    u = section.coordinates(state, params)
    _, _, sol_s, mono_s = variational_map(
        system, section, sequence, settings, u, params
    )
    ok = (sol.result == RESULTS.successful) & (sol_s.result == RESULTS.successful)
    floquet = _floquet(system, section, state, params, mode0, mono_ad, mono_s)
    return masked_nan(floquet, ok)


def monodromy(
    system: HybridSystem,
    section: PoincareSection,
    state: Float[Array, " n"],
    params: Params,
    *,
    settings: Settings | None = None,
) -> FloquetAnalysis:
    r"""Monodromy matrices (autodiff and saltation product) of one cycle started at
    `state` on the section, periodic or not: $\tilde\Phi$ is the Jacobian of the
    flow over the fixed duration of that cycle (Zana et al. 2018, eq. 36). See
    [`hybrax.find_periodic_orbit`][].

    **Arguments:**

    - `system`: the [`hybrax.HybridSystem`][].
    - `section`: the [`hybrax.PoincareSection`][] on which the cycle starts and
      closes.
    - `state`: the full state at the start of the cycle, shape
      `(system.n_states,)` (e.g. `PeriodicOrbit.state`).
    - `params`: the parameter PyTree.
    - `settings`: a [`hybrax.Settings`][]; its `adjoint` must be `None` or
      `diffrax.ForwardMode()` (the monodromy is taken in forward mode).

    **Returns:** a [`hybrax.FloquetAnalysis`][]: both monodromy matrices, their
    discrepancy and the multipliers; NaN if the cycle fails.

    **Raises:** `ValueError` for a `state` of the wrong shape or a reverse-mode
    `settings.adjoint`.
    """
    check_float64("monodromy")
    settings = resolve_settings(settings)
    if settings.adjoint is not None and not isinstance(
        settings.adjoint, dfx.ForwardMode
    ):
        raise ValueError(
            "`settings.adjoint`: `monodromy` is differentiable in forward mode only "
            f"(`diffrax.ForwardMode()` or None); got {type(settings.adjoint).__name__}."
        )
    state = jnp.asarray(state, dtype=jnp.result_type(float))
    if state.shape != (system.n_states,):
        raise ValueError(
            f"`state` must have shape ({system.n_states},); got {state.shape}."
        )
    return _analyse_state(system, section, state, canonical_params(params), settings)


@compiled("the return map", label=_system_label)
def poincare_map_with(
    system,
    section,
    u,
    params,
    settings,
    adjoint,
    phase_observables=False,
    *,
    seed_tangents=False,
):
    sequence, _ = resolve_sequence(system, section)
    sol, _ = cycle(
        system,
        section.chart(u, params),
        params,
        sequence,
        settings,
        adjoint,
        phase_observables=phase_observables,
        seed_tangents=seed_tangents,
    )
    u_next = section.coordinates(sol.x_after[-1], params)
    return masked_nan(u_next, sol.result == RESULTS.successful), sol


def poincare_map(
    system: HybridSystem,
    section: PoincareSection,
    u: Float[Array, " k"],
    params: Params,
    *,
    settings: Settings | None = None,
):
    r"""The return map in reduced coordinates, $u \mapsto \pi(P(\chi(u)))$.

    Runs one cycle of the section's transition sequence from the section state
    $\chi(u)$ and reads the unknowns off the state after the closing event. Pure and
    jittable; with the default `settings.adjoint` (reverse mode,
    `diffrax.RecursiveCheckpointAdjoint()`) differentiate it with `jax.grad`,
    `jax.jacrev`; with `diffrax.ForwardMode()`, with `jax.jacfwd`/`jax.jvp` (the
    event-time sensitivity included either way). Building block of shooting and
    continuation.

    **Arguments:**

    - `system`: the [`hybrax.HybridSystem`][].
    - `section`: the [`hybrax.PoincareSection`][] (its transition sequence, chart
      $\chi$ and coordinates $\pi$).
    - `u`: the reduced unknowns at the section, one entry per coordinate of the
      section.
    - `params`: the parameter PyTree.
    - `settings`: a [`hybrax.Settings`][] for the cycle; default `Settings()`.

    **Returns:** `(u_next, solution)`: the image $\pi(P(\chi(u)))$ and the
    cycle's [`hybrax.HybridSolution`][]; `solution.result` is `successful` only if
    the cycle ran as the section declares (`u_next` is NaN otherwise).

    **Raises:** `ValueError` where `u` is complex or has not as many entries as
    the section's coordinates.
    """
    settings = resolve_settings(settings)
    adjoint = simulation_adjoint(settings)
    u = real_array(u, "u")
    if u.ndim == 0:
        u = u.reshape(1)
    if u.ndim != 1:
        raise ValueError(f"`u` must be 1-D; got shape {u.shape}.")
    return _checked_poincare_map(
        system, section, u, canonical_params(params), settings, adjoint
    )


@compiled("the return map", label=_system_label)
def _checked_poincare_map(system, section, u, params, settings, adjoint):
    # The size of `u` against the section's chart: at trace time, once.
    _check_guess_shape(system, section, u, params, name="u")
    return poincare_map_with(system, section, u, params, settings, adjoint)
