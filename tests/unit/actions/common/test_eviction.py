"""Which jobs may evict and which tasks go first (actions/common/eviction.py), asked of a
session over one small cluster: a gang of four above its minimum of two and a single pod
running, a gang that fits nowhere waiting, and a pod no node may take.

Preempt's and reclaim's decisions as a whole are in tests/scenarios/ and the property tests
(tests/unit/properties/test_evictions_minimal.py: every eviction is needed)."""
from __future__ import annotations

from actions.common.eviction import (
    evictable_tasks,
    is_surplus,
    never_preempts,
    refused,
    starving_jobs,
    surplus_tasks,
    victim_order,
)
from kaisched.api.types import JobKey, QueueName
from kaisched.framework import Session
from tests.builders.objects import Obj, build_node, build_pod, build_podgroup, default_session

DEFAULT = QueueName("default")


def cluster() -> list[Obj]:
    """n1 runs low (minimum 2, four pods started a second apart, priority 1); n2 runs mid
    (priority 5), full; big (two 3-CPU pods, priority 10) fits nowhere; lost asks for a
    zone no node is in."""
    return [build_node("n1", cpu=4), build_node("n2", cpu=4),
            build_podgroup("low", min_member=2),
            *[build_pod(f"low-{i}", cpu=1, group="low", node="n1", priority=1,
                        creation=f"2025-01-01T00:00:0{i}Z") for i in range(4)],
            build_podgroup("mid", min_member=1),
            build_pod("mid-0", cpu=4, group="mid", node="n2", priority=5),
            build_podgroup("big", min_member=2),
            *[build_pod(f"big-{i}", cpu=3, group="big", priority=10) for i in range(2)],
            build_podgroup("lost", min_member=1),
            build_pod("lost-0", cpu=1, group="lost", node_selector={"zone": "nowhere"}, priority=10)]


def keys(tasks: list) -> list[str]:
    return [t.key for t in tasks]


def job(ssn: Session, name: str):
    return ssn.cluster.jobs[JobKey(f"default/{name}")]


def test_evictable_tasks_are_the_queues_running_ones_below_a_priority_if_given() -> None:
    ssn = default_session(cluster())
    assert keys(evictable_tasks(ssn, DEFAULT)) == [
        "default/low-0", "default/low-1", "default/low-2", "default/low-3", "default/mid-0"]
    assert keys(evictable_tasks(ssn, DEFAULT, below=5)) == [
        "default/low-0", "default/low-1", "default/low-2", "default/low-3"]
    assert evictable_tasks(ssn, DEFAULT, below=1) == []


def test_a_gang_short_of_room_starves_one_no_node_may_take_is_refused() -> None:
    ssn = default_session(cluster())
    assert [(j.key, keys(tasks)) for j, tasks in starving_jobs(ssn)] == [
        ("default/big", ["default/big-0", "default/big-1"])]
    assert refused(ssn, job(ssn, "lost")) == "pod default/lost-0: no node meets its placement rules"
    assert refused(ssn, job(ssn, "big")) is None


def test_a_pod_that_never_preempts_keeps_its_job_from_evicting() -> None:
    objects = cluster()
    for obj in objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "big-1":
            obj["spec"]["preemptionPolicy"] = "Never"
    ssn = default_session(objects)
    assert never_preempts(list(job(ssn, "big").tasks.values()))
    assert starving_jobs(ssn) == []


def test_the_surplus_is_the_newest_pods_above_the_minimum() -> None:
    ssn = default_session(cluster())
    low = job(ssn, "low")
    newest_first = sorted(low.tasks.values(), key=lambda t: (-t.creation, t.key))
    assert keys(surplus_tasks(low, newest_first)) == ["default/low-3", "default/low-2"]
    three = low.tasks[next(k for k in low.tasks if k.endswith("low-3"))]
    assert is_surplus(ssn, three, [three])
    mid = next(iter(job(ssn, "mid").tasks.values()))
    assert not is_surplus(ssn, mid, [mid])              # a gang of one is no surplus


def test_victims_go_surplus_first_then_lowest_priority_then_newest() -> None:
    ssn = default_session(cluster())
    evictable = evictable_tasks(ssn, DEFAULT)
    assert keys(sorted(evictable, key=victim_order(ssn, evictable))) == [
        "default/low-3", "default/low-2",               # low's surplus, newest first
        "default/low-1", "default/low-0",               # then low's gang (priority 1)
        "default/mid-0"]                                # before mid (priority 5)
