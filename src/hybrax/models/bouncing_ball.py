r"""A ball bouncing on the ground with a coefficient of restitution.

State $x = [y, \dot y]$, $\ddot y = -g$. Impact when $y$ crosses 0 downward:
$\dot y^+ = -e\,\dot y^-$ (Newton's restitution law). The energy lost is
$T_c = \tfrac12 m(1 - e^2)\dot y^2$, the energy kept $T_a = \tfrac12 m e^2 \dot y^2$.

Closed forms (dropped from rest at height $h$): first impact at $\sqrt{2h/g}$ with
speed $v_1 = \sqrt{2gh}$; the $k$-th flight after it lasts $2e^k v_1/g$; the impacts
accumulate at the Zeno time $t_\infty = \sqrt{2h/g} + 2 e v_1 / (g(1-e))$.
"""

import jax.numpy as jnp

from .._hybrid import AbstractReset, HybridSystem, Mode, Transition
from .._params import POSITIVE, AbstractParams, Bound, parameter_field, parameter_table


class BallParams(AbstractParams):
    """Parameters of the bouncing ball (SI units)."""

    g: float = parameter_field(
        9.81, "m/s^2", "gravitational acceleration", bound=POSITIVE
    )
    e: float = parameter_field(
        0.8,
        "1",
        "coefficient of restitution in [0, 1]",
        bound=Bound(lambda v: (v >= 0) & (v <= 1), "in [0, 1]"),
    )
    m: float = parameter_field(1.0, "kg", "mass", bound=POSITIVE)


def _fall(t, x, params):
    del t
    return jnp.stack([x[1], -params.g * jnp.ones_like(x[1])])


def _height(t, x, params):
    del t, params
    return x[0]


class _Restitution(AbstractReset):
    def __call__(self, t, x, params):
        del t
        return x.at[1].multiply(-params.e)

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        kinetic = 0.5 * params.m * x_minus[1] ** 2
        return {"T_c": (1 - params.e**2) * kinetic, "T_a": params.e**2 * kinetic}


def bouncing_ball() -> tuple[HybridSystem, BallParams]:
    """The bouncing ball: one mode `"air"` and the transition `"impact"` onto itself;
    with the default [`hybrax.models.bouncing_ball.BallParams`][]."""
    impact = Transition(
        source="air",
        target="air",
        guard=_height,
        direction=False,
        reset=_Restitution(),
        name="impact",
    )
    return HybridSystem((Mode(_fall, "air"),), (impact,), n_states=2), BallParams()


def energies(x, params: BallParams):
    r"""Kinetic $\tfrac12 m\dot y^2$ and potential $m g y$ energy of states `x`
    (batched on leading axes)."""
    x = jnp.asarray(x)
    return 0.5 * params.m * x[..., 1] ** 2, params.m * params.g * x[..., 0]


def _ground_line(params):
    del params
    return [("x", 0.0, "ground $y = 0$")]


def default_state(params):
    """The model's default start (of `hybrax simulate`): dropped from rest at a
    height of 1 m."""
    del params
    return jnp.array([1.0, 0.0])


def _bundle():
    from .._model import (
        FigureSpec,
        ModelBundle,
        ModelForm,
        ModelPresentation,
        field_parameters,
    )

    make_params, parameter = field_parameters(BallParams, "bouncing-ball")
    return ModelBundle(
        name="bouncing-ball",
        description="a ball bouncing with restitution e (closed-form impacts, Zeno)",
        parameters=parameter_table(BallParams),
        make_params=make_params,
        parameter=parameter,
        state_names=("y", "v"),
        default_state=default_state,
        forms={"minimal": ModelForm(lambda: bouncing_ball()[0])},
        presentation=ModelPresentation(
            labels={
                "y": r"$y$ [m]",
                "v": r"$\dot y$ [m/s]",
                "e": "$e$ (dimensionless)",
            },
            figures=FigureSpec(
                labels=(r"$y$ [m]", r"$\dot y$ [m/s]"),
                energy=energies,
                surfaces=_ground_line,
            ),
        ),
    )
