"""ClusterInfo (kaisched/api/clusterinfo.py): the accounting moves a session's statements
make and undo, each on the node table's rows (used, releasing, pipelined, future, idle);
the journal that hands the cache its model back; what usable nodes offer; and what a
share of a GPU is charged on the node it goes to."""
from __future__ import annotations

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.gpuask import GpuShare
from kaisched.api.job import GangSpec, JobInfo
from kaisched.api.node import NodeSpec
from kaisched.api.resource import GPU, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus
from tests.builders.objects import build_node, build_pod, build_podgroup, snapshot

COLUMNS = ("used", "releasing", "pipelined", "future", "idle")


def cluster(cordoned: bool = False) -> ClusterInfo:
    """n1 runs r (2 CPUs of 4); n2 (4 CPUs, cordoned if asked) is empty; g-0 (1 CPU) waits."""
    return snapshot([build_node("n1", cpu=4), build_node("n2", cpu=4, unschedulable=cordoned),
                     build_podgroup("g"), build_pod("g-0", cpu=1, group="g"),
                     build_pod("r", cpu=2, node="n1")])


def cpus(ci: ClusterInfo, node: str) -> dict[str, float]:
    """The node's row, in CPUs, per column."""
    table, row = ci.table, ci.table.index[NodeName(node)]
    col = table.dim_index["cpu"]
    return {name: float(getattr(table, name)[row, col]) / 1000 for name in COLUMNS}


def task(ci: ClusterInfo, job: str, pod: str) -> TaskInfo:
    return ci.jobs[JobKey(f"default/{job}")].tasks[PodKey(f"default/{pod}")]


def test_a_pipelined_task_takes_room_later_not_now_and_gives_it_back_undone() -> None:
    ci = cluster()
    before = cpus(ci, "n2")
    pending = task(ci, "g", "g-0")
    placed = ci.assign(pending, TaskStatus.PIPELINED, NodeName("n2"))
    assert cpus(ci, "n2") == {"used": 0, "releasing": 0, "pipelined": 1, "future": 3, "idle": 4}
    assert task(ci, "g", "g-0") is placed and placed.node_name == "n2"
    ci.unassign(placed, pending)
    assert cpus(ci, "n2") == before and task(ci, "g", "g-0").status is TaskStatus.PENDING


def test_an_allocated_task_takes_room_now() -> None:
    ci = cluster()
    ci.assign(task(ci, "g", "g-0"), TaskStatus.ALLOCATED, NodeName("n1"))
    assert cpus(ci, "n1") == {"used": 3, "releasing": 0, "pipelined": 0, "future": 1, "idle": 1}


def test_a_released_task_gives_its_room_back_later() -> None:
    ci = cluster()
    running = task(ci, "r", "r")
    assert ci.freed_by(running).tolist() == ci.table.vector(running.resreq).tolist()
    released = ci.release(running)
    assert released.status is TaskStatus.RELEASING
    assert cpus(ci, "n1") == {"used": 2, "releasing": 2, "pipelined": 0, "future": 4, "idle": 2}
    ci.unrelease(released, running)
    assert cpus(ci, "n1")["releasing"] == 0 and task(ci, "r", "r").status is TaskStatus.RUNNING


def test_rewind_undoes_every_journaled_move_but_those_kept() -> None:
    ci = cluster()
    ci.journal = []                     # as the cache lends its model to a session
    ci.assign(task(ci, "g", "g-0"), TaskStatus.ALLOCATED, NodeName("n2"))
    ci.release(task(ci, "r", "r"))
    ci.rewind(keep={PodKey("default/g-0")})
    assert task(ci, "r", "r").status is TaskStatus.RUNNING and cpus(ci, "n1")["releasing"] == 0
    assert task(ci, "g", "g-0").status is TaskStatus.ALLOCATED and cpus(ci, "n2")["used"] == 1
    assert ci.journal == []


def test_a_cordoned_node_offers_nothing_to_share_out() -> None:
    assert cluster().total_allocatable().get("cpu") == 8000        # millicores
    assert cluster(cordoned=True).total_allocatable().get("cpu") == 4000


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
