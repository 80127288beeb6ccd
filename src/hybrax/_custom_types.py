"""Shared jaxtyping aliases."""

from typing import Any, TypeAlias

from jaxtyping import Array, ArrayLike, Float, Int


#: A state vector $x = [q, \dot q]$ (or any user state) of one hybrid system.
State: TypeAlias = Float[Array, " n"]
#: Parameters: any PyTree of arrays, the only route for data into vector fields.
Params: TypeAlias = Any
#: A real scalar: a Python float or a zero-dimensional array.
RealScalarLike: TypeAlias = float | Float[ArrayLike, ""]
#: The integer index of a mode of a [`hybrax.HybridSystem`][].
ModeIndex: TypeAlias = int | Int[ArrayLike, ""]
