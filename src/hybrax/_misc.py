"""Small helpers shared by the public routines: parameter and state normalisation,
the float64 check, the kept traces of a model's functions."""

import collections
import functools
import threading
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def float_dtype() -> np.dtype:
    """The default float dtype (`float64` with `jax_enable_x64`), as
    `jnp.result_type(float)` gives it at a tenth of its cost (the public
    routines ask for it on every call)."""
    return jax.dtypes.canonicalize_dtype(np.float64)


def int_dtype() -> np.dtype:
    """The default integer dtype, as `float_dtype`."""
    return jax.dtypes.canonicalize_dtype(np.int64)


#: The last `CANONICAL_MEMO_SIZE` parameter Modules found canonical, by
#: identity, with the float dtype they were found canonical for (a Module's
#: leaves cannot be replaced, so it stays canonical): a
#: routine called again with the same parameters skips the walk over them.
CANONICAL_MEMO_SIZE = 64
_CANONICAL: collections.OrderedDict = collections.OrderedDict()
_CANONICAL_LOCK = threading.Lock()


def forget_canonical() -> None:
    """Empty `canonical_params`'s memo (`hybrax.clear_caches` calls this)."""
    with _CANONICAL_LOCK:
        _CANONICAL.clear()


def canonical_params(params):
    """Turn Python and NumPy float leaves of `params` into strongly typed JAX arrays
    of the default float dtype.

    `eqx.filter_jit` treats Python floats as static, so each new value would compile
    anew and no gradient could reach it; weak and strong types would also compile
    twice. Integer and boolean leaves are left alone (they may be static choices).

    **Arguments:**

    - `params`: any PyTree of parameters (a dict, an
      [`hybrax.AbstractParams`][], ...).

    **Returns:** `params` of the same structure, its floating leaves JAX arrays
    of the default float dtype (`float64` with `jax_enable_x64`).
    """
    dtype = float_dtype()

    def canonical(leaf):
        return (
            isinstance(leaf, jax.Array)
            and not isinstance(leaf, jax.core.Tracer)
            and leaf.dtype == dtype
            and not leaf.weak_type
        )

    def convert(leaf):
        if canonical(leaf):
            return leaf
        if isinstance(leaf, float | np.floating) or (
            isinstance(leaf, np.ndarray | jax.Array)
            and jnp.issubdtype(leaf.dtype, jnp.floating)
            and not isinstance(leaf, jax.core.Tracer)
        ):
            return jnp.asarray(leaf, dtype=dtype)
        return leaf

    kept = _CANONICAL.get(id(params))
    if kept is not None and kept[0] is params and kept[1] == dtype:
        return params
    leaves, treedef = jax.tree_util.tree_flatten(params)
    if all(map(canonical, leaves)):
        # Canonical already (as a second call's are, and most leaves of any
        # call): the same object, so that a compiled routine finds its split
        # kept (`hybrax._compile`).
        if isinstance(params, eqx.Module) and leaves:
            with _CANONICAL_LOCK:
                _CANONICAL[id(params)] = (params, dtype)
                while len(_CANONICAL) > CANONICAL_MEMO_SIZE:
                    _CANONICAL.popitem(last=False)
        return params
    # Concrete leaves stay concrete inside a caller's trace (`jax.jit` closing
    # over them), so that the eager checks can still read them.
    with jax.ensure_compile_time_eval():
        converted = [convert(leaf) for leaf in leaves]
    if all(new is old for new, old in zip(converted, leaves)):
        return params
    return jax.tree_util.tree_unflatten(treedef, converted)


def array_module(*values):
    """`jax.numpy` where any leaf of `values` is a JAX array or tracer, else NumPy.

    For small helpers that serve both traced code and host-side post-processing:
    on NumPy inputs they compute in NumPy, where each `jax.numpy` operation would
    compile (or load from the cache) a program of its own."""
    leaves = jax.tree_util.tree_leaves(values)
    return jnp if any(isinstance(leaf, jax.Array) for leaf in leaves) else np


def check_float64(where: str) -> None:
    """Warn when JAX runs in float32: analysis needs float64."""
    if not jax.config.jax_enable_x64:
        warnings.warn(
            f"{where} runs in float32 because `jax_enable_x64` is off; event times, "
            "orbits and multipliers need float64. Call "
            "`jax.config.update('jax_enable_x64', True)` before using hybrax.",
            RuntimeWarning,
            stacklevel=3,
        )


def real_array(value, name: str):
    """`value` as an array of the default float dtype (a JAX array where it is one
    or is traced, else a NumPy array: nothing dispatched for a Python or NumPy
    input); a `ValueError` naming `name` where it is complex or not a number (a
    dtype is static, so this holds under `jax.jit` too): a cast would drop an
    imaginary part without a word."""
    dtype = float_dtype()
    if isinstance(value, jax.Array) and value.dtype == dtype:
        return value  # already so (as most calls' are): nothing to check
    on_device = any(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(value))
    module = jnp if on_device else np
    try:
        array = module.asarray(value)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"`{name}` must be an array of real numbers: {error}"
        ) from None
    if array.dtype.kind not in "fiu":
        raise ValueError(f"`{name}` must hold real numbers; got dtype {array.dtype}.")
    return array if array.dtype == dtype else array.astype(dtype)


def is_concrete(x) -> bool:
    """Whether `x` holds a value now (not a tracer)."""
    return not isinstance(x, jax.core.Tracer)


def concrete_value(fn, *args) -> np.ndarray | None:
    """`fn(*args)` as a NumPy array where every leaf of `args` holds a value, else
    `None` (a traced input: the check is the compiled program's, as a status).

    Evaluated at once even while an enclosing `jax.jit` traces (a user's jitted
    function closing over concrete arrays): under a trace, JAX stages out every
    operation, constants included, so an eager check of its result would fail
    with a `TracerArrayConversionError`; `jax.ensure_compile_time_eval` computes
    it instead."""
    if not all(is_concrete(leaf) for leaf in jax.tree_util.tree_leaves(args)):
        return None
    with jax.ensure_compile_time_eval():
        value = fn(*args)
        if not all(is_concrete(leaf) for leaf in jax.tree_util.tree_leaves(value)):
            return None
        return np.asarray(value)


def trace_once(fn):
    r"""`fn`, called through one kept trace per structure and shape of its
    arguments: a model's function (a vector field, a guard, a reset) is traced
    once, and every later call in a program, whatever transformation it sits under
    (`jax.jvp`, `jax.linearize`, `jax.vmap`), reuses that trace (JAX's `jit` cache)
    instead of running the function's Python again, then inlines it (`jit(...,
    inline=True)`: the program is the same as without it).

    A cycle of the analysed compass gait traced the swing leg's Lagrangian
    dynamics (a Hessian of the kinetic energy, the forces by nested derivatives)
    26 times; through this, 6. `fn` must be pure (as every function of a model
    is). Its arrays travel as arguments, everything else (the function itself,
    Python numbers) is a static key, which must be hashable: where it is not,
    `fn` is called directly.
    """
    return functools.partial(_call_traced_once, fn)


def _call_traced_once(fn, *args):
    if not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(args)):
        # An eager call (host-side post-processing): as without the kept trace,
        # not a compiled program of its own.
        return fn(*args)
    dynamic, static = eqx.partition((fn, args), eqx.is_array)
    # Keyed by the static part's structure and leaves (a module holding a dict
    # of functions, such as a mode's observables, hashes so).
    key = _StaticKey(*jax.tree.flatten(static)[::-1])
    try:
        hash(key)
    except TypeError:
        return fn(*args)
    # JAX keys its trace cache by the abstract mesh in force too, which it leaves
    # unset in a program's first trace and sets (empty) when it differentiates
    # that program: set explicitly, the derivative rules reuse the first trace.
    with jax.sharding.use_abstract_mesh(jax.sharding.get_abstract_mesh()):
        return _inline_call(key, dynamic)


class _StaticKey:
    __slots__ = ("treedef", "leaves")

    def __init__(self, treedef, leaves):
        self.treedef = treedef
        self.leaves = tuple(leaves)

    def __hash__(self):
        return hash((self.treedef, self.leaves))

    def __eq__(self, other):
        return (
            isinstance(other, _StaticKey)
            and self.treedef == other.treedef
            and self.leaves == other.leaves
        )


@functools.partial(jax.jit, static_argnums=0, inline=True)
def _inline_call(key, dynamic):
    fn, args = eqx.combine(dynamic, jax.tree.unflatten(key.treedef, key.leaves))
    return fn(*args)


def merge_leaves(treedef, static: tuple, arrays):
    """The tree of `treedef` with its `arrays` where they are not `None`, else
    its `static` leaves (the inverse of splitting a tree into the two, as
    `equinox.partition` does by leaf)."""
    leaves = [s if a is None else a for a, s in zip(arrays, static)]
    return jax.tree_util.tree_unflatten(treedef, leaves)
