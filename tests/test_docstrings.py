"""Every public function of hybrax documents its parameters and its return value
in the equinox style of `hybrax.simulate` (a `**Arguments:**` list with a
bullet `` - `name`: ... `` per parameter, several names sharing one bullet as in
`` - `rtol`, `atol`: ... ``, then `**Returns:** ...`), and the examples of the
docstrings are code that runs: every name of hybrax they use exists and takes
the keywords given, and the examples run (the cheap ones in the fast set).

The public names are `hybrax.__all__`: its functions, the `__init__`/`__call__`
of its classes where they carry a docstring of their own, the constructors of
the classes whose docstring has an Arguments list, and for the examples also the
methods and properties of its classes and the functions of the model zoo
(`hybrax.models`). As on the documentation's pages (tests/test_docs.py), a
` ```python ` block is code that runs and a ` ```py ` block an illustration (such
as a multi-host recipe) whose names are checked but which is not run."""

import ast
import dataclasses
import importlib
import inspect
import io
import pkgutil
import re
import textwrap
import tokenize
import types

import numpy as np
import pytest

import hybrax


# --- the public callables and their docstrings ---------------------------------


def _documented_functions():
    """`(qualified name, function)` of every public function, and of the
    `__init__`/`__call__` of a public class written with a docstring of its own
    (a dataclass's generated `__init__` has none)."""
    for name in hybrax.__all__:
        obj = getattr(hybrax, name)
        if inspect.isclass(obj):
            for method in ("__init__", "__call__"):
                function = obj.__dict__.get(method)
                if inspect.isfunction(function) and _own_doc(function):
                    yield f"{name}.{method}", function
        elif inspect.isfunction(obj):
            yield name, obj


def _own_doc(function) -> bool:
    doc = function.__doc__
    return bool(doc) and not doc.startswith("Initialize self.")


def _classes_with_arguments():
    """`(name, class)` of the public classes whose docstring lists the arguments
    of their constructor."""
    for name in hybrax.__all__:
        obj = getattr(hybrax, name)
        if inspect.isclass(obj) and "**Arguments:**" in (inspect.getdoc(obj) or ""):
            yield name, obj


FUNCTIONS = dict(_documented_functions())
CLASSES = dict(_classes_with_arguments())


def _section(doc: str, title: str) -> str | None:
    """The text of a `**title:**` section, up to the next bold section heading,
    admonition or the end."""
    found = re.search(
        rf"^\*\*{title}:\*\*(.*?)(?=^\*\*\w[^*\n]*:\*\*|^!!! |\Z)", doc, re.S | re.M
    )
    return None if found is None else found.group(1)


def _argument_names(doc: str) -> set[str]:
    """The names that head a bullet of the Arguments list: `` - `a`: `` or
    `` - `a`, `b`: `` (top-level bullets only)."""
    section = _section(doc, "Arguments")
    if section is None:
        return set()
    heads = re.findall(r"^- ((?:`[^`]+`(?:,| and| or)?\s*)+):", section, re.M)
    return {name for head in heads for name in re.findall(r"`([^`]+)`", head)}


def _described_parameters(signature: inspect.Signature) -> list[str]:
    return [
        parameter.name
        for parameter in signature.parameters.values()
        if parameter.name not in ("self", "cls")
        and parameter.kind
        not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def _returns_value(function) -> bool:
    """Whether the function returns something: by its annotation, or without one
    by a `return <value>` or `yield` of its own body (not of nested functions)."""
    annotation = inspect.signature(function).return_annotation
    if annotation in (None, "None", type(None)):
        return False
    if annotation is not inspect.Signature.empty:
        return annotation not in ("NoReturn", "Never")
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(function)))
    definition = ast.parse(source).body[0]

    def own_nodes(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(
                child,
                ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef,
            ):
                continue
            yield child
            yield from own_nodes(child)

    return any(
        isinstance(node, ast.Yield | ast.YieldFrom)
        or (
            isinstance(node, ast.Return)
            and node.value is not None
            and not (isinstance(node.value, ast.Constant) and node.value.value is None)
        )
        for node in own_nodes(definition)
    )


def test_the_checked_names_are_found():
    """The lists below are not empty by accident (a lazy export that fails to
    import would shrink them)."""
    assert len(FUNCTIONS) > 45
    assert "simulate" in FUNCTIONS and "AbstractReset.__call__" in FUNCTIONS
    assert {"Settings", "Transition", "ContinuationSettings"} <= set(CLASSES)


def test_the_argument_list_parser():
    doc = inspect.cleandoc(
        """Summary.

        **Arguments:**

        - `a`: one.
        - `b`, `c`: two, with
          - `not_a_parameter`: a nested bullet.
        - `d` and `e`: two more.

        **Returns:** nothing much.

        - `f`: after the list.
        """
    )
    assert _argument_names(doc) == {"a", "b", "c", "d", "e"}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_parameter_is_documented(name):
    function = FUNCTIONS[name]
    doc = inspect.getdoc(function) or ""
    parameters = _described_parameters(inspect.signature(function))
    missing = [p for p in parameters if p not in _argument_names(doc)]
    assert not missing, f"{name}: no `- `name`:` bullet for {missing}"


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_every_returned_value_is_documented(name):
    function = FUNCTIONS[name]
    if _returns_value(function):
        assert "**Returns:**" in (inspect.getdoc(function) or ""), name


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_constructor_argument_is_documented(name):
    cls = CLASSES[name]
    parameters = _described_parameters(inspect.signature(cls))
    missing = [p for p in parameters if p not in _argument_names(inspect.getdoc(cls))]
    assert not missing, f"{name}: no `- `name`:` bullet for {missing}"


# --- the examples ----------------------------------------------------------------


def _model_modules():
    import hybrax.models as models

    yield models
    for info in pkgutil.walk_packages(models.__path__, "hybrax.models."):
        if not info.name.rsplit(".", 1)[-1].startswith("_"):
            yield importlib.import_module(info.name)


def _documented_objects():
    """`(qualified name, object)` of everything whose docstring may hold an
    example: the public names, their classes' methods and properties, and the
    public functions and classes of the model zoo."""
    for name in hybrax.__all__:
        obj = getattr(hybrax, name)
        if isinstance(obj, types.ModuleType):
            continue
        yield name, obj
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if member.startswith("_") and member not in ("__init__", "__call__"):
                    continue
                if isinstance(value, staticmethod | classmethod):
                    value = value.__func__
                if inspect.isfunction(value) or isinstance(value, property):
                    yield f"{name}.{member}", value
    for module in _model_modules():
        yield module.__name__, module
        for member, value in vars(module).items():
            if member.startswith("_"):
                continue
            if (
                inspect.isfunction(value) or inspect.isclass(value)
            ) and value.__module__ == module.__name__:
                yield f"{module.__name__}.{member}", value


_FENCE = re.compile(r"^[ \t]*```(py|python)[ \t]*\n(.*?)^[ \t]*```", re.S | re.M)


def _examples() -> list[tuple[str, str, str]]:
    """`(owner, language, code)` of every fenced example and `>>>` session."""
    found = []
    for owner, obj in _documented_objects():
        doc = obj.__doc__ if isinstance(obj.__doc__, str) else None
        if not doc:
            continue
        doc = inspect.cleandoc(doc)
        for language, code in _FENCE.findall(doc):
            found.append((owner, language, textwrap.dedent(code)))
        session = [
            line.strip()[4:]
            for line in doc.splitlines()
            if line.strip().startswith((">>> ", "... "))
        ]
        if session:
            found.append((owner, "python", "\n".join(session)))
    return found


EXAMPLES = _examples()
_REFERENCE = re.compile(r"(?<![\w.])(hx|hybrax|models)((?:\.\w+)+)")


def _resolve(dotted: str):
    """The object called `dotted` (`hx.`, `hybrax.` or `models.` then
    attributes); a dataclass field without a default resolves to its field.
    Raises `AttributeError` naming the first missing part."""
    head, *parts = dotted.split(".")
    obj = hybrax.models if head == "models" else hybrax
    for k, part in enumerate(parts):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        if isinstance(obj, types.ModuleType):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
                continue
            except ModuleNotFoundError:
                pass
        fields = getattr(obj, "__dataclass_fields__", {})
        if part in fields:
            obj = fields[part]
            continue
        raise AttributeError(f"{'.'.join([head, *parts[: k + 1]])} does not exist")
    return obj


def _example_id(example) -> str:
    owner = example[0]
    same = [e for e in EXAMPLES if e[0] == owner]
    return owner if len(same) == 1 else f"{owner}-{same.index(example)}"


def test_the_examples_are_found():
    owners = {owner for owner, *_ in EXAMPLES}
    assert {"continue_orbits", "continue_to_params", "tune", "sweep"} <= owners


@pytest.mark.parametrize("example", EXAMPLES, ids=_example_id)
def test_every_name_an_example_uses_exists(example):
    """Every `hx.`/`hybrax.`/`models.` name exists, and a call of a hybrax
    function or class passes only keywords that it takes."""
    owner, _, code = example
    tree = ast.parse(code)  # the example is valid Python
    for match in _REFERENCE.finditer(code):
        _resolve(match.group(0))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        dotted = ast.unparse(node.func)
        if not _REFERENCE.fullmatch(dotted):
            continue
        target = _resolve(dotted)
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            continue
        if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            continue
        for keyword in node.keywords:
            if keyword.arg is not None:
                assert keyword.arg in signature.parameters, (
                    f"{owner}: {dotted}() takes no keyword `{keyword.arg}`"
                )


def _namespace() -> dict:
    """What every example may take as imported."""
    import jax
    import jax.numpy as jnp

    return {
        "dataclasses": dataclasses,
        "hybrax": hybrax,
        "hx": hybrax,
        "jax": jax,
        "jnp": jnp,
        "np": np,
        "models": hybrax.models,
    }


# What an example takes from its surroundings (the prose before it, or the
# example it continues).
_LOGISTIC = """
def logistic(x, r, args):
    return r * x * (1 - x)
"""
_HOPPER = """
system, section = models.hopper.minimal()[0], models.hopper.section()
params = models.hopper.make_params()
guess = models.hopper.orbit_guess(params)
"""
_CONTEXT = {
    "Interrupted": _HOPPER
    + "batch = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), params)\n",
    "save": _HOPPER,
    "hybrax.models.hopper_figures.phase_portraits": _HOPPER
    + "x0 = models.hopper.default_state(params)\n",
    "hybrax.models.hopper_figures.orbit_figure": _HOPPER
    + "orbit = hybrax.find_periodic_orbit(system, section, guess, params)\n",
}

# The examples that run in a second or two (the others compile an orbit, a branch
# or a tuning run: the slow set).
_CHEAP = {
    "FieldParameter",
    "LagrangianModel",
    "PoincareSection",
    "continue_fixed_points",
    "continue_bifurcation_curve",
    "parameter_field",
    "sweep",
}


def _claims(code: str) -> list[tuple[str, list[float], float]]:
    """The values an example states in a comment after an expression, as in
    `branch.period_doublings[0].parameter  # 1 + sqrt(6) = 3.449490`:
    `(expression, numbers, tolerance)`, the numbers after the last `=` of the
    comment (one, or a `[...]` list), the tolerance one unit of their last
    printed digit. Comments of other kinds (a shape, words) state nothing."""
    comments = {
        token.start[0]: token.string
        for token in tokenize.generate_tokens(io.StringIO(code).readline)
        if token.type == tokenize.COMMENT
    }
    number = r"-?\d+(?:\.(\d+))?"
    claims = []
    for node in ast.parse(code).body:
        comment = comments.get(node.end_lineno)
        if not isinstance(node, ast.Expr) or comment is None:
            continue
        stated = comment.lstrip("# ").rsplit("=", 1)[-1].strip()
        if not re.fullmatch(rf"{number}|\[{number}(?:, {number})*\]", stated):
            continue
        decimals = max(len(d) for d in re.findall(number, stated))
        values = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", stated)]
        claims.append((ast.unparse(node.value), values, 10.0**-decimals))
    return claims


def test_the_claim_parser():
    code = (
        "a  # 3.0\n"
        "b  # 1 + sqrt(6) = 3.449490\n"
        "[c, d]  # [-0.035439, -0.023735]\n"
        "e  # (10000,)\n"
        "f  # the same arrays\n"
        "g = 1  # 2\n"
    )
    assert _claims(code) == [
        ("a", [3.0], 0.1),
        ("b", [3.44949], 1e-6),
        ("[c, d]", [-0.035439, -0.023735], 1e-6),
    ]


def _run(example, tmp_path, monkeypatch):
    """Run an example in its context, and check the values it states."""
    owner, _, code = example
    monkeypatch.chdir(tmp_path)  # (an example may save a file)
    namespace = _namespace()
    exec(compile(_CONTEXT.get(owner, ""), f"{owner} (context)", "exec"), namespace)
    exec(compile(code, f"{owner} (example)", "exec"), namespace)
    for expression, values, tolerance in _claims(code):
        got = np.atleast_1d(np.asarray(eval(expression, namespace), dtype=float))
        assert got.shape == (len(values),), (owner, expression, got)
        np.testing.assert_allclose(got, values, rtol=0, atol=tolerance, err_msg=owner)


_RUNNABLE = [example for example in EXAMPLES if example[1] == "python"]


@pytest.mark.parametrize(
    "example",
    [example for example in _RUNNABLE if example[0] in _CHEAP],
    ids=_example_id,
)
def test_the_cheap_examples_run(example, tmp_path, monkeypatch):
    _run(example, tmp_path, monkeypatch)


@pytest.mark.slow  # orbits, a branch, a homotopy, a tuning run (minutes)
@pytest.mark.parametrize(
    "example",
    [example for example in _RUNNABLE if example[0] not in _CHEAP],
    ids=_example_id,
)
def test_the_expensive_examples_run(example, tmp_path, monkeypatch):
    _run(example, tmp_path, monkeypatch)


def test_the_cheap_and_context_lists_name_examples():
    owners = {owner for owner, language, _ in EXAMPLES if language == "python"}
    assert _CHEAP <= owners, _CHEAP - owners
    assert set(_CONTEXT) <= owners, set(_CONTEXT) - owners


# --- the references ----------------------------------------------------------------


def test_every_equation_number_names_its_paper():
    """A docstring that cites an equation by number ("eq. 36") names the paper
    with its year ("Zana et al. 2018, eq. 36"): read alone, in the reference
    pages or `help()`, a bare number points nowhere."""
    unnamed = [
        owner
        for owner, obj in _documented_objects()
        if isinstance(obj.__doc__, str)
        and re.search(r"\beqs?\.\s*\(?\d", obj.__doc__)
        and not re.search(r"\b(?:19|20)\d\d\b", obj.__doc__)
    ]
    assert not unnamed, unnamed
