"""GPU sharing's model: a pod's share read off its annotations, the devices
of a node as sharers come and go, the node table counting a shared GPU once,
statements undoing placements exactly, the cache keeping it all by events,
and the binder's reservation pods."""
from __future__ import annotations

import numpy as np
import pytest

from kaisched.api.clock import ManualClock
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.gpuask import GpuShare, gpu_memory_label, group_labels, parse_share, reservation_name
from kaisched.api.gpudevices import WholeGpu
from kaisched.api.job import GangSpec, JobInfo
from kaisched.api.node import NodeSpec
from kaisched.api.resource import GPU, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus
from kaisched.builtins.catalog import register_builtins
from kaisched.cache import Cache
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Session, default_config
from kaisched.framework.effects import ReleaseGpu, Reservation, ShareGpu
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler

from .conftest import build_node, build_pod, load_cluster, taint


@pytest.mark.parametrize(("annotations", "gpu", "share", "problem"), [
    ({"gpu-fraction": "0.5"}, 0, GpuShare(0.5, None, 1, (), 0.5), None),
    ({"gpu-fraction": "1"}, 0, GpuShare(1.0, None, 1, (), 1.0), None),
    ({"gpu-memory": "20480"}, 0, GpuShare(None, 20480, 1, (), None), None),
    ({"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}, 0, GpuShare(0.25, None, 2, (), 0.25),
     None),
    ({"gpu-fraction": "1.5"}, 0, None, "must be in (0, 1]"),
    ({"gpu-fraction": "-0.5"}, 0, None, "must be in (0, 1]"),
    ({"gpu-fraction": "nan"}, 0, None, "must be in (0, 1]"),
    ({"gpu-fraction": "half"}, 0, None, "must be a number in (0, 1]"),
    ({"gpu-memory": "20Gi"}, 0, None, "gpu-memory '20Gi': must be an integer number of MiB"),
    ({"gpu-memory": "0"}, 0, None, "must be an integer number of MiB"),
    ({"gpu-fraction": "0.5"}, 1, None, "does not also request nvidia.com/gpu"),
    ({"gpu-fraction": "0.5", "gpu-memory": "100"}, 0, None, "one or the other, not both"),
    ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, 0, None, "integer >= 1"),
    ({"gpu-fraction-num-devices": "2"}, 0, None, "only with gpu-fraction or gpu-memory"),
    ({}, 1, None, None),
])
def test_a_share_is_read_or_refused_saying_why(annotations, gpu, share, problem) -> None:
    got, why = parse_share(annotations, {}, gpu)
    assert got == share
    assert (why is None) == (problem is None)
    if problem:
        assert problem in why and why.startswith(("annotation", "annotations"))


def test_the_groups_a_pod_holds_are_read_back_and_written_as_kai_does() -> None:
    share, _ = parse_share({"gpu-fraction": "0.5"}, {"runai-gpu-group": "g1"}, 0)
    assert share.groups == ("g1",)
    several, _ = parse_share({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"},
                             {"runai-gpu-group": "a", "runai-gpu-group/a": "a",
                              "runai-gpu-group/b": "b"}, 0)
    assert several.groups == ("a", "b")
    assert group_labels(("a", "b"), previous=("c",)) == {
        "runai-gpu-group": "a", "runai-gpu-group/a": "a", "runai-gpu-group/b": "b",
        "runai-gpu-group/c": None}
    assert len(reservation_name("x" * 80)) <= 63


def test_units_and_charge_on_a_device() -> None:
    half, mem = GpuShare(0.5, None, 1, portion=0.5), GpuShare(None, 20000)
    assert half.units(None) == 500 and half.units(40960) == 20480
    assert mem.units(None) is None and mem.units(10000) is None and mem.units(40960) == 20000
    assert mem.portion_on(40960) == 0.49        # rounded up to a hundredth, as KAI charges
    assert half.charge == Resource.of({GPU: 0.5})
    assert mem.charge.get("kaisched.io/gpu-memory-mib") == 20000


@pytest.mark.parametrize(("label", "mib"), [
    ("40960", 40900),               # MiB, floored to a multiple of 100 (KAI's getNodeGpuMemory)
    ("81920", 81900),
    ("16384", 16300),
    ("100", 100),
    ("42949672960", 40900),         # bytes, as an old GPU feature discovery wrote them
    ("99", None),                   # floored to nothing: no memory to share
    ("0", None),
    ("40GiB", None),
])
def test_node_gpu_memory_is_read_in_mib_floored_to_100_as_kai_reads_it(label, mib) -> None:
    assert gpu_memory_label({"nvidia.com/gpu.memory": label}) == mib


def test_a_memory_share_is_charged_its_part_of_the_gpu_of_the_node_it_goes_to() -> None:
    """Placing it, its queue is asked about its part of that node's GPU (KAI's
    IsTaskAllocationOnNodeOverCapacity); the job-level checks, about the smallest GPU's."""
    specs = [NodeSpec(NodeName(n), Resource.of({"cpu": 16000, GPU: 1, "pods": 110}),
                      {"nvidia.com/gpu.memory": m}) for n, m in (("big", "80000"), ("small", "40000"))]
    job = JobInfo(JobKey("ns/m"), GangSpec())
    job.add_task(TaskInfo(PodKey("ns/m"), "uid-m", JobKey("ns/m"), TaskStatus.PENDING,
                          Resource.of({"cpu": 1000, "pods": 1}), gpu=GpuShare(None, 20000, 2)))
    cluster = ClusterInfo.assemble(specs, [job], [])
    task = cluster.jobs[JobKey("ns/m")].tasks[PodKey("ns/m")]
    assert cluster.charge(task).get(GPU) == 1.0                                  # 0.5 x 2 devices
    assert cluster.charge(cluster.charged_on(task, NodeName("big"))).get(GPU) == 0.5   # 0.25 x 2
    assert cluster.charge(cluster.charged_on(task, NodeName("small"))).get(GPU) == 1.0
    rows = cluster.gpu_memory_rows()
    assert sorted(rows) == [40000, 80000] and rows[80000].tolist() == [True, False]
    assert GpuShare(0.5, None, 2, portion=0.5).at(80000) == GpuShare(0.5, None, 2, portion=0.5)


# -- the devices and the table -------------------------------------------------------

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


# -- the cache ---------------------------------------------------------------------------

def _sharer_pod(name: str, fraction: str, node: str | None = None, group: str | None = None):
    labels = {"runai-gpu-group": group} if group else {}
    return build_pod(name, node=node, annotations={"gpu-fraction": fraction}, labels=labels)


def _reservation(name: str, node: str, group: str, namespace: str = "kaisched-system",
                 app: str = "kaisched-gpu-reservation"):
    pod = build_pod(name, gpu=1, node=node, namespace=namespace, scheduler="default-scheduler",
                    labels={"app": app, "runai-gpu-group": group})
    return pod


@pytest.mark.parametrize("order", ["reservation first", "sharer first", "node last"])
def test_the_cache_keeps_shared_gpus_as_a_rebuild_would(order: str) -> None:
    node = build_node("n", cpu=8, gpu=2, labels={"nvidia.com/gpu.memory": "40960"})
    pods = [_sharer_pod("a", "0.5", "n", "g"), _reservation("r", "n", "g"),
            build_pod("m", node="n", annotations={"gpu-memory": "20450"}, labels={"runai-gpu-group": "g"}),
            _reservation("kai", "n", "k", "kai-resource-reservation", "runai-reservation")]
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


# -- the binder ---------------------------------------------------------------------------

def test_the_binder_makes_the_reservation_pod_before_recording_the_sharer() -> None:
    cluster = load_cluster([build_node("n", gpu=1), _sharer_pod("a", "0.5")])
    binder = Binder(cluster, ManualClock().now)
    tolerations = ()
    reserve = Reservation(PodKey("kaisched-system/gpu-reservation-g"), NodeName("n"), "g",
                          tolerations, "registry.k8s.io/pause:3.10")
    share = ShareGpu(PodKey("default/a"), JobKey("default/a"), NodeName("n"), ("g",), (), (reserve,))
    report = binder.apply([share, share])           # a second sharer's: the pod exists already
    assert not report.failed
    made = cluster.get(POD, "kaisched-system", "gpu-reservation-g")
    assert made["spec"]["nodeName"] == "n"
    assert made["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert made["spec"]["priorityClassName"] == "system-node-critical"
    assert made["metadata"]["labels"] == {"app": "kaisched-gpu-reservation", "runai-gpu-group": "g",
                                          "app.kubernetes.io/part-of": "kaisched"}
    sharer = cluster.get(POD, "default", "a")
    assert sharer["metadata"]["labels"]["runai-gpu-group"] == "g"
    assert sharer["metadata"]["annotations"]["received-resource-type"] == "Fraction"
    binder.apply([ReleaseGpu(PodKey("kaisched-system/gpu-reservation-g"), NodeName("n"), "g")])
    assert cluster.get(POD, "kaisched-system", "gpu-reservation-g") is None


def test_a_reservation_pod_tolerates_what_its_sharer_tolerates() -> None:
    """On a tainted GPU node the kubelet admits the reservation pod too: it
    carries the tolerations of the sharer it is made for."""
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    pod = _sharer_pod("a", "0.5")
    pod["spec"]["tolerations"] = tolerations
    cluster = load_cluster([build_node("n", gpu=1, taints=[taint("dedicated", "gpu")]), pod])
    registry, clock = register_builtins(), ManualClock()
    result = Scheduler(cluster, default_config(registry), registry, clock,
                       Binder(cluster, clock.now)).run_once()
    assert not result.report.failed and cluster.get(POD, "default", "a")["spec"]["nodeName"] == "n"
    [made] = cluster.list(POD, "kaisched-system")
    assert made["spec"]["nodeName"] == "n" and made["spec"]["tolerations"] == tolerations


def test_kais_orphaned_reservation_pods_are_evicted_not_deleted() -> None:
    cluster = load_cluster([build_node("n", gpu=1),
                            _reservation("r", "n", "k", "kai-resource-reservation", "runai-reservation")])
    Binder(cluster, ManualClock().now).apply(
        [ReleaseGpu(PodKey("kai-resource-reservation/r"), NodeName("n"), "k", kai=True)])
    assert cluster.get(POD, "kai-resource-reservation", "r")["metadata"].get("deletionTimestamp")


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


def test_bad_input_is_said_with_an_event_and_stops_nothing_else() -> None:
    from pathlib import Path

    from kaisched.cluster.kinds import EVENT
    from kaisched.cluster.snapshot import load_file
    from kaisched.tools.replay import replay

    path = Path(__file__).resolve().parents[1] / "scenarios" / "gpushare-bad-input.yaml"
    registry = register_builtins()
    result = replay(load_file(path).objects, default_config(registry), registry, 1)
    said = [e["message"] for e in result.cluster.list(EVENT) if e["reason"] == "FailedScheduling"]
    assert any("annotation gpu-memory '20Gi': must be an integer number of MiB" in m for m in said)
    assert any("annotation gpu-fraction '1.5'" in m for m in said)
    assert result.bindings == {"default/healthy": "node0"}
