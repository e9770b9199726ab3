"""What a session is built from (kaisched/framework/parts/) and who may call
the session methods a statement's operations use.

- the methods only Statement operations call (emit, assign, ...) are called on
  a session by framework/statement.py alone: a plugin says what it says as the
  session closes through ssn.report, an action changes the session through a
  statement or a part's method;
- each part keeps what it is told and no more (the enqueue gate, the NonStrict
  holds, the room held for starving gangs);
- a filter's forms for room are what static_mask and room_mask ask, in place
  of the filter (the session sets no mode a plugin reads).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pytest

from kaisched.api.resource import Resource
from kaisched.api.types import JobKey
from kaisched.framework import Hook
from kaisched.framework.effects import CarriedGang
from kaisched.framework.hooks import Rows
from kaisched.framework.parts import Gate, Holds
from tests.builders.objects import build_node, build_pod, build_podgroup, open_session

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("kaisched", "actions", "plugins")
STATEMENT = "kaisched/framework/statement.py"
# Session methods a statement's operations call as they place, evict, commit and undo.
STATEMENT_ONLY = frozenset({"emit", "assign", "unassign", "release", "unrelease",
                            "claim_moves", "prebind", "wait_for_binding"})
SESSION_NAMES = frozenset({"ssn", "session", "_ssn"})      # how the code names a session


def _session_receiver(node: ast.expr) -> bool:
    """ssn.x(...), session.x(...), self.ssn.x(...), self._ssn.x(...)."""
    if isinstance(node, ast.Name):
        return node.id in SESSION_NAMES
    return isinstance(node, ast.Attribute) and node.attr in SESSION_NAMES \
        and isinstance(node.value, ast.Name) and node.value.id == "self"


def statement_calls(folders: tuple[str, ...]) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == STATEMENT or "__pycache__" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr in STATEMENT_ONLY and _session_receiver(node.func.value):
                    found.append(f"{rel}:{node.lineno} calls {node.func.attr}()")
    return found


def test_only_the_statement_calls_its_session_methods() -> None:
    found = statement_calls(FOLDERS)
    assert not found, "a statement's session method called elsewhere:\n" + "\n".join(found)


def test_a_plugin_emitting_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "bad.py").write_text(
        "def close(self, ssn):\n    ssn.report(1)\n    ssn.emit(2)\n"
        "    self._ssn.release(3)\n    ssn.cluster.release(4)\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    assert statement_calls(("plugins",)) == ["plugins/bad.py:3 calls emit()",
                                             "plugins/bad.py:4 calls release()"]


# -- the parts ---------------------------------------------------------------------------

def two_gangs():
    ssn = open_session([
        build_node("n1", cpu=4),
        build_podgroup("a", min_member=1, minResources={"cpu": "2"}),
        build_podgroup("b", min_member=1, minResources={"cpu": "1"}),
        build_pod("a-0", cpu=1, group="a"), build_pod("b-0", cpu=1, group="b"),
    ])
    return ssn, ssn.cluster.jobs[JobKey("default/a")], ssn.cluster.jobs[JobKey("default/b")]


def test_the_gate_admits_every_gang_until_closed_then_only_those_admitted() -> None:
    ssn, a, b = two_gangs()
    gate = Gate()
    assert not gate.closed and gate.admits(a) and not gate.admitted(a)
    gate.close()
    assert gate.closed and not gate.admits(a)
    gate.admit(a, ssn.job_ready)
    gate.admit(b, ssn.job_ready)
    assert gate.admits(a) and gate.admitted(a) and gate.admits(b)
    # Neither started: each one's minResources count against the other's.
    assert gate.inqueue_request(a) == Resource.from_quantities({"cpu": "1"})
    assert gate.inqueue_request(b) == Resource.from_quantities({"cpu": "2"})
    assert gate.inqueue_request(b, queues=["elsewhere"]) == Resource()


def test_a_started_gang_admitted_waits_for_nothing() -> None:
    ssn, a, b = two_gangs()
    gate = Gate()
    gate.close()
    gate.admit(a, lambda job: True)
    assert gate.inqueue_request(b) == Resource()


class Opened:
    def __init__(self) -> None:
        self.discarded = False

    def discard(self) -> None:
        self.discarded = True


def test_a_failed_decision_gives_its_hold_up() -> None:
    holds: Holds[Opened] = Holds()
    mine, other = Opened(), Opened()
    holds.put_back(JobKey("a"), mine, since=5.0)
    holds.put_back(JobKey("b"), other)
    holds.carry(JobKey("a"), CarriedGang((), 5.0))
    assert holds.since(JobKey("a"), 9.0) == 5.0 and holds.since(JobKey("b"), 9.0) == 9.0
    holds.give_up(JobKey("a"), mine)
    assert mine.discarded and not other.discarded
    assert dict(holds.held) == {"b": other} and holds.to_carry() == {}
    assert holds.take(JobKey("b")) is other and not holds.held


def test_room_held_for_a_gang_keeps_others_off_it() -> None:
    ssn = open_session([build_node("n1", cpu=4), build_pod("p", cpu=2)])
    task = next(iter(ssn.cluster.jobs[JobKey("default/p")].tasks.values()))
    assert ssn.select_node(task) is not None
    room = np.zeros_like(ssn.cluster.table.alloc)
    room[0] = ssn.cluster.table.vector(Resource.from_quantities({"cpu": "3"}))
    ssn.starving.reserve(JobKey("default/other"), room)
    assert ssn.select_node(task) is None        # 4 - 3 held leaves 1: the pod needs 2
    ssn.starving.release(JobKey("default/other"))
    assert ssn.select_node(task) is not None and not ssn.starving.rooms


# -- forms asked for room -------------------------------------------------------------------

def test_static_and_room_masks_ask_the_forms_registered_for_them() -> None:
    ssn = open_session([build_node("n1", cpu=4), build_node("n2", cpu=4), build_pod("p", cpu=1)])
    task = next(iter(ssn.cluster.jobs[JobKey("default/p")].tasks.values()))
    first, second = np.array([True, False]), np.array([False, True])

    def never(task: object, rows: Rows) -> np.ndarray:
        return np.zeros(len(rows), dtype=bool)

    ssn.hooks.register(Hook.PREDICATE, never, "never",
                       aside=lambda t, rows: first[rows], evicting=lambda t, rows: second[rows])
    ssn.hooks.register(Hook.POD_PREDICATE, lambda t, rows: None, "leaves it alone",
                       evicting=lambda t, rows: np.ones(len(rows), dtype=bool))
    assert ssn.static_mask(task).tolist() == [True, False]
    assert ssn.room_mask(task).tolist() == [False, True]
    # Placing asks the filter itself.
    assert not ssn.hooks.mask(Hook.PREDICATE, task, ssn.selection.all_rows).any()
