r"""The continuation parameter: the scalar $\lambda$ of a parameter PyTree that
[`hybrax.continue_orbits`][] and [`hybrax.tune`][] vary, read by `get(params)` and
written by `set(params, value)` (pure and traceable, so that it can run inside a
compiled corrector with a traced value)."""

import abc
import dataclasses
from collections.abc import Callable
from typing import Any

import equinox as eqx

from ._custom_types import Params


class AbstractParameter(eqx.Module):
    r"""Selects the scalar $\lambda$ of a parameter PyTree that continuation varies.

    Subclasses implement `get(params) -> scalar` and `set(params, value) -> params`
    (pure, traceable: `set` runs inside the compiled corrector with a traced
    `value`) and carry a `name` for tables and plots.
    """

    name: eqx.AbstractVar[str]

    @abc.abstractmethod
    def get(self, params: Params) -> Any:
        """The value of the parameter in `params`."""

    @abc.abstractmethod
    def set(self, params: Params, value: Any) -> Params:
        """A copy of `params` with the parameter set to `value`."""


def _field_of(params, field):
    if isinstance(params, dict):
        return params[field]
    return getattr(params, field)


class FieldParameter(AbstractParameter):
    r"""The field `field` of the parameters (an attribute, or a key of a dict),
    optionally in scaled units: $\lambda = $ `params.field / scale(params)`.

    **Arguments:**

    - `field`: the name of the field.
    - `scale`: `scale(params) -> scalar`, or `None` for $\lambda$ = the field
      itself. It must not depend on `field`. Use a module-level function (not a
      lambda made per call): it is part of what the compiled corrector is keyed on.
    - `name`: the label of $\lambda$; default `field`.

    !!! example

        The hopper's dimensionless ground damping $D_G = d_G / (2\sqrt{k m})$ while
        the parameters store $d_G$:

        ```python
        def damping_scale(p):
            return 2 * jnp.sqrt(p.k * p.m)

        D_G = hybrax.FieldParameter("d_G", damping_scale, name="D_G")
        ```
    """

    field: str = eqx.field(static=True)
    scale: Callable[[Params], Any] | None = None
    name: str = eqx.field(static=True, default="")

    def __check_init__(self):
        if not isinstance(self.field, str) or not self.field:
            raise ValueError(f"`field` must be a non-empty string; got {self.field!r}.")
        if self.scale is not None and not callable(self.scale):
            raise ValueError("`scale` must be callable as scale(params), or None.")

    def get(self, params: Params) -> Any:
        value = _field_of(params, self.field)
        return value if self.scale is None else value / self.scale(params)

    def set(self, params: Params, value: Any) -> Params:
        if self.scale is not None:
            value = value * self.scale(params)
        return eqx.tree_at(lambda p: _field_of(p, self.field), params, value)


class FunctionParameter(AbstractParameter):
    r"""A parameter given by a getter and a setter.

    **Arguments:**

    - `getter`: `getter(params) -> scalar`.
    - `setter`: `setter(params, value) -> params`, pure and traceable.
    - `name`: the label of $\lambda$.

    Use module-level functions: they key the compiled corrector.
    """

    getter: Callable[[Params], Any]
    setter: Callable[[Params, Any], Params]
    name: str = eqx.field(static=True, default="parameter")

    def __check_init__(self):
        if not (callable(self.getter) and callable(self.setter)):
            raise ValueError("`getter` and `setter` must be callable.")

    def get(self, params: Params) -> Any:
        return self.getter(params)

    def set(self, params: Params, value: Any) -> Params:
        return self.setter(params, value)


def _field_names(params) -> list[str] | None:
    """The fields of a parameter PyTree (a dict's keys, a dataclass's or an
    equinox Module's fields), or `None` for another kind of PyTree."""
    if isinstance(params, dict):
        return [str(key) for key in params]
    if dataclasses.is_dataclass(params):
        return [field.name for field in dataclasses.fields(params)]
    return None


def as_parameter(
    parameter, params=None, argument: str = "parameter"
) -> AbstractParameter:
    """`parameter` as an [`hybrax.AbstractParameter`][] (a string names a
    field); with `params`, a field it lacks is a `ValueError` naming `argument`
    and listing the fields (not an `AttributeError` from deep inside a solve)."""
    if isinstance(parameter, str):
        parameter = FieldParameter(parameter, None, parameter)
    elif not isinstance(parameter, AbstractParameter):
        raise ValueError(
            f"`{argument}` must be a field name or a hybrax.AbstractParameter "
            f"(FieldParameter, FunctionParameter); got {type(parameter).__name__}."
        )
    elif isinstance(parameter, FieldParameter) and not parameter.name:
        parameter = FieldParameter(parameter.field, parameter.scale, parameter.field)
    fields = None if params is None else _field_names(params)
    if (
        isinstance(parameter, FieldParameter)
        and fields is not None
        and parameter.field not in fields
    ):
        raise ValueError(
            f"`{argument}`: the parameters have no field {parameter.field!r}; "
            f"their fields are {', '.join(fields)}."
        )
    return parameter
