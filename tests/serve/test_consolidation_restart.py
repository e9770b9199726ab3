"""A moved job's cooldown is kept in its PodGroup's status, so a scheduler
that starts afresh (a restart, a new leader) still leaves the job alone until
the cooldown has passed: run through the production loop on the memory
backend, each scheduler with a cache of its own."""
from __future__ import annotations

import threading
from typing import Any

from kaisched.api.clock import ManualClock, to_rfc3339
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import parse_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler, serve

PG = "scheduling.kaisched.io/v1alpha1"
CONFIG = ("schedulePeriod: 1ms\nactions: [allocate, consolidation]\n"
          "consolidation: {maxPods: 4, cooldown: 10m}\n"
          "tiers: [{plugins: [{name: priority}, {name: gang}, {name: proportion}, "
          "{name: predicates}, {name: nodeaffinity}]}]\n")


def node(cluster: MemoryCluster, name: str) -> None:
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                    "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}}})


def group(cluster: MemoryCluster, name: str) -> None:
    cluster.create({"apiVersion": PG, "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": 1}})


def pod(cluster: MemoryCluster, name: str, job: str, cpu: str, node: str | None = None,
        controlled: bool = True) -> None:
    meta: dict[str, Any] = {"name": name, "namespace": "default",
                            "annotations": {"kaisched.io/pod-group": job}}
    if controlled:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": job,
                                    "uid": f"{job}-uid", "controller": True}]
    spec: dict[str, Any] = {"schedulerName": "kaisched", "containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node is not None:
        spec["nodeName"] = node
    cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
                    "status": {"phase": "Running" if node else "Pending"}})


def start_scheduler(cluster: MemoryCluster) -> None:
    """A scheduler with nothing remembered: its cache is filled from the cluster."""
    registry = register_builtins()
    clock = cluster.clock
    scheduler = Scheduler(cluster, parse_config(CONFIG, registry), registry, clock,
                          Binder(cluster, clock.now))
    serve(scheduler, threading.Event(), None, None, cycles=1)


def evicting(cluster: MemoryCluster) -> set[str]:
    return {p["metadata"]["name"] for p in cluster.list(POD)
            if p["metadata"].get("deletionTimestamp")}


def test_a_moved_jobs_cooldown_survives_a_restart() -> None:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    cluster.create({"apiVersion": PG, "kind": "Queue", "metadata": {"name": "default"},
                    "spec": {"priority": 1}})
    node(cluster, "n1")
    node(cluster, "n2")
    for name in ("a", "b", "big"):
        group(cluster, name)
    pod(cluster, "a-0", "a", "2", node="n1")
    pod(cluster, "b-0", "b", "2", node="n2", controlled=False)   # bare: never moves
    pod(cluster, "big-0", "big", "3")

    start_scheduler(cluster)
    assert evicting(cluster) == {"a-0"}
    moved_at = to_rfc3339(clock.now())
    status = cluster.get(PODGROUP, "default", "a")["status"]
    assert status["lastMovedTime"] == moved_at

    # a's controller makes its pod again, and it lands back on n1 (no
    # scheduler kept the room held for it): big is blocked as before.
    cluster.delete(POD, "default", "a-0")
    pod(cluster, "a-1", "a", "2", node="n1")

    clock.advance(60)
    start_scheduler(cluster)                     # a new scheduler, within a's cooldown
    assert evicting(cluster) == set()
    assert cluster.get(PODGROUP, "default", "a")["status"]["lastMovedTime"] == moved_at

    clock.advance(600)
    start_scheduler(cluster)                     # the cooldown has passed
    assert evicting(cluster) == {"a-1"}
    assert cluster.get(PODGROUP, "default", "a")["status"]["lastMovedTime"] == to_rfc3339(clock.now())
