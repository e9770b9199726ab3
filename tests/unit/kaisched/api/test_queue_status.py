"""QueueStatus: the status kaisched writes on a Queue, as a value (built from a
session's numbers) and as the dict written back (and read again)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaisched.api.job import GangSpec, JobInfo
from kaisched.api.ledger import Ledger
from kaisched.api.queue import QueueInfo, QueueStatus, build_queue_tree
from kaisched.api.queue_status import canonical, job_state, queue_statuses
from kaisched.api.resource import Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, QueueName, TaskStatus
from kaisched.cache.convert import quantity_text, queue, queue_status, queue_status_dict

GPU = "nvidia.com/gpu"


def job(name: str, queue_name: str, *statuses: TaskStatus, min_member: int = 1) -> JobInfo:
    info = JobInfo(JobKey(f"ns/{name}"), GangSpec(min_member=min_member,
                                                  queue=QueueName(queue_name)))
    for i, status in enumerate(statuses):
        node = NodeName("n") if status is not TaskStatus.PENDING else None
        info.add_task(TaskInfo(key=PodKey(f"ns/{name}-{i}"), uid=f"{name}-{i}", job=info.key,
                               status=status, resreq=Resource.of(cpu=1000), node_name=node))
    return info


R, P, B = TaskStatus.RUNNING, TaskStatus.PENDING, TaskStatus.BOUND


def tree() -> tuple[dict, object]:
    return build_queue_tree([
        QueueInfo(QueueName("research"), quota=Resource.of({GPU: 8})),
        QueueInfo(QueueName("team-a"), QueueName("research"), quota=Resource.of({GPU: 4}),
                  limits=((GPU, 6.0), ("cpu", 0.0))),
        QueueInfo(QueueName("team-b"), QueueName("research")),
    ])


def test_statuses_carry_the_numbers_with_zeros_and_only_set_limits() -> None:
    queues, graph = tree()
    fair = {"research": {"cpu": 8000.0, GPU: 8.0}, "team-a": {"cpu": 4000.0, GPU: 5.0},
            "team-b": {"cpu": 4000.0, GPU: 3.0}, "default": {"cpu": 0.0, GPU: 0.0}}
    used = {"research": {"cpu": 3000.0, GPU: 2.0, "pods": 3.0}, "team-a": {"cpu": 3000.0, GPU: 2.0,
                                                                        "pods": 3.0}}
    out = queue_statuses(queues, graph, {}, fair, used)
    assert out[QueueName("team-a")] == QueueStatus(
        allocated=(("cpu", 3000.0), (GPU, 2.0)), fair_share=(("cpu", 4000.0), (GPU, 5.0)),
        quota=(("cpu", 0.0), (GPU, 4.0)), limit=(("cpu", 0.0), (GPU, 6.0)))
    # A queue using nothing still shows 0 allocated: "0 of 3 GPUs" at a glance.
    assert out[QueueName("team-b")].allocated == (("cpu", 0.0), (GPU, 0.0))
    assert out[QueueName("team-b")].limit == ()
    assert set(out) == {"research", "team-a", "team-b", "default"}


def test_jobs_are_counted_in_their_queue_and_every_queue_above() -> None:
    queues, graph = tree()
    jobs = [job("a1", "team-a", R, R, min_member=2),
            job("a2", "team-a", P, P, min_member=2),
            job("b1", "team-b", B),
            job("b2", "team-b", R, P, min_member=2),     # half placed: waits
            job("done", "team-b", TaskStatus.SUCCEEDED),
            job("lost", "nowhere", P)]
    out = queue_statuses(queues, graph, Ledger.of(jobs).states, {}, {})
    counts = {name: (s.running_jobs, s.pending_jobs) for name, s in out.items()}
    assert counts == {"team-a": (1, 1), "team-b": (1, 1), "research": (2, 2), "default": (0, 0)}


def test_job_state() -> None:
    assert job_state(job("j", "q", R, P, min_member=1)) == "running"     # elastic extra waits
    assert job_state(job("j", "q", TaskStatus.PIPELINED, P)) == "pending"
    assert job_state(job("j", "q", TaskStatus.SUCCEEDED, TaskStatus.FAILED)) is None


def test_amounts_are_rounded_as_a_quantity_can_carry_them() -> None:
    assert canonical("cpu", 2666.6667) == 2667.0                # millicores
    assert canonical("memory", 1.5 * 2**30 + 0.4) == 1.5 * 2**30  # bytes
    assert canonical(GPU, 4 / 3) == 1.333


def test_quantity_text() -> None:
    assert [quantity_text("cpu", v) for v in (0, 4000, 2500, 2666.7)] == ["0", "4", "2500m", "2667m"]
    assert [quantity_text("memory", v) for v in (2**34, 1.5 * 2**30, 1000)] == ["16Gi", "1536Mi", "1000"]
    assert [quantity_text(GPU, v) for v in (4, 0.5, 4 / 3)] == ["4", "0.5", "1.333"]


amount = st.floats(min_value=0, max_value=1e6, allow_nan=False)
names = st.sampled_from(["cpu", "memory", GPU, "example.com/fpga"])
amount_maps = st.dictionaries(names, amount, max_size=4).map(
    lambda d: tuple(sorted((k, canonical(k, v)) for k, v in d.items())))


@given(amount_maps, amount_maps, amount_maps, amount_maps, st.integers(0, 1000),
       st.integers(0, 1000))
def test_a_written_status_reads_back_equal(allocated, fair, quota, limit, running, pending) -> None:
    """What makes "write only when it changed" hold: the status read from the
    object equals the one that was written, fractions included."""
    status = QueueStatus(allocated, fair, quota, limit, running, pending)
    assert queue_status(queue_status_dict(status, None)) == status


def test_resources_no_longer_there_are_cleared() -> None:
    old = QueueStatus(allocated=(("cpu", 1000.0), (GPU, 2.0)))
    new = QueueStatus(allocated=(("cpu", 2000.0),))
    written = queue_status_dict(new, old)
    assert written["allocated"] == {"cpu": "2", GPU: None}


def test_a_queue_object_carries_its_status() -> None:
    obj = {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
           "metadata": {"name": "team-a"}, "spec": {},
           "status": {"allocated": {GPU: "2"}, "fairShare": {GPU: "1.5"}, "runningJobs": 1}}
    info = queue(obj)
    assert info.declared
    assert info.status == QueueStatus(allocated=((GPU, 2.0),), fair_share=((GPU, 1.5),),
                                      running_jobs=1)
    assert queue({**obj, "status": {}}).status is None
    # A status kaisched could not have written is simply written again.
    assert queue({**obj, "status": {"allocated": {GPU: "lots"}}}).status is None
    assert queue({**obj, "status": {"runningJobs": "1"}}).status is None
