r"""The vertical hopper of Zana, Bodor, Bencsik & Zelei (2018), Math. Comput. Appl.
23(4):74, in its constrained (four-coordinate) and minimal (two-coordinate) forms.

Two masses move vertically, joined by an active spring-damper of tension
$T = k(z_U - z_L - L_0) + d(\dot z_U - \dot z_L)$: the upper mass $m_U = \mu m$ feels
$-T - m_U g$, the lower mass $m_L = (1-\mu)m$ feels $T - m_L g$. The damping
is $d_F > 0$ in flight and $d_G < 0$ on the ground, where the negative damper pumps
in the energy that the plastic touchdown takes out.

- Flight $\to$ ground (touchdown): $z_L$ crosses 0 downward; plastic impact
  $\dot z_L \to 0$ (the projection $P_a$, eq. 26).
- Ground $\to$ flight (lift-off): the ground multiplier $\lambda_g$ crosses 0 from
  negative (ground pushes) to positive (ground would have to pull); no reset.

State in minimal coordinates $x = [z_U, z_L, \dot z_U, \dot z_L]$; the constrained form
uses $q = [z_1, z_2, z_3, z_4]$ with $z_1 = z_2 = z_U$, $z_3 = z_4 = z_L$ and state
$x = [q, \dot q]$ (8 entries).
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from .._continuation_parameter import FieldParameter
from .._hybrid import (
    AbstractReset,
    ContactForceGuard,
    Extremum,
    HybridSystem,
    Mode,
    PlasticImpact,
    Transition,
    mechanical_mode,
)
from .._mechanics import AbstractLagrangianModel
from .._misc import array_module
from .._model import (
    SPECTRAL_RADIUS,
    Quantity,
    check_form,
    impact_quantities,
    orbit_period,
)
from .._params import (
    FRACTION,
    POSITIVE,
    AbstractParams,
    check_names,
    field_names,
    parameter_field,
    parameter_table,
)
from .._periodic import PoincareSection
from .._robustness import Disturbance


class HopperParams(AbstractParams):
    r"""Parameters of the vertical hopper (SI units; defaults: the paper's
    section 4.2). The masses: $m_U = \mu m$, $m_L = (1-\mu)m$; the constrained
    form splits them as $m_1 = \mu_U m_U$, $m_2 = (1-\mu_U)m_U$, $m_3 = \mu_L
    m_L$, $m_4 = (1-\mu_L)m_L$. Eager construction checks the values
    ([`hybrax.models.hopper.make_params`][] also accepts $D_G$)."""

    g: float = parameter_field(
        9.81, "m/s^2", "gravitational acceleration", bound=POSITIVE
    )
    m: float = parameter_field(75.0, "kg", "total mass", bound=POSITIVE)
    mu: float = parameter_field(0.8, "1", "upper-mass fraction m_U / m", bound=FRACTION)
    k: float = parameter_field(15000.0, "N/m", "spring stiffness", bound=POSITIVE)
    d_F: float = parameter_field(150.0, "N s/m", "flight damping")
    d_G: float = parameter_field(
        -80.0, "N s/m", "ground damping (negative: energy input)"
    )
    L0: float = parameter_field(1.0, "m", "unstretched spring length", bound=POSITIVE)
    mu_U: float = parameter_field(
        0.5, "1", "split of the upper mass in the constrained form", bound=FRACTION
    )
    mu_L: float = parameter_field(
        0.5, "1", "split of the lower mass in the constrained form", bound=FRACTION
    )
    step_height: float = parameter_field(
        0.0, "m", "ground at the next touchdown above the last lift-off's"
    )

    @property
    def m_U(self):
        r"""Upper mass $m_U = \mu m$."""
        return self.mu * self.m

    @property
    def m_L(self):
        r"""Lower mass $m_L = (1-\mu) m$."""
        return (1 - self.mu) * self.m

    @property
    def D_G(self):
        r"""Dimensionless ground damping $D_G = d_G / (2\sqrt{k m})$."""
        return self.d_G / (2 * jnp.sqrt(self.k * self.m))

    @property
    def D_F(self):
        r"""Dimensionless flight damping $D_F = d_F / (2\sqrt{k m})$."""
        return self.d_F / (2 * jnp.sqrt(self.k * self.m))


FIELD_NAMES = field_names(HopperParams)
#: Parameters with their units and meaning, the derived ones last.
PARAMETERS = {
    **parameter_table(HopperParams),
    "D_G": "1, dimensionless ground damping d_G / (2 sqrt(k m))",
    "D_F": "1, dimensionless flight damping d_F / (2 sqrt(k m))",
}


def make_params(*, D_G=None, D_F=None, **values) -> HopperParams:
    r"""Build [`hybrax.models.hopper.HopperParams`][], optionally from dimensionless
    damping.

    `D_G` and `D_F` set $d = 2D\sqrt{k m}$ (the paper's $D = d/(2\alpha m)$ with
    $\alpha = \sqrt{k/m}$). Values may be traced (under `jit`, `grad`, `vmap`: a
    gradient reaches `D_G` through $d_G$); concrete ones are checked eagerly.
    Unknown names raise `ValueError`.
    """
    check_names(HopperParams, values, PARAMETERS, "hopper")
    if D_G is not None and "d_G" in values:
        raise ValueError("Give either `d_G` or `D_G`, not both.")
    if D_F is not None and "d_F" in values:
        raise ValueError("Give either `d_F` or `D_F`, not both.")
    base = HopperParams(**values)
    if D_G is not None:
        values["d_G"] = D_G * _damping_scale(base)
    if D_F is not None:
        values["d_F"] = D_F * _damping_scale(base)
    # Checks the final values (concrete ones; traced ones report through statuses).
    return HopperParams(**values)


def _damping(params: HopperParams, phase: str):
    return params.d_F if phase == "flight" else params.d_G


class HopperMechanics(AbstractLagrangianModel):
    r"""The constrained four-coordinate hopper, Zana et al. (2018) eqs. (7)-(10).

    $H = \mathrm{diag}(m_1, m_2, m_3, m_4)$,
    $C = [0, T, -T, 0]^T + g[m_1, m_2, m_3, m_4]^T$ with
    $T = k(z_2 - z_3 - L_0) + d(\dot z_2 - \dot z_3)$, $d = d_F$ or $d_G$ by `phase`;
    constraint groups `"body"`: $[z_1 - z_2, z_3 - z_4]$ and `"ground"`:
    $[z_4 - h]$, with $h$ the ground's height (`step_height`, 0 on flat ground).
    """

    phase: str = eqx.field(static=True)

    def masses(self, params: HopperParams):
        m_U, m_L = params.m_U, params.m_L
        return jnp.stack(
            [
                params.mu_U * m_U,
                (1 - params.mu_U) * m_U,
                params.mu_L * m_L,
                (1 - params.mu_L) * m_L,
            ]
        )

    def mass_matrix(self, q, params):
        return jnp.diag(self.masses(params).astype(q.dtype))

    def forces(self, q, qd, params, t=0.0):
        del t  # the hopper's forces do not depend on time
        d = _damping(params, self.phase)
        T = params.k * (q[1] - q[2] - params.L0) + d * (qd[1] - qd[2])
        zero = jnp.zeros((), q.dtype)
        spring = jnp.stack([zero, T, -T, zero])
        return spring + params.g * self.masses(params)

    def constraints(self, q, params):
        return {
            "body": jnp.stack([q[0] - q[1], q[2] - q[3]]),
            "ground": q[3:4] - params.step_height,
        }


def _weight(params: HopperParams):
    return params.m * params.g


def constrained() -> tuple[HybridSystem, HopperParams]:
    r"""Zana et al.'s (2018) constrained hopper: modes `"flight"` (constraints
    `body`) and `"ground"` (`body` + `ground`), transitions `"touchdown"` (guard
    $z_4 - h$, downward, plastic impact) and `"liftoff"` (guard $\lambda_g / (m g)$,
    upward, identity). State
    $[z_1, z_2, z_3, z_4, \dot z_1, \dot z_2, \dot z_3, \dot z_4]$."""
    flight = HopperMechanics("flight")
    ground = HopperMechanics("ground")
    touchdown = Transition(
        source="flight",
        target="ground",
        guard=_above_the_ground_constrained,
        direction=False,
        reset=PlasticImpact(ground, ("body", "ground")),
        name="touchdown",
    )
    liftoff = Transition(
        source="ground",
        target="flight",
        guard=ContactForceGuard(ground, ("body", "ground"), 2, _weight),
        direction=True,
        name="liftoff",
    )
    modes = (
        mechanical_mode(
            flight,
            ("body",),
            "flight",
            observables={
                "apex_upper": Extremum(_upper_height_constrained),
                "apex_lower": Extremum(_lower_height_constrained),
            },
            domain={_ABOVE_THE_FOOT: _spring_length_constrained},
        ),
        mechanical_mode(
            ground,
            ("body", "ground"),
            "ground",
            observables={
                "min_ground_force": Extremum(_ground_force_constrained, "min")
            },
            domain={_ABOVE_THE_FOOT: _spring_length_constrained},
        ),
    )
    return HybridSystem(modes, (touchdown, liftoff), n_states=8), HopperParams()


def _spring_length_constrained(t, x, params):
    """$z_2 - z_3$: the spring's length, positive (the upper mass above the foot)."""
    del t, params
    return x[1] - x[2]


#: The hopper's geometry in either form: the upper mass above the foot.
_ABOVE_THE_FOOT = "the upper mass above the foot"


def _upper_height_constrained(t, x, params):
    del t, params
    return x[1]


def _ground_force_constrained(t, x, params):
    del t
    return ground_force(to_minimal(x), params)


def _lower_height_constrained(t, x, params):
    del t, params
    return x[3]


def _above_the_ground_constrained(t, x, params):
    del t
    return x[3] - params.step_height


def _tension(x, params, d):
    return params.k * (x[0] - x[1] - params.L0) + d * (x[2] - x[3])


def _flight_field(t, x, params):
    del t
    T = _tension(x, params, params.d_F)
    a_U = -T / params.m_U - params.g
    a_L = T / params.m_L - params.g
    return jnp.stack([x[2], x[3], a_U, a_L]).astype(x.dtype)


def _ground_field(t, x, params):
    del t
    T = _tension(x, params, params.d_G)
    a_U = -T / params.m_U - params.g
    zero = jnp.zeros((), x.dtype)
    return jnp.stack([x[2], zero, a_U, zero]).astype(x.dtype)


def _lower_height(t, x, params):
    del t, params
    return x[1]


def _foot_falling(t, x, params):
    r"""$-\dot z_L$: the foot comes down (past its apex in flight). Arming the
    touchdown there (not where the foot rises past the ground at $h$, an
    instant that moves without bound with $h$ near $0$, since the foot leaves
    the ground at rest) leaves the arming instant independent of $h$."""
    del t, params
    return -x[3]


def _above_the_ground(t, x, params):
    """$z_L - h$: the foot above the ground at the next touchdown."""
    del t
    return x[1] - params.step_height


def ground_multiplier(x, params):
    r"""Ground multiplier of the minimal hopper, $\lambda_g = T - m_L g$ (Zana et al.
    2018, eq. 62 with $z_L = \dot z_L = 0$); negative while the ground pushes."""
    return _tension(x, params, params.d_G) - params.m_L * params.g


def _liftoff_guard(t, x, params):
    del t
    return ground_multiplier(x, params) / _weight(params)


class _PlasticTouchdown(AbstractReset):
    r"""Minimal-coordinate touchdown: $\dot z_L \to 0$; $T_c = \tfrac12 m_L\dot z_L^2$,
    $T_a = \tfrac12 m_U\dot z_U^2$ and the impulse $m_L\dot z_L^-$ (the same as the
    constrained projection's)."""

    def __call__(self, t, x, params):
        del t, params
        return x.at[3].set(0.0)

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        return {
            "T_c": 0.5 * params.m_L * x_minus[3] ** 2,
            "T_a": 0.5 * params.m_U * x_minus[2] ** 2,
            "impulse": (params.m_L * x_minus[3])[None],
        }


def ground_force(x, params):
    r"""The normal force of the ground on the lower mass in the ground phase,
    $N = -\lambda_g = m_L g - T$ (minimal state; positive while the ground
    pushes)."""
    return -ground_multiplier(x, params)


def _upper_height(t, x, params):
    del t, params
    return x[0]


def _ground_force(t, x, params):
    del t
    return ground_force(x, params)


def _on_ground(t, x, params):
    r"""The ground mode's constraints in minimal coordinates: $z_L = h$ (the
    ground's height, `step_height`), $\dot z_L = 0$."""
    del t
    return jnp.stack([x[1] - params.step_height, x[3]])


def _spring_length(t, x, params):
    """$z_U - z_L$: the spring's length, positive (the upper mass above the
    foot)."""
    del t, params
    return x[0] - x[1]


def minimal(armed: bool = False) -> tuple[HybridSystem, HopperParams]:
    r"""The hopper in minimal coordinates $x = [z_U, z_L, \dot z_U, \dot z_L]$.

    Flight: $m_U\ddot z_U = -T - m_U g$, $m_L\ddot z_L = T - m_L g$ with $d = d_F$.
    Ground: $z_L = h$, $\dot z_L = 0$, $m_U\ddot z_U = -T - m_U g$ with $d = d_G$,
    where $h$ is the ground's height above the last lift-off's (`step_height`,
    0 on flat ground; see [`hybrax.models.hopper.height_disturbance`][]).
    Same transitions as [`hybrax.models.hopper.constrained`][]. With `armed`, the
    touchdown is armed once the foot comes down ($\dot z_L < 0$, past its apex):
    after a step up ($h > 0$) a hop starts with the foot below that ground, and
    a foot whose apex stays below it ends the hop with the status
    `armed_beyond_guard` (it strikes the step) (the system of the hops of
    [`hybrax.models.hopper.height_disturbance`][]; the
    arming costs each flight one more solve)."""
    modes = (
        Mode(
            _flight_field,
            "flight",
            observables={
                "apex_upper": Extremum(_upper_height),
                "apex_lower": Extremum(_lower_height),
            },
            domain={_ABOVE_THE_FOOT: _spring_length},
        ),
        Mode(
            _ground_field,
            "ground",
            constraints=_on_ground,
            observables={"min_ground_force": Extremum(_ground_force, "min")},
            domain={_ABOVE_THE_FOOT: _spring_length},
        ),
    )
    touchdown = Transition(
        source="flight",
        target="ground",
        guard=_above_the_ground,
        direction=False,
        reset=_PlasticTouchdown(),
        name="touchdown",
        arm=_foot_falling if armed else None,
    )
    liftoff = Transition(
        source="ground",
        target="flight",
        guard=_liftoff_guard,
        direction=True,
        name="liftoff",
    )
    return HybridSystem(modes, (touchdown, liftoff), n_states=4), HopperParams()


def to_constrained(x_min):
    """Embed a minimal state $[z_U, z_L, v_U, v_L]$ as $[z_U, z_U, z_L, z_L, v_U, v_U,
    v_L, v_L]$ (works on batches along the last axis)."""
    x_min = jnp.asarray(x_min)
    idx = jnp.array([0, 0, 1, 1, 2, 2, 3, 3])
    return x_min[..., idx]


def to_minimal(x_con):
    r"""Read $[z_U, z_L, v_U, v_L] = [z_2, z_4, \dot z_2, \dot z_4]$ off a constrained
    state (the coordinates the paper's printed matrices use)."""
    x_con = jnp.asarray(x_con)
    return x_con[..., jnp.array([1, 3, 5, 7])]


def energies(x_min, params: HopperParams):
    r"""Kinetic, potential and total energy of a minimal state (batched on the last
    axis): $T = \tfrac12(m_U\dot z_U^2 + m_L\dot z_L^2)$,
    $V = g(m_U z_U + m_L z_L) + \tfrac12 k(z_U - z_L - L_0)^2$. NumPy in (state and
    parameters), NumPy out."""
    x_min = array_module(x_min, params).asarray(x_min)
    zU, zL, vU, vL = (x_min[..., i] for i in range(4))
    kinetic = 0.5 * (params.m_U * vU**2 + params.m_L * vL**2)
    potential = (
        params.g * (params.m_U * zU + params.m_L * zL)
        + 0.5 * params.k * (zU - zL - params.L0) ** 2
    )
    return kinetic, potential, kinetic + potential


def liftoff_state(v_U, params: HopperParams):
    r"""The state on the lift-off section with upper velocity $v_U$: $z_L = \dot z_L =
    0$ and $\lambda_g = 0$, i.e. $z_U = L_0 + (m_L g - d_G v_U)/k$. NumPy in, NumPy
    out."""
    xp = array_module(v_U, params)
    v_U = xp.asarray(v_U, dtype=jnp.result_type(float))
    z_U = params.L0 + (params.m_L * params.g - params.d_G * v_U) / params.k
    zero = xp.zeros_like(v_U)
    return xp.stack([z_U, zero, v_U, zero])


def default_state(params: HopperParams | None = None):
    r"""A state in flight, both masses at rest with the spring at its static length
    (compressed by $m_U g / k$), the lower mass 0.15 m above the ground.

    Released, the spring oscillates in flight (period $2\pi\sqrt{m_r/k}$ with
    $m_r = m_U m_L / m$, 0.18 s at the defaults) while the masses fall; from
    0.15 m the foot lands with the spring compressed, so the ground pushes right
    after every touchdown (155 N after the first at the defaults) and the run
    keeps the model's boundaries as it settles onto the periodic orbit. (From
    0.1 m it would land with the spring stretched, where the ground would have
    to pull: at the defaults, drops from 0.13 m to 0.20 m land admissibly.)"""
    params = HopperParams() if params is None else params
    z_L = 0.15
    z_U = z_L + params.L0 - params.m_U * params.g / params.k
    return jnp.array([z_U, z_L, 0.0, 0.0])


def _minimal_chart(u, params):
    del params
    zero = jnp.zeros((), u.dtype)
    return jnp.stack([u[0], zero, u[1], zero])


def _minimal_coordinates(x, params):
    # Heights from the ground the hopper stands on: after a step of height h
    # (`step_height`) the next hop starts from that ground.
    return jnp.stack([x[0] - params.step_height, x[2]])


def _constrained_chart(u, params):
    return to_constrained(_minimal_chart(u, params))


def _constrained_coordinates(x, params):
    return _minimal_coordinates(to_minimal(x), params)


def _hop_coordinates(x, params):
    """The minimal section's coordinates of a state of either form (the forms'
    lift-off unknowns are the same)."""
    if x.shape[-1] == 8:  # static: the constrained form's state
        x = to_minimal(x)
    return _minimal_coordinates(x, params)


def height_disturbance() -> Disturbance:
    r"""The height of the ground at the next touchdown as a
    [`hybrax.Disturbance`][]: an offset $h$ [m] of `step_height` during one hop
    (rough ground: a step up or down under a hopping foot, as the terrain of Byl
    & Tedrake 2009, "Metastable walking machines", Int. J. Robotics Research
    28(8), under a walker's). The foot lands and stands at $h$, and the next
    hop measures its heights from there. Its hops run on the minimal form with
    the touchdown armed (`minimal(armed=True)`: after a step up the foot starts
    below that ground), from either form's lift-off unknowns."""
    return Disturbance(
        FieldParameter("step_height"),
        "m",
        "height of the ground at the next touchdown",
        section=PoincareSection(
            ("touchdown", "liftoff"), _minimal_chart, _hop_coordinates
        ),
        system=minimal(armed=True)[0],
    )


def section(form: str = "minimal") -> PoincareSection:
    r"""The lift-off section of the hopper (Zana et al. 2018 section 3.4).

    A cycle is touchdown then lift-off. The reduced unknowns are $u = (z_U, \dot z_U)$
    at lift-off, $z_U$ above the ground it lifts off from ($z_U - h$ after a
    step of height $h$, `step_height`); the section fixes $z_L = \dot z_L = 0$.
    In the constrained form the chart places the state on the constraint
    manifold ($z_1 = z_2$, $z_3 = z_4 = 0$),
    which removes the spurious unit multipliers of constraint drift; the paper's
    six unknowns $[z_1, z_2, z_3, \dot z_1, \dot z_2, \dot z_3]$ reduce to these two
    on the manifold. $M = J + I$ is then the paper's $2\times2$ matrix of eq. (67).
    """
    if check_form(form, ("minimal", "constrained")) == "minimal":
        chart, coordinates = _minimal_chart, _minimal_coordinates
    else:
        chart, coordinates = _constrained_chart, _constrained_coordinates
    return PoincareSection(("touchdown", "liftoff"), chart, coordinates)


def orbit_guess(params: HopperParams, v_U: float = 1.7):
    r"""A guess of the reduced unknowns $(z_U, \dot z_U)$ on the lift-off surface
    $\lambda_g = 0$ (so Newton's first step starts on the section). NumPy in, NumPy
    out."""
    x = liftoff_state(v_U, params)
    return array_module(x).stack([x[0], x[2]])


def scan_orbit_guess(
    params: HopperParams, v_min: float = 0.05, v_max: float = 6.0, n: int = 48
):
    r"""A guess of $(z_U, \dot z_U)$ at lift-off from a scan of the 1-D return map.

    On the lift-off surface $\lambda_g = 0$ the return map is one-dimensional,
    $v \mapsto P(v)$. This evaluates $P(v) - v$ on `n` speeds in
    $[v_{min}, v_{max}]$ (one batched run) and returns the sign change of largest
    $v$, refined linearly; if there is none, the plain
    [`hybrax.models.hopper.orbit_guess`][].
    Robust where Newton from a fixed guess is not (e.g. a return map nearly tangent
    to the diagonal far from its fixed point). Jittable.
    """
    import diffrax as dfx

    from .._periodic import poincare_map
    from .._settings import Settings
    from .._solution import RESULTS

    system, lift_off = minimal()[0], section("minimal")
    speeds = jnp.linspace(v_min, v_max, n)

    forward = Settings(adjoint=dfx.ForwardMode())  # nothing is differentiated

    def gap(v):
        u_next, sol = poincare_map(
            system, lift_off, orbit_guess(params, v), params, settings=forward
        )
        return u_next[1] - v, sol.result == RESULTS.successful

    gaps, ok = jax.vmap(gap)(speeds)
    crossing = ok[:-1] & ok[1:] & (jnp.sign(gaps[:-1]) != jnp.sign(gaps[1:]))
    index = jnp.where(crossing, jnp.arange(n - 1), -1).max()
    g0, g1 = gaps[index], gaps[index + 1]
    v0, v1 = speeds[index], speeds[index + 1]
    v_star = v0 - g0 * (v1 - v0) / (g1 - g0)
    v_star = jnp.where(index >= 0, v_star, 1.7)
    return orbit_guess(params, v_star)


def _damping_scale(params):
    r"""$2\sqrt{k m}$: the hopper's dimensional damping is $d = 2D\sqrt{k m}$."""
    return 2 * jnp.sqrt(params.k * params.m)


def parameter(name: str):
    r"""The continuation parameter of the hopper called `name` (for
    [`hybrax.continue_orbits`][]): a field of `HopperParams`, or the dimensionless
    $D_G$, $D_F$ (stored as $d = 2D\sqrt{k m}$)."""
    if name in ("D_G", "D_F"):
        return FieldParameter("d_" + name[-1], _damping_scale, name=name)
    if name in FIELD_NAMES:
        return FieldParameter(name, None, name=name)
    raise ValueError(
        f"unknown hopper parameter {name!r}; known: {', '.join(PARAMETERS)}"
    )


def _t_flight(orbit, params):
    del params
    return orbit.phase_durations[0]


def _t_ground(orbit, params):
    del params
    return orbit.phase_durations[1]


def _apex_upper(orbit, params):
    del params
    return orbit.cycle.phase_observables["apex_upper"][0]


def _apex_lower(orbit, params):
    del params
    return orbit.cycle.phase_observables["apex_lower"][0]


def _liftoff_speed(orbit, params):
    r"""$\dot z_U$ at lift-off: the section's second unknown in both forms."""
    del params
    return orbit.u[1]


def _energy_kept_share(orbit, params):
    r"""$T_a / (T_c + T_a)$ at touchdown: the share of the kinetic energy the
    plastic touchdown keeps (the paper's Fig. 9)."""
    del params
    return orbit.T_a[0] / (orbit.T_c[0] + orbit.T_a[0])


def _min_ground_force(orbit, params):
    del params
    return orbit.cycle.phase_observables["min_ground_force"][1]


def _ground_force_after_touchdown(orbit, params):
    r"""The ground's force right after touchdown, positive where it would have to
    pull: the ground mode's signed guard is $-\lambda_g / (m g)$ (positive inside
    the mode), so the force is minus the guard times $m g$."""
    return -orbit.guard_at_start[0] * params.m * params.g


def _pulling_after_touchdown(orbit, params):
    return _ground_force_after_touchdown(orbit, params) > 0


#: Scalar quantities of a hopper orbit with their units (phase observables from
#: the orbit's cycle): what `hybrax orbit hopper` reports, `tune` targets and
#: `sweep --quantity` maps.
ORBIT_QUANTITIES = {
    "period": Quantity(orbit_period, "s", "period"),
    "t_flight": Quantity(_t_flight, "s", "flight time", r"$t_F$"),
    "t_ground": Quantity(_t_ground, "s", "ground time", r"$t_G$"),
    "apex_upper": Quantity(_apex_upper, "m", "upper apex in flight", r"$z_U$"),
    "apex_lower": Quantity(_apex_lower, "m", "lower apex in flight", r"$z_L$"),
    **impact_quantities("touchdown"),
    "Ta_over_T": Quantity(
        _energy_kept_share,
        "1",
        "share of kinetic energy kept at touchdown",
        r"$T_a / T^-$",
    ),
    "v_U": Quantity(_liftoff_speed, "m/s", "upper mass's speed at lift-off"),
    "ground_force_after_touchdown": Quantity(
        _ground_force_after_touchdown, "N", "ground force after touchdown (+: pulls)"
    ),
    "pulling_after_touchdown": Quantity(
        _pulling_after_touchdown, None, "the ground pulls after touchdown"
    ),
    "min_ground_force": Quantity(_min_ground_force, "N", "least ground force"),
    "multiplier": SPECTRAL_RADIUS,
}


#: Upper-mass speeds at lift-off of the guesses that start a branch, slow first.
BRANCH_SPEEDS = (0.1, 0.2, 0.35, 0.5, 0.8, 1.2, 1.7, 2.5, 4.0)


def branch_guesses(params) -> list:
    r"""Guesses of $(z_U, \dot z_U)$ on the lift-off surface where a branch starts
    (one per speed of `BRANCH_SPEEDS`, slow ones first): where the default
    guess finds no orbit, a faster or slower hop may."""
    return [orbit_guess(params, v) for v in BRANCH_SPEEDS]
