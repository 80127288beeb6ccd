"""A sweep over two `jax.distributed` processes (coordinator on 127.0.0.1, CPU
collectives) equals the single-process sweep, and both equal the closed-form gait
of the rimless wheel: the README's multi-host recipe, run for real."""

import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

import hybrax as hx
from hybrax.models import rimless_wheel


HERE = pathlib.Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_solve_one_sweep(tmp_path):
    from sweep_case import batch, guess, section, slopes, system

    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
    workers = [
        subprocess.Popen(
            [sys.executable, str(HERE / "distributed_worker.py"), str(port), str(i)]
            + [str(tmp_path / f"process{i}.npz")],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    single = hx.sweep_orbits(system, section, guess, batch)
    for worker in workers:
        output, _ = worker.communicate(timeout=300)
        assert worker.returncode == 0, output[-3000:]

    omega = np.asarray(rimless_wheel.fixed_point(batch))
    np.testing.assert_allclose(np.asarray(single.orbit.u)[:, 0], omega, rtol=1e-9)
    assert np.all(hx.status_code(single.result) == 0)
    for i in range(2):
        with np.load(tmp_path / f"process{i}.npz") as npz:
            part = dict(npz)
        # Every process ends with the whole table, in order.
        assert part["u"].shape == (slopes.size, 1)
        np.testing.assert_allclose(part["u"], np.asarray(single.orbit.u), rtol=1e-12)
        np.testing.assert_allclose(
            part["multipliers"], np.asarray(single.multipliers), rtol=1e-10
        )
        np.testing.assert_array_equal(part["status"], hx.status_code(single.result))
