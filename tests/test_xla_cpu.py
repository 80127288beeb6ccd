"""Importing hybrax raises XLA's CPU limit for compiling a loop into one kernel
(`hybrax._xla_cpu`), and leaves a user's own setting alone. Each case runs in a
fresh process: XLA reads `XLA_FLAGS` once, when the process's backend starts."""

import os
import subprocess
import sys

import pytest


# A diffrax solve (a while loop) compiled after importing hybrax: prints XLA_FLAGS
# as hybrax left them and whether XLA compiled a loop into one kernel (the
# compiled program marks such calls `xla_cpu_small_call`).
_PROBE = """
import os
import hybrax
import diffrax as dfx
import jax
import jax.numpy as jnp

def solve(y0):
    term = dfx.ODETerm(lambda t, y, args: -y)
    return dfx.diffeqsolve(term, dfx.Tsit5(), 0.0, 1.0, 0.1, y0).ys

text = jax.jit(solve).lower(jnp.ones(4)).compile().as_text()
print(os.environ.get("XLA_FLAGS", ""))
print("xla_cpu_small_call" in text)
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
    flags, small_call = out.stdout.strip().splitlines()[-2:]
    return flags, small_call == "True"


@pytest.mark.parametrize(
    "user_flags", [None, "--xla_force_host_platform_device_count=2"]
)
def test_import_raises_the_small_loop_limit(user_flags):
    flags, small_call = _probe(user_flags)
    assert "xla_cpu_small_while_loop_byte_threshold=1000000000" in flags
    if user_flags is not None:
        assert user_flags in flags  # kept, the option appended
    assert small_call


def test_a_users_own_setting_is_kept():
    # Threshold 0 turns XLA's small-loop compilation off.
    own = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=0"
    flags, small_call = _probe(own)
    assert flags == own
    assert not small_call
