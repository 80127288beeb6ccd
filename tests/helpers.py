"""Shared test helpers: finite differences, tolerances, running the command line."""

import contextlib
import io

import numpy as np


# Tolerances, set once (see the style guide).
SOLVER_TOL = 1e-10
ORACLE_TOL = 1e-8
MULTIPLIER_TOL = 1e-6
FD_RTOL = 1e-5


def central_jacobian(fn, x, h=1e-6):
    """Central finite-difference Jacobian of `fn` at `x` (NumPy in, NumPy out)."""
    x = np.asarray(x, dtype=float)
    f0 = np.asarray(fn(x))
    J = np.zeros(f0.shape + x.shape)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        J[..., i] = (np.asarray(fn(x + e)) - np.asarray(fn(x - e))) / (2 * h)
    return J


def run_notebook(path, tmp_path, monkeypatch, **environment):
    """Execute a notebook in a fresh kernel (working directory `tmp_path`, the
    suite's compilation cache, `environment` set), and return its printed text and
    its error outputs."""
    import os

    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    cache = os.environ.get("HYBRAX_TEST_CACHE", ".jax_cache")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", os.path.abspath(cache))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    outputs = [
        out
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    ]
    text = "".join(out.get("text", "") for out in outputs)
    return text, [out for out in outputs if out.get("output_type") == "error"]


def assert_same_result(first, second):
    """Two results with the same PyTree structure (classes, static fields,
    statuses) and bit-equal leaves of the same dtypes (NaN where NaN)."""
    import jax.tree_util as jtu

    leaves, structure = jtu.tree_flatten(first)
    again, structure_again = jtu.tree_flatten(second)
    # As text: static parts may hold objects compared by identity (a branch's
    # special points), whose printed fields must agree.
    assert str(structure) == str(structure_again)
    for a, b in zip(leaves, again):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


def run_cli(argv):
    """`hybrax ARGV` in this process: `(exit code, stdout, stderr)` (a usage
    error's `SystemExit` as its code)."""
    from hybrax._cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code
    return code, stdout.getvalue(), stderr.getvalue()


def interrupt_command(argv, started, env=None, after_s=1.0, wait_s=240.0, exit_s=60.0):
    """Run `python -m hybrax *argv` in a process of its own, send it SIGINT
    `after_s` seconds after a line of its stderr starts with `started`, and
    return `(exit status, seconds from the signal to the exit, stderr lines)`.
    The process is killed, and its pipe closed, whatever happens."""
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    process = subprocess.Popen(
        [sys.executable, "-m", "hybrax", *argv],
        env=dict(os.environ, **(env or {})),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    seen = threading.Event()

    def read():
        for line in process.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith(started):
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(wait_s), lines
        time.sleep(after_s)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=exit_s)
        waited = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(5)
        process.stderr.close()
    return code, waited, lines


def run_user_script(script, cache, timeout=900, **environment):
    """Run the Python file `script` in a fresh process as a user runs it (with
    the argument `cache`, JAX's cache directory left to the script, and
    `EQX_ON_ERROR=nan` as the compilation how-to says, `environment` set), and
    return the JSON of its last printed line."""
    import json
    import os
    import subprocess
    import sys

    env = {
        k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")
    }
    env.update(EQX_ON_ERROR="nan", **environment)
    done = subprocess.run(
        [sys.executable, str(script), str(cache)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
