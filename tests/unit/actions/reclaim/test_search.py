"""Reclaim's victim search (actions/reclaim/search.py) on its own: two 2-CPU nodes full of
single-pod jobs of queue qa (1 CPU each, priorities 1 to 4, the lowest on n1), and a job
of queue qb waiting. The search is handed every qa job as a candidate, no domain to keep
to, and a fairness check of the test's choosing; what reclaim asks of the plugins before it
searches is in tests/scenarios/reclaim-*.yaml."""
from __future__ import annotations

from actions.common.victims import Unit, VictimPicker
from actions.reclaim import candidates
from actions.reclaim.search import Fair, ReclaimSearch
from kaisched.api.resource import sum_resources
from kaisched.api.types import JobKey, NodeName, TaskStatus
from kaisched.framework import Session
from kaisched.framework.effects import Preemptor
from tests.builders.objects import Obj, build_node, build_pod, build_podgroup, build_queue, default_session

WANT = JobKey("default/want")


def cluster(cpu: int, size: int) -> list[Obj]:
    """run0..run3 on n1, n1, n2, n2 (priorities 1..4); want: size pods of cpu each."""
    out = [build_node("n1", cpu=2), build_node("n2", cpu=2),
           build_queue("qa", resources={"cpu": {"quota": "0"}}),
           build_queue("qb", resources={"cpu": {"quota": "4"}})]
    for i, node in enumerate(("n1", "n1", "n2", "n2")):
        out += [build_podgroup(f"run{i}", queue="qa"),
                build_pod(f"run{i}", cpu=1, group=f"run{i}", queue="qa", node=node, priority=i + 1)]
    out.append(build_podgroup("want", min_member=size, queue="qb"))
    out += [build_pod(f"want-{i}", cpu=cpu, group="want", queue="qb") for i in range(size)]
    return out


def search(objects: list[Obj], fair: Fair = lambda victims: None) -> tuple[Session, ReclaimSearch]:
    ssn = default_session(objects)
    job = ssn.cluster.jobs[WANT]
    tasks = ssn.ordered_tasks(job, ssn.pending(job))
    need = sum_resources(ssn.quota_request(t) for t in tasks)
    picker = VictimPicker(ssn, tasks[0], candidates(ssn, job), need)
    return ssn, ReclaimSearch(ssn, tasks, picker, lambda task: None, fair)


def jobs_of(victims: list[Unit] | None) -> list[str] | None:
    return None if victims is None else [u.job for u in victims]


def test_a_pod_of_one_cpu_takes_one_victim_the_lowest_priority() -> None:
    _, solver = search(cluster(cpu=1, size=1))
    assert jobs_of(solver.solve()) == ["default/run0"]


def test_victims_are_added_until_the_task_fits_on_one_node() -> None:
    """Two CPUs: run0 alone frees one on n1, so run1 (n1's other) goes too, not run2."""
    ssn, solver = search(cluster(cpu=2, size=1))
    victims = solver.solve()
    assert jobs_of(victims) == ["default/run0", "default/run1"]
    job = ssn.cluster.jobs[WANT]
    assert victims is not None
    stmt = solver.apply(victims, lambda t: Preemptor(t.key, job.key, job.priority, job.queue))
    assert stmt is not None
    [task] = job.tasks.values()
    assert (task.status, task.node_name) == (TaskStatus.PIPELINED, NodeName("n1"))
    evicted = {t.job for t in ssn.cluster.nodes[NodeName("n1")].tasks.values()
               if t.status is TaskStatus.RELEASING}
    assert evicted == {JobKey("default/run0"), JobKey("default/run1")}


def test_a_gang_takes_what_all_its_pods_need() -> None:
    _, solver = search(cluster(cpu=2, size=2))
    assert jobs_of(solver.solve()) == ["default/run0", "default/run1", "default/run2", "default/run3"]


def test_no_victims_when_no_node_could_ever_hold_the_task() -> None:
    _, solver = search(cluster(cpu=3, size=1))          # 3 CPUs; a node has 2
    assert solver.solve() is None


def test_no_victims_when_the_fairness_check_refuses_every_scenario() -> None:
    asked: list[list[str]] = []

    def unfair(victims: list[Unit]) -> str:
        asked.append([u.job for u in victims])
        return "qa would fall below its share"
    _, solver = search(cluster(cpu=2, size=1), unfair)
    assert solver.solve() is None
    assert ["default/run0", "default/run1"] in asked      # the scenario that fits was asked
