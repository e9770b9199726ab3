"""The simulator's modules stand in a line: none imports another's private
(underscore) names, and no two import each other, directly or around a loop."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import kaisched

ROOT = Path(kaisched.__file__).resolve().parent
ROOMS = ("sim", "tools")


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every `from kaisched... import ...` in the file, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kaisched"):
            out.append((node.module, [a.name for a in node.names]))
    return out


def _modules() -> dict[str, Path]:
    return {f"kaisched.{room}.{p.stem}": p for room in ROOMS
            for p in sorted((ROOT / room).glob("*.py")) if p.stem != "__init__"}


def test_no_private_name_is_imported_across_modules() -> None:
    crossings = [f"{name} imports {module}.{imported}"
                 for name, path in _modules().items()
                 for module, names in _imports(path) for imported in names
                 if imported.startswith("_") and module != name]
    assert crossings == []


def test_the_simulator_modules_import_no_cycle() -> None:
    graph = nx.DiGraph()
    modules = _modules()
    for name, path in modules.items():
        graph.add_node(name)
        for module, _ in _imports(path):
            if module in modules and module != name:
                graph.add_edge(name, module)
    assert list(nx.simple_cycles(graph)) == []
    # The loader and the generator share their field checks through a module of their own.
    assert graph.has_edge("kaisched.sim.scenario", "kaisched.sim.generator")
    assert graph.has_edge("kaisched.sim.generator", "kaisched.sim.fields")
