"""GPU sharing's device model (kaisched/api/gpudevices.py): the devices of a node as
sharers come and go, the node table counting a shared GPU once, where a share goes on a
node, and statements undoing placements exactly. A pod's share is read in test_gpuask.py;
the cache keeps the devices in tests/unit/kaisched/cache/test_model.py; the binder makes
reservation pods in tests/unit/kaisched/runtime/test_binder_gpusharing.py; the plugin
deciding with them is tests/unit/plugins/test_gpusharing.py."""
from __future__ import annotations

import numpy as np

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.gpuask import GpuShare
from kaisched.api.gpudevices import WholeGpu
from kaisched.api.job import GangSpec, JobInfo
from kaisched.api.node import NodeSpec
from kaisched.api.resource import GPU, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import Session, default_config


def _sharer(name: str, fraction: float, status: TaskStatus = TaskStatus.PENDING,
            groups: tuple[str, ...] = ()) -> TaskInfo:
    node = NodeName("n") if status is not TaskStatus.PENDING else None
    return TaskInfo(PodKey(f"ns/{name}"), f"uid-{name}", JobKey(f"ns/{name}"), status,
                    Resource.of({"cpu": 1000, "pods": 1}), node,
                    gpu=GpuShare(fraction, None, 1, groups, fraction))


NAMES = ("a", "b", "c", "run", "go")


def _cluster(gpus: int = 2, memory: str | None = "10000") -> ClusterInfo:
    """One node, and a pending half-GPU pod of its own gang for each of NAMES."""
    labels = {"nvidia.com/gpu.memory": memory} if memory else {}
    spec = NodeSpec(NodeName("n"), Resource.of({"cpu": 16000, GPU: gpus, "pods": 110}), labels)
    jobs = []
    for name in NAMES:
        job = JobInfo(JobKey(f"ns/{name}"), GangSpec())
        job.add_task(_sharer(name, 0.5))
        jobs.append(job)
    return ClusterInfo.assemble([spec], jobs, [])


def _task(cluster: ClusterInfo, name: str) -> TaskInfo:
    return cluster.jobs[JobKey(f"ns/{name}")].tasks[PodKey(f"ns/{name}")]


def _gpu_row(cluster: ClusterInfo) -> tuple[float, float, float, float]:
    t, col = cluster.table, cluster.table.dim_index[GPU]
    return tuple(float(getattr(t, k)[0, col] / 1000) for k in ("used", "releasing", "pipelined", "future"))


def test_a_shared_gpu_counts_once_and_is_given_back_with_its_last_sharer() -> None:
    cluster = _cluster()
    model = cluster.gpus
    a, b = _task(cluster, "a"), _task(cluster, "b")
    placed_a = cluster.assign(a, TaskStatus.ALLOCATED, NodeName("n"))
    placed_b = cluster.assign(b, TaskStatus.ALLOCATED, NodeName("n"))
    assert placed_a.gpu.groups == placed_b.gpu.groups      # the second joins the first's GPU
    assert _gpu_row(cluster) == (1.0, 0.0, 0.0, 1.0)      # one GPU, however many share it
    device = model.on(NodeName("n"))[placed_a.gpu.groups[0]]
    assert device.free_now == 0 and device.whole_gpu() is WholeGpu.USED
    ra = cluster.release(placed_a)
    assert _gpu_row(cluster) == (1.0, 0.0, 0.0, 1.0)      # b stays
    rb = cluster.release(placed_b)
    assert _gpu_row(cluster) == (1.0, 1.0, 0.0, 2.0)      # every sharer going: the GPU comes back
    assert device.whole_gpu() is WholeGpu.RELEASING
    cluster.unrelease(rb, placed_b)
    cluster.unrelease(ra, placed_a)
    cluster.unassign(placed_b, b)
    cluster.unassign(placed_a, a)
    assert _gpu_row(cluster) == (0.0, 0.0, 0.0, 2.0)
    assert not model                                       # undone to nothing at all


def test_a_fraction_waits_on_a_shared_gpu_rather_than_open_a_free_one() -> None:
    cluster = _cluster()
    running = cluster.assign(_task(cluster, "run"), TaskStatus.ALLOCATED, NodeName("n"))
    leaving = cluster.assign(_task(cluster, "go"), TaskStatus.ALLOCATED, NodeName("n"))
    cluster.release(leaving)
    plan = cluster.gpus.plan(GpuShare(0.5, None, 1, portion=0.5), NodeName("n"), *cluster.whole_gpus(0))
    assert plan is not None and plan[0][0] == running.gpu.groups[0]     # not the free GPU


def test_a_reservation_pod_without_sharers_is_an_orphan_and_its_gpu_comes_back() -> None:
    cluster = _cluster(gpus=1)
    changes = cluster.gpus.reserve(NodeName("n"), "lost", PodKey("kaisched-system/r"), False, True)
    assert changes == [("n", None, WholeGpu.RELEASING)]
    assert [d.group for d in cluster.gpus.orphans()] == ["lost"]
    # A pending pod labelled with it (its bind failed) keeps it: no orphan.
    waiting = _sharer("w", 0.5, groups=("lost",))
    cluster.gpus.move(None, waiting)
    assert cluster.gpus.orphans() == []
    assert cluster.gpus.on(NodeName("n"))["lost"].whole_gpu() is WholeGpu.USED


def test_a_memory_share_needs_a_labelled_gpu_large_enough() -> None:
    cluster = _cluster(memory=None)
    assert cluster.gpus.plan(GpuShare(None, 1000), NodeName("n"), 2, 2) is None
    cluster = _cluster(memory="10000")
    assert cluster.gpus.plan(GpuShare(None, 20000), NodeName("n"), 2, 2) is None
    assert cluster.gpus.plan(GpuShare(None, 6000), NodeName("n"), 2, 2) is not None


def test_a_statement_rolls_a_gang_of_sharers_back_to_nothing() -> None:
    cluster = _cluster(gpus=1)
    registry = register_builtins()
    config = default_config(registry)
    ssn = Session(cluster, config, registry.build_plugins(config))
    before = (cluster.table.used.copy(), cluster.table.future.copy())
    stmt = ssn.statement()
    for name in ("a", "b"):
        task = _task(cluster, name)
        assert ssn.select_node(task) is not None
        stmt.allocate(task, NodeName("n"))
    assert ssn.select_node(_task(cluster, "c")) is None          # the one GPU is full
    stmt.discard()
    assert np.array_equal(cluster.table.used, before[0]) and np.array_equal(cluster.table.future, before[1])
    assert not cluster.gpus


