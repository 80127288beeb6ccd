r"""Homotopy in parameter space: an orbit at new parameters followed from one
known at others, along the straight path between them.

Where shooting from a guess fails at the parameters $p_1$ but an orbit $u_0$ is
known at $p_0$ (a model's defaults, a tuned gait), the family of orbits through
$u_0$ is continued in the path parameter $s$ of

$$p(s) = p_0 + s\,(p_1 - p_0),\qquad s \in [0, 1],$$

by the pseudo-arclength continuation of [`hybrax.continue_orbits`][] (Keller
1977), which passes folds: where the family turns back before $s = 1$, the fold is
located and reported, which is the honest answer "the family from $p_0$ does not
reach $p_1$" rather than a guess that failed.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._continuation import (
    Branch,
    ContinuationSettings,
    check_u0,
    follow_orbits,
    resolve_continuation_settings,
    start_at_parameter,
)
from ._continuation_parameter import AbstractParameter
from ._custom_types import Params
from ._hybrid import HybridSystem
from ._misc import canonical_params, check_float64
from ._periodic import PeriodicOrbit, PoincareSection, find_periodic_orbit
from ._settings import Settings, Shooting
from ._solution import RESULTS


def _is_float(leaf) -> bool:
    if isinstance(leaf, float | np.floating):
        return True
    return isinstance(leaf, jax.Array | np.ndarray) and jnp.issubdtype(
        leaf.dtype, jnp.floating
    )


class StraightPath(AbstractParameter):
    r"""The path parameter $s$ of $p(s) = p_0 + s\,(p_1 - p_0)$ between two
    parameter PyTrees of one structure: every floating leaf is interpolated, every
    other leaf (an integer or a flag: a static choice) must be equal in both.

    `set(params, s)` ignores `params` and returns $p(s)$; `get(params)` is the
    least-squares $s$ of `params` on the line.

    **Arguments:**

    - `start`, `end`: $p_0$ and $p_1$.
    - `name`: the label of $s$ (default `"s"`).
    """

    start: Params
    end: Params
    name: str = eqx.field(static=True, default="s")

    def __check_init__(self):
        start_leaves, start_def = jax.tree_util.tree_flatten(self.start)
        end_leaves, end_def = jax.tree_util.tree_flatten(self.end)
        if start_def != end_def:
            raise ValueError(
                "`params_from` and `params` must have one structure (the same "
                f"parameter class and fields); got {start_def} and {end_def}."
            )
        for a, b in zip(start_leaves, end_leaves):
            if not (_is_float(a) or _is_float(b)) and not np.array_equal(a, b):
                raise ValueError(
                    "`params_from` and `params` differ in a leaf that is not a "
                    f"float ({a!r} against {b!r}): a straight path cannot join "
                    "them."
                )

    def get(self, params: Params) -> Any:
        def dot(x, y):
            return sum(
                jnp.vdot(a, b)
                for a, b in zip(
                    jax.tree_util.tree_leaves(x), jax.tree_util.tree_leaves(y)
                )
            )

        step = _difference(self.end, self.start)
        return dot(_difference(params, self.start), step) / dot(step, step)

    def set(self, params: Params, value: Any) -> Params:
        del params
        return jax.tree_util.tree_map(
            lambda a, b: a + value * (b - a) if _is_float(a) else b,
            self.start,
            self.end,
        )


def _difference(x, y):
    return jax.tree_util.tree_map(
        lambda a, b: a - b if _is_float(a) else jnp.zeros(()), x, y
    )


def _changed_fields(path: StraightPath, s: float) -> str:
    """`"d_G = -50.1, k = 10200"`: the scalar leaves that differ along the path, at
    `s`, by their names in the PyTree."""
    here = jax.device_get(path.set(None, s))
    start = jax.tree_util.tree_leaves(jax.device_get(path.start))
    end = jax.tree_util.tree_leaves(jax.device_get(path.end))
    named = jax.tree_util.tree_flatten_with_path(here)[0]
    parts = []
    for (key, value), a, b in zip(named, start, end):
        if _is_float(np.asarray(a)) and not np.array_equal(a, b):
            name = jax.tree_util.keystr(key).lstrip(".").strip("[]'\"")
            if np.ndim(value) == 0:
                parts.append(f"{name} = {float(value):.10g}")
            else:
                parts.append(f"{name} = {np.array2string(np.asarray(value))}")
    return ", ".join(parts)


class Homotopy(eqx.Module):
    r"""The result of [`hybrax.continue_to_params`][].

    - `orbit`: the [`hybrax.PeriodicOrbit`][] at the requested parameters, found
      by shooting from the family's end point (with its Floquet analysis when
      asked for); `None` where the family does not reach them.
    - `reached`: whether it did (then `orbit.succeeded` says whether the final
      solve converged too).
    - `result`: a [`hybrax.RESULTS`][] member: `successful` (reached);
      `fold_reached` (the family turns back at a fold before $s = 1$);
      `start_failed` (no orbit at `params_from` from `u_from`); or why the
      continuation stopped short otherwise (`min_step_reached`: a step could not
      be corrected, e.g. where the cycle's event sequence changes, a grazing or a
      phase that is no longer viable; `max_points_reached`). `succeeded`: the
      family reached the parameters and the final solve converged.
    - `end`: the largest $s$ the family reached (the fold's $s$ where it turned).
    - `message`: one line saying so, with the parameters where the family ended.
    - `branch`: the [`hybrax.Branch`][] followed, in $s$ (its `special_points`
      include the folds and period doublings met on the way).
    - `path`: the [`hybrax.StraightPath`][]; `path.set(None, s)` gives $p(s)$.
    """

    orbit: PeriodicOrbit | None
    reached: bool
    result: RESULTS
    end: float
    message: str
    branch: Branch
    path: StraightPath

    @property
    def succeeded(self) -> bool:
        """Whether the family reached the parameters and the orbit there
        converged."""
        return self.reached and self.orbit is not None and bool(self.orbit.succeeded)


def continue_to_params(
    system: HybridSystem,
    section: PoincareSection,
    u_from: Float[Array, " k"],
    params_from: Params,
    params: Params,
    *,
    settings: Settings | None = None,
    continuation_settings: ContinuationSettings | None = None,
    shooting: Shooting | None = None,
    analyse: bool = True,
    phase_observables: bool = True,
) -> Homotopy:
    r"""The periodic orbit at `params`, followed from one at `params_from` along the
    straight path in parameter space.

    Pseudo-arclength continuation (Keller 1977) of the orbit family through
    `u_from` in the path parameter $s$ of $p(s) = p_0 + s\,(p_1 - p_0)$, $p_0$ =
    `params_from`, $p_1$ = `params`, from $s = 0$ to $s = 1$ (the corrector and
    step control of [`hybrax.continue_orbits`][]); at $s = 1$ the orbit is solved
    with [`hybrax.find_periodic_orbit`][] from the family's end point (a warm
    start: one or two Newton steps), and analysed. Where the family turns back at
    a fold before $s = 1$, or stops where its cycle changes (a grazing, a phase
    that is no longer viable), the result says where, with the parameters there:
    the family from $p_0$ does not reach $p_1$ (another family may; no orbit is
    reported).

    Use it where shooting from a guess fails but an orbit is known at other
    parameters: the model's defaults (`hybrax orbit MODEL --set ...` does this by
    default), a tuned gait, a converged neighbour. It runs on the host (a Python
    loop over compiled corrector steps): not under `jit` or `vmap`.

    **Arguments:**

    - `system`, `section`: the hybrid system and its [`hybrax.PoincareSection`][].
    - `u_from`: the orbit's reduced unknowns at `params_from` (e.g.
      `find_periodic_orbit(...).u`), or a guess close enough for Newton.
    - `params_from`, `params`: $p_0$ and $p_1$, PyTrees of one structure whose
      non-float leaves are equal.
    - `settings`: a [`hybrax.Settings`][] for each cycle.
    - `continuation_settings`: a [`hybrax.ContinuationSettings`][] for the path
      (its `parameter_scale` weighs $s$ against $u$; default 1).
    - `shooting`, `analyse`, `phase_observables`: for the final orbit, as in
      [`hybrax.find_periodic_orbit`][].

    **Returns:** a [`hybrax.Homotopy`][].

    **Raises:** `ValueError` for bad arguments.

    !!! example

        An orbit at parameters where the model's guess fails, from the defaults:

        ```python
        system = models.hopper.minimal()[0]
        section = models.hopper.section("minimal")
        defaults = hybrax.canonical_params(models.hopper.make_params())
        target = dataclasses.replace(defaults, d_G=-62.5, k=10536.0)
        start = hybrax.find_periodic_orbit(
            system, section, models.hopper.orbit_guess(defaults), defaults
        )
        homotopy = hybrax.continue_to_params(
            system, section, start.u, defaults, target
        )
        homotopy.orbit.multipliers if homotopy.reached else homotopy.message
        ```

    **References:** H. B. Keller (1977), Numerical solution of bifurcation and
    nonlinear eigenvalue problems; E. L. Allgower & K. Georg (2003), Introduction
    to Numerical Continuation Methods, ch. 1 (homotopy along a parameter path).
    """
    check_float64("continue_to_params")
    path = StraightPath(canonical_params(params_from), canonical_params(params))
    continuation = resolve_continuation_settings(continuation_settings)
    u_from = check_u0(u_from)
    branch = follow_orbits(
        system,
        section,
        path.end,
        path,
        lambda corrector: start_at_parameter(corrector, u_from, 0.0, 1, continuation),
        "at `params_from` from `u_from`",
        low=0.0,
        high=1.0,
        direction=1,
        settings=settings,
        continuation=continuation,
        throw=False,
    )
    s = np.asarray(branch.parameter, dtype=float)
    reached = bool(s.size) and branch.kind[-1] == "end" and s[-1] == 1.0
    if bool(branch.result == RESULTS.start_failed):
        return Homotopy(
            None, False, RESULTS.start_failed, 0.0, branch.message, branch, path
        )
    if reached:
        orbit = find_periodic_orbit(
            system,
            section,
            jnp.asarray(branch.u[-1]),
            path.end,
            shooting=shooting,
            settings=settings,
            analyse=analyse,
            phase_observables=phase_observables,
        )
        n, folds = len(s) - 1, len(branch.folds)
        message = f"followed from `params_from` in {n} continuation steps"
        if folds:
            message += f" (through {folds} fold{'s' if folds > 1 else ''})"
        return Homotopy(orbit, True, RESULTS.successful, 1.0, message, branch, path)
    end = float(np.max(s))
    # Where the family turned back, its largest s is the fold's.
    turned = [fold for fold in branch.folds if fold.parameter >= end - 1e-6]
    if turned:
        result, end = RESULTS.fold_reached, float(max(f.parameter for f in turned))
        message = (
            f"the orbit family from `params_from` ends at a fold at s = {end:.6g} "
            f"({_changed_fields(path, end)})"
        )
    else:
        result = branch.result
        why = branch.message
        if bool(result == RESULTS.min_step_reached):
            # Where no step beyond a point can be corrected, the cycle usually
            # changes there (an event sequence that no longer holds).
            why = f"no admissible cycle could be corrected beyond it ({why})"
        message = (
            f"the orbit family from `params_from` stops at s = {end:.6g} "
            f"({_changed_fields(path, end)}): {why}"
        )
    return Homotopy(None, False, result, end, message, branch, path)


class OrbitSearch(eqx.Module):
    """The result of [`hybrax.find_periodic_orbit_or_follow`][].

    - `orbit`: the [`hybrax.PeriodicOrbit`][] at the requested parameters: the
      one shooting from the guess found, else the homotopy's where it reached
      them, else the failed shooting's (its `result` says why).
    - `route`: how it was found, `"guess"` or `"homotopy"`, or `"none"`.
    - `homotopy`: the [`hybrax.Homotopy`][] tried (`None` where shooting from the
      guess succeeded, or no known orbit was given, or its parameters are the
      requested ones).
    - `known`: whether the known orbit was found again at its parameters (`None`
      where the homotopy was not tried).
    """

    orbit: PeriodicOrbit
    route: str = eqx.field(static=True)
    homotopy: Homotopy | None = None
    known: bool | None = eqx.field(static=True, default=None)


def find_periodic_orbit_or_follow(
    system: HybridSystem,
    section: PoincareSection,
    u_guess: Float[Array, " k"],
    params: Params,
    *,
    known_guess: Float[Array, " k"] | None = None,
    known_params: Params | None = None,
    settings: Settings | None = None,
    shooting: Shooting | None = None,
    analyse: bool = True,
    phase_observables: bool = True,
) -> OrbitSearch:
    r"""The periodic orbit at `params`: by shooting from `u_guess`
    ([`hybrax.find_periodic_orbit`][]), and where that fails, by following the
    orbit family from a known orbit at `known_params` to `params`
    ([`hybrax.continue_to_params`][]: pseudo-arclength continuation along the
    straight path $p(s) = p_0 + s\,(p_1 - p_0)$, Keller 1977), which passes the
    folds where a guess alone stalls. This is what `hybrax orbit MODEL` does with
    the model's defaults as the known orbit.

    **Arguments:**

    - `system`, `section`: the hybrid system and its Poincaré section.
    - `u_guess`: the guess of the section's reduced unknowns at `params`.
    - `params`: the parameters of the orbit wanted.
    - `known_guess`: a guess of the orbit at `known_params` (shooting finds it
      there first); `None`: no fallback.
    - `known_params`: the parameters where an orbit is known (e.g. a model's
      defaults); `None`: no fallback.
    - `settings`, `shooting`, `analyse`, `phase_observables`: as for
      [`hybrax.find_periodic_orbit`][] (every solve uses them).

    **Returns:** an [`hybrax.OrbitSearch`][]: the orbit, the route that found it
    (`"guess"`, `"homotopy"` or `"none"`), and the homotopy where one was tried.

    **Raises:** `ValueError` where only one of `known_guess` and `known_params`
    is given, and for the arguments [`hybrax.find_periodic_orbit`][] rejects.
    """
    if (known_guess is None) != (known_params is None):
        raise ValueError(
            "`known_guess` and `known_params` go together: give both (the orbit "
            "to follow from) or neither."
        )
    options = dict(
        settings=settings,
        shooting=shooting,
        analyse=analyse,
        phase_observables=phase_observables,
    )
    orbit = find_periodic_orbit(system, section, u_guess, params, **options)
    if bool(orbit.succeeded):
        return OrbitSearch(orbit, "guess")
    if known_params is None or _same_values(known_params, params):
        return OrbitSearch(orbit, "none")
    start = find_periodic_orbit(system, section, known_guess, known_params, **options)
    if not bool(start.succeeded):
        return OrbitSearch(orbit, "none", known=False)
    homotopy = continue_to_params(
        system, section, start.u, known_params, params, **options
    )
    if not homotopy.reached or not bool(homotopy.orbit.succeeded):
        return OrbitSearch(orbit, "none", homotopy, known=True)
    return OrbitSearch(homotopy.orbit, "homotopy", homotopy, known=True)


def _same_values(a, b) -> bool:
    """Whether two parameter PyTrees hold equal values (the path between them
    would have length zero)."""
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    return tree_a == tree_b and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(leaves_a, leaves_b)
    )
