"""The orbit's derivative: one linear map with a forward rule and its transpose."""

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jax.flatten_util import ravel_pytree

from .._misc import trace_once
from .cycle import _reverse_adjoint, _zero_tangent


def _inexact(outputs):
    """The floating leaves of the outputs (the others `None`): what carries a
    derivative."""
    return eqx.filter(outputs, eqx.is_inexact_array)


def _perturbed(params, t_params):
    """The parameters' tangent on the floating leaves that have one (`None` where
    symbolic zero): only those enter the linear map, so that its transpose need
    not reach the others."""
    return jtu.tree_map(
        lambda p, t: t if eqx.is_inexact_array(p) else None,
        params,
        t_params,
        is_leaf=_is_none,
    )


def _tangent_parameters(dynamic, t_dynamic):
    """The tangent on every floating leaf of `dynamic` (zeros where `None`)."""
    return jtu.tree_map(
        lambda p, t: (
            (jnp.zeros_like(p) if t is None else t) if eqx.is_inexact_array(p) else None
        ),
        dynamic,
        t_dynamic,
        is_leaf=_is_none,
    )


def _orbit_tangent_impl(shooting, params, u, J, mono_ad, info, like, t_dynamic):
    """`_orbit_tangent` (the primitive's implementation)."""
    del like
    return _orbit_tangent(shooting, params, u, J, mono_ad, info, t_dynamic)


def _orbit_tangent(shooting, params, u, J, mono_ad, info, t_dynamic):
    r"""The outputs' tangent along the parameters' tangent `t_dynamic`, in forward
    mode: $\dot y = y_p\dot p + y_u\dot u$ with $\dot u = -J^{-1} P_p\dot p$ (the
    implicit function theorem at the root, $P_p\dot p$ the tangent of the next
    section state $u'$). One linearisation of the outputs in $(u, p)$ serves both
    terms."""
    dynamic, static = eqx.partition(params, eqx.is_inexact_array)

    def evaluate(u_, dynamic_):
        p = eqx.combine(dynamic_, static)
        return _inexact(shooting.evaluate(u_, p, mono_ad, info, dfx.ForwardMode()))

    _, linear = jax.linearize(evaluate, u, dynamic)
    along_p = linear(jnp.zeros_like(u), _tangent_parameters(dynamic, t_dynamic))
    du = -jnp.linalg.solve(J, along_p[0].u_next)
    along_u = linear(du, jtu.tree_map(jnp.zeros_like, dynamic))
    return jax.tree_util.tree_map(jnp.add, along_p, along_u)


def _orbit_tangent_abstract_eval(shooting, params, u, J, mono_ad, info, like, t):
    del shooting, params, u, J, mono_ad, info, t
    return like


def _orbit_tangent_jvp(primals, tangents):
    # The map is linear in `t_dynamic`; its other inputs are the primal solve's,
    # which carries no derivative of its own (second derivatives are not offered).
    *rest, t_dynamic = primals
    *t_rest, t_t_dynamic = tangents
    if any(t is not None for t in jax.tree_util.tree_leaves(t_rest)):
        raise NotImplementedError(
            "Second derivatives of orbit outputs (e.g. `jax.hessian`) are not "
            "supported."
        )
    out = eqxi.filter_primitive_bind(_orbit_tangent_p, *rest, t_dynamic)
    if t_t_dynamic is None:
        return out, jax.tree_util.tree_map(lambda _: None, out)
    t_t_dynamic = _tangent_parameters(t_dynamic, t_t_dynamic)
    return out, eqxi.filter_primitive_bind(_orbit_tangent_p, *rest, t_t_dynamic)


def _is_none(x):
    return x is None


def _is_linear_input_or_none(x) -> bool:
    """A leaf of the transposed map's tangent input: `None` (no tangent) or JAX's
    placeholder of a linear input, recognised by the abstract value it carries
    (JAX's `UndefinedPrimal`, a pytree node itself; its class lives in JAX's
    internal `jax.interpreters.ad`, which hybrax does not import)."""
    return x is None or (
        hasattr(x, "aval") and not isinstance(x, eqx.Module | tuple | list | dict)
    )


def _orbit_tangent_transpose(inputs, cotangents):
    r"""The transpose of the tangent map, in reverse mode (see
    `_orbit_cotangent`)."""
    shooting, params, u, J, mono_ad, info, _, t_dynamic = inputs
    # Which floating parameter leaves are linear inputs (the others have no
    # tangent): the transpose gives their cotangents only.
    perturbed = jtu.tree_map(
        lambda t: t is not None, t_dynamic, is_leaf=_is_linear_input_or_none
    )
    p_bar = _orbit_cotangent(
        shooting, params, u, J, mono_ad, info, perturbed, cotangents
    )
    none = jax.tree_util.tree_map(lambda _: None, inputs[:-1])
    return (*none, p_bar)


def _read(outputs, cotangents):
    """The leaves of `outputs` that have a cotangent (the others `None`)."""
    return jtu.tree_map(
        lambda ct, leaf: None if ct is None else leaf,
        cotangents,
        outputs,
        is_leaf=_is_none,
    )


def _pairing(cotangents, tangents):
    r"""$\langle\bar y, \dot y\rangle$ over the leaves that have a cotangent: the
    real part of $\sum \bar y\,\dot y$ (JAX's convention for a complex output of
    real inputs, e.g. the multipliers)."""
    terms = jtu.tree_leaves(
        jtu.tree_map(
            lambda ct, t: None if ct is None else jnp.sum(jnp.real(ct * t)),
            cotangents,
            tangents,
            is_leaf=_is_none,
        )
    )
    return sum(terms, jnp.zeros((), jnp.result_type(float)))


def _orbit_cotangent(shooting, params, u, J, mono_ad, info, perturbed, cotangents):
    r"""The cotangent of the perturbed parameters of `_orbit_tangent_transpose`:
    $\bar p = y_p^\top\bar y - P_p^\top w$ with $J^\top w = y_u^\top\bar y$
    (the implicit function theorem at the root, $J = P_u - I$).

    Only the outputs that something reads are evaluated: a zero cotangent would
    still carry its output's part of the cycle, and without a cotangent on the
    reduced Jacobian or the Floquet analysis the cycle is the plain one, not the
    variational pass. The rows $y_u$, $y_p$ come in one batch of lanes, from
    whichever side has fewer: with $k \le n + 1$ perturbed parameter entries
    (a gradient in one or a few parameters), forward lanes along the $n$ unit
    vectors of $u$ and the $k$ of the parameters (tangents compile to far
    smaller programs than the checkpointed reverse sweep); else one sweep back,
    batched over $n + 1$ cotangents (the outputs', and the $n$ unit vectors on
    the next section state $u' = P$), the rows $P_p^\top e_i$ combining with $w$
    afterwards, by linearity."""
    dynamic, static = eqx.partition(params, eqx.is_inexact_array)
    varied = eqx.filter(dynamic, perturbed)
    flat, unravel = ravel_pytree(varied)
    n, k = u.shape[0], flat.shape[0]
    # Cotangents of outputs that nothing reads come as `None` (symbolic zeros).
    orbit_cts, floquet_cts = cotangents
    monodromy = orbit_cts.reduced_jacobian is not None or any(
        ct is not None for ct in jtu.tree_leaves(floquet_cts, is_leaf=_is_none)
    )
    read_cts = (orbit_cts, floquet_cts if monodromy else None)
    forward = k <= n + 1
    adjoint = dfx.ForwardMode() if forward else _reverse_adjoint(shooting.settings)

    def outputs(u_, flat_):
        # The varied leaves from `flat_`, the others as they are.
        p = eqx.combine(unravel(flat_), dynamic, static)
        orbit, floquet = _inexact(
            shooting.evaluate(u_, p, mono_ad, info, adjoint, monodromy=monodromy)
        )
        return _read((orbit, floquet), read_cts), orbit.u_next

    if forward:

        def lane(du, dp):
            _, (y_dot, u_next_dot) = jax.jvp(outputs, (u, flat), (du, dp))
            return _pairing(read_cts, y_dot), u_next_dot

        eye = jnp.eye(n + k, dtype=u.dtype)
        pairings, u_next_dots = jax.vmap(lane)(eye[:, :n], eye[:, n:])
        w = jnp.linalg.solve(J.T, pairings[:n])
        return unravel(pairings[n:] - u_next_dots[n:] @ w)
    _, vjp_outputs = jax.vjp(outputs, u, flat)
    batch_cts = (
        jtu.tree_map(
            lambda ct: jnp.concatenate([ct[None], jnp.zeros((n, *ct.shape), ct.dtype)]),
            read_cts,
        ),
        jnp.concatenate([jnp.zeros((1, n), u.dtype), jnp.eye(n, dtype=u.dtype)]),
    )
    u_bars, p_bars = jax.vmap(vjp_outputs)(batch_cts)
    w = jnp.linalg.solve(J.T, u_bars[0])
    return unravel(p_bars[0] - w @ p_bars[1:])


# The derivative of an orbit is one linear map of the parameters' tangent, a
# primitive with a forward rule (its evaluation) and a reverse one (its transpose),
# as lineax does for linear solves: `jax.jvp`/`jax.jacfwd` and
# `jax.grad`/`jax.jacrev` then both work whatever `Settings.adjoint` says.
_orbit_tangent_p = eqxi.create_vprim(
    "hybrax_orbit_tangent",
    eqxi.filter_primitive_def(_orbit_tangent_impl),
    eqxi.filter_primitive_def(_orbit_tangent_abstract_eval),
    eqxi.filter_primitive_jvp(_orbit_tangent_jvp),
    eqxi.filter_primitive_transpose(materialise_zeros=False)(_orbit_tangent_transpose),
)


def _primal(shooting, params, u_guess):
    return shooting.primal(params, u_guess)


def _solved(shooting, params, u_guess):
    """The solve with its residuals, through one kept trace (JAX traces it for
    the primal program and again for the derivative rule below; both reuse the
    first trace)."""
    return trace_once(_primal)(shooting, params, u_guess)


@eqx.filter_custom_jvp
def _orbit(params, u_guess, *, shooting):
    return _solved(shooting, params, u_guess)[0]


@_orbit.def_jvp
def _orbit_jvp(primals, tangents, *, shooting):
    params, u_guess = primals
    t_params, _ = tangents
    outputs, (u, J, mono_ad, info) = _solved(shooting, params, u_guess)
    zeros = jax.tree_util.tree_map(_zero_tangent, outputs)
    if t_params is None:
        return outputs, zeros
    like = _inexact(outputs)
    tangent = eqxi.filter_primitive_bind(
        _orbit_tangent_p,
        shooting,
        params,
        u,
        J,
        mono_ad,
        info,
        like,
        _perturbed(params, t_params),
    )
    # Integer outputs (codes, counts) keep their float0 zero tangents.
    return outputs, eqx.combine(
        tangent, eqx.filter(zeros, eqx.is_inexact_array, inverse=True)
    )
