"""A model of one's own, written with hybrax's public API alone: a vertical runner
with three modes (ascent, descent, stance) and an apex section, as a new user
would write it. `bench_compile.py` times its programs beside the zoo's.

The body (mass $m$) bounces on a massless leg of rest length $L_0$: in flight
$\\ddot y = -g$; in stance $m\\ddot y = k(L_0 - y) - c\\dot y - m g$ (a damped
spring); at lift-off the leg pushes, $\\dot y^+ = \\dot y^- + \\Delta v$. The apex
(flight, $\\dot y = 0$ downwards) is the section, its height the unknown. The
push makes up for the damping: with the default parameters the apex map has a
stable fixed point at 1.426 m (multiplier 0.62, period 0.814 s), which
`orbit_guess` finds.
"""

import equinox as eqx
import jax.numpy as jnp

import hybrax as hx


class RunnerParams(eqx.Module):
    g: float = 9.81  # m/s^2
    m: float = 70.0  # kg
    k: float = 20000.0  # N/m
    c: float = 400.0  # N s/m
    L0: float = 1.0  # m
    push: float = 1.6  # m/s


def _flight(t, x, p):
    return jnp.stack([x[1], -p.g * jnp.ones_like(x[1])])


def _stance(t, x, p):
    force = p.k * (p.L0 - x[0]) - p.c * x[1]
    return jnp.stack([x[1], force / p.m - p.g])


def _apex(t, x, p):  # positive while rising
    return x[1]


def _touchdown(t, x, p):  # positive in the air
    return x[0] - p.L0


def _liftoff(t, x, p):  # positive while the leg is compressed
    return p.L0 - x[0]


class _Push(hx.AbstractReset):
    def __call__(self, t, x, p):
        return jnp.stack([x[0], x[1] + p.push])

    def observables(self, t, x_minus, x_plus, p):
        return {}


def runner():
    """The runner's hybrid system and default parameters."""
    system = hx.HybridSystem(
        [
            hx.Mode(_flight, "ascent"),
            hx.Mode(_flight, "descent"),
            hx.Mode(_stance, "stance"),
        ],
        [
            hx.Transition("ascent", "descent", _apex, False, hx.identity_reset, "apex"),
            hx.Transition(
                "descent", "stance", _touchdown, False, hx.identity_reset, "touchdown"
            ),
            hx.Transition("stance", "ascent", _liftoff, False, _Push(), "liftoff"),
        ],
        n_states=2,
    )
    return system, hx.canonical_params(RunnerParams())


def section():
    """The apex: the unknown is its height $u = [y]$ (the velocity is zero)."""
    return hx.PoincareSection(
        ("touchdown", "liftoff", "apex"),
        lambda u, p: jnp.stack([u[0], jnp.zeros_like(u[0])]),
        lambda x, p: x[:1],
    )


def orbit_guess(params):
    return jnp.array([1.4])


def apex_height(orbit, params):
    """The orbit's apex height (an orbit quantity)."""
    return orbit.u[0]
