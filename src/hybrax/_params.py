r"""A model's parameters declared once: each field of a parameter class carries its
default, unit, meaning and admissible range, from which the eager check of
concrete values and the model's parameter table are derived."""

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class Bound(eqx.Module):
    r"""The admissible values of a parameter: `test(values) -> bools` and its
    `rule` in words (e.g. `"> 0"`), which an error message quotes. See
    [`hybrax.parameter_field`][].

    `test` runs on a NumPy array of concrete values when the parameters are
    built, and on JAX arrays inside a compiled run (traced values): write it
    with operators (`>`, `&`, `|`), not NumPy functions."""

    test: Callable[[np.ndarray], Any] = eqx.field(static=True)
    rule: str = eqx.field(static=True)


POSITIVE = Bound(lambda v: v > 0, "> 0")
r"""The positive numbers, $v > 0$: a [`hybrax.Bound`][] for
[`hybrax.parameter_field`][]."""

NONNEGATIVE = Bound(lambda v: v >= 0, ">= 0")
r"""The non-negative numbers, $v \ge 0$: a [`hybrax.Bound`][] for
[`hybrax.parameter_field`][]."""

FRACTION = Bound(lambda v: (v > 0) & (v < 1), "in (0, 1)")
r"""The open unit interval, $0 < v < 1$: a [`hybrax.Bound`][] for
[`hybrax.parameter_field`][]."""


def between(low: float, high: float, rule: str | None = None) -> Bound:
    r"""The open interval $(\text{low}, \text{high})$ as a [`hybrax.Bound`][].

    **Arguments:**

    - `low`, `high`: the ends of the interval (both excluded).
    - `rule`: the interval in words, which an error message quotes; default
      `"in (low, high)"` with the numbers, e.g. `"in (0, pi/4)"` for
      `between(0, math.pi / 4, "in (0, pi/4)")`.

    **Returns:** a [`hybrax.Bound`][] for [`hybrax.parameter_field`][].
    """
    rule = f"in ({low:g}, {high:g})" if rule is None else str(rule)
    return Bound(lambda v: (v > low) & (v < high), rule)


def parameter_field(
    default: Any, unit: str, description: str, *, bound: Bound | None = None
):
    r"""A field of a model's parameter class (a subclass of
    [`hybrax.AbstractParams`][]) with all that is said of it, in one place:

    ```python
    class SpringParams(hx.AbstractParams):
        k: float = hx.parameter_field(100.0, "N/m", "stiffness", bound=hx.POSITIVE)
    ```

    **Arguments:**

    - `default`: the default value.
    - `unit`: its unit (`"1"` for a dimensionless number).
    - `description`: what it is, for tables and the command line.
    - `bound`: the admissible values (e.g. [`hybrax.POSITIVE`][],
      [`hybrax.FRACTION`][], `hybrax.between(0, 1.5)`); `None`: any finite value.

    **Returns:** an `equinox.field` holding these in its metadata.
    """
    if bound is not None and not isinstance(bound, Bound):
        raise ValueError(f"`bound` must be a hybrax.Bound; got {bound!r}.")
    metadata = {"unit": str(unit), "description": str(description), "bound": bound}
    return eqx.field(default=default, metadata=metadata)


class AbstractParams(eqx.Module):
    r"""Base of a model's parameter class whose fields are declared with
    [`hybrax.parameter_field`][].

    Building one with concrete values checks each of them: finite, and inside
    its field's bound; a `ValueError` names the field, its rule and the value.
    Traced values (under `jit`, `grad`, `vmap`) are checked inside the run: a
    value outside its bound gives the status `parameters_out_of_domain` (and
    NaN values), as a non-finite one gives `nonfinite_parameters`. A subclass
    checks relations between fields in a `__check_init__` of its own (eager)
    and names them for traced values in a class variable `relations`: a dict
    `{rule: test(params) -> bool}`, e.g. `{"phase_start < phase_end": lambda p:
    p.phase_start < p.phase_end}`.
    [`hybrax.parameter_table`][] lists the fields with their units and meanings.
    """

    relations: ClassVar[dict[str, Callable[[Any], Any]]] = {}

    def __check_init__(self):
        label = type(self).__name__.removesuffix("Params") or type(self).__name__
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            try:
                array = np.asarray(value, dtype=float)
            except Exception:  # a tracer: checked through the run's status
                continue
            if not np.all(np.isfinite(array)):
                raise ValueError(
                    f"{label} parameter `{field.name}` must be finite; got {value}."
                )
            bound = field.metadata.get("bound")
            if bound is not None and not np.all(bound.test(array)):
                raise ValueError(
                    f"{label} parameter `{field.name}` must be {bound.rule}; got "
                    f"{value}."
                )


def _inside(test, value) -> Any:
    """`test(value)` on a JAX array, or `None` where `test` only takes NumPy
    values (the eager check at construction is then the only one)."""
    try:
        return jnp.all(jnp.asarray(test(value), bool))
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def params_in_domain(params) -> Any:
    """Whether every [`hybrax.AbstractParams`][] in the PyTree `params` lies
    inside its declared domain (each field's bound, the class's `relations`):
    a boolean JAX scalar, traceable, for the run's status. Non-finite values are
    not judged here (`nonfinite_parameters` reports them)."""
    flags = []
    for node in jax.tree_util.tree_leaves(
        params, is_leaf=lambda node: isinstance(node, AbstractParams)
    ):
        if not isinstance(node, AbstractParams):
            continue
        for field in dataclasses.fields(node):
            bound = field.metadata.get("bound")
            value = getattr(node, field.name)
            if bound is None or not eqx.is_array_like(value):
                continue
            value = jnp.asarray(value)
            if not jnp.issubdtype(value.dtype, jnp.number):
                continue
            flag = _inside(bound.test, value)
            if flag is not None:
                flags.append(flag)
        for test in getattr(type(node), "relations", {}).values():
            flag = _inside(test, node)
            if flag is not None:
                flags.append(flag)
    return jnp.all(jnp.stack(flags)) if flags else jnp.asarray(True)


def parameter_table(params_class: type) -> dict[str, str]:
    """The table of a parameter class's fields, for a model's
    [`hybrax.ModelBundle`][] (its `parameters` start from it).

    **Arguments:**

    - `params_class`: a subclass of [`hybrax.AbstractParams`][] whose fields are
      declared with [`hybrax.parameter_field`][].

    **Returns:** `{name: "unit, description"}`, in declaration order.

    **Raises:** `ValueError` for a field not declared with
    [`hybrax.parameter_field`][].
    """
    table = {}
    for field in dataclasses.fields(params_class):
        if "unit" not in field.metadata:
            raise ValueError(
                f"`{params_class.__name__}.{field.name}` is not declared with "
                "hybrax.parameter_field."
            )
        table[field.name] = f"{field.metadata['unit']}, {field.metadata['description']}"
    return table


def field_names(params_class: type) -> tuple[str, ...]:
    """The names of a parameter class's fields, in declaration order."""
    return tuple(field.name for field in dataclasses.fields(params_class))


def check_names(params_class: type, values, known, model_name: str) -> None:
    """A `ValueError` listing `known` where `values` names a field that
    `params_class` does not have (`model_name` names the model in it)."""
    unknown = set(values) - set(field_names(params_class))
    if unknown:
        raise ValueError(
            f"unknown {model_name} parameter(s) {sorted(unknown)}; known: "
            f"{', '.join(known)}."
        )
