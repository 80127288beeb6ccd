r"""The compass-gait biped walking passively down a slope (Goswami, Thuilot & Espiau
1998, "A study of the passive gait of a compass-like biped robot", Int. J. Robot.
Res. 17(12); the walker of Font-Llagunes & Kövecses, "Modelling Dynamic Walking
Bipeds as Variable Topology Mechanical Systems", poster, McGill University, and of
Font-Llagunes & Kövecses 2009, "On the Use of Impulsive Bilateral Constraints to
Characterize Topology Transitions", 2009 CCToMM M³ Symposium).

Two straight legs of length $l = a + b$ joined at the hip: a point mass $m$ on each
leg at distance $a$ from its foot, a point mass $m_H$ at the hip, on a slope of
angle $\phi$ going down in $+x$. State in minimal coordinates
$x = [\theta_s, \theta_{ns}, \dot\theta_s, \dot\theta_{ns}]$: absolute angles from
the vertical of the stance leg (foot at the origin, hip at
$l(\sin\theta_s, \cos\theta_s)$: positive when the hip is ahead of the foot) and of
the swing leg (its foot at hip $+ l(\sin\theta_{ns}, -\cos\theta_{ns})$: positive
when the foot is ahead of the hip).

- **Single support.** The Euler-Lagrange equations of
  $T = \tfrac12\sum_i m_i|\dot r_i|^2$, $V = g\sum_i m_i y_i$, with the mass
  matrix $H = \partial^2 T/\partial\dot q^2$ and the remaining terms derived by JAX
  autodiff ([`hybrax.LagrangianModel`][]: no hand-written equations of motion).
- **Heel strike.** The swing foot's height above the slope,
  $y_{sw}\cos\phi + x_{sw}\sin\phi$ (over $l$), comes down to the next
  foothold's height `step_height` (0: even ground), armed once the swing
  foot is ahead of the stance foot along the slope by $0.1\,l$ (the passive
  walker's mid-stance scuff is ignored, as in the paper). The impact is perfectly
  plastic on the descriptor coordinates $(x_f, y_f, \theta_s, \theta_{ns})$, with
  the stance foot free: the projection of [`hybrax.plastic_impact`][] onto the
  motions that keep the landing foot still, whose energy split ($T_c$ lost, $T_a$
  kept) and impulse are recorded (as in Font-Llagunes & Kövecses's poster); then
  the legs swap roles, $\theta_s^+ = -\theta_{ns}$, $\theta_{ns}^+ = -\theta_s$.
  The trailing foot's velocity normal to the slope after the impact
  (`trailing_normal_velocity`) must be positive for it to leave the ground (the
  poster's lift-off condition).
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._hybrid import HybridSystem, ImpactRelabel, Mode, Transition
from .._mechanics import LagrangianModel, point_velocity, symmetric_solve
from .._model import (
    SPECTRAL_RADIUS,
    Quantity,
    check_form,
    impact_quantities,
    orbit_energy_lost,
    orbit_period,
    release_quantities,
)
from .._params import (
    NONNEGATIVE,
    POSITIVE,
    AbstractParams,
    between,
    check_names,
    field_names,
    parameter_field,
    parameter_table,
)
from .._periodic import PoincareSection
from ._walking import fall, height_disturbance, slope_disturbance


class CompassGaitParams(AbstractParams):
    """Parameters of the compass gait (SI units). Defaults: Goswami et al. (1998),
    m = 5, m_H = 10, a = b = 0.5, slope 3 degrees."""

    m: float = parameter_field(
        5.0, "kg", "mass of each leg (at distance a from its foot)", bound=POSITIVE
    )
    m_H: float = parameter_field(10.0, "kg", "hip mass", bound=NONNEGATIVE)
    a: float = parameter_field(0.5, "m", "foot to leg mass", bound=POSITIVE)
    b: float = parameter_field(0.5, "m", "leg mass to hip", bound=POSITIVE)
    slope: float = parameter_field(
        3.0 * math.pi / 180.0,
        "rad",
        "slope angle",
        bound=between(0, math.pi / 4, "in (0, pi/4)"),
    )
    g: float = parameter_field(
        9.81, "m/s^2", "gravitational acceleration", bound=POSITIVE
    )
    step_height: float = parameter_field(
        0.0,
        "m",
        "next foothold above the stance foot, normal to the slope",
    )


def _points(q, params):
    r"""Positions of the stance-leg mass, the hip, the swing-leg mass and the swing
    foot for descriptor coordinates $q = (x_f, y_f, \theta_s, \theta_{ns})$."""
    foot = q[:2]
    l = params.a + params.b  # noqa: E741
    up = jnp.stack([jnp.sin(q[2]), jnp.cos(q[2])])
    down = jnp.stack([jnp.sin(q[3]), -jnp.cos(q[3])])
    hip = foot + l * up
    return foot + params.a * up, hip, hip + params.b * down, hip + l * down


def _kinetic(q, qd, params):
    velocities = point_velocity(lambda q_, p: _points(q_, p)[:3], q, qd, params)
    masses = (params.m, params.m_H, params.m)
    return 0.5 * sum(m * v @ v for m, v in zip(masses, velocities))


def _potential(q, params):
    leg, hip, swing, _ = _points(q, params)
    return params.g * (params.m * leg[1] + params.m_H * hip[1] + params.m * swing[1])


def _constraints(q, params):
    """Constraint groups: `"stance"` (the stance foot's position) and `"swing"`
    (the swing foot's position: at heel strike, the landing foot)."""
    return {"stance": q[:2], "swing": _points(q, params)[3]}


# The walker in descriptor coordinates (stance foot free): H and C from T and V.
_MECHANICS = LagrangianModel(_kinetic, _potential, constraint_groups=_constraints)


def mechanics() -> LagrangianModel:
    r"""The walker in descriptor coordinates $q = (x_f, y_f, \theta_s,
    \theta_{ns})$ with the stance foot free, as a [`hybrax.LagrangianModel`][];
    constraint groups `"stance"` (the stance foot's position) and `"swing"` (the
    swing foot's position), for [`hybrax.plastic_impact`][] and
    [`hybrax.impact_energy_modes`][]."""
    return _MECHANICS


def _descriptor(x):
    """Minimal state -> descriptor positions and velocities (stance foot at rest at
    the origin)."""
    zero = jnp.zeros(2, x.dtype)
    return jnp.concatenate([zero, x[:2]]), jnp.concatenate([zero, x[2:]])


def _single_support(t, x, params):
    r"""$\ddot\theta$ from the reduced equations: the descriptor equations with the
    stance foot pinned are the $(\theta_s, \theta_{ns})$ block of $H$ and $C$."""
    del t
    q, qd = _descriptor(x)
    H = _MECHANICS.mass_matrix(q, params)[2:, 2:]
    C = _MECHANICS.forces(q, qd, params)[2:]
    return jnp.concatenate([x[2:], symmetric_solve(H, -C)])


def _along_and_above(point, params):
    """A point's distance along the slope (downhill) and its height above it."""
    c, s = jnp.cos(params.slope), jnp.sin(params.slope)
    return point[0] * c - point[1] * s, point[0] * s + point[1] * c


def _swing_foot_height(t, x, params):
    """The swing foot's height above the next foothold (`step_height` above the
    slope through the stance foot) over the leg's length."""
    del t
    q, _ = _descriptor(x)
    _, above = _along_and_above(_points(q, params)[3], params)
    return (above - params.step_height) / (params.a + params.b)


# How far (over l) the swing foot must be ahead of the stance foot along the slope
# before a heel strike can fire: past the mid-stance scuff.
_ARMING_DISTANCE = 0.1


def _swing_foot_ahead(t, x, params):
    del t
    q, _ = _descriptor(x)
    along, _ = _along_and_above(_points(q, params)[3], params)
    return along / (params.a + params.b) - _ARMING_DISTANCE


def _hip_height(t, x, params):
    r"""The hip's height above the slope over the leg's length (its fall: see
    `models._walking.fall`), $\cos(\theta_s - \gamma)$."""
    del t
    q, _ = _descriptor(x)
    _, above = _along_and_above(_points(q, params)[1], params)
    return above / (params.a + params.b)


def _lift(x, params):
    del params
    return _descriptor(x)


def _swap_legs(q, qd_plus, params):
    """After the impact the legs swap roles: $(\theta_s, \theta_{ns}) \to
    (-\theta_{ns}, -\theta_s)$ (and their rates)."""
    del params
    return jnp.stack([-q[3], -q[2], -qd_plus[3], -qd_plus[2]])


def _trailing_normal_velocity(q, qd_plus, params):
    """The trailing (old stance) foot's velocity normal to the slope after the
    impact: it must leave the ground (Font-Llagunes & Kövecses's lift-off
    condition)."""
    del q
    return _along_and_above(qd_plus[:2], params)[1]


def heel_strike() -> ImpactRelabel:
    r"""Plastic impact of the landing foot (projection on the descriptor
    coordinates, the trailing foot free), then the leg swap
    $(\theta_s, \theta_{ns}) \to (-\theta_{ns}, -\theta_s)$; observables
    $T_c$, $T_a$, the impulse and `trailing_normal_velocity`."""
    return ImpactRelabel(
        _MECHANICS,
        ("swing",),
        _lift,
        _swap_legs,
        release=_trailing_normal_velocity,
        release_name="trailing_normal_velocity",
    )


def compass_gait() -> tuple[HybridSystem, CompassGaitParams]:
    """The compass-gait walker: mode `"single_support"`, transition `"heelstrike"`
    onto itself, and the terminal transition `"fall"` (the hip down to half the
    leg's length above the slope: the run ends with status `terminal_event`);
    with the default [`hybrax.models.compass_gait.CompassGaitParams`][]."""
    strike = Transition(
        source="single_support",
        target="single_support",
        guard=_swing_foot_height,
        direction=False,
        reset=heel_strike(),
        name="heelstrike",
        arm=_swing_foot_ahead,
    )
    system = HybridSystem(
        (Mode(_single_support, "single_support"),),
        (strike, fall("single_support", _hip_height)),
        n_states=4,
    )
    return system, CompassGaitParams()


def _section_chart(u, p):
    return jnp.stack([p.slope - u[0], -p.slope - u[0], u[1], u[2]])


def _section_coordinates(x, p):
    del p
    return jnp.stack([-(x[0] + x[1]) / 2, x[2], x[3]])


def section(form: str = "minimal") -> PoincareSection:
    r"""Just after heel strike, both feet on the slope: the legs make angles
    $\pm\alpha$ with the slope's normal, $\theta_s = \phi - \alpha$,
    $\theta_{ns} = -\phi - \alpha$; the reduced unknowns are
    $u = (\alpha, \dot\theta_s, \dot\theta_{ns})$. (Module-level chart and
    coordinates: equal sections share compiled programs.)"""
    check_form(form)  # one form; the argument as every model's
    return PoincareSection(
        ("heelstrike",), chart=_section_chart, coordinates=_section_coordinates
    )


def orbit_guess(params) -> jax.Array:
    """A guess of $(\\alpha, \\dot\\theta_s, \\dot\\theta_{ns})$ after heel strike near
    the gait at a few degrees of slope (the return map is iterated from it)."""
    del params
    return jnp.array([0.27, 1.09, -0.38])


def energies(x, params):
    r"""Kinetic and potential energy of minimal states (batched on leading axes),
    the potential measured from the stance foot."""

    def one(x_):
        q, qd = _descriptor(x_)
        return _kinetic(q, qd, params), _potential(q, params)

    flat = jnp.reshape(jnp.asarray(x), (-1, 4))
    kinetic, potential = jax.vmap(one)(flat)
    shape = jnp.shape(x)[:-1]
    return kinetic.reshape(shape), potential.reshape(shape)


FIELD_NAMES = field_names(CompassGaitParams)
#: Parameters with their units and meaning, the derived ones last.
PARAMETERS = {
    **parameter_table(CompassGaitParams),
    "slope_deg": "deg, slope angle in degrees (sets slope)",
    "mu": (
        "1, mass ratio m_H/(m_H + 2m) at fixed total mass (Font-Llagunes & Kövecses)"
    ),
    "a_ratio": (
        "1, length ratio a/(a + b) at fixed leg length (Font-Llagunes & Kövecses)"
    ),
}


def _mass_ratio(params):
    r"""$\mu = m_H / (m_H + 2m)$ (Font-Llagunes & Kövecses's poster)."""
    return params.m_H / (params.m_H + 2 * params.m)


def _set_mass_ratio(params, mu):
    """`params` with the mass ratio `mu` and the total mass `m_H + 2m` kept."""
    total = params.m_H + 2 * params.m
    return eqx.tree_at(
        lambda p: (p.m_H, p.m), params, (mu * total, (1 - mu) * total / 2)
    )


def _length_ratio(params):
    r"""$\alpha = a / (a + b)$ (Font-Llagunes & Kövecses's poster)."""
    return params.a / (params.a + params.b)


def _set_length_ratio(params, ratio):
    """`params` with the length ratio `ratio` and the leg length `a + b` kept."""
    length = params.a + params.b
    return eqx.tree_at(
        lambda p: (p.a, p.b), params, (ratio * length, (1 - ratio) * length)
    )


#: Derived parameters: name -> (getter, setter, open interval of valid values).
_DERIVED = {
    "mu": (_mass_ratio, _set_mass_ratio, (0.0, 1.0)),
    "a_ratio": (_length_ratio, _set_length_ratio, (0.0, 1.0)),
}


def _degree(params):
    del params
    return math.pi / 180.0


def make_params(
    *, slope_deg=None, mu=None, a_ratio=None, **values
) -> CompassGaitParams:
    r"""Build [`hybrax.models.compass_gait.CompassGaitParams`][], optionally with
    the slope in degrees (`slope_deg`; traced values work) and Font-Llagunes &
    Kövecses's ratios $\mu = m_H/(m_H + 2m)$ (`mu`, at the total mass of `m`,
    `m_H`) and $\alpha = a/(a + b)$ (`a_ratio`, at the leg length of `a`, `b`).
    Unknown names, and a ratio outside (0, 1), raise `ValueError`."""
    check_names(CompassGaitParams, values, PARAMETERS, "compass-gait")
    if slope_deg is not None:
        if "slope" in values:
            raise ValueError("Give either `slope` or `slope_deg`, not both.")
        values["slope"] = slope_deg * _degree(None)
    params = CompassGaitParams(**values)
    for name, value in (("mu", mu), ("a_ratio", a_ratio)):
        if value is None:
            continue
        _, setter, (low, high) = _DERIVED[name]
        try:
            ok = bool(low < float(value) < high)
        except Exception:  # a tracer: set it unchecked
            ok = True
        if not ok:
            raise ValueError(
                f"Compass-gait parameter `{name}` must lie in ({low:g}, {high:g}); "
                f"got {value}."
            )
        params = setter(params, value)
    return params


def parameter(name: str):
    """The continuation parameter called `name`: a field, or `slope_deg`."""
    from .._continuation_parameter import FieldParameter

    if name == "slope_deg":
        return FieldParameter("slope", _degree, name="slope_deg")
    if name in _DERIVED:
        from .._continuation_parameter import FunctionParameter

        getter, setter, _ = _DERIVED[name]
        return FunctionParameter(getter, setter, name=name)
    if name in FIELD_NAMES:
        return FieldParameter(name, None, name=name)
    raise ValueError(
        f"unknown compass-gait parameter {name!r}; known: {', '.join(PARAMETERS)}"
    )


def default_state(params):
    """The model's default start (of `hybrax simulate`): the section state of its
    orbit guess, a state right after a heel strike."""
    return section().chart(orbit_guess(params), params)


def _half_interleg_angle(orbit, params):
    del params
    return orbit.u[0]


def _step_length(orbit, params):
    r"""The step along the slope, the trailing foot's distance behind the stance
    foot just after heel strike: $2l\sin\alpha$ ($l = a + b$) with both feet on
    the slope."""
    q, _ = _descriptor(orbit.state)
    along, _ = _along_and_above(_points(q, params)[3], params)
    return -along


def _speed(orbit, params):
    r"""Average speed along the slope: step length $2l\sin\alpha$ over the period."""
    return _step_length(orbit, params) / orbit.period


def _potential_released(orbit, params):
    r"""Potential energy released per step, $(2m + m_H) g\,s \sin\phi$ for a
    step $s$ down the slope $\phi$ (what heel strike removes on a periodic
    gait)."""
    weight = (2 * params.m + params.m_H) * params.g
    return weight * _step_length(orbit, params) * jnp.sin(params.slope)


#: Scalar quantities of a gait with their units: what `hybrax orbit compass-gait`
#: reports, `tune` targets and `sweep --quantity` maps.
ORBIT_QUANTITIES = {
    "period": Quantity(orbit_period, "s", "step period"),
    "alpha": Quantity(_half_interleg_angle, "rad", "half inter-leg angle"),
    "step_length": Quantity(_step_length, "m", "step length"),
    "speed": Quantity(_speed, "m/s", "speed along the slope"),
    **impact_quantities("heel strike"),
    "energy_lost": Quantity(orbit_energy_lost, "J", "energy lost at heel strike"),
    "potential_released": Quantity(
        _potential_released, "J", "potential released per step"
    ),
    **release_quantities(
        "trailing_normal_velocity",
        "trailing foot's normal velocity after impact",
        "trailing_foot_leaves",
        "the trailing foot leaves the ground",
    ),
    "multiplier": SPECTRAL_RADIUS,
}


_LABELS = (
    r"$\theta_s$ [rad]",
    r"$\theta_{ns}$ [rad]",
    r"$\dot\theta_s$ [rad/s]",
    r"$\dot\theta_{ns}$ [rad/s]",
)


def _stick_figure(x, params):
    """The slope through the stance foot, the stance leg and the swing leg (the
    stance foot at the origin)."""
    q, _ = _descriptor(jnp.asarray(x, dtype=float))
    foot, _, hip, _, swing_foot = (np.asarray(p) for p in _all_points(q, params))
    slope = float(params.slope)
    downhill = 1.5 * np.array([np.cos(slope), -np.sin(slope)])
    return [
        np.stack([-downhill, downhill]),
        np.stack([foot, hip]),
        np.stack([hip, swing_foot]),
    ]


#: The animation's note: the straight-legged walker's swing foot dips below the
#: slope around mid-swing; the model ignores foot scuffing (it lets the foot pass).
_ANIMATION_NOTE = (
    "foot scuffing ignored (the swing foot passes through the slope at mid-stride)"
)


def _frame_shift(x_before, params):
    """At heel strike the swing foot becomes the stance foot."""
    q, _ = _descriptor(jnp.asarray(x_before, dtype=float))
    return np.asarray(_points(q, params)[3])


def _all_points(q, params):
    """The stance foot, stance-leg mass, hip, swing-leg mass and swing foot."""
    leg, hip, swing, swing_foot = _points(q, params)
    return q[:2], leg, hip, swing, swing_foot


def _bundle():
    from .._model import (
        ContinuationDefaults,
        FigureSpec,
        ModelBundle,
        ModelForm,
        ModelPresentation,
    )

    return ModelBundle(
        name="compass-gait",
        description="passive compass-gait biped on a slope (Goswami et al. 1998)",
        parameters=PARAMETERS,
        make_params=make_params,
        parameter=parameter,
        state_names=("theta_s", "theta_ns", "omega_s", "omega_ns"),
        default_state=default_state,
        forms={"minimal": ModelForm(lambda: compass_gait()[0], section)},
        orbit_guess=orbit_guess,
        unknown_names=("alpha", "omega_s", "omega_ns"),
        quantities=ORBIT_QUANTITIES,
        disturbances={
            "slope": slope_disturbance("slope"),
            "height": height_disturbance("step_height"),
        },
        gait_indicators=("period", "step_length"),
        presentation=ModelPresentation(
            continuation=ContinuationDefaults(
                "slope_deg", start=3.0, stop=5.0, parameter_scale=1.0, max_period=5.0
            ),
            sweep_grids=("slope_deg=1:5:9", "m_H=5:20:7"),
            labels={
                "slope_deg": r"slope $\phi$ [deg]",
                "m_H": r"$m_H$ [kg]",
                "mu": r"$\mu = m_H/(m_H + 2m)$ (dimensionless)",
                "a_ratio": r"$\alpha = a/(a + b)$ (dimensionless)",
                # The section's first unknown (the others are omega_s, omega_ns).
                "alpha": r"half inter-leg angle [rad]",
                "theta_s": _LABELS[0],
                "theta_ns": _LABELS[1],
                "omega_s": _LABELS[2],
                "omega_ns": _LABELS[3],
            },
            figures=FigureSpec(_LABELS, energies, portrait=(0, 2)),
            orbit_perturbations=((2, 0.05, r"$\dot\theta_s + 0.05$ rad/s"),),
            stick_figure=_stick_figure,
            frame_shift=_frame_shift,
            stick_names=("leg 1", "leg 2"),
            stick_swaps=((1, 2),),  # stance and swing trade at heel strike
            animation_note=_ANIMATION_NOTE,
        ),
    )
