"""XLA's CPU compiler option for small loops, set when hybrax is imported.

XLA's CPU backend runs a program as a sequence of kernels ("thunks"), one call per
fused operation, and a `while` loop as a thunk that calls its body's thunks once per
iteration. A diffrax solve is such a loop around a few hundred small operations, so
the calls, not the arithmetic, set its cost. XLA compiles a loop whose buffers are
smaller than `xla_cpu_small_while_loop_byte_threshold` (1 kB by default) into one
kernel instead. hybrax raises that limit to 1 GB, unless `XLA_FLAGS` already sets
`xla_backend_extra_options` (the map that holds it): then the user's setting is
kept as it is. Measured on the hopper's orbit with the analysis (minimal form, one
orbit under `jax.jit`, 2-core CPU): 5.5 ms with XLA's default, 1.4 ms with the
raised limit, same compile time and the same multipliers to the last digit
(`experiments/bench_orbit.py`).

XLA reads `XLA_FLAGS` once, when JAX first starts a backend: the option applies
when `hybrax` is imported before the first JAX computation of the process (as the
command line does), and changes nothing afterwards. It only concerns the CPU
backend. To keep XLA's default, set it yourself, e.g.
`XLA_FLAGS="--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"`.
"""

import os


SMALL_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"
SMALL_LOOP_BYTES = 1_000_000_000


def raise_small_loop_limit() -> bool:
    """Add the raised small-loop limit to `XLA_FLAGS` unless it sets
    `xla_backend_extra_options` already; returns whether it was added."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_extra_options" in flags:
        return False
    option = f"--xla_backend_extra_options={SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}"
    os.environ["XLA_FLAGS"] = f"{flags} {option}".strip()
    return True
