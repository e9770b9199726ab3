"""What import-linter cannot say about the layers. It holds the rest: the
contracts in setup.cfg (which layer may import which, no import cycle, no
client, thread or socket imported by a decision), checked by `lint-imports` in
.ci/run. What it cannot see, because it reads imports only, is checked here by
walking the code with ast:

- decisions (api, framework, actions, plugins, groupers) call no builtin that
  does I/O (open, print, input, ...);
- no module imports another module's private name;
- no module assigns a private attribute that another class owns: `x._name = ...`
  (also inside a tuple target, augmented, or by setattr) on anything but self or
  cls, unless a class's own method copies its kind's state onto an instance of
  its kind (one it was given as such, or made).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("kaisched", "actions", "plugins", "podgrouper")
PURE = ("kaisched/api", "kaisched/framework", "actions", "plugins", "podgrouper/groupers")
IO_BUILTINS = frozenset({"open", "print", "input", "exec", "eval", "__import__", "breakpoint"})
SELF = frozenset({"self", "cls"})


def python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders if (REPO / f).exists()
                  for p in ((REPO / f).rglob("*.py") if (REPO / f).is_dir() else [REPO / f])
                  if "__pycache__" not in p.parts)


def parsed(*folders: str) -> Iterator[tuple[str, ast.Module]]:
    for path in python_files(*folders):
        yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


# -- I/O by builtins -----------------------------------------------------------------------

def io_calls(folders: tuple[str, ...]) -> list[str]:
    found = []
    for rel, tree in parsed(*folders):
        calls = sorted((node.lineno, node.col_offset, node.func.id) for node in ast.walk(tree)
                       if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                       and node.func.id in IO_BUILTINS)
        found += [f"{rel}:{line} calls {name}()" for line, _, name in calls]
    return found


def test_decisions_call_no_io_builtin() -> None:
    found = io_calls(PURE)
    assert not found, "I/O in a decision layer:\n" + "\n".join(found)


def test_io_calls_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "bad.py").write_text(
        "def f(path):\n    data = open(path).read()\n    print(data)\n    return len(data)\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert io_calls(("plugins",)) == ["plugins/bad.py:2 calls open()", "plugins/bad.py:3 calls print()"]


@pytest.mark.parametrize("folder", PURE)
def test_the_checked_layers_exist(folder: str) -> None:
    assert python_files(folder), f"{folder} has no Python files: the rules would check nothing"


# -- private names ---------------------------------------------------------------------------

def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(folders: tuple[str, ...]) -> list[str]:
    """`from a import _b` across modules of the project: a private name is its
    module's own; what two modules share gets a public name and a home."""
    return [f"{rel}:{node.lineno} imports {node.module}.{alias.name}"
            for rel, tree in parsed(*folders) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module != "__future__"
            for alias in node.names if private(alias.name)]


def test_no_module_imports_another_s_private_name() -> None:
    found = private_imports(PACKAGES)
    assert not found, "private names imported:\n" + "\n".join(found)


def test_private_imports_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "bad.py").write_text(
        "from __future__ import annotations\nfrom kaisched.sim.scenario import (\n    _parse,\n)\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert private_imports(("plugins",)) == ["plugins/bad.py:2 imports kaisched.sim.scenario._parse"]


def owned(cls: ast.ClassDef) -> frozenset[str]:
    """The private attributes a class owns: declared in its body (an attrs
    field, a class attribute) or assigned on self or cls in its methods."""
    names = set()
    for stmt in cls.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else \
            [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    names.update(node.attr for node in ast.walk(cls)
                 if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                 and isinstance(node.value, ast.Name) and node.value.id in SELF)
    return frozenset(n for n in names if private(n))


def _names_class(node: ast.expr | None, cls: ast.ClassDef) -> bool:
    return (isinstance(node, ast.Name) and node.id in (cls.name, "cls", "Self")) or \
        (isinstance(node, ast.Constant) and node.value == cls.name)


def _makes(value: ast.expr, cls: ast.ClassDef) -> bool:
    """value makes an instance of cls: Cls(...), cls(...), type(self)(...),
    object.__new__(Cls), Cls.__new__(cls)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if _names_class(func, cls):
        return True
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "type":
        return bool(func.args) and isinstance(func.args[0], ast.Name) and func.args[0].id == "self"
    return isinstance(func, ast.Attribute) and func.attr == "__new__" and bool(value.args) \
        and _names_class(value.args[0], cls)


def own_kind(method: ast.FunctionDef | ast.AsyncFunctionDef, cls: ast.ClassDef) -> frozenset[str]:
    """The names that hold an instance of cls inside its method: parameters
    annotated with it, and locals it makes."""
    args = method.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]
             if _names_class(a.annotation, cls)}
    for node in ast.walk(method):
        if isinstance(node, ast.Assign) and _makes(node.value, cls):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and (_names_class(node.annotation, cls) or
                     (node.value is not None and _makes(node.value, cls))):
            names.add(node.target.id)
    return frozenset(names)


def _private_written(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(object, attribute) when node writes a private attribute: an assignment
    target of any kind (plain, tuple, augmented, annotated, for, with) or
    setattr(x, "_name", ...) / object.__setattr__(x, "_name", ...)."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and private(node.attr):
        return node.value, node.attr
    if isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
            and isinstance(node.args[1].value, str) and private(node.args[1].value) \
            and ast.unparse(node.func) in ("setattr", "object.__setattr__"):
        return node.args[0], node.args[1].value
    return None


def private_writes(folders: tuple[str, ...]) -> list[str]:
    """Assignments of private attributes not the writer's own (see the module's doc)."""
    found: list[str] = []

    def visit(node: ast.AST, rel: str, cls: ast.ClassDef | None, mine: frozenset[str],
              kind: frozenset[str]) -> None:
        for child in ast.iter_child_nodes(node):
            written = _private_written(child)
            if written is not None:
                target, attr = written
                name = target.id if isinstance(target, ast.Name) else None
                if name not in SELF and not (attr in mine and name in kind):
                    found.append(f"{rel}:{child.lineno} assigns {ast.unparse(target)}.{attr}")
            if isinstance(child, ast.ClassDef):
                visit(child, rel, child, owned(child), frozenset())
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) and cls is not None \
                    and child in cls.body:
                visit(child, rel, cls, mine, own_kind(child, cls))
            else:
                visit(child, rel, cls, mine, kind)

    for rel, tree in parsed(*folders):
        visit(tree, rel, None, frozenset(), frozenset())
    return found


def test_no_module_assigns_a_private_attribute_another_class_owns() -> None:
    found = private_writes(PACKAGES)
    assert not found, ("private attributes assigned from outside their class (give the "
                       "owner a method instead):\n" + "\n".join(found))


PLANTED = '''\
from __future__ import annotations

from kaisched.api.clusterinfo import ClusterInfo


class Model:
    def __init__(self) -> None:
        self._rules = None
        self._seq, self._ledger = 0, None

    def lend(self, cluster: ClusterInfo, other: Model) -> None:
        cluster._rules = self._rules
        cluster._moved, count = set(), 0
        cluster._seq += count
        setattr(cluster, "_ledger", None)
        object.__setattr__(cluster, "_frozen", True)
        other._rules = self._rules
        other._unknown = 1
        made = Model()
        made._seq = self._seq
        bare = object.__new__(Model)
        bare._ledger = self._ledger
        self.cluster._rules = None

    @classmethod
    def make(cls) -> Model:
        cls._count = 0
        new = cls()
        new._rules = None
        return new


def helper(model: Model) -> None:
    model._rules = None
    for model._seq in range(3):
        pass
'''


def test_private_writes_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kaisched").mkdir()
    (tmp_path / "kaisched" / "bad.py").write_text(PLANTED)
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert private_writes(("kaisched",)) == [
        "kaisched/bad.py:12 assigns cluster._rules",         # ClusterInfo's, though Model has one
        "kaisched/bad.py:13 assigns cluster._moved",         # in a tuple target
        "kaisched/bad.py:14 assigns cluster._seq",           # augmented
        "kaisched/bad.py:15 assigns cluster._ledger",        # setattr
        "kaisched/bad.py:16 assigns cluster._frozen",        # object.__setattr__
        "kaisched/bad.py:18 assigns other._unknown",         # its kind, but not a field it owns
        "kaisched/bad.py:23 assigns self.cluster._rules",    # an attribute's, not its own
        "kaisched/bad.py:34 assigns model._rules",           # no method of the class
        "kaisched/bad.py:35 assigns model._seq",             # a for target
    ]
