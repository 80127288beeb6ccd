"""What [`hybrax.tune`][] takes and gives: its settings, targets that compile once,
its steps and its result.
"""

import math
from collections.abc import Callable
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import ArrayLike

from .._choices import GradientMode, as_choice
from .._custom_types import Params
from .._periodic import (
    PeriodicOrbit,
)
from .._solution import RESULTS
from .problem import _batched_values, _values_of


class TuneStep(eqx.Module):
    """One evaluation of the objective during [`hybrax.tune`][] (host values).

    - `step`: its index; `values`: the varied parameters, by name.
    - `objective`: $J$ there (NaN where no orbit was found).
    - `spectral_radius`, `multipliers`: of the orbit there.
    - `orbit_found`: whether an orbit was found; `result`: the orbit's status, a
      [`hybrax.RESULTS`][] member.
    - `best`: whether this evaluation improved on every earlier one.
    - `u`: the orbit's reduced unknowns (a warm start for nearby points).
    - `stage`: `"seek"` for a step of the existence stage (no orbit yet: the
      objective is the squared periodicity defect and constraints,
      `orbit_found` says whether an orbit was found there), `"tune"` after.
    """

    step: int
    values: dict[str, float]
    objective: float
    spectral_radius: float
    multipliers: np.ndarray
    orbit_found: bool
    result: RESULTS
    best: bool
    u: np.ndarray
    stage: str = "tune"


class TuneResult(eqx.Module):
    r"""The result of [`hybrax.tune`][].

    - `params`: the tuned parameter PyTree; `values`: the varied ones, by name.
    - `objective`: $J$ at the result; `orbit`: its [`hybrax.PeriodicOrbit`][].
    - `result`: what the result is, a [`hybrax.RESULTS`][] member:
      - `successful`: an orbit, every constraint within its tolerance, and the
        minimiser met its own tolerance (a constrained minimum);
      - `targets_met`: an orbit with every constraint within its tolerance, but
        the minimiser stopped short of its tolerance (`minimiser_result` says
        why, e.g. `"max_steps_reached"`): a feasible point, not a minimum;
      - `targets_not_met`: an orbit, some constraint outside its tolerance;
      - otherwise why no orbit was found at the result (the orbit's own
        `result`, e.g. `shooting_failed`).
      None of them says the orbit is stable: `stable` does. `succeeded`: the
      targets are met (`successful` or `targets_met`).
    - `orbit_found`: an orbit exists at the result; `targets_met`: it meets every
      constraint to its tolerance, $|c_i| \le \tau_i$ (true where there are
      none); `stable`: its spectral radius is below 1 (and below
      `max_multiplier` if one was given).
    - `history`: every evaluation, a list of [`hybrax.TuneStep`][].
    - `n_evaluations`: orbit solves with their gradients; `wall_time`: seconds in
      all; `compile_time`: of those, the ones outside the minimiser's warm steps
      (tracing and compiling its programs, once each, with the first step and the
      start and final solves); the rest is run time.
    - `minimiser_result`: the minimiser's own status name (`"successful"` when it
      met its tolerance), or `"parameter_rule"`: its next step would have left the
      parameters' rules (their class's checks, e.g. a slope inside
      $(-\pi/2, \pi/2)$), or it ended without converging after trial points
      outside them (which evaluate to no orbit, status
      `parameters_out_of_domain`), so the result is the last point inside them and
      `rule` says which rule; `mode`: `"reverse"` or `"forward"`.
    """

    params: Params
    values: dict[str, float]
    objective: float
    orbit: PeriodicOrbit
    result: RESULTS
    orbit_found: bool
    targets_met: bool
    stable: bool
    history: list[TuneStep]
    n_evaluations: int
    wall_time: float
    compile_time: float
    minimiser_result: str
    mode: str
    problem: Any = eqx.field(repr=False, default=None, metadata={"archive": False})
    rule: str | None = None

    @property
    def succeeded(self) -> bool:
        """Whether the targets are met at an orbit (`result` is `successful` or
        `targets_met`)."""
        return bool(
            (self.result == RESULTS.successful) | (self.result == RESULTS.targets_met)
        )

    def objective_at(self, values) -> np.ndarray:
        """The penalised objective (final stage) at a batch of values of the
        varied parameters, shape `(N, P)` in `values`' order: for contour maps.
        Each point's orbit is sought from the nearest evaluated one's; NaN where
        none is found. The orbits come from one [`hybrax.sweep_orbits`][] (its
        compaction keeps points without an orbit from holding up the others)."""
        values = np.atleast_2d(np.asarray(values, dtype=float))
        problem = self.problem
        scale = np.asarray(problem.scale)
        y = values / scale
        found = [step for step in self.history if step.orbit_found]
        if not found:
            guesses = np.broadcast_to(np.asarray(self.orbit.u), (len(y), 1))
        else:
            names = list(self.values)
            known = np.array([[s.values[n] for n in names] for s in found]) / scale
            nearest = np.argmin(
                np.sum((y[:, None, :] - known[None, :, :]) ** 2, axis=-1), axis=1
            )
            guesses = np.stack([found[i].u for i in nearest])
        from .._sweep import sweep_orbits

        params = _batched_values(problem, jnp.asarray(y))
        orbits = sweep_orbits(
            problem.system,
            problem.section,
            guesses,
            params,
            settings=problem.settings,
            shooting=problem.shooting,
            phase_observables=True,
        ).orbit
        return np.asarray(_values_of(problem, orbits, params))


def _run_time_value(value):
    """`value` as an array (a Python or NumPy number becomes a NumPy float array;
    a JAX array, traced or not, stays as it is): `equinox.filter_jit` keeps
    Python numbers static, so each would compile its own program."""
    if isinstance(value, jax.Array):
        return value
    return np.asarray(value, dtype=jnp.result_type(float))


class QuantityTarget(eqx.Module):
    """The constraint `quantity(orbit, params) - value` of [`hybrax.tune`][] with
    `value` a run-time input of the compiled tuning program, so that another
    target compiles nothing, whether given as a Python float, a NumPy or a JAX
    number (a target captured by a lambda is a constant of the program: each
    value compiles its own).

    **Arguments:**

    - `quantity`: `(orbit, params) -> scalar`, an orbit quantity.
    - `value`: the target value (stored as an array).
    """

    quantity: Callable[[PeriodicOrbit, Params], Any]
    value: ArrayLike = eqx.field(converter=_run_time_value)

    def __call__(self, orbit, params):
        return self.quantity(orbit, params) - self.value


class TuneSettings(eqx.Module):
    r"""How [`hybrax.tune`][] minimises: the minimiser and its step limit, the
    derivative's mode, the weights of the penalised objective, and the existence
    stage. Checked where it is built (a `ValueError` naming the field).

    - `minimiser`: any `optimistix.AbstractMinimiser`; default
      `optimistix.BFGS(rtol=1e-8, atol=1e-8)`. optimistix's quasi-Newton
      (BFGS, DFP, L-BFGS) and gradient (gradient descent, nonlinear CG)
      minimisers step on the objective's one compiled program (its value,
      gradient and orbit, evaluated where the step will evaluate); any other
      (Nelder-Mead, `optimistix.BestSoFarMinimiser`, an optax optimiser)
      evaluates the objective inside its own step, a second program with the
      orbit's solve to compile.
    - `max_steps`: the most evaluations, all stages together (default 100).
    - `mode`: the gradient's mode, a [`hybrax.GradientMode`][] (or its value):
      `"auto"` (default), `"reverse"` or `"forward"` (see [`hybrax.tune`][]).
    - `stability_weight`: $w$, the weight of the stability penalty (default
      1e3; see [`hybrax.tune`][]).
    - `objective_scale`: $J_0$, a typical size of the objective, so that it
      weighs against the penalties whatever its units (default 1); `"start"`:
      its magnitude at the first orbit (after the existence stage). The
      history's and the result's `objective` are the minimised, scaled value.
    - `seek_steps`: where no orbit is found at the start, the most steps of an
      existence stage before the tuning (0: none; [`hybrax.tune`][] then raises
      a `ValueError`). It
      minimises $|P(u; p) - u|^2 + \sum_i (c_i/\tau_i)^2$ over the unknowns $u$
      and the varied parameters together by `optimistix.LevenbergMarquardt`
      (forward-mode Jacobians; the constraints read on the open cycle from $u$),
      and ends where the periodicity defect $\max|P(u) - u|$ is below
      `seek_tol` (default 0.1) and an orbit is found from there. A controller
      whose walker falls has no orbit to differentiate; this stage gives it one.
    """

    minimiser: optx.AbstractMinimiser | None = eqx.field(static=True, default=None)
    max_steps: int = eqx.field(static=True, default=100)
    mode: GradientMode = eqx.field(
        static=True,
        default=GradientMode.AUTO,
        converter=lambda value: as_choice(GradientMode, value, "mode"),
    )
    stability_weight: float = eqx.field(static=True, default=1e3)
    objective_scale: float | Literal["start"] = eqx.field(static=True, default=1.0)
    seek_steps: int = eqx.field(static=True, default=0)
    seek_tol: float = eqx.field(static=True, default=0.1)

    def __check_init__(self):
        if isinstance(self.max_steps, bool) or int(self.max_steps) < 1:
            raise ValueError(
                f"`max_steps` must be a positive integer; got {self.max_steps}."
            )
        if not self.stability_weight >= 0:
            raise ValueError(
                f"`stability_weight` must be non-negative; got {self.stability_weight}."
            )
        scale = self.objective_scale
        if scale != "start" and not (
            isinstance(scale, int | float | np.floating)
            and not isinstance(scale, bool)
            and 0 < scale < math.inf
        ):
            raise ValueError(
                "`objective_scale` must be a positive number or 'start'; got "
                f"{scale!r}."
            )
        if isinstance(self.seek_steps, bool) or int(self.seek_steps) < 0:
            raise ValueError(f"`seek_steps` must be >= 0; got {self.seek_steps}.")
        if not self.seek_tol > 0:
            raise ValueError(f"`seek_tol` must be positive; got {self.seek_tol}.")
        if self.minimiser is not None and not isinstance(
            self.minimiser, optx.AbstractMinimiser
        ):
            raise ValueError(
                "`minimiser` must be an optimistix minimiser; got "
                f"{type(self.minimiser).__name__}."
            )
