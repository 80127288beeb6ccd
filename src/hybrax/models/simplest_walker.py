r"""The simplest walking model (Garcia, Chatterjee, Ruina & Coleman 1998, "The
simplest walking model: stability, complexity, and scaling", J. Biomech. Eng.
120(2):281-288).

Two rigid massless legs of length $l$ hinged at a point-mass hip $M$, with
infinitesimal point masses $m \ll M$ at the feet, walking down a slope $\gamma$.
Lengths are scaled by $l$, masses by $M$ and time by $\sqrt{l/g}$: the slope is the
only parameter. State $x = [\theta, \phi, \dot\theta, \dot\phi]$ in Garcia's
convention: $\theta$ is the stance leg's angle from the slope's normal (positive
when the hip is behind the stance foot) and $\phi$ the angle between the legs, the
swing foot at hip $+ (\sin(\theta - \phi), -\cos(\theta - \phi))$ in the slope's
frame (the walker moves towards $+x$).

- **Stance** (the limit $m/M \to 0$ of the double pendulum):
  $\ddot\theta = \sin(\theta - \gamma)$, an inverted pendulum that the massless
  swing leg does not load, and
  $\ddot\phi = \sin\phi\,(\dot\theta^2 - \cos(\theta - \gamma)) +
  \sin(\theta - \gamma)$.
- **Heel strike** where the swing foot meets the slope ahead of the stance foot,
  $\phi - 2\theta = 0$ crossing from negative to positive. The walker starts
  each step on that surface, and the swing foot passes through the slope near
  mid-stance ($\phi \approx 0$, where $\phi - 2\theta$ crosses downwards): foot
  scuffing, which Garcia et al. ignore. The transition is armed once the swing
  foot is ahead of the stance foot along the slope, $\sin(\theta - \phi) -
  \sin\theta > 0$, which skips the step's own start.
- **Reset** (plastic impact of the landing foot, angular momentum conserved
  about it, in the limit $m/M \to 0$; then the legs swap roles):
  $\theta^+ = -\theta^-$, $\phi^+ = -2\theta^-$,
  $\dot\theta^+ = \cos(2\theta^-)\,\dot\theta^-$,
  $\dot\phi^+ = \cos(2\theta^-)\,(1 - \cos 2\theta^-)\,\dot\theta^-$.
  The energy lost is $T_c = \tfrac12\sin^2(2\theta^-)\,(\dot\theta^-)^2$
  (in units of $M g l$).

After heel strike $\phi = 2\theta$ and $\dot\phi = (1 - \cos 2\theta)\,\dot\theta$:
the step map acts on $u = (\theta, \dot\theta)$ (Garcia et al.'s reduction); its
eigenvalues are the nontrivial Floquet multipliers (the step map of the full
state $x$ has two more, both 0).

**Scaling** (the small-slope limit, after Garcia et al.): linearised,
$\theta = \theta_0\cosh t + \dot\theta_0\sinh t$ and $\ddot\phi + \phi = \theta$
($\dot\phi_0 = O(\theta_0^3)$); a symmetric step ($\theta(\tau) = -\theta_0$) needs
$\dot\theta_0 = -\theta_0\coth(\tau/2)$, and heel strike at $\phi(\tau) =
2\theta(\tau)$ gives $\cos(\tau/2)\,(3\cos(\tau/2) + \coth(\tau/2)\sin(\tau/2))
= 0$: the short-period gait ($\tau_0 = \pi$) and the long-period one
($\tan(\tau_0/2) = -3\tanh(\tau_0/2)$, $\tau_0 = 3.8121$). The energy lost at
heel strike, $2\theta_0^2\dot\theta_0^2$ to leading order, equals the potential
released, $2\sin\theta_0\sin\gamma \approx 2\theta_0\gamma$:
$\theta_0 = \tanh^{2/3}(\tau_0/2)\,\gamma^{1/3}$, i.e. $0.9710\,\gamma^{1/3}$
(long-period gait) and $0.9440\,\gamma^{1/3}$ (short-period gait), with relative
corrections $O(\gamma^{2/3})$.

**Known results** (Garcia et al. 1998): at $\gamma = 0.009$ the long-period gait
starts its step at $\theta^* = 0.20031090049483$, $\dot\theta^* =
-0.19983247291764$ and is stable (multipliers $-0.19 \pm 0.56i$); the
short-period gait, at $\theta^* = 0.19393736960624$, $\dot\theta^* =
-0.20386692731962$, is unstable (multipliers 4.0 and 0.46). The long-period gait
is stable up to $\gamma \approx 0.015$, where it loses stability by period
doubling; stable gaits of higher periods follow, through a cascade of period
doublings towards chaotic walking near $\gamma = 0.019$.
"""

import math

import jax.numpy as jnp
import numpy as np

from .._hybrid import AbstractReset, HybridSystem, Mode, Transition
from .._model import (
    SPECTRAL_RADIUS,
    Quantity,
    check_form,
    impact_quantities,
    orbit_period,
)
from .._params import AbstractParams, between, parameter_field, parameter_table
from .._periodic import PoincareSection
from ._walking import fall, slope_disturbance


class SimplestWalkerParams(AbstractParams):
    """The simplest walker's one parameter (Garcia et al. 1998). Lengths are in
    leg lengths $l$ and times in $\\sqrt{l/g}$."""

    slope: float = parameter_field(
        0.009, "rad", "slope angle gamma", bound=between(0, 0.5)
    )


def _stance(t, x, params):
    r"""$\ddot\theta = \sin(\theta - \gamma)$, $\ddot\phi = \sin\phi\,
    (\dot\theta^2 - \cos(\theta - \gamma)) + \sin(\theta - \gamma)$."""
    del t
    theta, phi, theta_dot = x[0], x[1], x[2]
    pull = jnp.sin(theta - params.slope)
    phi_ddot = jnp.sin(phi) * (theta_dot**2 - jnp.cos(theta - params.slope)) + pull
    return jnp.stack([theta_dot, x[3], pull, phi_ddot])


def _heel_strike_guard(t, x, params):
    r"""$\phi - 2\theta$: zero where the swing foot is on the slope (besides
    $\phi = 0$, the feet side by side)."""
    del t, params
    return x[1] - 2 * x[0]


def _swing_foot_ahead(t, x, params):
    r"""The swing foot's position along the slope relative to the stance foot,
    $\sin(\theta - \phi) - \sin\theta$ (in leg lengths): negative from the start
    of a step until the legs pass each other."""
    del t, params
    return jnp.sin(x[0] - x[1]) - jnp.sin(x[0])


def _hip_height(t, x, params):
    r"""The hip's height above the slope over the leg's length (its fall: see
    `models._walking.fall`), $\cos\theta$."""
    del t, params
    return jnp.cos(x[0])


class HeelStrike(AbstractReset):
    r"""Garcia et al.'s impact map: $\theta^+ = -\theta^-$, $\phi^+ = -2\theta^-$,
    $\dot\theta^+ = \cos(2\theta^-)\dot\theta^-$,
    $\dot\phi^+ = \cos(2\theta^-)(1 - \cos 2\theta^-)\dot\theta^-$; observables
    $T_c$ (kinetic energy lost) and $T_a$ (kept), in units of $M g l$."""

    def __call__(self, t, x, params):
        del t, params
        c = jnp.cos(2 * x[0])
        return jnp.stack([-x[0], -2 * x[0], c * x[2], c * (1 - c) * x[2]])

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus, params
        kinetic = 0.5 * x_minus[2] ** 2
        kept = jnp.cos(2 * x_minus[0]) ** 2
        return {"T_c": (1 - kept) * kinetic, "T_a": kept * kinetic}


def simplest_walker() -> tuple[HybridSystem, SimplestWalkerParams]:
    """The simplest walker: mode `"stance"`, transition `"heelstrike"` onto itself
    (armed once the swing foot passes the stance foot), and the terminal
    transition `"fall"` (the hip down to half the leg's length above the slope:
    the run ends with status `terminal_event`); with the default
    [`hybrax.models.simplest_walker.SimplestWalkerParams`][]."""
    strike = Transition(
        source="stance",
        target="stance",
        guard=_heel_strike_guard,
        direction=True,
        reset=HeelStrike(),
        name="heelstrike",
        arm=_swing_foot_ahead,
        # Garcia et al. let the swing foot pass through the slope (scuffing is
        # ignored): on the short-period gait the legs pass each other with the
        # foot still below the slope, and the heel strike is its next crossing.
        armed_outside="wait",
    )
    system = HybridSystem(
        (Mode(_stance, "stance"),), (strike, fall("stance", _hip_height)), n_states=4
    )
    return system, SimplestWalkerParams()


def _chart(u, params):
    del params
    return jnp.stack([u[0], 2 * u[0], u[1], (1 - jnp.cos(2 * u[0])) * u[1]])


def _coordinates(x, params):
    del params
    return jnp.stack([x[0], x[2]])


def section(form: str = "minimal") -> PoincareSection:
    r"""Just after heel strike: $\phi = 2\theta$, $\dot\phi = (1 - \cos 2\theta)
    \dot\theta$; the reduced unknowns are $u = (\theta, \dot\theta)$ (Garcia et
    al.'s reduction of the step map to two dimensions). Its chart and coordinates
    are module functions: sections built by separate calls are equal, and share
    compiled programs."""
    check_form(form)  # one form; the argument as every model's
    return PoincareSection(("heelstrike",), chart=_chart, coordinates=_coordinates)


#: The limit step periods $\tau_0$ of the two gaits as the slope goes to 0 (module
#: docstring): the root of $\tan(\tau_0/2) = -3\tanh(\tau_0/2)$ for the
#: long-period gait, $\pi$ for the short-period one.
TAU0 = {"long": 3.8120917950929663, "short": math.pi}

# Next-order terms of the starts, theta_0 (1 + a slope^(2/3)) and
# theta_dot_0 (1 + b slope^(2/3)), fitted to computed gaits for slopes up to 0.02:
# guesses only, within 0.05 % there (the leading terms alone are 5 % off at 0.009,
# enough for Newton to step to a walker that falls).
_NEXT_ORDER = {"long": (-0.19, -1.05), "short": (-0.28, -0.83)}


def asymptotic_start(slope, gait: str = "long"):
    r"""The small-slope start (just after heel strike) of a gait of limit period
    $\tau_0$: $\theta_0 = \tanh^{2/3}(\tau_0/2)\,\gamma^{1/3}$ and
    $\dot\theta_0 = -\theta_0\coth(\tau_0/2)$ to leading order (module
    docstring), times $1 + a\gamma^{2/3}$ and $1 + b\gamma^{2/3}$ with
    coefficients fitted to the computed gaits: a guess for shooting.

    **Arguments:**

    - `slope`: $\gamma$ [rad] (traced values work).
    - `gait`: `"long"` (the long-period gait, $\tau_0 = 3.8121$, stable for
      small slopes) or `"short"` ($\tau_0 = \pi$, unstable).

    **Returns:** $(\theta_0, \dot\theta_0)$.
    """
    if gait not in TAU0:
        raise ValueError(f"`gait` must be 'long' or 'short'; got {gait!r}.")
    a, b = _NEXT_ORDER[gait]
    t = math.tanh(TAU0[gait] / 2)
    cube_root = jnp.cbrt(jnp.asarray(slope, dtype=float))
    theta = t ** (2 / 3) * cube_root * (1 + a * cube_root**2)
    return jnp.stack([theta, -theta / t * (1 + b * cube_root**2)])


def orbit_guess(params):
    r"""A guess of the long-period gait's $(\theta, \dot\theta)$ after heel
    strike ([`hybrax.models.simplest_walker.asymptotic_start`][])."""
    return asymptotic_start(params.slope, "long")


def branch_guesses(params):
    """Guesses of the long-period gait, then of the short-period one."""
    return [asymptotic_start(params.slope, gait) for gait in ("long", "short")]


def energies(x, params):
    r"""Kinetic energy $\tfrac12\dot\theta^2$ and potential energy
    $\cos(\theta - \gamma) - 1$ of the hip, measured from its height over the
    stance foot with the stance leg vertical, in units of $M g l$ (batched on
    leading axes; the feet carry none in the limit $m/M \to 0$)."""
    x = jnp.asarray(x)
    return 0.5 * x[..., 2] ** 2, jnp.cos(x[..., 0] - params.slope) - 1


def _stance_angle(orbit, params):
    del params
    return orbit.u[0]


def _step_length(orbit, params):
    del params
    return 2 * jnp.sin(orbit.u[0])


def _speed(orbit, params):
    r"""Average speed along the slope, step length $2\sin\theta^*$ over the step
    period (in $\sqrt{g l}$)."""
    return _step_length(orbit, params) / orbit.period


def _stance_rate(orbit, params):
    del params
    return orbit.u[1]


def _swing_rate(orbit, params):
    r"""The swing leg's rate after heel strike, $\dot\phi^+ = (1 -
    \cos 2\theta)\,\dot\theta^+$ (the impact map of Garcia et al. 1998)."""
    del params
    return (1 - jnp.cos(2 * orbit.u[0])) * orbit.u[1]


def _potential_released(orbit, params):
    r"""Potential energy released per step, $2\sin\theta^*\sin\gamma$ in $M g l$
    (what heel strike removes on a periodic gait)."""
    return 2 * jnp.sin(orbit.u[0]) * jnp.sin(params.slope)


# The model's units: lengths in l, times in sqrt(l/g), energies in M g l.
_TIME, _ENERGY = r"$\sqrt{l/g}$", "$M g l$"

#: Scalar quantities of a gait with their units: what `hybrax orbit
#: simplest-walker` reports, `tune` targets and `sweep --quantity` maps.
ORBIT_QUANTITIES = {
    "period": Quantity(orbit_period, _TIME, "step period"),
    "theta": Quantity(_stance_angle, "rad", "stance angle", r"$\theta^*$"),
    "theta_dot": Quantity(
        _stance_rate, r"rad/$\sqrt{l/g}$", "stance rate after impact", r"$\dot\theta^+$"
    ),
    "phi_dot": Quantity(
        _swing_rate, r"rad/$\sqrt{l/g}$", "swing rate after impact", r"$\dot\phi^+$"
    ),
    "step_length": Quantity(_step_length, "$l$", "step length"),
    "speed": Quantity(_speed, r"$\sqrt{g l}$", "speed along the slope"),
    **impact_quantities("heel strike", _ENERGY),
    "potential_released": Quantity(
        _potential_released, _ENERGY, "potential released per step"
    ),
    "multiplier": SPECTRAL_RADIUS,
}


# Time is in sqrt(l/g) (the time axis's unit), so the rates are in radians per
# sqrt(l/g).
_LABELS = (
    r"$\theta$ [rad]",
    r"$\phi$ [rad]",
    r"$\dot\theta$ [rad/$\sqrt{l/g}$]",
    r"$\dot\phi$ [rad/$\sqrt{l/g}$]",
)


def _to_world(points, params):
    """Slope-frame points (rows) to the world frame, the slope going down to +x."""
    slope = float(params.slope)
    along = np.array([np.cos(slope), -np.sin(slope)])
    normal = np.array([np.sin(slope), np.cos(slope)])
    points = np.asarray(points, dtype=float)
    return points[..., :1] * along + points[..., 1:] * normal


def _stick_points(x):
    """Stance foot, hip and swing foot in the slope's frame (legs of length 1)."""
    theta, phi = float(x[0]), float(x[1])
    hip = np.array([-np.sin(theta), np.cos(theta)])
    swing = hip + np.array([np.sin(theta - phi), -np.cos(theta - phi)])
    return np.zeros(2), hip, swing


def _stick_figure(x, params):
    """The slope, the stance leg and the swing leg (lengths in leg lengths)."""
    foot, hip, swing = _stick_points(x)
    ground = _to_world(np.array([[-1.5, 0.0], [1.5, 0.0]]), params)
    return [ground, _to_world(np.stack([foot, hip]), params),
            _to_world(np.stack([hip, swing]), params)]  # fmt: skip


#: The animation's note: the straight-legged walker's swing foot dips below the
#: slope around mid-swing; the model ignores foot scuffing (it lets the foot pass).
_ANIMATION_NOTE = (
    "foot scuffing ignored (the swing foot passes through the slope at mid-stride)"
)


def _frame_shift(x_before, params):
    """At heel strike the swing foot becomes the stance foot."""
    return _to_world(_stick_points(x_before)[2], params)


def default_state(params):
    """The model's default start (of `hybrax simulate`): the section state of its
    orbit guess, a state right after a heel strike."""
    return section().chart(orbit_guess(params), params)


def _bundle():
    from .._model import (
        ContinuationDefaults,
        FigureSpec,
        ModelBundle,
        ModelForm,
        ModelPresentation,
        field_parameters,
    )
    from .._units import Units

    make_params, parameter = field_parameters(SimplestWalkerParams, "simplest-walker")
    return ModelBundle(
        name="simplest-walker",
        description="simplest walking model, point-mass hip and feet "
        "(Garcia, Chatterjee, Ruina & Coleman 1998)",
        parameters=parameter_table(SimplestWalkerParams),
        make_params=make_params,
        parameter=parameter,
        state_names=("theta", "phi", "theta_dot", "phi_dot"),
        default_state=default_state,
        forms={"minimal": ModelForm(lambda: simplest_walker()[0], section)},
        orbit_guess=orbit_guess,
        branch_guesses=branch_guesses,
        unknown_names=("theta", "theta_dot"),
        quantities=ORBIT_QUANTITIES,
        disturbances={"slope": slope_disturbance("slope")},
        gait_indicators=("period", "step_length"),
        presentation=ModelPresentation(
            continuation=ContinuationDefaults(
                "slope", start=0.009, stop=0.02, parameter_scale=0.01, max_period=10.0
            ),
            sweep_grids=("slope=0.002:0.018:9",),
            # Schwab & Wisse (2001): a thin sliver along theta_dot ~ -theta.
            basin_grids=("theta=0.1:0.3:100", "theta_dot=-0.35:-0.05:100"),
            labels={
                "slope": r"slope $\gamma$ [rad]",
                "theta": _LABELS[0],
                "phi": _LABELS[1],
                "theta_dot": _LABELS[2],
                "phi_dot": _LABELS[3],
            },
            figures=FigureSpec(
                _LABELS,
                energies,
                portrait=(0, 2),
                # Dimensionless: time in sqrt(l/g), lengths in l, energy in M g l.
                units=Units(time=r"$\sqrt{l/g}$", length="$l$", energy="$M g l$"),
            ),
            orbit_perturbations=((2, -0.01, r"$\dot\theta - 0.01$"),),
            stick_figure=_stick_figure,
            frame_shift=_frame_shift,
            stick_names=("leg 1", "leg 2"),
            stick_swaps=((1, 2),),  # stance and swing trade at heel strike
            animation_note=_ANIMATION_NOTE,
        ),
    )
