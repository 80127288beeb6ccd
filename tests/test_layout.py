"""The package's layout: no private name is imported across subpackages (a
subpackage uses another's public names only), and every import resolves."""

import ast
import importlib
import pathlib

import hybrax


ROOT = pathlib.Path(hybrax.__file__).parent


def _package_of(path: pathlib.Path) -> tuple[str, ...]:
    return ("hybrax", *path.relative_to(ROOT).parent.parts)


def _imports(path: pathlib.Path):
    """`(module, names, line)` of each relative `from ... import ...` of a file,
    the module resolved to its dotted name."""
    package = _package_of(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module, [alias.name for alias in node.names], node.lineno


def test_no_private_name_crosses_a_subpackage():
    crossing = []
    for path in ROOT.rglob("*.py"):
        package = ".".join(_package_of(path))
        for module, names, line in _imports(path):
            target = module if _is_package(module) else module.rpartition(".")[0]
            if target == package:
                continue
            for name in names:
                if name.startswith("_"):
                    where = path.relative_to(ROOT.parent)
                    crossing.append(f"{where}:{line}: {name} from {module}")
    assert not crossing, crossing


def _is_package(module: str) -> bool:
    return hasattr(importlib.import_module(module), "__path__")


def test_every_result_reads_the_same_way():
    """Every result is an equinox Module that carries its outcome as a `RESULTS`
    member (`result`; the batched sweep's is its orbits') and says `succeeded`;
    no result keeps a second status convention (`status`, `converged`)."""
    import dataclasses

    import equinox as eqx

    for cls in (
        hybrax.HybridSolution,
        hybrax.PeriodicOrbit,
        hybrax.Branch,
        hybrax.SolutionBranch,
        hybrax.SpecialPoint,
        hybrax.Homotopy,
        hybrax.TuneResult,
        hybrax.TuneStep,
        hybrax.OrbitSweep,
        hybrax.Basin,
    ):
        assert issubclass(cls, eqx.Module), cls
        fields = {f.name for f in dataclasses.fields(cls)}
        assert "status" not in fields and not hasattr(cls, "converged"), cls
        if cls is hybrax.SpecialPoint:
            continue  # a point of a branch: its branch has the outcome
        if cls is hybrax.TuneStep:
            assert "result" in fields
            continue  # a record of one evaluation, not an outcome
        assert isinstance(getattr(cls, "succeeded", None), property), cls
        assert "result" in fields or isinstance(cls.result, property), cls


def _module_name(path: pathlib.Path) -> str:
    parts = _package_of(path)
    return ".".join(parts if path.name == "__init__.py" else (*parts, path.stem))


def _runtime_imports(path: pathlib.Path):
    """The relative imports of a file that run (at import or in a function):
    those under `if TYPE_CHECKING:` are annotations only and left out."""
    tree = ast.parse(path.read_text())
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for child in ast.walk(node))
    package = _package_of(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level and id(node) not in skipped:
            base = package[: len(package) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module, [alias.name for alias in node.names]


def test_no_module_imports_in_a_circle():
    """The modules' import graph (every import that runs, at import time or in a
    function; a package's `__init__` only re-exports and is left out) has no
    circle: the hopper's model module imported its presentation, which imported
    the model back."""
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    packages = {name for name, p in paths.items() if p.name == "__init__.py"}
    graph = {name: set() for name in paths if name not in packages}
    for name in graph:
        for module, names in _runtime_imports(paths[name]):
            for alias in names:
                target = f"{module}.{alias}"
                target = target if target in paths else module
                if target in graph and target != name:
                    graph[name].add(target)
    # Depth-first search for a back edge, reporting the circle it closes.
    state, trail, circles = {}, [], []

    def visit(node):
        state[node] = "open"
        trail.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                circles.append(trail[trail.index(target) :] + [target])
            elif target not in state:
                visit(target)
        trail.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not circles, "\n".join(" -> ".join(c) for c in circles)
