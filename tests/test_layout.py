"""The tests' own layout, read with ast.

- What test modules share is in tests/builders/: a test module imports from there and from
  no other module under tests/ (not another test module, not a conftest: pytest injects the
  fixtures of conftest.py, nobody imports them), so moving or deleting one test never
  breaks another.
- Under tests/ a module is a test module (test_*.py), a conftest.py, a package's
  __init__.py or a builder; a helper anywhere else is one that other tests cannot find.
- tests/unit/ mirrors the source: tests/unit/kaisched/api/test_gpudevices.py tests
  kaisched/api/gpudevices.py (test_gpudevices_<aspect>.py tests an aspect of it), so a
  module's tests are found by its path. Property tests over the whole scheduler are in
  tests/unit/properties/ and name no module.
- Every folder of tests is a package: two test files of one basename do not clash, and
  tests/unit/kaisched/ is never imported as the `kaisched` it mirrors.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.builders import ROOT

TESTS = ROOT / "tests"
UNIT = TESTS / "unit"
SOURCE_PACKAGES = ("kaisched", "actions", "plugins", "podgrouper")

# Files that may break a rule, each with why.
EXCEPTIONS = {
    # Checks of the architecture itself: they read the whole source, not one module.
    "tests/unit/test_layers.py",
    "tests/unit/test_import_contracts.py",
    "tests/unit/test_hook_contract.py",
    "tests/unit/test_hook_typing.py",
}


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def python_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[int, str]]:
    """Every module path imports (line, dotted name), relative imports resolved."""
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            # `from tests.x import y` may name a module y as well as a name in x
            out += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return out


# Bare names a module under tests/ could be imported by with tests/ on sys.path
# (`from test_install import ...`): any file or folder name there.
BARE = {p.stem for p in python_files()} | {p.name for p in TESTS.rglob("*") if p.is_dir()}


def refused(name: str) -> bool:
    parts = name.split(".")
    if parts[0] == "tests":
        return parts[:2] != ["tests", "builders"]
    return parts[0] in BARE and parts[0] not in SOURCE_PACKAGES


@pytest.mark.parametrize("path", [p for p in python_files() if relative(p) not in EXCEPTIONS],
                         ids=relative)
def test_a_test_module_imports_only_the_builders(path: Path) -> None:
    bad = [f"line {line}: {name}" for line, name in imported(path) if refused(name)]
    assert not bad, f"{relative(path)} imports from tests/ beyond tests/builders: {bad}"


def test_a_module_under_tests_is_a_test_a_conftest_or_a_builder() -> None:
    stray = [relative(p) for p in python_files()
             if not (p.name.startswith("test_") or p.name in ("conftest.py", "__init__.py")
                     or TESTS / "builders" in p.parents)
             and relative(p) not in EXCEPTIONS]
    assert not stray, f"helpers outside tests/builders/: {stray}"


def test_every_folder_of_tests_is_a_package() -> None:
    folders = {p.parent for p in python_files()}
    missing = sorted(relative(f) for f in folders if not (f / "__init__.py").is_file())
    assert not missing, f"folders without __init__.py: {missing}"


def names_a_module(test: Path) -> bool:
    """tests/unit/x/y/test_z.py (or test_z_aspect.py) names x/y/z.py or the package x/y/z/."""
    folder = ROOT.joinpath(*test.parent.relative_to(UNIT).parts)
    words = test.stem.removeprefix("test_").split("_")
    for n in range(len(words), 0, -1):
        stem = "_".join(words[:n])
        if (folder / f"{stem}.py").is_file() or (folder / stem / "__init__.py").is_file():
            return True
    return False


def unit_tests() -> list[Path]:
    return [p for p in UNIT.rglob("test_*.py")
            if UNIT / "properties" not in p.parents and relative(p) not in EXCEPTIONS]


def test_unit_tests_mirror_the_source() -> None:
    outside = [relative(p) for p in unit_tests()
               if p.parent == UNIT or p.relative_to(UNIT).parts[0] not in SOURCE_PACKAGES]
    assert not outside, f"unit tests outside a source package's mirror: {outside}"
    orphans = [relative(p) for p in unit_tests() if p.parent != UNIT and not names_a_module(p)]
    assert not orphans, f"unit tests naming no module: {orphans}"


def test_the_rules_see_what_they_refuse() -> None:
    """The checks above on made-up names: a test-to-test import, a conftest's, a bare one."""
    assert refused("tests.unit.conftest.build_pod")
    assert refused("tests.unit.properties.test_invariants.GPU")
    assert refused("test_install.instructions") and refused("conftest")
    assert not refused("tests.builders.objects.build_pod") and not refused("kaisched.api.job")
    assert names_a_module(UNIT / "kaisched" / "api" / "test_gpudevices_summary.py")
    assert names_a_module(UNIT / "kaisched" / "cache" / "test_convert.py")      # a package
    assert not names_a_module(UNIT / "kaisched" / "api" / "test_nothing_here.py")
    assert [rule for rule in EXCEPTIONS if not (ROOT / rule).is_file()] == []
