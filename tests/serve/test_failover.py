"""A standby that followed the cluster takes over: it writes nothing while it
stands by, decides what the old leader would have decided, and looks again
at what the old leader left unsaid, but not at what it already said."""
from __future__ import annotations

from collections import Counter
from typing import Any

from kaisched.api.clock import ManualClock
from kaisched.bench import scale10k as bench_scale
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.framework.effects import Effect, SetPodGroupStatus
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler

REGISTRY = register_builtins()
CONFIG = default_config(REGISTRY)
SCALE = 0.005           # scale-10k's mix: 50 nodes, 1,500 pods
PG_API = "scheduling.kaisched.io/v1alpha1"


def world() -> tuple[MemoryCluster, ManualClock]:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    nodes, others = bench_scale.scale_10k(SCALE)
    for obj in nodes + others:
        cluster.create(obj)
    return cluster, clock


def scheduler(cluster: MemoryCluster, clock: ManualClock) -> Scheduler:
    return Scheduler(cluster, CONFIG, REGISTRY, clock, Binder(cluster, clock.now))


def said(effects: list[Effect]) -> Counter[str]:
    return Counter(map(repr, effects))


def test_a_takeover_decides_what_the_old_leader_would_have() -> None:
    outcomes = []
    for takeover in (False, True):
        cluster, clock = world()
        leader = scheduler(cluster, clock)
        leader.run_once()
        standby = scheduler(cluster, clock) if takeover else None
        for step in (1, 2, 3):
            if standby is not None:
                standby.follow()
            bench_scale.churn_step(cluster, SCALE, step)
            clock.advance(1.0)
            if step < 3:
                leader.run_once()
        if standby is not None:
            leader.close()
            standby.follow()            # the Lease runs out meanwhile
        deciding = standby if standby is not None else leader
        outcomes.append(deciding.run_once())
    kept, taken = outcomes
    assert kept.placed and kept.placed == taken.placed
    assert said(kept.effects) == said(taken.effects)


def everything(cluster: MemoryCluster) -> dict[tuple[str, str, str], str]:
    """Every object the cluster holds, with its resourceVersion."""
    return {(str(kind), obj["metadata"].get("namespace", ""), obj["metadata"]["name"]):
            obj["metadata"]["resourceVersion"] for kind in cluster.kinds()
            for obj in cluster.list(kind)}


def test_a_standby_writes_nothing() -> None:
    cluster, clock = world()
    leader, standby = scheduler(cluster, clock), scheduler(cluster, clock)
    leader.run_once()
    for step in (1, 2):
        bench_scale.churn_step(cluster, SCALE, step)
        clock.advance(1.0)
        before = everything(cluster)
        standby.follow()
        assert everything(cluster) == before
        leader.run_once()


def gang(cluster: MemoryCluster, name: str, status: dict[str, Any]) -> None:
    cluster.create({"apiVersion": PG_API, "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "ml"},
                    "spec": {"minMember": 2}, "status": status})
    for i in range(2):
        cluster.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{name}-{i}", "namespace": "ml",
                                     "annotations": {"kaisched.io/pod-group": name}},
                        "spec": {"schedulerName": "kaisched", "nodeName": "n1", "containers": [
                            {"name": "main", "resources": {"requests": {"cpu": "1"}}}]},
                        "status": {"phase": "Running"}})


def test_the_new_leader_says_what_the_old_one_left_unsaid_and_only_that() -> None:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                    "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}})
    # Two gangs run; the old leader wrote the status of one, and died before
    # writing the other's (its status is put back to what it was before).
    gang(cluster, "said", {})
    gang(cluster, "unsaid", {})
    scheduler(cluster, clock).run_once()
    cluster.patch_status(PODGROUP, "ml", "unsaid", {"phase": "Pending", "running": 0,
                                                     "scheduled": 0, "conditions": None})
    standby = scheduler(cluster, clock)
    standby.follow()
    clock.advance(1.0)
    result = standby.run_once()
    assert result.cluster is not None
    active = {job.key for job in result.cluster.active_jobs()}
    assert "ml/said" not in active     # settled as the old leader left it
    written = {e.job for e in result.effects if isinstance(e, SetPodGroupStatus)}
    assert written == {"ml/unsaid"}
