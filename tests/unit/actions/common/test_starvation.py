"""The starvation guard against a stream of small jobs, over virtual time.

Two 8-GPU nodes; a 16-GPU gang waits while 1-GPU pods arrive every 2 s and run
for 20 s, so the cluster is never empty. Without the guard the gang never
starts; with it, once the gang has waited past its threshold, the room it
needs is held for it, the small pods drain, and it starts whole.
"""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from podgrouper.controller import PodGrouper

RUN_SECONDS = 20


def _node(name: str, pool: str = "train") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"pool": pool}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110",
                                       "nvidia.com/gpu": "8"}}}


def _pod(name: str, gpus: int, group: str | None = None) -> dict[str, Any]:
    gpu = {"nvidia.com/gpu": str(gpus)}
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": "kaisched", "containers": [
                {"name": "main", "image": "trainer",
                 "resources": {"requests": {"cpu": "1", **gpu}, "limits": gpu}}]}}


def _big_gang(threshold: int) -> list[dict[str, Any]]:
    pg = {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
          "metadata": {"name": "big", "namespace": "default"},
          "spec": {"minMember": 8, "starvationThresholdSeconds": threshold}}
    pods = [_pod(f"big-{i}", 2, group="big") for i in range(8)]
    for pod in pods:
        pod["spec"]["nodeSelector"] = {"pool": "train"}
    return [pg] + pods


def _simulate(threshold: int, seconds: int,
              small_bound: dict[str, float] | None = None) -> tuple[float | None, MemoryCluster]:
    """Run the loop; return when the big gang started (virtual seconds), if it did.
    small_bound, if given, gets when each small pod was bound."""
    clock = ManualClock()
    start = clock.now()
    cluster = MemoryCluster(clock)
    for name in ("gpu-a", "gpu-b"):
        cluster.create(_node(name))
    # The cluster is busy when the gang arrives: 14 of 16 GPUs in use.
    started: dict[str, float] = {}
    for i in range(14):
        cluster.create({**_pod(f"early-{i}", 1), "spec": {
            **_pod(f"early-{i}", 1)["spec"], "nodeName": "gpu-a" if i < 8 else "gpu-b"},
            "status": {"phase": "Running"}})
        started[f"early-{i}"] = start - (i * RUN_SECONDS / 14)
    for obj in _big_gang(threshold):
        cluster.create(obj)
    config = default_config(register_builtins())
    grouper = PodGrouper(cluster, clock, scheduler_name="kaisched")
    scheduler = Scheduler(cluster, config, register_builtins(), clock, Binder(cluster, clock.now))
    arrivals = 0
    for second in range(seconds):
        if second % 2 == 0:
            cluster.create(_pod(f"small-{arrivals}", 1))
            arrivals += 1
        _kubelet(cluster, clock.now(), started)
        grouper.sync()
        scheduler.run_once()
        if small_bound is not None:
            for p in cluster.list(POD):
                name = p["metadata"]["name"]
                if name.startswith("small-") and p["spec"].get("nodeName"):
                    small_bound.setdefault(name, clock.now() - start)
        bound = [p for p in cluster.list(POD) if p["metadata"]["name"].startswith("big-")
                 and p["spec"].get("nodeName")]
        assert len(bound) in (0, 8), "the gang started in part"
        if bound:
            return clock.now() - start, cluster
        clock.advance(1)
    return None, cluster


def _kubelet(cluster: MemoryCluster, now: float, started: dict[str, float]) -> None:
    """Bound pods run for RUN_SECONDS, then succeed; deleted pods go."""
    for pod in cluster.list(POD):
        meta, status = pod["metadata"], pod.get("status") or {}
        name = meta["name"]
        if meta.get("deletionTimestamp"):
            cluster.delete(POD, "default", name)
        elif pod["spec"].get("nodeName") and status.get("phase", "Pending") == "Pending":
            started[name] = now
            cluster.replace({**pod, "status": {**status, "phase": "Running"}})
        elif status.get("phase") == "Running" and now - started.get(name, now) >= RUN_SECONDS:
            cluster.replace({**pod, "status": {**status, "phase": "Succeeded"}})


def test_without_the_guard_the_big_gang_starves() -> None:
    when, cluster = _simulate(threshold=0, seconds=240)
    assert when is None
    cond = cluster.get(PODGROUP, "default", "big")["status"]["conditions"][0]
    assert "reserving" not in cond["message"]


def test_the_guard_holds_room_until_the_gang_starts() -> None:
    small_bound: dict[str, float] = {}
    when, cluster = _simulate(threshold=30, seconds=240, small_bound=small_bound)
    assert when is not None
    # Past the threshold, at most one run of the small pods already there.
    assert 30 <= when <= 30 + RUN_SECONDS + 2
    # The gang needs both nodes: once its room is held, no small pod takes any.
    assert small_bound and min(small_bound.values()) < 30       # they did run before
    assert [n for n, at in small_bound.items() if 30 < at < when] == []


def test_the_condition_says_room_is_held() -> None:
    when, cluster = _simulate(threshold=30, seconds=35)
    assert when is None          # still draining
    cond = cluster.get(PODGROUP, "default", "big")["status"]["conditions"][0]
    assert cond["reason"] == "Unschedulable"
    assert "reserving 2 node(s) for this gang since 2026-01-01T00:00:30Z" in cond["message"]


@pytest.mark.parametrize("threshold", [30])
def test_small_jobs_still_use_nodes_the_gang_does_not_need(threshold: int) -> None:
    """A node the gang cannot use keeps taking small pods."""
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for name in ("gpu-a", "gpu-b"):
        cluster.create(_node(name))
    cluster.create(_node("gpu-c", pool="infer"))
    for i in range(16):
        cluster.create({**_pod(f"early-{i}", 1), "spec": {
            **_pod(f"early-{i}", 1)["spec"], "nodeName": ("gpu-a", "gpu-b")[i // 8]},
            "status": {"phase": "Running"}})
    for i in range(8):          # gpu-c is full of 1-GPU pods too, all but one GPU
        if i < 7:
            cluster.create({**_pod(f"c-{i}", 1), "spec": {**_pod(f"c-{i}", 1)["spec"],
                            "nodeName": "gpu-c"}, "status": {"phase": "Running"}})
    for obj in _big_gang(threshold):
        cluster.create(obj)
    config = default_config(register_builtins())
    grouper = PodGrouper(cluster, clock, scheduler_name="kaisched")
    scheduler = Scheduler(cluster, config, register_builtins(), clock, Binder(cluster, clock.now))
    for _ in range(threshold + 1):
        grouper.sync()
        scheduler.run_once()
        clock.advance(1)
    cluster.create(_pod("late", 1))
    grouper.sync()
    result = scheduler.run_once()
    assert result.placed == {"default/late": "gpu-c"}
    cond = cluster.get(PODGROUP, "default", "big")["status"]["conditions"][0]
    assert "reserving 2 node(s)" in cond["message"]



def test_a_gang_beyond_its_queues_fair_share_is_not_held_room() -> None:
    """Two queues of 8 GPUs each; team-b's small pods run and keep coming. team-a's gang
    asks 16 GPUs, twice its share while team-b wants its own: started, it would be
    reclaimed at once, so no room is held for it (the condition says no reservation)."""
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for name in ("gpu-a", "gpu-b"):
        cluster.create(_node(name))
    for team in ("team-a", "team-b"):
        cluster.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
                        "metadata": {"name": team},
                        "spec": {"resources": {"nvidia.com/gpu": {"quota": 8}}}})

    def small(name: str, node: str | None = None) -> dict[str, Any]:
        pod = _pod(name, 1)
        pod["metadata"]["labels"] = {"kaisched.io/queue": "team-b"}
        if node:
            pod["spec"]["nodeName"] = node
            pod["status"] = {"phase": "Running"}
        return pod
    for i in range(14):
        cluster.create(small(f"early-{i}", "gpu-a" if i < 8 else "gpu-b"))
    for i in range(4):
        cluster.create(small(f"waiting-{i}"))
    for obj in _big_gang(5):
        if obj["kind"] == "PodGroup":
            obj["spec"]["queue"] = "team-a"
        cluster.create(obj)
    config = default_config(register_builtins())
    grouper = PodGrouper(cluster, clock, scheduler_name="kaisched")
    scheduler = Scheduler(cluster, config, register_builtins(), clock, Binder(cluster, clock.now))
    for _ in range(10):
        grouper.sync()
        scheduler.run_once()
        clock.advance(1)
    cond = cluster.get(PODGROUP, "default", "big")["status"]["conditions"][0]
    assert cond["reason"] == "Unschedulable" and "reserving" not in cond["message"], cond
