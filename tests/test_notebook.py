"""The tutorial notebook runs top to bottom with the public API."""

import pathlib

import pytest

from helpers import run_notebook


NOTEBOOK = pathlib.Path(__file__).parents[1] / "notebooks" / "hopper_tutorial.ipynb"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tutorial_executes(tmp_path, monkeypatch):
    outputs, errors = run_notebook(NOTEBOOK, tmp_path, monkeypatch)
    assert not errors
    assert "converged: True" in outputs
    assert "folds at D_G" in outputs
