"""The layer rules, checked by walking every import with
ast: decision code does no I/O and depends only downwards."""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("kaisched", "actions", "plugins", "podgrouper")

PURE = ("kaisched/api", "kaisched/framework", "actions", "plugins", "podgrouper/groupers")
NO_IO = ("kubernetes", "kaisched.cluster", "kaisched.cache", "kaisched.runtime",
         "kaisched.tools", "kaisched.bench", "kaisched.sim", "kaisched.cli", "threading", "socket",
         "requests", "urllib3", "concurrent", "subprocess")
KUBE_CLIENT = "kaisched/cluster/kube.py"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import, relative ones resolved; for
    `from a import b` both `a` and `a.b` are given (b may be a module)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            yield node.lineno, prefix
            for alias in node.names:
                yield node.lineno, f"{prefix}.{alias.name}"


def under(name: str, roots: tuple[str, ...]) -> str | None:
    return next((r for r in roots if name == r or name.startswith(r + ".")), None)


def python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders if (REPO / f).exists()
                  for p in ((REPO / f).rglob("*.py") if (REPO / f).is_dir() else [REPO / f])
                  if "__pycache__" not in p.parts)


def offences(folders: tuple[str, ...], forbidden: tuple[str, ...],
             exempt: tuple[str, ...] = ()) -> list[str]:
    found = []
    for path in python_files(*folders):
        rel = path.relative_to(REPO).as_posix()
        if rel in exempt:
            continue
        seen = set()
        for line, name in imports(path.read_text(encoding="utf-8"), module_name(path),
                                  path.name == "__init__.py"):
            root = under(name, forbidden)
            if root and (line, root) not in seen:
                seen.add((line, root))
                found.append(f"{rel}:{line} imports {name}")
    return found


RULES = [
    pytest.param(PURE, NO_IO, (), id="pure-layers-do-no-io"),
    pytest.param(("kaisched/api",), ("kaisched.framework", "actions", "plugins"), (),
                 id="api-is-the-bottom"),
    pytest.param(("kaisched/framework",), ("actions", "plugins"), (),
                 id="framework-below-actions-and-plugins"),
    pytest.param(PACKAGES, ("kubernetes",), (KUBE_CLIENT,), id="only-kube-py-imports-kubernetes"),
]


@pytest.mark.parametrize(("folders", "forbidden", "exempt"), RULES)
def test_layer_rule(folders: tuple[str, ...], forbidden: tuple[str, ...],
                    exempt: tuple[str, ...]) -> None:
    found = offences(folders, forbidden, exempt)
    assert not found, "layer rule broken:\n" + "\n".join(found)


def private_imports(folders: tuple[str, ...]) -> list[str]:
    """`from a import _b` across modules of the project: a private name is its
    module's own; what two modules share gets a public name and a home."""
    found = []
    for path in python_files(*folders):
        rel = path.relative_to(REPO).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{rel}:{node.lineno} imports {node.module}.{alias.name}")
    return found


def test_no_module_imports_another_s_private_name() -> None:
    found = private_imports(PACKAGES)
    assert not found, "private names imported:\n" + "\n".join(found)


def test_private_imports_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "bad.py").write_text(
        "from __future__ import annotations\nfrom kaisched.sim.scenario import (\n    _parse,\n)\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert private_imports(("plugins",)) == ["plugins/bad.py:2 imports kaisched.sim.scenario._parse"]


@pytest.mark.parametrize("folder", ["kaisched/api", "kaisched/framework", "actions", "plugins"])
def test_the_checked_layers_exist(folder: str) -> None:
    assert python_files(folder), f"{folder} has no Python files: the rules would check nothing"


# -- the walker itself -------------------------------------------------------------------

@pytest.mark.parametrize(("source", "module", "is_package", "expected"), [
    ("import threading", "kaisched.api.x", False, {"threading"}),
    ("import concurrent.futures as cf", "plugins.x", False, {"concurrent.futures"}),
    ("from kaisched import cluster", "actions.x", False, {"kaisched", "kaisched.cluster"}),
    ("from ..cache import convert", "kaisched.api.x", False,
     {"kaisched.cache", "kaisched.cache.convert"}),
    ("from . import node", "kaisched.api.x", False, {"kaisched.api", "kaisched.api.node"}),
    ("from .node import NodeInfo", "kaisched.api", True,
     {"kaisched.api.node", "kaisched.api.node.NodeInfo"}),
    ("def f():\n    import socket\n", "plugins.x", False, {"socket"}),
    ("if TYPE_CHECKING:\n    from kaisched.cli import main\n", "plugins.x", False,
     {"kaisched.cli", "kaisched.cli.main"}),
])
def test_walker_resolves_imports(source: str, module: str, is_package: bool,
                                 expected: set[str]) -> None:
    assert {name for _, name in imports(source, module, is_package)} == expected


@pytest.mark.parametrize(("name", "hit"), [
    ("kaisched.cluster", "kaisched.cluster"),
    ("kaisched.cluster.memory", "kaisched.cluster"),
    ("kaisched.clusters", None),
    ("concurrent.futures", "concurrent"),
    ("kaisched.api", None),
])
def test_forbidden_prefix_matching(name: str, hit: str | None) -> None:
    assert under(name, NO_IO) == hit


def test_offences_name_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "bad.py").write_text("import os\n\nimport threading\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert offences(("plugins",), NO_IO) == ["plugins/bad.py:3 imports threading"]
