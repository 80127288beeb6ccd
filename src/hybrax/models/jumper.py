r"""A planar monopodial jumper: calf, thigh and torso on a point foot, knee and hip
torques, and perfectly plastic or perfectly elastic ground contact (Reddy &
Munnangi, "Single-legged jumping action simulation without disrupting the
structure", IJARST, after Koch & Leyendecker 2011, "Structure preserving simulation
of compass gait and monopedal jumping", Multibody Dynamics 2011, Brussels).

**Coordinates.** Descriptor coordinates $q = (x, y, \varphi_c, \varphi_t,
\varphi_b)$: the foot (the calf's distal end; $x$ forward, $y$ up) and the absolute
angles of calf, thigh and torso from the vertical, each segment pointing from its
distal joint along $e(\varphi) = (\sin\varphi, \cos\varphi)$: knee $=$ foot
$+\,l_c e(\varphi_c)$, hip $=$ knee $+\,l_t e(\varphi_t)$, and the centres of mass
$c_c$, $c_t$, $c_b$ from foot, knee and hip along their segments. State
$x = [q, \dot q]$ (10 entries). The horizontal coordinate is measured from the
last contact point: every touchdown resets it to 0 and records the distance
travelled as the event observable `stride` (the dynamics do not depend on it, and
the stance constraint $x = y = 0$ then holds at every stance).

**Dynamics.** $T = \tfrac12\sum_i (m_i|\dot r_i|^2 + I_i\dot\varphi_i^2)$,
$V = g\sum_i m_i y_i$, and the joint torques as generalized forces from the
virtual work $\delta W = \tau_k\,\delta(\varphi_t - \varphi_c) +
\tau_h\,\delta(\varphi_t - \varphi_b)$, $Q = (0, 0, -\tau_k, \tau_k + \tau_h,
-\tau_h)$ (positive torques extend a knee bent forward and a hip flexed forward).
Each torque is a cubic Bézier curve over the push time $t_p$,
$\tau(t) = \sum_{k=0}^{3} a_k\binom{3}{k}s^k(1-s)^{3-k}$ with $s = t/t_p$, for
$0 \le t \le t_p$, and 0 afterwards; the coefficients are parameters, zero by
default (a passive jumper). The equations of motion are the Euler-Lagrange
equations of $T$, $V$, $Q$ by autodiff ([`hybrax.models.jumper.JumperMechanics`][],
equal to [`hybrax.LagrangianModel`][] of the same functions); each mode solves the
KKT system of its active constraints.

- **Flight** (mode 0): no constraint. Phase observable `com_apex`: the highest
  point of the centre of mass.
- **Stance** (mode 1): the foot held, constraint group `"ground"`,
  $\gamma = (x, y) = 0$ (no slip; friction is not bounded). The multipliers follow
  [`hybrax.AbstractLagrangianModel`][]: the ground pushes up while $\lambda_y < 0$.
- **Touchdown** (`elastic = 0`, flight to stance): the foot height crosses 0
  downwards; perfectly plastic impact by projection (Reddy & Munnangi's perfectly
  plastic contact; [`hybrax.plastic_impact`][]), $\dot q^+ = P_a\dot q^-$ with
  $P_c = H^{-1}\gamma_q^T(\gamma_q H^{-1}\gamma_q^T)^{-1}\gamma_q$ and
  $P_a = I - P_c$; the energy of the constrained motion space
  $T_c = \tfrac12\dot q^T P_c^T H P_c\dot q$ is lost.
- **Lift-off** (stance to flight): the contact is released when the normal contact
  force changes sign (Reddy & Munnangi): the guard $\lambda_y/(M g)$ crosses 0 upwards.
- **Bounce** (`elastic = 1`, flight to flight): perfectly elastic contact, the
  velocity's constrained component reflected,
  $\dot q^+ = P_a\dot q^- - P_c\dot q^- = \dot q^- - 2P_c\dot q^-$: the kinetic
  energy is kept ($P_a$ and $P_c$ are $H$-orthogonal), the foot's velocity is
  reversed and it leaves the ground at once.

Both contact models live in one system; the parameter `elastic` picks one at run
time (one compiled program serves both), the other one's guard being raised out of
reach by 4 calf lengths.

!!! note

    A release is consistent only if the freed foot does not accelerate into the
    ground. With the normal multiplier at zero, the foot's free vertical
    acceleration is $(\gamma_q H^{-1}\gamma_q^T)_{yx}\lambda_x$: the sticking
    contact's horizontal force still acts until the release, and where this
    product is negative no release is consistent (Painlevé's paradox of a contact
    with unbounded friction). [`hybrax.simulate`][] then stops with
    `mode_not_viable` at the lift-off. The demonstration jump (`jump_params`,
    `crouch_state`) leaves the ground with this acceleration at +15 m/s$^2$.

**Parameters** (defaults): masses and moments of inertia about the axis normal to
the plane of motion are Reddy & Munnangi's anthropometric table (calf and thigh
after their ref. [19], torso after Kassat 1993, "Biomechanik für Nicht-Biomechaniker"):
$m_c = 3.28$, $m_t = 6.86$, $m_b = 28.2055$ kg; $I_c = 0.0504$, $I_t = 0.1188$,
$I_b = 0.1368$ kg m$^2$ (its $I_{e_2e_2}$ column: the paper's jumper moves in the
$(e_1, e_3)$ plane). The paper gives no lengths: $l_c = l_t = 0.41$ m follow from its
inertias with Winter's radii of gyration about the centre of mass, $0.302\,l$ (leg)
and $0.323\,l$ (thigh) (Winter 2009, *Biomechanics and Motor Control of Human
Movement*, table 4.1), which also puts the centres of mass at $0.567\,l$ from the
distal joint, $c_c = c_t = 0.2325$ m; the torso's centre of mass $c_b = 0.25$ m
above the hip is our choice.

**Reddy & Munnangi's straight-leg experiment** (their Fig. 3,
`default_state`): the jumper dropped from rest, the leg straight and upright,
the calf's centre of mass at 0.5 m. Upright, neither gravity nor the vertical
contact impulse has a moment about the joints, so the leg stays straight with the
joints free. With elastic contact it bounces with contacts at
$(2k+1)\sqrt{2h/g}$, $h = 0.5 - c_c$ the foot's drop: 856 in the paper's 400 s (it
counts more than 830), at constant energy. With plastic contact it loses
$T_c = M g h$, all its kinetic energy, and stands.
"""

import dataclasses
import math
import time

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._compile import announcing_progress, compiled
from .._control import bezier
from .._hybrid import (
    AbstractReset,
    ContactForceGuard,
    Extremum,
    HybridSystem,
    Transition,
    mechanical_mode,
)
from .._mechanics import (
    AbstractLagrangianModel,
    LagrangianModel,
    plastic_impact,
    point_velocity,
)
from .._params import (
    POSITIVE,
    AbstractParams,
    Bound,
    parameter_field,
    parameter_table,
)


def _torque(joint: str, k: int):
    """The field of the `k`-th Bezier coefficient of a joint's torque."""
    return parameter_field(0.0, "N m", f"{joint} torque Bezier coefficient {k}")


def _positive(default, unit, description):
    return parameter_field(default, unit, description, bound=POSITIVE)


class JumperParams(AbstractParams):
    r"""Parameters of the jumper (SI units): segment masses, inertias about each
    segment's centre of mass (normal to the plane), lengths and centres, the
    contact model, and the knee and hip torques (positive extends) as Bezier
    polynomials over the push."""

    m_calf: float = _positive(3.28, "kg", "calf mass")
    m_thigh: float = _positive(6.86, "kg", "thigh mass")
    m_torso: float = _positive(28.2055, "kg", "torso mass")
    I_calf: float = _positive(0.0504, "kg m^2", "calf inertia about its centre of mass")
    I_thigh: float = _positive(
        0.1188, "kg m^2", "thigh inertia about its centre of mass"
    )
    I_torso: float = _positive(
        0.1368, "kg m^2", "torso inertia about its centre of mass"
    )
    l_calf: float = _positive(0.41, "m", "foot to knee")
    l_thigh: float = _positive(0.41, "m", "knee to hip")
    c_calf: float = parameter_field(0.2325, "m", "foot to the calf's centre of mass")
    c_thigh: float = parameter_field(0.2325, "m", "knee to the thigh's centre of mass")
    c_torso: float = parameter_field(0.25, "m", "hip to the torso's centre of mass")
    g: float = _positive(9.81, "m/s^2", "gravitational acceleration")
    elastic: float = parameter_field(
        0.0,
        "1",
        "contact model: 0 perfectly plastic, 1 perfectly elastic",
        bound=Bound(
            lambda v: (v == 0) | (v == 1), "0 (plastic contact) or 1 (elastic contact)"
        ),
    )
    t_push: float = _positive(0.3, "s", "duration of the torque profile")
    knee_0: float = _torque("knee", 0)
    knee_1: float = _torque("knee", 1)
    knee_2: float = _torque("knee", 2)
    knee_3: float = _torque("knee", 3)
    hip_0: float = _torque("hip", 0)
    hip_1: float = _torque("hip", 1)
    hip_2: float = _torque("hip", 2)
    hip_3: float = _torque("hip", 3)


# ---------------------------------------------------------------------------
# Geometry, energies, forces (the inputs of a Lagrangian model)
# ---------------------------------------------------------------------------


def _axis(phi):
    return jnp.stack([jnp.sin(phi), jnp.cos(phi)])


def joints(q, params):
    """Positions of the foot, knee and hip, each shape `(2,)`."""
    foot = q[:2]
    knee = foot + params.l_calf * _axis(q[2])
    hip = knee + params.l_thigh * _axis(q[3])
    return foot, knee, hip


def centres_of_mass(q, params):
    """Positions of the calf's, thigh's and torso's centres of mass."""
    foot, knee, hip = joints(q, params)
    return (
        foot + params.c_calf * _axis(q[2]),
        knee + params.c_thigh * _axis(q[3]),
        hip + params.c_torso * _axis(q[4]),
    )


def total_mass(params):
    """$M = m_c + m_t + m_b$."""
    return params.m_calf + params.m_thigh + params.m_torso


def centre_of_mass(q, params):
    r"""The jumper's centre of mass $\sum_i m_i r_i / M$."""
    masses = (params.m_calf, params.m_thigh, params.m_torso)
    points = centres_of_mass(q, params)
    return sum(m * r for m, r in zip(masses, points)) / total_mass(params)


def kinetic(q, qd, params):
    r"""$T = \tfrac12\sum_i (m_i|\dot r_i|^2 + I_i\dot\varphi_i^2)$."""
    velocities = point_velocity(centres_of_mass, q, qd, params)
    masses = (params.m_calf, params.m_thigh, params.m_torso)
    inertias = (params.I_calf, params.I_thigh, params.I_torso)
    translation = sum(m * v @ v for m, v in zip(masses, velocities))
    rotation = sum(i * w**2 for i, w in zip(inertias, qd[2:]))
    return 0.5 * (translation + rotation)


def potential(q, params):
    r"""$V = g\sum_i m_i y_i$."""
    masses = (params.m_calf, params.m_thigh, params.m_torso)
    points = centres_of_mass(q, params)
    return params.g * sum(m * r[1] for m, r in zip(masses, points))


def joint_torques(t, params):
    r"""The knee and hip torques $(\tau_k, \tau_h)$ at time $t$: cubic Bézier curves
    over $[0, t_p]$, zero afterwards."""
    s = jnp.clip(t / params.t_push, 0.0, 1.0)
    on = (t >= 0) & (t <= params.t_push)
    knee = bezier((params.knee_0, params.knee_1, params.knee_2, params.knee_3), s)
    hip = bezier((params.hip_0, params.hip_1, params.hip_2, params.hip_3), s)
    return jnp.where(on, knee, 0.0), jnp.where(on, hip, 0.0)


def generalized_forces(t, q, qd, params):
    r"""$Q = (0, 0, -\tau_k, \tau_k + \tau_h, -\tau_h)$."""
    del qd
    knee, hip = joint_torques(t, params)
    zero = jnp.zeros((), q.dtype)
    return jnp.stack([zero, zero, -knee, knee + hip, -hip]).astype(q.dtype)


def contact_constraints(q, params):
    r"""The constraint group `"ground"`: the foot held at the contact point,
    $\gamma = (x, y)$."""
    del params
    return {"ground": q[:2]}


def lagrangian_model():
    r"""The jumper as a [`hybrax.LagrangianModel`][] of
    [`hybrax.models.jumper.kinetic`][], [`hybrax.models.jumper.potential`][],
    [`hybrax.models.jumper.generalized_forces`][] and
    [`hybrax.models.jumper.contact_constraints`][]: the same equations as
    [`hybrax.models.jumper.JumperMechanics`][] (which `jumper` uses by default),
    derived through $H = \partial^2 T/\partial\dot q^2$."""
    return LagrangianModel(kinetic, potential, generalized_forces, contact_constraints)


def _mass_points(q, params):
    r"""The centres of mass and the segment angles, $p(q) \in \mathbb{R}^9$, with
    $T = \tfrac12\dot p^T W\dot p$."""
    calf, thigh, torso = centres_of_mass(q, params)
    return jnp.concatenate([calf, thigh, torso, q[2:]])


def _point_weights(params):
    r"""The diagonal of $W$: each mass twice (for $x$ and $y$), then the inertias."""
    m_c, m_t, m_b = params.m_calf, params.m_thigh, params.m_torso
    return jnp.stack(
        [m_c, m_c, m_t, m_t, m_b, m_b, params.I_calf, params.I_thigh, params.I_torso]
    )


class JumperMechanics(AbstractLagrangianModel):
    r"""The jumper's equations of motion from its mass points.

    With $p(q)$ the centres of mass and the segment angles, $J = \partial p/\partial
    q$ and $T = \tfrac12\dot q^T J^T W J\dot q$ ($W$ the masses and inertias), the
    Euler-Lagrange equations of $T$, $V$ and $Q$ are
    $$H = J^T W J, \qquad C = J^T W\,\dot J\dot q + \frac{\partial V}{\partial q}
    - Q,$$
    with $\dot J\dot q$ the second derivative of $p$ along $\dot q$ (two nested
    JVPs). They are those of [`hybrax.models.jumper.lagrangian_model`][], with one
    order of autodiff less: the compiled simulation is about half the size.
    Constraint group: `"ground"` ([`hybrax.models.jumper.contact_constraints`][]).
    """

    def mass_matrix(self, q, params):
        J = jax.jacfwd(_mass_points)(q, params)
        return J.T @ (_point_weights(params)[:, None] * J)

    def forces(self, q, qd, params, t=0.0):
        J = jax.jacfwd(_mass_points)(q, params)

        def velocity(s):
            return jax.jvp(lambda r: _mass_points(r, params), (s,), (qd,))[1]

        convective = jax.jvp(velocity, (q,), (qd,))[1]
        dV_dq = jax.grad(potential)(q, params)
        momentum_rate = J.T @ (_point_weights(params) * convective)
        return momentum_rate + dV_dq - generalized_forces(t, q, qd, params)

    def constraints(self, q, params):
        return contact_constraints(q, params)


_GROUND = ("ground",)


def _weight(params):
    """$M g$: the lift-off guard is the vertical ground force over the weight."""
    return total_mass(params) * params.g


# The guard of the contact model that `elastic` does not select is raised by this
# many calf lengths: out of reach, since the selected one fires at the ground.
_OUT_OF_REACH = 4.0


def _touchdown_guard(t, x, params):
    del t
    return x[1] / params.l_calf + _OUT_OF_REACH * params.elastic


def _bounce_guard(t, x, params):
    del t
    return x[1] / params.l_calf + _OUT_OF_REACH * (1 - params.elastic)


class ContactImpact(AbstractReset):
    r"""The foot's impact, $\dot q^+ = P_a\dot q^- - e\,P_c\dot q^-$ with
    restitution $e = 0$ (perfectly plastic: [`hybrax.plastic_impact`][]) or
    $e = 1$ (perfectly elastic), and $x^+ = 0$ (the new contact point).

    Observables: $T_c$, the kinetic energy lost, and $T_a$, the kinetic energy
    after the impact, as for every impact: with the split of the pre-impact
    kinetic energy $T^- = T_a^- + T_c^-$ between the admissible and the
    constrained motion spaces (eqs. (28)-(29) of Zana et al. 2018, which are $T_a$
    and $T_c$ of a plastic impact), $T_c = (1 - e^2)T_c^-$ and
    $T_a = T_a^- + e^2T_c^-$ (the reflected component keeps its energy; the spaces
    are $H$-orthogonal), so an elastic bounce loses $T_c = 0$ and keeps
    $T_a = T^-$. Also `energy_lost` (equal to $T_c$), the contact impulse
    $(1 + e)\bar\lambda$ (with $H(\dot q^+ - \dot q^-) = \gamma_q^T\bar\lambda$)
    and `stride`, the foot's horizontal distance from the previous contact point.
    """

    model: AbstractLagrangianModel
    restitution: float = eqx.field(static=True)

    def impact(self, x, params):
        return plastic_impact(self.model, _GROUND, x[:5], x[5:], params)

    def __call__(self, t, x, params):
        del t
        qd_plus = self.impact(x, params).qd_plus
        qd_c = x[5:] - qd_plus
        q_plus = x[:5].at[0].set(0.0)
        return jnp.concatenate([q_plus, qd_plus - self.restitution * qd_c])

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        result = self.impact(x_minus, params)
        e = self.restitution
        # The constrained component's energy T_c^- is lost but for e^2 of it,
        # which the reflected component keeps.
        lost = (1 - e**2) * result.T_c
        return {
            "T_c": lost,
            "T_a": result.T_a + e**2 * result.T_c,
            "energy_lost": lost,
            "impulse": (1 + e) * result.impulse,
            "stride": x_minus[0],
        }


def _com_height(t, x, params):
    del t
    return centre_of_mass(x[:5], params)[1]


def jumper(
    model: AbstractLagrangianModel | None = None,
) -> tuple[HybridSystem, JumperParams]:
    r"""The jumper: modes `"flight"` (0) and `"stance"` (1), transitions
    `"touchdown"` (plastic, flight to stance), `"liftoff"` (stance to flight) and
    `"bounce"` (elastic, flight to flight); the parameter `elastic` selects the
    contact model at run time. State $[x, y, \varphi_c, \varphi_t, \varphi_b,
    \dot x, \dot y, \dot\varphi_c, \dot\varphi_t, \dot\varphi_b]$.

    **Arguments:**

    - `model`: the mechanics, default [`hybrax.models.jumper.JumperMechanics`][]
      (e.g. [`hybrax.models.jumper.lagrangian_model`][] instead: the same
      equations).

    **Returns:** `(system, JumperParams())`.
    """
    model = JumperMechanics() if model is None else model
    flight = mechanical_mode(
        model, (), "flight", observables={"com_apex": Extremum(_com_height)}
    )
    stance = mechanical_mode(model, _GROUND, "stance")
    transitions = (
        Transition(
            "flight",
            "stance",
            _touchdown_guard,
            False,
            ContactImpact(model, 0.0),
            "touchdown",
        ),
        # lambda_y / (M g): negative while the ground pushes.
        Transition(
            "stance",
            "flight",
            ContactForceGuard(model, _GROUND, 1, _weight),
            True,
            name="liftoff",
        ),
        Transition(
            "flight",
            "flight",
            _bounce_guard,
            False,
            ContactImpact(model, 1.0),
            "bounce",
        ),
    )
    return HybridSystem((flight, stance), transitions, n_states=10), JumperParams()


def default_state(params: JumperParams | None = None, com_height: float = 0.5):
    r"""The model's default start (of `hybrax simulate`): Reddy & Munnangi's
    straight-leg drop (their Fig. 3), the leg straight and upright, at rest, the
    calf's centre of mass at `com_height` (0.5 m)."""
    params = JumperParams() if params is None else params
    y = com_height - params.c_calf
    return jnp.array([0.0, y, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])


#: The demonstration jump's torque profile (see `jump_params`).
JUMP_PROFILE = {
    "t_push": 0.15,
    "knee_0": 0.0,
    "knee_1": 740.0,
    "knee_2": 130.0,
    "knee_3": -115.0,
    "hip_0": 0.0,
    "hip_1": 30.0,
    "hip_2": -18.0,
    "hip_3": -37.0,
}
#: The crouch the demonstration jump starts from: $(\varphi_c, \varphi_t,
#: \varphi_b)$ [rad].
CROUCH = (0.22, -1.18, -0.38)


def jump_params(**values) -> JumperParams:
    r"""Parameters of a demonstration jump, backwards (plastic contact):
    `JUMP_PROFILE` (a 0.15 s push of the knee peaking near 350 N m, and a small
    hip torque) over the defaults, with `values` on top. From `crouch_state` (a
    deep crouch, the centre of mass 0.69 m high and 0.30 m behind the foot) the
    jumper leaves the ground after 0.119 s, its centre of mass at 0.790 m moving at
    (-1.52, 1.68) m/s; it rises to 0.934 m and lands 0.38 s later, 1.32 m behind
    the foot's start, losing $T_c = 36.5$ J of its 131 J of kinetic energy."""
    return JumperParams(**{**JUMP_PROFILE, **values})


def crouch_state(params: JumperParams | None = None):
    r"""The demonstration jump's start: the foot on the ground at the origin, the
    segments at `CROUCH`, at rest (a stance state)."""
    del params
    return jnp.array([0.0, 0.0, *CROUCH, 0.0, 0.0, 0.0, 0.0, 0.0])


#: The Bezier coefficients that [`hybrax.models.jumper.best_jump`][] shapes (the
#: first ones stay 0: the torques start from rest).
JUMP_COEFFICIENTS = ("knee_1", "knee_2", "knee_3", "hip_1", "hip_2", "hip_3")


def _first_flight_apex(params, state, settings):
    """The centre of mass's apex in the flight after the first lift-off from
    `state` (stance); NaN unless the jumper lifts off and lands."""
    from .._simulate import simulate

    system, _ = jumper()
    solution = simulate(system, state, params, n_events=2, settings=settings, mode0=1)
    liftoff = system.transition_index("liftoff")
    touchdown = system.transition_index("touchdown")
    ok = solution.succeeded & (solution.transitions[0] == liftoff)
    ok = ok & (solution.transitions[1] == touchdown)
    return jnp.where(ok, solution.phase_observables["com_apex"][1], jnp.nan)


class _JumpProblem(eqx.Module):
    """$-$apex as a function of the unbounded coefficients $w$, with the
    coefficients $a = \tau_{max}\tanh w$."""

    params: JumperParams
    state: jax.Array
    torque_limit: jax.Array
    settings: object

    def with_values(self, w):
        values = self.torque_limit * jnp.tanh(w)
        return eqx.tree_at(
            lambda p: [getattr(p, name) for name in JUMP_COEFFICIENTS],
            self.params,
            list(values),
        )

    def evaluate(self, w, args):
        del args
        apex = _first_flight_apex(self.with_values(w), self.state, self.settings)
        return -apex, jax.lax.stop_gradient(apex)


@dataclasses.dataclass(frozen=True)
class BestJump:
    """The result of [`hybrax.models.jumper.best_jump`][].

    - `params`: the jumper's parameters with the best torque profile;
      `coefficients`: its Bezier coefficients, by name.
    - `apex`: the centre of mass's highest point after lift-off [m];
      `start_apex`: the same for the starting profile.
    - `history`: the apex at every step (NaN where the jumper did not lift off
      and land).
    - `result`: the minimiser's status name; `n_steps`: its steps.
    - `wall_time`, `compile_time` [s].
    """

    params: JumperParams
    coefficients: dict
    apex: float
    start_apex: float
    history: list
    result: str
    n_steps: int
    wall_time: float
    compile_time: float


def best_jump(
    params: JumperParams | None = None,
    state=None,
    *,
    torque_limit: float = 800.0,
    max_steps: int = 40,
    tol: float = 1e-9,
    progress: bool = False,
) -> BestJump:
    r"""The knee and hip torque profiles that lift the jumper's centre of mass
    highest: $\max_a\ y_{apex}(a)$ over the Bezier coefficients
    `JUMP_COEFFICIENTS` (the first of
    each torque stays 0), from a stance start, with plastic contact released
    where the ground force changes sign (the `"liftoff"` guard) and the apex of
    the flight that follows (Reddy & Munnangi's optimal jump, by gradient).

    **Torque limits.** Each coefficient is $a_j = \tau_{max}\tanh w_j$ and the
    minimiser moves the unbounded $w$: a cubic Bezier curve lies in the convex hull
    of its coefficients, so $|\tau(t)| < \tau_{max}$ throughout the push.

    **Gradient.** $\partial y_{apex}/\partial w$ by forward-mode autodiff (six
    tangents) through the stance phase, the lift-off event (its time by the
    implicit function theorem) and the flight's apex (an interior maximum, whose
    derivative is the height's at fixed time); `optimistix.BFGS` steps on it.

    **Arguments:**

    - `params`: the starting parameters (default
      [`hybrax.models.jumper.jump_params`][], the demonstration jump: apex
      0.934 m); the coefficients must lie inside the limit.
    - `state`: the stance start (default [`hybrax.models.jumper.crouch_state`][]).
    - `torque_limit`: $\tau_{max}$ [N m] (default 800).
    - `max_steps`: the most BFGS steps; `tol`: its rtol and atol.
    - `progress`: print the apex at every step.

    **Returns:** a [`hybrax.models.jumper.BestJump`][].

    **Raises:** `ValueError` for a start outside the limit or one that does not
    jump.
    """
    import optimistix as optx

    from .._misc import canonical_params
    from .._settings import Settings
    from .._tune import (
        Evaluated,
        evaluated_structs,
        evaluation_at,
        minimiser_init,
        minimiser_step,
        minimiser_terminate,
    )

    params = canonical_params(jump_params() if params is None else params)
    state = jnp.asarray(crouch_state(params) if state is None else state, float)
    if not (math.isfinite(torque_limit) and torque_limit > 0):
        raise ValueError(f"`torque_limit` must be positive; got {torque_limit}.")
    if isinstance(max_steps, bool) or int(max_steps) < 1:
        raise ValueError(f"`max_steps` must be a positive integer; got {max_steps}.")
    start = np.array([float(getattr(params, name)) for name in JUMP_COEFFICIENTS])
    if not np.all(np.abs(start) < torque_limit):
        raise ValueError(
            f"`params`: the coefficients {dict(zip(JUMP_COEFFICIENTS, start))} must "
            f"lie inside the torque limit {torque_limit}."
        )
    settings = Settings(rtol=1e-10, atol=1e-10, t_max=2.0, adjoint=dfx.ForwardMode())
    problem = _JumpProblem(params, state, jnp.asarray(float(torque_limit)), settings)
    solver = optx.BFGS(rtol=tol, atol=tol)
    w = jnp.asarray(np.arctanh(start / torque_limit))

    def evaluate(w_):
        return _jump_evaluated(problem, w_)

    # BFGS steps on the one program's evaluations (see `hybrax._tune`): the
    # jump's simulation compiles once, for the start, the steps and the end.
    step_fn, tags = Evaluated(), frozenset()
    with announcing_progress(progress):
        began = time.perf_counter()
        evaluation = evaluation_at(evaluate, w)
        start_apex = float(evaluation[3])
        if not math.isfinite(start_apex):
            raise ValueError(
                "the starting profile does not lift the jumper off and land."
            )
        f_struct, aux_struct = evaluated_structs(evaluation)
        state_ = minimiser_init(
            solver, step_fn, w, evaluation, f_struct, aux_struct, tags
        )
        history, run_time, result = [], 0.0, "max_steps_reached"
        best_w, best = w, start_apex
        for step in range(int(max_steps)):
            t0 = time.perf_counter()
            evaluation = evaluation_at(evaluate, state_.y_eval, evaluation)
            w_next, state_, apex = minimiser_step(
                solver, step_fn, w, evaluation, state_, tags
            )
            done, code = minimiser_terminate(
                solver, step_fn, w_next, evaluation, state_, tags
            )
            apex = float(apex)  # the apex at the step's evaluation point
            if step:
                run_time += time.perf_counter() - t0
            history.append(apex)
            if progress:
                print(f"  step {step:3d}  apex {apex:.9f} m", flush=True)
            w = w_next
            if bool(done):
                result = "successful" if code == optx.RESULTS.successful else str(code)
                break
        final_apex = float(evaluation_at(evaluate, w, evaluation)[3])
        if math.isfinite(final_apex) and final_apex >= best:
            best_w, best = w, final_apex
        final = problem.with_values(best_w)
        wall = time.perf_counter() - began
    return BestJump(
        params=final,
        coefficients={name: float(getattr(final, name)) for name in JUMP_COEFFICIENTS},
        apex=best,
        start_apex=start_apex,
        history=history,
        result=result,
        n_steps=len(history),
        wall_time=wall,
        compile_time=wall - run_time,
    )


@compiled("the jump's apex and its gradient")
def _jump_evaluated(problem, w):
    """`((-apex, apex), gradient)` at the coefficients `w` (forward mode: the
    jump's simulation is a forward-mode diffrax solve)."""

    def value(w_):
        f, apex = problem.evaluate(w_, None)
        return f, (f, apex)

    gradient, (f, apex) = jax.jacfwd(value, has_aux=True)(w)
    return (f, apex), gradient


def energies(x, params):
    r"""Kinetic and potential energy of states `x` (batched on leading axes)."""

    def one(x_):
        return kinetic(x_[:5], x_[5:], params), potential(x_[:5], params)

    flat = jnp.reshape(jnp.asarray(x), (-1, 10))
    T, V = jax.vmap(one)(flat)
    shape = jnp.shape(x)[:-1]
    return T.reshape(shape), V.reshape(shape)


#: Parameters with their units and meaning.
PARAMETERS = parameter_table(JumperParams)
