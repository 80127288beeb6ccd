"""One process of the two-process sweep in `test_distributed.py`: the README's
multi-host recipe, run as written, on CPU with the coordinator on localhost.

Usage: `python distributed_worker.py PORT PROCESS_ID OUT.npz`.
"""

import sys

import jax


port, process_id, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id
)
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import hybrax as hx  # noqa: E402
from sweep_case import batch, guess, section, system  # noqa: E402


assert jax.process_count() == 2 and jax.process_index() == process_id
result = hx.sweep_orbits(
    system, section, guess, batch, sweep_settings=hx.SweepSettings(distributed=True)
)
np.savez(
    out,
    u=np.asarray(result.orbit.u),
    multipliers=np.asarray(result.multipliers),
    status=hx.status_code(result.result),
)
