"""The driver."""

import collections
import dataclasses
import math
import time
from collections.abc import Callable

import numpy as np

from .._compile import announce
from .._solution import RESULTS, Interrupted
from .corrector import _Corrector, _Point
from .locate import _parameter_direction, _scale, _special_points_between, _tangent
from .results import SpecialPoint
from .settings import ContinuationSettings, parameter_scale


@dataclasses.dataclass
class _Trace:
    """A followed branch on the host: its points, the `(index, kind, test value,
    located)` of its special points, and why it stopped."""

    points: list[_Point]
    specials: list[tuple[int, str, float, bool]]
    result: RESULTS
    message: str
    n_rejected: int


def _resolve_range(start, stop, direction, start_name="start"):
    """`(start, low, high, direction)` from the continuation's range arguments:
    `stop` is the value the branch is followed towards (the range runs from
    `start` to it) or a pair `(low, high)` around `start` (then `direction`
    says which way the branch leaves)."""
    start = float(start)
    if not math.isfinite(start):
        raise ValueError(f"`{start_name}` must be finite; got {start}.")
    if stop is None:
        raise ValueError("Give `stop`: a value, or a range `(low, high)`.")
    if isinstance(stop, tuple | list):
        if len(stop) != 2:
            raise ValueError(f"`stop` as a range must be `(low, high)`; got {stop}.")
        low, high = (float(b) for b in stop)
        towards = None
    else:
        towards = float(stop)
        low, high = min(start, towards), max(start, towards)
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(
            f"`stop` must be finite and differ from `{start_name}` (a range: "
            f"low < high); got {stop}."
        )
    if not low <= start <= high:
        raise ValueError(
            f"`{start_name}` = {start} must lie within `stop` = {tuple(stop)}."
        )
    if direction is None:
        if towards is None:
            raise ValueError("Give `direction` (+1 or -1) when `stop` is a range.")
        direction = 1 if towards > start else -1
    if direction not in (1, -1):
        raise ValueError(f"`direction` must be +1 or -1; got {direction}.")
    return start, low, high, direction


def _predict(prev: _Point, h: float, direction: int, settings, scale):
    """`(z_pred, w, predicted length)`: the tangent predictor and the corrector's
    hyperplane $w \\cdot (z - z_p) = 0$ (orthogonal to the tangent, or fixed
    $\\lambda$ for natural continuation)."""
    k = prev.z.shape[0] - 1
    e_lam = _parameter_direction(k)
    if settings.method == "natural":
        t = prev.tangent / scale
        d_lam = direction * h
        if abs(t[k]) > 1e-12 * np.linalg.norm(t):
            z_pred = prev.z + t * (d_lam / t[k])
        else:
            z_pred = prev.z + d_lam * e_lam
        z_pred[k] = prev.lam + d_lam
        return z_pred, e_lam, float(np.linalg.norm((z_pred - prev.z) * scale))
    return prev.z + h * prev.tangent / scale, prev.tangent * scale, h


def _acceptable(new, prev, z_pred, predicted, h, settings, scale) -> bool:
    """Whether a corrected point is taken; sets its tangent."""
    if not new.ok:
        return False
    new.tangent = _tangent(new, prev.tangent, scale)
    correction = np.linalg.norm((new.z - z_pred) * scale)
    turned = float(np.dot(new.tangent, prev.tangent)) < settings.min_tangent_cos
    jumped = correction > settings.max_correction * predicted
    # On the last halving allowed, a turn or a jump is accepted rather than stop.
    return not ((turned or jumped) and h * 0.5 >= settings.min_step)


def _adapt_step(h: float, n_steps: int, settings) -> float:
    if n_steps <= settings.fast_newton:
        return min(h * settings.growth, settings.max_step)
    if n_steps > settings.slow_newton:
        return max(h * settings.shrink, settings.min_step)
    return h


def _finish_on_bound(corrector, prev, new, low, high, scale) -> _Point | None:
    """The last point on the bound that `new` crossed, on the branch's first
    crossing of it: predicted along the tangent at `prev` (the chord to `new` may
    cut across a fold just beyond the bound), then corrected at fixed $\\lambda$."""
    k = prev.z.shape[0] - 1
    bound = high if new.lam > high else low
    if abs(prev.lam - bound) <= 1e-14 * max(1.0, abs(bound)):
        return None  # already there
    t = prev.tangent / scale
    chord = new.z - prev.z
    predictions = [prev.z + (bound - prev.lam) / (new.lam - prev.lam) * chord]
    if abs(t[k]) > 0:
        along = prev.z + (bound - prev.lam) / t[k] * t
        if np.linalg.norm((along - prev.z) * scale) <= np.linalg.norm(chord * scale):
            predictions.insert(0, along)
    for z_pred in predictions:
        z_pred[k] = bound
        end = corrector(z_pred, _parameter_direction(k))
        if end.ok:
            end.tangent = _tangent(end, prev.tangent, scale)
            end.kind = "end"
            return end
    return None


def duration_words(seconds: float) -> str:
    """A duration for a progress line: seconds below 90 s, minutes below 90
    min, else hours (`"40 s"`, `"3 min"`, `"1.5 h"`)."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# The seconds per point of a progress line: the mean over this many of the last
# points (the first steps may include compilations).
_PACE_WINDOW = 10


class _Pace:
    """The measured seconds per accepted point of a continuation, for its
    progress lines: `mark(n)` after the `n`-th point; `words(n, budget)` the
    pace so far and the time left if the remaining points of the budget are
    taken at that pace (an upper bound of the points, not of their cost)."""

    def __init__(self, n: int):
        self._last = time.perf_counter()
        # Only the window is kept (a long branch keeps no list of every point).
        self._seconds: collections.deque = collections.deque(maxlen=_PACE_WINDOW)
        self._n = n

    def mark(self, n: int) -> None:
        now = time.perf_counter()
        new = max(n - self._n, 1)
        self._seconds.extend([(now - self._last) / new] * new)
        self._last, self._n = now, n

    def words(self, n: int, budget: int) -> str:
        pace = sum(self._seconds) / len(self._seconds)
        words = f"{n}/{budget} points, {pace:.2g} s/point"
        if n >= budget:
            return words + ", the point budget used up"
        left = pace * (budget - n)
        if left < 1:
            return words + ", under 1 s left"
        return words + f", about {duration_words(left)} left at most"


def _budget_message(points, settings, parameter_name, low, high, direction) -> str:
    """How far a continuation that used up its `max_points` got: its last
    parameter value, and the share of the way from its start to the bound in
    its direction (where it lies in between)."""
    start, last = points[0].lam, points[-1].lam
    target = high if direction > 0 else low
    message = (
        f"reached max_points = {settings.max_points} at {parameter_name} = {last:.8g}"
    )
    share = (last - start) / (target - start) if target != start else math.nan
    if 0 <= share <= 1:
        return message + f", {share:.0%} of the way from {start:g} to {target:g}"
    return message + f", before leaving [{low:g}, {high:g}]"


def _follow(
    corrector: _Corrector,
    first: _Point,
    low: float,
    high: float,
    direction: int,
    settings: ContinuationSettings,
    parameter_name: str,
    stop_when: Callable[[_Point], tuple[RESULTS, str] | None] | None = None,
) -> _Trace:
    """Pseudo-arclength (or natural) continuation from `first` (whose tangent is
    set) until the branch leaves `[low, high]`, `max_points` are computed (its
    message then says how far it got), the step falls below `min_step`,
    `stop_when(point)` returns `(result, message)`, or Ctrl-C interrupts it
    (`RESULTS.interrupted`). Each point is announced with the measured seconds
    per point and the time the rest of the point budget would take."""
    scale = _scale(first.z.shape[0] - 1, parameter_scale(settings, first.lam))
    first.kind = "start"
    points, specials = [first], []
    h = settings.initial_step
    n_rejected = 0
    result = RESULTS.max_points_reached
    message = ""
    pace = _Pace(len(points))
    try:
        while len(points) < settings.max_points:
            prev = points[-1]
            z_pred, w, predicted = _predict(prev, h, direction, settings, scale)
            new = corrector(z_pred, w)
            if not _acceptable(new, prev, z_pred, predicted, h, settings, scale):
                n_rejected += 1
                h *= 0.5
                if h < settings.min_step:
                    result = RESULTS.min_step_reached
                    message = (
                        f"step below min_step = {settings.min_step:g} at "
                        f"{parameter_name} = {prev.lam:.8g}"
                    )
                    if settings.method == "natural":
                        message += " (a fold stops natural continuation)"
                    break
                continue
            for point, kind, g, located in _special_points_between(
                corrector, prev, new, scale, settings
            ):
                if low <= point.lam <= high and len(points) < settings.max_points:
                    # The point first: an interrupt between the two lines leaves
                    # no special point without its point.
                    points.append(point)
                    specials.append((len(points) - 1, kind, g, located))
                    label = kind.replace("_", " ")
                    announce(f"  {label} at {parameter_name} = {point.lam:.8g}")
            if not low <= new.lam <= high:
                end = _finish_on_bound(corrector, prev, new, low, high, scale)
                if end is not None and len(points) < settings.max_points:
                    points.append(end)
                result = RESULTS.reached_bound
                message = f"left [{low:g}, {high:g}]"
                break
            if len(points) >= settings.max_points:
                break
            points.append(new)
            pace.mark(len(points))
            # A line per point (the command line's progress; else the log's),
            # with the pace measured so far and the time the rest of the point
            # budget would take at it.
            announce(
                f"  point {len(points) - 1}: {parameter_name} = {new.lam:.8g} "
                f"({new.n_steps} Newton steps, step {h:.3g}); "
                + pace.words(len(points), settings.max_points)
            )
            reason = None if stop_when is None else stop_when(new)
            if reason is not None:
                result, message = reason
                break
            h = _adapt_step(h, new.n_steps, settings)
    except KeyboardInterrupt:
        # The points accepted so far are whole (a point is appended once done).
        result = RESULTS.interrupted
        message = f"interrupted (Ctrl-C) after {len(points)} point(s)"
    if bool(result == RESULTS.max_points_reached):
        message = _budget_message(
            points, settings, parameter_name, low, high, direction
        )
    return _Trace(points, specials, result, message, n_rejected)


def start_at_parameter(corrector, u0, start, direction, settings) -> _Point:
    """The first point: `u0` corrected at fixed $\\lambda$ = `start`, its tangent
    oriented so that $d\\lambda$ has the sign of `direction`."""
    k = u0.shape[0]
    e_lam = _parameter_direction(k)
    first = corrector(np.concatenate([u0, [start]]), e_lam)
    if first.ok:
        first.tangent = _tangent(
            first, direction * e_lam, _scale(k, parameter_scale(settings, start))
        )
    return first


def _flip_eigenvector(M: np.ndarray) -> np.ndarray:
    """The real unit eigenvector of the multiplier nearest $-1$."""
    nu, vectors = np.linalg.eig(M)
    v = np.real(vectors[:, np.argmin(np.abs(nu + 1.0))])
    return v / np.linalg.norm(v)


def _start_on_doubled_branch(corrector, point: SpecialPoint, amplitude, settings):
    """The first point of the period-$2m$ branch that bifurcates at the period
    doubling `point` of a period-$m$ branch. There $g^{2m}$ has a pitchfork whose
    new branch leaves along $(v, 0)$, $v$ the eigenvector of the multiplier $-1$
    (Kuznetsov 2004, sec. 4.4): predict $z_p = z^* + a\\,(v, 0)$ and correct on the
    hyperplane $(v, 0)\\cdot(z - z_p) = 0$, which the period-$m$ branch crosses far
    from $z_p$ (at $\\Delta\\lambda = O(a)$ against $O(a^2)$)."""
    k = point.u.shape[0]
    v = _flip_eigenvector(point.multiplier_matrix)
    direction = np.concatenate([v, [0.0]])
    z_pred = np.concatenate([point.u + amplitude * v, [point.parameter]])
    first = corrector(z_pred, direction)
    if first.ok:
        theta = parameter_scale(settings, point.parameter)
        first.tangent = _tangent(first, direction, _scale(k, theta))
    return first


def check_u0(u0) -> np.ndarray:
    try:
        u0 = np.atleast_1d(np.asarray(u0, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(
            "`u0` must be an array of numbers (or, to switch branches, a period "
            f"doubling); got {type(u0).__name__}."
        ) from None
    if u0.ndim != 1:
        raise ValueError(f"`u0` must be 1-D; got shape {u0.shape}.")
    return u0


def _start_failure(first, missing, noun, name, bounds, check_start) -> str | None:
    """Why a branch cannot start from `first`: no solution there, a start outside
    `bounds`, or the client's own `check_start`; `None` if it can."""
    low, high = bounds
    if not first.ok:
        return (
            f"{missing} (residual {first.residual_norm:.3g}, {first.n_steps} "
            "Newton steps)"
        )
    if not low <= first.lam <= high:
        return (
            f"the start {noun} has {name} = {first.lam:.8g}, outside "
            f"[{low:g}, {high:g}]"
        )
    return None if check_start is None else check_start(first)


def _first_point(start_point, *args):
    """`start_point(*args)`; Ctrl-C there is [`hybrax.Interrupted`][] without a
    branch."""
    try:
        return start_point(*args)
    except KeyboardInterrupt:
        raise Interrupted(None, "interrupted before the first point") from None


def _interrupted_or(branch):
    """`branch`, or [`hybrax.Interrupted`][] raised with it where Ctrl-C stopped
    its continuation."""
    if bool(branch.result == RESULTS.interrupted):
        raise Interrupted(branch, branch.message)
    return branch
