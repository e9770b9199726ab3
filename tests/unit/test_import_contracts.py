"""The import contracts in setup.cfg catch what they promise. Each test copies
the four packages and setup.cfg into a temporary tree, plants one offence and
runs `lint-imports` on the copy: the contract named must break (type-only
imports count), and the copy as it is keeps every contract."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("kaisched", "actions", "plugins", "podgrouper")
# lint-imports, as its console script runs it (import-linter is in the test extra).
LINT = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def copy_tree(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(REPO / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "setup.cfg", tmp_path / "setup.cfg")
    return tmp_path


def lint(tree: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """lint-imports on the copy (its packages first on the path, before the installed ones)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "200"}
    args = [sys.executable, "-c", LINT, "setup.cfg", "--no-cache", "--no-logo"]
    for contract in contracts:
        args += ["--contract", contract]
    return subprocess.run(args, cwd=tree, env=env, capture_output=True, text=True, timeout=600)


def plant(tree: Path, module: str, code: str) -> None:
    path = tree / module
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code, encoding="utf-8")


TYPE_ONLY = "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    {}\n"

OFFENCES = [
    # the circle issue 25 found: domainchoice naming placement's Attempt, for its types only
    pytest.param("acyclic", "actions/common/domainchoice.py",
                 TYPE_ONLY.format("from actions.common.placement import Attempt  # noqa"),
                 "actions.common", id="a-type-only-cycle-in-actions-common"),
    # inside the framework only the statement may name the session back
    pytest.param("acyclic", "kaisched/framework/hooks.py",
                 TYPE_ONLY.format("from kaisched.framework.session import Session  # noqa"),
                 "kaisched.framework", id="a-framework-module-naming-the-session"),
    # ... nor a module the session is built from name the statement (no cycle without the
    # statement's own type-only import of the session, which the acyclic contract lets be)
    pytest.param("framework", "kaisched/framework/hooks.py",
                 TYPE_ONLY.format("from kaisched.framework.statement import Statement  # noqa"),
                 "kaisched.framework.hooks", id="a-framework-module-naming-the-statement"),
    pytest.param("acyclic", "kaisched/cluster/kinds.py",
                 "def _late() -> None:\n    from kaisched.cache import Cache  # noqa\n",
                 "kaisched", id="a-cycle-between-rooms"),
    pytest.param("layers", "kaisched/api/task.py",
                 TYPE_ONLY.format("from kaisched.framework import Session  # noqa"),
                 "kaisched.api.task", id="the-model-naming-the-framework"),
    pytest.param("layers", "actions/backfill.py", "from plugins.gang import GangPlugin  # noqa\n",
                 "actions.backfill", id="an-action-importing-a-plugin"),
    pytest.param("layers", "kaisched/runtime/binder.py", "from kaisched.builtins import catalog  # noqa\n",
                 "kaisched.runtime.binder", id="the-loop-naming-the-built-ins"),
    # the loop is handed a registry: it names no action and no plugin, even lazily
    pytest.param("loop", "kaisched/runtime/cycle.py", "import actions.allocate  # noqa\n",
                 "kaisched.runtime.cycle", id="the-loop-naming-an-action"),
    pytest.param("loop", "kaisched/runtime/binder.py",
                 "def _late() -> None:\n    from plugins import gang  # noqa\n",
                 "kaisched.runtime.binder", id="the-loop-naming-a-plugin"),
    # every module the session is built from is in the framework's contract
    *(pytest.param("framework", f"kaisched/framework/{module}.py",
                   TYPE_ONLY.format("from kaisched.framework.statement import Statement  # noqa"),
                   f"kaisched.framework.{module}", id=f"{module}-naming-the-statement")
      for module in ("ranking", "usageconfig", "failures")),
    # ... the session's parts included, which never name the session they are part of
    pytest.param("framework", "kaisched/framework/parts/holds.py",
                 TYPE_ONLY.format("from kaisched.framework.session import Session  # noqa"),
                 "kaisched.framework.parts.holds", id="a-session-part-naming-the-session"),
    pytest.param("pure", "plugins/priority.py", "import threading  # noqa\n",
                 "plugins.priority", id="a-plugin-starting-threads"),
    pytest.param("pure", "podgrouper/groupers/argo.py",
                 "def _read() -> None:\n    from kaisched.cluster import memory  # noqa\n",
                 "podgrouper.groupers.argo", id="a-grouper-reaching-the-cluster"),
    pytest.param("kubernetes", "kaisched/cluster/watch.py", "import kubernetes  # noqa\n",
                 "kaisched.cluster.watch", id="kubernetes-outside-kube-py"),
    pytest.param("podgrouper", "podgrouper/owners.py",
                 "def _late() -> None:\n    from kaisched.runtime import binder  # noqa\n",
                 "podgrouper.owners", id="the-podgrouper-using-the-scheduler-loop"),
    pytest.param("podgrouper-layers", "podgrouper/groupers/spec.py",
                 TYPE_ONLY.format("from podgrouper.owners import Owner  # noqa"),
                 "podgrouper.groupers.spec", id="a-grouper-naming-the-owner-walk"),
]


def test_the_copy_keeps_every_contract(tmp_path: Path) -> None:
    result = lint(copy_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("contract", "module", "code", "named"), OFFENCES)
def test_a_planted_offence_breaks_its_contract(tmp_path: Path, contract: str, module: str,
                                               code: str, named: str) -> None:
    tree = copy_tree(tmp_path)
    plant(tree, module, code)
    result = lint(tree, contract)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout and named in result.stdout, result.stdout
