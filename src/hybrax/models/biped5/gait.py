"""The five-link biped's gait: the orbit guess, the orbit quantities (speed, cost of
transport, effort), the tuned controller numbers, and its bundle for the command
line.
"""

import jax
import jax.numpy as jnp
import numpy as np

from ..._model import (
    SPECTRAL_RADIUS,
    Quantity,
    impact_quantities,
    orbit_energy_lost,
    orbit_period,
    release_quantities,
)
from ..._params import (
    field_names,
    parameter_table,
)
from .._walking import height_disturbance, slope_disturbance
from .dynamics import Biped5Params, _pinned, points
from .forms import (
    _leg_length,
    _swing_foot,
    biped5,
    default_state,
    descriptor,
    descriptor_from_minimal,
    descriptor_section,
    descriptor_to_minimal,
    energies,
    momentum,
    momentum_from_minimal,
    momentum_to_minimal,
    section,
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


#: Scalar quantities of a gait with their units: what `hybrax orbit biped5`
#: reports, `tune` targets and `sweep --quantity` maps (the torques' integrals
#: from the cycle's phase observables).
ORBIT_QUANTITIES = {
    "period": Quantity(orbit_period, "s", "step period"),
    "step_length": Quantity(_step_length, "m", "step length"),
    "speed": Quantity(_speed, "m/s", "walking speed"),
    "energy_lost": Quantity(orbit_energy_lost, "J", "energy lost at heel strike"),
    **impact_quantities("heel strike"),
    **release_quantities(
        "trailing_vertical_velocity",
        "trailing foot's vertical velocity after impact",
        "trailing_foot_leaves",
        "the trailing foot leaves the ground",
    ),
    "cost_of_transport": Quantity(_cost_of_transport, "1", "cost of transport"),
    "effort": Quantity(
        _effort, "N$^2$ m$^2$ s", "torques' effort", r"$\int\sum\tau_j^2 dt$"
    ),
    "work": Quantity(_work, "J", "net work of the torques"),
    "positive_work": Quantity(_positive_work, "J", "positive work of the torques"),
    "multiplier": SPECTRAL_RADIUS,
}


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


# The labels of the section's reduced unknowns: the angles but the trailing
# shank's (the contact gives it) and every rate.
_SECTION_LABELS = _LABELS[:4] + _LABELS[5:]


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
    from ..._model import (
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
        disturbances={
            "slope": slope_disturbance("slope"),
            "height": height_disturbance("step_height"),
        },
        gait_indicators=("period", "step_length"),
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
            labels={
                **dict(zip(names, _LABELS)),
                # The section's unknowns (`u0`, ... in `hybrax basin --grid`):
                # theta_1..theta_4 and the five rates.
                **{f"u{k}": label for k, label in enumerate(_SECTION_LABELS)},
            },
            figures=FigureSpec(_LABELS, energies, portrait=(2, 7)),
            orbit_perturbations=((7, 0.1, r"$\dot\theta_3 + 0.1$ rad/s"),),
            stick_figure=_stick_figure,
            frame_shift=_frame_shift,
            stick_names=("leg 1", "trunk", "leg 2"),
            stick_swaps=((1, 3),),  # stance and swing trade at heel strike
        ),
    )
