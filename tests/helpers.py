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
