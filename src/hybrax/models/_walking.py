"""What the walking models share: the fall that ends a run."""

from collections.abc import Callable
from typing import Any

import equinox as eqx
from jaxtyping import Array

from .._custom_types import Params
from .._hybrid import Transition


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
