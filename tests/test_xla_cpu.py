"""Importing hybrax sets XLA's CPU options so that a loop compiles into one kernel
(`hybrax._xla_cpu`), and leaves a user's own settings alone. The library's setting
is checked in a fresh process (XLA reads `XLA_FLAGS` once, when the process's
backend starts; this suite's own flags keep XLA's default limit)."""

import os
import subprocess
import sys

import pytest

from hybrax import _xla_cpu as xla_cpu
from hybrax._xla_cpu import (
    CLASSIC_EMITTERS_FLAG,
    NO_YNN_FUSION_FLAG,
    SMALL_LOOP_FLAG,
    configure_xla_cpu,
)


# After importing hybrax: XLA_FLAGS as hybrax left them; whether XLA compiled a
# diffrax loop into one kernel (the compiled program marks such calls
# `xla_cpu_small_call`); and d(apex_1)/dh of a bouncing ball dropped from h, by
# reverse mode through an impact and an extremum, whose closed form is e^2.
_PROBE = """
import os
import hybrax as hx
import diffrax as dfx
import jax
import jax.numpy as jnp
from hybrax import models

jax.config.update("jax_enable_x64", True)

def solve(y0):
    term = dfx.ODETerm(lambda t, y, args: -y)
    return dfx.diffeqsolve(term, dfx.Tsit5(), 0.0, 1.0, 0.1, y0).ys

text = jax.jit(solve).lower(jnp.ones(4)).compile().as_text()

ball = models.bouncing_ball.bouncing_ball()[0]
apex = hx.Extremum(lambda t, x, p: x[0])
air = hx.Mode(ball.modes[0].vector_field, "air", observables={"apex": apex})
system = hx.HybridSystem([air], list(ball.transitions), n_states=2)
params = hx.canonical_params(models.bouncing_ball.BallParams(e=0.7))

def second_apex(h):
    x0 = jnp.stack([h, jnp.zeros_like(h)])
    return hx.simulate(system, x0, params, n_events=2).phase_observables["apex"][1]

print(os.environ.get("XLA_FLAGS", ""))
print("xla_cpu_small_call" in text)
print(float(jax.grad(second_apex)(jnp.asarray(1.3))) / 0.7**2 - 1)
"""


def _probe(xla_flags):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    flags, small_call, gradient_error = out.stdout.strip().splitlines()[-3:]
    return flags, small_call == "True", float(gradient_error)


@pytest.mark.slow
def test_import_raises_the_small_loop_limit():
    flags, small_call, gradient_error = _probe(None)
    assert flags == f"{SMALL_LOOP_FLAG} {NO_YNN_FUSION_FLAG} {CLASSIC_EMITTERS_FLAG}"
    assert small_call
    # Compiled as one kernel, reverse mode through events stays exact.
    assert abs(gradient_error) < 1e-9


_OWN_LIMIT = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"
_OWN_YNN = "--xla_cpu_experimental_ynn_fusion_type=individual_dot"
_OWN_EMITTERS = "--xla_cpu_use_fusion_emitters=true"
_ALL = [SMALL_LOOP_FLAG, NO_YNN_FUSION_FLAG, CLASSIC_EMITTERS_FLAG]


@pytest.mark.parametrize(
    "user_flags, added",
    [
        ("", _ALL),
        ("--xla_force_host_platform_device_count=2", _ALL),
        # A user's own option is kept, the others added.
        (_OWN_LIMIT, [NO_YNN_FUSION_FLAG, CLASSIC_EMITTERS_FLAG]),
        (_OWN_YNN, [SMALL_LOOP_FLAG, CLASSIC_EMITTERS_FLAG]),
        (_OWN_EMITTERS, [SMALL_LOOP_FLAG, NO_YNN_FUSION_FLAG]),
        (f"{_OWN_LIMIT} {_OWN_YNN} {_OWN_EMITTERS}", []),
    ],
)
def test_xla_flags_are_appended_to_or_kept(monkeypatch, user_flags, added):
    monkeypatch.setenv("XLA_FLAGS", user_flags)
    monkeypatch.setattr(xla_cpu, "_jaxlib_version", lambda: (0, 10, 2))
    assert configure_xla_cpu() == added
    assert os.environ["XLA_FLAGS"] == " ".join([user_flags, *added]).strip()


@pytest.mark.parametrize(
    "version, added",
    [
        ((0, 9, 0), [SMALL_LOOP_FLAG, CLASSIC_EMITTERS_FLAG]),
        ((0, 11, 0), [SMALL_LOOP_FLAG, NO_YNN_FUSION_FLAG]),
        ((0,), [SMALL_LOOP_FLAG]),
    ],
)
def test_flags_only_for_a_jaxlib_that_knows_them(monkeypatch, version, added):
    # XLA stops the process on an unknown flag: the YNNPACK option from jaxlib
    # 0.10.1, the emitters' from 0.8 to 0.10 (the releases checked to have it), and
    # for a jaxlib of unknown version only the small-loop limit.
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setattr(xla_cpu, "_jaxlib_version", lambda: version)
    assert configure_xla_cpu() == added


@pytest.mark.parametrize(
    "version, expected",
    [("0.10.2", (0, 10, 2)), ("0.11.2+cpu", (0, 11, 2)), ("0.10.1rc1", (0, 10, 1))],
)
def test_jaxlib_version_is_read_from_its_metadata(monkeypatch, version, expected):
    monkeypatch.setattr(xla_cpu.importlib.metadata, "version", lambda name: version)
    assert xla_cpu._jaxlib_version() == expected
