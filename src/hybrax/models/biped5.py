r"""A five-link planar biped: trunk, two thighs, two shanks, point feet (Zanchi &
Cecić 1993, "2-D biped walking system", Period. Biol. 95(1)).

**Coordinates.** Zanchi & Cecić's absolute segment angles $\theta_1, \dots,
\theta_5$ from the vertical, each positive when the segment's upper end is ahead
($+x$) of its lower end: $\theta_1$ stance shank, $\theta_2$ stance thigh,
$\theta_3$ trunk, $\theta_4$ swing thigh, $\theta_5$ swing shank. With
$u(\theta) = (\sin\theta, \cos\theta)$ and the stance foot at $r_f$ (height $z$
up), Zanchi & Cecić eqs. (1)-(5): knee $r_f + l_1u_1$, hip
$r_h = r_f + l_1u_1 + l_2u_2$, segment centres $G_1 = r_f + a_1u_1$,
$G_2 = r_f + l_1u_1 + a_2u_2$, $G_3 = r_h + a_3u_3$, $G_4 = r_h - b_4u_4$,
$G_5 = r_h - l_4u_4 - b_5u_5$ (eq. 5 as printed omits the $-l_4u_4$ term that the
appendix's $I(4,5)$ needs), swing foot $r_h - l_4u_4 - l_5u_5$. The legs are equal:
$l_1 = l_5$ (shank), $l_2 = l_4$ (thigh), $b_5 = l_1 - a_1$, $b_4 = l_2 - a_2$.

**Single support** (stance foot pinned). The Euler-Lagrange equations (Zanchi &
Cecić eq. 9) of $T = \sum_j \tfrac12(I_j\dot\theta_j^2 + M_j|\dot G_j|^2)$,
$V = g\sum_j M_j z_j$ (eqs. 6-7) and the joint torques $\Gamma$, built by
[`hybrax.LagrangianModel`][]: $I(\theta)\ddot\theta + B(\theta)\dot\theta^2 +
M_G(\theta) = \Gamma$ (Zanchi & Cecić eq. 11 with their appendix's $I$, $B$,
$M_G$; $M_G = \partial V/\partial\theta$).

**Joint torques.** A PD controller on the four joint angles, knee flexion
$\phi_k = \theta_\text{shank} - \theta_\text{thigh}$ and hip flexion
$\phi_h = \theta_3 - \theta_\text{thigh}$ of each leg:
$\tau = -k_p(\phi - \phi_\text{ref}) - k_d\dot\phi$, gains and set points per
joint kind and leg role in the parameters. A torque $\tau$ on the joint angle
$\phi = s^T\theta$ is the generalized force $Q = s\,\tau$ (virtual work), so the
torques are internal ($\sum_j Q_j = 0$); the point foot has no ankle torque (the
walker is underactuated). From the default state the default gains and set
points settle, within about ten steps, on a level-ground walk of period one step
(0.613 s, 3.1 J lost per heel strike, the swing foot clearing the ground by at
least 1.4 cm); found by simulation, not by a gait design.

**Falls.** The transition `"fall"` is terminal: when the hip comes down to half
the leg's length above the stance foot the run ends with status `terminal_event`
(a walker that falls is never reported as walking on through the ground).

**Heel strike.** The swing foot's height crosses 0 downward, armed once the swing
foot is ahead of the stance foot by $0.1\,(l_1 + l_2)$ (as in
[`hybrax.models.compass_gait`][]). The impact is perfectly plastic on the
descriptor coordinates $q = (x_f, z_f, \theta_1, \dots, \theta_5)$ with the stance
foot free: the projection of [`hybrax.plastic_impact`][] onto the motions that
keep the landing foot still, with the energy split ($T_c$ lost, $T_a$ kept) and
the impulse as observables (Font-Llagunes & Kövecses, "Modelling Dynamic Walking
Bipeds as Variable Topology Mechanical Systems", poster, McGill University;
Font-Llagunes & Kövecses 2009, "On the Use of Impulsive Bilateral Constraints to
Characterize Topology Transitions", 2009 CCToMM M³ Symposium); then the legs swap
roles, $(\theta_1, \theta_2, \theta_3, \theta_4, \theta_5)^+ = (\theta_5,
\theta_4, \theta_3, \theta_2, \theta_1)$ (the same angle convention for both legs
makes this a permutation). The trailing foot's vertical velocity after the impact is
recorded (`trailing_vertical_velocity`: positive where it leaves the ground).

**Periodic gait.** [`hybrax.models.biped5.section`][] is the Poincaré section
just after heel strike, both feet on the ground: the reduced unknowns are four
angles and the five rates, the trailing shank's angle following from the
trailing foot's height. On the default gait (found by `hybrax orbit biped5` from
[`hybrax.models.biped5.orbit_guess`][]) the walker steps 0.588 m every 0.613 s
(0.958 m/s) and loses $T_c$ = 3.11 J per heel strike, which the joint torques
put back over the step; the gait is stable, its largest multipliers 0.361 and
$-0.337$ (a disturbance shrinks to about a third per step, alternating in part).
[`hybrax.models.biped5.descriptor_section`][] is the same section for the
descriptor form (same unknowns and multipliers). Raising the swing hip's set point
`hip_swing_ref` lengthens the step until the gait loses its stability by period
doubling at 0.609 rad (`hybrax continue biped5`).

**Forms.** `"minimal"`: $x = (\theta, \dot\theta)$ (10 states). `"descriptor"`:
$x = (q, \dot q)$ (14 states) with the stance foot's position constrained to the
origin by the KKT system of [`hybrax.mechanical_mode`][] (the frame moves to the
landing foot at each heel strike). `"momentum"`: Zanchi & Cecić eqs. (17)-(19),
$x = (\theta, P)$ with $P = \partial L/\partial\dot\theta = I(\theta)\dot\theta$,
$\dot\theta = I^{-1}P$, $\dot P = \partial L/\partial\theta + \Gamma$; the impact
is a jump of $P$ (Zanchi & Cecić eq. 16).

**Default segments** (Winter 2009, *Biomechanics and Motor Control of Human
Movement*, 4th ed., Table 4.1 and Fig. 4.1 after Dempster 1955 and Drillis &
Contini 1966) for a body of 70 kg and 1.75 m: trunk = HAT (head, arms, trunk;
greater trochanter to glenohumeral joint, $0.288H$), mass fraction 0.678, centre
at 0.626 of its length above the hip, radius of gyration 0.496 of its length;
thigh (greater trochanter to femoral condyles, $0.245H$) 0.100, centre 0.433 below
the hip, radius 0.323; shank = foot and leg (femoral condyles to medial malleolus,
$0.246H$) 0.061, centre 0.606 of that length below the knee, radius 0.416, the
link reaching the ground ($0.285H$, the knee's height) at the point foot. The
masses add up to the body's.
"""

import jax
import jax.numpy as jnp
import numpy as np

from .._control import virtual_constraint_torques
from .._hybrid import (
    AbstractReset,
    HybridSystem,
    Integral,
    Mode,
    Transition,
    mechanical_mode,
)
from .._mechanics import (
    LagrangianModel,
    plastic_impact,
    point_velocity,
    symmetric_solve,
)
from .._model import (
    check_form,
    orbit_energy_lost,
    orbit_energy_lost_share,
    orbit_period,
    orbit_spectral_radius,
)
from .._params import (
    NONNEGATIVE,
    POSITIVE,
    AbstractParams,
    field_names,
    parameter_field,
    parameter_table,
)
from .._periodic import PoincareSection
from ._walking import fall


# Winter (2009) Table 4.1 and Fig. 4.1, for a body of mass _MASS and height _HEIGHT.
_MASS, _HEIGHT = 70.0, 1.75
_TRUNK_LENGTH = 0.288 * _HEIGHT  # greater trochanter to glenohumeral joint
_THIGH_LENGTH = 0.245 * _HEIGHT  # greater trochanter to femoral condyles
_LEG_LENGTH = 0.246 * _HEIGHT  # femoral condyles to medial malleolus
_KNEE_HEIGHT = 0.285 * _HEIGHT


def _positive(default, unit: str, description: str):
    return parameter_field(default, unit, description, bound=POSITIVE)


def _gain(default, unit: str, description: str):
    return parameter_field(default, unit, description, bound=NONNEGATIVE)


def _centre(default, where: str):
    """The field of a distance to a segment's centre of mass."""
    return _gain(default, "m", f"{where} centre of mass")


def _gyration(default, segment: str):
    """The field of a segment's radius of gyration about its centre."""
    return _positive(default, "m", f"{segment} radius of gyration about its centre")


def _shape(joint: str, k: int):
    """The field of the `k`-th Bezier coefficient of a joint's reference."""
    return parameter_field(
        0.0,
        "rad",
        f"{joint.replace('_', ' ')} reference: Bezier coefficient {k} minus the "
        "set point",
    )


class Biped5Params(AbstractParams):
    r"""Parameters of the five-link biped (SI units; defaults: Winter 2009 for a
    70 kg, 1.75 m body, see [`hybrax.models.biped5`][]). In Zanchi & Cecić's
    notation the masses are $M_3$, $M_2 = M_4$, $M_1 = M_5$; the lengths $l_3$,
    $l_2 = l_4$, $l_1 = l_5$; the centres $a_3$, $b_4 = l_2 - a_2$, $b_5 = l_1 -
    a_1$; the inertias $I_j = M_j r_j^2$. The joint set points are hip flexion
    $\theta_3 - \theta_\text{thigh}$ and knee flexion $\theta_\text{shank} -
    \theta_\text{thigh}$."""

    m_trunk: float = _positive(0.678 * _MASS, "kg", "trunk mass (head, arms and trunk)")
    m_thigh: float = _positive(0.100 * _MASS, "kg", "thigh mass")
    m_shank: float = _positive(0.061 * _MASS, "kg", "shank mass (foot included)")
    l_trunk: float = _positive(_TRUNK_LENGTH, "m", "hip to shoulder")
    l_thigh: float = _positive(_THIGH_LENGTH, "m", "hip to knee")
    l_shank: float = _positive(_KNEE_HEIGHT, "m", "knee to the point foot")
    c_trunk: float = _centre(0.626 * _TRUNK_LENGTH, "hip to the trunk's")
    c_thigh: float = _centre(0.433 * _THIGH_LENGTH, "hip to the thigh's")
    c_shank: float = _centre(0.606 * _LEG_LENGTH, "knee to the shank's")
    r_trunk: float = _gyration(0.496 * _TRUNK_LENGTH, "trunk's")
    r_thigh: float = _gyration(0.323 * _THIGH_LENGTH, "thigh's")
    r_shank: float = _gyration(0.416 * _LEG_LENGTH, "shank's")
    g: float = _positive(9.81, "m/s^2", "gravitational acceleration")
    kp_hip: float = _gain(400.0, "N m/rad", "hip stiffness gain")
    kd_hip: float = _gain(40.0, "N m s/rad", "hip damping gain")
    kp_knee: float = _gain(400.0, "N m/rad", "knee stiffness gain")
    kd_knee: float = _gain(20.0, "N m s/rad", "knee damping gain")
    hip_stance_ref: float = parameter_field(
        -0.2, "rad", "stance hip flexion set point (trunk - thigh)"
    )
    hip_swing_ref: float = parameter_field(
        0.5, "rad", "swing hip flexion set point (trunk - thigh)"
    )
    knee_stance_ref: float = parameter_field(
        0.0, "rad", "stance knee flexion set point (shank - thigh)"
    )
    knee_swing_ref: float = parameter_field(
        0.6, "rad", "swing knee flexion set point (shank - thigh)"
    )
    knee_stance_shape_1: float = _shape("knee_stance", 1)
    knee_stance_shape_2: float = _shape("knee_stance", 2)
    knee_stance_shape_3: float = _shape("knee_stance", 3)
    hip_stance_shape_1: float = _shape("hip_stance", 1)
    hip_stance_shape_2: float = _shape("hip_stance", 2)
    hip_stance_shape_3: float = _shape("hip_stance", 3)
    hip_swing_shape_1: float = _shape("hip_swing", 1)
    hip_swing_shape_2: float = _shape("hip_swing", 2)
    hip_swing_shape_3: float = _shape("hip_swing", 3)
    knee_swing_shape_1: float = _shape("knee_swing", 1)
    knee_swing_shape_2: float = _shape("knee_swing", 2)
    knee_swing_shape_3: float = _shape("knee_swing", 3)
    phase_start: float = parameter_field(
        -0.3,
        "rad",
        "stance leg angle (foot to hip, from the vertical) at phase 0",
    )
    phase_end: float = parameter_field(0.4, "rad", "stance leg angle at phase 1")
    torque_limit: float = _positive(
        400.0, "N m", "largest joint torque (the PD torques are clipped to it)"
    )

    def __check_init__(self):
        try:
            span = float(self.phase_end) - float(self.phase_start)
        except Exception:  # tracers
            return
        if span <= 0:  # (a NaN is the finiteness check's)
            raise ValueError(
                "Biped parameters `phase_start` < `phase_end` needed; got "
                f"{self.phase_start} and {self.phase_end}."
            )


def _up(angle):
    return jnp.stack([jnp.sin(angle), jnp.cos(angle)])


def points(q, params):
    r"""Positions for descriptor coordinates $q = (x_f, z_f, \theta_1, \dots,
    \theta_5)$: a dict with the stance foot `foot`, `knee`, `hip`, the trunk's top
    `head`, `swing_knee`, `swing_foot` and the centres `G` (shape `(5, 2)`, the
    $G_1, \dots, G_5$ of Zanchi & Cecić)."""
    p = params
    foot = q[:2]
    u = [_up(q[2 + j]) for j in range(5)]
    knee = foot + p.l_shank * u[0]
    hip = knee + p.l_thigh * u[1]
    swing_knee = hip - p.l_thigh * u[3]
    centres = jnp.stack(
        [
            foot + (p.l_shank - p.c_shank) * u[0],
            knee + (p.l_thigh - p.c_thigh) * u[1],
            hip + p.c_trunk * u[2],
            hip - p.c_thigh * u[3],
            swing_knee - p.c_shank * u[4],
        ]
    )
    return {
        "foot": foot,
        "knee": knee,
        "hip": hip,
        "head": hip + p.l_trunk * u[2],
        "swing_knee": swing_knee,
        "swing_foot": swing_knee - p.l_shank * u[4],
        "G": centres,
    }


def _segment_masses(params):
    p = params
    return jnp.stack([p.m_shank, p.m_thigh, p.m_trunk, p.m_thigh, p.m_shank])


def _segment_inertias(params):
    p = params
    radii = jnp.stack([p.r_shank, p.r_thigh, p.r_trunk, p.r_thigh, p.r_shank])
    return _segment_masses(params) * radii**2


def _lever_arms(params):
    r"""Zanchi & Cecić eqs. (1)-(5) as $G_j = r_f + \sum_k A_{jk}\,u(\theta_k)$:
    row $j$ holds the lengths along each segment from the stance foot to the centre
    $G_j$ (the centres of [`hybrax.models.biped5.points`][])."""
    p = params
    zero = jnp.zeros_like(p.l_shank)
    l1, l2 = p.l_shank, p.l_thigh
    rows = (
        (l1 - p.c_shank, zero, zero, zero, zero),
        (l1, l2 - p.c_thigh, zero, zero, zero),
        (l1, l2, p.c_trunk, zero, zero),
        (l1, l2, zero, -p.c_thigh, zero),
        (l1, l2, zero, -l2, -p.c_shank),
    )
    return jnp.stack([jnp.stack(row) for row in rows])


# The energies are written as sums over lever arms rather than through the points'
# velocities (`point_velocity` of `points`): the same functions, whose derivatives
# (mass matrix, Coriolis and gravity terms, and theirs in the variational
# equations) make the default orbit's program a third smaller, compiled in a
# third less time.


def _kinetic(q, qd, params):
    r"""Zanchi & Cecić eq. (7) in descriptor coordinates:
    $\dot G_j = \dot r_f + \sum_k A_{jk}\dot\theta_k(\cos\theta_k, -\sin\theta_k)$."""
    theta, theta_dot = q[2:], qd[2:]
    A = _lever_arms(params)
    vx = qd[0] + A @ (theta_dot * jnp.cos(theta))
    vz = qd[1] - A @ (theta_dot * jnp.sin(theta))
    translation = jnp.sum(_segment_masses(params) * (vx**2 + vz**2))
    rotation = jnp.sum(_segment_inertias(params) * theta_dot**2)
    return 0.5 * (translation + rotation)


def _potential(q, params):
    """Zanchi & Cecić eq. (6)."""
    heights = q[1] + _lever_arms(params) @ jnp.cos(q[2:])
    return params.g * jnp.sum(_segment_masses(params) * heights)


# Joint angles phi = S theta: stance knee, stance hip, swing hip, swing knee
# (flexion positive).
_JOINTS = np.array(
    [
        [1.0, -1.0, 0.0, 0.0, 0.0],
        [0.0, -1.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, -1.0, 0.0],
        [0.0, 0.0, 0.0, -1.0, 1.0],
    ]
)


_JOINT_NAMES = ("knee_stance", "hip_stance", "hip_swing", "knee_swing")


def reference_coefficients(params):
    r"""The Bézier coefficients of the four joints' references, shape `(4, 4)`:
    row $j$ is $(r_j, r_j + d_{j1}, r_j + d_{j2}, r_j + d_{j3})$ with the set
    point $r_j$ (`*_ref`) and the shape offsets $d_{jk}$ (`*_shape_k`)."""
    rows = []
    for joint in _JOINT_NAMES:
        ref = getattr(params, f"{joint}_ref")
        rows.append(
            jnp.stack(
                [ref] + [ref + getattr(params, f"{joint}_shape_{k}") for k in (1, 2, 3)]
            )
        )
    return jnp.stack(rows)


def stance_leg_angle(theta, params):
    r"""The phase angle: the line from the stance foot to the hip, from the
    vertical (positive with the hip ahead), $\varphi = \operatorname{atan2}(l_1
    \sin\theta_1 + l_2\sin\theta_2,\ l_1\cos\theta_1 + l_2\cos\theta_2)$;
    it grows through single support."""
    x = params.l_shank * jnp.sin(theta[0]) + params.l_thigh * jnp.sin(theta[1])
    z = params.l_shank * jnp.cos(theta[0]) + params.l_thigh * jnp.cos(theta[1])
    return jnp.arctan2(x, z)


def gait_phase(theta, theta_dot, params):
    r"""$s = (\varphi - \varphi_0)/(\varphi_1 - \varphi_0)$ and $\dot s$, from the
    stance leg's angle [`hybrax.models.biped5.stance_leg_angle`][] and
    `phase_start` $\varphi_0$, `phase_end` $\varphi_1$."""
    angle, rate = jax.jvp(
        lambda th: stance_leg_angle(th, params), (theta,), (theta_dot,)
    )
    span = params.phase_end - params.phase_start
    return (angle - params.phase_start) / span, rate / span


def joint_torques(theta, theta_dot, params):
    r"""Virtual-constraint torques on the joint angles $\phi = S\theta$ (stance
    knee, stance hip, swing hip, swing knee; flexion positive): cubic Bézier
    references $h_j(s)$ of the gait phase $s$ ([`hybrax.models.biped5.gait_phase`][],
    coefficients [`hybrax.models.biped5.reference_coefficients`][]) tracked by the
    saturated PD law of [`hybrax.virtual_constraint_torques`][],
    $\tau = \operatorname{clip}(-k_p(\phi - h) - k_d(\dot\phi - h'\dot s),
    \pm\tau_{max})$. With the shape offsets at 0 (the default) the references
    are the constant set points: $\tau = -k_p(\phi - \phi_\text{ref}) -
    k_d\dot\phi$ below the limit."""
    p = params
    S = jnp.asarray(_JOINTS, dtype=theta.dtype)
    phi, phi_dot = S @ theta, S @ theta_dot
    kp = jnp.stack([p.kp_knee, p.kp_hip, p.kp_hip, p.kp_knee])
    kd = jnp.stack([p.kd_knee, p.kd_hip, p.kd_hip, p.kd_knee])
    phase, phase_rate = gait_phase(theta, theta_dot, params)
    return virtual_constraint_torques(
        phi,
        phi_dot,
        reference_coefficients(params),
        phase,
        phase_rate,
        kp,
        kd,
        p.torque_limit,
    )


def _generalized_forces(t, q, qd, params):
    r"""$Q = S^T\tau$ on the angles (none on the foot's coordinates)."""
    del t
    S = jnp.asarray(_JOINTS, dtype=q.dtype)
    tau = joint_torques(q[2:], qd[2:], params)
    return jnp.concatenate([jnp.zeros(2, q.dtype), S.T @ tau])


def _constraints(q, params):
    """`"stance"`: the stance foot at the origin; `"swing"`: the swing foot's
    position (at heel strike, the landing foot; only its velocity is used)."""
    return {"stance": q[:2], "swing": points(q, params)["swing_foot"]}


#: The biped in descriptor coordinates $q = (x_f, z_f, \theta_1, \dots, \theta_5)$.
DESCRIPTOR = LagrangianModel(
    _kinetic,
    _potential,
    generalized_forces=_generalized_forces,
    constraint_groups=_constraints,
)


def _pinned(theta):
    return jnp.concatenate([jnp.zeros(2, theta.dtype), theta])


#: The biped in minimal coordinates $\theta$ (stance foot pinned at the origin).
MINIMAL = LagrangianModel(
    lambda th, thd, p: _kinetic(_pinned(th), _pinned(thd), p),
    lambda th, p: _potential(_pinned(th), p),
    generalized_forces=lambda t, th, thd, p: _generalized_forces(
        t, _pinned(th), _pinned(thd), p
    )[2:],
)


# The cycle of an orbit search traces the vector field some forty times (solver
# stages, event root finding, variational equations, saltation matrices), the
# swing foot's position some ninety and the impact a dozen: jitted, each is traced
# once per argument signature and reused, which shortens tracing the default
# orbit's program by more than half.
@jax.jit
def _single_support(t, x, params):
    theta, theta_dot = x[:5], x[5:]
    H = MINIMAL.mass_matrix(theta, params)
    C = MINIMAL.forces(theta, theta_dot, params, t)
    return jnp.concatenate([theta_dot, symmetric_solve(H, -C)])


@jax.jit
def _to_momentum(x, params):
    def one(x_):
        return jnp.concatenate([x_[:5], MINIMAL.mass_matrix(x_[:5], params) @ x_[5:]])

    return jax.vmap(one)(x)


@jax.jit
def _from_momentum(x, params):
    def one(x_):
        H = MINIMAL.mass_matrix(x_[:5], params)
        return jnp.concatenate([x_[:5], jnp.linalg.solve(H, x_[5:])])

    return jax.vmap(one)(x)


def momentum_from_minimal(x, params):
    r"""$(\theta, \dot\theta) \to (\theta, P)$ with $P = I(\theta)\dot\theta$
    (Zanchi & Cecić eq. 17); batched on leading axes."""
    x = jnp.asarray(x, dtype=float)
    return _to_momentum(x.reshape(-1, 10), params).reshape(x.shape)


def momentum_to_minimal(x, params):
    r"""$(\theta, P) \to (\theta, \dot\theta)$ with $\dot\theta = I(\theta)^{-1}P$;
    batched on leading axes."""
    x = jnp.asarray(x, dtype=float)
    return _from_momentum(x.reshape(-1, 10), params).reshape(x.shape)


@jax.jit
def _momentum_field(t, x, params):
    r"""Zanchi & Cecić eqs. (18)-(19): $\dot\theta = I^{-1}P$,
    $\dot P = \partial T/\partial\theta - \partial V/\partial\theta + \Gamma$ (the
    partial derivative of $T$ at fixed $\dot\theta$)."""
    theta, P = x[:5], x[5:]
    H = MINIMAL.mass_matrix(theta, params)
    theta_dot = symmetric_solve(H, P)
    dT = jax.grad(MINIMAL.kinetic, argnums=0)(theta, theta_dot, params)
    dV = jax.grad(MINIMAL.potential)(theta, params)
    Gamma = MINIMAL.generalized_forces(t, theta, theta_dot, params)
    return jnp.concatenate([theta_dot, dT - dV + Gamma])


@jax.jit
def _swing_foot(theta, params):
    return points(_pinned(theta), params)["swing_foot"]


def _leg_length(params):
    return params.l_shank + params.l_thigh


def _swing_foot_height(t, x, params):
    r"""The swing foot's height over the leg's length, from a state that starts
    with $\theta$ (the minimal and momentum forms)."""
    del t
    return _swing_foot(x[:5], params)[1] / _leg_length(params)


# How far (over the leg's length) the swing foot must be ahead of the stance foot
# before a heel strike can fire: past the mid-stance scuff and the step's start.
_ARMING_DISTANCE = 0.1


def _swing_foot_ahead(t, x, params):
    del t
    return _swing_foot(x[:5], params)[0] / _leg_length(params) - _ARMING_DISTANCE


def _descriptor_swing_foot_height(t, x, params):
    return _swing_foot_height(t, x[2:7], params)


def _descriptor_swing_foot_ahead(t, x, params):
    return _swing_foot_ahead(t, x[2:7], params)


# Leg relabelling at heel strike: (theta_1, ..., theta_5) -> (theta_5, ..., theta_1).
_SWAP = np.array([4, 3, 2, 1, 0])


@jax.jit
def heel_strike(theta, theta_dot, params):
    r"""The heel strike from minimal coordinates: the plastic impact on the
    descriptor coordinates (stance foot free, landing foot stopped) and the leg
    swap. **Returns:** `(theta_plus, theta_dot_plus, impact)`, with `impact` the
    [`hybrax.ImpactResult`][] before the swap (its `qd_plus[:2]` is the trailing
    foot's velocity)."""
    q, qd = _pinned(theta), _pinned(theta_dot)
    result = plastic_impact(DESCRIPTOR, ("swing",), q, qd, params)
    return theta[_SWAP], result.qd_plus[2:][_SWAP], result


def _observables(result):
    return {
        "T_c": result.T_c,
        "T_a": result.T_a,
        "impulse": result.impulse,
        "trailing_vertical_velocity": result.qd_plus[1],
    }


class HeelStrike(AbstractReset):
    r"""Plastic impact of the landing foot, then the leg swap, in minimal
    coordinates $(\theta, \dot\theta)$."""

    def __call__(self, t, x, params):
        del t
        theta, theta_dot, _ = heel_strike(x[:5], x[5:], params)
        return jnp.concatenate([theta, theta_dot])

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        return _observables(heel_strike(x_minus[:5], x_minus[5:], params)[2])


class MomentumHeelStrike(AbstractReset):
    r"""The heel strike as a jump of the momentum, $(\theta, P^-) \to (\theta^+,
    P^+)$ with $P^+ = I(\theta^+)\dot\theta^+$ (Zanchi & Cecić eq. 16)."""

    def __call__(self, t, x, params):
        del t
        x_min = momentum_to_minimal(x, params)
        theta, theta_dot, _ = heel_strike(x_min[:5], x_min[5:], params)
        return momentum_from_minimal(jnp.concatenate([theta, theta_dot]), params)

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        x_min = momentum_to_minimal(x_minus, params)
        return _observables(heel_strike(x_min[:5], x_min[5:], params)[2])


class DescriptorHeelStrike(AbstractReset):
    r"""The heel strike on the descriptor state $(q, \dot q)$: the plastic impact
    with the landing foot constrained (the stance foot free), the leg swap, and
    the frame moved to the landing foot."""

    def __call__(self, t, x, params):
        del t
        q, qd = x[:7], x[7:]
        result = plastic_impact(DESCRIPTOR, ("swing",), q, qd, params)
        landing = point_velocity(
            lambda q_, p: points(q_, p)["swing_foot"], q, result.qd_plus, params
        )
        zero = jnp.zeros(2, x.dtype)
        return jnp.concatenate([zero, q[2:][_SWAP], landing, result.qd_plus[2:][_SWAP]])

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        q, qd = x_minus[:7], x_minus[7:]
        result = plastic_impact(DESCRIPTOR, ("swing",), q, qd, params)
        return _observables(result)


def _strike(reset, guard=_swing_foot_height, arm=_swing_foot_ahead):
    return Transition(
        source="single_support",
        target="single_support",
        guard=guard,
        direction=False,
        reset=reset,
        name="heelstrike",
        arm=arm,
    )


def _hip_height(t, x, params):
    r"""The hip's height over the leg's length (its fall: see
    `models._walking.fall`), $(l_1\cos\theta_1 + l_2\cos\theta_2)/(l_1 + l_2)$."""
    del t
    p = params
    height = p.l_shank * jnp.cos(x[0]) + p.l_thigh * jnp.cos(x[1])
    return height / _leg_length(params)


def _descriptor_hip_height(t, x, params):
    return _hip_height(t, x[2:7], params)


def _joint_power(theta, theta_dot, params):
    r"""The torques $\tau$ and the joint rates $\dot\phi = S\dot\theta$."""
    S = jnp.asarray(_JOINTS, dtype=theta.dtype)
    return joint_torques(theta, theta_dot, params), S @ theta_dot


def _effort_rate(theta, theta_dot, params):
    tau, _ = _joint_power(theta, theta_dot, params)
    return jnp.sum(tau**2)


def _work_rate(theta, theta_dot, params):
    tau, rate = _joint_power(theta, theta_dot, params)
    return jnp.sum(tau * rate)


def _positive_work_rate(theta, theta_dot, params):
    tau, rate = _joint_power(theta, theta_dot, params)
    return jnp.sum(jnp.maximum(tau * rate, 0.0))


_RATES = {
    "effort": _effort_rate,
    "work": _work_rate,
    "positive_work": _positive_work_rate,
}


def _integrals(angles_and_rates):
    r"""The step's integrals, for a form whose state gives $(\theta,
    \dot\theta)$ by `angles_and_rates(x, params)`: the torques' effort
    $\int\sum_j\tau_j^2\,dt$, their net work $\int\tau\cdot\dot\phi\,dt$ and
    positive work $\int\sum_j\max(\tau_j\dot\phi_j, 0)\,dt$."""

    def integral(rate):
        def integrand(t, x, params):
            del t
            return rate(*angles_and_rates(x, params), params)

        # The controller's torques swing fast after heel strike: 256 panels
        # (1024 evaluations) put the net work within 1.3e-8 J of the energy
        # balance on the default gait, against 5.7e-4 J with 64.
        return Integral(integrand, n_panels=256)

    return {name: integral(rate) for name, rate in _RATES.items()}


def _minimal_angles(x, params):
    return x[:5], x[5:]


def _momentum_angles(x, params):
    theta = x[:5]
    return theta, symmetric_solve(MINIMAL.mass_matrix(theta, params), x[5:])


def _descriptor_angles(x, params):
    return x[2:7], x[9:14]


def _fall(hip_height=_hip_height):
    return fall("single_support", hip_height)


def biped5() -> tuple[HybridSystem, Biped5Params]:
    r"""The biped in minimal coordinates $x = (\theta, \dot\theta)$: mode
    `"single_support"`, transition `"heelstrike"` onto itself; with the default
    [`hybrax.models.biped5.Biped5Params`][]."""
    system = HybridSystem(
        (
            Mode(
                _single_support,
                "single_support",
                observables=_integrals(_minimal_angles),
            ),
        ),
        (_strike(HeelStrike()), _fall()),
        n_states=10,
    )
    return system, Biped5Params()


def momentum() -> tuple[HybridSystem, Biped5Params]:
    r"""Zanchi & Cecić's generalized-momentum form, $x = (\theta, P)$
    (eqs. 17-19)."""
    system = HybridSystem(
        (
            Mode(
                _momentum_field,
                "single_support",
                observables=_integrals(_momentum_angles),
            ),
        ),
        (_strike(MomentumHeelStrike()), _fall()),
        n_states=10,
    )
    return system, Biped5Params()


def descriptor() -> tuple[HybridSystem, Biped5Params]:
    r"""The descriptor form, $x = (q, \dot q)$ with $q = (x_f, z_f, \theta)$, the
    stance foot held at the origin by the constraint group `"stance"`."""
    mode = mechanical_mode(
        DESCRIPTOR,
        ("stance",),
        "single_support",
        observables=_integrals(_descriptor_angles),
    )
    system = HybridSystem(
        (mode,),
        (
            _strike(
                DescriptorHeelStrike(),
                _descriptor_swing_foot_height,
                _descriptor_swing_foot_ahead,
            ),
            _fall(_descriptor_hip_height),
        ),
        n_states=14,
    )
    return system, Biped5Params()


def descriptor_from_minimal(x):
    """$(\\theta, \\dot\\theta) \\to (0, 0, \\theta, 0, 0, \\dot\\theta)$ (batched
    on leading axes)."""
    x = jnp.asarray(x)
    zero = jnp.zeros(x.shape[:-1] + (2,), x.dtype)
    return jnp.concatenate([zero, x[..., :5], zero, x[..., 5:]], axis=-1)


def descriptor_to_minimal(x):
    """$(q, \\dot q) \\to (\\theta, \\dot\\theta)$ (batched on leading axes)."""
    x = jnp.asarray(x)
    return jnp.concatenate([x[..., 2:7], x[..., 9:14]], axis=-1)


@jax.jit
def _energies(x, params):
    def one(x_):
        return (
            MINIMAL.kinetic(x_[:5], x_[5:], params),
            MINIMAL.potential(x_[:5], params),
        )

    return jax.vmap(one)(x)


def energies(x, params):
    r"""Kinetic and potential energy of minimal states (batched on leading axes),
    the potential measured from the stance foot's height."""
    x = jnp.asarray(x, dtype=float)
    kinetic, potential = _energies(x.reshape(-1, 10), params)
    return kinetic.reshape(x.shape[:-1]), potential.reshape(x.shape[:-1])


def default_state(params) -> jax.Array:
    r"""Just after a heel strike: straight legs at $\mp 0.25$ rad (the stance leg
    behind the vertical through its foot, the swing leg's foot behind the hip on
    the ground), the trunk upright, the walker rotating forward at 1.2 rad/s."""
    del params
    alpha, omega = 0.25, 1.2
    theta = jnp.array([-alpha, -alpha, 0.0, alpha, alpha])
    theta_dot = jnp.array([omega, omega, 0.0, omega, omega])
    return jnp.concatenate([theta, theta_dot])


def _section_chart(u, params):
    r"""$(\theta_1, \dots, \theta_4, \dot\theta) \to (\theta, \dot\theta)$ with
    $\theta_5$ putting the trailing foot on the ground (its knee at height
    $l_1\cos\theta_5$ above it)."""
    p = params
    knee_height = p.l_shank * jnp.cos(u[0]) + p.l_thigh * (
        jnp.cos(u[1]) - jnp.cos(u[3])
    )
    theta_5 = jnp.arccos(knee_height / p.l_shank)
    return jnp.concatenate([u[:4], theta_5[None], u[4:]])


def _section_coordinates(x, params):
    del params
    return jnp.concatenate([x[:4], x[5:]])


def section(form: str = "minimal") -> PoincareSection:
    r"""Just after heel strike (transition `"heelstrike"`, legs relabelled): the
    stance foot at the origin and the trailing foot on the ground behind it,
    $l_1\cos\theta_1 + l_2\cos\theta_2 = l_2\cos\theta_4 + l_1\cos\theta_5$. The
    reduced unknowns are $u = (\theta_1, \theta_2, \theta_3, \theta_4, \dot\theta_1,
    \dots, \dot\theta_5)$ and the chart solves the contact for the trailing shank,
    $\theta_5 = \arccos\big((l_1\cos\theta_1 + l_2(\cos\theta_2 -
    \cos\theta_4))/l_1\big)$: exact, and smooth while the trailing knee is ahead
    of its foot ($0 < \theta_5 < \pi$; 0.46 rad on the default gait). The rates are
    all free: the trailing foot leaves the ground with the velocity the impact
    gives it. (Module-level chart and coordinates: equal sections share compiled
    programs.)"""
    check_form(form)  # one form; the argument as every model's
    return PoincareSection(
        ("heelstrike",), chart=_section_chart, coordinates=_section_coordinates
    )


def _descriptor_section_chart(u, params):
    return descriptor_from_minimal(_section_chart(u, params))


def _descriptor_section_coordinates(x, params):
    return _section_coordinates(descriptor_to_minimal(x), params)


def descriptor_section() -> PoincareSection:
    r"""[`hybrax.models.biped5.section`][] for the descriptor form: the same
    unknowns, the stance foot at rest at the origin."""
    return PoincareSection(
        ("heelstrike",),
        chart=_descriptor_section_chart,
        coordinates=_descriptor_section_coordinates,
    )


# The default gait's reduced unknowns: the state after the 40th heel strike of
# `hybrax.simulate` from `default_state` with the default parameters (tolerance
# 1e-12; successive steps then agree to 1e-13), rounded to six decimals.
_GAIT = (-0.001432, -0.587093, -0.083055, 0.298742)
_GAIT += (2.784989, -1.479846, 1.448863, 0.755033, 1.240912)


def orbit_guess(params) -> jax.Array:
    r"""A guess of $u = (\theta_1, \dots, \theta_4, \dot\theta_1, \dots,
    \dot\theta_5)$ after heel strike on the default gait (0.613 s steps of
    0.59 m); for nearby gains and set points too, where Newton refines it."""
    del params
    return jnp.array(_GAIT)


def step_length(x, params):
    r"""The distance between the feet of a state on the section (of any form: the
    angles are `x[2:7]` of a descriptor state, `x[:5]` of the others): the
    trailing foot lies $-$step length behind the stance foot."""
    theta = x[2:7] if x.shape[-1] == 14 else x[:5]
    return -_swing_foot(theta, params)[0]


def _step_length(orbit, params):
    """The distance between the feet at heel strike [m]."""
    return step_length(orbit.state, params)


def _speed(orbit, params):
    """Average walking speed [m/s]: step length over the step's period."""
    return step_length(orbit.state, params) / orbit.period


def _total_mass(params):
    return params.m_trunk + 2 * (params.m_thigh + params.m_shank)


def _cost_of_transport(orbit, params):
    r"""The specific cost of transport $c_t = W/(M g d)$: the torques' net work per
    step over weight and step length. On a periodic level gait the net work
    puts back the energy lost at heel strike, $W = T_c$ (tested), so
    $c_t = T_c/(M g d)$."""
    mass = _total_mass(params)
    return orbit_energy_lost(orbit, params) / (
        mass * params.g * step_length(orbit.state, params)
    )


def _effort(orbit, params):
    r"""The torques' effort over a step, $\int\sum_j\tau_j^2\,dt$ [N^2 m^2 s]."""
    del params
    return orbit.cycle.phase_observables["effort"][0]


def _work(orbit, params):
    r"""The torques' net work over a step, $\int\tau\cdot\dot\phi\,dt$ [J]: on
    a periodic level gait it puts back the energy lost at heel strike (tested)."""
    del params
    return orbit.cycle.phase_observables["work"][0]


def _positive_work(orbit, params):
    r"""The torques' positive work over a step, $\int\sum_j\max(\tau_j
    \dot\phi_j, 0)\,dt$ [J] (the work motors must supply without regeneration)."""
    del params
    return orbit.cycle.phase_observables["positive_work"][0]


#: Scalar quantities of a gait (differentiable, for `tune`).
ORBIT_QUANTITIES = {
    "period": orbit_period,
    "step_length": _step_length,
    "speed": _speed,
    "energy_lost": orbit_energy_lost,
    "Tc_over_T": orbit_energy_lost_share,
    "cost_of_transport": _cost_of_transport,
    "effort": _effort,
    "work": _work,
    "positive_work": _positive_work,
    "multiplier": orbit_spectral_radius,
}


def _orbit_summary(orbit, floquet, solution, params):
    del floquet
    # The step's integrals come with the simulation of the orbit's periods (the
    # orbit search skips phase observables); NaN without it.
    integrals = {
        name: float("nan")
        if solution is None
        else float(solution.phase_observables[name][0])
        for name in _RATES
    }
    step = float(step_length(orbit.state, params))
    period = float(orbit.period)
    T_c, T_a = float(orbit.T_c[0]), float(orbit.T_a[0])
    trailing = float(orbit.cycle.observables["trailing_vertical_velocity"][0])
    values = {
        "step_length": step,
        "speed": step / period,
        "T_c": T_c,
        "T_a": T_a,
        "Tc_over_T": T_c / (T_c + T_a),
        "trailing_vertical_velocity": trailing,
        "trailing_foot_leaves": bool(trailing > 0),
        **integrals,
    }
    lines = [
        f"  step period             {period:.10f} s",
        f"  step length             {step:.10f} m",
        f"  speed                   {step / period:.10f} m/s",
        f"  T_c (lost at heel strike) {T_c:.6f} J (the joint torques' net work)",
        f"  T_c / (T_a + T_c)       {T_c / (T_c + T_a):.10f}",
        f"  trailing foot vertical velocity after impact {trailing:+.4f} m/s",
        f"  torques' work per step  {integrals['work']:.6f} J (positive work "
        f"{integrals['positive_work']:.6f} J)",
        f"  torques' effort         {integrals['effort']:.6f} N^2 m^2 s "
        "(integral of the squared torques over a step)",
    ]
    return values, lines


FIELD_NAMES = field_names(Biped5Params)
#: Parameters with their units and meaning.
PARAMETERS = parameter_table(Biped5Params)


# Drawn in this order: foot, knee, hip, head, swing knee, swing foot.
_DRAWN = ("foot", "knee", "hip", "head", "swing_knee", "swing_foot")


@jax.jit
def _drawn_points(theta, params):
    found = points(_pinned(theta), params)
    return jnp.stack([found[name] for name in _DRAWN])


def _stick_figure(x, params):
    """The ground, the stance leg, the trunk and the swing leg."""
    foot, knee, hip, head, swing_knee, swing_foot = np.asarray(
        _drawn_points(jnp.asarray(x[:5], dtype=float), params)
    )
    reach = 1.5 * float(_leg_length(params))
    ground = np.array([[-reach, 0.0], [reach, 0.0]])
    return [
        ground,
        np.stack([foot, knee, hip]),
        np.stack([hip, head]),
        np.stack([hip, swing_knee, swing_foot]),
    ]


def _frame_shift(x_before, params):
    """At heel strike the swing foot becomes the stance foot."""
    return np.asarray(_drawn_points(jnp.asarray(x_before[:5], dtype=float), params))[-1]


# Which segment each absolute angle is, on the axes (Zanchi & Cecic's order).
_SEGMENTS = ("stance shank", "stance thigh", "trunk", "swing thigh", "swing shank")
_LABELS = tuple(
    rf"$\theta_{j}$ {name} [rad]" for j, name in enumerate(_SEGMENTS, start=1)
) + tuple(
    rf"$\dot\theta_{j}$ {name} [rad/s]" for j, name in enumerate(_SEGMENTS, start=1)
)


_DEFAULTS = Biped5Params()

#: The controller numbers `hybrax tune biped5` shapes: the four set points (the
#: references' first Bezier coefficients) and the swing leg's hip and knee
#: reference shapes.
TUNED = (
    "hip_swing_ref",
    "hip_stance_ref",
    "knee_swing_ref",
    "knee_stance_ref",
    *(f"{joint}_shape_{k}" for joint in ("hip_swing", "knee_swing") for k in (1, 2, 3)),
)
#: A controller under which the walker falls: the swing hip's set point at 0 (the
#: swing leg is not brought forward), from `default_state` it trips over its swing
#: foot at the second step (status `armed_beyond_guard`). `hybrax tune biped5`
#: starts from it.
FALLING_START = {"hip_swing_ref": 0.0}


def _bundle():
    from .._model import (
        ContinuationDefaults,
        FigureSpec,
        ModelBundle,
        ModelForm,
        ModelPresentation,
        TuneDefaults,
        field_parameters,
    )

    make_params, parameter = field_parameters(Biped5Params, "biped5")
    names = tuple(f"theta_{j}" for j in range(1, 6))
    names += tuple(f"omega_{j}" for j in range(1, 6))
    return ModelBundle(
        name="biped5",
        description="five-link planar biped with PD joint torques (Zanchi & Cecic "
        "1993)",
        parameters=PARAMETERS,
        make_params=make_params,
        parameter=parameter,
        state_names=names,
        default_state=default_state,
        forms={
            "minimal": ModelForm(lambda: biped5()[0], section),
            "descriptor": ModelForm(
                lambda: descriptor()[0],
                descriptor_section,
                from_minimal=descriptor_from_minimal,
                to_minimal=descriptor_to_minimal,
            ),
            # ModelForm's maps take no parameters: the momentum form converts with
            # the default segments. It has no section: `hybrax orbit` reads a
            # monodromy in minimal coordinates through the maps' Jacobians at 0,
            # which needs linear maps (as the descriptor form's).
            "momentum": ModelForm(
                lambda: momentum()[0],
                from_minimal=lambda x: momentum_from_minimal(x, _DEFAULTS),
                to_minimal=lambda x: momentum_to_minimal(x, _DEFAULTS),
            ),
        },
        orbit_guess=orbit_guess,
        quantities=ORBIT_QUANTITIES,
        presentation=ModelPresentation(
            continuation=ContinuationDefaults(
                "hip_swing_ref",
                start=0.5,
                stop=0.7,
                parameter_scale=1.0,
                max_period=1.5,
            ),
            tune=TuneDefaults(
                vary=TUNED,
                targets={"speed": 0.8},
                minimize="cost_of_transport",
                max_multiplier=0.9,
                tolerance=0.016,
                scale=0.5,
                start=dict(FALLING_START),
                seek_steps=30,
                verify_steps=50,
                max_steps=60,
            ),
            sweep_grids=("hip_swing_ref=0.5:0.65:4", "kp_hip=350:500:4"),
            labels=dict(zip(names, _LABELS)),
            figures=FigureSpec(_LABELS, energies, portrait=(2, 7)),
            orbit_summary=_orbit_summary,
            orbit_perturbations=((7, 0.1, r"$\dot\theta_3 + 0.1$ rad/s"),),
            stick_figure=_stick_figure,
            frame_shift=_frame_shift,
        ),
    )
