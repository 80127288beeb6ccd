"""The fingerprint with which a resumable result records what it was computed for
(`hybrax._resume`): the same for equal models built twice, different where a
function, a constant it reads or a captured array differs."""

import jax.numpy as jnp
import numpy as np
import pytest

import hybrax as hx
from hybrax import models
from hybrax._fingerprint import Unfingerprintable, fingerprint


WHEEL = models.rimless_wheel


def _wheel():
    system, params = WHEEL.rimless_wheel()
    return system, WHEEL.section(), hx.canonical_params(params)


SCALE = 2.0


def _field(t, x, p):
    return jnp.stack([x[1], -SCALE * x[0]])


def _other_field(t, x, p):
    return jnp.stack([x[1], -3.0 * x[0]])


def test_fingerprint_follows_what_functions_compute():
    """Equal models built twice fingerprint alike; another constant in a
    function, another global it reads, or another captured array does not."""
    assert fingerprint(_wheel()) == fingerprint(_wheel())
    assert fingerprint(_field) != fingerprint(_other_field)
    before = fingerprint(_field)
    globals()["SCALE"] = 2.5
    try:
        assert fingerprint(_field) != before
    finally:
        globals()["SCALE"] = 2.0
    assert fingerprint(_field) == before

    def capturing(value):
        table = np.array([value, 1.0])
        return lambda t, x, p: table[0] * x

    assert fingerprint(capturing(1.0)) == fingerprint(capturing(1.0))
    assert fingerprint(capturing(1.0)) != fingerprint(capturing(2.0))
    # Arrays are inputs: only their shapes and dtypes count.
    assert fingerprint(jnp.ones(3)) == fingerprint(jnp.zeros(3))
    assert fingerprint(jnp.ones(3)) != fingerprint(jnp.ones(4))

    class Opaque:
        pass

    with pytest.raises(Unfingerprintable):
        fingerprint(Opaque())
