"""The room consolidation makes is held past its session: the moved pod's
successor (made again by its controller, here under a new name) takes the
room held for it on its new node, and the gang it was moved for takes the
room the move freed, though a job ahead of both in the queue wants that
room; a hold ends once nothing of its job waits, or after HOLD_LIMIT."""
from __future__ import annotations

from typing import Any

import attrs

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.framework.effects import Bind, Evict
from kaisched.framework.moves import HOLD_LIMIT
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "a-uid", "controller": True}


def objects() -> list[dict[str, Any]]:
    # b is the older job: of two moves freeing as much, the newer job's (a's) goes.
    older = build_podgroup("b")
    older["metadata"]["creationTimestamp"] = "2025-12-31T12:00:00Z"
    return [build_node("node-0", cpu=8, gpu=4), build_node("node-1", cpu=8, gpu=4),
            build_podgroup("a"), older, build_podgroup("big"),
            build_pod("a-0", gpu=2, group="a", node="node-0", owner=OWNER),
            build_pod("b-0", gpu=2, group="b", node="node-1",
                      owner={**OWNER, "name": "b", "uid": "b-uid"}),
            build_pod("big-0", gpu=3, group="big")]


def scheduler(cluster: MemoryCluster, clock: ManualClock) -> Scheduler:
    registry = register_builtins()
    base = default_config(registry)
    config = attrs.evolve(base, actions=("allocate", "consolidation", *base.actions[1:]))
    return Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))


def controller_step(cluster: MemoryCluster) -> None:
    """The kubelet lets evicted pods go; their ReplicaSet makes each again
    under a new name."""
    for pod in cluster.list(POD):
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            cluster.delete(POD, meta["namespace"], meta["name"])
            again = build_pod(meta["name"].replace("-0", "-1"), gpu=2, group="a", owner=OWNER)
            cluster.create(again)


def test_the_moved_pod_and_the_gang_take_the_room_held_for_them() -> None:
    clock = ManualClock()
    cluster = load_cluster(objects(), clock)
    sched = scheduler(cluster, clock)
    first = sched.run_once()
    assert [e.pod for e in first.effects if isinstance(e, Evict)] == ["default/a-0"]
    assert first.reservations == {"default/a-0": "node-1", "default/big-0": "node-0"}
    assert set(sched.moves) == {"default/a", "default/big"}
    controller_step(cluster)
    # A job ahead of both in the queue (older) wants the held room on node-1.
    older = build_podgroup("x")
    older["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    cluster.create(older)
    cluster.create(build_pod("x-0", gpu=2, group="x"))
    clock.advance(1.0)
    second = sched.run_once()
    bound = {e.pod: e.node for e in second.effects if isinstance(e, Bind)}
    assert bound == {"default/a-1": "node-1", "default/big-0": "node-0"}
    assert "default/x-0" not in second.reservations
    # Every pod the room was held for sits on it: the holds end.
    clock.advance(1.0)
    sched.run_once()
    assert sched.moves == {}


def test_a_hold_for_pods_that_never_come_ends_after_its_limit() -> None:
    clock = ManualClock()
    cluster = load_cluster(objects(), clock)
    sched = scheduler(cluster, clock)
    sched.run_once()
    for pod in cluster.list(POD):          # a-0 goes; nothing makes it again
        if pod["metadata"].get("deletionTimestamp"):
            cluster.delete(POD, "default", pod["metadata"]["name"])
    for _ in range(2):
        clock.advance(1.0)
        sched.run_once()
    assert set(sched.moves) == {"default/a"}     # big runs; a's room is still held
    clock.advance(HOLD_LIMIT)
    sched.run_once()
    assert sched.moves == {}


# -- a moved sharer: the very part of a GPU planned for it is held ------------------------
GROUP = "runai-gpu-group"


def _reservation(group: str, node: str) -> dict[str, Any]:
    return build_pod(f"gpu-reservation-{group}", cpu=0, gpu=1, namespace="kaisched-system",
                     node=node, labels={"app": "kaisched-gpu-reservation", GROUP: group})


def _sharer(name: str, job: str, fraction: str, group: str | None = None,
            node: str | None = None, creation: str | None = None) -> dict[str, Any]:
    return build_pod(name, group=job, node=node, labels={GROUP: group} if group else None,
                     annotations={"gpu-fraction": fraction}, creation=creation,
                     owner={**OWNER, "name": job, "uid": f"{job}-uid"})


def sharing_objects() -> list[dict[str, Any]]:
    """node-0's one GPU is shared by a quarter (a-0); big wants it whole (and
    more CPU than node-1 has). node-1's g3 has half free, g4 a quarter:
    a-0's successor is planned on g4, the fullest with room for it."""
    return [build_node("node-0", cpu=8, gpu=1), build_node("node-1", cpu=4, gpu=2),
            *(build_podgroup(n) for n in ("a", "f", "h", "big")),
            _reservation("g1", "node-0"), _reservation("g3", "node-1"), _reservation("g4", "node-1"),
            _sharer("a-0", "a", "0.25", "g1", "node-0"), _sharer("f-0", "f", "0.5", "g3", "node-1"),
            _sharer("h-0", "h", "0.75", "g4", "node-1"), build_pod("big-0", cpu=6, gpu=1, group="big")]


def _group_of(cluster: MemoryCluster, name: str) -> str | None:
    pod = cluster.get(POD, "default", name)
    return pod["metadata"].get("labels", {}).get(GROUP) if pod is not None else None


def test_a_moved_sharer_gets_the_gpu_planned_for_it_in_a_later_session() -> None:
    """Session 1 moves a-0 onto node-1's g4. Before its controller makes it
    again, another quarter (x-0, ahead in the queue) arrives: it goes onto g3,
    not onto the quarter of g4 held for a-0's successor; a-1, made again in
    the session after, goes onto g4, as planned (unheld, x-0 took g4, the
    fullest, and a-1 went onto g3)."""
    clock = ManualClock()
    cluster = load_cluster(sharing_objects(), clock)
    sched = scheduler(cluster, clock)
    first = sched.run_once()
    assert [e.pod for e in first.effects if isinstance(e, Evict)] == ["default/a-0"]
    assert first.reservations["default/a-0"] == "node-1"
    [held] = sched.moves["default/a"].sharers
    assert held.gpu is not None and held.gpu.groups == ("g4",)
    cluster.delete(POD, "default", "a-0")          # gone; not made again yet
    older = build_podgroup("x")
    older["metadata"]["creationTimestamp"] = "2025-12-31T00:00:00Z"
    cluster.create(older)
    cluster.create(_sharer("x-0", "x", "0.25"))
    clock.advance(1.0)
    second = sched.run_once()
    assert {e.pod: e.node for e in second.effects if isinstance(e, Bind)}.get("default/x-0") \
        == "node-1"
    assert _group_of(cluster, "x-0") == "g3"
    cluster.create(_sharer("a-1", "a", "0.25"))    # its ReplicaSet makes it again
    clock.advance(1.0)
    third = sched.run_once()
    assert {e.pod: e.node for e in third.effects if isinstance(e, Bind)}.get("default/a-1") \
        == "node-1"
    assert _group_of(cluster, "a-1") == "g4"
