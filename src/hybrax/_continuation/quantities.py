"""Orbit quantities along a branch: each point's cycle run again with its phase
observables, read as the orbit it is."""

from collections.abc import Callable, Mapping
from typing import Any

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np

from .._compile import compiled, system_label
from .._continuation_parameter import AbstractParameter
from .._custom_types import Params
from .._hybrid import HybridSystem
from .._periodic import (
    PeriodicOrbit,
    PoincareSection,
    cycle,
    cycle_orbit,
    quantity_value,
    resolve_sequence,
)
from .._settings import Settings
from .._solution import RESULTS
from .results import Branch


def branch_quantities(
    system: HybridSystem,
    section: PoincareSection,
    branch: Branch,
    params: Params,
    parameter: AbstractParameter,
    quantities: Mapping[str, Callable[[PeriodicOrbit, Params], Any]],
    *,
    settings: Settings | None = None,
) -> dict[str, np.ndarray]:
    r"""Orbit quantities at every point of a branch of periodic orbits: for point
    $i$, the quantity $q(\gamma_i, p(\lambda_i))$ of the orbit $\gamma_i$ through
    the branch's section state at the point's parameter value $\lambda_i$.

    A branch keeps each point's section state, event times, event observables
    and reduced Jacobian, not its whole cycle. Each point's cycle is therefore
    run again from its state (one cycle of the section's event sequence, with the
    phase observables its modes declare, such as apex heights) and read as the
    [`hybrax.PeriodicOrbit`][] it is: its period and phase durations from the
    event times, its multipliers from the branch's reduced Jacobian $M$. Every
    point of every branch is run in one compiled program (`jax.vmap` over the
    points). The quantities are the functions that
    [`hybrax.find_periodic_orbit`][]'s orbits are read with, such as a model's
    declared [`hybrax.Quantity`][] entries (`ModelBundle.quantities`), so that a
    quantity means the same on an orbit and along a branch.

    **Arguments:**

    - `system`, `section`: the hybrid system and the Poincaré section the branch
      was followed on (for a period-doubled branch, its doubled section).
    - `branch`: the [`hybrax.Branch`][] of [`hybrax.continue_orbits`][].
    - `params`: the parameters the branch was followed from.
    - `parameter`: the continuation parameter (an
      [`hybrax.AbstractParameter`][]) that sets $\lambda_i$ in `params`.
    - `quantities`: name $\to$ `quantity(orbit, params)`, a scalar.
    - `settings`: the integration [`hybrax.Settings`][] of the cycles (default:
      `Settings()`; give the branch's own for the same cycles to its
      tolerances).

    **Returns:** name $\to$ a NumPy array of shape `(N,)` for the branch's $N$
    points: floats, or booleans for a condition (a quantity whose values are
    truth values). A quantity that reads an observable that no mode declares is
    NaN at every point (a float column, never a truth value); a point whose cycle
    fails again is NaN in every float column.

    **Raises:** `ValueError` naming `quantities` where an entry is not callable,
    and naming `branch` where it is not a `Branch`.

    Host-side, like the branch itself (its arrays are NumPy): not for `jax.jit`.
    Example, the hopper's apex heights along a branch in $D_G$:

        quantities = models.hopper.ORBIT_QUANTITIES
        values = hx.branch_quantities(system, section, branch, params,
                                      models.hopper.parameter("D_G"), quantities)
        values["apex_upper"]  # (N,) in m
    """
    if not isinstance(branch, Branch):
        raise ValueError(
            f"`branch` must be a hybrax.Branch (of continue_orbits); got "
            f"{type(branch).__name__}"
        )
    quantities = dict(quantities)
    for name, quantity in quantities.items():
        if not callable(quantity):
            raise ValueError(
                f"`quantities[{name!r}]` must be a function (orbit, params) -> value; "
                f"got {type(quantity).__name__}"
            )
    if not isinstance(parameter, AbstractParameter):
        raise ValueError(
            "`parameter` must be a hybrax.AbstractParameter (e.g. "
            f"hybrax.FieldParameter); got {type(parameter).__name__}"
        )
    if branch.n_points == 0 or not quantities:
        return {name: np.zeros(0) for name in quantities}
    sequence, _ = resolve_sequence(system, section)
    values = _branch_values(
        system,
        section,
        tuple(quantities.values()),
        sequence,
        Settings() if settings is None else settings,
        params,
        parameter,
        jnp.asarray(branch.parameter, dtype=float),
        jnp.asarray(branch.u, dtype=float),
        jnp.asarray(branch.state, dtype=float),
        jnp.asarray(branch.reduced_jacobian, dtype=float),
    )
    return {
        name: np.asarray(value)
        for name, value in zip(quantities, jax.device_get(values))
    }


@compiled(
    "the quantities along a branch", label=lambda system, *_: system_label(system)
)
def _branch_values(
    system,
    section,
    quantities,
    sequence,
    settings,
    params,
    parameter,
    values,
    unknowns,
    states,
    reduced_jacobians,
):
    """Each quantity at each point (vmapped over the points): a NaN column for
    one that reads what nothing records (a `KeyError` while tracing)."""

    def at_point(value, u, state, reduced_jacobian):
        point_params = parameter.set(params, value)
        solution, _ = cycle(
            system,
            state,
            point_params,
            sequence,
            settings,
            dfx.ForwardMode(),
            phase_observables=True,
        )
        u_next = section.coordinates(solution.x_after[-1], point_params)
        orbit = cycle_orbit(
            u, u_next, state, solution, reduced_jacobian, solution.result
        )
        ran = solution.result == RESULTS.successful
        out = []
        for quantity in quantities:
            value = quantity_value(quantity, orbit, point_params)
            value = jnp.full((), jnp.nan, u.dtype) if value is None else value
            value = jnp.asarray(value)
            if not jnp.issubdtype(value.dtype, jnp.bool_):
                value = jnp.where(ran, value, jnp.nan)
            out.append(value)
        return out

    return jax.vmap(at_point)(values, unknowns, states, reduced_jacobians)
