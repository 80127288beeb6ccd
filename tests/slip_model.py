"""A conservative test model: the spring-loaded inverted pendulum (SLIP) runner,
written with hybrax's public API. A point mass $m$ on a massless spring leg
(stiffness $k$, rest length $L_0$) runs in the plane: ballistic flight, touchdown
at the leg angle $\\alpha$ from the vertical, stance about the foot, lift-off where
the leg regains its rest length. Nothing dissipates: the energy
$E = \\tfrac12 m (\\dot x^2 + \\dot y^2) + m g y$ (in flight) is conserved, so the
full state's monodromy has two unit multipliers (the flow and the energy), the
forgotten horizontal position one zero multiplier, and the apex-height map on an
energy level one nontrivial multiplier (Seyfarth et al. 2002, A movement
criterion for running; Geyer, Seyfarth & Blickhan 2005).

State $(x, y, \\dot x, \\dot y)$; at touchdown the coordinates move with the foot
(the foot at the origin), so the apex's $x$ is arbitrary: the section's chart puts
it at 0 and reads the apex height $u = [y]$, the forward speed following from the
energy $E$, a parameter.
"""

import equinox as eqx
import jax.numpy as jnp

import hybrax as hx


class SlipParams(eqx.Module):
    g: float = 9.81  # m/s^2
    m: float = 80.0  # kg
    k: float = 20000.0  # N/m
    L0: float = 1.0  # m
    alpha: float = 0.47  # touchdown leg angle from the vertical, rad
    E: float = 1800.0  # total energy, J (about 5 m/s at a 1 m apex)


def _flight(t, x, p):
    return jnp.stack([x[2], x[3], jnp.zeros_like(x[2]), -p.g * jnp.ones_like(x[3])])


def _stance(t, x, p):
    r = jnp.sqrt(x[0] ** 2 + x[1] ** 2)
    push = p.k * (p.L0 - r) / (p.m * r)
    return jnp.stack([x[2], x[3], push * x[0], push * x[1] - p.g])


def _apex(t, x, p):  # positive while rising
    return x[3]


def _touchdown(t, x, p):  # positive while the foot is above the ground
    return x[1] - p.L0 * jnp.cos(p.alpha)


def _liftoff(t, x, p):  # positive while the leg is compressed
    return p.L0 - jnp.sqrt(x[0] ** 2 + x[1] ** 2)


class _FootAtOrigin(hx.AbstractReset):
    """Touchdown: the coordinates move with the new foot, placed ahead of the
    body at the leg angle (velocities and height unchanged)."""

    def __call__(self, t, x, p):
        return x.at[0].set(-p.L0 * jnp.sin(p.alpha))

    def observables(self, t, x_minus, x_plus, p):
        return {}


def energy(x, p):
    """The flight energy $\\frac12 m v^2 + m g y$, conserved over a cycle."""
    return 0.5 * p.m * (x[2] ** 2 + x[3] ** 2) + p.m * p.g * x[1]


def slip():
    """The SLIP runner's hybrid system and default parameters."""
    system = hx.HybridSystem(
        [
            hx.Mode(_flight, "ascent"),
            hx.Mode(_flight, "descent"),
            hx.Mode(_stance, "stance"),
        ],
        [
            hx.Transition("ascent", "descent", _apex, False, hx.identity_reset, "apex"),
            hx.Transition(
                "descent", "stance", _touchdown, False, _FootAtOrigin(), "touchdown"
            ),
            hx.Transition(
                "stance", "ascent", _liftoff, False, hx.identity_reset, "liftoff"
            ),
        ],
        n_states=4,
    )
    return system, hx.canonical_params(SlipParams())


def _apex_state(u, p):
    speed = jnp.sqrt(2.0 * (p.E / p.m - p.g * u[0]))
    return jnp.stack([jnp.zeros_like(u[0]), u[0], speed, jnp.zeros_like(u[0])])


def section(invariants=(energy,)):
    """The apex on the energy level `params.E`: the unknown is its height."""
    return hx.PoincareSection(
        ("touchdown", "liftoff", "apex"),
        _apex_state,
        lambda x, p: x[1:2],
        invariants=invariants,
    )
