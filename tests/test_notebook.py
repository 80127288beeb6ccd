"""The tutorial notebook runs top to bottom with the public API."""

import os
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient


NOTEBOOK = pathlib.Path(__file__).parents[1] / "notebooks" / "hopper_tutorial.ipynb"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tutorial_executes(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    env_cache = os.environ.get("HYBRAX_TEST_CACHE", ".jax_cache")
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.abspath(env_cache))
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    outputs = "".join(
        out.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
    )
    assert "converged: True" in outputs
    assert "folds at D_G" in outputs
    errors = [
        out
        for cell in notebook.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors
