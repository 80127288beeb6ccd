"""One cycle of the section's sequence: the flow, its variational equation, the
return map."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, Float

from .._custom_types import Params
from .._hybrid import HybridSystem, MechanicalVectorField
from .._misc import trace_once
from .._saltation import saltation_parts
from .._settings import (
    Settings,
)
from .._simulate import run_events
from .newton import _for_iteration
from .section import PoincareSection


def _check_adjoint(settings: Settings) -> None:
    """The orbit routines differentiate in both modes whatever `settings.adjoint`
    says; a reverse pass takes it where it is a reverse-capable adjoint (e.g.
    `diffrax.RecursiveCheckpointAdjoint(checkpoints=...)`)."""
    if settings.adjoint is None or isinstance(
        settings.adjoint,
        dfx.ForwardMode | dfx.RecursiveCheckpointAdjoint | dfx.DirectAdjoint,
    ):
        return
    raise ValueError(
        "`settings.adjoint`: the orbit routines differentiate with "
        "`diffrax.RecursiveCheckpointAdjoint()` (reverse mode) or "
        "`diffrax.ForwardMode()`, or None (the default: both modes work); got "
        f"{type(settings.adjoint).__name__}."
    )


def _reverse_adjoint(settings: Settings):
    if isinstance(settings.adjoint, dfx.RecursiveCheckpointAdjoint | dfx.DirectAdjoint):
        return settings.adjoint
    return dfx.RecursiveCheckpointAdjoint()


def resolve_sequence(system: HybridSystem, section: PoincareSection):
    """The section's transitions as indices, and the mode a cycle starts in;
    `ValueError` unless they form a closed path of the system."""
    # The method taken from the class: equinox wraps a method looked up on an
    # instance in a new module each time, a visible part of an eager orbit's time.
    transition_index = HybridSystem.transition_index
    sequence = tuple(transition_index(system, k) for k in section.sequence)
    mode0 = system.targets[sequence[-1]]
    for a, b in zip(sequence[:-1], sequence[1:]):
        if system.targets[a] != system.sources[b]:
            raise ValueError(
                f"`sequence` is not a path of the system: transition {a} leads to "
                f"mode {system.targets[a]} but transition {b} leaves mode "
                f"{system.sources[b]}"
            )
    if system.sources[sequence[0]] != mode0:
        raise ValueError("`sequence` does not close: it must end where it starts.")
    return sequence, mode0


class Variational(eqx.Module):
    r"""The augmentation of a phase by its first variational equation (Zana et al.
    2018 eq. 35): the solve carries $(x, \Phi)$ with $\dot\Phi = f_x\Phi$ (step
    sizes controlled on $x$ alone), and at each event $\Phi^+ = S\Phi^-$ with the
    saltation matrix $S$, recording the event-time gradient
    $\partial t_e/\partial x_0 = -h_x\Phi^- / (h_x f^- + h_t)$. After a cycle,
    $\Phi$ is the fixed-duration monodromy $\tilde\Phi = S_N\Phi_N\cdots S_1\Phi_1$.

    $\Phi$ is one leaf of the solver's state. On XLA's CPU backend with its
    default small-loop limit a diffrax step had cost several times more for a leaf
    of ten or more entries than for one of four, and $\Phi$ had travelled as a
    tuple of its columns; with the limit hybrax sets (`hybrax._xla_cpu`) the loop
    is one kernel, the leaf's size matters little and columns cost more, per step
    and per analysed orbit (`experiments/bench_leaf_size.py`).
    """

    def initial(self, x0):
        return jnp.eye(x0.shape[0], dtype=x0.dtype)

    def field(self, field, t, y):
        x, Phi = y
        fx, jvp_fn = jax.linearize(lambda z: field(t, z), x)
        return fx, jax.vmap(jvp_fn, in_axes=1, out_axes=1)(Phi)

    def at_event(self, system, k, t, x_minus, Phi, params):
        def transport(j):
            def apply(t, x_minus, Phi, params):
                S, h_x, h_t, f_minus = saltation_parts(system, j, t, x_minus, params)
                dt_dx0 = -(h_x @ Phi) / (h_x @ f_minus + h_t)
                return S @ Phi, dt_dx0

            return apply

        if isinstance(k, int):
            return transport(k)(t, x_minus, Phi, params)
        branches = [transport(j) for j in range(len(system.transitions))]
        return jax.lax.switch(k, branches, t, x_minus, Phi, params)


def cycle(
    system,
    x0,
    params,
    sequence,
    settings,
    adjoint,
    *,
    variational=False,
    phase_observables=False,
    diagnose=True,
    tangents=None,
    seed_tangents=False,
):
    r"""One cycle of the declared `sequence` from `x0` at $t = 0$ (the engine's
    sequence loop). Returns `(solution, augmented)`; with `variational=True`,
    `augmented` is `(monodromy, dt_dx0)` (the event-time gradient of the last
    event), else `None`; with `tangents` (an `(n, k)` matrix $V$) the variational
    equation carries only $\Phi V$ and $\partial t_e/\partial x_0\,V$.
    `diagnose=False` skips the viability and grazing checks: for the iterations of
    a solver whose result a diagnosed pass checks. `seed_tangents`: for
    forward-mode AD through the cycle (see `run_events`)."""
    augmentation = Variational() if variational else None
    if augmentation is not None and tangents is None:
        tangents = augmentation.initial(x0)
    solution, extra, records = run_events(
        system,
        x0,
        params,
        settings,
        adjoint,
        mode0=system.sources[sequence[0]],
        t0=jnp.zeros((), x0.dtype),
        sequence=sequence,
        augmentation=augmentation,
        extra0=tangents,
        phase_observables=phase_observables,
        diagnose=diagnose,
        seed_tangents=seed_tangents,
    )
    if augmentation is None:
        return solution, None
    return solution, (extra, records[-1])


def _cycle_jacobian(system, x0, params, sequence, settings):
    """One cycle from `x0` and its forward-mode Jacobian: `(x_e, t_e)`, their
    derivatives with respect to `x0`, and the simulation (undiagnosed: the cycle
    at the same state is diagnosed by the variational pass)."""

    def flow(x):
        sol, _ = cycle(
            system,
            x,
            params,
            sequence,
            settings,
            dfx.ForwardMode(),
            diagnose=False,
            seed_tangents=True,
        )
        return (sol.x_after[-1], sol.t_events[-1]), sol

    (dx_dx0, dt_dx0), sol = jax.jacfwd(flow, has_aux=True)(x0)
    return dx_dx0, dt_dx0, sol


def _ad_monodromy(system, state, params, sequence, settings):
    """The monodromy by forward-mode AD through one cycle from `state`."""
    dx_dx0, dt_dx0, sol = _cycle_jacobian(system, state, params, sequence, settings)
    return _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol, sequence, params)


def _monodromy_from_jacobian(system, dx_dx0, dt_dx0, sol, sequence, params):
    # Phi~ = d x_e^+ / d x0 - f^+(x_e^+) d t_e / d x0: the flow over the fixed
    # duration t_e, continued past the last event with the post-event field.
    field_after = trace_once(system.modes[system.targets[sequence[-1]]].vector_field)
    f_plus = field_after(sol.t_events[-1], sol.x_after[-1], params)
    return dx_dx0 - jnp.outer(f_plus, dt_dx0)


def variational_map(
    system,
    section,
    sequence,
    settings,
    u,
    params,
    phase_observables=False,
    diagnose=True,
    adjoint=None,
    full=True,
    seed_tangents=False,
):
    r"""The return map and its Jacobian from the variational equations and saltation
    matrices (no AD through the solver): `(u_next, M, solution, monodromy)` with
    $M = \pi_x(\tilde\Phi + f^+\,\partial t_e/\partial x_0)\chi_u$. `adjoint`
    only matters when this pass itself is differentiated (the derivative rules of
    the orbit); by default a plain forward while loop, as checkpointing costs
    time. With `full=False` the variational equation carries only the $k$ columns
    $\Phi\chi_u$ (not the $n$ of $\Phi$: for the hopper's minimal form 2 of 4,
    its constrained form 2 of 8) and `monodromy` is `None`. `seed_tangents`:
    for forward-mode AD through this pass (see `run_events`)."""
    x0 = section.chart(u, params)
    chart_jac = jax.jacfwd(section.chart)(u, params)
    sol, (monodromy, dt_dx0) = cycle(
        system,
        x0,
        params,
        sequence,
        settings,
        dfx.ForwardMode() if adjoint is None else adjoint,
        variational=True,
        phase_observables=phase_observables,
        diagnose=diagnose,
        tangents=None if full else chart_jac,
        seed_tangents=seed_tangents,
    )
    x_end = sol.x_after[-1]
    field_after = trace_once(system.modes[system.targets[sequence[-1]]].vector_field)
    f_plus = field_after(sol.t_events[-1], x_end, params)
    coord_jac = jax.jacfwd(section.coordinates)(x_end, params)
    # Without `full`, `monodromy` is already Phi~ chi_u and `dt_dx0` is d t_e / d u.
    M = coord_jac @ (monodromy + jnp.outer(f_plus, dt_dx0))
    if not full:
        return section.coordinates(x_end, params), M, sol, None
    return section.coordinates(x_end, params), M @ chart_jac, sol, monodromy


def _zero_tangent(leaf):
    if jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
        return jnp.zeros_like(leaf)
    return np.zeros(np.shape(leaf), dtype=jax.dtypes.float0)


def _variational_return_map(
    system, section, sequence, settings, phase_observables, example, full=True
):
    r"""The return map $(u, p, t_\max) \mapsto (u', \text{info})$ whose derivative
    in $u$ is the variational Jacobian $M$ (a `jax.custom_jvp`): Newton then needs
    one augmented solve per iteration instead of forward-mode AD through the
    solver. `info` is `(M, solution, monodromy)` of that (diagnosed) cycle, so that
    the last iteration already holds the analysis of the orbit (`monodromy` only
    if `full`). $t_\max$ replaces `settings.t_max` (see `_ShootingRootFinder`).

    The pass is traced once, at the `example` arguments `(u, p, t_max, loosen)`
    (`loosen` multiplies the default controller's tolerances), and both
    the primal and the derivative rule evaluate that trace: tracing the rule
    again would take as long as the first trace, a large part of the compile."""

    def trace(u, params, t_max, loosen):
        u_next, M, sol, monodromy = variational_map(
            system,
            section,
            sequence,
            _for_iteration(settings, t_max, loosen),
            u,
            params,
            phase_observables=phase_observables,
            full=full,
        )
        return u_next, (M, sol, monodromy)

    evaluate = eqx.filter_closure_convert(trace, *example)

    @jax.custom_jvp
    def return_map(u, params, t_max, loosen):
        return evaluate(u, params, t_max, loosen)

    def return_map_jvp(primals, tangents):
        u, params, t_max, loosen = primals
        du, dparams, _, _ = tangents
        if not all(
            isinstance(leaf, SymbolicZero)
            for leaf in jax.tree_util.tree_leaves(
                dparams, is_leaf=lambda x: isinstance(x, SymbolicZero)
            )
        ):
            raise NotImplementedError(
                "Derivatives with respect to the parameters are not available with "
                "`jacobian='variational'`; use `jacobian='autodiff'`."
            )
        u_next, info = evaluate(u, params, t_max, loosen)
        info_tangent = jax.tree_util.tree_map(_zero_tangent, info)
        if isinstance(du, SymbolicZero):
            return (u_next, info), (jnp.zeros_like(u_next), info_tangent)
        return (u_next, info), (info[0] @ du, info_tangent)

    return_map.defjvp(return_map_jvp, symbolic_zeros=True)
    return return_map


def constraint_tangent_basis(
    system: HybridSystem, mode: int, x: Float[Array, " n"], params: Params
) -> Float[Array, "n r"]:
    r"""An orthonormal basis of the tangent space of the constraint manifold
    $\{[q, \dot q] : \gamma(q) = 0,\ \gamma_q\dot q = 0\}$ of a mechanical mode at `x`
    (the identity for a mode given by a plain vector field).

    The index-reduced dynamics keeps $\ddot\gamma = 0$ only, so perturbations off the
    manifold drift linearly and add spurious unit multipliers; restricting the
    monodromy to this basis, $B^T\tilde\Phi B$, removes them.

    **Arguments:**

    - `system`: the [`hybrax.HybridSystem`][].
    - `mode`: the index of the mode.
    - `x`: the state $[q, \dot q]$ at which the basis is taken.
    - `params`: the parameter PyTree.

    **Returns:** $B$, shape `(n, r)` with orthonormal columns: $n$ the number of
    states, $r = n - 2m$ for $m$ independent constraints ($B = I$ for a plain
    vector field or a mode without active constraints).
    """
    field = system.modes[mode].vector_field
    n = x.shape[0]
    if not isinstance(field, MechanicalVectorField) or not field.active:
        return jnp.eye(n, dtype=x.dtype)
    from .._mechanics import stacked_constraints

    gamma = stacked_constraints(field.model, field.active)

    def position_and_velocity_constraints(y):
        q, qd = y[: n // 2], y[n // 2 :]
        g = gamma(q, params)
        gd = jax.jvp(lambda s: gamma(s, params), (q,), (qd,))[1]
        return jnp.concatenate([g, gd])

    A = jax.jacfwd(position_and_velocity_constraints)(x)
    rank = A.shape[0]
    _, _, vt = jnp.linalg.svd(A, full_matrices=True)
    return vt[rank:].T
