"""Independent NumPy/SciPy reference for the vertical two-mass hopper.

Model: Zana et al. (2018), Math. Comput. Appl. 23(4):74, section 4.1.  This module
deliberately imports neither ``jax`` nor ``hybrax``; it uses the closed-form
(modal) solution of each phase, root bracketing for the events and finite
differences / saltation matrices for the sensitivities.

Model
-----
Two point masses move vertically, the upper one ``m_U = mu m`` and the lower one
``m_L = (1 - mu) m``.  The state in minimal coordinates is
``x = [z_U, z_L, v_U, v_L]``.  The spring-damper tension is::

    T = k (z_U - z_L - L0) + d (v_U - v_L)

and the equations of motion are ``m_U z_U'' = -T - m_U g`` and
``m_L z_L'' = T - m_L g``.

Flight (``d = d_F``), both masses free.  With the centre of mass
``zeta = (m_U z_U + m_L z_L) / m`` and the spring deflection
``r = z_U - z_L - L0`` the motion decouples (gravity cancels in ``r``)::

    zeta'' = -g,
    m_r r'' + d_F r' + k r = 0,          m_r = m_U m_L / m,
    z_U = zeta + (m_L / m) (r + L0),      z_L = zeta - (m_U / m) (r + L0).

Touchdown: ``z_L`` crosses 0 downward.  The impact is plastic: ``v_L -> 0`` with
``z_U, v_U`` unchanged (``z_L`` is set to exactly 0, it is 0 up to the event
tolerance).

Ground (``d = d_G``, possibly negative), ``z_L = v_L = 0`` held::

    m_U z_U'' + d_G z_U' + k (z_U - L0) + m_U g = 0.

The ground contact multiplier (ground reaction with a minus sign) is::

    lambda = T - m_L g = k (z_U - L0) + d_G v_U - m_L g,

negative while the ground pushes.  Lift-off: ``lambda`` crosses 0 from negative
to positive.  There is no reset at lift-off.  On the lift-off surface
``lambda = 0`` fixes ``z_U = L0 + (m_L g - d_G v_U) / k`` given ``v_U``.

Both phases are linear, constant-coefficient damped oscillators; they must be
underdamped (``ValueError`` otherwise).  Every damped oscillator
``M y'' + c y' + K y = 0`` is solved as::

    a = c / (2 M),  w = sqrt(K / M - a**2),
    y(t)  = exp(-a t) (y0 cos(w t) + (v0 + a y0) / w sin(w t)),
    y'(t) = exp(-a t) (v0 cos(w t) - (a v0 + (K / M) y0) / w sin(w t)).

Public API
----------
``HopperParams``, ``contact_multiplier``, ``section_state``, ``flight_state``,
``ground_state``, ``touchdown_time``, ``liftoff_time``, ``one_hop``,
``return_map``, ``periodic_orbit``, ``monodromy_fd``, ``monodromy_saltation``,
``reduced_jacobian``.

Run this file as a script to print the reference numbers and self-checks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy.linalg import expm
from scipy.optimize import brentq


__all__ = [
    "HopperParams",
    "contact_multiplier",
    "flight_state",
    "ground_state",
    "monodromy_fd",
    "monodromy_saltation",
    "one_hop",
    "periodic_orbit",
    "reduced_jacobian",
    "return_map",
    "section_state",
    "liftoff_time",
    "touchdown_time",
]

_XTOL = 1e-15  # absolute tolerance of brentq on event times and on v_U
_RTOL = 4.0 * np.finfo(float).eps  # smallest relative tolerance brentq accepts


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class HopperParams:
    """Hopper parameters (defaults from the paper).

    ``g`` gravity, ``m`` total mass, ``mu`` mass fraction of the upper mass,
    ``k`` leg stiffness, ``d_F`` / ``d_G`` leg damping in flight / on ground,
    ``L0`` rest length.  ``D_G = d_G / (2 sqrt(k m))`` is the dimensionless
    ground damping.
    """

    g: float = 9.81
    m: float = 75.0
    mu: float = 0.8
    k: float = 15000.0
    d_F: float = 150.0
    d_G: float = -80.0
    L0: float = 1.0

    @property
    def m_U(self) -> float:
        """Upper mass ``mu m``."""
        return self.m * self.mu

    @property
    def m_L(self) -> float:
        """Lower mass ``(1 - mu) m``."""
        return self.m * (1.0 - self.mu)

    @property
    def D_G(self) -> float:
        """Dimensionless ground damping ``d_G / (2 sqrt(k m))``."""
        return self.d_G / (2.0 * math.sqrt(self.k * self.m))

    def with_D_G(self, D_G: float) -> HopperParams:
        """Copy with ``d_G = D_G 2 sqrt(k m)``."""
        return dataclasses.replace(self, d_G=D_G * 2.0 * math.sqrt(self.k * self.m))


def _params(p: HopperParams | Mapping[str, float] | None) -> HopperParams:
    if p is None:
        return HopperParams()
    if isinstance(p, HopperParams):
        return p
    return HopperParams(**dict(p))


# --------------------------------------------------------------------------
# Closed-form phase solutions
# --------------------------------------------------------------------------
def _damped_oscillator(
    y0: float, v0: float, mass: float, damping: float, stiffness: float, t: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Solve ``mass y'' + damping y' + stiffness y = 0`` (underdamped only)."""
    a = damping / (2.0 * mass)
    w0sq = stiffness / mass
    wsq = w0sq - a * a
    if not wsq > 0.0:
        raise ValueError(
            f"oscillator not underdamped: k/M={w0sq:g}, (c/2M)^2={a * a:g}"
        )
    w = math.sqrt(wsq)
    t = np.asarray(t, dtype=float)
    e = np.exp(-a * t)
    c = np.cos(w * t)
    s = np.sin(w * t)
    y = e * (y0 * c + (v0 + a * y0) / w * s)
    v = e * (v0 * c - (a * v0 + w0sq * y0) / w * s)
    return y, v


def contact_multiplier(x: Any, p: HopperParams | None = None) -> np.ndarray:
    """Ground contact multiplier ``lambda = k (z_U - L0) + d_G v_U - m_L g``.

    Defined for ground states (``z_L = v_L = 0``); ``x`` has shape ``(..., 4)``.
    Negative while the ground pushes; lift-off is its rising zero crossing.
    """
    p = _params(p)
    x = np.asarray(x, dtype=float)
    return p.k * (x[..., 0] - p.L0) + p.d_G * x[..., 2] - p.m_L * p.g


def section_state(v_U: float, p: HopperParams | None = None) -> np.ndarray:
    """Lift-off state ``[z_U, 0, v_U, 0]`` with ``z_U`` fixed by ``lambda = 0``.

    ``z_U = L0 + (m_L g - d_G v_U) / k``.
    """
    p = _params(p)
    z_U = p.L0 + (p.m_L * p.g - p.d_G * v_U) / p.k
    return np.array([z_U, 0.0, v_U, 0.0])


def flight_state(x0: Any, t: Any, p: HopperParams | None = None) -> np.ndarray:
    """Exact flight-phase state at time(s) ``t`` starting from ``x0``.

    Modal solution: the centre of mass ``zeta`` moves ballistically,
    ``zeta(t) = zeta0 + w0 t - g t^2 / 2``, and the deflection
    ``r = z_U - z_L - L0`` obeys ``m_r r'' + d_F r' + k r = 0`` with
    ``m_r = m_U m_L / m``.  Then ``z_U = zeta + (m_L/m)(r + L0)`` and
    ``z_L = zeta - (m_U/m)(r + L0)`` (same for the velocities without ``L0``).
    Valid for any real ``t`` (negative ``t`` runs the flight flow backward).

    Returns an array of shape ``np.shape(t) + (4,)``.
    """
    p = _params(p)
    z_U, z_L, v_U, v_L = (float(c) for c in np.asarray(x0, dtype=float))
    m_U, m_L, m = p.m_U, p.m_L, p.m
    t = np.asarray(t, dtype=float)
    zeta0 = (m_U * z_U + m_L * z_L) / m
    w0 = (m_U * v_U + m_L * v_L) / m
    zeta = zeta0 + w0 * t - 0.5 * p.g * t * t
    w = w0 - p.g * t
    r, rd = _damped_oscillator(
        z_U - z_L - p.L0, v_U - v_L, m_U * m_L / m, p.d_F, p.k, t
    )
    return np.stack(
        [
            zeta + m_L / m * (r + p.L0),
            zeta - m_U / m * (r + p.L0),
            w + m_L / m * rd,
            w - m_U / m * rd,
        ],
        axis=-1,
    )


def ground_state(x0: Any, tau: Any, p: HopperParams | None = None) -> np.ndarray:
    """Exact ground-phase state at time(s) ``tau`` after the start ``x0``.

    ``z_L = v_L = 0`` (entries 1 and 3 of ``x0`` are ignored) and
    ``m_U z_U'' + d_G z_U' + k (z_U - L0) + m_U g = 0``, i.e. a damped oscillator
    about ``z_eq = L0 - m_U g / k``.  Returns shape ``np.shape(tau) + (4,)``.
    """
    p = _params(p)
    x0 = np.asarray(x0, dtype=float)
    z_eq = p.L0 - p.m_U * p.g / p.k
    y, v = _damped_oscillator(float(x0[0]) - z_eq, float(x0[2]), p.m_U, p.d_G, p.k, tau)
    zero = np.zeros_like(y)
    return np.stack([y + z_eq, zero, v, zero], axis=-1)


# --------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------
def _first_rising_crossing(
    fun: Callable[[np.ndarray], np.ndarray], dt: float, t_max: float
) -> float:
    """First ``t > 0`` where ``fun`` goes from ``< 0`` to ``>= 0``.

    ``fun`` is vectorised; it is sampled on the grid ``i dt`` (in chunks, up to
    ``t_max``) and the first bracketing cell is refined with ``brentq``.
    """
    n = 4096
    t0 = 0.0
    while t0 < t_max:
        t = t0 + dt * np.arange(n + 1)
        f = fun(t)
        idx = np.flatnonzero((f[:-1] < 0.0) & (f[1:] >= 0.0))
        if idx.size:
            i = int(idx[0])
            a, b = float(t[i]), float(t[i + 1])
            fa, fb = float(fun(a)), float(fun(b))
            if fb == 0.0:
                return b
            if fa * fb > 0.0:  # rounding differences between array/scalar calls
                return a if abs(fa) < abs(fb) else b
            return float(brentq(fun, a, b, xtol=_XTOL, rtol=_RTOL, maxiter=200))
        t0 = float(t[-1])
    raise RuntimeError(f"no event found in [0, {t_max}]")


def _grid_step(p: HopperParams) -> float:
    """Sampling step: 1/200 of the shorter of the two oscillation periods."""
    m_r = p.m_U * p.m_L / p.m
    w_f = math.sqrt(max(p.k / m_r - (p.d_F / (2 * m_r)) ** 2, 1e-300))
    w_g = math.sqrt(max(p.k / p.m_U - (p.d_G / (2 * p.m_U)) ** 2, 1e-300))
    return 2.0 * math.pi / max(w_f, w_g) / 200.0


def touchdown_time(
    x0: Any, p: HopperParams | None = None, t_max: float = 20.0
) -> float:
    """First ``t > 0`` where ``z_L`` of the flight solution crosses 0 downward.

    A crossing means ``z_L > 0`` followed by ``z_L <= 0`` on the sampling grid
    (refined with ``brentq``), so a start with ``z_L <= 0`` (e.g. exactly on the
    ground, or slightly below it in a finite-difference perturbation) first has
    to rise above the ground.
    """
    p = _params(p)
    x0 = np.asarray(x0, dtype=float)
    return _first_rising_crossing(
        lambda t: -flight_state(x0, t, p)[..., 1], _grid_step(p), t_max
    )


def liftoff_time(
    x_td_after: Any, p: HopperParams | None = None, t_max: float = 20.0
) -> float:
    """First ``tau > 0`` of the ground phase where ``lambda`` crosses 0 upward.

    ``x_td_after`` is the post-impact state.  A crossing requires ``lambda < 0``
    followed by ``lambda >= 0``; if ``lambda`` is positive just after touchdown
    (the spring would pull the foot up at once) that part is skipped and the
    first upward crossing after ``lambda`` has been negative is returned.
    """
    p = _params(p)
    x_td_after = np.asarray(x_td_after, dtype=float)
    return _first_rising_crossing(
        lambda t: contact_multiplier(ground_state(x_td_after, t, p), p),
        _grid_step(p),
        t_max,
    )


# --------------------------------------------------------------------------
# Hops and the periodic orbit
# --------------------------------------------------------------------------
def one_hop(x_liftoff: Any, p: HopperParams | None = None) -> dict[str, Any]:
    """One hop: flight from ``x_liftoff``, impact, ground phase to lift-off.

    Returns a dict with ``t_flight``, ``t_ground``, ``period``,
    ``x_touchdown_pre`` (before impact), ``x_touchdown_post`` (``z_L = v_L = 0``),
    ``x_liftoff`` (next lift-off state), ``T_c = m_L v_L^2 / 2`` (kinetic energy
    lost at impact) and ``T_a = m_U v_U^2 / 2`` (both at touchdown), and
    ``Tc_over_T = T_c / (T_c + T_a)``, and ``lambda_touchdown`` (``lambda`` just
    after impact; if positive, ``liftoff_time`` skipped an initial positive part).
    """
    p = _params(p)
    x0 = np.asarray(x_liftoff, dtype=float)
    t_f = touchdown_time(x0, p)
    x_pre = flight_state(x0, t_f, p)
    x_post = x_pre.copy()
    x_post[1] = 0.0
    x_post[3] = 0.0
    t_g = liftoff_time(x_post, p)
    x_lo = ground_state(x_post, t_g, p)
    T_c = 0.5 * p.m_L * x_pre[3] ** 2
    T_a = 0.5 * p.m_U * x_pre[2] ** 2
    return {
        "t_flight": t_f,
        "t_ground": t_g,
        "period": t_f + t_g,
        "x_touchdown_pre": x_pre,
        "x_touchdown_post": x_post,
        "x_liftoff": x_lo,
        "T_c": T_c,
        "T_a": T_a,
        "Tc_over_T": T_c / (T_c + T_a),
        "lambda_touchdown": float(contact_multiplier(x_post, p)),
    }


def return_map(v_U: float, p: HopperParams | None = None) -> float:
    """1-D lift-off return map ``v_U -> v_U'`` on the section ``lambda = 0``."""
    p = _params(p)
    return float(one_hop(section_state(v_U, p), p)["x_liftoff"][2])


def _richardson_central(f: Callable[[float], Any], h: float, levels: int = 3) -> Any:
    """Richardson-extrapolated central difference ``f'(0)`` (steps h, h/2, ...)."""
    table = []
    for j in range(levels):
        hj = h / 2**j
        table.append(
            (np.asarray(f(hj), dtype=float) - np.asarray(f(-hj), dtype=float))
            / (2 * hj)
        )
    for order in range(1, levels):
        fac = 4.0**order
        table = [
            (fac * table[i + 1] - table[i]) / (fac - 1.0) for i in range(len(table) - 1)
        ]
    return table[0]


def _flight_max(x0: np.ndarray, t_f: float, p: HopperParams, i: int) -> float:
    """Max of coordinate ``i`` (0 upper, 1 lower) over the flight ``[0, t_f]``."""
    t = np.linspace(0.0, t_f, 4001)
    v = flight_state(x0, t, p)[:, i + 2]
    cand = [0.0, t_f]
    for j in np.flatnonzero((v[:-1] > 0.0) & (v[1:] <= 0.0)):
        cand.append(
            brentq(
                lambda s: flight_state(x0, s, p)[i + 2],
                t[j],
                t[j + 1],
                xtol=_XTOL,
                rtol=_RTOL,
            )
        )
    return float(max(flight_state(x0, s, p)[i] for s in cand))


def periodic_orbit(
    p: HopperParams | None = None,
    v_bounds: tuple[float, float] = (0.02, 8.0),
    n_scan: int = 160,
    v_guess: float | None = None,
    fd_step: float = 5e-3,
    mono_step: float = 1e-4,
) -> dict[str, Any]:
    """Periodic hop, its Floquet multiplier and monodromy matrices.

    The fixed point of the 1-D return map ``P(v_U) = v_U`` (``z_U`` from
    ``lambda = 0``) is bracketed on a scan of ``v_bounds`` and refined with
    ``brentq`` (``xtol = 1e-15``).  If several fixed points exist, the one nearest
    ``v_guess`` is returned, by default the one with the largest ``v_U`` (the
    branch that continues the default-parameter orbit); all are listed as
    ``(v_U, multiplier)`` pairs under ``fixed_points``.

    Step sizes: ``fd_step`` for the 1-D multiplier (3-level Richardson, agrees
    with the saltation eigenvalue to ~1e-13 at the defaults) and ``mono_step``
    for ``monodromy_fd`` (``1e-4`` agrees with ``monodromy_saltation`` to ~1e-10;
    ``1e-6`` is rounding-limited at ~6e-9).

    Returned keys: ``state`` (lift-off state), ``t_flight``, ``t_ground``,
    ``period``, ``apex_upper`` / ``apex_lower`` (max ``z_U`` / ``z_L`` in
    flight), ``T_c``, ``T_a``, ``Tc_over_T``, ``residual`` (``P(v) - v``),
    ``multiplier`` (``P'(v)`` by Richardson central differences, step
    ``fd_step``), ``multiplier_saltation`` (nontrivial eigenvalue of the
    saltation monodromy), ``monodromy`` (``monodromy_fd``, fixed duration
    ``period``), ``monodromy_saltation``, ``M_reduced`` (``reduced_jacobian``),
    ``fixed_points`` and ``hop`` (the ``one_hop`` dict).
    """
    p = _params(p)

    def res(v: float) -> float:
        return return_map(v, p) - v

    vs = np.linspace(*v_bounds, n_scan)
    rs = []
    for v in vs:
        try:
            rs.append(res(float(v)))
        except (RuntimeError, ValueError):
            rs.append(np.nan)
    rs = np.asarray(rs)
    roots = []
    for j in range(n_scan - 1):
        if np.isfinite(rs[j]) and np.isfinite(rs[j + 1]) and rs[j] * rs[j + 1] <= 0:
            roots.append(
                brentq(res, vs[j], vs[j + 1], xtol=_XTOL, rtol=_RTOL, maxiter=200)
            )
    if not roots:
        raise RuntimeError("no periodic orbit found in the scanned v_U range")

    def mult(v: float) -> float:
        return float(_richardson_central(lambda h: return_map(v + h, p), fd_step))

    fixed = [(float(v), mult(v)) for v in roots]
    if v_guess is None:
        v_star, multiplier = max(fixed)
    else:
        v_star, multiplier = min(fixed, key=lambda vm: abs(vm[0] - v_guess))
    x_star = section_state(v_star, p)
    hop = one_hop(x_star, p)
    phi_s = monodromy_saltation(x_star, p)
    ev = np.linalg.eigvals(phi_s)
    # the nontrivial one: not the flow eigenvalue 1, not the two zeros
    nontriv = ev[np.argsort(np.abs(ev))][2:]
    mult_s = nontriv[np.argmax(np.abs(nontriv - 1.0))].real
    return {
        "state": x_star,
        "t_flight": hop["t_flight"],
        "t_ground": hop["t_ground"],
        "period": hop["period"],
        "apex_upper": _flight_max(x_star, hop["t_flight"], p, 0),
        "apex_lower": _flight_max(x_star, hop["t_flight"], p, 1),
        "T_c": hop["T_c"],
        "T_a": hop["T_a"],
        "Tc_over_T": hop["Tc_over_T"],
        "residual": res(v_star),
        "multiplier": multiplier,
        "multiplier_saltation": float(mult_s),
        "monodromy": monodromy_fd(x_star, hop["period"], p, h=mono_step),
        "monodromy_saltation": phi_s,
        "M_reduced": reduced_jacobian(x_star, p),
        "fixed_points": fixed,
        "hop": hop,
    }


# --------------------------------------------------------------------------
# Sensitivities
# --------------------------------------------------------------------------
def _state_at(
    x0: np.ndarray, t_p: float, p: HopperParams, late_liftoff: str
) -> np.ndarray:
    """State at fixed time ``t_p`` of the hop started (in flight) at ``x0``."""
    hop = one_hop(x0, p)
    t_lo = hop["period"]
    if t_lo > t_p and late_liftoff == "ground":
        return ground_state(hop["x_touchdown_post"], t_p - hop["t_flight"], p)
    # lift-off before t_p: continue in flight; after t_p ("flight" convention):
    # run the flight flow backward from its own lift-off state by t_lo - t_p.
    return flight_state(hop["x_liftoff"], t_p - t_lo, p)


def monodromy_fd(
    x0: Any,
    t_p: float,
    p: HopperParams | None = None,
    h: float = 1e-4,
    late_liftoff: str = "flight",
) -> np.ndarray:
    """4x4 Jacobian of the fixed-duration flow map ``x0 -> x(t_p)``.

    Each column perturbs one entry of the full start state ``[z_U, z_L, v_U,
    v_L]`` (the start is taken to be in flight) by ``+-h`` and ``+-h/2``; the
    central differences are Richardson extrapolated.  Each perturbed trajectory
    has its own touchdown and lift-off; if it lifts off before ``t_p`` it is
    continued in flight to ``t_p``.  If it lifts off after ``t_p``:

    * ``late_liftoff="flight"`` (default): the flight flow is run *backward*
      from its own lift-off state to ``t_p``.  This is the post-event
      (saltation-matrix) convention: the map is smooth, ``f_flight(x0)`` is the
      eigenvector of the eigenvalue 1 and the result equals
      ``monodromy_saltation``.
    * ``late_liftoff="ground"``: the ground solution at ``t_p`` is used.  The
      map then has a kink at the unperturbed point (the flight and ground
      vector fields differ at lift-off in ``v_U'`` and ``v_L'``), so the
      central difference returns the mean of two one-sided derivatives.
    """
    p = _params(p)
    if late_liftoff not in ("flight", "ground"):
        raise ValueError("late_liftoff must be 'flight' or 'ground'")
    x0 = np.asarray(x0, dtype=float)
    cols = []
    for j in range(4):
        e = np.zeros(4)
        e[j] = 1.0
        cols.append(
            _richardson_central(
                lambda s, e=e: _state_at(x0 + s * e, t_p, p, late_liftoff),
                h,
                levels=2,
            )
        )
    return np.stack(cols, axis=1)


def _flight_matrix(p: HopperParams) -> np.ndarray:
    """``A_F`` of the affine flight vector field ``x' = A_F x + b_F``."""
    mU, mL, k, d = p.m_U, p.m_L, p.k, p.d_F
    return np.array(
        [
            [0.0, 0.0, 1.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [-k / mU, k / mU, -d / mU, d / mU],
            [k / mL, -k / mL, d / mL, -d / mL],
        ]
    )


def _ground_matrix(p: HopperParams) -> np.ndarray:
    """``A_G`` of the ground vector field on the full 4-state (``z_L, v_L`` frozen)."""
    return np.array(
        [
            [0.0, 0.0, 1.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
            [-p.k / p.m_U, 0.0, -p.d_G / p.m_U, 0.0],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )


def _f_flight(x: np.ndarray, p: HopperParams) -> np.ndarray:
    T = p.k * (x[0] - x[1] - p.L0) + p.d_F * (x[2] - x[3])
    return np.array([x[2], x[3], -T / p.m_U - p.g, T / p.m_L - p.g])


def _f_ground(x: np.ndarray, p: HopperParams) -> np.ndarray:
    a = (-p.k * (x[0] - p.L0) - p.d_G * x[2]) / p.m_U - p.g
    return np.array([x[2], 0.0, a, 0.0])


def monodromy_saltation(x0: Any, p: HopperParams | None = None) -> np.ndarray:
    """Monodromy of one hop from ``x0`` by state-transition and saltation matrices.

    ``Phi = S_lo expm(A_G t_g) S_td expm(A_F t_f)`` with (``n`` the event-surface
    normal, ``f-`` / ``f+`` the vector fields before / after the event)::

        S_td = D_R + (f_G(x+) - D_R f_F(x-)) n^T / (n^T f_F(x-)),
               D_R = diag(1, 1, 1, 0),  n = e_2 (surface z_L = 0),
        S_lo = I + (f_F(x) - f_G(x)) n^T / (n^T f_G(x)),
               n = grad lambda = [k, -k, d_G, -d_G].

    Independent of the finite differences (no event-time differentiation); it is
    the fixed-duration monodromy in the post-event convention of
    ``monodromy_fd``.
    """
    p = _params(p)
    x0 = np.asarray(x0, dtype=float)
    hop = one_hop(x0, p)
    x_m, x_p, x_lo = hop["x_touchdown_pre"], hop["x_touchdown_post"], hop["x_liftoff"]
    D_R = np.diag([1.0, 1.0, 1.0, 0.0])
    n_td = np.array([0.0, 1.0, 0.0, 0.0])
    f_m = _f_flight(x_m, p)
    S_td = D_R + np.outer(_f_ground(x_p, p) - D_R @ f_m, n_td) / (n_td @ f_m)
    n_lo = np.array([p.k, -p.k, p.d_G, -p.d_G])
    f_g = _f_ground(x_lo, p)
    S_lo = np.eye(4) + np.outer(_f_flight(x_lo, p) - f_g, n_lo) / (n_lo @ f_g)
    return (
        S_lo
        @ expm(_ground_matrix(p) * hop["t_ground"])
        @ S_td
        @ expm(_flight_matrix(p) * hop["t_flight"])
    )


def reduced_jacobian(
    x0: Any, p: HopperParams | None = None, h: float = 1e-4
) -> np.ndarray:
    """2x2 Jacobian of ``(z_U, v_U)`` at the next lift-off w.r.t. ``(z_U, v_U)``.

    The start ``[z_U, 0, v_U, 0]`` is perturbed off the lift-off section
    (``z_L = v_L = 0`` kept) and each perturbed hop runs to its own lift-off,
    like the paper's eq. (67).  Richardson-extrapolated central differences.
    Its eigenvalues are the nontrivial multiplier and 0 (the image lies on the
    line ``lambda = 0``).
    """
    p = _params(p)
    x0 = np.asarray(x0, dtype=float)
    cols = []
    for j in (0, 2):
        e = np.zeros(4)
        e[j] = 1.0
        cols.append(
            _richardson_central(
                lambda s, e=e: one_hop(x0 + s * e, p)["x_liftoff"][[0, 2]], h
            )
        )
    return np.stack(cols, axis=1)


# --------------------------------------------------------------------------
# Script: reference numbers and self-checks
# --------------------------------------------------------------------------
def _rhs_flight(_t: float, x: np.ndarray, p: HopperParams) -> np.ndarray:
    return _f_flight(x, p)


def _rhs_ground(_t: float, x: np.ndarray, p: HopperParams) -> np.ndarray:
    return _f_ground(x, p)


def _ode_check(orb: dict[str, Any], p: HopperParams) -> tuple[float, float]:
    """Max deviation of the closed forms from DOP853 (rtol = atol = 1e-12)."""
    from scipy.integrate import solve_ivp

    hop = orb["hop"]
    tf = np.linspace(0.0, hop["t_flight"], 7)[1:]
    sol = solve_ivp(
        _rhs_flight, (0.0, tf[-1]), orb["state"], method="DOP853",
        t_eval=tf, rtol=1e-12, atol=1e-12, args=(p,),
    )  # fmt: skip
    err_f = np.max(np.abs(sol.y.T - flight_state(orb["state"], tf, p)))
    tg = np.linspace(0.0, hop["t_ground"], 7)[1:]
    sol = solve_ivp(
        _rhs_ground, (0.0, tg[-1]), hop["x_touchdown_post"], method="DOP853",
        t_eval=tg, rtol=1e-12, atol=1e-12, args=(p,),
    )  # fmt: skip
    err_g = np.max(np.abs(sol.y.T - ground_state(hop["x_touchdown_post"], tg, p)))
    return float(err_f), float(err_g)


def _report(label: str, p: HopperParams) -> None:
    print(f"=== {label}: mu={p.mu}, d_G={p.d_G:.6f} (D_G={p.D_G:.6f}) ===")
    try:
        orb = periodic_orbit(p)
    except (RuntimeError, ValueError) as exc:
        print(f"  no periodic orbit: {exc}")
        for v in (0.05, 0.5, 1.0, 2.0, 5.0, 8.0):
            hop = one_hop(section_state(v, p), p)
            print(
                f"    v_U={v:4.2f}: P(v_U)-v_U={hop['x_liftoff'][2] - v:+.5f}, "
                f"lambda after impact={hop['lambda_touchdown']:+.3f}"
            )
        return
    for key in ("t_flight", "t_ground", "period", "apex_upper", "apex_lower"):
        print(f"  {key:22s} {orb[key]:.15g}")
    for key in ("T_c", "T_a", "Tc_over_T", "residual"):
        print(f"  {key:22s} {orb[key]:.15g}")
    print(f"  {'lambda after impact':22s} {orb['hop']['lambda_touchdown']:.15g}")
    print(f"  {'lift-off state':22s} {np.array2string(orb['state'], precision=15)}")
    print(f"  {'multiplier (FD)':22s} {orb['multiplier']:.15g}")
    print(f"  {'multiplier (saltation)':22s} {orb['multiplier_saltation']:.15g}")
    print(f"  fixed points (v_U, P'): {orb['fixed_points']}")
    print("  monodromy (FD, fixed duration, post-event convention):")
    print(np.array2string(orb["monodromy"], precision=10, suppress_small=True))
    print("  eigenvalues:", np.sort_complex(np.linalg.eigvals(orb["monodromy"])))
    diff = np.max(np.abs(orb["monodromy"] - orb["monodromy_saltation"]))
    print(f"  max |Phi_FD - Phi_saltation| = {diff:.3e}")
    mg = monodromy_fd(orb["state"], orb["period"], p, late_liftoff="ground")
    print("  monodromy (FD, late lift-off evaluated on the ground, kinked):")
    print(np.array2string(mg, precision=10, suppress_small=True))
    print("  M_reduced:")
    print(np.array2string(orb["M_reduced"], precision=10, suppress_small=True))
    print("  eigenvalues:", np.linalg.eigvals(orb["M_reduced"]))
    err_f, err_g = _ode_check(orb, p)
    print(f"  closed form vs DOP853: flight {err_f:.2e}, ground {err_g:.2e}")


def main() -> None:
    """Print reference numbers for the paper's cases."""
    np.set_printoptions(linewidth=100)
    base = HopperParams()
    _report("defaults", base)
    _report("D_G = -0.03", base.with_D_G(-0.03))
    heavy = dataclasses.replace(base, mu=0.95)
    _report("mu = 0.95, D_G = -0.05", heavy.with_D_G(-0.05))


if __name__ == "__main__":
    main()
