"""Statement: allocate / pipeline / evict with undo, checkpoint and rollback,
and what commit, reserve and discard leave behind (kaisched.framework.statement)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kaisched.api.types import JobKey, NodeName, PodKey, QueueName, TaskStatus
from kaisched.framework import Session
from kaisched.framework.effects import Bind, Cause, Evict, Preemptor
from tests.builders.objects import build_node, build_pod, build_podgroup, open_session

TABLE_ARRAYS = ("used", "idle", "releasing", "pipelined", "future")


def session() -> Session:
    """Two 4-cpu nodes; gang pg (minMember 3) of three 1-cpu pods pending;
    a 2-cpu pod of another job running on n1; a 1-cpu one running on n2."""
    return open_session([
        build_node("n1", cpu=4), build_node("n2", cpu=4),
        build_podgroup("pg", min_member=3),
        *(build_pod(f"t{i}", cpu=1, group="pg") for i in range(3)),
        build_pod("victim", cpu=2, node="n1"),
        build_pod("other", cpu=1, node="n2"),
    ])


def state(ssn: Session) -> dict[str, Any]:
    """Everything a statement may touch: node accounting, node task lists,
    task statuses and per-status counts of every job, and the queue order."""
    cluster = ssn.cluster
    out: dict[str, Any] = {f"table.{a}": getattr(cluster.table, a).copy() for a in TABLE_ARRAYS}
    out["node_tasks"] = {n: {k: (t.status, t.node_name) for k, t in info.tasks.items()}
                         for n, info in cluster.nodes.items()}
    out["tasks"] = {k: (t.status, t.node_name) for job in cluster.jobs.values()
                    for k, t in job.tasks.items()}
    out["counts"] = {key: {s: job.count((s,)) for s in TaskStatus}
                     for key, job in cluster.jobs.items()}
    out["queues"] = {q: ssn.queue_order_key(info) for q, info in cluster.queues.items()}
    return out


def assert_same(before: dict[str, Any], after: dict[str, Any]) -> None:
    for key in before:
        if key.startswith("table."):
            np.testing.assert_array_equal(after[key], before[key], err_msg=key)
        else:
            assert after[key] == before[key], key


def task(ssn: Session, key: str):
    for job in ssn.cluster.jobs.values():
        if key in job.tasks:
            return job.tasks[PodKey(key)]
    raise KeyError(key)


def cpu_row(ssn: Session, array: str, node: str) -> float:
    table = ssn.cluster.table
    return float(getattr(table, array)[table.index[NodeName(node)], table.dim_index["cpu"]])


# -- each operation changes the accounting ----------------------------------------------

def test_allocate_takes_idle_room() -> None:
    ssn = session()
    placed = ssn.statement().allocate(task(ssn, "default/t0"), NodeName("n1"))
    assert placed.status is TaskStatus.ALLOCATED and placed.node_name == "n1"
    assert task(ssn, "default/t0") == placed
    assert cpu_row(ssn, "used", "n1") == 3000
    assert cpu_row(ssn, "idle", "n1") == 1000
    assert cpu_row(ssn, "future", "n1") == 1000
    assert "default/t0" in ssn.cluster.nodes[NodeName("n1")].tasks


def test_pipeline_takes_future_room_only() -> None:
    ssn = session()
    placed = ssn.statement().pipeline(task(ssn, "default/t0"), NodeName("n1"))
    assert placed.status is TaskStatus.PIPELINED
    assert cpu_row(ssn, "used", "n1") == 2000
    assert cpu_row(ssn, "idle", "n1") == 2000
    assert cpu_row(ssn, "pipelined", "n1") == 1000
    assert cpu_row(ssn, "future", "n1") == 1000


def test_evict_keeps_the_room_used_until_the_pod_is_gone() -> None:
    ssn = session()
    released = ssn.statement().evict(task(ssn, "default/victim"), Cause.STALE_GANG, detail="gang below its minimum")
    assert released.status is TaskStatus.RELEASING
    assert cpu_row(ssn, "used", "n1") == 2000
    assert cpu_row(ssn, "idle", "n1") == 2000
    assert cpu_row(ssn, "releasing", "n1") == 2000
    assert cpu_row(ssn, "future", "n1") == 4000


# -- undo: rollback to a checkpoint, discard ------------------------------------------

def test_rollback_restores_exactly_the_state_at_the_checkpoint() -> None:
    ssn = session()
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/t0"), NodeName("n2"))
    at_mark = state(ssn)
    mark = stmt.checkpoint()
    stmt.evict(task(ssn, "default/victim"), Cause.STALE_GANG, detail="gang below its minimum")
    stmt.pipeline(task(ssn, "default/t1"), NodeName("n1"))
    stmt.allocate(task(ssn, "default/t2"), NodeName("n2"))
    stmt.evict(task(ssn, "default/other"), Cause.STALE_GANG, detail="gang below its minimum")
    assert state(ssn)["tasks"] != at_mark["tasks"]
    stmt.rollback(mark)
    assert_same(at_mark, state(ssn))
    assert stmt.checkpoint() == mark


def test_discard_restores_the_opening_state() -> None:
    ssn = session()
    before = state(ssn)
    stmt = ssn.statement()
    stmt.evict(task(ssn, "default/victim"), Cause.STALE_GANG, detail="gang below its minimum")
    stmt.pipeline(task(ssn, "default/t0"), NodeName("n1"))
    stmt.allocate(task(ssn, "default/t1"), NodeName("n1"))
    stmt.allocate(task(ssn, "default/t2"), NodeName("n2"))
    stmt.discard()
    assert_same(before, state(ssn))
    assert ssn.effects == [] and ssn.placed == {} and ssn.reservations == {}


def test_rollback_is_exact_with_fractional_gpus() -> None:
    ssn = open_session([
        build_node("n1", gpu=8),
        build_pod("r1", gpu=0.2, node="n1"), build_pod("r2", gpu=0.1, node="n1"),
        build_podgroup("pg", min_member=2),
        build_pod("a", gpu=0.1, group="pg"), build_pod("b", gpu=0.7, group="pg"),
    ])
    before = state(ssn)
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/a"), NodeName("n1"))
    stmt.allocate(task(ssn, "default/b"), NodeName("n1"))
    stmt.evict(task(ssn, "default/r1"), Cause.STALE_GANG, detail="gang below its minimum")
    stmt.discard()
    assert_same(before, state(ssn))


@pytest.mark.parametrize("keep", [0, 1, 2, 3])
def test_nested_checkpoints_roll_back_in_reverse(keep: int) -> None:
    ssn = session()
    stmt = ssn.statement()
    marks, states = [], []
    for i in range(3):
        marks.append(stmt.checkpoint())
        states.append(state(ssn))
        stmt.allocate(task(ssn, f"default/t{i}"), NodeName("n2"))
    marks.append(stmt.checkpoint())
    states.append(state(ssn))
    stmt.rollback(marks[keep])
    assert_same(states[keep], state(ssn))


def test_rollback_to_a_later_mark_does_nothing() -> None:
    ssn = session()
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/t0"), NodeName("n2"))
    before = state(ssn)
    stmt.rollback(stmt.checkpoint())
    assert_same(before, state(ssn))


# -- commit, reserve ------------------------------------------------------------------

def test_commit_emits_bind_and_evict_effects() -> None:
    ssn = session()
    stmt = ssn.statement()
    victim = task(ssn, "default/victim")
    by = Preemptor(PodKey("default/t0"), JobKey("default/pg"), 10, QueueName("team-a"))
    stmt.evict(victim, Cause.PREEMPT, by)
    t0 = stmt.allocate(task(ssn, "default/t0"), NodeName("n2"))
    stmt.pipeline(task(ssn, "default/t1"), NodeName("n1"))
    after = state(ssn)
    stmt.commit()
    assert ssn.effects == [
        Evict(PodKey("default/victim"), victim.uid, NodeName("n1"), victim.job, Cause.PREEMPT,
              by),
        Bind(PodKey("default/t0"), t0.uid, NodeName("n2"), t0.job),
    ]
    assert ssn.effects[0].reason == "Preempted"
    assert ssn.effects[0].message == \
        "preempted by pod default/t0 of default/pg (priority 10, queue team-a)"
    assert ssn.placed == {"default/t0": "n2"}
    assert ssn.reservations == {"default/t1": "n1"}     # a pipelined task binds later
    assert_same(after, state(ssn))                       # committing keeps the accounting
    assert stmt.checkpoint() == 0                        # and empties the statement


def test_discard_after_commit_undoes_nothing() -> None:
    ssn = session()
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/t0"), NodeName("n2"))
    stmt.commit()
    after = state(ssn)
    stmt.discard()
    assert_same(after, state(ssn))
    assert len(ssn.effects) == 1


def test_reserve_keeps_placements_without_binds() -> None:
    ssn = session()
    stmt = ssn.statement()
    stmt.allocate(task(ssn, "default/t0"), NodeName("n2"))
    stmt.pipeline(task(ssn, "default/t1"), NodeName("n1"))
    after = state(ssn)
    stmt.reserve()
    assert not any(isinstance(e, Bind) for e in ssn.effects)
    assert ssn.placed == {}
    assert ssn.reservations == {"default/t0": "n2", "default/t1": "n1"}
    assert_same(after, state(ssn))                       # the room stays taken
    stmt.discard()
    assert_same(after, state(ssn))


def test_session_clone_is_independent_of_the_snapshot() -> None:
    ssn = session()
    original = ssn.cluster
    copy = original.clone()
    before = {a: getattr(original.table, a).copy() for a in TABLE_ARRAYS}
    t0 = copy.jobs["default/pg"].tasks[PodKey("default/t0")]
    copy.assign(t0, TaskStatus.ALLOCATED, NodeName("n2"))
    for a in TABLE_ARRAYS:
        np.testing.assert_array_equal(getattr(original.table, a), before[a], err_msg=a)
    assert original.jobs["default/pg"].tasks[PodKey("default/t0")].status is TaskStatus.PENDING
    assert "default/t0" not in original.nodes[NodeName("n2")].tasks
