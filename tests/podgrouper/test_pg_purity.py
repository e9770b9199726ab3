"""The groupers are pure: no I/O, and no imports of kaisched.cluster,
kubernetes, threads or sockets, directly or through the first-party modules they
import. Checked by walking the imports."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GROUPERS = ROOT / "podgrouper" / "groupers"
FIRST_PARTY = ("kaisched", "podgrouper", "actions", "plugins")
FORBIDDEN = ("kaisched.cluster", "kubernetes", "threading", "_thread", "socket", "ssl", "select",
             "selectors", "asyncio", "subprocess", "multiprocessing", "concurrent", "http",
             "urllib", "requests", "podgrouper.controller", "podgrouper.cli")
IO_BUILTINS = {"open", "print", "input", "exec", "eval", "__import__"}


def module_path(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def imports(path: Path, name: str | None = None) -> set[str]:
    """Every module the file imports, at any depth (but not under `if TYPE_CHECKING`);
    `from pkg import mod` counts pkg.mod too when mod is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and is_type_checking(node)
               for stmt in node.body for n in ast.walk(stmt)}
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names
                         if module_path(f"{base}.{alias.name}") is not None)
    return found


def closure() -> dict[str, set[str]]:
    """module -> the modules it imports, for the groupers and every first-party module
    reached from them."""
    todo = [module_name(p) for p in sorted(GROUPERS.glob("*.py"))]
    seen: dict[str, set[str]] = {}
    while todo:
        name = todo.pop()
        path = module_path(name)
        if name in seen or path is None:
            continue
        seen[name] = imports(path)
        todo.extend(m for m in seen[name] if m.split(".")[0] in FIRST_PARTY)
    return seen


def forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_the_walk_reaches_every_grouper_and_what_they_import() -> None:
    walked = closure()
    assert {module_name(p) for p in GROUPERS.glob("*.py")} <= set(walked)
    assert "kaisched.api.labels" in walked


def test_no_grouper_imports_io_directly_or_transitively() -> None:
    bad = {f"{module} imports {name}" for module, names in closure().items()
           for name in names if forbidden(name)}
    assert bad == set()


@pytest.mark.parametrize("path", sorted(GROUPERS.glob("*.py")), ids=lambda p: p.name)
def test_groupers_call_no_io_builtins(path: Path) -> None:
    calls = {node.func.id for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert calls & IO_BUILTINS == set()


def test_the_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    sample = ROOT / "podgrouper" / "groupers" / "spec.py"
    text = sample.read_text(encoding="utf-8") + "\n\ndef _sneaky() -> None:\n    import socket\n"
    copy = tmp_path / "spec.py"
    copy.write_text(text)
    assert imports(copy, "podgrouper.groupers.spec") - imports(sample) == {"socket"}


def test_importing_the_groupers_loads_no_cluster_code() -> None:
    """At run time too: importing podgrouper.groupers (and so the podgrouper package)
    must not load the controller, the cluster backends or kubernetes."""
    code = ("import sys, podgrouper.groupers\n"
            "print('\\n'.join(m for m in sys.modules if m.startswith(('kaisched.cluster', "
            "'kubernetes', 'podgrouper.controller', 'podgrouper.cli'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == ""
