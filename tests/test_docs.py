"""The documentation's code runs as written: the tutorial's Python blocks, in
order, in one namespace (each block's own checks compare with closed forms,
central differences and the second route to the multipliers)."""

import pathlib
import re

import pytest


PAGES = pathlib.Path(__file__).parent.parent / "docs" / "pages"


def _python_blocks(page: pathlib.Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)


@pytest.mark.slow  # it compiles a new model's orbit, gradient and sweep (~2 min)
def test_the_own_model_tutorial_runs(capsys):
    blocks = _python_blocks(PAGES / "tutorials" / "own-model.md")
    assert len(blocks) >= 8
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "own-model.md", "exec"), namespace)
    assert namespace["orbit"].converged
    assert "successful" in capsys.readouterr().out
