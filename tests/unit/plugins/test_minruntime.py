"""The minruntime plugin: its arguments, which queue's min-runtime counts (KAI's
design examples), when a job started, and what the session's victim filter
keeps of a protected job."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.clock import clock_text, from_rfc3339
from kaisched.api.quantity import format_duration
from kaisched.api.types import JobKey, QueueName
from kaisched.builtins.catalog import register_builtins
from kaisched.errors import ConfigError
from kaisched.framework import Session, parse_config
from kaisched.framework.effects import Cause
from plugins.minruntime import MinRuntimePlugin
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue, snapshot

NOW = from_rfc3339("2026-01-01T00:00:00Z") or 0.0


def session(objects: list[dict[str, Any]], arguments: str = "{}") -> Session:
    registry = register_builtins()
    config = parse_config(f"""
tiers:
  - plugins: [{{name: priority}}, {{name: gang}}]
  - plugins: [{{name: proportion}}, {{name: predicates}}, {{name: minruntime, arguments: {arguments}}}]
""", registry)
    return Session(snapshot(objects, NOW), config, registry.build_plugins(config))


def plugin_of(ssn: Session) -> MinRuntimePlugin:
    return next(p for p in ssn.plugins if isinstance(p, MinRuntimePlugin))


@pytest.mark.parametrize("arguments,words", [
    ({"defaultPreemptMinRuntime": "10"}, "defaultPreemptMinRuntime: a duration needs a unit"),
    ({"defaultReclaimMinRuntime": "-5s"}, "defaultReclaimMinRuntime: not a duration"),
    ({"reclaimResolveMethod": "tree"}, "reclaimResolveMethod: expected lca or queue"),
    ({"preemptMinRuntime": "5m"}, "unknown argument 'preemptMinRuntime'"),
])
def test_bad_arguments_are_refused_at_load_time(arguments: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        MinRuntimePlugin(arguments)


def test_a_bad_queue_duration_is_the_queue_s_problem() -> None:
    ssn = session([build_queue("q") | {"spec": {"preemptMinRuntime": "ten minutes"}}])
    assert "spec.preemptMinRuntime: not a duration" in str(ssn.cluster.queues[QueueName("q")].problem)


# KAI's design: root.A.B (600s) -> C (300s), D (unset); C -> leaf1, leaf2; D -> leaf3.
TREE = [build_queue("A"), build_queue("B", parent="A"), build_queue("C", parent="B"),
        build_queue("D", parent="B"), build_queue("leaf1", parent="C"),
        build_queue("leaf2", parent="C"), build_queue("leaf3", parent="D"),
        build_queue("other")]
for q in TREE:
    minutes = {"B": "10m", "C": "5m"}.get(q["metadata"]["name"])
    if minutes:
        q["spec"]["reclaimMinRuntime"] = minutes
        q["spec"]["preemptMinRuntime"] = minutes


@pytest.mark.parametrize("method,victim,by,minutes", [
    # lca: the victim-side child of the lowest common ancestor, then up from it.
    ("lca", "leaf3", "leaf1", 10),      # below B: D (unset) -> B's 10m
    ("lca", "leaf2", "leaf1", 5),       # below C: leaf2 (unset) -> C's 5m
    ("lca", "leaf1", "other", 0),       # top-level siblings: A (unset) -> the default
    ("lca", "other", "leaf1", 0),
    # queue: the victim's own leaf, then up.
    ("queue", "leaf3", "leaf1", 10),
    ("queue", "leaf1", "other", 5),
])
def test_which_queue_s_reclaim_min_runtime_counts(method: str, victim: str, by: str,
                                                  minutes: int) -> None:
    ssn = session(TREE, f"{{reclaimResolveMethod: {method}}}")
    got = plugin_of(ssn).min_runtime(QueueName(victim), Cause.RECLAIM, QueueName(by))
    assert got == minutes * 60


@pytest.mark.parametrize("victim,minutes", [("leaf1", 5), ("leaf3", 10), ("other", 2)])
def test_preempt_min_runtime_is_the_first_set_up_the_tree(victim: str, minutes: int) -> None:
    ssn = session(TREE, "{defaultPreemptMinRuntime: 2m}")
    assert plugin_of(ssn).min_runtime(QueueName(victim), Cause.PREEMPT) == minutes * 60


def _running(name: str, started: list[str | None], min_member: int, queue: str = "team",
             **pg: Any) -> list[dict[str, Any]]:
    out = [build_podgroup(name, min_member=min_member, queue=queue, **pg)]
    for i, start in enumerate(started):
        pod = build_pod(f"{name}-{i}", group=name, node="n1", queue=queue,
                        creation=f"2025-12-31T23:00:0{i}Z")
        if start is not None:
            pod["status"]["startTime"] = start
        out.append(pod)
    return out


def test_a_job_starts_when_its_minimum_last_came_to_be() -> None:
    objects = [build_node("n1", cpu=8), build_queue("team", ),
               *_running("g", ["2025-12-31T23:00:00Z", "2025-12-31T23:50:00Z",
                               "2025-12-31T23:10:00Z"], 2),
               *_running("unstarted", ["2025-12-31T23:00:00Z", None], 2)]
    ssn = session(objects)
    jobs = ssn.cluster.jobs
    assert jobs[JobKey("default/g")].started(NOW) == from_rfc3339("2025-12-31T23:10:00Z")
    assert jobs[JobKey("default/unstarted")].started(NOW) == NOW    # a pod bound, not started


def test_kai_s_last_start_annotation_counts_when_later() -> None:
    group = _running("g", ["2025-12-31T23:00:00Z"], 1)
    group[0]["metadata"]["annotations"] = {
        "kai.scheduler/last-start-timestamp": "2025-12-31T23:58:00Z"}
    ssn = session([build_node("n1", cpu=8), build_queue("team") | {
        "spec": {"preemptMinRuntime": "5m"}}, *group])
    found = ssn.protected_until(ssn.cluster.jobs[JobKey("default/g")], Cause.PREEMPT)
    assert found is not None and found.until == from_rfc3339("2026-01-01T00:03:00Z")
    assert found.describe(NOW) == "protected until 00:03 (min-runtime 5m)"


def test_a_protected_job_gives_only_its_pods_beyond_its_minimum() -> None:
    objects = [build_node("n1", cpu=8), build_queue("team") | {"spec": {"preemptMinRuntime": "10m"}},
               *_running("young", ["2025-12-31T23:55:00Z"] * 3, 1),
               *_running("old", ["2025-12-31T23:00:00Z"] * 2, 2),
               build_pod("urgent", queue="team", priority=100)]
    ssn = session(objects)
    everyone = [t for j in ssn.cluster.jobs.values() for t in j.tasks.values() if t.node_name]
    urgent = ssn.cluster.jobs[JobKey("default/urgent")].tasks["default/urgent"]  # type: ignore[index]
    kept = {t.key for t in ssn.preemptable(urgent, everyone)}
    # young is within 10m: of its 3 pods (minMember 1) the 2 newest may go; old all.
    assert kept == {"default/young-1", "default/young-2", "default/old-0", "default/old-1"}
    # Its whole gang at once would take it below its minimum: refused.
    young = [t for t in everyone if t.job == "default/young"]
    assert len(ssn.preemptable(urgent, young)) == 2


def test_without_any_min_runtime_the_plugin_registers_nothing() -> None:
    ssn = session([build_node("n1"), build_queue("team"), *_running("g", ["2025-12-31T23:59:00Z"], 1)])
    assert not ssn.protects


@pytest.mark.parametrize("seconds,text", [(600, "10m"), (5400, "1h30m"), (90, "1m30s"),
                                          (0, "0s"), (0.25, "250ms"), (86400, "24h")])
def test_durations_read_as_written(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_a_moment_on_another_day_says_the_date() -> None:
    assert clock_text(NOW + 42 * 60, NOW) == "00:42"
    assert clock_text(NOW + 42 * 60 + 5, NOW) == "00:42:05"
    assert clock_text(NOW + 86400, NOW) == "2026-01-02 00:00"
