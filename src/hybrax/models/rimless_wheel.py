r"""The rimless wheel rolling down a slope (McGeer 1990; Coleman, Chatterjee & Ruina
1997): a point mass on massless spokes of length $l$, $2\alpha$ apart.

State $x = [\theta, \dot\theta]$: the stance spoke's angle from the vertical, positive
downhill. Stance is an inverted pendulum, $\ddot\theta = (g/l)\sin\theta$. The next
spoke strikes when $\theta$ reaches $\gamma + \alpha$ ($\gamma$ the slope; on a
foothold $h$ higher, where $\sin(\gamma + \alpha - \theta) = h / (2l\sin\alpha)$);
the reset swaps the spokes, $\theta^+ = \theta - 2\alpha$, and conserves angular
momentum about the new contact, $\dot\theta^+ = \cos(2\alpha)\dot\theta^-$: a
reset that relabels coordinates, like a biped's leg swap.

Closed forms: with $u = (\dot\theta^+)^2$ after each impact, the step map is
$u' = \cos^2(2\alpha)\,(u + 4(g/l)\sin\alpha\sin\gamma)$, fixed point
$u^* = 4(g/l)\sin\alpha\sin\gamma\cos^2 2\alpha / (1 - \cos^2 2\alpha)$, multiplier
$\cos^2(2\alpha)$ (in $\dot\theta^+$ as well). The energy lost at impact is
$T_c = \tfrac12 m l^2 \dot\theta^2 \sin^2(2\alpha)$.
"""

import jax.numpy as jnp
import numpy as np

from .._hybrid import AbstractReset, HybridSystem, Mode, Transition
from .._model import SPECTRAL_RADIUS, Quantity, check_form, orbit_period
from .._params import (
    POSITIVE,
    AbstractParams,
    between,
    parameter_field,
    parameter_table,
)
from .._periodic import PoincareSection
from ._walking import height_disturbance, slope_disturbance


class RimlessWheelParams(AbstractParams):
    """Parameters of the rimless wheel (SI units)."""

    g: float = parameter_field(
        9.81, "m/s^2", "gravitational acceleration", bound=POSITIVE
    )
    l: float = parameter_field(1.0, "m", "spoke length", bound=POSITIVE)  # noqa: E741
    alpha: float = parameter_field(
        np.pi / 8,
        "rad",
        "half the angle between spokes",
        bound=between(0, np.pi / 4, "in (0, pi/4)"),
    )
    gamma: float = parameter_field(
        0.08, "rad", "slope", bound=between(-np.pi / 2, np.pi / 2, "in (-pi/2, pi/2)")
    )
    m: float = parameter_field(1.0, "kg", "mass", bound=POSITIVE)
    step_height: float = parameter_field(
        0.0, "m", "next foothold above the contact, normal to the slope"
    )


def _stance(t, x, params):
    del t
    return jnp.stack([x[1], params.g / params.l * jnp.sin(x[0])])


def _strike_guard(t, x, params):
    r"""The next spoke's foot above the next foothold, over the spokes' chord
    $2l\sin\alpha$: the foot is $l(\cos(\theta - \gamma) - \cos(\theta - \gamma -
    2\alpha)) = 2l\sin\alpha\,\sin(\gamma + \alpha - \theta)$ above the slope
    through the contact, so on even ground ($h = 0$) the spoke strikes at
    $\theta = \gamma + \alpha$."""
    del t
    chord = 2 * params.l * jnp.sin(params.alpha)
    return jnp.sin(params.gamma + params.alpha - x[0]) - params.step_height / chord


class _SpokeSwap(AbstractReset):
    def __call__(self, t, x, params):
        del t
        return jnp.stack([x[0] - 2 * params.alpha, jnp.cos(2 * params.alpha) * x[1]])

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        kinetic = 0.5 * params.m * params.l**2 * x_minus[1] ** 2
        kept = jnp.cos(2 * params.alpha) ** 2
        return {"T_c": (1 - kept) * kinetic, "T_a": kept * kinetic}


def _stall_guard(t, x, params):
    del t, params
    return x[1]


def rimless_wheel() -> tuple[HybridSystem, RimlessWheelParams]:
    r"""The rimless wheel: mode `"stance"`, transition `"heelstrike"` onto itself,
    and the terminal transition `"stall"`: the wheel stops ($\dot\theta$
    comes down to 0) before its hub passes over the contact and would roll back
    (on a step too shallow or too slow; the run ends with status
    `terminal_event`, the wheel's fall); with the default
    [`hybrax.models.rimless_wheel.RimlessWheelParams`][]."""
    strike = Transition(
        source="stance",
        target="stance",
        guard=_strike_guard,
        direction=False,
        reset=_SpokeSwap(),
        name="heelstrike",
    )
    stall = Transition(
        source="stance",
        target="stance",
        guard=_stall_guard,
        direction=False,
        name="stall",
        terminal=True,
    )
    return HybridSystem((Mode(_stance, "stance"),), (strike, stall), n_states=2), (
        RimlessWheelParams()
    )


def default_state(params):
    """The model's default start (of `hybrax simulate`): a spoke just planted
    (its angle $\\gamma - \\alpha$ from the slope's normal) turning at 1.5 rad/s."""
    return jnp.stack([params.gamma - params.alpha, jnp.asarray(1.5)])


def section(form: str = "minimal") -> PoincareSection:
    r"""The section just after heel strike: the reduced unknown is the stance
    spoke's rate $u = [\dot\theta^+]$, at $\theta^+ = \gamma - \alpha$."""
    check_form(form)  # one form; the argument as every model's
    return PoincareSection(
        ("heelstrike",), chart=_section_chart, coordinates=_section_coordinates
    )


# Module-level chart and coordinates: equal sections share compiled programs.
def _section_chart(u, p):
    return jnp.stack([p.gamma - p.alpha, u[0]])


def _section_coordinates(x, p):
    del p
    return x[1:2]


def fixed_point(params: RimlessWheelParams):
    r"""The closed-form speed after heel strike on the orbit,
    $\dot\theta^* = \sqrt{4(g/l)\sin\alpha\sin\gamma\cos^2 2\alpha /
    (1 - \cos^2 2\alpha)}$ (Coleman, Chatterjee & Ruina 1997)."""
    c2 = jnp.cos(2 * params.alpha) ** 2
    return jnp.sqrt(
        4
        * params.g
        / params.l
        * jnp.sin(params.alpha)
        * jnp.sin(params.gamma)
        * c2
        / (1 - c2)
    )


def energies(x, params: RimlessWheelParams):
    r"""Kinetic $\tfrac12 m l^2\dot\theta^2$ and potential energy
    $m g l \cos\theta$ above the contact (batched on leading axes)."""
    x = jnp.asarray(x)
    kinetic = 0.5 * params.m * params.l**2 * x[..., 1] ** 2
    return kinetic, params.m * params.g * params.l * jnp.cos(x[..., 0])


_LABELS = (r"$\theta$ [rad]", r"$\dot\theta$ [rad/s]")


def _strike_line(params):
    strike = float(params.gamma + params.alpha)
    return [("x", strike, r"heel strike $\theta = \gamma + \alpha$")]


def _hub(x, params):
    return params.l * np.array([np.sin(x[0]), np.cos(x[0])])


def _spoke_foot(x, params, k):
    """The foot of spoke `k` (0: the stance spoke, at the origin; -1: the next one
    downhill) for the state `x`."""
    angle = x[0] + 2 * k * params.alpha
    return _hub(x, params) - params.l * np.array([np.sin(angle), np.cos(angle)])


def _stick_figure(x, params):
    """The slope through the contact, then the wheel: its spokes as one line out
    of the hub and back (one colour), and the spoke in contact at the start
    drawn again on its own (a second colour), so that the rotation reads from one
    frame to the next."""
    x = np.asarray(x)
    reach = 2.0 * float(params.l)
    slope = float(params.gamma)
    downhill = np.array([np.cos(slope), -np.sin(slope)])
    ground = reach * np.stack([-downhill, downhill])
    hub = _hub(x, params)
    n_spokes = int(round(np.pi / float(params.alpha)))
    feet = [_spoke_foot(x, params, k) for k in range(n_spokes)]
    wheel = np.stack([point for foot in feet for point in (hub, foot)] + [hub])
    marked = np.stack([hub, feet[0]])
    return [ground, wheel, marked]


def _frame_shift(x_before, params):
    """At heel strike the next spoke's foot becomes the contact."""
    return _spoke_foot(np.asarray(x_before), params, -1)


def _speed(orbit, params):
    del params
    return orbit.u[0]


def _no_orbit_hint(params) -> str | None:
    r"""Why no orbit can exist, where the parameters say so: on level ground or
    uphill each impact keeps the share $\cos^2 2\alpha$ of the kinetic energy
    and the roll down one spoke adds none (or takes some)."""
    gamma = float(params.gamma)
    if gamma <= 0:
        return (
            f"with gamma = {gamma:g} <= 0 (level ground or uphill) every impact "
            "takes a share of the kinetic energy and the slope gives none back: "
            "no periodic rolling exists (downhill it does, e.g. --set gamma=0.08)"
        )
    return None


def _bundle():
    from .._model import (
        ContinuationDefaults,
        FigureSpec,
        ModelBundle,
        ModelForm,
        ModelPresentation,
        field_parameters,
    )

    make_params, parameter = field_parameters(RimlessWheelParams, "rimless-wheel")
    return ModelBundle(
        name="rimless-wheel",
        description="rimless wheel on a slope (McGeer 1990; Coleman et al. 1997)",
        parameters=parameter_table(RimlessWheelParams),
        make_params=make_params,
        parameter=parameter,
        state_names=("theta", "omega"),
        default_state=default_state,
        forms={"minimal": ModelForm(lambda: rimless_wheel()[0], section)},
        orbit_guess=lambda params: jnp.array([1.5]),
        quantities={
            "speed": Quantity(
                _speed, "rad/s", "rate after heel strike", r"$\dot\theta^+$"
            ),
            "multiplier": SPECTRAL_RADIUS,
            "period": Quantity(orbit_period, "s", "step period"),
        },
        disturbances={
            "slope": slope_disturbance("gamma"),
            "height": height_disturbance("step_height"),
        },
        gait_indicators=("period",),
        presentation=ModelPresentation(
            continuation=ContinuationDefaults(
                "gamma", start=0.08, stop=0.3, parameter_scale=0.01, max_period=20.0
            ),
            sweep_grids=("gamma=0.02:0.2:10", "alpha=0.2:0.6:9"),
            labels={
                "theta": r"$\theta$ [rad]",
                "omega": r"$\dot\theta$ [rad/s]",
                # The section's unknown (`u0` in `hybrax basin --grid`).
                "u0": r"$\dot\theta^+$ after heel strike [rad/s]",
                "gamma": r"slope $\gamma$ [rad]",
                "alpha": r"$\alpha$ [rad]",
            },
            figures=FigureSpec(_LABELS, energies, surfaces=_strike_line),
            no_orbit_hint=_no_orbit_hint,
            stick_figure=_stick_figure,
            frame_shift=_frame_shift,
            stick_names=("spokes", "spoke in contact"),
            orbit_perturbations=(
                (1, 0.1, r"$\dot\theta + 0.1$ rad/s"),
                (1, -0.1, r"$\dot\theta - 0.1$ rad/s"),
            ),
        ),
    )
