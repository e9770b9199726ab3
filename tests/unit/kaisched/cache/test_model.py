"""The model the cache keeps (kaisched/cache/model.py): one ClusterInfo changed in place as
events arrive, lent to a session and taken back with what the session did undone, and
after every change what a rebuild from scratch would be (Cache.check). The same over
random event sequences: test_consistency.py."""
from __future__ import annotations

import pytest

from kaisched.api.clock import ManualClock
from kaisched.api.resource import GPU
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus
from kaisched.cache import Cache
from kaisched.cluster.kinds import NODE, POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster
from tests.builders.objects import (
    build_node,
    build_pod,
    build_podgroup,
    load_cluster,
    reservation_pod,
    sharer_pod,
)

G = JobKey("default/g")
G0 = PodKey("default/g-0")


def synced() -> tuple[MemoryCluster, Cache]:
    """Two 4-CPU nodes; gang g (minimum 2): g-1 runs on n1 (1 CPU), g-0 waits."""
    cluster = load_cluster([build_node("n1", cpu=4), build_node("n2", cpu=4),
                            build_podgroup("g", min_member=2),
                            build_pod("g-0", cpu=1, group="g"),
                            build_pod("g-1", cpu=1, group="g", node="n1")])
    cache = Cache()
    cache.sync(cluster)
    return cluster, cache


def cpu_used(cache: Cache, now: float) -> list[float]:
    snap = cache.snapshot(now)
    return snap.table.used[:, snap.table.dim_index["cpu"]].tolist()


def test_one_cluster_info_is_kept_and_lent_not_rebuilt() -> None:
    _, cache = synced()
    assert cache.snapshot(0.0) is cache.snapshot(1.0)


def test_what_a_session_did_is_undone_when_the_model_is_taken_back() -> None:
    _, cache = synced()
    lent = cache.snapshot(0.0)
    lent.assign(lent.jobs[G].tasks[G0], TaskStatus.ALLOCATED, NodeName("n2"))
    assert lent.table.used[:, lent.table.dim_index["cpu"]].tolist() == [1000.0, 1000.0]
    again = cache.snapshot(1.0)
    assert again.jobs[G].tasks[G0].status is TaskStatus.PENDING
    assert cpu_used(cache, 2.0) == [1000.0, 0.0]
    assert cache.check(2.0) == []


def test_a_bound_pod_moves_its_task_and_its_nodes_row() -> None:
    cluster, cache = synced()
    pod = cluster.get(POD, "default", "g-0")
    cluster.replace({**pod, "spec": {**pod["spec"], "nodeName": "n2"}, "status": {"phase": "Running"}})
    cache.sync(cluster)
    snap = cache.snapshot(1.0)
    assert snap.jobs[G].tasks[G0].status is TaskStatus.RUNNING
    assert cpu_used(cache, 1.0) == [1000.0, 1000.0]
    assert cache.check(1.0) == []


def test_nodes_coming_and_going_lay_the_table_out_again() -> None:
    cluster, cache = synced()
    cluster.delete(NODE, "", "n1")
    cache.sync(cluster)
    assert cache.snapshot(1.0).table.names == ["n2"]
    assert cache.check(1.0) == []
    cluster.create(build_node("n3", cpu=8, gpu=2))         # a resource no column held
    cache.sync(cluster)
    snap = cache.snapshot(2.0)
    assert snap.table.names == ["n2", "n3"] and GPU in snap.table.dim_index
    assert cache.check(2.0) == []


def test_a_changed_podgroup_changes_what_its_job_declares() -> None:
    cluster, cache = synced()
    [group] = cluster.list(PODGROUP)
    cluster.replace({**group, "spec": {**group["spec"], "minMember": 1}})
    cache.sync(cluster)
    assert cache.snapshot(1.0).jobs[G].min_member == 1
    assert cache.check(1.0) == []


@pytest.mark.parametrize("order", ["reservation first", "sharer first", "node last"])
def test_the_cache_keeps_shared_gpus_as_a_rebuild_would(order: str) -> None:
    node = build_node("n", cpu=8, gpu=2, labels={"nvidia.com/gpu.memory": "40960"})
    pods = [sharer_pod("a", "0.5", "n", "g"), reservation_pod("r", "n", "g"),
            build_pod("m", node="n", annotations={"gpu-memory": "20450"}, labels={"runai-gpu-group": "g"}),
            reservation_pod("kai", "n", "k", "kai-resource-reservation", "runai-reservation")]
    if order == "sharer first":
        pods = [pods[0], pods[2], pods[1], pods[3]]
    objects = pods + [node] if order == "node last" else [node, *pods]
    cache = Cache()
    cluster = MemoryCluster(ManualClock())
    for obj in objects:
        cluster.create(obj)
    cache.sync(cluster)
    assert cache.check(0.0) == []
    snap = cache.snapshot(0.0)
    devices = snap.gpus.on(NodeName("n"))
    assert sorted(devices) == ["g", "k"]
    assert devices["g"].reservation == "kaisched-system/r" and devices["k"].kai
    # the memory pod's share of its GPU (labelled 40960: 40900 MiB), as its queue is charged
    task = snap.jobs[JobKey("default/m")].tasks[PodKey("default/m")]
    assert task.charge.get(GPU) == 0.5
    # Two GPUs held: g (sharers and its reservation pod) and KAI's orphaned k.
    col = snap.table.dim_index[GPU]
    assert snap.table.used[0, col] == 2000 and snap.table.releasing[0, col] == 1000
    # The sharers go: their reservation pod is an orphan; the cache follows.
    cluster.delete(POD, "default", "a")
    cluster.delete(POD, "default", "m")
    cache.sync(cluster)
    assert cache.check(0.0) == []
    assert sorted(d.group for d in cache.snapshot(0.0).gpus.orphans()) == ["g", "k"]
