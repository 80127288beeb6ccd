"""The tutorial notebooks run top to bottom with the public API."""

import pathlib
import re

import pytest

from helpers import run_notebook


NOTEBOOK = pathlib.Path(__file__).parents[1] / "notebooks" / "hopper_tutorial.ipynb"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tutorial_executes(tmp_path, monkeypatch):
    outputs, errors = run_notebook(NOTEBOOK, tmp_path, monkeypatch)
    assert not errors
    assert "converged: True" in outputs
    assert "folds at D_G" in outputs


BIPED_NOTEBOOK = pathlib.Path(__file__).parents[1] / "notebooks" / "biped_tuning.ipynb"


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_biped_tuning_notebook_executes(tmp_path, monkeypatch):
    """The biped tuning notebook runs top to bottom with the public API, on the
    test budget (the existence stage): from the falling start to a stable gait,
    and a disturbed 50-step walk coming back to it as its multipliers predict."""
    outputs, errors = run_notebook(
        BIPED_NOTEBOOK, tmp_path, monkeypatch, HYBRAX_NOTEBOOK_BUDGET="5"
    )
    assert not errors
    assert "armed_beyond_guard after 1 heel strike(s)" in outputs
    assert "stable: True" in outputs
    walk = re.search(
        r"successful 50 steps; .* ([0-9.e+-]+) after the first, ([0-9.e+-]+) after",
        outputs,
    )
    assert walk is not None
    assert float(walk.group(2)) < 1e-2 * float(walk.group(1))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_biped_tuning_notebook_at_its_full_budget(tmp_path, monkeypatch):
    """The biped tuning notebook as a reader runs it (its own budget): the tuned
    gait is stable and walks at 0.8 m/s to the 2% of its target."""
    outputs, errors = run_notebook(BIPED_NOTEBOOK, tmp_path, monkeypatch)
    assert not errors
    assert "stable: True" in outputs
    speed = re.search(r"speed: ([0-9.]+) m/s", outputs)
    assert speed is not None and abs(float(speed.group(1)) - 0.8) <= 0.016
