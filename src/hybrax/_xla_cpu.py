"""XLA's CPU compiler options for small loops and compile time, set when hybrax is
imported.

XLA's CPU backend runs a program as a sequence of kernels ("thunks"), one call per
fused operation, and a `while` loop as a thunk that calls its body's thunks once per
iteration. A diffrax solve is such a loop around a few hundred small operations, so
the calls, not the arithmetic, set its cost. XLA compiles a loop whose buffers are
smaller than `xla_cpu_small_while_loop_byte_threshold` (1024 bytes by default) into
one kernel instead, unless the loop holds an operation that XLA hands to a library:
a LAPACK call, or a YNNPACK fusion (the `xla_cpu_experimental_ynn_fusion_type`
rewrites of dots, such as the constrained form's stage products under `jacfwd`).

Compile time is XLA's too: its HLO passes, and the LLVM code of each fused
operation. XLA's classic emitters of loop fusions produce that code faster than its
newer fusion emitters (the default), for programs that run as fast.

On import hybrax adds to `XLA_FLAGS`, each only where `XLA_FLAGS` does not set it
already (a user's own setting is kept as it is):

- `--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000000`
  (the limit raised to 1 GB; added unless `xla_backend_extra_options` is set);
- `--xla_cpu_experimental_ynn_fusion_type=` (no YNNPACK fusions: dots go to XLA's
  own emitters, as before YNNPACK, which jaxlib enables by default from 0.10.2;
  added unless that option is set, and only with jaxlib 0.10.1 or later, whose XLA
  knows the option: XLA stops the process on a flag it does not know);
- `--xla_cpu_use_fusion_emitters=false` (the classic emitters; only with jaxlib
  0.8 to 0.10, whose XLA has the option: a later XLA may drop it).

On the hopper (one orbit with its Floquet analysis under `jax.jit`,
`experiments/bench_orbit.py`) the raised limit makes the minimal form's orbit
several times faster at the same compile time and the same multipliers to the last
digit; the constrained form's loops become one kernel only with the YNNPACK fusions
off too, since its stage loops hold them. The classic emitters compile the orbit
faster, at the same warm time and multipliers. The figures are in the
documentation's performance page ("Figures behind the defaults").

This is the one change that importing hybrax makes to the process (no
`jax.config` option, no other variable); `HYBRAX_XLA_CPU_OPTIONS=0` in the
environment opts out of it. XLA reads `XLA_FLAGS` once, when JAX first starts a
backend: the options apply when
`hybrax` is imported before the first JAX computation of the process (as the
command line does), and change nothing afterwards. They concern the CPU backend
only. To keep XLA's defaults, set the options yourself: e.g.
`--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024` (XLA's
default limit) in `XLA_FLAGS`, `--xla_cpu_experimental_ynn_fusion_type=` with the
fusion types you want, and `--xla_cpu_use_fusion_emitters=true`.
"""

import importlib.metadata
import os
import re


SMALL_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"
SMALL_LOOP_BYTES = 1_000_000_000
SMALL_LOOP_FLAG = f"--xla_backend_extra_options={SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}"
NO_YNN_FUSION_FLAG = "--xla_cpu_experimental_ynn_fusion_type="
CLASSIC_EMITTERS_FLAG = "--xla_cpu_use_fusion_emitters=false"
#: The environment variable that, set to `0`, keeps `XLA_FLAGS` as it is.
OPT_OUT = "HYBRAX_XLA_CPU_OPTIONS"


def configure_xla_cpu() -> list[str]:
    """Add the raised small-loop limit, the YNNPACK fusions' switch-off and the
    classic fusion emitters to `XLA_FLAGS`, each unless `XLA_FLAGS` sets its
    option already and only for a jaxlib whose XLA knows it; returns the flags
    added. Nothing where `HYBRAX_XLA_CPU_OPTIONS=0` (the opt-out)."""
    if os.environ.get(OPT_OUT) == "0":
        return []
    flags = os.environ.get("XLA_FLAGS", "")
    jaxlib = _jaxlib_version()
    options = [("xla_backend_extra_options", SMALL_LOOP_FLAG)]
    if jaxlib >= (0, 10, 1):
        options.append(("xla_cpu_experimental_ynn_fusion_type", NO_YNN_FUSION_FLAG))
    if (0, 8) <= jaxlib < (0, 11):
        options.append(("xla_cpu_use_fusion_emitters", CLASSIC_EMITTERS_FLAG))
    added = [flag for option, flag in options if option not in flags]
    if added:
        os.environ["XLA_FLAGS"] = " ".join([flags, *added]).strip()
    return added


def _jaxlib_version() -> tuple[int, ...]:
    """The installed jaxlib's version as integers (`(0,)` when unknown), read from
    its metadata without importing it."""
    try:
        version = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return (0,)
    parts = []
    for part in version.split(".")[:3]:
        leading = re.match(r"\d+", part)
        if leading is None:
            break
        parts.append(int(leading.group()))
    return tuple(parts) or (0,)
