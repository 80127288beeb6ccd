"""The five-link biped's mechanics: its parameters, the segments' geometry, masses
and energies, the joint torques of its controller, its Lagrangian models in minimal
and descriptor coordinates, and the heel strike.
"""

from collections.abc import Callable
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ..._control import virtual_constraint_torques
from ..._mechanics import (
    LagrangianModel,
    plastic_impact,
)
from ..._params import (
    NONNEGATIVE,
    POSITIVE,
    AbstractParams,
    parameter_field,
)


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


def _phase_order(params):
    return params.phase_start < params.phase_end


def _band_below_limit(params):
    return params.torque_band < params.torque_limit


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
    slope: float = parameter_field(
        0.0, "rad", "ground slope (downhill towards +x; 0 is level ground)"
    )
    step_height: float = parameter_field(
        0.0,
        "m",
        "next foothold above the stance foot, normal to the slope",
    )
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
        400.0, "N m", "largest joint torque (the PD torques saturate at it)"
    )
    # Rounded corners keep the flow twice differentiable where an orbit reaches
    # the limit (the gait near its period doubling does, for 0.2 ms after heel
    # strike): second derivatives by AD are right there (`hybrax.saturate`).
    # The default gait's torques stay below the band, so its numbers are those
    # of the hard clip.
    torque_band: float = _gain(
        1.0, "N m", "half-width of the band over which the torques saturate"
    )

    # For traced values (the eager check is `__check_init__`'s).
    relations: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "phase_start < phase_end": _phase_order,
        "torque_band < torque_limit": _band_below_limit,
    }

    def __check_init__(self):
        try:
            span = float(self.phase_end) - float(self.phase_start)
            limit, band = float(self.torque_limit), float(self.torque_band)
        except Exception:  # tracers
            return
        if span <= 0:  # (a NaN is the finiteness check's)
            raise ValueError(
                "Biped parameters `phase_start` < `phase_end` needed; got "
                f"{self.phase_start} and {self.phase_end}."
            )
        # (A limit or band out of its own bound is the bounds check's.)
        if limit > 0 and 0 <= band and band >= limit:
            raise ValueError(
                "Biped parameters `torque_band` < `torque_limit` needed; got "
                f"{self.torque_band} and {self.torque_limit}."
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
    r"""Zanchi & Cecić (1993) eqs. (1)-(5) as $G_j = r_f + \sum_k A_{jk}\,u(\theta_k)$:
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


def _kinetic(q, qd, params):
    r"""Zanchi & Cecić (1993) eq. (7) in descriptor coordinates:
    $\dot G_j = \dot r_f + \sum_k A_{jk}\dot\theta_k(\cos\theta_k, -\sin\theta_k)$."""
    theta, theta_dot = q[2:], qd[2:]
    A = _lever_arms(params)
    vx = qd[0] + A @ (theta_dot * jnp.cos(theta))
    vz = qd[1] - A @ (theta_dot * jnp.sin(theta))
    translation = jnp.sum(_segment_masses(params) * (vx**2 + vz**2))
    rotation = jnp.sum(_segment_inertias(params) * theta_dot**2)
    return 0.5 * (translation + rotation)


def _potential(q, params):
    r"""Zanchi & Cecić (1993) eq. (6) on ground of slope $\varphi$ (`slope`,
    downhill towards $+x$): the coordinates are the ground's ($x$ along it, $z$
    along its normal), so a centre's height is $z_j\cos\varphi - x_j\sin\varphi$
    and $V = g\sum_j M_j(z_j\cos\varphi - x_j\sin\varphi)$ (gravity turned by
    $\varphi$; on level ground, eq. 6 exactly)."""
    arms = _lever_arms(params)
    heights = q[1] + arms @ jnp.cos(q[2:])
    along = q[0] + arms @ jnp.sin(q[2:])
    slope = params.slope
    return params.g * jnp.sum(
        _segment_masses(params) * (heights * jnp.cos(slope) - along * jnp.sin(slope))
    )


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
        p.torque_band,
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
