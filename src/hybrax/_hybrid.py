r"""The data model of a hybrid system: modes, transitions, and their assembly.

A hybrid system (Johnson, Burden & Koditschek 2016; Leine 2000) is a finite set of
modes, each with a smooth vector field $\dot x = f_i(t, x, p)$, and transitions
$i \to j$, each with a guard $h(t, x, p)$ whose zero crossing (in a given direction)
fires it and a reset $x^+ = g(t, x^-, p)$ applied at the crossing.
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import Params
from ._mechanics import (
    AbstractLagrangianModel,
    constrained_accelerations,
    plastic_impact,
)


class Mode(eqx.Module):
    r"""One continuous phase: $\dot x = f(t, x, p)$.

    **Arguments:**

    - `vector_field`: `f(t, x, params) -> xdot`, a pure JAX function.
    - `name`: a label used in tables and plots.
    """

    vector_field: Callable[[Any, Array, Params], Array]
    name: str = eqx.field(static=True)

    def __check_init__(self):
        if not callable(self.vector_field):
            raise ValueError("`vector_field` must be callable as f(t, x, params).")


class MechanicalVectorField(eqx.Module):
    r"""The vector field $\dot x = [\dot q, \ddot q]$ of a constrained model.

    $\ddot q$ comes from the KKT system (Zana et al. 2018 eq. 18) with the constraint
    groups `active`. The state is $x = [q, \dot q]$.
    """

    model: AbstractLagrangianModel
    active: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, t, x, params):
        del t
        n = x.shape[0] // 2
        q, qd = x[:n], x[n:]
        qdd, _ = constrained_accelerations(self.model, self.active, q, qd, params)
        return jnp.concatenate([qd, qdd])


def mechanical_mode(
    model: AbstractLagrangianModel, active: tuple[str, ...], name: str
) -> Mode:
    r"""A [`hybrax.Mode`][] whose vector field is the constrained dynamics of `model`
    with the constraint groups `active` (state $x = [q, \dot q]$)."""
    return Mode(MechanicalVectorField(model, tuple(active)), name)


class ContactForceGuard(eqx.Module):
    r"""A force-level guard: one Lagrange multiplier of a mechanical mode, scaled.

    Returns $\lambda_k / s$ where $\lambda$ solves the KKT system of `model` with the
    groups `active`, $k$ = `index` and $s$ = `scale(params)`. Scale the guard to
    $O(1)$ (divide a force by $m g$): the event root finder's tolerance also bounds
    $|h|$.
    """

    model: AbstractLagrangianModel
    active: tuple[str, ...] = eqx.field(static=True)
    index: int = eqx.field(static=True)
    scale: Callable[[Params], Any]

    def __call__(self, t, x, params):
        del t
        n = x.shape[0] // 2
        _, lam = constrained_accelerations(
            self.model, self.active, x[:n], x[n:], params
        )
        return lam[self.index] / self.scale(params)


class PlasticImpact(eqx.Module):
    r"""Reset map of a perfectly plastic impact: $x^+ = [q, P_a\dot q]$.

    See [`hybrax.plastic_impact`][] (Zana et al. 2018 eq. 26). `energy_split` returns
    $(T_c, T_a)$ of eqs. (28)-(29) at the pre-impact state.
    """

    model: AbstractLagrangianModel
    active: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, t, x, params):
        del t
        n = x.shape[0] // 2
        result = plastic_impact(self.model, self.active, x[:n], x[n:], params)
        return jnp.concatenate([x[:n], result.qd_plus])

    def energy_split(self, t, x, params):
        del t
        n = x.shape[0] // 2
        result = plastic_impact(self.model, self.active, x[:n], x[n:], params)
        return result.T_c, result.T_a


def identity_reset(t, x, params):
    """The identity reset $x^+ = x^-$ (a Filippov-type switch, e.g. lift-off)."""
    del t, params
    return x


class Transition(eqx.Module):
    r"""A transition between modes: guard, crossing direction, reset, target.

    The transition fires when the guard $h(t, x, p)$ of the current mode `source`
    crosses zero: from positive to negative if `direction` is `False` (the usual
    convention: the guard is positive inside the mode), from negative to positive if
    `True`. The state then jumps to $x^+ =$ `reset(t, x, params)` and mode `target`
    starts. When several transitions leave one mode, the earliest crossing wins.

    **Arguments:**

    - `source`, `target`: mode indices or names.
    - `guard`: `h(t, x, params) -> scalar`; scale it to $O(1)$.
    - `direction`: `False` for a downward crossing, `True` for an upward one.
      `None` (both) is refused: a phase that starts on its own guard surface would
      fire at once.
    - `reset`: `g(t, x, params) -> x`; default identity. A reset that has a method
      `energy_split(t, x, params) -> (T_c, T_a)` (such as [`hybrax.PlasticImpact`][])
      reports the energy split at each impact.
    - `name`: a label for tables (for example `"touchdown"`).
    """

    source: int | str = eqx.field(static=True)
    target: int | str = eqx.field(static=True)
    guard: Callable[[Any, Array, Params], Any]
    direction: bool = eqx.field(static=True)
    reset: Callable[[Any, Array, Params], Array] = identity_reset
    name: str = eqx.field(static=True, default="")

    def __check_init__(self):
        if self.direction not in (True, False):
            raise ValueError(
                "`direction` must be False (guard crosses from positive to negative) "
                f"or True (negative to positive); got {self.direction!r}."
            )
        if not callable(self.guard):
            raise ValueError("`guard` must be callable as h(t, x, params).")
        if not callable(self.reset):
            raise ValueError("`reset` must be callable as g(t, x, params).")


class HybridSystem(eqx.Module):
    r"""Modes and the transitions between them.

    Mode and transition references by name are resolved to indices at construction.
    Shapes are static: a simulation runs a bounded number of transitions.

    **Arguments:**

    - `modes`: a sequence of [`hybrax.Mode`][].
    - `transitions`: a sequence of [`hybrax.Transition`][].
    - `n_states`: the dimension of the state (all modes share it).
    """

    modes: tuple[Mode, ...]
    transitions: tuple[Transition, ...]
    n_states: int = eqx.field(static=True)
    sources: tuple[int, ...] = eqx.field(static=True)
    targets: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, modes, transitions, n_states: int):
        modes = tuple(modes)
        transitions = tuple(transitions)
        if not modes:
            raise ValueError("`modes` must hold at least one Mode.")
        names = [mode.name for mode in modes]
        if len(set(names)) != len(names):
            raise ValueError(f"`modes` must have distinct names; got {names}.")

        def resolve(ref, what):
            if isinstance(ref, str):
                if ref not in names:
                    raise ValueError(f"{what} {ref!r} is not a mode; modes are {names}")
                return names.index(ref)
            if not 0 <= int(ref) < len(modes):
                raise ValueError(f"{what} {ref} is out of range 0..{len(modes) - 1}")
            return int(ref)

        self.modes = modes
        self.transitions = transitions
        self.sources = tuple(resolve(tr.source, "`source`") for tr in transitions)
        self.targets = tuple(resolve(tr.target, "`target`") for tr in transitions)
        if int(n_states) <= 0:
            raise ValueError(f"`n_states` must be positive; got {n_states}.")
        self.n_states = int(n_states)

    def mode_index(self, mode: int | str) -> int:
        """The index of a mode given by index or name."""
        names = [m.name for m in self.modes]
        if isinstance(mode, str):
            if mode not in names:
                raise ValueError(f"`mode` {mode!r} is not a mode; modes are {names}")
            return names.index(mode)
        if not 0 <= int(mode) < len(self.modes):
            raise ValueError(f"`mode` {mode} is out of range 0..{len(self.modes) - 1}")
        return int(mode)

    def transition_index(self, transition: int | str) -> int:
        """The index of a transition given by index or name."""
        names = [tr.name for tr in self.transitions]
        if isinstance(transition, str):
            if transition not in names:
                raise ValueError(
                    f"`transition` {transition!r} is not a transition; "
                    f"transitions are {names}"
                )
            return names.index(transition)
        if not 0 <= int(transition) < len(self.transitions):
            raise ValueError(f"`transition` {transition} is out of range")
        return int(transition)

    def outgoing(self, mode: int) -> tuple[int, ...]:
        """Indices of the transitions that leave mode `mode`."""
        return tuple(k for k, s in enumerate(self.sources) if s == mode)


def signed_guard(
    transition: Transition, t, x: Float[Array, " n"], params: Params
) -> Float[Array, ""]:
    """The guard of `transition` with its sign normalised: positive inside the mode,
    crossing from positive to negative when the transition fires."""
    value = jnp.asarray(transition.guard(t, x, params))
    return -value if transition.direction else value
