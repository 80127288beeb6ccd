"""How the command line presents the jumper: state labels, its figures (the
ground on the portraits, the stick figure in the frame of the last contact) and
what a failed start means. The mathematics is `hybrax.models.jumper`."""

import jax
import jax.numpy as jnp
import numpy as np

from .jumper import (
    PARAMETERS,
    JumperParams,
    _axis,
    default_state,
    energies,
    joints,
    jumper,
)


_STATE_NAMES = (
    "x",
    "y",
    "phi_calf",
    "phi_thigh",
    "phi_torso",
    "vx",
    "vy",
    "omega_calf",
    "omega_thigh",
    "omega_torso",
)
_LABELS = (
    r"$x$ [m]",
    r"$y$ [m]",
    r"$\varphi_c$ [rad]",
    r"$\varphi_t$ [rad]",
    r"$\varphi_b$ [rad]",
    r"$\dot x$ [m/s]",
    r"$\dot y$ [m/s]",
    r"$\dot\varphi_c$ [rad/s]",
    r"$\dot\varphi_t$ [rad/s]",
    r"$\dot\varphi_b$ [rad/s]",
)


def _ground_line(params):
    r"""The ground, $y = 0$, on the $(y, \dot y)$ portraits."""
    del params
    return [("x", 0.0, "ground $y = 0$")]


@jax.jit
def _drawn_points(q, params):
    foot, knee, hip = joints(q, params)
    head = hip + 2 * params.c_torso * _axis(q[4])
    return jnp.stack([foot, knee, hip, head])


def _stick_figure(x, params):
    """The ground, the calf and thigh, and the torso (drawn to twice its centre of
    mass), in the frame of the last contact point."""
    foot, knee, hip, head = np.asarray(
        _drawn_points(jnp.asarray(x[:5], dtype=float), params)
    )
    reach = float(params.l_calf + params.l_thigh)
    ground = np.array([[foot[0] - reach, 0.0], [foot[0] + reach, 0.0]])
    return [ground, np.stack([foot, knee, hip]), np.stack([hip, head])]


def _frame_shift(x_before, params):
    """A contact resets $x$ to 0 at the landing foot; a lift-off leaves it (the
    foot is then at $x = 0$ already)."""
    del params
    return np.array([float(x_before[0]), 0.0])


def _explain(status, mode, transition, params):
    del params
    if status == "mode_not_viable" and mode == "flight":
        return (
            "at lift-off the normal force is zero but the ground's horizontal "
            "(no-slip) force is not, and the released foot would accelerate into "
            "the ground; a perfectly sticking contact has no consistent release "
            "there (Painleve): change the torque profile or the start"
        )
    if status == "mode_not_viable" and mode == "stance":
        return "right after touchdown the ground would have to pull on the foot"
    return None


def _bundle():
    from .._model import (
        FigureSpec,
        ModelBundle,
        ModelForm,
        ModelPresentation,
        field_parameters,
    )

    make_params, parameter = field_parameters(JumperParams, "jumper")
    return ModelBundle(
        name="jumper",
        description=(
            "planar monopodial jumper (calf, thigh, torso; knee and hip torques), "
            "plastic or elastic foot contact (Reddy & Munnangi, after Koch & "
            "Leyendecker 2011)"
        ),
        parameters=PARAMETERS,
        make_params=make_params,
        parameter=parameter,
        state_names=_STATE_NAMES,
        default_state=default_state,
        forms={"descriptor": ModelForm(lambda: jumper()[0])},
        presentation=ModelPresentation(
            # The default drop lands and, with plastic contact, stands: one event.
            simulate_cycles=1,
            labels={
                "elastic": "elastic contact (0: plastic, 1: elastic)",
                **dict(zip(_STATE_NAMES, _LABELS, strict=True)),
            },
            figures=FigureSpec(
                labels=_LABELS, energy=energies, portrait=(1, 6), surfaces=_ground_line
            ),
            stick_figure=_stick_figure,
            frame_shift=_frame_shift,
            explain=_explain,
        ),
    )
