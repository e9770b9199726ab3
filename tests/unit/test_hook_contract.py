"""Who may touch the hooks, read from the source with ast.

- Actions ask the session; the registry and the hook keys are the plugins'
  and the framework's: no module under actions/ reads `.hooks` or imports
  the registry or a key.
- Registration is explicit: no module fills a registry that another module
  owns while it is imported (a dict of filter blockers a plugin's import
  filled was the last one).
- No hook's callback type is left unchecked (`Callable[..., Any]`).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kaisched", "actions", "plugins", "podgrouper")
HOOK_NAMES = {"Hook", "HookKey", "HookRegistry", "FilterKey", "PodRuleKey", "PodFilterKey",
              "Registration"}
# Calls that change the object they are called on.
MUTATORS = {"update", "setdefault", "append", "extend", "add", "insert", "register",
            "add_action", "add_plugin", "__setitem__"}


def modules(*packages: str) -> list[Path]:
    return sorted(p for pkg in packages for p in (ROOT / pkg).rglob("*.py"))


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def where(path: Path, node: ast.AST) -> str:
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    return f"{name}:{getattr(node, 'lineno', '?')}"


def registry_reads(path: Path) -> list[str]:
    """Where an action module reaches for the registry or a hook key."""
    found = []
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Attribute) and node.attr in ("hooks", "_hooks"):
            found.append(f"{where(path, node)}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "kaisched.framework.hooks":
                found.append(f"{where(path, node)}: imports kaisched.framework.hooks")
            elif node.module.startswith("kaisched.framework"):
                found += [f"{where(path, node)}: imports {a.name}" for a in node.names
                          if a.name in HOOK_NAMES]
        elif isinstance(node, ast.Import):
            found += [f"{where(path, node)}: imports {a.name}" for a in node.names
                      if a.name == "kaisched.framework.hooks"]
    return found


def import_time_fills(path: Path) -> list[str]:
    """Module-level statements that change a name another module owns
    (imported here): `X[k] = v`, `X.attr = v`, `X.update(...)` and the like."""
    tree = parse(path)
    imported = {(a.asname or a.name).split(".")[0] for node in tree.body
                if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}

    def base(node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    found = []
    for stmt in tree.body:      # only what runs at import: not inside defs or classes
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for node in ast.walk(stmt):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for target in targets:
                if isinstance(target, (ast.Attribute, ast.Subscript)) and base(target) in imported:
                    found.append(f"{where(path, node)}: assigns into {base(target)}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in MUTATORS and base(node.func.value) in imported:
                found.append(f"{where(path, node)}: {base(node.func.value)}.{node.func.attr}(...)")
    return found


@pytest.mark.parametrize("path", modules("actions"), ids=lambda p: str(p.relative_to(ROOT)))
def test_actions_ask_the_session_not_the_registry(path: Path) -> None:
    assert registry_reads(path) == []


def test_the_check_sees_a_read_of_the_registry(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from kaisched.framework import Hook, Session\n\n"
                       "def execute(ssn: Session) -> None:\n"
                       "    ssn.hooks.first_reason(Hook.RECLAIM_GATE)\n")
    assert [r.split(": ", 1)[1] for r in registry_reads(planted)] \
        == ["imports Hook", ".hooks"]


def test_no_module_fills_another_modules_registry_when_imported() -> None:
    found = [hit for path in modules(*PACKAGES) for hit in import_time_fills(path)]
    assert found == []


def test_the_check_sees_a_registry_filled_at_import(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from kaisched.framework import selection\n"
                       "from kaisched.framework.selection import BLOCKERS\n\n"
                       "BLOCKERS['words'] = 1\n"
                       "BLOCKERS.update(more=2)\n"
                       "selection.DEFAULT = 3\n"
                       "mine: dict[str, int] = {}\n"
                       "mine['x'] = 4\n\n"
                       "def later() -> None:\n"
                       "    BLOCKERS['at run time'] = 5\n")
    assert [r.split(": ", 1)[1] for r in import_time_fills(planted)] \
        == ["assigns into BLOCKERS", "BLOCKERS.update(...)", "assigns into selection"]


def test_no_hook_type_is_left_unchecked() -> None:
    """Callable[..., Any] nowhere in the packages: the framework's hooks, the
    actions and the plugins least of all."""
    found = [where(path, node) for path in modules(*PACKAGES)
             for node in ast.walk(parse(path))
             if isinstance(node, ast.Subscript) and ast.unparse(node).replace(" ", "")
             in ("Callable[...,Any]", "typing.Callable[...,Any]")]
    assert found == []

