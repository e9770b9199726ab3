"""Consolidation over the wire: the real kubernetes client against the
emulator. Two 4-GPU nodes each run a 2-GPU pod of a ReplicaSet; a pending
3-GPU pod fits on neither as they stand. One session moves a pod: its
eviction goes out through the eviction subresource, an Event says it was
moved by consolidation and where it goes, and its PodGroup's status keeps
lastMovedTime (its cooldown). The test plays the ReplicaSet controller
(nothing here runs one): it makes the moved pod again under a new name. The
pod made again is bound on the room held for it, and the pending pod on the
room the move freed."""
from __future__ import annotations

import attrs

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT, POD, PODGROUP
from kaisched.cluster.kube import KubeCluster
from kaisched.framework.config import default_config
from kaisched.framework.effects import Cause, Evict
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.wire import Emulator, Obj, build_node, build_pod, build_podgroup, cycles_until


def _gpu_node(name: str) -> Obj:
    node = build_node(name, cpu="8")
    node["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    return node


def _gpu_pod(name: str, group: str, gpus: str, node: str | None = None) -> Obj:
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": group,
             "uid": f"{group}-uid", "controller": True}
    pod = build_pod(name, group=group, owner=owner if group != "big" else None)
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "nvidia.com/gpu": gpus},
                                                 "limits": {"nvidia.com/gpu": gpus}}
    if node is not None:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}
    return pod


def _node_of(cluster: KubeCluster, name: str) -> str | None:
    pod = cluster.get(POD, "default", name)
    return (pod or {}).get("spec", {}).get("nodeName")


def test_a_move_is_an_eviction_with_cause_consolidation_and_the_gang_binds_after(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    older = build_podgroup("b")     # of two moves freeing as much, the newer job's (a's) goes
    older["metadata"]["creationTimestamp"] = "2025-12-31T12:00:00Z"
    for obj in (_gpu_node("n0"), _gpu_node("n1"),
                build_podgroup("a"), older, build_podgroup("big"),
                _gpu_pod("a-0", "a", "2", "n0"), _gpu_pod("b-0", "b", "2", "n1"),
                _gpu_pod("big-0", "big", "3")):
        cluster.create(obj)
    registry = register_builtins()
    base = default_config(registry)
    config = attrs.evolve(base, actions=("allocate", "consolidation", *base.actions[1:]))
    clock = ManualClock()
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now, workers=2))

    first = scheduler.run_once()
    assert not first.report.failed, first.report.failed
    [moved] = [e for e in first.effects if isinstance(e, Evict)]
    assert (moved.pod, moved.cause, moved.node) == ("default/a-0", Cause.CONSOLIDATION, "n0")
    assert first.reservations == {"default/a-0": "n1", "default/big-0": "n0"}
    assert cluster.get(POD, "default", "a-0") is None          # evicted (the emulator deletes)
    # The cycle waits for binds and evictions; Events and statuses queue
    # behind them (the binder's workers write them as they come).
    scheduler.binder.wait(writes=True)
    events = [e for e in cluster.list(EVENT, "default")
              if e["involvedObject"].get("name") == "a-0"]
    assert [e["reason"] for e in events] == ["Evicted"], events
    assert "moved by consolidation to make room for default/big" in events[0]["message"]
    assert "node n1" in events[0]["message"]
    status = cluster.get(PODGROUP, "default", "a").get("status") or {}
    assert status.get("lastMovedTime"), status
    assert _node_of(cluster, "big-0") is None                   # pipelined, not bound

    # The ReplicaSet makes its pod again; it goes onto the room held for it,
    # and big onto the room the move freed.
    cluster.create(_gpu_pod("a-1", "a", "2"))
    clock.advance(1.0)
    cycles_until(scheduler, lambda: _node_of(cluster, "a-1") is not None
                 and _node_of(cluster, "big-0") is not None)
    assert (_node_of(cluster, "a-1"), _node_of(cluster, "big-0")) == ("n1", "n0")
    assert cluster.get(PODGROUP, "default", "a")["status"]["lastMovedTime"] == status["lastMovedTime"]
    scheduler.binder.stop()
