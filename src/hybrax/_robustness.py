r"""How robust a gait is: disturbances as declared inputs of one cycle, and the
gait sensitivity norm of Hobbelen & Wisse (2007), "A disturbance rejection
measure for limit cycle walkers: the gait sensitivity norm", IEEE Trans.
Robotics 23(6).

A disturbance $d$ enters one cycle (one step) as an offset of one of the model's
parameters, such as the slope of the next step; the disturbed return map is
$u' = P(u, d)$ and the step's gait indicators (step time, step length, ...) are
$y = G(u, d)$, both exact functions of the cycle, differentiated by JAX. At a
periodic orbit $u^*$ their Jacobians
$A = \partial P/\partial u$, $B = \partial P/\partial d$,
$C = \partial G/\partial u$, $D = \partial G/\partial d$ make the linearised
step-to-step system $\delta u_{k+1} = A\,\delta u_k + B\,d_k$,
$\delta y_k = C\,\delta u_k + D\,d_k$.
"""

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._compile import as_routine_output, compiled, system_label
from ._continuation_parameter import AbstractParameter
from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import canonical_params
from ._periodic import (
    PeriodicOrbit,
    PoincareSection,
    cycle,
    cycle_orbit,
    poincare_map_with,
    quantity_value,
    resolve_sequence,
    sorted_multipliers,
)
from ._settings import Settings, resolve_settings
from ._solution import RESULTS, masked_nan


class Disturbance(eqx.Module):
    r"""A disturbance input of one cycle: an offset $d$ of one of the model's
    parameters during one cycle of its section (one step), such as the slope or
    the ground's height under the next step, a push given as an impulse
    parameter of a reset, or an error in a model parameter.

    The cycle runs with the parameters $p + d\,e$ throughout (chart, flow,
    guards and resets), from the section's unknowns $u$ that the previous cycle
    left; the next cycle reads its section state with the undisturbed
    parameters. For a walker whose section is "just after heel strike, both feet
    on the ground" and whose state is measured from the ground's normal, a
    disturbed slope is a step on a wedge of that slope (the terrain model of Byl
    & Tedrake 2009, "Metastable walking machines", Int. J. Robotics Research
    28(8)).

    Some disturbances change where the next cycle starts in a way the model's
    own section cannot hold: after a step up of height $h$ a walker's trailing
    foot is $h$ below its stance foot, where the section's chart puts both feet
    on one level. Such a disturbance names the `section` its cycles run on (a
    walker's full state just after heel strike, with an identity chart); the
    routines that take an orbit on the model's section start from the same
    state in that section's coordinates,
    $u_d = \mathrm{coordinates}_d(\mathrm{chart}(u, p), p)$.

    - `parameter`: the [`hybrax.AbstractParameter`][] it offsets (a field, or a
      derived quantity through `hybrax.FunctionParameter`).
    - `unit`: the unit of $d$ (`"rad"`, `"m"`; `"1"` for a dimensionless one).
    - `meaning`: a few plain words (e.g. `"slope of the next step"`).
    - `section`: the [`hybrax.PoincareSection`][] the disturbed cycles run on,
      or `None` (the default) for the section the caller gives.
    - `system`: the [`hybrax.HybridSystem`][] the disturbed cycles run on, or
      `None` (the default) for the system the caller gives: the same motion
      with a structure that only disturbed cycles need, such as a hopper's
      touchdown armed once the foot comes down, so that a hop can start below
      a step up (an arming condition costs every cycle one more solve per
      phase, which the undisturbed model need not pay). The gait sensitivity,
      a derivative at $d = 0$ where the two systems move alike, runs on the
      caller's system where the disturbance's section fits it (a smaller
      program); the walks and the mesh, at finite $d$, on this one.
    """

    parameter: AbstractParameter
    unit: str = eqx.field(static=True, default="1")
    meaning: str = eqx.field(static=True, default="")
    section: PoincareSection | None = None
    system: HybridSystem | None = None

    def __check_init__(self):
        if not isinstance(self.parameter, AbstractParameter):
            raise ValueError(
                "`parameter` must be a hybrax.AbstractParameter (e.g. "
                f"hybrax.FieldParameter('slope')); got {type(self.parameter).__name__}."
            )
        if not isinstance(self.unit, str):
            raise ValueError(f"`unit` must be a string; got {self.unit!r}.")
        if not isinstance(self.meaning, str):
            raise ValueError(f"`meaning` must be a string; got {self.meaning!r}.")
        if self.section is not None and not isinstance(self.section, PoincareSection):
            raise ValueError(
                "`section` must be a hybrax.PoincareSection or None; got "
                f"{type(self.section).__name__}."
            )
        if self.system is not None and not isinstance(self.system, HybridSystem):
            raise ValueError(
                "`system` must be a hybrax.HybridSystem or None; got "
                f"{type(self.system).__name__}."
            )

    def apply(self, params: Params, d) -> Params:
        r"""The parameters of a cycle disturbed by `d`: the parameter's value
        $v$ replaced by $v + d$. Traced values work."""
        return self.parameter.set(params, self.parameter.get(params) + d)

    def cycle_section(self, section: PoincareSection) -> PoincareSection:
        """The section the disturbed cycles run on: the disturbance's own where it
        names one, else `section`."""
        return section if self.section is None else self.section

    def cycle_system(self, system: HybridSystem) -> HybridSystem:
        """The system the disturbed cycles run on: the disturbance's own where it
        names one, else `system`."""
        return system if self.system is None else self.system

    def start(self, section: PoincareSection, u, params: Params):
        r"""The unknowns `u` of a state on `section` in the coordinates of
        [`cycle_section`][hybrax.Disturbance.cycle_section] (the same state:
        $\mathrm{coordinates}_d(\mathrm{chart}(u, p), p)$; `u` itself where the
        disturbance names no section). Traced values work."""
        if self.section is None:
            return u
        return self.section.coordinates(section.chart(u, params), params)


class GaitSensitivity(eqx.Module):
    r"""The result of [`hybrax.gait_sensitivity`][].

    - `norm`: the gait sensitivity norm, $\sqrt{\sum_{k\ge0}\lVert\delta
      y_k\rVert^2}$ for a unit disturbance in the first step, in the closed
      form $\sqrt{D^\top D + B^\top W B}$ with $W = A^\top W A + C^\top C$ (the
      observability Gramian of the linearised step-to-step system). Infinite
      where the orbit is unstable (spectral radius of $A$ at least 1); NaN with
      `result` not `successful` where the orbit or its disturbed cycle failed.
      Its unit is the indicators' over the disturbance's (where the indicators
      have different units, weigh them first, or read `norms`).
    - `norms`: `(p,)`, each indicator's own norm,
      $(D_i^2 + B^\top W_i B)^{1/2}$ with $W_i = A^\top W_i A + C_i^\top C_i$;
      `norm` is their root sum of squares.
    - `responses`: `(steps, p)`, the linearised response $\delta y_k$ of each
      indicator in step $k$ to a unit disturbance in step 0: $\delta y_0 = D$,
      $\delta y_k = C A^{k-1} B$.
    - `indicators`: `(p,)`, the indicators' values on the orbit.
    - `A`, `B`, `C`, `D`: the step Jacobians at the orbit.
    - `result`: a [`hybrax.RESULTS`][].
    """

    norm: Float[Array, ""]
    norms: Float[Array, " p"]
    responses: Float[Array, "steps p"]
    indicators: Float[Array, " p"]
    A: Float[Array, "k k"]
    B: Float[Array, " k"]
    C: Float[Array, "p k"]
    D: Float[Array, " p"]
    result: RESULTS


def disturbed_step(
    system: HybridSystem,
    section: PoincareSection,
    u: Float[Array, " k"],
    params: Params,
    disturbance: Disturbance,
    d,
    indicators: Mapping[str, Callable[[PeriodicOrbit, Params], Any]],
    *,
    settings: Settings | None = None,
):
    r"""One disturbed step: $u' = P(u, d)$ and the gait indicators
    $y = G(u, d)$ of the cycle from $u$ with the parameters disturbed by $d$ (see
    [`hybrax.Disturbance`][]).

    The indicators are functions `(orbit, params) -> scalar` read on the cycle
    as an orbit (its `period` is the step time, its `u`, events, event and phase
    observables those of this cycle), with the disturbed parameters: the same
    functions as a model's declared [`hybrax.Quantity`][] entries. Pure and
    differentiable in `u`, `d` and `params` in forward mode (`jax.jacfwd`,
    `jax.jvp`): the event times' sensitivity is included.

    **Arguments:**

    - `system`, `section`: the hybrid system and the Poincaré section the cycle
      runs on (where the disturbance names its own section, that one:
      `disturbance.section`; where it names its own system, the cycle runs on
      that one, `disturbance.system`).
    - `u`: the section's unknowns the step starts from.
    - `params`: the undisturbed parameters.
    - `disturbance`: the [`hybrax.Disturbance`][].
    - `d`: the disturbance's value in this step (its unit).
    - `indicators`: name $\to$ `indicator(orbit, params)`, a scalar of one step.
    - `settings`: the [`hybrax.Settings`][] of the cycle (default
      `Settings()`).

    **Returns:** `((u_next, y), result)`: `u_next` and `y` are NaN unless the cycle
    ran as the section declares (`result` `successful`).

    **Raises:** `ValueError` naming `indicators` where one is not callable or
    reads an observable that nothing records, or `section` where the
    disturbance names another section (map the unknowns onto it with
    [`start`][hybrax.Disturbance.start]).
    """
    settings = resolve_settings(settings)
    functions = _indicator_functions(indicators)
    if disturbance.section is not None and section != disturbance.section:
        raise ValueError(
            "`section`: the disturbance runs its cycles on its own section "
            "(`disturbance.section`); pass that one, with `u` in its coordinates "
            "(`disturbance.start(section, u, params)`)."
        )
    resolve_sequence(disturbance.cycle_system(system), section)
    return _step(
        system,
        section,
        settings,
        functions,
        disturbance,
        jnp.asarray(u, float),
        canonical_params(params),
        jnp.asarray(d, float),
    )


def _indicator_functions(indicators) -> tuple:
    if not isinstance(indicators, Mapping) or not indicators:
        raise ValueError(
            "`indicators` must be a non-empty mapping name -> function (orbit, "
            f"params) -> scalar; got {indicators!r}."
        )
    for name, indicator in indicators.items():
        if not callable(indicator):
            raise ValueError(
                f"`indicators[{name!r}]` must be a function (orbit, params) -> "
                f"scalar; got {type(indicator).__name__}."
            )
    return tuple(indicators.values())


def disturbed_cycle(system, section, settings, disturbance, u, params, d, *, observed):
    """`(u_next, solution, disturbed parameters)` of one cycle of the return map
    from the unknowns `u` with the parameters disturbed by `d` (forward-mode
    differentiable; `observed`: with the modes' phase observables; `u_next` NaN
    where the cycle failed). The one disturbed cycle of a disturbed step and
    the first-passage walks; on the disturbance's own system where it names
    one)."""
    disturbed = disturbance.apply(params, d)
    u_next, solution = poincare_map_with(
        disturbance.cycle_system(system),
        section,
        u,
        disturbed,
        settings,
        dfx.ForwardMode(),
        phase_observables=observed,
    )
    return u_next, solution, disturbed


def _step(system, section, settings, indicators, disturbance, u, params, d):
    """`((u_next, y), result)` of one disturbed cycle (see `disturbed_step`)."""
    u_next, solution, disturbed = disturbed_cycle(
        system, section, settings, disturbance, u, params, d, observed=True
    )
    state = section.chart(u, disturbed)
    y = _indicator_values(indicators, u, u_next, state, solution, disturbed)
    ok = solution.result == RESULTS.successful
    return masked_nan((u_next, y), ok), solution.result


def _indicator_values(indicators, u, u_next, state, solution, params):
    """The indicators, `(p,)`, read on the cycle from `state` (unknowns `u`,
    their image `u_next`) as an orbit, with the cycle's parameters."""
    nan_jacobian = jnp.full((u.shape[0], u.shape[0]), jnp.nan, u.dtype)
    orbit = cycle_orbit(u, u_next, state, solution, nan_jacobian, solution.result)
    values = []
    for indicator in indicators:
        value = quantity_value(indicator, orbit, params)
        if value is None:
            raise ValueError(
                "`indicators`: an indicator reads an observable that no mode or "
                "transition of the system records."
            )
        values.append(jnp.asarray(value, u.dtype).reshape(()))
    return jnp.stack(values)


def gait_sensitivity(
    system: HybridSystem,
    section: PoincareSection,
    orbit: PeriodicOrbit,
    params: Params,
    disturbance: "Disturbance | Mapping[str, Disturbance]",
    indicators: Mapping[str, Callable[[PeriodicOrbit, Params], Any]],
    *,
    steps: int = 20,
    settings: Settings | None = None,
) -> "GaitSensitivity | dict[str, GaitSensitivity]":
    r"""The gait sensitivity norm of a periodic orbit (Hobbelen & Wisse 2007, "A
    disturbance rejection measure for limit cycle walkers: the gait sensitivity
    norm", IEEE Trans. Robotics 23(6)): how strongly the gait indicators respond,
    over all later steps, to a disturbance in one step.

    With the step Jacobians at the orbit $u^*$ (see [`hybrax.disturbed_step`][]),
    $A = \partial P/\partial u$, $B = \partial P/\partial d$,
    $C = \partial G/\partial u$, $D = \partial G/\partial d$, a unit disturbance
    in step 0 moves the indicators by $\delta y_0 = D$ in that step and by
    $\delta y_k = C A^{k-1} B$ in step $k \ge 1$, and

    $$\mathrm{GSN} = \Big(\sum_{k\ge0}\lVert\delta y_k\rVert^2\Big)^{1/2}
    = \big(D^\top D + B^\top W B\big)^{1/2},\qquad W = A^\top W A + C^\top C,$$

    the $H_2$ norm of the linearised step-to-step system from the disturbance to
    the indicators, computed in closed form ($W$ from the discrete Lyapunov
    equation, solved as a linear system in its entries). Where the disturbance
    names its own section, the Jacobians are those of its cycles, at the orbit's
    state in its coordinates ([`hybrax.Disturbance.start`][]; a full-state
    section adds the multiplier 0 along the flow to those of $A$).

    Differentiable in `params` in forward mode (`jax.jacfwd`), through the
    orbit's own derivative: pass an orbit found inside the differentiated
    function, so that `hybrax.tune` can minimise it. Works under `jax.jit` and
    `jax.vmap`.

    **Arguments:**

    - `system`, `section`: the hybrid system and its Poincaré section.
    - `orbit`: a [`hybrax.PeriodicOrbit`][] of [`hybrax.find_periodic_orbit`][].
    - `params`: the parameters the orbit was found at.
    - `disturbance`: a [`hybrax.Disturbance`][], or a mapping name $\to$
      disturbance (a model's declared ones, `ModelBundle.disturbances`): their
      norms from one forward pass through the orbit's cycle, whose tangents
      are the state's and every disturbance's, in one program (the
      Jacobians of each follow by the chain rule through its section's chart
      and coordinates; a disturbance that runs on a system of its own, see
      [`hybrax.Disturbance`][], takes a pass of its own).
    - `indicators`: name $\to$ `indicator(orbit, params)`, a scalar of one step
      (a model's `ModelBundle.gait_indicators` name its quantities).
    - `steps`: how many steps of `responses` to return (static).
    - `settings`: the [`hybrax.Settings`][] of the disturbed cycle (default:
      `Settings()`; give the orbit's own for its tolerances).

    **Returns:** a [`hybrax.GaitSensitivity`][]; for a mapping, a dict of
    them by name.

    **Raises:** `ValueError` naming `indicators`, `steps` or `disturbance`.
    """
    # As `compile_gait_sensitivity` compiles it (see `as_routine_output`).
    u, result = as_routine_output((orbit.u, orbit.result))
    names, inputs = _program_inputs(
        system,
        section,
        u,
        result,
        params,
        disturbance,
        indicators,
        steps,
        settings,
    )
    results = _sensitivity(*inputs)
    if names is None:
        return results[0]
    return dict(zip(names, results))


def compile_gait_sensitivity(
    system: HybridSystem,
    section: PoincareSection,
    u: Float[Array, " k"],
    params: Params,
    disturbance: "Disturbance | Mapping[str, Disturbance]",
    indicators: Mapping[str, Callable[[PeriodicOrbit, Params], Any]],
    *,
    steps: int = 20,
    settings: Settings | None = None,
) -> threading.Thread:
    """Compile [`gait_sensitivity`][]'s program for an orbit with unknowns of
    `u`'s shape in a thread of its own (the command line compiles it while the
    orbit search runs); `join` it before the call. Only shapes matter."""
    # Placeholders of the orbit's unknowns and status, as the orbit search
    # returns them (see `as_routine_output`).
    u, result = as_routine_output(
        (np.zeros(np.shape(u), np.result_type(u)), RESULTS.successful)
    )
    _, inputs = _program_inputs(
        system,
        section,
        u,
        result,
        params,
        disturbance,
        indicators,
        steps,
        settings,
    )
    return _sensitivity.compile_in_background(*inputs)


def _program_inputs(
    system, section, u, orbit_result, params, disturbance, indicators, steps, settings
) -> tuple:
    """`(names, inputs)`: the names of a mapping of disturbances (`None` for
    one disturbance) and the checked arguments of [`gait_sensitivity`][]'s
    program, its disturbances as a tuple."""
    settings = resolve_settings(settings)
    functions = _indicator_functions(indicators)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"`steps` must be a positive integer; got {steps!r}.")
    if isinstance(disturbance, Mapping):
        names = tuple(disturbance)
        disturbances = tuple(disturbance.values())
        if not names:
            raise ValueError("`disturbance`: the mapping names no disturbance.")
    else:
        names, disturbances = None, (disturbance,)
    for each in disturbances:
        if not isinstance(each, Disturbance):
            raise ValueError(
                "`disturbance` must be a hybrax.Disturbance or a mapping name -> "
                f"hybrax.Disturbance; got {type(each).__name__}."
            )
    resolve_sequence(system, section)  # a section that is no path: ValueError
    params = canonical_params(params)
    disturbances = tuple(
        _at_rest(system, section, u, params, each) for each in disturbances
    )
    for each in disturbances:
        resolve_sequence(each.cycle_system(system), each.cycle_section(section))
    return names, (
        system,
        section,
        settings,
        functions,
        disturbances,
        steps,
        u,
        orbit_result,
        params,
    )


def _at_rest(system, section, u, params, disturbance: Disturbance) -> Disturbance:
    """The disturbance whose cycles the gait sensitivity differentiates at
    $d = 0$: on the caller's `system` where the disturbance names a system of
    its own and its section's chart gives the caller's states. A disturbance's
    system has the caller's motion at $d = 0$ (it only adds structure that
    disturbed cycles need, such as an armed guard), so the derivatives are the
    same (to the integration's error), and the caller's cycle is the smaller
    program: the hopper's armed touchdown made a cold `hybrax orbit hopper`
    take 2x the CPU of the command without the gait sensitivity, its own
    cycle 1.4x."""
    if disturbance.system is None:
        return disturbance
    chart = disturbance.cycle_section(section).chart
    state = eqx.filter_eval_shape(
        lambda u: chart(disturbance.start(section, u, params), params), u
    )
    if state.shape != (system.n_states,):
        return disturbance
    return dataclasses.replace(disturbance, system=None)


@compiled("the gait sensitivity", label=lambda system, *_, **__: system_label(system))
def _sensitivity(
    system,
    section,
    settings,
    indicators,
    disturbances,
    steps,
    u,
    orbit_result,
    params,
):
    # The disturbances that run on the caller's system with its cycle's
    # transitions share one pass; each other takes a pass of its own.
    sequence = resolve_sequence(system, section)[0]
    shared, alone = [], []
    for index, disturbance in enumerate(disturbances):
        own = disturbance.cycle_system(system)
        cycle_section = disturbance.cycle_section(section)
        if own is system and resolve_sequence(own, cycle_section)[0] == sequence:
            shared.append(index)
        else:
            alone.append([index])
    results = [None] * len(disturbances)
    for group in ([shared] if shared else []) + alone:
        members = [disturbances[i] for i in group]
        for i, result in zip(
            group,
            _group_sensitivity(
                system,
                section,
                settings,
                indicators,
                members,
                steps,
                u,
                orbit_result,
                params,
            ),
        ):
            results[i] = result
    return tuple(results)


def _group_sensitivity(
    system, section, settings, indicators, members, steps, u, orbit_result, params
):
    r"""The gait sensitivity of each of `members`, disturbances whose cycles run
    on one system from one state, by one forward pass: the cycle from the
    state $x$ with the parameters offset by every member's $d_j$, its end
    state $x'$ and indicators $y$ differentiated in $(x, d)$ at the orbit.
    Each member's step Jacobians follow by the chain rule through its section's
    chart $\chi_j(u, p)$ and coordinates $\pi_j(x, p)$ (both read with the
    disturbed parameters):
    $A_j = \pi_{j,x} x'_x \chi_{j,u}$,
    $B_j = \pi_{j,x}(x'_x \chi_{j,d} + x'_{d_j}) + \pi_{j,d}$,
    $C_j = y_x \chi_{j,u}$, $D_j = y_x \chi_{j,d} + y_{d_j}$."""
    first = members[0]
    cycle_system = first.cycle_system(system)
    first_section = first.cycle_section(section)
    sequence = resolve_sequence(cycle_system, first_section)[0]
    starts = [member.start(section, u, params) for member in members]
    state = first_section.chart(starts[0], params)
    zeros = jnp.zeros((len(members),), u.dtype)

    def disturbed(d):
        p = params
        for j, member in enumerate(members):
            p = member.apply(p, d[j])
        return p

    def flow(x, d):
        p = disturbed(d)
        solution, _ = cycle(
            cycle_system,
            x,
            p,
            sequence,
            settings,
            dfx.ForwardMode(),
            phase_observables=True,
            # The orbit's own cycle, diagnosed by its search; its loop carries
            # the tangents from the start: one transformation of its body.
            diagnose=False,
            seed_tangents=True,
        )
        x_end = solution.x_after[-1]
        u_here = first_section.coordinates(x, p)
        u_next = first_section.coordinates(x_end, p)
        y = _indicator_values(indicators, u_here, u_next, x, solution, p)
        return (x_end, y), (x_end, y, solution.result)

    jacobians, (x_end, y, step_result) = jax.jacfwd(flow, argnums=(0, 1), has_aux=True)(
        state, zeros
    )
    (end_x, end_d), (y_x, y_d) = jacobians
    result = RESULTS.where(
        orbit_result == RESULTS.successful, step_result, orbit_result
    )
    sensitivities = []
    for j, (member, start) in enumerate(zip(members, starts)):
        member_section = member.cycle_section(section)

        def chart(v, d, member=member, member_section=member_section):
            return member_section.chart(v, member.apply(params, d))

        def coordinates(x, d, member=member, member_section=member_section):
            return member_section.coordinates(x, member.apply(params, d))

        zero = jnp.zeros((), u.dtype)
        chart_u, chart_d = jax.jacfwd(chart, argnums=(0, 1))(start, zero)
        coordinates_x, coordinates_d = jax.jacfwd(coordinates, argnums=(0, 1))(
            x_end, zero
        )
        A = coordinates_x @ end_x @ chart_u
        B = coordinates_x @ (end_x @ chart_d + end_d[:, j]) + coordinates_d
        C = y_x @ chart_u
        D = y_x @ chart_d + y_d[:, j]
        sensitivities.append(_from_jacobians(A, B, C, D, y, steps, result))
    return sensitivities


def _from_jacobians(A, B, C, D, y, steps, result) -> GaitSensitivity:
    """The norm, each indicator's and the responses of the linearised step
    system $(A, B, C, D)$ (see [`gait_sensitivity`][]); NaN unless `result` is
    `successful`."""
    # W_i = A^T W_i A + C_i^T C_i for each indicator's row C_i, as one linear
    # system in the entries of the W_i (row-major: vec(A^T W A) = (A^T (x) A^T)
    # vec(W)), so that each indicator has its own norm and W = sum_i W_i.
    k = A.shape[0]
    lyapunov = jnp.eye(k * k, dtype=A.dtype) - jnp.kron(A.T, A.T)
    outer = (C[:, :, None] * C[:, None, :]).reshape(C.shape[0], k * k)
    gramians = jnp.linalg.solve(lyapunov, outer.T).T.reshape(C.shape[0], k, k)
    stable = jnp.max(jnp.abs(sorted_multipliers(A))) < 1
    squared = D**2 + jnp.einsum("i,pij,j->p", B, gramians, B)
    safe = jnp.where(stable, squared, 1.0)
    norms = jnp.where(stable, jnp.sqrt(safe), jnp.inf)
    norm = jnp.where(stable, jnp.sqrt(jnp.sum(safe)), jnp.inf)

    def later(carry, _):
        return A @ carry, C @ carry

    _, tail = jax.lax.scan(later, B, None, length=steps - 1)
    responses = jnp.concatenate([D[None], tail])
    ok = result == RESULTS.successful
    return GaitSensitivity(
        *masked_nan((norm, norms, responses, y, A, B, C, D), ok), result=result
    )
