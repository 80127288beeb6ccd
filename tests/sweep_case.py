"""The sweep shared by `test_distributed.py` and its worker processes: rimless-wheel
gaits over five slopes (an odd count, so the second process's slice is padded)."""

import numpy as np

from hybrax.models import rimless_wheel


system, _ = rimless_wheel.rimless_wheel()
section = rimless_wheel.section()
slopes = np.linspace(0.08, 0.16, 5)
batch = rimless_wheel.RimlessWheelParams(gamma=slopes)
guess = np.full((slopes.size, 1), 1.2)
