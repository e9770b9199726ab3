"""NonStrict holds that block each other form a wait-for cycle; the youngest
gang's hold is released so the older one can finish."""
from __future__ import annotations

from kaisched.api.clock import ManualClock, to_rfc3339
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.framework.effects import CarriedGang
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler

START = 1_767_225_600.0


def objects() -> list[dict]:
    objs: list[dict] = []
    for node in ("node-1", "node-2"):
        objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                     "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}}})
    for offset, gang in enumerate(("older", "younger")):
        created = to_rfc3339(START - 100 + offset)
        objs.append({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                     "metadata": {"name": gang, "namespace": "default", "creationTimestamp": created},
                     "spec": {"minMember": 2, "mode": "NonStrict"}})
        for i in range(2):
            objs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"{gang}-{i}", "namespace": "default",
                                      "creationTimestamp": created,
                                      "annotations": {"kaisched.io/pod-group": gang}},
                         "spec": {"schedulerName": "kaisched", "containers": [
                             {"name": "main", "resources": {"requests": {"cpu": "2"}}}]}})
    return objs


def test_deadlocked_holds_release_the_youngest() -> None:
    clock = ManualClock(START)
    cluster = MemoryCluster(clock)
    for obj in objects():
        cluster.create(obj)
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now))
    # Each gang holds one node and waits for the other's: a deadlock.
    scheduler.holds = {"default/older": CarriedGang((("default/older-0", "node-1"),), START - 5),
                       "default/younger": CarriedGang((("default/younger-0", "node-2"),), START - 5)}

    first = scheduler.run_once()
    assert first.placed == {}
    assert set(scheduler.holds) == {"default/older"}
    assert scheduler.holds["default/older"].since == START - 5     # the timer carries on
    younger = cluster.get(PODGROUP, "default", "younger")["status"]["conditions"][0]["message"]
    assert "deadlocked with default/older" in younger

    clock.advance(1)
    second = scheduler.run_once()
    assert second.placed == {"default/older-0": "node-1", "default/older-1": "node-2"}
    assert scheduler.holds == {}


def test_holds_without_a_cycle_are_kept() -> None:
    clock = ManualClock(START)
    cluster = MemoryCluster(clock)
    for obj in objects():
        if obj["metadata"]["name"].startswith("younger"):
            continue
        cluster.create(obj)
    cluster.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "other", "namespace": "default"},
                    "spec": {"schedulerName": "someone-else", "nodeName": "node-2",
                             "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
                    "status": {"phase": "Running"}})
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now))
    result = scheduler.run_once()
    assert result.placed == {}
    assert scheduler.holds["default/older"].tasks == (("default/older-0", "node-1"),)
    assert result.reservations == {"default/older-0": "node-1"}
