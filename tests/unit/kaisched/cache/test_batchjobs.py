"""Run-time limits and estimates as the cache reads them: a pod's own
activeDeadlineSeconds, its batch Job's (from the Job's start, the pod's grace
period after it), read again when the Job changes; the estimates of pods,
Jobs, PodGroups and Queues."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.clock import from_rfc3339
from kaisched.api.task import START_SLACK
from kaisched.cache import Cache
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import BATCH_JOB, POD
from kaisched.cluster.memory import MemoryCluster
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue, snapshot

STARTED = "2026-01-01T10:00:00Z"


def batch_job(name: str = "train", deadline: int | None = 3600, started: str | None = STARTED,
              labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": []}}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    status = {"startTime": started} if started else {}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "labels": labels or {}},
            "spec": spec, "status": status}


def job_pod(name: str = "train-0", job: str = "train", grace: int | None = 10,
            **kw: Any) -> dict[str, Any]:
    pod = build_pod(name, cpu=1, owner={"apiVersion": "batch/v1", "kind": "Job", "name": job,
                                        "uid": f"uid-{job}", "controller": True}, **kw)
    if grace is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = grace
    return pod


def task_of(objects: list[dict[str, Any]], key: str = "default/train-0", now: float = 0.0):
    cluster = snapshot(objects, now)
    job = next(j for j in cluster.jobs.values() if key in j.tasks)
    return job.tasks[key]


def test_a_pod_ends_by_its_jobs_deadline_and_grace() -> None:
    task = task_of([build_node("n1"), batch_job(), job_pod()])
    assert task.runtime.deadline == from_rfc3339(STARTED) + 3600 + 10
    assert task.ends_by(0.0) == task.runtime.deadline


def test_the_sooner_of_the_pods_own_limit_and_its_jobs_counts() -> None:
    pod = job_pod(node="n1")
    pod["spec"]["activeDeadlineSeconds"] = 600
    pod["status"]["startTime"] = "2026-01-01T10:30:00Z"
    task = task_of([build_node("n1"), batch_job(), pod])
    assert task.ends_by(0.0) == from_rfc3339("2026-01-01T10:30:00Z") + 600 + 10
    pod["spec"]["activeDeadlineSeconds"] = 7200          # the Job's deadline comes first now
    assert task_of([build_node("n1"), batch_job(), pod]).ends_by(0.0) == \
        from_rfc3339(STARTED) + 3600 + 10


@pytest.mark.parametrize("job", [batch_job(deadline=None), batch_job(started=None), None],
                         ids=["no-deadline", "not-started", "not-read"])
def test_no_deadline_is_known_without_a_started_job_that_sets_one(job: dict | None) -> None:
    objects = [build_node("n1"), job_pod()] + ([job] if job else [])
    assert task_of(objects).ends_by(0.0) is None


def test_the_pods_are_read_again_when_their_job_changes() -> None:
    cluster = MemoryCluster()
    for obj in (build_node("n1"), job_pod("train-0"), job_pod("train-1")):
        cluster.create(obj)
    cache = Cache()
    cache.sync(cluster)
    assert all(t.runtime is None for t in _tasks(cache))

    cache.apply(WatchEvent("ADDED", BATCH_JOB, batch_job()))       # the Job comes after its pods
    assert {t.runtime and t.runtime.deadline for t in _tasks(cache)} == {from_rfc3339(STARTED) + 3610}
    cache.apply(WatchEvent("MODIFIED", BATCH_JOB, batch_job(deadline=60)))
    assert {t.runtime and t.runtime.deadline for t in _tasks(cache)} == {from_rfc3339(STARTED) + 70}
    cache.apply(WatchEvent("DELETED", BATCH_JOB, batch_job(deadline=60)))
    assert {t.runtime and t.runtime.deadline for t in _tasks(cache)} == {None}
    assert cache.check(0.0) == []       # the incremental model is the rebuilt one


def test_a_pod_that_leaves_its_job_is_not_read_again() -> None:
    cache = Cache()
    cache.apply(WatchEvent("ADDED", POD, job_pod()))
    cache.apply(WatchEvent("ADDED", POD, build_pod("train-0", cpu=1)))    # its owner is gone
    cache.apply(WatchEvent("ADDED", BATCH_JOB, batch_job()))
    assert [t.runtime and t.runtime.deadline for t in _tasks(cache)] == [None]


def _tasks(cache: Cache) -> list:
    cluster = cache.snapshot(0.0)
    return [t for job in cluster.jobs.values() for t in job.tasks.values()]


# -- estimates: never a limit --------------------------------------------------------------

def test_estimates_of_a_pod_and_of_its_job() -> None:
    own = job_pod(annotations={"kaisched.io/expected-runtime": "45m"})
    task = task_of([build_node("n1"), batch_job(labels={
        "kueue.x-k8s.io/max-exec-time-seconds": "1800"}), own])
    assert task.expected == 2700 and task.runtime.deadline is not None
    task = task_of([build_node("n1"), batch_job(deadline=None, labels={
        "kueue.x-k8s.io/max-exec-time-seconds": "1800"}), job_pod()])
    assert task.expected == 1800 and task.ends_by(0.0) is None      # Kueue's is no limit here
    assert task.likely_end(100.0, task.expected) == 100.0 + START_SLACK + 1800


def test_estimates_of_a_podgroup_and_a_queue() -> None:
    group = build_podgroup("pg", queue="team")
    group["metadata"]["annotations"] = {"kaisched.io/expected-runtime": "2h"}
    queue = build_queue("team")
    queue["spec"]["expectedRuntime"] = "30m"
    cluster = snapshot([build_node("n1"), queue, group, build_pod("p", group="pg")])
    assert cluster.jobs["default/pg"].spec.expected_runtime == 7200
    assert cluster.queues["team"].expected_runtime == 1800


def test_an_estimate_that_does_not_parse_is_said() -> None:
    group = build_podgroup("pg")
    group["metadata"]["annotations"] = {"kaisched.io/expected-runtime": "2 hours"}
    cluster = snapshot([build_node("n1"), group, build_pod("p", group="pg")])
    assert "kaisched.io/expected-runtime" in (cluster.jobs["default/pg"].problem or "")
    cache = Cache()
    cache.apply(WatchEvent("ADDED", POD, build_pod(
        "q", annotations={"kaisched.io/expected-runtime": "90"})))
    (warning,) = cache.take_warnings()
    assert "kaisched.io/expected-runtime" in warning.message and "ignored" in warning.message
