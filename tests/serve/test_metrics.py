"""The metrics users expect, each measured on the memory backend through the
production loop: job scheduling latency per queue, evictions by queue and
cause, pending gangs by queue and the class of what blocks them, session
duration and bind latency; and every metric the shipped Grafana dashboard
queries is one the code exports."""
from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest
import yaml

from kaisched.api.clock import ManualClock, to_rfc3339
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT, PROVISIONING_REQUEST
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config, parse_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.metrics import Metrics
from kaisched.runtime.scheduler import Scheduler, serve
from podgrouper.metrics import GrouperMetrics
from tests.builders import ROOT

PG = "scheduling.kaisched.io/v1alpha1"
CONFIG = ("schedulePeriod: 1ms\nactions: [enqueue, allocate, preempt]\n"
          "tiers: [{plugins: [{name: priority}, {name: gang}, {name: proportion}, "
          "{name: predicates}, {name: nodeaffinity}]}]\n")


def node(cluster: MemoryCluster, name: str, cpu: str = "4") -> None:
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name,
                                                                    "labels": {"zone": "a"}},
                    "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}})


def gang(cluster: MemoryCluster, name: str, size: int, cpu: str = "1", queue: str = "default",
         priority: str | None = None, selector: dict[str, str] | None = None) -> None:
    cluster.create({"apiVersion": PG, "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"minMember": size, "queue": queue,
                             **({"priorityClassName": priority} if priority else {})}})
    for i in range(size):
        spec: dict[str, Any] = {"schedulerName": "kaisched", "containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        if priority:
            spec["priorityClassName"] = priority
        if selector:
            spec["nodeSelector"] = selector
        cluster.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{name}-{i}", "namespace": "default",
                                     "annotations": {"kaisched.io/pod-group": name}},
                        "spec": spec})


def queue(cluster: MemoryCluster, name: str, limit: str | None = None) -> None:
    spec: dict[str, Any] = {"priority": 1}
    if limit:
        spec["resources"] = {"cpu": {"limit": limit}}
    cluster.create({"apiVersion": PG, "kind": "Queue", "metadata": {"name": name}, "spec": spec})


def run(cluster: MemoryCluster, cycles: int = 2, config: str = CONFIG) -> Metrics:
    registry = register_builtins()
    clock = cluster.clock
    scheduler = Scheduler(cluster, parse_config(config, registry), registry, clock,
                          Binder(cluster, clock.now))
    metrics = Metrics()
    serve(scheduler, threading.Event(), None, metrics, cycles=cycles)
    return metrics


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_job_scheduling_latency_is_per_queue_from_podgroup_creation_to_its_minimum_bound() -> None:
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    queue(cluster, "train")
    gang(cluster, "g", 3, queue="train")
    cluster.clock.advance(42.0)         # nodes arrive 42 s after the PodGroup
    node(cluster, "n1")
    metrics = run(cluster, cycles=3)
    assert value(metrics, "kaisched_job_scheduling_seconds_count", queue="train") == 1
    assert value(metrics, "kaisched_job_scheduling_seconds_sum", queue="train") == 42.0
    assert value(metrics, "kaisched_job_scheduling_seconds_bucket", queue="train", le="30.0") == 0
    assert value(metrics, "kaisched_job_scheduling_seconds_bucket", queue="train", le="60.0") == 1


def upstream_gang(cluster: MemoryCluster, name: str, size: int, queue: str,
                  api: str = "scheduling.k8s.io/v1beta1") -> None:
    """A gang of the upstream Workload API: a PodGroup (v1alpha1: a Workload)
    and pods naming it, in the queue their label gives."""
    if api.endswith("/v1alpha1"):
        cluster.create({"apiVersion": api, "kind": "Workload",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"podGroups": [{"name": "g", "policy": {"gang": {"minCount": size}}}]}})
        join: dict[str, Any] = {"workloadRef": {"name": name, "podGroup": "g"}}
    else:
        cluster.create({"apiVersion": api, "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}})
        join = {"schedulingGroup": {"podGroupName": name}}
    cluster.clock.advance(10.0)        # its pods come 10 s after it
    for i in range(size):
        cluster.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{name}-{i}", "namespace": "default",
                                     "labels": {"kaisched.io/queue": queue}},
                        "spec": {"schedulerName": "kaisched", **join, "containers": [
                            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})


def test_job_scheduling_latency_of_upstream_gangs_from_their_pods_to_their_minimum_bound() -> None:
    """An upstream PodGroup's status has no counts: the cycle whose binds
    reach the gang's minimum is the one measured, from when its pods made up
    the minimum (upstream holds a gang back until then), once per gang."""
    cluster = MemoryCluster(ManualClock())
    for name in ("default", "train", "infer"):
        queue(cluster, name)
    upstream_gang(cluster, "beta", 3, "train")
    upstream_gang(cluster, "alpha", 2, "infer", api="scheduling.k8s.io/v1alpha1")
    cluster.clock.advance(42.0)         # nodes arrive 42 s after the last pods
    node(cluster, "n1", cpu="8")
    metrics = run(cluster, cycles=4)
    assert value(metrics, "kaisched_job_scheduling_seconds_count", queue="train") == 1
    assert value(metrics, "kaisched_job_scheduling_seconds_sum", queue="train") == 52.0
    assert value(metrics, "kaisched_job_scheduling_seconds_count", queue="infer") == 1
    assert value(metrics, "kaisched_job_scheduling_seconds_sum", queue="infer") == 42.0


def test_session_duration_and_bind_latency_are_histograms() -> None:
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    node(cluster, "n1")
    gang(cluster, "g", 2)
    metrics = run(cluster, cycles=2)
    assert value(metrics, "kaisched_session_seconds_count") == 2
    assert value(metrics, "kaisched_bind_seconds_count") == value(metrics, "kaisched_binds_total") == 2
    assert value(metrics, "kaisched_bind_seconds_bucket", le="+Inf") == 2


def test_evictions_are_counted_by_queue_and_cause() -> None:
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    for name, prio in (("low", 10), ("high", 1000)):
        cluster.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": name}, "value": prio})
    node(cluster, "n1", cpu="2")
    gang(cluster, "old", 2, priority="low")
    run(cluster, cycles=1)
    gang(cluster, "new", 2, priority="high")
    metrics = run(cluster, cycles=2)
    assert value(metrics, "kaisched_evictions_total", queue="default", cause="preempt") == 2


def test_a_move_is_an_eviction_of_cause_consolidation_with_its_event() -> None:
    """Consolidation moves b-0 to make room for big: counted under its own
    cause, and the pod's Event says Evicted (it runs again), naming big."""
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    node(cluster, "n1")
    node(cluster, "n2")
    for name in ("a", "b"):
        cluster.create({"apiVersion": PG, "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": 1}})
        cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{name}-0", "namespace": "default", "annotations": {"kaisched.io/pod-group": name},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
                                 "uid": f"{name}-uid", "controller": True}]},
            "spec": {"schedulerName": "kaisched", "nodeName": "n1" if name == "a" else "n2",
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
            "status": {"phase": "Running"}})
    gang(cluster, "big", 1, cpu="3")
    metrics = run(cluster, cycles=1, config=CONFIG.replace("[enqueue, allocate, preempt]",
                                                           "[allocate, consolidation]"))
    assert value(metrics, "kaisched_evictions_total", queue="default", cause="consolidation") == 1
    events = [e for e in cluster.list(EVENT) if e["reason"] == "Evicted"]
    assert [e["involvedObject"]["name"] for e in events] == ["b-0"]
    assert "moved by consolidation to make room for default/big" in events[0]["message"]


def test_preemptions_held_back_by_the_delay_are_counted_by_queue() -> None:
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    for name, prio in (("low", 10), ("high", 1000)):
        cluster.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": name}, "value": prio})
    node(cluster, "n1", cpu="2")
    gang(cluster, "old", 2, priority="low")
    run(cluster, cycles=1)
    gang(cluster, "new", 2, priority="high")
    delayed = CONFIG + "preemptionDelay: 60s\n"
    metrics = run(cluster, cycles=2, config=delayed)
    assert value(metrics, "kaisched_preemption_delayed_gangs", queue="default") == 1
    assert value(metrics, "kaisched_evictions_total", queue="default", cause="preempt") == 0
    cluster.clock.advance(61)           # the delay has run: it preempts, and is held back no more
    metrics = run(cluster, cycles=1, config=delayed)
    assert value(metrics, "kaisched_preemption_delayed_gangs", queue="default") == 0
    assert value(metrics, "kaisched_evictions_total", queue="default", cause="preempt") == 2


def test_pending_gangs_are_counted_by_queue_and_what_blocks_them() -> None:
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    queue(cluster, "capped", limit="2")
    node(cluster, "n1", cpu="4")
    gang(cluster, "huge", 2, cpu="8")                                  # no node has room
    gang(cluster, "elsewhere", 1, selector={"zone": "b"})              # a placement rule
    gang(cluster, "over", 3, queue="capped")                           # the queue's limit
    metrics = run(cluster, cycles=2)
    assert value(metrics, "kaisched_pending_gangs", queue="default", reason="resources") == 1
    assert value(metrics, "kaisched_pending_gangs", queue="default", reason="placement") == 1
    assert value(metrics, "kaisched_pending_gangs", queue="capped", reason="quota") == 1
    # Room appears: the gauge drops the class nothing is blocked by any more.
    node(cluster, "n2", cpu="16")
    metrics = run(cluster, cycles=2)
    assert value(metrics, "kaisched_pending_gangs", queue="default", reason="resources") == 0
    assert value(metrics, "kaisched_pending_gangs", queue="default", reason="placement") == 1


# -- the dashboard ------------------------------------------------------------------------

def exported() -> set[str]:
    """Every series name the scheduler and the PodGrouper export."""
    names: set[str] = set()
    for registry in (Metrics().registry, GrouperMetrics().registry):
        for family in registry.collect():
            kind = family.type
            base = family.name
            if kind == "counter":
                names |= {f"{base}_total", f"{base}_created"}
            elif kind == "histogram":
                names |= {f"{base}_bucket", f"{base}_sum", f"{base}_count", f"{base}_created"}
            else:
                names.add(base)
    return names


def dashboard() -> dict[str, Any]:
    path = ROOT / "config" / "components" / "monitoring" / "dashboard.yaml"
    (config_map,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    (text,) = config_map["data"].values()
    return json.loads(text)


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    board = dashboard()
    queries = [t["expr"] for p in board["panels"] for t in p.get("targets", ())]
    assert len(queries) >= 8
    used = {m for q in queries for m in re.findall(r"\b((?:kaisched|podgrouper)_[a-z_]+)", q)}
    missing = used - exported()
    assert not missing, f"the dashboard queries metrics nobody exports: {sorted(missing)}"
    # And what users asked for is on it.
    for wanted in ("kaisched_job_scheduling_seconds_bucket", "kaisched_evictions_total",
                   "kaisched_pending_gangs", "kaisched_session_seconds_bucket",
                   "kaisched_bind_seconds_bucket", "kaisched_is_leader", "podgrouper_is_leader"):
        assert wanted in used, wanted


def test_default_config_runs_with_metrics() -> None:
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    node(cluster, "n1")
    gang(cluster, "g", 2)
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, cluster.clock,
                          Binder(cluster, cluster.clock.now))
    metrics = Metrics()
    serve(scheduler, threading.Event(), None, metrics, cycles=1)
    assert value(metrics, "kaisched_binds_total") == 2


def test_queue_usage_and_cluster_capacity_are_exported_and_a_standby_forgets_them() -> None:
    """Fair share with memory: each queue's usage per resource, and what the
    cluster offers (Prometheus-sourced usage reads it back); a replica that
    stops leading exports no queue figures, so only the leader's count."""
    from kaisched.api.clock import ManualClock
    from kaisched.builtins.catalog import register_builtins
    from kaisched.cluster.memory import MemoryCluster
    from kaisched.framework import parse_config
    from kaisched.runtime.binder import Binder
    from kaisched.runtime.metrics import Metrics
    from kaisched.runtime.scheduler import Scheduler
    from tests.builders.objects import build_node, build_pod, build_queue

    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in [build_node("gpu-1", cpu=16, gpu=8), build_queue("team-a"),
                *[build_pod(f"a-{i}", cpu=1, gpu=1, queue="team-a", node="gpu-1") for i in range(4)]]:
        cluster.create(obj)
    registry = register_builtins()
    config = parse_config("usageDBConfig: {usageParams: {windowSize: 4800s}}", registry)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    metrics = Metrics()
    for _ in range(30):
        metrics.observe(scheduler.run_once(), clock.now())
        clock.advance(1.0)
    value = metrics.registry.get_sample_value
    assert value("kaisched_cluster_capacity", {"resource": "nvidia.com/gpu"}) == 8
    assert value("kaisched_cluster_capacity", {"resource": "cpu"}) == 16
    assert value("kaisched_queue_usage", {"queue": "team-a", "resource": "nvidia.com/gpu"}) == \
        pytest.approx(0.5)
    assert value("kaisched_queue_allocated", {"queue": "team-a", "resource": "nvidia.com/gpu"}) == 4
    metrics.forget_queues()
    assert value("kaisched_queue_usage", {"queue": "team-a", "resource": "nvidia.com/gpu"}) is None
    assert value("kaisched_queue_allocated", {"queue": "team-a", "resource": "nvidia.com/gpu"}) is None
    assert value("kaisched_cluster_capacity", {"resource": "nvidia.com/gpu"}) is None


def test_provisioning_requests_are_counted_by_class_and_outcome() -> None:
    """A gang the cluster cannot hold is asked for (asked); the autoscaler's answer is counted
    once, and the seconds to Provisioned observed."""
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    node(cluster, "n1", cpu="2")
    gang(cluster, "big", 4)
    registry = register_builtins()
    clock = cluster.clock
    config = parse_config(CONFIG + "autoscaling: {}\n", registry)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    metrics = Metrics()
    metrics.observe(scheduler.run_once(), clock.now())
    atomic = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert value(metrics, "kaisched_provisioning_requests_total", **{"class": atomic},
                 outcome="asked") == 1
    [request] = cluster.list(PROVISIONING_REQUEST, "default")
    clock.advance(30)
    cluster.patch_status(PROVISIONING_REQUEST, "default", request["metadata"]["name"], {
        "conditions": [{"type": "Provisioned", "status": "True", "reason": "Provisioned",
                        "message": "", "lastTransitionTime": to_rfc3339(clock.now())}]})
    for _ in range(2):
        clock.advance(1)
        metrics.observe(scheduler.run_once(), clock.now())
    assert value(metrics, "kaisched_provisioning_requests_total", **{"class": atomic},
                 outcome="provisioned") == 1
    assert value(metrics, "kaisched_provisioning_seconds_sum", **{"class": atomic}) == 30.0


def test_a_reservation_and_its_start_are_exported_by_queue() -> None:
    """A gang past its starvation threshold, its room held on a node where a pod runs with
    activeDeadlineSeconds 600 (and the default 30 s grace): reserved, whole by then; likely
    by its estimate."""
    cluster = MemoryCluster(ManualClock())
    queue(cluster, "default")
    node(cluster, "n1", cpu="2")
    now = cluster.clock.now()
    cluster.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "running", "namespace": "default",
                                 "annotations": {"kaisched.io/expected-runtime": "5m"}},
                    "spec": {"schedulerName": "kaisched", "nodeName": "n1",
                             "activeDeadlineSeconds": 600, "containers": [
                                 {"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                    "status": {"phase": "Running", "startTime": to_rfc3339(now)}})
    gang(cluster, "big", 1, cpu="2")
    config = CONFIG + "starvationThreshold: 1s\n"
    run(cluster, cycles=1, config=config)           # it waits: unschedulable since now
    cluster.clock.advance(5)
    metrics = run(cluster, cycles=1, config=config)
    assert value(metrics, "kaisched_reservations", queue="default") == 1
    assert value(metrics, "kaisched_reservation_start_timestamp_seconds",
                 queue="default") == now + 600 + 30
    # Its estimate (5m) says when the room likely is free; it lends nothing.
    assert value(metrics, "kaisched_reservation_likely_start_timestamp_seconds",
                 queue="default") == now + 300
