"""The rimless wheel as a user writes it: a model of functions of one's own
(plain functions and lambdas, a dict of parameters), for the tests of the store
of traced programs, in-process and in a user's script."""

import jax.numpy as jnp
import numpy as np

import hybrax as hx


def own_wheel(gravity=9.81):
    """The rimless wheel as a user writes it, of functions of their own (the
    gravity a literal of its vector field), with its section; on the orbit the
    multiplier is cos(2 alpha)^2 (McGeer's rimless wheel)."""

    def stance(t, x, p):
        return jnp.stack([x[1], gravity / p["l"] * jnp.sin(x[0])])

    def strike(t, x, p):
        return jnp.sin(p["gamma"] + p["alpha"] - x[0])

    def swap(t, x, p):
        return jnp.stack([x[0] - 2 * p["alpha"], jnp.cos(2 * p["alpha"]) * x[1]])

    system = hx.HybridSystem(
        [hx.Mode(stance, "stance")],
        [hx.Transition("stance", "stance", strike, False, swap, "heelstrike")],
        n_states=2,
    )
    section = hx.PoincareSection(
        ("heelstrike",),
        chart=lambda u, p: jnp.stack([p["gamma"] - p["alpha"], u[0]]),
        coordinates=lambda x, p: x[1:2],
    )
    params = hx.canonical_params({"l": 1.0, "alpha": np.pi / 8, "gamma": 0.08})
    return system, section, params
