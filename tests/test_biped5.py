"""The five-link biped (Zanchi & Cecić 1993, seed 004) against references written
here: the seed's appendix (inertia matrix I, centripetal matrix B, gravity moments
M_G) typed in from its formulas; kinematics typed in from its eqs. (1)-(5) for the
energy and momentum checks (T + V conserved without torques; at heel strike the
energy lost and kept add up to the kinetic energy before it, the angular momenta
that no impulse can change are conserved, and the linear momentum jumps by the
recorded impulse); the seed's momentum form (eqs. 17-19, through `hybrax simulate
biped5 --form momentum`) and the descriptor form retrace the minimal form's walk.

Typos of the seed resolved by its own appendix and the Lagrangian (eqs. 6-7):

- I(1,1) and I(1,2) write `m_1`, `m_2` where every other entry (and the
  Lagrangian) has the segment masses `M_1`, `M_2`.
- Eq. (10) reads `I theta'' + B theta'^2 - M_G = Gamma`; with the appendix's M_G,
  which is dV/dtheta (e.g. M_G(1) = -(M_1 a_1 + (M_2 + ... + M_5) l_1) g
  sin(theta_1)), the Lagrangian gives eq. (11)'s sign:
  `I theta'' + B theta'^2 + M_G = Gamma`.
- Eq. (5) for G_5 omits the `- l_4 sin(theta_4)` (`- l_4 cos(theta_4)`) term that
  I(4,4) (its `M_5 l_4^2`), I(4,5) and B(4,5) need.
- B(2,1) is printed as `+(...) sin(theta_1 - theta_2)`; the Lagrangian gives
  B(i,j) = I(i,j) tan(theta_i - theta_j) for i != j, so B(2,1) =
  `(...) sin(theta_2 - theta_1)` (as the other entries below the diagonal are).
- The layout of B in eq. (14) puts `B_44` at position (4,5); the appendix has
  B(4,4) = 0 and B(4,5) = M_5 l_4 b_5 sin(theta_4 - theta_5).
"""

import dataclasses
import json
import math
from types import SimpleNamespace

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax._cli import main
from hybrax.models import biped5 as b5


TOL = 1e-10
N_EVENTS = 5  # the command line's default (--cycles 5)
# The default gait as `hybrax.simulate` settles on it from `default_state` (40 heel
# strikes at tolerance 1e-12, successive steps then equal to 1e-13): step period
# [s] and energy lost per heel strike [J].
SETTLED_PERIOD = 0.613249126904
SETTLED_T_C = 3.114532096028
SYSTEM, DEFAULTS = b5.biped5()
PARAMS = hx.canonical_params(DEFAULTS)
GAINS = ("kp_hip", "kd_hip", "kp_knee", "kd_knee")
PASSIVE = hx.canonical_params(
    dataclasses.replace(PARAMS, **{name: 0.0 for name in GAINS})
)
# Phase-dependent references (every shape offset set) and a torque limit that
# clips: the virtual-constraint controller's full law.
SHAPED = hx.canonical_params(
    dataclasses.replace(
        PARAMS,
        torque_limit=150.0,
        phase_start=-0.8,
        phase_end=0.6,
        **{
            f"{joint}_shape_{k}": 0.1 * k * (-1) ** i
            for i, joint in enumerate(
                ("knee_stance", "hip_stance", "hip_swing", "knee_swing")
            )
            for k in (1, 2, 3)
        },
    )
)


def _seed_symbols(p):
    """The seed's M_j, I_j, l_j, a_j, b_j from the parameters (equal legs)."""
    p = {f.name: float(getattr(p, f.name)) for f in dataclasses.fields(p)}
    s = {
        "M1": p["m_shank"],
        "M2": p["m_thigh"],
        "M3": p["m_trunk"],
        "M4": p["m_thigh"],
        "M5": p["m_shank"],
        "l1": p["l_shank"],
        "l2": p["l_thigh"],
        "l4": p["l_thigh"],
        "l5": p["l_shank"],
        "a1": p["l_shank"] - p["c_shank"],
        "a2": p["l_thigh"] - p["c_thigh"],
        "a3": p["c_trunk"],
        "b4": p["c_thigh"],
        "b5": p["c_shank"],
        "g": p["g"],
    }
    radii = (p["r_shank"], p["r_thigh"], p["r_trunk"], p["r_thigh"], p["r_shank"])
    for j, r in enumerate(radii, start=1):
        s[f"I{j}"] = s[f"M{j}"] * r**2
    return s


def _seed_appendix(theta, s):
    """I(theta), B(theta) and M_G(theta) of the seed's appendix, typos resolved."""
    M1, M2, M3, M4, M5 = (s[f"M{j}"] for j in range(1, 6))
    I1, I2, I3, I4, I5 = (s[f"I{j}"] for j in range(1, 6))
    l1, l2, l4 = s["l1"], s["l2"], s["l4"]
    a1, a2, a3, b4, b5_, g = s["a1"], s["a2"], s["a3"], s["b4"], s["b5"], s["g"]

    def c(i, j):
        return math.cos(theta[i - 1] - theta[j - 1])

    def sn(i, j):
        return math.sin(theta[i - 1] - theta[j - 1])

    k12 = M2 * l1 * a2 + M3 * l1 * l2 + M4 * l1 * l2 + M5 * l1 * l2
    k14 = M4 * l1 * b4 + M5 * l1 * l4
    k24 = M4 * l2 * b4 + M5 * l2 * l4
    I = np.zeros((5, 5))  # noqa: E741
    I[0, 0] = I1 + M1 * a1**2 + M2 * l1**2 + M3 * l1**2 + M4 * l1**2 + M5 * l1**2
    I[0, 1] = I[1, 0] = k12 * c(1, 2)
    I[0, 2] = I[2, 0] = M3 * l1 * a3 * c(1, 3)
    I[0, 3] = I[3, 0] = -k14 * c(1, 4)
    I[0, 4] = I[4, 0] = -M5 * l1 * b5_ * c(1, 5)
    I[1, 1] = I2 + M2 * a2**2 + M3 * l2**2 + M4 * l2**2 + M5 * l2**2
    I[1, 2] = I[2, 1] = M3 * l2 * a3 * c(2, 3)
    I[1, 3] = I[3, 1] = -k24 * c(2, 4)
    I[1, 4] = I[4, 1] = -M5 * l2 * b5_ * c(2, 5)
    I[2, 2] = I3 + M3 * a3**2
    I[3, 3] = I4 + M4 * b4**2 + M5 * l4**2
    I[3, 4] = I[4, 3] = M5 * l4 * b5_ * c(4, 5)
    I[4, 4] = I5 + M5 * b5_**2
    B = np.zeros((5, 5))
    B[0, 1] = k12 * sn(1, 2)
    B[0, 2] = M3 * l1 * a3 * sn(1, 3)
    B[0, 3] = -k14 * sn(1, 4)
    B[0, 4] = -M5 * l1 * b5_ * sn(1, 5)
    B[1, 0] = -k12 * sn(1, 2)  # printed with a + sign (typo)
    B[1, 2] = M3 * l2 * a3 * sn(2, 3)
    B[1, 3] = -k24 * sn(2, 4)
    B[1, 4] = -M5 * l2 * b5_ * sn(2, 5)
    B[2, 0] = -M3 * l1 * a3 * sn(1, 3)
    B[2, 1] = -M3 * l2 * a3 * sn(2, 3)
    B[3, 0] = k14 * sn(1, 4)
    B[3, 1] = k24 * sn(2, 4)
    B[3, 4] = M5 * l4 * b5_ * sn(4, 5)
    B[4, 0] = M5 * l1 * b5_ * sn(1, 5)
    B[4, 1] = M5 * l2 * b5_ * sn(2, 5)
    B[4, 3] = -M5 * l4 * b5_ * sn(4, 5)
    t1, t2, t3, t4, t5 = theta
    M_G = np.array(
        [
            -(M1 * g * a1 + M2 * g * l1 + M3 * g * l1 + M4 * g * l1 + M5 * g * l1)
            * math.sin(t1),
            -(M2 * g * a2 + M3 * g * l2 + M4 * g * l2 + M5 * g * l2) * math.sin(t2),
            -M3 * g * a3 * math.sin(t3),
            (M4 * g * b4 + M5 * g * l4) * math.sin(t4),
            M5 * g * b5_ * math.sin(t5),
        ]
    )
    return I, B, M_G


def _joint_torques(theta, theta_dot, p):
    """Gamma on the absolute angles from the virtual-constraint torques, written
    out here: the phase from the stance leg's angle (foot to hip), the cubic
    Bezier references and their rates, the PD law and the clip at the limit; a
    torque tau on phi = theta_child - theta_parent acts +tau on the child and
    -tau on the parent (virtual work)."""
    p = {f.name: float(getattr(p, f.name)) for f in dataclasses.fields(p)}
    l1, l2 = p["l_shank"], p["l_thigh"]
    x = l1 * math.sin(theta[0]) + l2 * math.sin(theta[1])
    z = l1 * math.cos(theta[0]) + l2 * math.cos(theta[1])
    x_dot = (
        l1 * math.cos(theta[0]) * theta_dot[0] + l2 * math.cos(theta[1]) * theta_dot[1]
    )
    z_dot = (
        -l1 * math.sin(theta[0]) * theta_dot[0] - l2 * math.sin(theta[1]) * theta_dot[1]
    )
    span = p["phase_end"] - p["phase_start"]
    s_raw = (math.atan2(x, z) - p["phase_start"]) / span
    s_rate = (z * x_dot - x * z_dot) / (x**2 + z**2) / span
    s = min(max(s_raw, 0.0), 1.0)  # the rate keeps the end slope outside [0, 1]
    joints = (  # (child, parent, kp, kd, joint)
        (0, 1, p["kp_knee"], p["kd_knee"], "knee_stance"),
        (2, 1, p["kp_hip"], p["kd_hip"], "hip_stance"),
        (2, 3, p["kp_hip"], p["kd_hip"], "hip_swing"),
        (4, 3, p["kp_knee"], p["kd_knee"], "knee_swing"),
    )
    Gamma = np.zeros(5)
    for child, parent, kp, kd, joint in joints:
        a = [p[f"{joint}_ref"]]
        a += [p[f"{joint}_ref"] + p[f"{joint}_shape_{k}"] for k in (1, 2, 3)]
        ref = (
            (1 - s) ** 3 * a[0]
            + 3 * (1 - s) ** 2 * s * a[1]
            + 3 * (1 - s) * s**2 * a[2]
            + s**3 * a[3]
        )
        ref_slope = 3 * (
            (1 - s) ** 2 * (a[1] - a[0])
            + 2 * (1 - s) * s * (a[2] - a[1])
            + s**2 * (a[3] - a[2])
        )
        phi = theta[child] - theta[parent]
        phi_dot = theta_dot[child] - theta_dot[parent]
        tau = -kp * (phi - ref) - kd * (phi_dot - ref_slope * s_rate)
        tau = _saturated(tau, p["torque_limit"], p["torque_band"])
        Gamma[child] += tau
        Gamma[parent] -= tau
    return Gamma


def _saturated(tau, limit, band):
    """The torque saturated at the limit, its corners rounded over the band:
    the identity up to limit - band, the limit from limit + band, and between
    them limit - band + 2 band g(u), g(u) = u - u^3 + u^4/2."""
    start = limit - band
    if band == 0 or abs(tau) <= start:
        return min(max(tau, -limit), limit)
    u = min((abs(tau) - start) / (2 * band), 1.0)
    return math.copysign(start + 2 * band * (u - u**3 + u**4 / 2), tau)


@jax.jit
def _builder_terms(theta, theta_dot, params):
    """H and C of the minimal model, batched over states."""

    def one(th, thd):
        return b5.MINIMAL.mass_matrix(th, params), b5.MINIMAL.forces(th, thd, params)

    return jax.vmap(one)(theta, theta_dot)


def test_seed_appendix_inertia_centripetal_and_gravity(getkey):
    """H = I(theta) and C = B(theta) theta_dot^2 + M_G(theta) - Gamma (theta_dot^2
    elementwise), on random angles and rates; Gamma from the controller's law
    written out (set points; Bezier references with saturated torques)."""
    theta = jax.random.uniform(getkey(), (6, 5), minval=-1.5, maxval=1.5)
    theta_dot = 3.0 * jax.random.normal(getkey(), (6, 5))
    for params in (PASSIVE, PARAMS, SHAPED):
        H, C = _builder_terms(theta, theta_dot, params)
        s = _seed_symbols(params)
        for k in range(theta.shape[0]):
            th, thd = np.asarray(theta[k]), np.asarray(theta_dot[k])
            I, B, M_G = _seed_appendix(th, s)
            Gamma = _joint_torques(th, thd, params)
            np.testing.assert_allclose(H[k], I, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(
                C[k], B @ thd**2 + M_G - Gamma, rtol=1e-11, atol=1e-10
            )


def test_on_a_slope_gravity_acts_at_the_angles_from_the_true_vertical(getkey):
    """On ground of slope phi (downhill towards +x) the angles are measured from
    the ground's normal; gravity's column is then the seed's M_G at the angles
    from the true vertical, theta + phi (each entry of M_G reads its own angle),
    while I and B do not change."""
    theta = jax.random.uniform(getkey(), (4, 5), minval=-1.0, maxval=1.0)
    theta_dot = 3.0 * jax.random.normal(getkey(), (4, 5))
    for slope in (0.05, -0.2):
        params = hx.canonical_params(dataclasses.replace(PASSIVE, slope=slope))
        H, C = _builder_terms(theta, theta_dot, params)
        s = _seed_symbols(params)
        for k in range(theta.shape[0]):
            th, thd = np.asarray(theta[k]), np.asarray(theta_dot[k])
            I, B, _ = _seed_appendix(th, s)
            _, _, M_G_vertical = _seed_appendix(th + slope, s)
            np.testing.assert_allclose(H[k], I, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(
                C[k], B @ thd**2 + M_G_vertical, rtol=1e-11, atol=1e-10
            )


# -- Kinematics typed from the seed's eqs. (1)-(5), stance foot at the origin --------


def _kinematics(x, s):
    """Positions and velocities of the centres G_j, the joints and the feet."""
    theta, w = np.asarray(x[:5], float), np.asarray(x[5:], float)

    def u(j):
        return np.array([math.sin(theta[j]), math.cos(theta[j])])

    def du(j):
        return w[j] * np.array([math.cos(theta[j]), -math.sin(theta[j])])

    knee, v_knee = s["l1"] * u(0), s["l1"] * du(0)
    hip, v_hip = knee + s["l2"] * u(1), v_knee + s["l2"] * du(1)
    knee2, v_knee2 = hip - s["l4"] * u(3), v_hip - s["l4"] * du(3)
    G = [
        (s["a1"] * u(0), s["a1"] * du(0)),
        (knee + s["a2"] * u(1), v_knee + s["a2"] * du(1)),
        (hip + s["a3"] * u(2), v_hip + s["a3"] * du(2)),
        (hip - s["b4"] * u(3), v_hip - s["b4"] * du(3)),
        (knee2 - s["b5"] * u(4), v_knee2 - s["b5"] * du(4)),
    ]
    return {
        "G": G,
        "w": w,
        "knee": knee,
        "hip": hip,
        "knee2": knee2,
        "foot2": (knee2 - s["l5"] * u(4), v_knee2 - s["l5"] * du(4)),
    }


def _energies(x, s):
    k = _kinematics(x, s)
    T = sum(
        0.5 * (s[f"M{j + 1}"] * v @ v + s[f"I{j + 1}"] * k["w"][j] ** 2)
        for j, (_, v) in enumerate(k["G"])
    )
    V = s["g"] * sum(s[f"M{j + 1}"] * r[1] for j, (r, _) in enumerate(k["G"]))
    return T, V


def _angular_momentum(k, s, segments, origin):
    r"""Sum over `segments` of M (G - O) x v - I theta_dot (theta grows clockwise)."""
    total = 0.0
    for j in segments:
        r, v = k["G"][j]
        d = r - origin
        total += (
            s[f"M{j + 1}"] * (d[0] * v[1] - d[1] * v[0]) - s[f"I{j + 1}"] * k["w"][j]
        )
    return total


def _linear_momentum(k, s):
    return sum(s[f"M{j + 1}"] * v for j, (_, v) in enumerate(k["G"]))


def _joint_power(x, p):
    """The PD torques' power at the state `x = (theta, theta_dot, ...)`: the sum
    over the joints of tau * phi_dot (joint angles phi = theta_child -
    theta_parent as in `_joint_torques`), traceable."""
    theta, theta_dot = x[:5], x[5:10]
    joints = (  # (child, parent, kp, kd, set point)
        (0, 1, p.kp_knee, p.kd_knee, p.knee_stance_ref),
        (2, 1, p.kp_hip, p.kd_hip, p.hip_stance_ref),
        (2, 3, p.kp_hip, p.kd_hip, p.hip_swing_ref),
        (4, 3, p.kp_knee, p.kd_knee, p.knee_swing_ref),
    )
    power = 0.0
    for child, parent, kp, kd, ref in joints:
        phi = theta[child] - theta[parent]
        phi_dot = theta_dot[child] - theta_dot[parent]
        power = power + (-kp * (phi - ref) - kd * phi_dot) * phi_dot
    return power


# The walker with the joint torques' work W as an 11th state: dW/dt is their
# power, and W is kept across heel strikes (the impulses are the ground's).
_MODE, _STRIKE = SYSTEM.modes[0], SYSTEM.transitions[0]


def _field_and_power(t, x, params):
    field = _MODE.vector_field(t, x[:10], params)
    return jnp.concatenate([field, _joint_power(x, params)[None]])


def _strike_keeping_work(t, x, params):
    return jnp.concatenate([_STRIKE.reset(t, x[:10], params), x[10:]])


def _strike_observables(t, x_minus, x_plus, params):
    return _STRIKE.observe(t, x_minus[:10], x_plus[:10], params)


WORK_SYSTEM = hx.HybridSystem(
    (hx.Mode(_field_and_power, "single_support"),),
    (
        hx.Transition(
            "single_support",
            "single_support",
            _STRIKE.guard,
            False,
            _strike_keeping_work,
            "heelstrike",
            observe=_strike_observables,
            arm=_STRIKE.arm,
        ),
    ),
    n_states=11,
)


@jax.jit
def _simulate(x0, params, t_max):
    """The walker from the minimal state `x0` through `N_EVENTS` heel strikes:
    the solution on the minimal states, and the joint torques' work over each
    step."""
    settings = hx.Settings(rtol=TOL, atol=TOL, t_max=t_max)
    x0 = jnp.concatenate([x0, jnp.zeros(1, x0.dtype)])
    solution = hx.simulate(
        WORK_SYSTEM, x0, params, n_events=N_EVENTS, settings=settings, n_save=20
    )
    work = jnp.diff(solution.x_before[:, 10], prepend=0.0)
    solution = eqx.tree_at(
        lambda s: (s.x_before, s.x_after, s.x_phase, s.x_final),
        solution,
        (
            solution.x_before[:, :10],
            solution.x_after[:, :10],
            solution.x_phase[..., :10],
            solution.x_final[:10],
        ),
    )
    return solution, work


# Its tests are slow: the biped's simulation compiles for 12 s of the fast set's
# cold run on 2 cores.
@pytest.fixture(scope="module")
def walk():
    """The default walker through five heel strikes."""
    x0 = b5.default_state(PARAMS)
    solution, _ = _simulate(x0, PARAMS, jnp.asarray(20.0))
    assert bool(solution.result == hx.RESULTS.successful)
    return solution


# Slow: 13 s of the fast set's cold run (the biped's simulation compiles).
@pytest.mark.slow
def test_energy_is_conserved_without_torques():
    """Zero gains, single support from a state with the swing foot off the ground:
    T + V (typed from the seed's eqs. 6-7) stays constant."""
    x0 = jnp.array([-0.1, -0.05, 0.1, 0.3, 0.5, 1.0, 0.8, -0.3, -1.5, -2.0])
    solution, _ = _simulate(x0, PASSIVE, jnp.asarray(0.25))
    s = _seed_symbols(PASSIVE)
    samples = np.asarray(solution.x_phase[0])
    samples = samples[np.all(np.isfinite(samples), axis=1)]
    assert samples.shape[0] > 3
    # The stance foot is the only contact: no event in this short run.
    assert int(solution.n_events) == 0
    totals = np.array([sum(_energies(x, s)) for x in samples])
    scale = abs(_energies(np.asarray(x0), s)[1])
    np.testing.assert_allclose(totals - totals[0], 0.0, atol=1e-9 * scale)
    # ... which moves: the kinetic energy changes by far more than that.
    kinetic = np.array([_energies(x, s)[0] for x in samples])
    assert np.ptp(kinetic) > 1.0


@pytest.mark.slow
def test_heel_strike_energy_split_and_momenta(walk):
    """At each heel strike (x-: before, stance foot at the origin; x+: after, legs
    relabelled, the landing foot at the origin): T(x-) = T_a + T_c and T(x+) = T_a;
    no impulse reaches the walker but at the landing foot, the hip and the knees,
    so the whole walker's angular momentum about the landing foot, the trunk's and
    the trailing leg's about the hip and the trailing shank's about its knee are
    conserved; the linear momentum jumps by the impulse; the trailing foot leaves
    the ground."""
    s = _seed_symbols(PARAMS)
    observed = walk.observables
    for e in range(N_EVENTS):
        before = np.asarray(walk.x_before[e])
        after = np.asarray(walk.x_after[e])
        T_c, T_a = float(walk.T_c[e]), float(walk.T_a[e])
        assert T_c > 0 and T_a > 0
        np.testing.assert_allclose(_energies(before, s)[0], T_a + T_c, rtol=1e-11)
        np.testing.assert_allclose(_energies(after, s)[0], T_a, rtol=1e-11)
        pre, post = _kinematics(before, s), _kinematics(after, s)
        landing = pre["foot2"][0]
        # The landing foot is on the ground and, after the relabelling, at rest.
        assert abs(landing[1]) < 1e-9
        # Positions do not jump: the post-impact frame is shifted by `landing`.
        np.testing.assert_allclose(post["hip"] + landing, pre["hip"], atol=1e-12)
        whole = (range(5), range(5), landing, np.zeros(2))
        trunk = ((2,), (2,), pre["hip"], post["hip"])
        trailing_leg = ((0, 1), (4, 3), pre["hip"], post["hip"])
        trailing_shank = ((0,), (4,), pre["knee"], post["knee2"])
        for seg_pre, seg_post, o_pre, o_post in (
            whole,
            trunk,
            trailing_leg,
            trailing_shank,
        ):
            L_pre = _angular_momentum(pre, s, seg_pre, o_pre)
            L_post = _angular_momentum(post, s, seg_post, o_post)
            np.testing.assert_allclose(L_post, L_pre, rtol=1e-10, atol=1e-10)
        # H (qd+ - qd-) = G^T impulse: its rows of the foot's coordinates are the
        # linear momentum.
        jump = _linear_momentum(post, s) - _linear_momentum(pre, s)
        np.testing.assert_allclose(jump, observed["impulse"][e], rtol=1e-10)
        assert float(observed["impulse"][e][1]) > 0  # the ground pushes up
        assert float(observed["trailing_vertical_velocity"][e]) > 0


@jax.jit
def _descriptor_and_minimal(x, params):
    """The descriptor form's vector field and reset at x (minimal state lifted to
    the descriptor coordinates), and the minimal form's."""
    system, _ = b5.descriptor()
    x_desc = b5.descriptor_from_minimal(x)
    mode, strike = system.modes[0], system.transitions[0]
    minimal_mode, minimal_strike = SYSTEM.modes[0], SYSTEM.transitions[0]
    return (
        mode.vector_field(0.0, x_desc, params),
        strike.reset(0.0, x_desc, params),
        minimal_mode.vector_field(0.0, x, params),
        minimal_strike.reset(0.0, x, params),
    )


@pytest.mark.slow
def test_forms_retrace_the_minimal_walk(walk, tmp_path):
    """`hybrax simulate biped5 --form momentum` (the seed's (theta, P) state,
    eqs. 17-19, the impact a jump of P) gives the minimal form's event times and
    states, and writes the figures."""
    code = main(
        ["simulate", "biped5", "--form", "momentum", "--out", str(tmp_path)]
        + ["--json", str(tmp_path / "run.json")]
    )
    assert code == 0
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["status"] == "successful" and len(data["events"]) == N_EVENTS
    assert data["state_names"][:2] == ["theta_1", "theta_2"]
    for name in ("stick_figure.png", "animation.gif", "energy.png"):
        assert (tmp_path / name).is_file(), name
    events = data["events"]
    np.testing.assert_allclose([e["t"] for e in events], walk.t_events, atol=1e-8)
    for key, ours in (("state_before", walk.x_before), ("state_after", walk.x_after)):
        np.testing.assert_allclose([e[key] for e in events], ours, atol=1e-7)
    np.testing.assert_allclose([e["T_c"] for e in events], walk.T_c, rtol=1e-7)

    # The descriptor form (stance foot held at the origin by the KKT system) has
    # the minimal form's accelerations and heel strike, the stance foot at rest,
    # on the walk's pre-impact states.
    for x in np.asarray(walk.x_before):
        field, reset, minimal_field, minimal_reset = _descriptor_and_minimal(
            jnp.asarray(x), PARAMS
        )
        np.testing.assert_allclose(field[9:], minimal_field[5:], rtol=1e-10)
        np.testing.assert_allclose(field[7:9], 0.0, atol=1e-10)
        np.testing.assert_allclose(
            b5.descriptor_to_minimal(reset), minimal_reset, atol=1e-12
        )
        np.testing.assert_allclose(reset[:2], 0.0, atol=1e-12)
        np.testing.assert_allclose(reset[7:9], 0.0, atol=1e-10)


# -- The periodic gait ----------------------------------------------------------------
# Slow: `hybrax orbit biped5` (the module's `orbit`) takes 35-41 s cold on 2 cores,
# the fast set's largest fixture with the jumper's.


@pytest.fixture(scope="module")
def orbit(tmp_path_factory):
    """`hybrax orbit biped5` with its defaults: the JSON and the output folder."""
    out = tmp_path_factory.mktemp("orbit")
    code = main(["orbit", "biped5", "--out", str(out), "--json", str(out / "o.json")])
    assert code == 0
    return json.loads((out / "o.json").read_text()), out


def _section_unknowns(x):
    """The section's reduced unknowns (all but theta_5) of minimal states."""
    x = np.asarray(x)
    return np.concatenate([x[..., :4], x[..., 5:]], axis=-1)


@pytest.mark.slow
def test_orbit_is_the_settled_walk(orbit):
    """`hybrax orbit biped5` converges from the model's guess onto the gait that
    simulation settles on; its state lies on the section (both feet on the
    ground); its summary and the bundle's orbit quantities follow their
    definitions, on kinematics typed from the seed."""
    data, out = orbit
    assert data["converged"] and data["status"] == "successful"
    assert data["residual_norm"] < 1e-10
    np.testing.assert_allclose(data["period"], SETTLED_PERIOD, rtol=1e-9)
    np.testing.assert_allclose(data["T_c"], SETTLED_T_C, rtol=1e-9)
    state = np.asarray(data["state"])
    s = _seed_symbols(PARAMS)
    k = _kinematics(state, s)
    trailing_foot, _ = k["foot2"]
    assert abs(trailing_foot[1]) < 1e-12  # on the ground, behind the stance foot
    step = -trailing_foot[0]
    np.testing.assert_allclose(data["step_length"], step, rtol=1e-12)
    np.testing.assert_allclose(data["speed"], step / data["period"], rtol=1e-12)
    np.testing.assert_allclose(
        data["Tc_over_T"], data["T_c"] / (data["T_c"] + data["T_a"]), rtol=1e-12
    )
    # The impact leaves the kinetic energy T_a of the post-impact state.
    np.testing.assert_allclose(_energies(state, s)[0], data["T_a"], rtol=1e-10)
    assert data["trailing_foot_leaves"] and data["trailing_vertical_velocity"] > 0
    # The bundle's quantities on the same orbit (they read these fields only).
    bundle = hx.models.get_model("biped5")
    stand_in = SimpleNamespace(
        state=jnp.asarray(state),
        period=jnp.asarray(data["period"]),
        T_c=jnp.asarray([data["T_c"]]),
        T_a=jnp.asarray([data["T_a"]]),
        spectral_radius=jnp.asarray(abs(complex(*data["multipliers_ad"][0]))),
        cycle=SimpleNamespace(
            phase_observables={
                name: jnp.asarray([data[name]])
                for name in ("effort", "work", "positive_work")
            },
            observables={
                "trailing_vertical_velocity": jnp.asarray(
                    [data["trailing_vertical_velocity"]]
                )
            },
        ),
    )
    expected = {
        "period": data["period"],
        "step_length": step,
        "speed": step / data["period"],
        "energy_lost": data["T_c"],
        "T_c": data["T_c"],
        "T_a": data["T_a"],
        "Tc_over_T": data["Tc_over_T"],
        "trailing_vertical_velocity": data["trailing_vertical_velocity"],
        "trailing_foot_leaves": True,
        "multiplier": abs(complex(*data["multipliers_saltation"][0])),
        # T_c / (M g d), the total mass summed from the seed's segments.
        "cost_of_transport": data["T_c"]
        / (sum(s[f"M{j}"] for j in range(1, 6)) * s["g"] * step),
        # The step's integrals (checked against the energy balance below).
        "effort": data["effort"],
        "work": data["work"],
        "positive_work": data["positive_work"],
    }
    assert set(bundle.quantities) == set(expected)
    for name, quantity in bundle.quantities.items():
        np.testing.assert_allclose(
            float(quantity(stand_in, PARAMS)), expected[name], rtol=1e-9, err_msg=name
        )
    # The chart puts the guess on the section and reads it back.
    section = b5.section()
    guess = b5.orbit_guess(PARAMS)
    x_guess = np.asarray(section.chart(guess, PARAMS))
    assert abs(_kinematics(x_guess, s)["foot2"][0][1]) < 1e-14
    np.testing.assert_allclose(section.coordinates(x_guess, PARAMS), guess)
    np.testing.assert_allclose(_section_unknowns(state), guess, atol=1e-6)
    # The descriptor form's section: the same unknowns, the stance foot at rest at
    # the origin.
    descriptor = b5.descriptor_section()
    x_desc = np.asarray(descriptor.chart(guess, PARAMS))
    np.testing.assert_array_equal(x_desc[[0, 1, 7, 8]], 0.0)
    np.testing.assert_array_equal(b5.descriptor_to_minimal(x_desc), x_guess)
    np.testing.assert_allclose(descriptor.coordinates(x_desc, PARAMS), guess)
    np.testing.assert_allclose(
        b5.step_length(jnp.asarray(x_desc), PARAMS),
        b5.step_length(jnp.asarray(x_guess), PARAMS),
    )
    for name in ("orbit.png", "energy.png", "stick_figure.png", "animation.gif"):
        assert (out / name).is_file(), name


@pytest.mark.slow
def test_orbit_multipliers_two_ways(orbit):
    """The monodromy by autodiff through the cycle and by the saltation product
    agree, and so do their multipliers; the reduced Jacobian's eigenvalues are the
    nontrivial multipliers; the verdict follows the multipliers."""
    data, _ = orbit
    assert data["max_discrepancy"] < 1e-7
    ad = np.array([complex(*v) for v in data["multipliers_ad"]])
    saltation = np.array([complex(*v) for v in data["multipliers_saltation"]])
    assert ad.shape == (9,)  # 10 states less the trivial multiplier
    np.testing.assert_allclose(ad, saltation, atol=1e-7)
    for key in ("trivial_multiplier_ad", "trivial_multiplier_saltation"):
        np.testing.assert_allclose(data[key], [1, 0], atol=1e-8)
    eig = np.array([complex(*v) for v in data["reduced_jacobian_eigenvalues"]])
    np.testing.assert_allclose(
        np.sort_complex(eig), np.sort_complex(saltation), atol=1e-8
    )
    assert data["stable"] == bool(np.all(np.abs(saltation) < 1))
    # The default gait is stable: a real leading multiplier 0.36 and a flip
    # multiplier -0.34 (a disturbed walk alternates in part between longer and
    # shorter steps).
    assert data["stable"]
    np.testing.assert_allclose(saltation[:2], [0.3607, -0.3374], atol=1e-4)


@pytest.mark.slow
def test_simulation_repeats_the_orbit_and_balances_energy(orbit):
    """From the orbit's state, `hybrax.simulate` (the event engine alone, without
    shooting) returns to the same post-impact state at every heel strike, one
    period apart. On level ground the walker's energy is the same after every
    heel strike, so the joint torques' net work over a step equals the energy lost
    at its heel strike, T_c (the impact's projection): the work is their power,
    tau . phi_dot on the joint angles typed here, integrated along the step with
    the state (at the same tolerance), and it is also the energy (typed from the
    seed) gained between the step's start and its heel strike."""
    data, _ = orbit
    state = np.asarray(data["state"])
    solution, work = _simulate(jnp.asarray(state), PARAMS, jnp.asarray(20.0))
    assert bool(solution.result == hx.RESULTS.successful)
    np.testing.assert_allclose(
        solution.x_after, np.tile(state, (N_EVENTS, 1)), atol=1e-8
    )
    steps = np.diff(np.asarray(solution.t_events), prepend=0.0)
    np.testing.assert_allclose(steps, data["period"], rtol=1e-9)
    np.testing.assert_allclose(solution.T_c, data["T_c"], rtol=1e-9)
    np.testing.assert_allclose(work, data["T_c"], rtol=1e-8)
    # The model's own integrals (hybrax.Integral: Gauss quadrature on the dense
    # output of the command's simulation) against this one, integrated with the
    # state; the positive work is at least the net, the effort positive.
    np.testing.assert_allclose(data["work"], work[0], rtol=1e-8)
    assert data["positive_work"] >= data["work"] > 0 and data["effort"] > 0
    s = _seed_symbols(PARAMS)
    for e in range(N_EVENTS):
        start = np.asarray(solution.x_phase[e][0])
        end = np.asarray(solution.x_before[e])
        gain = sum(_energies(end, s)) - sum(_energies(start, s))
        np.testing.assert_allclose(work[e], gain, rtol=1e-8)


@pytest.mark.slow
def test_disturbed_walk_converges_at_the_leading_multipliers(orbit):
    """The gait is stable: a start off the orbit (on the section) returns to it,
    step by step as the reduced Jacobian M predicts (u_k - u* = M^k (u_0 - u*)
    while small), and its components along M's left eigenvectors w (w^T M =
    nu w^T) shrink by the leading multiplier nu_1 = 0.36 and flip with nu_2 =
    -0.34 at each heel strike."""
    data, _ = orbit
    state = np.asarray(data["state"])
    u_star = _section_unknowns(state)
    M = np.asarray(data["reduced_jacobian"])
    nu, W = np.linalg.eig(M.T)
    order = np.argsort(-np.abs(nu))
    nu, W = nu[order], W[:, order]
    assert np.all(nu.imag[:2] == 0)
    du = 1e-4 * np.random.default_rng(0).standard_normal(9)
    x0 = b5.section().chart(jnp.asarray(u_star + du), PARAMS)
    solution, _ = _simulate(x0, PARAMS, jnp.asarray(20.0))
    assert bool(solution.result == hx.RESULTS.successful)
    deviations = _section_unknowns(solution.x_after) - u_star
    deviations = np.concatenate([du[None], deviations])
    norms = np.linalg.norm(deviations, axis=1)
    assert np.all(np.diff(norms[1:]) < 0) and norms[-1] < 0.05 * norms[1]
    predicted = [du]
    for _ in range(N_EVENTS):
        predicted.append(M @ predicted[-1])
    error = np.linalg.norm(deviations - np.array(predicted), axis=1)
    assert np.all(error < 1e-3 * norms)
    for j, atol in ((0, 5e-3), (1, 1e-3)):
        along = deviations @ W[:, j].real
        np.testing.assert_allclose(along[1:] / along[:-1], nu[j].real, atol=atol)


def test_parameters_are_checked():
    model = hx.models.get_model("biped5")
    with pytest.raises(ValueError, match="m_trunk"):
        model.make_params(m_trunk=-1.0)
    with pytest.raises(ValueError, match="unknown biped5 parameter"):
        model.make_params(mass=70.0)
    # Winter's segment masses add up to the body's 70 kg.
    p = model.make_params()
    np.testing.assert_allclose(p.m_trunk + 2 * (p.m_thigh + p.m_shank), 70.0)


@pytest.mark.slow
def test_period_doubling_curve_goes_on_past_its_first_points():
    """The period-doubling curve in the swing knee's and hip's set points, from the
    doubling at knee_swing_ref = 0.50245 (hip_swing_ref 0.5): its test function
    $\\det(M + I)$ comes from the variational equation under error control, so
    that it is smooth to the corrector's tolerance. Through the state's steps
    alone it jumped by about 3e-5 where the step sequence changed, and the curve
    stopped after three points with its step below `min_step`. Each point is
    checked by an independent orbit solve at its two parameters: a multiplier
    at -1 within 1e-4."""
    system, section = SYSTEM, b5.section()
    params = hx.canonical_params(dataclasses.replace(PARAMS, knee_swing_ref=0.50245))
    orbit = hx.find_periodic_orbit(system, section, b5.orbit_guess(params), params)
    assert orbit.succeeded
    doubling = hx.SpecialPoint(
        kind="period_doubling",
        index=0,
        parameter=0.50245,
        u=np.asarray(orbit.u),
        multipliers=None,
        multiplier_matrix=None,
        test_value=0.0,
        located=True,
    )
    curve = hx.continue_orbit_curve(
        system,
        section,
        doubling,
        params,
        "knee_swing_ref",
        "hip_swing_ref",
        stop=0.65,
        continuation_settings=hx.ContinuationSettings(
            max_points=8, initial_step=0.02, parameter_scale=1.0
        ),
    )
    assert curve.result == hx.RESULTS.max_points_reached, curve.branch.message
    # Eight points without a rejected step: hip_swing_ref 0.5 to 0.525 (it
    # stopped at 0.50033 before).
    assert len(curve.mu) == 8 and curve.mu[-1] > 0.52
    for knee, hip, u in zip(curve.lam[::3], curve.mu[::3], curve.u[::3]):
        p = hx.canonical_params(
            dataclasses.replace(
                PARAMS, knee_swing_ref=float(knee), hip_swing_ref=float(hip)
            )
        )
        check = hx.find_periodic_orbit(system, section, jnp.asarray(u), p)
        assert check.succeeded
        nu = np.asarray(check.floquet.multipliers_ad)
        assert np.min(np.abs(nu + 1)) < 1e-4
