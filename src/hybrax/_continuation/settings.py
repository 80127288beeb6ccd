"""Step control."""

import math

import equinox as eqx
import optimistix as optx

from .._choices import ContinuationMethod, as_choice
from .._settings import (
    check_iterations,
    resolve_options,
    resolve_root_finder,
)


class ContinuationSettings(eqx.Module):
    r"""How a branch is followed: the predictor-corrector method, its step control
    and the location of special points. The one place where their defaults live.

    The step $h$ (scaled arclength, or $|\Delta\lambda|$ for `"natural"`) starts
    at `initial_step`; it grows by `growth` after a corrector that converged in at
    most `fast_newton` iterations, shrinks by `shrink` after more than
    `slow_newton`, and halves after a failure: no convergence, an invalid point, a
    correction longer than `max_correction` times the step, or a tangent that
    turned so that $t_{n+1}\cdot t_n <$ `min_tangent_cos` (both guard against
    jumping to a neighbouring branch). Below `min_step` the continuation stops.
    Lengths and tangents are taken in the scaled coordinates $(u, \lambda/\theta)$,
    $\theta$ = `parameter_scale`.

    **Arguments:**

    - `method`: a [`hybrax.ContinuationMethod`][] (or its value):
      `"pseudo-arclength"` (Keller 1977) or `"natural"` (fixed $\lambda$; stops
      at a fold).
    - `initial_step`, `min_step`, `max_step`: the first, smallest and largest step.
    - `max_points`: the most points of a branch (located special points included).
    - `max_period`: for periodic orbits of a hybrid system, stop once an orbit's
      period exceeds this (default: no bound).
    - `switch_amplitude`: where a branch is switched at a period doubling, the
      distance $a$ of the first point from the doubling along the critical
      eigenvector; default `initial_step` (for periodic orbits of a hybrid
      system, then a third, a tenth and a thirtieth of it where the first
      corrected point falls back onto the original branch).
    - `parameter_scale`: $\theta$; about the size of the expected change of
      $\lambda$ per unit change of $u$ balances the steps. Default (`None`): the
      parameter's magnitude where the branch starts, $|\lambda_0|$ (1 where
      $\lambda_0 = 0$), so that a stiffness near 2e4 N/m moves by thousands of
      N/m per step rather than by one.
    - `locate`: locate special points (otherwise they are not reported).
    - `locate_tol`, `max_locate_iterations`: the tolerance on the chord (scaled
      coordinates) and the iteration limit of their location.
    - `corrector`: the root finder of the corrector (Newton on the extended
      system), any `optimistix.AbstractRootFinder`; default
      `optimistix.Newton(rtol=1e-11, atol=1e-11)`.
    - `max_iterations`: the corrector's iteration limit.
    - `residual_tol`: the largest $\max|F|$ accepted as a point of the branch.
    - `fast_newton`, `slow_newton`, `growth`, `shrink`, `min_tangent_cos`,
      `max_correction`: the step adaptation above.

    **References:** R. Seydel (2010), Practical Bifurcation and Stability Analysis,
    sec. 4.6 (step control).
    """

    method: ContinuationMethod = eqx.field(
        static=True,
        default=ContinuationMethod.PSEUDO_ARCLENGTH,
        converter=lambda value: as_choice(ContinuationMethod, value, "method"),
    )
    initial_step: float = eqx.field(static=True, default=0.02, converter=float)
    min_step: float = eqx.field(static=True, default=1e-6, converter=float)
    max_step: float = eqx.field(static=True, default=0.2, converter=float)
    max_points: int = eqx.field(static=True, default=500)
    max_period: float | None = eqx.field(
        static=True, default=None, converter=lambda v: None if v is None else float(v)
    )
    switch_amplitude: float | None = eqx.field(
        static=True, default=None, converter=lambda v: None if v is None else float(v)
    )
    parameter_scale: float | None = eqx.field(
        static=True, default=None, converter=lambda v: None if v is None else float(v)
    )
    locate: bool = eqx.field(static=True, default=True)
    locate_tol: float = eqx.field(static=True, default=1e-11, converter=float)
    max_locate_iterations: int = eqx.field(static=True, default=60)
    corrector: optx.AbstractRootFinder = eqx.field(
        default=None, converter=lambda finder: resolve_root_finder(finder, "corrector")
    )
    max_iterations: int = eqx.field(static=True, default=12)
    residual_tol: float = eqx.field(static=True, default=1e-8, converter=float)
    fast_newton: int = eqx.field(static=True, default=3)
    slow_newton: int = eqx.field(static=True, default=6)
    growth: float = eqx.field(static=True, default=1.5, converter=float)
    shrink: float = eqx.field(static=True, default=0.7, converter=float)
    min_tangent_cos: float = eqx.field(static=True, default=0.8, converter=float)
    max_correction: float = eqx.field(static=True, default=1.0, converter=float)

    def __check_init__(self):
        if not 0 < self.min_step <= self.initial_step <= self.max_step:
            raise ValueError(
                "Need 0 < `min_step` <= `initial_step` <= `max_step`; got "
                f"{self.min_step}, {self.initial_step}, {self.max_step}."
            )
        if isinstance(self.max_points, bool) or int(self.max_points) < 1:
            raise ValueError(f"`max_points` must be positive; got {self.max_points}.")
        if self.parameter_scale is not None and not (
            self.parameter_scale > 0 and math.isfinite(self.parameter_scale)
        ):
            raise ValueError(
                f"`parameter_scale` must be positive; got {self.parameter_scale}."
            )
        for name in ("max_period", "switch_amplitude"):
            value = getattr(self, name)
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ValueError(f"`{name}` must be positive; got {value}.")
        check_iterations(self.max_iterations)
        if int(self.max_locate_iterations) < 1:
            raise ValueError(
                "`max_locate_iterations` must be positive; got "
                f"{self.max_locate_iterations}."
            )
        for name in ("locate_tol", "residual_tol", "growth", "max_correction"):
            if not getattr(self, name) > 0:
                raise ValueError(
                    f"`{name}` must be positive; got {getattr(self, name)}."
                )
        if not 0 < self.shrink < 1:
            raise ValueError(f"`shrink` must lie in (0, 1); got {self.shrink}.")
        if not -1 <= self.min_tangent_cos < 1:
            raise ValueError(
                f"`min_tangent_cos` must lie in [-1, 1); got {self.min_tangent_cos}."
            )


def resolve_continuation_settings(
    continuation_settings: ContinuationSettings | None,
) -> ContinuationSettings:
    """`continuation_settings`, or the defaults; a clear error for anything
    else."""
    return resolve_options(
        continuation_settings, ContinuationSettings, "continuation_settings"
    )


def parameter_scale(settings: ContinuationSettings, start: float) -> float:
    r"""$\theta$ of `settings`, or its default where the branch starts at
    $\lambda_0$ = `start`: $|\lambda_0|$, 1 where that is zero or not finite."""
    if settings.parameter_scale is not None:
        return settings.parameter_scale
    magnitude = abs(float(start))
    return magnitude if magnitude > 0 and math.isfinite(magnitude) else 1.0
