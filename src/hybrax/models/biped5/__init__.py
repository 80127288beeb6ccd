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

**Slope.** `slope` $\varphi$ (default 0, level ground) tilts the ground,
downhill towards $+x$: the coordinates are the ground's (angles from its normal,
heights above it), gravity turned by $\varphi$ in the potential,
$V = g\sum_j M_j(z_j\cos\varphi - x_j\sin\varphi)$; the controller reads the
angles from the ground's normal. The model declares it as the disturbance
`"slope"` of the next step (`hybrax.gait_sensitivity`, `hybrax robustness`),
with the step time and length as gait indicators; and the disturbance
`"height"`: `step_height` (default 0), the next foothold's height above the
stance foot, where the heel strike fires.

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

The model is in three modules: `dynamics` (parameters, mechanics, controller,
heel strike), `forms` (the hybrid systems and sections of its three
formulations) and `gait` (orbit guess, quantities, tuning defaults, the bundle).
"""

from .dynamics import (
    DESCRIPTOR as DESCRIPTOR,
    MINIMAL as MINIMAL,
    Biped5Params as Biped5Params,
    gait_phase as gait_phase,
    heel_strike as heel_strike,
    joint_torques as joint_torques,
    points as points,
    reference_coefficients as reference_coefficients,
    stance_leg_angle as stance_leg_angle,
)
from .forms import (
    DescriptorHeelStrike as DescriptorHeelStrike,
    HeelStrike as HeelStrike,
    MomentumHeelStrike as MomentumHeelStrike,
    biped5 as biped5,
    default_state as default_state,
    descriptor as descriptor,
    descriptor_from_minimal as descriptor_from_minimal,
    descriptor_section as descriptor_section,
    descriptor_to_minimal as descriptor_to_minimal,
    energies as energies,
    momentum as momentum,
    momentum_from_minimal as momentum_from_minimal,
    momentum_to_minimal as momentum_to_minimal,
    section as section,
)
from .gait import (
    FALLING_START as FALLING_START,
    FIELD_NAMES as FIELD_NAMES,
    ORBIT_QUANTITIES as ORBIT_QUANTITIES,
    PARAMETERS as PARAMETERS,
    TUNED as TUNED,
    _bundle as _bundle,
    orbit_guess as orbit_guess,
    step_length as step_length,
)


__all__ = [
    "Biped5Params",
    "points",
    "reference_coefficients",
    "stance_leg_angle",
    "gait_phase",
    "joint_torques",
    "DESCRIPTOR",
    "MINIMAL",
    "momentum_from_minimal",
    "momentum_to_minimal",
    "heel_strike",
    "HeelStrike",
    "MomentumHeelStrike",
    "DescriptorHeelStrike",
    "biped5",
    "momentum",
    "descriptor",
    "descriptor_from_minimal",
    "descriptor_to_minimal",
    "energies",
    "default_state",
    "section",
    "descriptor_section",
    "orbit_guess",
    "step_length",
    "ORBIT_QUANTITIES",
    "FIELD_NAMES",
    "PARAMETERS",
    "TUNED",
    "FALLING_START",
]
