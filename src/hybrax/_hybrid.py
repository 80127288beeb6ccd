r"""The data model of a hybrid system: modes, transitions, and their assembly.

A hybrid system (Johnson, Burden & Koditschek 2016; Leine 2000) is a finite set of
modes, each with a smooth vector field $\dot x = f_i(t, x, p)$, and transitions
$i \to j$, each with a guard $h(t, x, p)$ whose zero crossing (in a given direction)
fires it and a reset $x^+ = g(t, x^-, p)$ applied at the crossing.
"""

import abc
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._custom_types import Params
from ._mechanics import (
    AbstractLagrangianModel,
    constrained_accelerations,
    plastic_impact,
    stacked_constraints,
)
from ._misc import trace_once


class Extremum(eqx.Module):
    r"""A phase observable: the maximum (or minimum) of $g(t, x, p)$ over a phase.

    Declared on a [`hybrax.Mode`][] (`Mode(observables={"apex": Extremum(g)})`),
    evaluated for every phase of that mode by [`hybrax.simulate`][] and on the cycle
    of a periodic orbit. It is found on the phase's dense output: $g$ and its time
    derivative at `n_grid` times, and between each pair the cubic Hermite
    interpolant through them, maximised in closed form. The error is $O(h^4)$ in
    the spacing $h$ (for a hopper flight of 0.3 s at the default 256 points,
    about 1e-10), the value is differentiable (at an interior extremum its
    derivative is that of $g$ at fixed time: the envelope theorem).

    **Arguments:**

    - `function`: `g(t, x, params) -> scalar`.
    - `kind`: `"max"` (default) or `"min"`.
    - `n_grid`: sample times per phase (default 256).
    """

    function: Callable[[Any, Array, Params], Any]
    kind: str = eqx.field(static=True, default="max")
    n_grid: int = eqx.field(static=True, default=256)

    def __check_init__(self):
        if not callable(self.function):
            raise ValueError("`function` must be callable as g(t, x, params).")
        if self.kind not in ("max", "min"):
            raise ValueError(f"`kind` must be 'max' or 'min'; got {self.kind!r}.")
        if int(self.n_grid) < 2:
            raise ValueError(f"`n_grid` must be at least 2; got {self.n_grid}.")


class Clearance(eqx.Module):
    r"""A phase observable that must stay positive: the smallest interior local
    minimum of $g(t, x, p)$ over a phase (a swing foot's height as it passes
    the stance foot, a flight's lowest point), NaN where $g$ has none.

    Declared on a [`hybrax.Mode`][] like [`hybrax.Extremum`][]
    (`Mode(observables={"swing_clearance": Clearance(height)})`), recorded in
    `phase_observables` by [`hybrax.simulate`][] and on the cycle of a periodic
    orbit. Where it crosses zero along a branch the orbit grazes: $g$ touches
    zero tangentially inside the phase, $g = \dot g = 0$ at one instant
    (M. di Bernardo, C. J. Budd, A. R. Champneys and P. Kowalczyk 2008,
    *Piecewise-smooth Dynamical Systems: Theory and Applications*).
    [`hybrax.continue_orbits`][] locates such a point as a special point of
    kind `"grazing"`, and [`hybrax.continue_orbit_curve`][] follows it in a
    second parameter. The ends of the phase, where $g$ may sit on zero by
    construction (a foot that lifts off, a heel strike), are not interior
    minima.

    It is found like an extremum: $g$ and its rate at `n_grid` times, and on
    each interval the stationary points of the cubic Hermite interpolant with
    positive curvature, in closed form; error $O(h^4)$ in the spacing $h$, and
    differentiable (at the minimum, its derivative is that of $g$ at fixed
    time, up to an error $O(h^3)$: the grid's error moves with the
    minimum).

    **Arguments:**

    - `function`: `g(t, x, params) -> scalar`, positive where the motion clears
      the obstacle.
    - `n_grid`: sample times per phase (default 256).
    """

    function: Callable[[Any, Array, Params], Any]
    n_grid: int = eqx.field(static=True, default=256)
    kind: str = eqx.field(static=True, default="clearance", init=False)

    def __check_init__(self):
        if not callable(self.function):
            raise ValueError("`function` must be callable as g(t, x, params).")
        if isinstance(self.n_grid, bool) or int(self.n_grid) < 2:
            raise ValueError(f"`n_grid` must be at least 2; got {self.n_grid}.")


class Integral(eqx.Module):
    r"""A phase observable: the integral $\int_{t_0}^{t_1} g(t, x(t), p)\,dt$ of
    $g$ over a phase (an effort, a work, an impulse, a distance).

    Declared on a [`hybrax.Mode`][] like [`hybrax.Extremum`][]
    (`Mode(observables={"work": Integral(power)})`), evaluated for every phase of
    that mode by [`hybrax.simulate`][] and on the cycle of a periodic orbit, on
    the phase's dense output by composite Gauss-Legendre quadrature: `n_panels`
    equal panels of 4 nodes each (Davis & Rabinowitz 1984, *Methods of Numerical
    Integration*, section 2.7). The error is $O(h^8)$ in the panel width $h$ for
    a smooth $g$ (and $O(h^2)$ near a kink, e.g. of $\max(P, 0)$), on top of the
    dense output's own; the value is differentiable, the phase's end times
    included (Leibniz's rule).

    **Arguments:**

    - `function`: `g(t, x, params) -> scalar`.
    - `n_panels`: Gauss panels per phase (default 64: 256 evaluations of $g$).
    """

    function: Callable[[Any, Array, Params], Any]
    n_panels: int = eqx.field(static=True, default=64)

    def __check_init__(self):
        if not callable(self.function):
            raise ValueError("`function` must be callable as g(t, x, params).")
        if isinstance(self.n_panels, bool) or int(self.n_panels) < 1:
            raise ValueError(f"`n_panels` must be positive; got {self.n_panels}.")


class Mode(eqx.Module):
    r"""One continuous phase: $\dot x = f(t, x, p)$.

    **Arguments:**

    - `vector_field`: `f(t, x, params) -> xdot`, a pure JAX function.
    - `name`: a label used in tables and plots.
    - `constraints`: optional `c(t, x, params) -> array`, zero on the states the
      mode admits (for a stance mode: the foot on the ground, at rest). A phase
      that starts with $\max|c| >$ `Settings.constraint_tol` ends the run with
      status `constraint_violated`. [`hybrax.mechanical_mode`][] derives them from
      the model's active constraint groups.
    - `observables`: a dict of phase observables, [`hybrax.Extremum`][],
      [`hybrax.Integral`][] or [`hybrax.Clearance`][], recorded for every phase
      of this mode.
    - `domain`: a dict of named conditions `d(t, x, params) -> scalar`, each
      positive on the states the mode admits besides its guards and
      constraints (the model's geometry, e.g. `{"the upper mass above the
      foot": lambda t, x, p: x[0] - x[1]}`). A run that starts with one of them
      $\le 0$ ends with status `infeasible_initial_state`; with a concrete
      state, [`hybrax.simulate`][] raises a `ValueError` naming it first.
    """

    vector_field: Callable[[Any, Array, Params], Array]
    name: str = eqx.field(static=True)
    constraints: Callable[[Any, Array, Params], Array] | None = None
    observables: dict[str, "Extremum | Integral | Clearance"] = eqx.field(
        default_factory=dict
    )
    domain: dict[str, Callable[[Any, Array, Params], Any]] = eqx.field(
        default_factory=dict
    )

    def __check_init__(self):
        if not callable(self.vector_field):
            raise ValueError("`vector_field` must be callable as f(t, x, params).")
        if self.constraints is not None and not callable(self.constraints):
            raise ValueError("`constraints` must be callable as c(t, x, params).")
        if not isinstance(self.observables, dict) or not all(
            isinstance(v, Extremum | Integral | Clearance)
            for v in self.observables.values()
        ):
            raise ValueError(
                "`observables` must be a dict of hybrax.Extremum, hybrax.Integral "
                "or hybrax.Clearance."
            )
        if not isinstance(self.domain, dict) or not all(
            isinstance(k, str) and callable(v) for k, v in self.domain.items()
        ):
            raise ValueError(
                "`domain` must be a dict of named conditions d(t, x, params) "
                "(positive inside the mode)."
            )


class MechanicalVectorField(eqx.Module):
    r"""The vector field $\dot x = [\dot q, \ddot q]$ of a constrained model.

    $\ddot q$ comes from the KKT system (Zana et al. 2018 eq. 18) with the constraint
    groups `active`. The state is $x = [q, \dot q]$.
    """

    model: AbstractLagrangianModel
    active: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, t, x, params):
        n = x.shape[0] // 2
        q, qd = x[:n], x[n:]
        qdd, _ = constrained_accelerations(self.model, self.active, q, qd, params, t)
        return jnp.concatenate([qd, qdd])


class MechanicalConstraints(eqx.Module):
    r"""The constraints of a mechanical mode at the position and velocity level,
    $[\gamma(q);\ \gamma_q\dot q]$ for the active groups (zero on the mode's
    states)."""

    model: AbstractLagrangianModel
    active: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, t, x, params):
        del t
        n = x.shape[0] // 2
        q, qd = x[:n], x[n:]
        gamma = stacked_constraints(self.model, self.active)
        value, rate = jax.jvp(lambda s: gamma(s, params), (q,), (qd,))
        return jnp.concatenate([value, rate])


def mechanical_mode(
    model: AbstractLagrangianModel,
    active: tuple[str, ...],
    name: str,
    *,
    observables: dict[str, Extremum | Integral | Clearance] | None = None,
    domain: dict[str, Callable[[Any, Array, Params], Any]] | None = None,
) -> Mode:
    r"""A [`hybrax.Mode`][] whose vector field is the constrained dynamics of `model`
    with the constraint groups `active` (state $x = [q, \dot q]$), and whose
    constraints are those groups at the position and velocity level.

    **Arguments:**

    - `model`: the mechanical model (a [`hybrax.AbstractLagrangianModel`][]).
    - `active`: names of the constraint groups active in this mode (empty: free
      motion, no constraints).
    - `name`: the mode's label.
    - `observables`: phase observables, as for [`hybrax.Mode`][].
    - `domain`: named conditions positive on the mode's states, as for
      [`hybrax.Mode`][].

    **Returns:** a [`hybrax.Mode`][] on the state $x = [q, \dot q]$.
    """
    active = tuple(active)
    return Mode(
        MechanicalVectorField(model, active),
        name,
        constraints=MechanicalConstraints(model, active) if active else None,
        observables={} if observables is None else dict(observables),
        domain={} if domain is None else dict(domain),
    )


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
        n = x.shape[0] // 2
        _, lam = constrained_accelerations(
            self.model, self.active, x[:n], x[n:], params, t
        )
        return lam[self.index] / self.scale(params)


class AbstractReset(eqx.Module):
    r"""A reset map $x^+ = g(t, x^-, p)$ that also reports what happened at the event.

    Subclasses implement `__call__` and `observables`; a [`hybrax.Transition`][]
    with such a reset records its observables at every event unless given its own
    `observe`.
    """

    @abc.abstractmethod
    def __call__(self, t, x: Array, params: Params) -> Array:
        """The post-event state $x^+$.

        **Arguments:**

        - `t`: the event time.
        - `x`: the pre-event state $x^-$.
        - `params`: the parameter PyTree.

        **Returns:** $x^+$, of the shape of `x`.
        """

    @abc.abstractmethod
    def observables(
        self, t, x_minus: Array, x_plus: Array, params: Params
    ) -> dict[str, Array]:
        """Named quantities of the event (e.g. energy lost).

        **Arguments:**

        - `t`: the event time.
        - `x_minus`, `x_plus`: the states before and after the event.
        - `params`: the parameter PyTree.

        **Returns:** a dict of named arrays, each of a fixed shape.
        """

    def released(self) -> tuple[str, ...]:
        """The names of the observables that are release velocities: the
        normal velocity, after the event, of a contact the event releases (a
        walker's trailing foot), which must be positive for the contact to
        leave. Continuation reports where one changes sign (a special point of
        kind `"release_reversal"`). None by default."""
        return ()


class PlasticImpact(AbstractReset):
    r"""Reset map of a perfectly plastic impact: $x^+ = [q, P_a\dot q]$.

    See [`hybrax.plastic_impact`][] (Zana et al. 2018 eq. 26). Its observables are
    $T_c$ and $T_a$ of eqs. (28)-(29) at the pre-impact state, and the contact
    impulse $\bar\lambda$ (Font-Llagunes & Kövecses' sign).
    """

    model: AbstractLagrangianModel
    active: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, t, x, params):
        del t
        n = x.shape[0] // 2
        result = plastic_impact(self.model, self.active, x[:n], x[n:], params)
        return jnp.concatenate([x[:n], result.qd_plus])

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        n = x_minus.shape[0] // 2
        result = plastic_impact(
            self.model, self.active, x_minus[:n], x_minus[n:], params
        )
        return {"T_c": result.T_c, "T_a": result.T_a, "impulse": result.impulse}


class ImpactRelabel(AbstractReset):
    r"""A plastic impact on non-minimal coordinates, then a relabelling: the reset
    of a walker's heel strike (Font-Llagunes & Kövecses, "Modelling Dynamic Walking
    Bipeds as Variable Topology Mechanical Systems", poster, McGill University;
    Font-Llagunes & Kövecses 2009, "On the Use of Impulsive Bilateral Constraints to
    Characterize Topology Transitions", 2009 CCToMM M³ Symposium).

    $x^- \mapsto (q, \dot q^-) = $ `lift(x, params)`, the projection
    $\dot q^+ = P_a\dot q^-$ onto the motions the constraint groups `impact`
    admit ([`hybrax.plastic_impact`][]), then $x^+ = $ `relabel(q, qd_plus,
    params)` (for a biped: the legs swap roles and the frame moves to the landing
    foot).

    Observables: $T_c$ (lost), $T_a$ (kept), the impulse, and with `release` the
    lift-off condition of Font-Llagunes & Kövecses's poster under the name
    `release_name`: the normal velocity after the impact of the contact that is to
    be released (the trailing foot), $B_S\dot q^+$, which must be positive for it to
    leave the ground; a negative value means the impact model is not consistent
    there.

    **Arguments:**

    - `model`: the mechanics in the non-minimal coordinates.
    - `impact`: the constraint groups imposed at the impact.
    - `lift`: `(x, params) -> (q, qd)`.
    - `relabel`: `(q, qd_plus, params) -> x_plus`.
    - `release`: optional `(q, qd_plus, params) -> scalar`.
    - `release_name`: the observable's name (default `"release_velocity"`).
    """

    model: AbstractLagrangianModel
    impact: tuple[str, ...] = eqx.field(static=True)
    lift: Callable[[Array, Params], tuple[Array, Array]]
    relabel: Callable[[Array, Array, Params], Array]
    release: Callable[[Array, Array, Params], Any] | None = None
    release_name: str = eqx.field(static=True, default="release_velocity")

    def _project(self, x, params):
        q, qd = self.lift(x, params)
        return q, plastic_impact(self.model, self.impact, q, qd, params)

    def __call__(self, t, x, params):
        del t
        q, result = self._project(x, params)
        return self.relabel(q, result.qd_plus, params)

    def released(self) -> tuple[str, ...]:
        return () if self.release is None else (self.release_name,)

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        q, result = self._project(x_minus, params)
        values = {"T_c": result.T_c, "T_a": result.T_a, "impulse": result.impulse}
        if self.release is not None:
            values[self.release_name] = self.release(q, result.qd_plus, params)
        return values


def identity_reset(t, x, params):
    """The identity reset $x^+ = x^-$ (a Filippov-type switch, e.g. lift-off).

    **Arguments:**

    - `t`: the event time (unused).
    - `x`: the pre-event state.
    - `params`: the parameter PyTree (unused).

    **Returns:** `x` itself.
    """
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
    - `reset`: `g(t, x, params) -> x`; default identity.
    - `name`: a label for tables (for example `"touchdown"`).
    - `observe`: `f(t, x_minus, x_plus, params) -> dict` of named arrays recorded
      at every event of this transition (in `HybridSolution.observables`); default:
      the reset's `observables` if it is a [`hybrax.AbstractReset`][], else none.
    - `arm`: `a(t, x, params) -> scalar`: the transition is armed (its guard can
      fire) only from the first instant of a phase at which $a > 0$; before, its
      guard is ignored. For a walker's heel strike: $a$ = how far the swing foot is
      ahead of the stance foot, so that neither the reset (which leaves the new
      swing foot on the ground) nor the mid-stance scuff fires it. Arming a
      guard once it has risen by a margin: `arm = lambda t, x, p: guard(t, x, p) -
      margin` (with the guard's sign convention). Each armed transition costs one
      more diffrax solve per phase (the arming instant is root-found like an
      event).
    - `armed_outside`: what a guard already past its crossing at the instant its
      transition becomes armed means. `"error"` (the default): a missed crossing
      (e.g. a swing foot that comes ahead under the ground, a trip); the run
      stops with status `armed_beyond_guard`. `"wait"`: the transition fires at
      the guard's next crossing, after it comes back inside (for models that let
      a swing leg pass through the ground, as the simplest walker): it is armed
      once its arming condition holds and its guard is inside, and meanwhile
      the mode's other guards and the horizon `t_max` still end the phase.
    - A *sensor* transition, a self-loop (`target` = `source`) with the identity
      reset and no `arm` (for instance to record when a body passes a height),
      is armed again once its guard has come back inside by `1e-6` after it
      fired: it fires at each crossing in its direction, and its identity reset
      does not read as a mode that cannot start.
    - `terminal`: the run ends when this transition fires, with status
      `terminal_event` (never `successful`) and `cause_transition` naming it; for
      a failure of the motion itself, such as a walker's fall (its hip down at
      the ground). The event (time, state before it) is recorded; `target` is
      then unused (give the source).
    """

    source: int | str = eqx.field(static=True)
    target: int | str = eqx.field(static=True)
    guard: Callable[[Any, Array, Params], Any]
    direction: bool = eqx.field(static=True)
    reset: Callable[[Any, Array, Params], Array]
    name: str = eqx.field(static=True)
    observe: Callable[[Any, Array, Array, Params], dict] | None
    arm: Callable[[Any, Array, Params], Any] | None
    terminal: bool = eqx.field(static=True)
    armed_outside: str = eqx.field(static=True)

    def __init__(
        self,
        source: int | str,
        target: int | str,
        guard: Callable[[Any, Array, Params], Any],
        direction: bool,
        reset: Callable[[Any, Array, Params], Array] = identity_reset,
        name: str = "",
        *,
        observe: Callable[[Any, Array, Array, Params], dict] | None = None,
        arm: Callable[[Any, Array, Params], Any] | None = None,
        terminal: bool = False,
        armed_outside: str = "error",
    ):
        if armed_outside not in ("error", "wait"):
            raise ValueError(
                f"`armed_outside` must be 'error' or 'wait'; got {armed_outside!r}."
            )
        if terminal not in (True, False):
            raise ValueError(f"`terminal` must be True or False; got {terminal!r}.")
        if direction not in (True, False):
            raise ValueError(
                "`direction` must be False (guard crosses from positive to negative) "
                f"or True (negative to positive); got {direction!r}."
            )
        if not callable(guard):
            raise ValueError("`guard` must be callable as h(t, x, params).")
        if not callable(reset):
            raise ValueError("`reset` must be callable as g(t, x, params).")
        if observe is None and isinstance(reset, AbstractReset):
            observe = reset.observables
        if observe is not None and not callable(observe):
            raise ValueError("`observe` must be callable as f(t, x-, x+, params).")
        if arm is not None and not callable(arm):
            raise ValueError("`arm` must be callable as a(t, x, params).")
        self.source = source
        self.target = target
        self.guard = guard
        self.direction = bool(direction)
        self.reset = reset
        self.name = str(name)
        self.observe = observe
        self.arm = arm
        self.terminal = bool(terminal)
        self.armed_outside = armed_outside


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
    terminals: tuple[bool, ...] = eqx.field(static=True)
    strict_arming: tuple[bool, ...] = eqx.field(static=True)

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

        self.sources = tuple(resolve(tr.source, "`source`") for tr in transitions)
        self.targets = tuple(resolve(tr.target, "`target`") for tr in transitions)
        self.modes = modes
        self.transitions = tuple(
            _with_rearming(tr) if source == target else tr
            for tr, source, target in zip(transitions, self.sources, self.targets)
        )
        self.terminals = tuple(tr.terminal for tr in transitions)
        self.strict_arming = tuple(tr.armed_outside == "error" for tr in transitions)
        if int(n_states) <= 0:
            raise ValueError(f"`n_states` must be positive; got {n_states}.")
        self.n_states = int(n_states)

    def mode_index(self, mode: int | str) -> int:
        """The index of a mode given by index or name."""
        return mode_index(self, mode)

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

    def _traced_roles(self, t, x: Array, params: Params) -> dict:
        """Every function of the system, called as the library calls it, at one
        time `t` and state `x`: each mode's vector field, constraints, domain
        conditions and phase observables, each transition's guard, reset,
        event observables and arming condition, and each reset's released
        observables (their names). hybrax reaches a model's functions only
        through these, so that their traces (with their first derivatives)
        say what a program built on the system computes: the store of traced
        programs keys a model of the user's own functions by them (see
        [`hybrax.enable_compilation_cache`][]). Classes of the user's own in
        the system other than resets ([`hybrax.AbstractReset`][]) are not
        covered: such a model is not stored.

        **Returns:** a dict of the functions' values by role.
        """
        out = {}
        for i, mode in enumerate(self.modes):
            out[f"mode {i}"] = mode.vector_field(t, x, params)
            if mode.constraints is not None:
                out[f"mode {i} constraints"] = mode.constraints(t, x, params)
            for name, condition in mode.domain.items():
                out[f"mode {i} domain {name}"] = condition(t, x, params)
            for name, observable in mode.observables.items():
                out[f"mode {i} {name}"] = observable.function(t, x, params)
        for i, transition in enumerate(self.transitions):
            out[f"transition {i} guard"] = transition.guard(t, x, params)
            out[f"transition {i} reset"] = transition.reset(t, x, params)
            if transition.observe is not None:
                out[f"transition {i} observe"] = transition.observe(t, x, x, params)
            if transition.arm is not None:
                out[f"transition {i} arm"] = transition.arm(t, x, params)
        return out

    def _released_roles(self) -> tuple:
        """Each transition's released observables (`AbstractReset.released`),
        the one role of a reset that is not a traced function."""
        return tuple(
            tuple(transition.reset.released())
            if isinstance(transition.reset, AbstractReset)
            else ()
            for transition in self.transitions
        )

    @staticmethod
    def _covers_class(cls: type) -> bool:
        """Whether `_traced_roles` covers what a user's class in the system
        computes: resets ([`hybrax.AbstractReset`][]), reached through their
        call, observables and released names."""
        return issubclass(cls, AbstractReset)


# How far back inside its guard a sensor transition (a self-loop with the
# identity reset) must come before it can fire again: far above the event root
# finder's residual, far below an O(1) guard's excursions.
SENSOR_REARM_MARGIN = 1e-6


class _RearmInside(eqx.Module):
    """The arming condition of a sensor transition: its sign-normalised guard
    minus `SENSOR_REARM_MARGIN`."""

    guard: Callable[[Any, Array, Params], Any]
    direction: bool = eqx.field(static=True)

    def __call__(self, t, x, params):
        value = jnp.asarray(self.guard(t, x, params))
        return (-value if self.direction else value) - SENSOR_REARM_MARGIN


def _with_rearming(transition: Transition) -> Transition:
    """A sensor transition (a self-loop with the identity reset, no arming
    condition of its own, not terminal) leaves the state on its own guard,
    heading beyond it: armed there, it would fire again at once (or read as a
    mode that cannot start). It is armed again once its guard has come back
    inside, by `SENSOR_REARM_MARGIN`."""
    if (
        transition.reset is not identity_reset
        or transition.arm is not None
        or transition.terminal
    ):
        return transition
    return eqx.tree_at(
        lambda tr: tr.arm,
        transition,
        _RearmInside(transition.guard, transition.direction),
        is_leaf=lambda x: x is None,
    )


def signed_guard(
    transition: Transition, t, x: Float[Array, " n"], params: Params
) -> Float[Array, ""]:
    """The guard of `transition` with its sign normalised: positive inside the mode,
    crossing from positive to negative when the transition fires."""
    value = jnp.asarray(trace_once(transition.guard)(t, x, params))
    return -value if transition.direction else value


def mode_index(system: HybridSystem, mode: int | str) -> int:
    """`system.mode_index(mode)` as a function: equinox binds a Module's method
    anew at each access, which flattens the whole system (a tenth of a
    millisecond for the hopper); the routines' entry points call this instead."""
    modes = system.modes
    if type(mode) is int and 0 <= mode < len(modes):
        return mode
    names = [m.name for m in modes]
    if isinstance(mode, str):
        if mode not in names:
            raise ValueError(f"`mode` {mode!r} is not a mode; modes are {names}")
        return names.index(mode)
    if not 0 <= int(mode) < len(system.modes):
        raise ValueError(f"`mode` {mode} is out of range 0..{len(system.modes) - 1}")
    return int(mode)
