"""The production loop on the memory backend: the leader schedules and counts
what it did; a standby keeps its cache warm and binds nothing; the metrics
and health endpoints answer over loopback HTTP."""
from __future__ import annotations

import threading
import urllib.request

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import parse_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.metrics import Metrics
from kaisched.runtime.scheduler import Scheduler, serve
from kaisched.service.health import Health
from kaisched.service.leader import LeaderElector

FAST = "schedulePeriod: 1ms\nactions: [allocate]\ntiers: [{plugins: [{name: gang}, {name: predicates}]}]\n"


def cluster_with_pods(count: int) -> MemoryCluster:
    cluster = MemoryCluster(ManualClock())
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
                    "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}})
    for i in range(count):
        cluster.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"p{i}", "namespace": "default"},
                        "spec": {"schedulerName": "kaisched", "containers": [
                            {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})
    return cluster


def scheduler(cluster: MemoryCluster) -> Scheduler:
    registry = register_builtins()
    return Scheduler(cluster, parse_config(FAST, registry), registry, cluster.clock,
                     Binder(cluster, cluster.clock.now))


def value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_the_leader_schedules_and_counts() -> None:
    cluster = cluster_with_pods(3)
    metrics = Metrics()
    elector = LeaderElector(cluster, cluster.clock, "me")
    assert serve(scheduler(cluster), threading.Event(), elector, metrics, cycles=2) == 2
    assert all(cluster.get(POD, "default", f"p{i}")["spec"].get("nodeName") for i in range(3))
    assert value(metrics, "kaisched_binds_total") == 3
    assert value(metrics, "kaisched_session_seconds_count") == 2
    assert elector.leading is False         # released on the way out


def test_a_standby_binds_nothing() -> None:
    cluster = cluster_with_pods(2)
    assert LeaderElector(cluster, cluster.clock, "other").lead()
    metrics = Metrics()
    serve(scheduler(cluster), threading.Event(), LeaderElector(cluster, cluster.clock, "me"),
          metrics, cycles=2)
    assert not any(cluster.get(POD, "default", f"p{i}")["spec"].get("nodeName") for i in range(2))
    assert value(metrics, "kaisched_is_leader") == 0
    assert value(metrics, "kaisched_binds_total") == 0


def test_stop_ends_the_loop() -> None:
    stop = threading.Event()
    stop.set()
    assert serve(scheduler(cluster_with_pods(1)), stop) == 0


def test_metrics_and_health_over_http() -> None:
    metrics = Metrics()
    metrics.binds.inc(2)
    server = metrics.serve(0, host="127.0.0.1")
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=60) as resp:
            assert resp.status == 200 and resp.read() == b"ok\n"
        with urllib.request.urlopen(f"{base}/metrics", timeout=60) as resp:
            assert b"kaisched_binds_total 2.0" in resp.read()
    finally:
        server.shutdown()
        server.server_close()


def test_a_new_leader_shows_the_queues_as_their_status_says() -> None:
    """A cycle reports only the queues whose status changed; a replica that
    becomes leader starts its queue gauges from the Queue objects."""
    cluster = MemoryCluster(ManualClock())
    cluster.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
                    "metadata": {"name": "team-a"},
                    "spec": {"resources": {"nvidia.com/gpu": {"quota": "4"}}},
                    "status": {"allocated": {"nvidia.com/gpu": "0"},
                               "fairShare": {"nvidia.com/gpu": "0"},
                               "quota": {"nvidia.com/gpu": "4"},
                               "runningJobs": 0, "pendingJobs": 0}})
    metrics = Metrics()
    serve(scheduler(cluster), threading.Event(), LeaderElector(cluster, cluster.clock, "me"),
          metrics, cycles=1)
    assert value(metrics, "kaisched_queue_quota", queue="team-a", resource="nvidia.com/gpu") == 4
    assert metrics.registry.get_sample_value(
        "kaisched_queue_jobs", {"queue": "team-a", "state": "pending"}) == 0


def test_a_standby_keeps_what_a_takeover_needs_built_and_takes_over() -> None:
    cluster = cluster_with_pods(2)
    old = LeaderElector(cluster, cluster.clock, "old")
    assert old.lead()
    standby = scheduler(cluster)
    health = Health(1.0, leading=lambda: False, synced=lambda: standby.synced,
                    warmed_at=lambda: standby.warmed_at)
    assert not health.ready()[0]            # not listed yet
    serve(standby, threading.Event(), LeaderElector(cluster, cluster.clock, "me"), cycles=2)
    assert standby.warmed_at is not None
    assert health.ready() == (True, "ok: warm standby (its cache follows the cluster; a "
                                    "takeover adds only the last events)")
    assert not any(cluster.get(POD, "default", f"p{i}")["spec"].get("nodeName") for i in range(2))
    old.release()                           # the leader goes: the standby leads at its next try
    serve(standby, threading.Event(), LeaderElector(cluster, cluster.clock, "me"), cycles=1)
    assert all(cluster.get(POD, "default", f"p{i}")["spec"].get("nodeName") for i in range(2))


def test_a_lead_lost_and_taken_again_between_two_looks_drops_what_the_old_term_meant() -> None:
    """The loop looks at the lease once a period. A lead lost and taken again
    in between is a new term all the same: the old term's queued binds, holds
    and assumed binds are dropped, as when the loss is seen."""
    from kaisched.runtime.scheduler import Scheduling
    from kaisched.service.loop import Terms

    cluster = cluster_with_pods(2)
    sched = scheduler(cluster)
    sched.sync()
    duty, terms = Scheduling(sched, threading.Event(), None), Terms()
    dropped: list[str] = []
    sched.step_down = lambda: dropped.append("stepped down")     # type: ignore[method-assign]
    duty.turned(terms.look(True, 1))
    duty.turned(terms.look(True, 1))
    assert dropped == []
    duty.turned(terms.look(True, 2))
    assert dropped == ["stepped down"]
