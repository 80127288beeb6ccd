"""`hybrax.LagrangianModel` (mass matrix and forces from T, V and Q by autodiff)
against equations written by hand: the hopper's hand-written constrained mechanics
(Zana et al. 2018 eqs. 7-10) and the closed-form double pendulum with a
time-dependent shoulder torque and an elbow torque."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax.models import hopper


# -- The hopper: T, V and the damper's force written here ------------------------


def _hopper_masses(p):
    m_U, m_L = p.mu * p.m, (1 - p.mu) * p.m
    return jnp.stack(
        [p.mu_U * m_U, (1 - p.mu_U) * m_U, p.mu_L * m_L, (1 - p.mu_L) * m_L]
    )


def _hopper_kinetic(q, qd, p):
    return 0.5 * jnp.sum(_hopper_masses(p) * qd**2)


def _hopper_potential(q, p):
    # Gravity on the four masses and the spring between z_2 and z_3.
    spring = 0.5 * p.k * (q[1] - q[2] - p.L0) ** 2
    return p.g * jnp.sum(_hopper_masses(p) * q) + spring


def _hopper_damper(d_name):
    def damper(t, q, qd, p):
        # The damper's tension d (zd_2 - zd_3) pulls z_2 down and z_3 up.
        f = getattr(p, d_name) * (qd[1] - qd[2])
        zero = jnp.zeros((), q.dtype)
        return jnp.stack([zero, -f, f, zero])

    return damper


def _hopper_constraints(q, p):
    del p
    return {"body": jnp.stack([q[0] - q[1], q[2] - q[3]]), "ground": q[3:4]}


@eqx.filter_jit
def _hopper_both(models, q, qd, params):
    """H, C and the constrained accelerations (both groups) of each model."""

    def one(model):
        qdd, lam = hx.constrained_accelerations(
            model, ("body", "ground"), q, qd, params
        )
        return model.mass_matrix(q, params), model.forces(q, qd, params), qdd, lam

    return [one(model) for model in models]


@pytest.mark.parametrize("phase,d_name", [("flight", "d_F"), ("ground", "d_G")])
def test_hopper_mechanics_from_its_energies(phase, d_name, getkey):
    params = hx.canonical_params(hopper.HopperParams())
    built = hx.LagrangianModel(
        _hopper_kinetic,
        _hopper_potential,
        generalized_forces=_hopper_damper(d_name),
        constraint_groups=_hopper_constraints,
    )
    q = jax.random.normal(getkey(), (4,)) + 1.0
    qd = jax.random.normal(getkey(), (4,))
    (H, C, qdd, lam), (H0, C0, qdd0, lam0) = _hopper_both(
        (built, hopper.HopperMechanics(phase)), q, qd, params
    )
    np.testing.assert_allclose(H, H0, rtol=1e-14, atol=1e-12)
    np.testing.assert_allclose(C, C0, rtol=1e-13, atol=1e-10)
    np.testing.assert_allclose(qdd, qdd0, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(lam, lam0, rtol=1e-12, atol=1e-8)


# -- The double pendulum: closed forms ---------------------------------------------

# Point masses m1, m2 on massless rods l1, l2; absolute angles phi1, phi2 from the
# downward vertical; a shoulder torque A cos(w t) and an elbow torque tau acting
# between the rods (on phi2 - phi1).
PEND = {"m1": 1.3, "m2": 0.7, "l1": 0.9, "l2": 0.6, "g": 9.81}
PEND.update(A=2.0, w=3.0, tau=-0.4)
PEND = {key: jnp.asarray(value) for key, value in PEND.items()}


def _elbow(q, p):
    return p["l1"] * jnp.stack([jnp.sin(q[0]), -jnp.cos(q[0])])


def _tip(q, p):
    return _elbow(q, p) + p["l2"] * jnp.stack([jnp.sin(q[1]), -jnp.cos(q[1])])


def _pendulum_kinetic(q, qd, p):
    v1 = hx.point_velocity(_elbow, q, qd, p)
    v2 = hx.point_velocity(_tip, q, qd, p)
    return 0.5 * (p["m1"] * v1 @ v1 + p["m2"] * v2 @ v2)


def _pendulum_potential(q, p):
    return p["g"] * (p["m1"] * _elbow(q, p)[1] + p["m2"] * _tip(q, p)[1])


def _pendulum_torques(t, q, qd, p):
    # The elbow angle is phi2 - phi1: its torque enters as (d phi / d q)^T tau.
    shoulder = p["A"] * jnp.cos(p["w"] * t)
    return jnp.stack([shoulder - p["tau"], p["tau"]])


PENDULUM = hx.LagrangianModel(
    _pendulum_kinetic, _pendulum_potential, generalized_forces=_pendulum_torques
)


def _pendulum_closed_form(q, qd, t, p):
    """H and C (left-hand side, torques included) written out by hand."""
    p = {key: float(value) for key, value in p.items()}
    m1, m2, l1, l2, g = p["m1"], p["m2"], p["l1"], p["l2"], p["g"]
    c, s = math.cos(q[0] - q[1]), math.sin(q[0] - q[1])
    H = np.array(
        [[(m1 + m2) * l1**2, m2 * l1 * l2 * c], [m2 * l1 * l2 * c, m2 * l2**2]]
    )
    C = np.array(
        [
            m2 * l1 * l2 * s * qd[1] ** 2 + (m1 + m2) * g * l1 * math.sin(q[0]),
            -m2 * l1 * l2 * s * qd[0] ** 2 + m2 * g * l2 * math.sin(q[1]),
        ]
    )
    Q = np.array([p["A"] * math.cos(p["w"] * t) - p["tau"], p["tau"]])
    return H, C - Q


@jax.jit
def _pendulum_all(q, qd, t, params):
    qdd, lam = hx.constrained_accelerations(PENDULUM, (), q, qd, params, t)
    return {
        "H": PENDULUM.mass_matrix(q, params),
        "C": PENDULUM.forces(q, qd, params, t),
        "qdd": qdd,
        "lam": lam,
        "tip_velocity": hx.point_velocity(_tip, q, qd, params),
        "constraints": PENDULUM.constraints(q, params),
    }


def test_double_pendulum_closed_form(getkey):
    for _ in range(3):
        q = np.asarray(jax.random.uniform(getkey(), (2,), minval=-3.0, maxval=3.0))
        qd = np.asarray(jax.random.normal(getkey(), (2,)) * 2.0)
        t = float(jax.random.uniform(getkey(), (), maxval=5.0))
        out = _pendulum_all(jnp.asarray(q), jnp.asarray(qd), jnp.asarray(t), PEND)
        H, C = _pendulum_closed_form(q, qd, t, PEND)
        np.testing.assert_allclose(out["H"], H, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(out["C"], C, rtol=1e-12, atol=1e-12)
        # The time reaches the generalized forces through constrained_accelerations.
        np.testing.assert_allclose(out["qdd"], np.linalg.solve(H, -C), rtol=1e-11)
        assert out["lam"].shape == (0,) and out["constraints"] == {}
        l1, l2 = float(PEND["l1"]), float(PEND["l2"])
        tip = l1 * qd[0] * np.array([math.cos(q[0]), math.sin(q[0])]) + l2 * qd[
            1
        ] * np.array([math.cos(q[1]), math.sin(q[1])])
        np.testing.assert_allclose(out["tip_velocity"], tip, rtol=1e-13)


def test_builder_refuses_non_callables():
    with pytest.raises(ValueError, match="`kinetic`"):
        hx.LagrangianModel(3.0)
    with pytest.raises(ValueError, match="`potential`"):
        hx.LagrangianModel(_pendulum_kinetic, potential=1.0)


def test_a_singular_kinetic_energy_has_its_own_status():
    """A kinetic energy that involves only qd_0 + qd_1 (a rank-one mass matrix):
    the run ends at once with status `singular_dynamics` (it ran to
    `max_steps_reached`, each step rejected on NaN accelerations); the same model
    with a full kinetic energy runs."""

    def singular(q, qd, p):
        return 0.5 * (qd[0] + qd[1]) ** 2

    def regular(q, qd, p):
        return 0.5 * (qd[0] ** 2 + qd[1] ** 2)

    def potential(q, p):
        return 9.81 * q[0]

    def run(kinetic):
        model = hx.LagrangianModel(kinetic, potential)
        floor = hx.Transition("free", "free", lambda t, x, p: x[0], False, name="floor")
        system = hx.HybridSystem(
            (hx.mechanical_mode(model, (), "free"),), (floor,), n_states=4
        )
        return hx.simulate(system, jnp.array([1.0, 0.0, 0.0, 0.0]), {}, n_events=1)

    assert hx.status_name(run(singular).result) == ["singular_dynamics"]
    assert "singular" in hx.status_message(run(singular).result)[0]
    free = run(regular)
    assert hx.status_name(free.result) == ["successful"]
    np.testing.assert_allclose(free.t_events[0], np.sqrt(2 / 9.81), rtol=1e-10)
