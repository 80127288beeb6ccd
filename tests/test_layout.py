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
