"""The five-link biped as hybrid systems in its three formulations (minimal,
momentum and descriptor coordinates), with their guards, resets, integrals and
Poincaré sections.
"""

import jax
import jax.numpy as jnp

from ..._hybrid import (
    AbstractReset,
    Clearance,
    HybridSystem,
    Integral,
    Mode,
    Transition,
    mechanical_mode,
)
from ..._mechanics import (
    plastic_impact,
    point_velocity,
    symmetric_solve,
)
from ..._model import (
    check_form,
)
from ..._periodic import PoincareSection
from .._walking import fall
from .dynamics import (
    _JOINTS,
    _SWAP,
    DESCRIPTOR,
    MINIMAL,
    Biped5Params,
    _pinned,
    heel_strike,
    joint_torques,
    points,
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
    (Zanchi & Cecić 1993, eq. 17); batched on leading axes."""
    x = jnp.asarray(x, dtype=float)
    return _to_momentum(x.reshape(-1, 10), params).reshape(x.shape)


def momentum_to_minimal(x, params):
    r"""$(\theta, P) \to (\theta, \dot\theta)$ with $\dot\theta = I(\theta)^{-1}P$;
    batched on leading axes."""
    x = jnp.asarray(x, dtype=float)
    return _from_momentum(x.reshape(-1, 10), params).reshape(x.shape)


@jax.jit
def _momentum_field(t, x, params):
    r"""Zanchi & Cecić (1993) eqs. (18)-(19): $\dot\theta = I^{-1}P$,
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


def _swing_foot_above_foothold(t, x, params):
    r"""The heel strike's guard: the swing foot's height above the next foothold
    (`step_height` above the ground through the stance foot) over the leg's
    length."""
    return _swing_foot_height(t, x, params) - params.step_height / _leg_length(params)


# How far (over the leg's length) the swing foot must be ahead of the stance foot
# before a heel strike can fire: past the mid-stance scuff and the step's start.
_ARMING_DISTANCE = 0.1


def _swing_foot_ahead(t, x, params):
    del t
    return _swing_foot(x[:5], params)[0] / _leg_length(params) - _ARMING_DISTANCE


def _descriptor_swing_foot_height(t, x, params):
    return _swing_foot_height(t, x[2:7], params)


def _descriptor_swing_foot_above_foothold(t, x, params):
    return _swing_foot_above_foothold(t, x[2:7], params)


def _descriptor_swing_foot_ahead(t, x, params):
    return _swing_foot_ahead(t, x[2:7], params)


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

    def released(self):
        return ("trailing_vertical_velocity",)

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        return _observables(heel_strike(x_minus[:5], x_minus[5:], params)[2])


class MomentumHeelStrike(AbstractReset):
    r"""The heel strike as a jump of the momentum, $(\theta, P^-) \to (\theta^+,
    P^+)$ with $P^+ = I(\theta^+)\dot\theta^+$ (Zanchi & Cecić 1993, eq. 16)."""

    def __call__(self, t, x, params):
        del t
        x_min = momentum_to_minimal(x, params)
        theta, theta_dot, _ = heel_strike(x_min[:5], x_min[5:], params)
        return momentum_from_minimal(jnp.concatenate([theta, theta_dot]), params)

    def released(self):
        return ("trailing_vertical_velocity",)

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

    def released(self):
        return ("trailing_vertical_velocity",)

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        q, qd = x_minus[:7], x_minus[7:]
        result = plastic_impact(DESCRIPTOR, ("swing",), q, qd, params)
        return _observables(result)


def _strike(reset, guard=_swing_foot_above_foothold, arm=_swing_foot_ahead):
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


def _phase_observables(angles_and_rates, swing_foot_height=_swing_foot_height):
    r"""The step's integrals (see `_integrals`) and the swing foot's clearance,
    `swing_clearance`: its lowest height (over the leg's length) inside the
    step, where it passes the stance foot with its knee bent (the ends of the
    step, where it leaves and strikes the ground, excluded). Below zero the
    foot would scuff the ground, which the model does not resolve (its heel
    strike is armed only with the foot ahead): a branch reports a `grazing`
    where it reaches zero."""
    return {
        **_integrals(angles_and_rates),
        "swing_clearance": Clearance(swing_foot_height),
    }


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
                observables=_phase_observables(_minimal_angles),
            ),
        ),
        (_strike(HeelStrike()), _fall()),
        n_states=10,
    )
    return system, Biped5Params()


def momentum() -> tuple[HybridSystem, Biped5Params]:
    r"""The generalized-momentum form, $x = (\theta, P)$ (Zanchi & Cecić 1993,
    eqs. 17-19)."""
    system = HybridSystem(
        (
            Mode(
                _momentum_field,
                "single_support",
                observables=_phase_observables(_momentum_angles),
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
        observables=_phase_observables(
            _descriptor_angles, _descriptor_swing_foot_height
        ),
    )
    system = HybridSystem(
        (mode,),
        (
            _strike(
                DescriptorHeelStrike(),
                _descriptor_swing_foot_above_foothold,
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
