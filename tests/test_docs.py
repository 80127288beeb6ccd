"""The documentation's code runs as written, and prints what the page shows: each
page's Python blocks (` ```python `; ` ```py ` marks an illustration, such as a
multi-host recipe), in order, in one namespace per page (the tutorial's own checks
compare with closed forms, central differences and the second route to the
multipliers); and the concepts page explains every status.

A block that prints is followed on its page (after blank lines only) by its output,
a ` ```text title="Output" ` block. The tests compare it with what the block prints,
line by line: numbers (integers and floats, also in scientific notation) agree to
a relative 1e-6 (an absolute 1e-9 near zero); all other text must be the same
up to runs of spaces (NumPy's column padding), except that `...` in a shown line
stands for any text (wall-clock times, paths, values at the level of rounding
that vary from machine to machine, such as the two monodromies' discrepancy).
A block that prints without an output block, or an output block under a block
that prints nothing, fails with the page's name and the block's number (its place
among the page's Python blocks, from 1)."""

import contextlib
import io
import math
import pathlib
import re

import pytest


PAGES = pathlib.Path(__file__).parent.parent / "docs" / "pages"


# A Python block and, after blank lines only, its shown output.
_BLOCK = re.compile(
    r"^```python\n(?P<code>.*?)^```[ \t]*(?:\n|\Z)"
    r'(?:(?:[ \t]*\n)*^```text title="Output"\n(?P<output>.*?)^```[ \t]*$)?',
    re.S | re.M,
)


def _blocks(page: pathlib.Path) -> list[tuple[str, str | None]]:
    """The page's Python blocks, each with the output shown under it (or `None`)."""
    return [
        (match["code"], match["output"]) for match in _BLOCK.finditer(page.read_text())
    ]


def _python_blocks(page: pathlib.Path) -> list[str]:
    return [code for code, _ in _blocks(page)]


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def _text(piece: str) -> str:
    """The pattern of a shown line's text between numbers: itself, but any run
    of spaces matches any run, or none (NumPy pads an array's columns to its
    widest entry, which moves with the last digits)."""
    return r"\s*".join(re.escape(word) for word in re.split(r"\s+", piece))


def _line_matches(shown: str, printed: str) -> bool:
    """Whether a printed line is the shown one (the rule of the module's
    docstring)."""
    pattern, numbers = [], []
    for k, piece in enumerate(shown.rstrip().split("...")):
        if k:
            pattern.append(".*")
        end = 0
        for number in re.finditer(_NUMBER, piece):
            pattern += [_text(piece[end : number.start()]), f"({_NUMBER})"]
            numbers.append(float(number.group()))
            end = number.end()
        pattern.append(_text(piece[end:]))
    match = re.fullmatch("".join(pattern), printed.rstrip())
    return match is not None and all(
        math.isclose(float(value), number, rel_tol=1e-6, abs_tol=1e-9)
        for value, number in zip(match.groups(), numbers)
    )


def _check_output(where: str, printed: str, shown: str | None) -> None:
    if shown is None:
        assert not printed, f"{where} prints, but the page shows no output:\n{printed}"
        return
    assert printed, f"{where} prints nothing, but the page shows an output"
    lines, expected = printed.rstrip("\n").split("\n"), shown.rstrip("\n").split("\n")
    assert len(lines) == len(expected), (
        f"{where} prints {len(lines)} lines, the page shows {len(expected)}:\n{printed}"
    )
    for k, (line, shown_line) in enumerate(zip(lines, expected), 1):
        assert _line_matches(shown_line, line), (
            f"{where}, line {k}: the page shows\n{shown_line}\nthe block prints\n"
            f"{line}\n(all it prints:\n{printed})"
        )


def _run_page(name: str, namespace: dict) -> list[str]:
    """Run the page's Python blocks in `namespace`, each one's printed output
    checked against the output shown under it; returns what each printed."""
    outputs = []
    for k, (code, shown) in enumerate(_blocks(PAGES / name), 1):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, name, "exec"), namespace)
        _check_output(f"{name}, block {k}", printed.getvalue(), shown)
        outputs.append(printed.getvalue())
    return outputs


def test_the_output_comparison_rule():
    assert _line_matches("[0.25 -1.5e-03] ok", "[0.2500001 -0.0015] ok")
    assert not _line_matches("[0.25 -1.5e-03] ok", "[0.2501 -0.0015] ok")
    assert not _line_matches("0.25 ok", "0.25 OK")
    assert not _line_matches("0.25", "-0.25")
    assert _line_matches("3.0e-12", "8.1e-11")  # near zero: absolute 1e-9
    assert _line_matches("took ... s, 3 points", "took 12.5 s, 3.0 points")
    assert not _line_matches("took ... s, 3 points", "took 12.5 s, 4 points")
    # NumPy's padding follows the widest entry: spaces are not compared.
    assert _line_matches("[ 4.7e-01+0.j -4.3e-15+0.j]", "[0.47+0.j 0.+0.j]")
    assert not _line_matches("[0.47 ok]", "[0.47 no]")
    with pytest.raises(AssertionError, match="page.md, block 2 prints nothing"):
        _check_output("page.md, block 2", "", "1\n")
    with pytest.raises(
        AssertionError, match="page.md, block 2 prints, but the page shows no"
    ):
        _check_output("page.md, block 2", "1\n", None)
    with pytest.raises(AssertionError, match="prints 2 lines, the page shows 1"):
        _check_output("page.md, block 2", "1\n2\n", "1\n")


def test_every_output_block_follows_a_python_block():
    """An output block anywhere else would be compared with nothing."""
    for path in PAGES.rglob("*.md"):
        shown = path.read_text().count('```text title="Output"\n')
        assert shown == sum(output is not None for _, output in _blocks(path)), path


@pytest.mark.slow  # it compiles a new model's orbit, gradient and sweep (~2 min)
def test_the_own_model_tutorial_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # (it saves its figure)
    assert len(_python_blocks(PAGES / "tutorials" / "own-model.md")) >= 8
    namespace: dict = {}
    outputs = _run_page("tutorials/own-model.md", namespace)
    assert namespace["orbit"].succeeded
    assert "successful" in "".join(outputs)
    # Its last block draws the orbit, with units on every axis.
    axes = [ax for ax in namespace["fig"].axes if ax.get_visible()]
    assert axes
    for ax in axes:
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            assert re.search(r"\[.+\]", label), label
    assert (tmp_path / "own-model-orbit.png").is_file()


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
    "how-to/robustness.md",
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
        _run_page(name, namespace)


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
