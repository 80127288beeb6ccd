"""Observables of events and phases (integrals, extrema), and the declared
boundaries a run keeps or breaks."""

import typing

import jax
import jax.numpy as jnp
import numpy as np

from .._dips import hermite_interior_minimum, hermite_minimum
from .._hybrid import AbstractReset, Clearance, HybridSystem, Integral


def _event_observable_shapes(system: HybridSystem, x, params):
    """Keys and shapes of the union of the transitions' event observables; a
    `ValueError` if two transitions disagree on a key's shape."""
    shapes: dict[str, tuple[int, ...]] = {}
    t = jnp.zeros((), x.dtype)
    for tr in system.transitions:
        if tr.observe is None:
            continue
        out = jax.eval_shape(tr.observe, t, x, x, params)
        if not isinstance(out, dict):
            raise ValueError(
                f"`observe` of transition {tr.name!r} must return a dict of arrays; "
                f"got {type(out).__name__}."
            )
        for key, value in out.items():
            shape = tuple(jnp.shape(value))
            if shapes.setdefault(key, shape) != shape:
                raise ValueError(
                    f"Event observable {key!r} has shape {shape} for transition "
                    f"{tr.name!r} but {shapes[key]} for another transition."
                )
    return shapes


def _event_observables(system, shapes, k, t, x_minus, x_plus, params):
    """The observables of transition `k` (static int or traced), every key of
    `shapes` present (NaN where transition `k` does not define it)."""
    dtype = x_minus.dtype

    def make(j):
        observe = system.transitions[j].observe

        def observables_of(t, x_minus, x_plus, params):
            values = {} if observe is None else observe(t, x_minus, x_plus, params)
            return {
                key: jnp.asarray(values[key]).astype(dtype)
                if key in values
                else jnp.full(shape, jnp.nan, dtype)
                for key, shape in shapes.items()
            }

        return observables_of

    if not shapes:
        return {}
    if isinstance(k, int):
        return make(k)(t, x_minus, x_plus, params)
    per_transition = [make(j) for j in range(len(system.transitions))]
    return jax.lax.switch(k, per_transition, t, x_minus, x_plus, params)


def phase_observable_keys(
    system: HybridSystem, which: bool | str = True
) -> tuple[str, ...]:
    """The keys of the modes' phase observables: all of them (`which=True`),
    none (`False`), or only the [`hybrax.Clearance`][]s (`"clearance"`: what
    continuation watches for grazing)."""
    if which not in (True, False, "clearance"):
        raise ValueError(f"`phase_observables` must be a bool; got {which!r}.")
    keys: list[str] = []
    for mode in system.modes:
        keys.extend(
            k
            for k, observable in mode.observables.items()
            if k not in keys
            and (which is True or (which and isinstance(observable, Clearance)))
        )
    return tuple(keys)


def clearance_names(system: HybridSystem) -> tuple[str, ...]:
    """The names of the system's [`hybrax.Clearance`][] observables (the
    `phase_observables` of a [`hybrax.Branch`][]), in declaration order."""
    return phase_observable_keys(system, "clearance")


def release_names(system: HybridSystem) -> tuple[str, ...]:
    """The names of the release velocities the system's resets declare
    (`AbstractReset.released`, e.g. [`hybrax.ImpactRelabel`][]`(release=...)`:
    the normal velocity of the contact an impact releases, positive where it
    leaves), in declaration order: event observables that a
    [`hybrax.Branch`][] watches as boundaries."""
    names: list[str] = []
    for transition in system.transitions:
        if isinstance(transition.reset, AbstractReset):
            names.extend(n for n in transition.reset.released() if n not in names)
    return tuple(names)


def stacked_observables(values: dict, names, E, dtype):
    """`values[name]` for each name as the columns of an `(E, len(names))`
    array (NaN for a name that `values` lacks)."""
    columns = [
        values[name] if name in values else jnp.full((E,), jnp.nan, dtype)
        for name in names
    ]
    return jnp.stack(columns, axis=-1) if columns else jnp.zeros((E, 0), dtype)


def cycle_admissible(guard_at_start, clearance, release, tol):
    r"""Whether a cycle keeps every boundary its model declares (leading axes
    batched): each phase starts inside its mode (`guard_at_start` $\ge$ -`tol`:
    for the hopper, the ground does not pull right after touchdown), every
    declared clearance of each phase is $\ge$ -`tol` (NaN: a phase without an
    interior minimum clears its obstacle), and every declared release velocity
    is $\ge$ -`tol` (the contact an impact releases leaves; NaN at an event that
    releases none). `guard_at_start` `(..., E)`, `clearance` `(..., E, C)`,
    `release` `(..., E, R)`. The one test of [`hybrax.PeriodicOrbit`][]'s status
    `inadmissible_orbit` and of `Branch.admissible`."""
    return (
        jnp.all(guard_at_start >= -tol, axis=-1)
        & ~jnp.any(clearance < -tol, axis=(-2, -1))
        & ~jnp.any(release < -tol, axis=(-2, -1))
    )


class BoundaryViolation(typing.NamedTuple):
    """One declared boundary a run breaks (see [`hybrax.boundary_violations`][]).

    - `kind`: `"force_reversal"` (a phase starts past its guard),
      `"release_reversal"` (a released contact would stay) or `"clearance"` (a
      declared clearance below zero).
    - `event`: the event concerned, counted from 0: the one before the phase for
      `force_reversal`, the impact for `release_reversal`, the one that ends
      the phase for `clearance`.
    - `mode`: the name of the mode of the phase concerned.
    - `name`: the observable's name (`None` for a guard).
    - `value`: the guard's or the observable's value, in the model's units.
    """

    kind: str
    event: int
    mode: int
    name: str | None
    value: float


def boundary_violations(
    system: HybridSystem, solution, tol: float = 1e-9
) -> list[BoundaryViolation]:
    r"""The boundaries `system` declares that the run `solution` (a
    [`hybrax.HybridSolution`][]) breaks, host-side, for one unbatched solution.
    A run can integrate its modes' equations without fault and still leave the
    model: `hybrax simulate` prints this judgement, and a periodic orbit that
    breaks a guard or release boundary has the status `inadmissible_orbit`
    (its compiled program tests the same boundaries with the same `tol`).

    - `force_reversal`: the phase after event $k$ starts past its guard by more
      than `tol` (`guard_at_start` $< -$`tol`; for the hopper's ground phase,
      the ground would have to pull). It runs until the guard comes back and
      crosses again, which a complementarity model would not do.
    - `release_reversal`: at event $k$ a declared release velocity
      (`AbstractReset.released`, e.g. `hybrax.ImpactRelabel(release=...)`) is
      below `-tol`: the contact the impact releases would stay.
    - `clearance`: in the phase that ends at event $k$, a declared
      [`hybrax.Clearance`][] dips below `-tol` (recorded only where the run
      records phase observables).

    **Arguments:**

    - `system`: the [`hybrax.HybridSystem`][] that ran.
    - `solution`: its [`hybrax.HybridSolution`][] (of [`hybrax.simulate`][], or
      an orbit's `cycle`).
    - `tol`: how far past a boundary counts (`Settings.guard_tol`'s default).

    **Returns:** a list of [`hybrax.BoundaryViolation`][] ordered by event;
    `[]` where the run keeps every boundary.
    """
    transitions = np.asarray(solution.transitions)
    found = []

    def add(kind, values, name, modes):
        # `modes`: the system's sources (the phase before an event) or targets
        # (the phase after it), by transition.
        values = np.asarray(values, dtype=float)
        values = values.reshape(values.shape[0], -1)[:, 0] if values.size else ()
        for k, value in enumerate(values):
            if np.isfinite(value) and value < -tol:
                mode = system.modes[modes[int(transitions[k])]].name
                found.append(BoundaryViolation(kind, k, mode, name, float(value)))

    add("force_reversal", solution.guard_at_start, None, system.targets)
    for name in release_names(system):
        values = solution.observables.get(name, ())
        add("release_reversal", values, name, system.targets)
    for name in clearance_names(system):
        values = solution.phase_observables.get(name, ())
        add("clearance", values, name, system.sources)
    return sorted(found, key=lambda violation: violation.event)


# Gauss-Legendre's 4 nodes on [0, 1] and their weights (exact for degree 7).
_GAUSS_NODES = 0.5 + 0.5 * np.array(
    [-0.8611363115940526, -0.3399810435848563, 0.3399810435848563, 0.8611363115940526]
)
_GAUSS_WEIGHTS = 0.5 * np.array(
    [0.3478548451374538, 0.6521451548625461, 0.6521451548625461, 0.3478548451374538]
)


def _integral(integral, t_start, t_end, x_of, params, dtype):
    r"""$\int_{t_{start}}^{t_{end}} g\,dt$ along `x_of` by composite
    Gauss-Legendre quadrature, `n_panels` panels of 4 nodes (error $O(h^8)$ in the
    panel width for a smooth $g$); differentiable, its ends included."""
    panels = jnp.linspace(0.0, 1.0, integral.n_panels + 1, dtype=dtype)
    width = (t_end - t_start) * (panels[1] - panels[0])
    nodes = panels[:-1, None] + (panels[1] - panels[0]) * _GAUSS_NODES[None, :]
    times = (t_start + (t_end - t_start) * nodes).reshape(-1)

    def value(t):
        return jnp.asarray(integral.function(t, x_of(t), params)).astype(dtype)

    values = jax.vmap(value)(times).reshape(nodes.shape)
    return width * jnp.sum(values @ jnp.asarray(_GAUSS_WEIGHTS, dtype))


def _extrema(extrema, t_start, t_end, x_of, params, dtype):
    r"""The largest (or smallest) values of the `extrema` (or a
    [`hybrax.Clearance`][]'s interior minimum) over
    $[t_{start}, t_{end}]$ along `x_of`: on a grid of `n_grid` times, $g$ and its
    time derivative along the dense output; between each pair of grid points the
    cubic Hermite interpolant through both, maximised in closed form (the same
    cubic as the dip detection). Its error is $O(h^4)$ in the grid spacing $h$
    (1e-10 for a hopper flight at the default 256 points) and it is
    differentiable: no iterative solver, and at an interior extremum the value's
    derivative is that of $g$ at fixed time (envelope theorem)."""
    n_grid = max(e.n_grid for e in extrema)
    grid = t_start + (t_end - t_start) * jnp.linspace(0.0, 1.0, n_grid)
    # The states and their rates on the grid, once for all the mode's extrema.
    xs, rates = jax.vmap(lambda t: jax.jvp(x_of, (t,), (jnp.ones_like(t),)))(grid)
    step = grid[1:] - grid[:-1]
    values = []
    for e in extrema:
        # "min" and a Clearance take -g, then negate; a Clearance keeps g.
        sign = 1.0 if e.kind == "max" else -1.0

        def value_and_rate(t, x, xdot, e=e):
            return jax.jvp(
                lambda s, z: (
                    -sign * jnp.asarray(e.function(s, z, params)).astype(dtype)
                ),
                (t, x),
                (jnp.ones_like(t), xdot),
            )

        g, g_rate = jax.vmap(value_and_rate)(grid, xs, rates)
        if isinstance(e, Clearance):
            values.append(_interior_minimum(g, g_rate, step))
            continue
        lowest, _ = jax.vmap(hermite_minimum)(
            g[:-1], g_rate[:-1], g[1:], g_rate[1:], step
        )
        lowest = jnp.where(jnp.isnan(lowest), jnp.inf, lowest)
        values.append(-sign * jnp.min(lowest))
    return jnp.stack(values)


def _interior_minimum(g, g_rate, step):
    r"""A [`hybrax.Clearance`][]: the smallest local minimum of the piecewise
    cubic through `g` and its rates on the grid strictly inside the phase (a
    stationary point at the phase's first or last instant is where a guard
    sits on zero by construction), NaN where there is none."""
    lowest, s = jax.vmap(hermite_interior_minimum)(
        g[:-1], g_rate[:-1], g[1:], g_rate[1:], step
    )
    cells = jnp.arange(lowest.shape[0])
    at_ends = ((cells == 0) & (s <= 0)) | ((cells == lowest.shape[0] - 1) & (s >= 1))
    lowest = jnp.where(at_ends | jnp.isnan(lowest), jnp.inf, lowest)
    smallest = jnp.min(lowest)
    return jnp.where(jnp.isfinite(smallest), smallest, jnp.nan)


def _phase_values(observables, t_start, t_end, x_of, params, dtype):
    """The values of the phase observables `observables` (in order)."""
    extrema = [o for o in observables if not isinstance(o, Integral)]
    values = list(
        _extrema(extrema, t_start, t_end, x_of, params, dtype) if extrema else []
    )
    out = []
    for o in observables:
        if isinstance(o, Integral):
            out.append(_integral(o, t_start, t_end, x_of, params, dtype))
        else:
            out.append(values.pop(0))
    return jnp.stack(out)


def _phase_observables(system, keys, mode, static_mode, t_start, t_end, x_of, params):
    """Phase observables of the union `keys`, NaN for keys the mode lacks."""
    if not keys:
        return {}

    def make(m):
        observables = system.modes[m].observables

        def observables_of(t_start, t_end, params):
            dtype = t_end.dtype
            names = [key for key in keys if key in observables]
            values = (
                _phase_values(
                    [observables[k] for k in names], t_start, t_end, x_of, params, dtype
                )
                if names
                else None
            )
            return {
                key: values[names.index(key)]
                if key in names
                else jnp.full((), jnp.nan, dtype)
                for key in keys
            }

        return observables_of

    if static_mode is not None:
        return make(static_mode)(t_start, t_end, params)
    per_mode = [make(m) for m in range(len(system.modes))]
    return jax.lax.switch(mode, per_mode, t_start, t_end, params)
