"""What the walking models share: the fall that ends a run, and the slope and
height of the next step as disturbances."""

from collections.abc import Callable
from typing import Any

import equinox as eqx
from jaxtyping import Array

from .._continuation_parameter import FieldParameter
from .._custom_types import Params
from .._hybrid import Transition
from .._periodic import PoincareSection
from .._robustness import Disturbance


#: A walker has fallen when its hip is down to this fraction of the leg's length
#: above the ground (0.92 or more on the gaits of the walking models).
FALLEN_HIP_HEIGHT = 0.5


class _Fallen(eqx.Module):
    """The guard of a fall: the hip's height over the leg's length, minus
    `FALLEN_HIP_HEIGHT`."""

    hip_height: Callable[[Any, Array, Params], Any]

    def __call__(self, t, x, params):
        return self.hip_height(t, x, params) - FALLEN_HIP_HEIGHT


def fall(mode: str, hip_height: Callable[[Any, Array, Params], Any]) -> Transition:
    r"""The terminal transition `"fall"` of a walker in mode `mode`: it fires
    when `hip_height(t, x, params)`, the hip's height above the ground over the
    leg's length, comes down to `FALLEN_HIP_HEIGHT`, and the run ends there with
    status `terminal_event` (a walker that falls is never reported as walking on
    through the ground)."""
    return Transition(
        source=mode,
        target=mode,
        guard=_Fallen(hip_height),
        direction=False,
        name="fall",
        terminal=True,
    )


def slope_disturbance(field: str) -> Disturbance:
    r"""The slope of the next step as a [`hybrax.Disturbance`][]: an offset $d$
    [rad] of the slope parameter `field` during one step. The walker's section
    (just after heel strike, both feet on the ground) and state are measured from
    the ground's normal, so a disturbed step is a step on a wedge of slope
    $\gamma + d$, the uneven terrain of Byl & Tedrake (2009), "Metastable walking
    machines", Int. J. Robotics Research 28(8)."""
    return Disturbance(FieldParameter(field), "rad", "slope of the next step")


def _state(u, params):
    del params
    return u


#: Just after heel strike, the full state as the unknowns (chart and coordinates
#: the identity; module-level: equal sections share compiled programs).
AFTER_HEEL_STRIKE = PoincareSection(("heelstrike",), chart=_state, coordinates=_state)


def height_disturbance(field: str) -> Disturbance:
    r"""The height of the next foothold as a [`hybrax.Disturbance`][]: an offset
    $h$ [m] of the parameter `field` (the height of the ground under the next
    foothold above the stance foot, normal to the slope) during one step, the
    step terrain of Byl & Tedrake (2009), "Metastable walking machines", Int. J.
    Robotics Research 28(8). The heel strike fires where the swing foot comes
    down to that height; the next step measures its state from the new stance
    foot, so the trailing foot starts $h$ below it. The walker's own section
    puts both feet on one level, so the disturbed cycles run on
    `AFTER_HEEL_STRIKE`, the full state just after heel strike."""
    return Disturbance(
        FieldParameter(field),
        "m",
        "height of the next foothold",
        section=AFTER_HEEL_STRIKE,
    )
