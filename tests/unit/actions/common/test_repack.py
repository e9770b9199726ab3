"""Consolidation's search (actions/common/repack.py, FewestMoves) on its own: two nodes of
two GPUs, each running a one-GPU pod, and a job wanting two GPUs on one node. Which pods
the search moves among many is in test_moveset.py; the action around it in
tests/scenarios/consolidation-*.yaml and tests/unit/properties/test_invariants_consolidation.py."""
from __future__ import annotations

from typing import Any

from actions.common.movable import Movable
from actions.common.repack import FewestMoves
from kaisched.api.types import JobKey, NodeName, TaskStatus
from kaisched.framework import Session
from tests.builders.objects import Obj, build_node, build_pod, build_podgroup, default_session

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "uid": "uid", "controller": True}
WANT = JobKey("default/want")
# Long after every pod started: no cooldown keeps one where it is.
LATER = 1e10


def running(name: str, node: str, controlled: bool = True) -> list[Obj]:
    """A one-GPU pod of its own job, made by a ReplicaSet (which makes it again when moved)
    unless controlled is False."""
    owner: dict[str, Any] | None = {**OWNER, "name": name} if controlled else None
    return [build_podgroup(name), build_pod(name, gpu=1, group=name, node=node, owner=owner)]


def cluster(want_gpus: int = 2, controlled: bool = True) -> list[Obj]:
    return [build_node("n0", cpu=8, gpu=2), build_node("n1", cpu=8, gpu=2),
            *running("a", "n0", controlled), *running("b", "n1", controlled),
            build_podgroup("want"), build_pod("want-0", gpu=want_gpus, group="want")]


def plan(objects: list[Obj], max_pods: int = 10) -> tuple[Session, FewestMoves, bool]:
    ssn = default_session(objects, now=LATER)
    job = ssn.cluster.jobs[WANT]
    search = FewestMoves(ssn, job, ssn.ordered_tasks(job, ssn.pending(job)), Movable(ssn),
                         max_pods, 600.0, [], {})
    return ssn, search, search.build() is not None


def test_one_pod_moves_and_the_job_takes_the_node_it_left() -> None:
    ssn, search, planned = plan(cluster())
    assert planned
    [moved] = search.moved
    left = moved.node_name
    [task] = ssn.cluster.jobs[WANT].tasks.values()
    assert (task.status, task.node_name) == (TaskStatus.PIPELINED, left)
    assert ssn.cluster.jobs[moved.job].tasks[moved.key].status is TaskStatus.RELEASING
    # its successor (the pod its ReplicaSet makes again) is placed on the other node
    other = NodeName("n1" if left == "n0" else "n0")
    [successor] = [t for t in ssn.cluster.nodes[other].tasks.values() if t.successor_of == moved.key]
    assert successor.status is TaskStatus.PIPELINED


def test_nothing_moves_beyond_the_budget() -> None:
    _, search, planned = plan(cluster(), max_pods=0)
    assert not planned and search.moved == []


def test_nothing_moves_when_moving_cannot_make_the_room() -> None:
    _, search, planned = plan(cluster(want_gpus=3))     # no node has three GPUs
    assert not planned and search.moved == []


def test_a_pod_no_controller_makes_again_is_not_moved() -> None:
    _, search, planned = plan(cluster(controlled=False))
    assert not planned and search.moved == []
