"""The documentation's code runs as written: each page's Python blocks
(` ```python `; ` ```py ` marks an illustration, such as a multi-host recipe),
in order, in one namespace per page (the tutorial's own checks compare with
closed forms, central differences and the second route to the multipliers);
and the concepts page explains every status."""

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
    assert namespace["orbit"].succeeded
    assert "successful" in capsys.readouterr().out


# Pages whose code runs after another's, in its namespace (the gradients page
# continues the getting-started example).
_AFTER = {"how-to/gradients.md": "getting-started.md"}


# The pages whose code the next test runs (the tutorial's runs above).
_RUN_PAGES = (
    "getting-started.md",
    "how-to/orbit.md",
    "how-to/continuation.md",
    "how-to/sweep.md",
    "how-to/basin.md",
    "how-to/gradients.md",
    "how-to/command-line-model.md",
)


@pytest.mark.slow  # the hopper's simulation, orbits, branch, gradient, sweep
@pytest.mark.parametrize("page", _RUN_PAGES)
def test_the_how_to_pages_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (a page may save a file)
    namespace: dict = {}
    pages = [_AFTER[page], page] if page in _AFTER else [page]
    for name in pages:
        for block in _python_blocks(PAGES / name):
            exec(compile(block, name, "exec"), namespace)


def test_every_page_block_is_python_or_marked_illustration():
    """A page's ` ```python ` blocks are the ones the tests run: every page with
    code is in the runs above or the tutorial's."""
    ran = {"tutorials/own-model.md", *_RUN_PAGES}
    with_code = {
        str(path.relative_to(PAGES))
        for path in PAGES.rglob("*.md")
        if _python_blocks(path)
    }
    assert with_code <= ran, with_code - ran


def test_the_concepts_page_explains_every_status():
    """Every status, and no other name: the page may also explain statuses that
    the installed diffrax, optimistix and lineax do not define (older versions
    name fewer)."""
    from hybrax._solution import _CANDIDATE_NAMES, STATUS_NAMES

    text = (PAGES / "concepts.md").read_text()
    rows = set(re.findall(r"^\| `(\w+)` \|", text, re.M))
    assert set(STATUS_NAMES) <= rows <= set(_CANDIDATE_NAMES), rows ^ set(STATUS_NAMES)


def test_the_gallery_shows_every_model_as_its_bundle_says():
    """The gallery (written by `docs/gallery.py`) has a section for every model of
    the zoo, whose parameter table lists exactly the bundle's parameters with their
    units and defaults, and whose figure is there."""
    from hybrax._cli.common import model_record
    from hybrax._registry import REGISTRY, get_model

    text = (PAGES / "gallery.md").read_text()
    sections = dict(re.findall(r"^## (\S+)\n(.*?)(?=^## |\Z)", text, re.S | re.M))
    assert set(sections) == set(REGISTRY)
    for name, body in sections.items():
        record = model_record(get_model(name))
        rows = re.findall(r"^\| `(\w+)` \| ([^|]*) \| [^|]* \| ([^|]*) \|$", body, re.M)
        assert [row[0] for row in rows] == list(record["parameters"]), name
        for parameter, unit, default in rows:
            expected = record["parameters"][parameter]
            assert unit.strip() == expected["unit"], (name, parameter)
            if expected["default"] is None:
                assert default.strip() == "", (name, parameter)
            else:
                assert float(default) == pytest.approx(expected["default"], rel=1e-5)
        figure = re.search(r"\]\((images/gallery/[\w-]+\.png)\)", body)
        assert figure and (PAGES / figure.group(1)).is_file(), name


def test_the_command_reference_is_the_parsers_help():
    """`command-reference.md` is what `docs/command_reference.py` writes from the
    command line's parser now: every command and option, none stale (run the
    script again after changing an option)."""
    import importlib.util

    from hybrax import _registry

    _registry.plugin_models.cache_clear()  # the zoo's models only, as committed
    path = PAGES.parent / "command_reference.py"
    spec = importlib.util.spec_from_file_location("command_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.page()
    assert (PAGES / "command-reference.md").read_text() == expected
    for command in ("models", "simulate", "orbit", "continue", "sweep", "tune"):
        assert f"## hybrax {command}\n" in expected
    assert "--animation {gif,mp4}" in expected and "--tol TOL" in expected


def test_every_public_name_has_an_api_entry():
    """Each name that `hybrax` exports has its `::: hybrax.NAME` entry on an API
    page, so that a docstring's cross-reference to it resolves (the site's strict
    build, in `.ci/run`, fails on one that does not)."""
    import hybrax

    text = "".join(path.read_text() for path in (PAGES / "api").glob("*.md"))
    entries = set(re.findall(r"^::: hybrax\.(\w+)$", text, re.M))
    missing = set(hybrax.__all__) - {"models", "plot"} - entries
    assert not missing, sorted(missing)
