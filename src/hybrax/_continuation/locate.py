"""Tangents, location of special points."""

import numpy as np

from .corrector import _Corrector, _is_torus_point, _Point
from .settings import ContinuationSettings


def _scale(k: int, parameter_scale: float) -> np.ndarray:
    """$D$ of the scaled coordinates $\\hat z = D z$, $D = \\mathrm{diag}(1, \\dots,
    1, 1/\\theta)$."""
    scale = np.ones(k + 1)
    scale[k] = 1.0 / parameter_scale
    return scale


def _parameter_direction(k: int) -> np.ndarray:
    e_lam = np.zeros(k + 1)
    e_lam[k] = 1.0
    return e_lam


def _null_vector(jacobian: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The unit null vector of $[F_u\\ F_\\lambda]\\,D^{-1}$ (scaled coordinates)."""
    _, _, vt = np.linalg.svd(jacobian / scale[None, :])
    t = vt[-1]
    return t / np.linalg.norm(t)


def _orient(t: np.ndarray, reference: np.ndarray) -> np.ndarray:
    return -t if float(np.dot(t, reference)) < 0 else t


def _tangent(point: _Point, reference: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return _orient(_null_vector(point.jacobian, scale), reference)


def _locate(
    corrector: _Corrector,
    a: _Point,
    b: _Point,
    scale: np.ndarray,
    kind: str,
    xtol: float,
    max_iterations: int,
) -> tuple[_Point, float, bool]:
    """Illinois regula falsi on the chord $z(s) = z_a + s(z_b - z_a)$, $s \\in
    [0, 1]$, each trial corrected onto the branch on the hyperplane through $z(s)$
    orthogonal to the chord; the test function of `kind` changes sign between `a`
    and `b` (Seydel 2010, sec. 5.1)."""
    chord = b.z - a.z
    w = chord * scale**2  # orthogonal in the scaled coordinates
    s0, g0 = 0.0, a.test_functions()[kind]
    s1, g1 = 1.0, b.test_functions()[kind]
    best, g_best = (a, g0) if abs(g0) < abs(g1) else (b, g1)
    side = 0
    s_prev = None
    chord_length = np.max(np.abs(chord * scale))
    for _ in range(max_iterations):
        s = (s0 * g1 - s1 * g0) / (g1 - g0) if g1 != g0 else 0.5 * (s0 + s1)
        if not (min(s0, s1) < s < max(s0, s1)):
            s = 0.5 * (s0 + s1)
        point = corrector(a.z + s * chord, w)
        if not point.ok:
            # Fall back on bisection when a trial fails to converge.
            s = 0.5 * (s0 + s1)
            point = corrector(a.z + s * chord, w)
            if not point.ok:
                return best, g_best, False
        g = point.test_functions()[kind]
        if abs(g) <= abs(g_best):
            best, g_best = point, g
        if g == 0.0:
            return point, g, True
        # Illinois: halve the value kept at the end that stays put twice running,
        # so that regula falsi does not stall on one side.
        if (g > 0) == (g1 > 0):
            s1, g1 = s, g
            if side == 1:
                g0 *= 0.5
            side = 1
        else:
            s0, g0 = s, g
            if side == -1:
                g1 *= 0.5
            side = -1
        converged_s = abs(s1 - s0) * chord_length <= xtol
        converged_step = s_prev is not None and abs(s - s_prev) * chord_length <= (
            xtol * 1e-2
        )
        if converged_s or converged_step:
            return best, g_best, True
        s_prev = s
    return best, g_best, False


def _special_points_between(
    corrector: _Corrector,
    prev: _Point,
    new: _Point,
    scale: np.ndarray,
    settings: ContinuationSettings,
) -> list[tuple[_Point, str, float, bool]]:
    """The special points whose test functions change sign between `prev` and
    `new`, located, in the order met along the chord."""
    if not settings.locate:
        return []
    g_prev, g_new = prev.test_functions(), new.test_functions()
    chord = new.z - prev.z
    found = []
    for kind in g_prev:
        if not g_prev[kind] * g_new.get(kind, np.nan) < 0:
            continue
        margin = corrector.residual.bracket_tolerance(kind)
        if min(abs(g_prev[kind]), abs(g_new[kind])) <= margin:
            continue
        point, g, located = _locate(
            corrector,
            prev,
            new,
            scale,
            kind,
            settings.locate_tol,
            settings.max_locate_iterations,
        )
        if point is prev or point is new:
            continue
        if not corrector.residual.crosses_zero(kind, g, (g_prev[kind], g_new[kind])):
            continue
        if kind == "neimark_sacker" and not _is_torus_point(point.M):
            continue  # a neutral saddle: real nu_i nu_j = 1, no bifurcation
        point.tangent = _tangent(point, prev.tangent, scale)
        point.kind = kind.partition("@")[0]  # force_reversal@k: event k's
        s = float(np.dot(point.z - prev.z, chord) / np.dot(chord, chord))
        found.append((s, point, kind, g, located))
    found.sort(key=lambda item: item[0])
    return [item[1:] for item in found]
