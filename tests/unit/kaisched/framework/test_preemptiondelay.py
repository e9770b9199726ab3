"""The preemption delay: where a job's delay comes from, when its clock
starts, how an eviction it causes re-arms it, and what is refused."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.clock import ManualClock, from_rfc3339
from kaisched.api.types import JobKey
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT, PODGROUP
from kaisched.errors import ConfigError
from kaisched.framework import Session, parse_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster, run_cycle, snapshot

NOW = from_rfc3339("2026-01-01T00:00:00Z") or 0.0
CREATED = "2025-12-31T23:58:00Z"


def session(objects: list[dict[str, Any]], delay: str = "5m") -> Session:
    registry = register_builtins()
    config = parse_config(f"preemptionDelay: {delay}\n", registry)
    return Session(snapshot(objects, NOW), config, registry.build_plugins(config))


def waiting(name: str = "g", pg: dict[str, Any] | None = None,
            pod_annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    group = build_podgroup(name, **(pg or {}))
    group["metadata"]["creationTimestamp"] = CREATED
    return [group, build_pod(f"{name}-0", group=name, creation=CREATED,
                             annotations=pod_annotations)]


def test_the_config_refuses_a_delay_without_a_unit() -> None:
    with pytest.raises(ConfigError, match="preemptionDelay"):
        parse_config("preemptionDelay: '5'\n", register_builtins())
    config = parse_config("preemptionDelay: 90s\n", register_builtins())
    assert config.preemption_delay == 90 and config.to_dict()["preemptionDelay"] == "90s"


@pytest.mark.parametrize("pg,pod,delay", [
    ({}, None, 300.0),                                                   # the config's
    ({}, {"kai.scheduler/preemption-delay": "10m"}, 600.0),               # a pod's annotation
    ({"preemptionDelaySeconds": 30}, {"kai.scheduler/preemption-delay": "10m"}, 30.0),
    ({}, {"kai.scheduler/preemption-delay": "ten"}, 300.0),              # not a duration: ignored
])
def test_where_a_job_s_delay_comes_from(pg: dict[str, Any], pod: dict[str, str] | None,
                                        delay: float) -> None:
    ssn = session([build_node("n1"), *waiting(pg=pg, pod_annotations=pod)])
    assert ssn.preemption_delay.of(ssn.cluster.jobs[JobKey("default/g")]) == delay


def test_kai_s_annotation_on_the_podgroup_wins_over_its_pods() -> None:
    objects = waiting(pod_annotations={"kai.scheduler/preemption-delay": "10m"})
    objects[0]["metadata"]["annotations"] = {"kai.scheduler/preemption-delay": "1m"}
    ssn = session([build_node("n1"), *objects])
    assert ssn.preemption_delay.of(ssn.cluster.jobs[JobKey("default/g")]) == 60.0


def test_a_pod_whose_delay_is_not_a_duration_is_told_once() -> None:
    objects = [build_node("n1", cpu=1),
               *waiting(pod_annotations={"kai.scheduler/preemption-delay": "ten"})]
    cluster = run_cycle(objects).cluster
    events = [e for e in cluster.list(EVENT)
              if "kai.scheduler/preemption-delay 'ten' is not a duration" in e.get("message", "")]
    assert len(events) == 1 and events[0]["involvedObject"]["name"] == "g-0"


def test_the_clock_starts_at_creation_then_at_each_eviction_it_causes() -> None:
    ssn = session([build_node("n1"), *waiting()])
    job = ssn.cluster.jobs[JobKey("default/g")]
    assert ssn.pending_since(job) == from_rfc3339(CREATED)
    assert ssn.may_evict_for(job) == "may preempt from 00:03 (preemptionDelay 5m)"
    assert ssn.preemption_delay.delayed == {job.key: from_rfc3339("2026-01-01T00:03:00Z")}
    ssn.evicted_for(job.key)
    assert ssn.pending_since(job) == NOW
    assert ssn.may_evict_for(job) == "may preempt from 00:05 (preemptionDelay 5m)"


def test_a_gang_that_ran_and_waits_again_became_pending_now() -> None:
    """Its status says it ran; it does not now (its pods were evicted and made
    again): the clock starts now, not at its creation."""
    objects = waiting(pg={"minMember": 1})
    objects[0]["status"] = {"phase": "Running", "pendingSince": "2025-12-31T23:00:00Z"}
    ssn = session([build_node("n1"), *objects])
    assert ssn.pending_since(ssn.cluster.jobs[JobKey("default/g")]) == NOW


def test_no_delay_holds_nothing_back() -> None:
    ssn = session([build_node("n1"), *waiting()], delay="0s")
    assert ssn.may_evict_for(ssn.cluster.jobs[JobKey("default/g")]) is None
    assert not ssn.preemption_delay.delayed


def test_the_clock_is_written_to_the_podgroup_status() -> None:
    objects = [build_node("n1", cpu=0.5), *waiting()]
    cluster = load_cluster(objects)
    registry = register_builtins()
    config = parse_config("preemptionDelay: 5m\n", registry)
    clock = ManualClock()
    Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now)).run_once()
    assert cluster.get(PODGROUP, "default", "g")["status"]["pendingSince"] == CREATED
