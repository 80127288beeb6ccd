"""The public simulation routine, its argument checks and `raise_if_failed`."""

import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array, Float

from .._compile import compiled, device_constant, system_label
from .._custom_types import ModeIndex, Params
from .._hybrid import HybridSystem, mode_index
from .._misc import (
    canonical_params,
    concrete_value,
    float_dtype,
    is_concrete,
    real_array,
)
from .._settings import Settings, resolve_settings, simulation_adjoint
from .._solution import (
    RESULTS,
    HybridSolution,
    any_failed,
    status_message,
    status_name,
)
from .events import run_events


def check_state(system: HybridSystem, x0, name: str = "x0") -> Array:
    x0 = real_array(x0, name)
    if x0.ndim != 1 or x0.shape[0] != system.n_states:
        raise ValueError(
            f"`{name}` must have shape ({system.n_states},); got {tuple(x0.shape)}."
        )
    return x0


def check_domain(system: HybridSystem, mode, t, x, params, name: str = "x0") -> None:
    """Eagerly, where `x`, `t` and `params` are concrete (also inside a caller's
    `jax.jit` that closes over them): a `ValueError` naming the first `domain`
    condition of `mode` that `x` fails. Traced values are checked in the program
    (status `infeasible_initial_state`)."""
    if not isinstance(mode, int):
        return
    mode_ = system.modes[mode]
    for condition, function in mode_.domain.items():
        value = concrete_value(function, t, x, params)
        if value is None:
            return
        value = value.astype(float)
        if not np.all(value > 0):
            raise ValueError(
                f"`{name}` lies outside mode {mode_.name!r}: it needs {condition} "
                f"(the condition reads {float(np.min(value)):.3g}, not > 0)."
            )


@compiled("the simulation", label=lambda system, *args: system_label(system))
def _simulate(
    system, x0, params, mode0, t0, settings, adjoint, n_events, n_save, phases
):
    solution, _, _ = run_events(
        system,
        x0,
        params,
        settings,
        adjoint,
        mode0=mode0,
        t0=t0,
        n_events=n_events,
        n_save=n_save,
        phase_observables=phases,
    )
    return solution


def simulate(
    system: HybridSystem,
    x0: Float[Array, " n"],
    params: Params,
    *,
    n_events: int,
    settings: Settings | None = None,
    mode0: ModeIndex | str = 0,
    t0: float | Float[Array, ""] = 0.0,
    n_save: int = 0,
    phase_observables: bool = True,
    throw: bool = False,
) -> HybridSolution:
    r"""Simulate a hybrid system through `n_events` transitions.

    Each phase integrates $\dot x = f_{m}(t, x, p)$ of the current mode $m$ with
    diffrax until the earliest crossing among the armed guards of the transitions
    leaving $m$; the crossing time is root-found (not stepped over), the reset
    $x^+ = g(t, x^-, p)$ is applied and the target mode starts. The run succeeds
    when `n_events` events occur before `settings.t_max`.

    It never reports a degenerate run as successful; each has its own status in
    [`hybrax.RESULTS`][]: a start outside the initial mode
    (`infeasible_initial_state`, `constraint_violated`), a phase that would end
    the instant it starts (`mode_not_viable`: events piling up at one instant), an
    accumulation of events (`zeno`, with `zeno_time`), a tangential crossing
    (`grazing_event`), a horizon before the start (`invalid_time_span`), besides
    `event_not_reached`, `max_steps_reached` and non-finite values. Guard dips
    inside one integrator step are found (see [`hybrax.Settings`][]).

    Works under `jax.jit`, `jax.vmap` and autodiff. For `jax.jacfwd`/`jax.jvp` use
    `Settings(adjoint=diffrax.ForwardMode())`; the default
    `diffrax.RecursiveCheckpointAdjoint()` serves reverse mode (`jax.grad`). Event
    times are differentiated by the implicit function theorem, so derivatives
    include the saltation terms (Leine 2000; Hiskens & Pai 2000).

    **Arguments:**

    - `system`: a [`hybrax.HybridSystem`][].
    - `x0`: the initial state, shape `(system.n_states,)`.
    - `params`: the parameter PyTree passed to every vector field, guard and reset.
    - `n_events`: how many transitions to run (static: it fixes output shapes).
    - `settings`: a [`hybrax.Settings`][] (solver, tolerances, `t_max`, ...).
    - `mode0`: the initial mode (index or name).
    - `t0`: the initial time.
    - `n_save`: samples per phase kept for plotting (0 keeps none).
    - `phase_observables`: evaluate the modes' phase observables (e.g. apex
      heights, `Mode(observables=...)`); `False` saves their cost (they need each
      phase's dense output). Event observables are always recorded.
    - `throw`: raise an error carrying the status message when the run fails
      (under `jax.vmap`: when any element fails) instead of returning the status.

    **Returns:** a [`hybrax.HybridSolution`][].

    **Raises:** `ValueError` for a state of the wrong shape or a complex one, a
    concrete state
    outside its mode's `domain`, or bad static arguments;
    with `throw=True`, an `equinox.EquinoxRuntimeError` carrying the status message.
    """
    options = dict(n_events=n_events, settings=settings, mode0=mode0, t0=t0)
    options.update(n_save=n_save, phase_observables=phase_observables)
    inputs = _simulation_inputs(system, x0, params, **options)
    solution = _simulate(*inputs)
    # Where a concrete start lies outside its mode, an error names the condition:
    # checked on the host after a failed eager run (a successful one pays
    # nothing), and at trace time inside a caller's transformation that closes
    # over the start (`check_domain` skips traced values).
    # (Any traced input makes every output of the program a tracer.)
    traced = not is_concrete(solution.t_final)
    if traced or any_failed(solution.result):
        check_domain(system, inputs[3], t0, inputs[1], inputs[2])
    if throw:
        solution = raise_if_failed(solution, solution.result)
    return solution


def _simulation_inputs(
    system,
    x0,
    params,
    *,
    n_events,
    settings=None,
    mode0=0,
    t0=0.0,
    n_save=0,
    phase_observables=True,
) -> tuple:
    """The checked arguments of [`simulate`][] as the compiled program's inputs."""
    settings = resolve_settings(settings)
    x0 = check_state(system, x0)
    if isinstance(n_events, bool) or int(n_events) < 1:
        raise ValueError(f"`n_events` must be a positive integer; got {n_events}.")
    if int(n_save) < 0:
        raise ValueError(f"`n_save` must be non-negative; got {n_save}.")
    if is_concrete(t0) and is_concrete(settings.t_max):
        if not float(settings.t_max) > float(t0):
            raise ValueError(
                f"`settings.t_max` must exceed `t0`; got t0={float(t0)}, "
                f"t_max={float(settings.t_max)}."
            )
    mode0 = mode_index(system, mode0) if isinstance(mode0, str | int) else mode0
    if params is None:
        raise ValueError("`params` must be the model's parameters; got None.")
    params = canonical_params(params)
    adjoint = simulation_adjoint(settings)
    dtype = float_dtype()
    return (
        system,
        x0,
        params,
        mode0,
        _start_time(t0, dtype),
        settings,
        adjoint,
        int(n_events),
        int(n_save),
        bool(phase_observables),
    )


def _start_time(t0, dtype):
    """`t0` as an array of `dtype`; a Python number as its kept device copy
    (most calls pass the same start, and a NumPy input is copied on every
    call)."""
    if type(t0) in (float, int):
        value = float(t0)
        return device_constant(
            ("simulation start", value, dtype.str), lambda: np.asarray(value, dtype)
        )
    return real_array(t0, "t0").astype(dtype)


def compile_simulation(
    system: HybridSystem,
    x0,
    params: Params,
    *,
    n_events: int,
    settings: Settings | None = None,
    mode0: ModeIndex | str = 0,
    t0=0.0,
    n_save: int = 0,
    phase_observables: bool = True,
) -> None:
    """Compile [`simulate`][]'s program for these arguments without running it
    (the command line compiles the orbit's dense simulation while the orbit
    search compiles). Only the values' shapes matter."""
    options = dict(n_events=n_events, settings=settings, mode0=mode0, t0=t0)
    options.update(n_save=n_save, phase_observables=phase_observables)
    _simulate.compile(*_simulation_inputs(system, x0, params, **options))


def raise_if_failed(tree, result: RESULTS):
    """`tree` unchanged, with a runtime error carrying the status message attached
    wherever `result` is not `successful` (under `vmap`: any element). A concrete
    status raises `equinox.EquinoxRuntimeError` here, whatever `EQX_ON_ERROR`
    says (the caller asked for it with `throw=True`); a traced one through
    equinox's runtime check, which `EQX_ON_ERROR` governs."""
    if all(is_concrete(leaf) for leaf in jtu.tree_leaves(result)):
        failed = [
            message
            for message, name in zip(status_message(result), status_name(result))
            if name != "successful"
        ]
        if failed:
            raise eqx.EquinoxRuntimeError(failed[0])
        return tree
    leaves, treedef = jtu.tree_flatten(tree)
    index = next(
        i
        for i, leaf in enumerate(leaves)
        if eqx.is_array(leaf) and jnp.issubdtype(leaf.dtype, jnp.inexact)
    )
    leaves[index] = result.error_if(leaves[index], result != RESULTS.successful)
    return jtu.tree_unflatten(treedef, leaves)
