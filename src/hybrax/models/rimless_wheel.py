r"""The rimless wheel rolling down a slope (McGeer 1990; Coleman, Chatterjee & Ruina
1997): a point mass on massless spokes of length $l$, $2\alpha$ apart.

State $x = [\theta, \dot\theta]$: the stance spoke's angle from the vertical, positive
downhill. Stance is an inverted pendulum, $\ddot\theta = (g/l)\sin\theta$. The next
spoke strikes when $\theta$ reaches $\gamma + \alpha$ ($\gamma$ the slope); the reset
swaps the spokes, $\theta^+ = \theta - 2\alpha$, and conserves angular momentum about
the new contact, $\dot\theta^+ = \cos(2\alpha)\dot\theta^-$: a reset that relabels
coordinates, like a biped's leg swap.

Closed forms: with $u = (\dot\theta^+)^2$ after each impact, the step map is
$u' = \cos^2(2\alpha)\,(u + 4(g/l)\sin\alpha\sin\gamma)$, fixed point
$u^* = 4(g/l)\sin\alpha\sin\gamma\cos^2 2\alpha / (1 - \cos^2 2\alpha)$, multiplier
$\cos^2(2\alpha)$ (in $\dot\theta^+$ as well). The energy lost at impact is
$T_c = \tfrac12 m l^2 \dot\theta^2 \sin^2(2\alpha)$.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._hybrid import AbstractReset, HybridSystem, Mode, Transition


class RimlessWheelParams(eqx.Module):
    """`g` [m/s^2], `l` spoke length [m], `alpha` half inter-spoke angle [rad],
    `gamma` slope [rad], `m` mass [kg]."""

    g: float = 9.81
    l: float = 1.0  # noqa: E741
    alpha: float = np.pi / 8
    gamma: float = 0.08
    m: float = 1.0

    def __check_init__(self):
        for name, ok, rule in (
            ("g", lambda v: v > 0, "> 0"),
            ("l", lambda v: v > 0, "> 0"),
            ("alpha", lambda v: 0 < v < np.pi / 4, "in (0, pi/4)"),
            ("gamma", lambda v: np.abs(v) < np.pi / 2, "in (-pi/2, pi/2)"),
            ("m", lambda v: v > 0, "> 0"),
        ):
            try:
                value = np.asarray(getattr(self, name), dtype=float)
            except Exception:
                continue
            if not (np.all(np.isfinite(value)) and np.all(ok(value))):
                raise ValueError(
                    f"Rimless-wheel parameter `{name}` must be {rule}; got {value}."
                )


def _stance(t, x, params):
    del t
    return jnp.stack([x[1], params.g / params.l * jnp.sin(x[0])])


def _strike_guard(t, x, params):
    del t
    return params.gamma + params.alpha - x[0]


class _SpokeSwap(AbstractReset):
    def __call__(self, t, x, params):
        del t
        return jnp.stack([x[0] - 2 * params.alpha, jnp.cos(2 * params.alpha) * x[1]])

    def observables(self, t, x_minus, x_plus, params):
        del t, x_plus
        kinetic = 0.5 * params.m * params.l**2 * x_minus[1] ** 2
        kept = jnp.cos(2 * params.alpha) ** 2
        return {"T_c": (1 - kept) * kinetic, "T_a": kept * kinetic}


def rimless_wheel() -> HybridSystem:
    """The rimless wheel: mode `"stance"`, transition `"heelstrike"` onto itself."""
    strike = Transition(
        source="stance",
        target="stance",
        guard=_strike_guard,
        direction=False,
        reset=_SpokeSwap(),
        name="heelstrike",
    )
    return HybridSystem((Mode(_stance, "stance"),), (strike,), n_states=2)
