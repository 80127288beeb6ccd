"""Plain SciPy baseline: Zana et al.'s (2018) hopper orbit and its Floquet multiplier.

Written the way a competent SciPy user would (no JAX, no hybrax): `solve_ivp`
(DOP853) with terminal events for each phase, `scipy.optimize.root` ("hybr") for the
shooting on the lift-off section, and central finite differences of the return map
for the multipliers. It is the baseline of `experiments/bench_orbit.py`; it is kept
deliberately unoptimised beyond what such a user would do.

Model (Zana, Bodor, Bencsik & Zelei 2018, "A Tutorial for the Analysis of the
Piecewise-Smooth Dynamics of a Constrained Multibody Model of Vertical Hopping",
Math. Comput. Appl. 23(4):74), minimal coordinates x = [z_U, z_L, v_U, v_L],
m_U = mu m, m_L = (1 - mu) m, T = k (z_U - z_L - L0) + d (v_U - v_L):

- flight (d = d_F): a_U = -T / m_U - g, a_L = T / m_L - g;
- touchdown when z_L crosses 0 downward, plastic impact v_L -> 0;
- ground (d = d_G, z_L = v_L = 0): a_U = -T / m_U - g;
- lift-off when the ground multiplier lambda = k (z_U - L0) + d_G v_U - m_L g
  crosses 0 upward (the ground would have to pull).

Run as a script to print the orbit, period and multiplier.
"""

import argparse
import time

import numpy as np
from scipy.integrate import solve_ivp
from scipy.optimize import root


DEFAULT_PARAMS = {
    "g": 9.81,
    "m": 75.0,
    "mu": 0.8,
    "k": 15000.0,
    "d_F": 150.0,
    "d_G": -80.0,
    "L0": 1.0,
}


def masses(p):
    return p["mu"] * p["m"], (1 - p["mu"]) * p["m"]


def flight_rhs(t, x, p):
    m_U, m_L = masses(p)
    T = p["k"] * (x[0] - x[1] - p["L0"]) + p["d_F"] * (x[2] - x[3])
    return [x[2], x[3], -T / m_U - p["g"], T / m_L - p["g"]]


def ground_rhs(t, x, p):
    m_U, _ = masses(p)
    T = p["k"] * (x[0] - p["L0"]) + p["d_G"] * x[2]
    return [x[2], 0.0, -T / m_U - p["g"], 0.0]


def ground_multiplier(x, p):
    """lambda = T - m_L g on the ground; negative while the ground pushes."""
    _, m_L = masses(p)
    return p["k"] * (x[0] - p["L0"]) + p["d_G"] * x[2] - m_L * p["g"]


def touchdown(t, x, p):
    return x[1]


touchdown.terminal = True
# Downward only: the flight starts at z_L = 0 going up. solve_ivp looks for sign
# changes between accepted steps, and g(0) = 0 followed by g > 0 is an upward change,
# so no event is taken at t = 0 (checked after the solve anyway).
touchdown.direction = -1


def liftoff(t, x, p):
    return ground_multiplier(x, p) / (p["m"] * p["g"])


liftoff.terminal = True
# Upward only: if lambda starts positive just after touchdown, its downward crossing
# is skipped and the event is the later upward one. (At the default orbit lambda is
# negative right after touchdown: the spring is compressed.)
liftoff.direction = 1


def one_cycle(x0, p, tol=1e-10, t_max=10.0):
    """Flight from `x0` until touchdown, impact, ground until lift-off.

    Returns (state at lift-off, cycle duration, number of RHS evaluations).
    """
    flight = solve_ivp(
        flight_rhs,
        (0.0, t_max),
        x0,
        method="DOP853",
        rtol=tol,
        atol=tol,
        events=touchdown,
        args=(p,),
    )
    if flight.status != 1 or flight.t_events[0][0] <= 1e-9:
        raise RuntimeError(f"no touchdown: {flight.message}")
    t_td = flight.t_events[0][0]
    x_td = flight.y_events[0][0].copy()
    x_td[1] = 0.0  # on the ground up to the event tolerance
    x_td[3] = 0.0  # plastic impact
    ground = solve_ivp(
        ground_rhs,
        (0.0, t_max),
        x_td,
        method="DOP853",
        rtol=tol,
        atol=tol,
        events=liftoff,
        args=(p,),
    )
    if ground.status != 1:
        raise RuntimeError(f"no lift-off: {ground.message}")
    t_lo = ground.t_events[0][0]
    x_lo = ground.y_events[0][0]
    return x_lo, t_td + t_lo, flight.nfev + ground.nfev


def return_map(u, p, tol=1e-10):
    """(z_U, v_U) at lift-off -> (z_U, v_U) at the next lift-off (z_L = v_L = 0)."""
    x0 = np.array([u[0], 0.0, u[1], 0.0])
    x1, _, _ = one_cycle(x0, p, tol)
    return np.array([x1[0], x1[2]])


def orbit_with_multipliers(params=None, tol=1e-10, fd_step=1e-5):
    """Periodic orbit by shooting on (z_U, v_U) at lift-off, and its multiplier.

    Returns (state, period, leading multiplier, nfev) where `state` is the full
    lift-off state [z_U, z_L, v_U, v_L] and `nfev` counts the one-cycle simulations
    (return-map evaluations): root finding plus the finite differences.
    """
    p = dict(DEFAULT_PARAMS if params is None else params)
    _, m_L = masses(p)
    v0 = 1.7
    u0 = np.array([p["L0"] + (m_L * p["g"] - p["d_G"] * v0) / p["k"], v0])
    sol = root(lambda u: return_map(u, p, tol) - u, u0, method="hybr", tol=1e-10)
    if not sol.success:
        raise RuntimeError(f"shooting failed: {sol.message}")
    u = sol.x
    state = np.array([u[0], 0.0, u[1], 0.0])
    _, period, _ = one_cycle(state, p, tol)
    # Jacobian of the 2-D return map by central differences; its eigenvalues are the
    # nontrivial multipliers (the other one is 0: the map lands on lambda = 0).
    M = np.empty((2, 2))
    scale = np.maximum(np.abs(u), 1.0)
    for j in range(2):
        h = fd_step * scale[j]
        e = np.zeros(2)
        e[j] = h
        M[:, j] = (return_map(u + e, p, tol) - return_map(u - e, p, tol)) / (2 * h)
    eig = np.linalg.eigvals(M)
    multiplier = eig[np.argmax(np.abs(eig))]
    nfev = sol.nfev + 1 + 4
    return state, period, multiplier, nfev


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tol", type=float, default=1e-10)
    args = parser.parse_args()
    start = time.perf_counter()
    state, period, multiplier, nfev = orbit_with_multipliers(tol=args.tol)
    elapsed = time.perf_counter() - start
    print(f"lift-off state [z_U, z_L, v_U, v_L] = {state}")
    print(f"period = {period:.12f} s, leading multiplier = {multiplier:.10f}")
    print(f"{nfev} cycle simulations in {elapsed:.3f} s")


if __name__ == "__main__":
    main()
