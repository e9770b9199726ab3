"""The cluster-life meter on made-up ticks: waits, partly bound gangs and their recovery,
pods stuck Terminating, pods lost, GPU utilisation and evictions by cause."""
from __future__ import annotations

import datetime
from typing import Any

from kaisched.bench.lifemeter import Meter, classify
from kaisched.bench.lifetrace import GPU, JOB_LABEL, Trace, TraceJob

GANG = TraceJob("g", "gang", "team-a", "cl-life-low", 4, 2, 4, 0.0, 100.0)
ONE = TraceJob("b", "batch", "team-b", "cl-life-low", 1, 1, 1, 0.0, 100.0)
START = 1_000_000.0


def stamp(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).isoformat()


def pod(job: str, i: int, node: str | None = "n0", phase: str = "Running",
        deleted: float | None = None, gpus: int = 2, created: float = START) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{job}-{i}", "uid": f"{job}-{i}",
                            "labels": {JOB_LABEL: job}, "creationTimestamp": stamp(created)}
    if deleted is not None:
        meta["deletionTimestamp"] = stamp(deleted)
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [
        {"resources": {"requests": {GPU: str(gpus)}}}]}, "status": {"phase": phase}}


def meter(*jobs: TraceJob) -> Meter:
    found = Meter(Trace(1, 1, 300.0, jobs), START)
    for job in jobs:
        found.created(job.name, START)
    return found


def test_a_gang_bound_whole_at_once_is_never_partial_and_waits_until_it_runs() -> None:
    m = meter(GANG)
    m.tick([], START + 1, {"g": 4})
    m.tick([pod("g", i, phase="Pending") for i in range(4)], START + 5, {"g": 4})
    m.tick([pod("g", i) for i in range(4)], START + 8, {"g": 4})
    m.close(START + 9)
    figures = m.figures({})
    assert figures["partial_gang_seconds"] == 0 and figures["wait_p50_s"] == 8.0
    assert figures["started"] == 1 and figures["gpu_utilisation"] > 0


def test_a_gang_partly_bound_longer_than_10_s_counts_shorter_does_not() -> None:
    m = meter(GANG)
    two = [pod("g", 0), pod("g", 1), pod("g", 2, node=None), pod("g", 3, node=None)]
    m.tick(two, START + 1, {"g": 4})
    m.tick(two, START + 6, {"g": 4})
    m.tick([pod("g", i) for i in range(4)], START + 7, {"g": 4})       # 6 s: binds in flight
    assert m.seconds["partial"] == 0
    m = meter(GANG)
    m.tick(two, START + 1, {"g": 4})
    m.tick(two, START + 31, {"g": 4})
    m.close(START + 41)
    assert m.figures({})["partial_gang_seconds"] == 40.0
    assert m.series[-1][1] == 4.0                  # the two bound pods' GPUs


def test_a_gang_that_lost_a_bound_pod_is_recovering_not_partial() -> None:
    m = meter(GANG)
    m.tick([pod("g", i) for i in range(4)], START + 1, {"g": 4})
    three = [pod("g", i) for i in range(3)]
    m.tick(three, START + 2, {"g": 4})
    m.tick(three, START + 20, {"g": 4})
    m.tick([*three, pod("g", 3, created=START + 22)], START + 25, {"g": 4})    # made again
    figures = m.figures({})
    assert figures["partial_gang_seconds"] == 0 and figures["recovering_gang_seconds"] == 23.0
    assert figures["rewhole_after_recreation_s"] == {"gangs": 1, "p50": 3.0, "max": 3.0}


def test_terminating_pods_are_stuck_30_s_past_their_grace_or_past_the_operators_taint() -> None:
    m = meter(ONE)
    m.tick([pod("b", 0, deleted=START)], START + 20, {"b": 1})
    assert not m.stuck
    m.tick([pod("b", 0, deleted=START)], START + 31, {"b": 1})
    assert m.stuck == {"b-0"}
    m = meter(ONE)
    m.node_failed("dead")               # stopped: until the operator's taint, nothing ends it
    m.tick([pod("b", 0, node="dead", deleted=START)], START + 90, {"b": 1})
    assert not m.stuck
    m.node_tainted("dead", START + 100)
    m.tick([pod("b", 0, node="dead", deleted=START)], START + 120, {"b": 1})
    assert not m.stuck
    m.tick([pod("b", 0, node="dead", deleted=START)], START + 131, {"b": 1})
    assert m.stuck == {"b-0"}


def test_a_pod_missing_for_a_minute_is_lost_once() -> None:
    m = meter(GANG)
    three = [pod("g", i) for i in range(3)]
    for t in (1, 30, 62, 90):
        m.tick(three, START + t, {"g": 4})
    assert m.figures({})["lost_pods"] == 1
    m.ended("g", START + 91, finished=True)
    assert m.figures({})["finished"] == 1


def test_evictions_are_counted_by_cause_once_a_pod() -> None:
    def event(reason: str, message: str, uid: str, component: str = "kaisched") -> dict[str, Any]:
        return {"reason": reason, "message": message, "involvedObject": {"uid": uid},
                "source": {"component": component}}
    events = [event("Preempted", "reclaimed by pod a/b of a/b", "1"),
              event("Preempted", "preempted by pod a/c of a/c", "2"),
              event("Preempted", "preempted by pod a/c of a/c", "2"),
              event("Preempted", "Preempted by pod 1234 on node n1", "3", "default-scheduler"),
              event("Evicted", "moved by consolidation to make room for a/d", "4"),
              event("Evicted", "the gang stayed below its minimum", "5"),
              event("Evicted", "The node was low on resource: memory.", "6", "kubelet"),
              event("TaintManagerEviction", "Marking for deletion Pod a/x", "7", "taint"),
              event("TaintManagerEviction", "Cancelling deletion of Pod a/x", "7", "taint")]
    assert classify(events) == {"consolidation": 1, "node_failure": 1, "preempt": 2,
                                "reclaim": 1, "stale_gang": 1}


def test_events_that_name_a_pod_without_its_uid_count_each_incarnation() -> None:
    def event(at: str) -> dict[str, Any]:
        return {"reason": "Preempted", "message": "reclaimed by pod a/b of a/b",
                "involvedObject": {"name": "train-0"}, "firstTimestamp": at}
    assert classify([event("2026-01-01T00:00:01Z"), event("2026-01-01T00:00:01Z"),
                     event("2026-01-01T00:01:00Z")]) == {"reclaim": 2}
