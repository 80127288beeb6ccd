"""Runtime checks without host callbacks: a program's equinox checks and lineax's
`throw` turned into NaN branches, so that JAX's persistent cache can keep it (a
program with a host callback is not cacheable)."""

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp


_CALLBACKS = frozenset({"pure_callback", "io_callback", "debug_callback", "callback"})


class _Unstrippable(Exception):
    """A host callback outside a runtime check's branch."""


def _nan_like(aval):
    """What a failed runtime check returns (as `EQX_ON_ERROR=nan` would): NaN for
    inexact dtypes, the largest value for integers, `True` for booleans."""
    dtype = aval.dtype
    if jnp.issubdtype(dtype, jnp.inexact):
        fill = jnp.nan
    elif jnp.issubdtype(dtype, jnp.integer):
        fill = jnp.iinfo(dtype).max
    else:
        fill = True
    return jnp.full(aval.shape, fill, dtype)


def _failure_branch(branch):
    """A branch with `branch`'s signature that returns `_nan_like` outputs."""
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in branch.in_avals]
    return jax.make_jaxpr(lambda *args: [_nan_like(a) for a in branch.out_avals])(
        *structs
    )


def _strip(jaxpr):
    """`jaxpr` without the host callbacks of runtime checks, so that the program
    can be cached and exported (as `EQX_ON_ERROR=nan` would make it, for this
    program only): a `lax.cond` branch that calls back to the host (equinox's
    `error_if`) becomes one that returns NaN, and lineax's linear solves (whose
    checks are traced when the program is lowered, such as those of optimistix's
    implicit derivatives of diffrax's event times) report through their result
    instead of raising (`throw=False`): a failure still reaches the caller, as
    NaN values or a status. Returns `jaxpr` itself where nothing changes;
    `_Unstrippable` for a callback anywhere else."""
    if isinstance(jaxpr, jex_core.ClosedJaxpr):
        if isinstance(jaxpr.jaxpr, jex_core.ClosedJaxpr):
            # A form of jaxpr this rewrite does not know (JAX 0.11 reads a
            # closed jaxpr's `jaxpr` as a closed one): the program is then not
            # kept between processes, and still runs.
            raise _Unstrippable("closed jaxpr")
        inner = _strip(jaxpr.jaxpr)
        return (
            jaxpr if inner is jaxpr.jaxpr else jex_core.ClosedJaxpr(inner, jaxpr.consts)
        )
    eqns, changed = [], False
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _CALLBACKS:
            raise _Unstrippable(eqn.primitive.name)
        if _own_primitive(eqn):
            eqns.append(_inlined(eqn))
            changed = True
            continue
        params = dict(eqn.params)
        if eqn.primitive.name == "cond":
            params["branches"] = tuple(
                _failure_branch(b) if _raises(b) else _strip(b)
                for b in eqn.params["branches"]
            )
        else:
            for key, value in eqn.params.items():
                params[key] = _strip_param(value)
        if eqn.primitive.name == "linear_solve":
            params = _without_throw(params)
        elif eqn.primitive.name == "vprim":
            params = _batched_without_throw(params)
        if any(params[key] is not eqn.params[key] for key in params):
            eqn = eqn.replace(params=params)
            changed = True
        eqns.append(eqn)
    return jaxpr.replace(eqns=eqns) if changed else jaxpr


# hybrax's own primitives (the orbit's derivative map): lowered through their
# implementation, whose checks are only traced then, out of `_strip`'s sight.
_OWN_PRIMITIVES = frozenset({"hybrax_orbit_tangent"})


def _batched(params: dict) -> tuple[str | None, dict]:
    """The primitive that equinox's batched primitive `vprim` holds (through
    every level of batching: a `vmap` of a `vmap`, as `jax.jacfwd` inside
    `jax.jacfwd`, nests them) and its params."""
    while True:
        name = getattr(params.get("prim"), "name", None)
        if name != "vprim":
            return name, params
        params = dict(params["params"])


def _own_primitive(eqn) -> bool:
    name = eqn.primitive.name
    if name == "vprim":  # equinox's batched form holds the primitive
        name, _ = _batched(eqn.params)
    return name in _OWN_PRIMITIVES


def _inlined(eqn):
    """A call of the stripped jaxpr of the primitive's implementation, in place
    of the primitive."""
    structs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in eqn.invars]
    implementation = jax.make_jaxpr(
        lambda *args: eqn.primitive.impl(*args, **eqn.params)
    )(*structs)
    return eqn.replace(
        primitive=jex_core.primitives.closed_call_p,
        params={"call_jaxpr": _strip(implementation)},
    )


def _without_throw(params: dict) -> dict:
    """The params of lineax's `linear_solve` primitive with `throw=False` (its
    last static argument); unchanged where they do not have that form."""
    static = params.get("static")
    if isinstance(static, tuple) and static and static[-1] is True:
        return {**params, "static": static[:-1] + (False,)}
    return params


def _batched_without_throw(params: dict) -> dict:
    """The params of a batched (`vprim`) `linear_solve`, at any depth of
    batching, with `throw=False`; the params themselves for another
    primitive."""
    name = getattr(params.get("prim"), "name", None)
    inner = dict(params["params"])
    if name == "linear_solve":
        changed = _without_throw(inner)
    elif name == "vprim":
        changed = _batched_without_throw(inner)
    else:
        return params
    if changed is inner:
        return params
    return {**params, "params": tuple(changed.items())}


def _raises(branch) -> bool:
    """Whether a branch is a runtime check's failure branch: it calls back to the
    host at its top level."""
    return any(eqn.primitive.name in _CALLBACKS for eqn in branch.jaxpr.eqns)


def _strip_param(value):
    if isinstance(value, jex_core.ClosedJaxpr | jex_core.Jaxpr):
        return _strip(value)
    if isinstance(value, tuple | list):
        items = [_strip_param(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return type(value)(items)
    return value


def callback_free_jaxpr(flat, structs):
    """The closed jaxpr of `flat` at `structs` without host callbacks (see
    `_strip`); `None` when a callback cannot be removed."""
    closed = jax.make_jaxpr(flat)(*structs)
    try:
        return _strip(closed)
    except _Unstrippable:
        return None


def callback_free(flat, structs):
    """`flat`, traced once, as a function of its jaxpr (tracing it again only
    evaluates the jaxpr) whose program holds no host callbacks (see `_strip`);
    `None` when a callback cannot be removed."""
    closed = callback_free_jaxpr(flat, structs)
    if closed is None:
        return None
    run = jex_core.jaxpr_as_fun(closed)
    return lambda *args: run(*args)
