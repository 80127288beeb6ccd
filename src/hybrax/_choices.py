"""The plain choices of the settings objects, as enumerations.

Each is a `enum.StrEnum`: its members compare equal to their string values, so
`ContinuationSettings(method="natural")` and
`ContinuationSettings(method=hybrax.ContinuationMethod.NATURAL)` are the same
settings, and a value written to JSON is its plain string. Choices with
behaviour of their own (a root finder, a minimiser, a step controller) are
objects instead, as in optimistix and diffrax.
"""

import enum


class ContinuationMethod(enum.StrEnum):
    r"""How [`hybrax.ContinuationSettings`][] predicts and corrects a branch.

    - `PSEUDO_ARCLENGTH` (`"pseudo-arclength"`): Keller's (1977) predictor along
      the tangent and corrector on the hyperplane orthogonal to it; passes folds.
    - `NATURAL` (`"natural"`): $\lambda$ advances by the step and
      $F(u, \lambda) = 0$ is solved at fixed $\lambda$; stops at a fold.
    """

    PSEUDO_ARCLENGTH = "pseudo-arclength"
    NATURAL = "natural"


class ShootingJacobian(enum.StrEnum):
    """How the Newton steps of [`hybrax.Shooting`][] differentiate the return map.

    - `VARIATIONAL` (`"variational"`): the first variational equation integrated
      with the state and the saltation matrices at the events.
    - `AUTODIFF` (`"autodiff"`): forward-mode automatic differentiation through
      diffrax.
    """

    VARIATIONAL = "variational"
    AUTODIFF = "autodiff"


class GradientMode(enum.StrEnum):
    """The mode of the gradients of [`hybrax.tune`][] ([`hybrax.TuneSettings`][]).

    - `AUTO` (`"auto"`): reverse mode (it compiles faster, and runs as fast once
      compiled).
    - `REVERSE` (`"reverse"`), `FORWARD` (`"forward"`): that mode.
    """

    AUTO = "auto"
    REVERSE = "reverse"
    FORWARD = "forward"


class SweepOrder(enum.StrEnum):
    """The order in which the elements of [`hybrax.sweep_orbits`][] take lanes
    ([`hybrax.SweepSettings`][]).

    - `DEFECT` (`"defect"`): by the return-map defect at each element's start,
      largest first.
    - `BATCH` (`"batch"`): the batch's own order.
    """

    DEFECT = "defect"
    BATCH = "batch"


def as_choice(kind: type[enum.StrEnum], value, name: str):
    """`value` as a member of `kind` (a member or its string value); a
    `ValueError` naming the argument `name` and the choices otherwise."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(member.value) for member in kind)
        raise ValueError(
            f"`{name}` must be one of {choices} (or hybrax.{kind.__name__}); got "
            f"{value!r}."
        ) from None
