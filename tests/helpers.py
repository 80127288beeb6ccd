"""Shared test helpers: finite differences and tolerances."""

import numpy as np


# Tolerances, set once (see the style guide).
SOLVER_TOL = 1e-10
ORACLE_TOL = 1e-8
MULTIPLIER_TOL = 1e-6
FD_RTOL = 1e-5


def central_jacobian(fn, x, h=1e-6):
    """Central finite-difference Jacobian of `fn` at `x` (NumPy in, NumPy out)."""
    x = np.asarray(x, dtype=float)
    f0 = np.asarray(fn(x))
    J = np.zeros(f0.shape + x.shape)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        J[..., i] = (np.asarray(fn(x + e)) - np.asarray(fn(x - e))) / (2 * h)
    return J
