"""The package's import structure, as tests/layers.rs checks the Rust crate's: every module imports on
its own, and no two of its modules import each other, directly or through others.

Imports are read with ``ast``. Two graphs are checked. At module level (what runs on ``import``), no
cycle at all, ``__init__`` included. With the imports inside functions added as well, no cycle
between the submodules either: a function-level import must not hide a cycle that a module-level
one would show. Leaving ``__init__`` out of that second graph allows a few function-level
``import ledgercache`` lines, each with a noqa comment saying why (a Spark task shipped to an
executor imports the package there). ``if TYPE_CHECKING:`` imports never run and are left out.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = "ledgercache"
ROOT = Path(__file__).resolve().parents[2] / "python" / PACKAGE
MODULES = sorted(p.stem for p in ROOT.glob("*.py"))
# The Rust extension: a module of the package with a stub, no source to read.
NATIVE = sorted(p.stem for p in ROOT.glob("*.pyi"))


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(node: ast.Import | ast.ImportFrom) -> set[str]:
    """The package's modules an import statement loads (``__init__`` for the package itself)."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        for alias in node.names:
            parts = alias.name.split(".")
            if parts[0] == PACKAGE:
                found.add(parts[1] if len(parts) > 1 else "__init__")
        return found
    if node.level > 1:
        raise AssertionError(f"line {node.lineno}: relative import beyond the package: {ast.unparse(node)}")
    if node.level == 1:
        base = node.module.split(".") if node.module else []
    elif node.module and node.module.split(".")[0] == PACKAGE:
        base = node.module.split(".")[1:]
    else:
        return found
    if base:
        found.add(base[0])
        return found
    for alias in node.names:  # `from . import x`: a module, or a name from __init__
        found.add(alias.name if alias.name in MODULES or alias.name in NATIVE else "__init__")
    return found


def _imports(module: str) -> tuple[set[str], set[str]]:
    """(imported at module level, imported anywhere), TYPE_CHECKING blocks left out."""
    tree = ast.parse((ROOT / f"{module}.py").read_text(), filename=f"{module}.py")
    top: set[str] = set()
    anywhere: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit_one(other, in_function)
                continue
            visit_one(child, in_function)

    def visit_one(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = _targets(node) - {module}
            anywhere.update(targets)
            if not in_function:
                top.update(targets)
            return
        nested = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        visit(node, nested)

    visit(tree, False)
    return top, anywhere


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle in ``graph`` as the list of its modules, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := walk(start)):
            return found
    return None


GRAPHS = {m: _imports(m) for m in MODULES}


def test_the_parser_sees_the_package():
    assert {"__init__", "workload", "broker_workload", "spark", "cli"} <= set(MODULES)
    # Sanity: edges the package is known to have, at module level and inside functions.
    assert "workload" in GRAPHS["broker_workload"][0]
    assert "workload" in GRAPHS["__init__"][0]
    assert "__init__" in GRAPHS["spark"][1] and "__init__" not in GRAPHS["spark"][0]


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports(module):
    name = PACKAGE if module == "__init__" else f"{PACKAGE}.{module}"
    assert importlib.import_module(name).__name__ == name


def test_no_module_level_import_cycle():
    graph = {m: top for m, (top, _) in GRAPHS.items()}
    assert _cycle(graph) is None, f"modules import each other at module level: {' -> '.join(_cycle(graph) or [])}"


def test_no_import_cycle_between_submodules_even_inside_functions():
    graph = {m: anywhere - {"__init__"} for m, (_, anywhere) in GRAPHS.items() if m != "__init__"}
    found = _cycle(graph)
    assert found is None, f"modules import each other (counting imports inside functions): {' -> '.join(found or [])}"


def test_workload_and_broker_workload_import_one_way():
    # The cycle this test was written for: workload.from_broker_stats imported broker_workload, which
    # imports workload. The stats-to-spec conversion now lives in workload.py.
    assert "workload" in GRAPHS["broker_workload"][1]
    assert "broker_workload" not in GRAPHS["workload"][1]
