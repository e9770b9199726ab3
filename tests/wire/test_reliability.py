"""The scheduler under faults, over the wire to the emulator: one leader at a
time, final 409s, no cycle on a cache whose watches are down, a prompt stop,
few Events, status writes that never hold decisions back, and the
behaviours that must keep holding (a leader killed hands over, a gang cut
short is completed, an API restart is survived).

Requests are counted, never timed; where a test must hold something in
flight, the emulator holds it (Emulator.hold / release).
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Iterator

import kmock
import pytest

from kaisched.api.clock import ManualClock, WallClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import EVENT, LEASE, POD
from kaisched.cluster.kube import KubeCluster
from kaisched.framework import parse_config
from kaisched.framework.effects import RecordEvent
from kaisched.runtime.binder import Binder
from kaisched.runtime.metrics import Metrics
from kaisched.runtime.scheduler import Scheduler, serve
from kaisched.runtime.throttle import WriteThrottle
from kaisched.service.leader import LeaderElector, micro_time
from tests.builders.wire import (
    PATIENCE,
    PODS,
    Emulator,
    build_node,
    build_pod,
    build_podgroup,
    eventually,
)

CONFIG = ("schedulePeriod: 20ms\nactions: [allocate]\n"
          "tiers: [{plugins: [{name: priority}, {name: gang}, {name: predicates}]}]\n")
BINDS = (kmock.resource(PODS), kmock.subresource("binding"))


def scheduler(cluster: KubeCluster, clock: Any = None, workers: int = 1,
              throttle: WriteThrottle | None = None) -> Scheduler:
    registry = register_builtins()
    clock = clock or WallClock()
    binder = Binder(cluster, clock.now, workers=workers, throttle=throttle, backoff=0.01)
    return Scheduler(cluster, parse_config(CONFIG, registry), registry, clock, binder)


def elector(cluster: KubeCluster, identity: str, lease: float = 30.0) -> LeaderElector:
    # A long lease by default: nobody retakes it behind the test's back.
    return LeaderElector(cluster, WallClock(), identity, namespace="default",
                         lease_seconds=lease, renew_deadline=min(lease - 0.5, 5.0),
                         retry_period=0.1)


@contextlib.contextmanager
def serving(sched: Scheduler, lead: LeaderElector | None = None,
            metrics: Metrics | None = None) -> Iterator[threading.Event]:
    """serve() on a thread; stopped (and checked to have ended) on the way out."""
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(sched, stop, lead, metrics), daemon=True)
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(PATIENCE)
        assert not thread.is_alive(), "serve() did not return after stop"


def node_of(cluster: KubeCluster, pod: str) -> str | None:
    return cluster.get(POD, "default", pod)["spec"].get("nodeName")


def gang(cluster: KubeCluster, name: str, size: int, cpu: str = "1") -> list[str]:
    cluster.create(build_podgroup(name, min_member=size))
    pods = [f"{name}-{i}" for i in range(size)]
    for pod in pods:
        cluster.create(build_pod(pod, group=name, cpu=cpu))
    return pods


# -- issue: one leader at a time ------------------------------------------------------

def test_no_bind_is_sent_after_the_lease_is_taken_over_mid_cycle(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="16"))
    pods = gang(cluster, "g", 6)
    apiserver.hold("binding")
    a = elector(cluster, "a")
    sched = scheduler(cluster)
    with serving(sched, a):
        eventually(lambda: apiserver.count(*BINDS) == 1)        # the first bind, held
        lease = cluster.get(LEASE, "default", "kaisched")
        cluster.patch(LEASE, "default", "kaisched", {"spec": {
            "holderIdentity": "b", "renewTime": micro_time(time.time()),
            "leaseDurationSeconds": 30}})
        assert lease["spec"]["holderIdentity"] == "a"
        eventually(lambda: not a.is_leading())
        apiserver.release("binding")
        eventually(lambda: node_of(cluster, pods[0]))          # the one in flight lands
        sched.binder.wait()     # the rest was dropped, not sent
    assert apiserver.count(*BINDS) == 1
    assert [p for p in pods if node_of(cluster, p)] == pods[:1]


def test_a_gang_whose_binds_were_dropped_with_the_lease_is_completed_when_it_is_taken_again(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    """The lease is lost with one bind of a gang in flight and five queued: the
    five are dropped unsent. When the lease is taken again they are placed
    again -- not counted as bound forever because the cycle that decided them
    assumed so."""
    cluster.create(build_node("n1", cpu="16"))
    pods = gang(cluster, "g", 6)
    apiserver.hold("binding")
    a = elector(cluster, "a", lease=3.0)
    with serving(scheduler(cluster), a):
        eventually(lambda: apiserver.count(*BINDS) == 1)        # the first bind, held
        cluster.patch(LEASE, "default", "kaisched", {"spec": {
            "holderIdentity": "b", "renewTime": micro_time(time.time()),
            "leaseDurationSeconds": 3}})
        eventually(lambda: not a.is_leading())
        apiserver.release("binding")
        eventually(lambda: node_of(cluster, pods[0]))          # the one in flight lands
        # b never renews: a takes the lease again once it has expired.
        eventually(lambda: all(node_of(cluster, p) for p in pods))
        assert cluster.get(LEASE, "default", "kaisched")["spec"]["holderIdentity"] == "a"
    assert apiserver.count(*BINDS) == len(pods)                 # each sent once


def test_binds_that_fail_in_the_middle_of_gangs_are_placed_again_until_every_gang_is_whole(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    """The first two binds fail (each retried, and failing again) and the third
    lands: the first gang is left with one pod of three bound. The next cycles
    read the two again and complete it; every gang ends whole, split over nodes
    as it must be."""
    for i in range(3):
        cluster.create(build_node(f"n{i}", cpu="4"))
    gangs = [gang(cluster, f"g{i}", 3, cpu="2") for i in range(2)]     # 6 cpu: two nodes each
    calls = [0]

    def failing(request: kmock.Request) -> Any:
        calls[0] += 1
        if calls[0] <= 8:       # two binds, each tried four times
            raise kmock.KubernetesError(status=500, reason="InternalError",
                                        message="etcdserver: request timed out")
        return NotImplemented   # declined, and so used up: the emulator binds from now on

    apiserver.call(lambda: apiserver.emu.override[BINDS] << failing)
    with serving(scheduler(cluster)):
        eventually(lambda: all(node_of(cluster, p) for g in gangs for p in g))
    assert calls[0] == 9                                        # the failures did happen
    for g in gangs:
        assert len({node_of(cluster, p) for p in g}) == 2


# -- issue: a 409 is final -------------------------------------------------------------

def test_a_409_on_bind_is_not_retried_and_the_pod_is_read_again(
        apiserver: Emulator, cluster: KubeCluster, caplog: pytest.LogCaptureFixture) -> None:
    cluster.create(build_node("n1", cpu="4"))
    cluster.create(build_pod("p0"))
    sched = scheduler(cluster)
    sched.sync()
    cluster.bind("default", "p0", "", "n1")                   # someone else binds it
    stale = build_pod("p0")                                   # ... and the cache missed that
    stale["metadata"]["uid"] = ""
    eventually(lambda: (sched.sync(), sched.cache.pods["default/p0"].node_name)[1])
    sched.cache.apply(WatchEvent("MODIFIED", POD, stale))
    with caplog.at_level(logging.WARNING, logger="kaisched.runtime.binder"):
        first = sched.run_once()
    assert [f.effect.pod for f in first.report.failed] == ["default/p0"]
    assert "already assigned" in first.report.failed[0].error
    assert apiserver.count(*BINDS) == 2                       # ours once, not retried
    assert [r.getMessage() for r in caplog.records if "bind default/p0" in r.getMessage()] \
        == [f"bind default/p0 to n1 failed: {first.report.failed[0].error}"]
    second = sched.run_once()                                 # read again: bound, left alone
    assert not second.placed and apiserver.count(*BINDS) == 2
    sched.binder.stop()


# -- issue: no cycle on a cache whose watches are down -----------------------------------

def test_no_cycle_runs_while_a_watch_is_down(apiserver: Emulator, cluster: KubeCluster) -> None:
    state = {"down": True, "expired": False}

    def failing(request: kmock.Request) -> Any:
        if state["down"]:
            raise kmock.KubernetesError(status=500, reason="InternalError", message="etcd is down")
        if not state["expired"]:            # back after long enough for a relist
            state["expired"] = True
            raise kmock.KubernetesError(status=410, reason="Expired", message="too old")
        return NotImplemented               # the emulator's own watch again

    cluster.create(build_node("n1", cpu="4"))
    apiserver.call(lambda: apiserver.emu["watch", kmock.resource(PODS)] << failing)
    metrics = Metrics()
    sessions = lambda: metrics.registry.get_sample_value("kaisched_session_seconds_count")  # noqa: E731
    with serving(scheduler(cluster), metrics=metrics):
        eventually(lambda: not cluster.watching())
        ran = sessions()
        cluster.create(build_pod("p0"))     # pending, and the cache cannot know
        tries = apiserver.count("watch", kmock.resource(PODS))
        eventually(lambda: apiserver.count("watch", kmock.resource(PODS)) >= tries + 3)
        assert not cluster.watching()
        assert sessions() == ran and apiserver.count(*BINDS) == 0
        state["down"] = False
        eventually(lambda: node_of(cluster, "p0") == "n1")   # relisted: it schedules again
    assert sessions() > ran
    assert metrics.registry.get_sample_value("kaisched_binds_total") == 1


# -- issue: SIGTERM; keep: it finishes gangs already binding and releases the Lease -----

def test_stop_finishes_the_gang_already_binding_and_starts_no_other(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="64"))
    gangs = [gang(cluster, f"g{i}", 4) for i in range(6)]
    apiserver.hold("binding")
    a = elector(cluster, "a")
    sched = scheduler(cluster, workers=1)
    with serving(sched, a) as stop:
        eventually(lambda: apiserver.count(*BINDS) == 1)        # a gang began binding
        stop.set()                                             # SIGTERM
        apiserver.release("binding")
    bound = {g[0].split("-")[0]: sum(bool(node_of(cluster, p)) for p in g) for g in gangs}
    assert sorted(bound.values()) == [0, 0, 0, 0, 0, 4]     # one gang whole, none begun after
    assert apiserver.count(*BINDS) == 4
    assert cluster.get(LEASE, "default", "kaisched")["spec"].get("holderIdentity") is None


# -- issue: Events ---------------------------------------------------------------------

def test_a_waiting_pod_gets_one_event_until_its_reason_changes(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="4"))
    cluster.create(build_pod("big", cpu="6"))
    clock = ManualClock(1_700_000_000.0)
    sched = scheduler(cluster, clock, workers=2, throttle=WriteThrottle(min_gap=0.0))
    told = sum(isinstance(e, RecordEvent) for e in sched.run_once().effects)
    sched.binder.wait(writes=True)
    # The pod's condition comes back through the watch: that is what was said.
    eventually(lambda: (sched.sync(), sched.cache.pods["default/big"].unschedulable)[1])
    for _ in range(10):
        clock.advance(1)
        told += sum(isinstance(e, RecordEvent) for e in sched.run_once().effects)
        sched.binder.wait(writes=True)
    events = [e for e in cluster.list(EVENT) if e["reason"] == "FailedScheduling"]
    assert len(events) == 1 and "insufficient cpu on 1 node" in events[0]["message"]
    assert told == 1
    assert apiserver.count("patch", kmock.resource("v1/events")) == 0

    clock.advance(120)          # minutes on, the pod shows its reason: nothing more to say
    sched.run_once()
    sched.binder.wait(writes=True)
    assert len([e for e in cluster.list(EVENT) if e["reason"] == "FailedScheduling"]) == 1

    cluster.create(build_node("n2", cpu="5"))                 # a new reason: a new Event
    eventually(lambda: (sched.sync(), "n2" in sched.cache.nodes)[1])
    sched.run_once()
    sched.binder.wait(writes=True)
    messages = sorted(e["message"] for e in cluster.list(EVENT) if e["reason"] == "FailedScheduling")
    assert len(messages) == 2 and "on 2 nodes" in messages[1]
    sched.binder.stop()


# -- issue: status writes never hold decisions back ------------------------------------

def test_status_writes_of_3000_waiting_pods_do_not_delay_the_next_cycle(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="4"))

    def add() -> None:
        for i in range(3000):
            apiserver.emu.objects[kmock.resource(PODS), "default", f"w{i}"] = \
                build_pod(f"w{i}", cpu="8")
    apiserver.call(add)
    apiserver.hold("status")
    apiserver.hold("create events")
    sched = scheduler(cluster, workers=8, throttle=WriteThrottle())
    first = sched.run_once()
    asked = sum(type(e).__name__ == "SetPodCondition" for e in first.effects)
    assert asked == 3000
    before = len(apiserver.call(lambda: list(apiserver.emu[kmock.subresource("status")])))
    second = sched.run_once()               # decides while every write is still held
    assert second.session_seconds >= 0 and not second.abandoned
    held = len(apiserver.call(lambda: list(apiserver.emu[kmock.subresource("status")])))
    assert before <= held <= 8              # at most one write in flight per worker
    sched.binder.abandon("the test is over")
    apiserver.release("status")
    apiserver.release("create events")
    sched.binder.stop()


# -- keep: a leader killed hands over; no pod bound twice --------------------------------

def test_a_killed_leader_hands_over_and_no_pod_is_bound_twice(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="32"))
    first = gang(cluster, "early", 3)
    a = elector(cluster, "a", lease=2.0)
    sched_a = scheduler(cluster)
    a.lead()
    sched_a.run_once()
    assert all(node_of(cluster, p) for p in first)
    sched_a.binder.stop()
    # kill -9: a renews no more and releases nothing. b takes over by itself.
    b = elector(cluster, "b", lease=2.0)
    later = gang(cluster, "late", 3)
    with serving(scheduler(cluster), b):
        eventually(lambda: all(node_of(cluster, p) for p in later))
    assert cluster.get(LEASE, "default", "kaisched")["spec"]["leaseTransitions"] == 1
    bound = apiserver.call(lambda: [r.name for r in apiserver.emu[BINDS]])
    assert sorted(bound) == sorted(first + later)             # each pod bound once


# -- keep: a gang cut short by a crash is completed after the restart --------------------

def test_a_gang_cut_short_by_a_crash_is_completed_after_restart(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="64"))
    pods = gang(cluster, "big", 40)
    bound: list[Any] = []

    class Crash:
        """The process dies after its tenth bind: nothing more leaves it."""

        def applied(self, effect: Any, seconds: float = 0.0) -> None:
            bound.append(effect)

        def failed(self, effect: Any, error: str) -> None:
            raise AssertionError(error)

    dead = scheduler(cluster, workers=1)
    dead.binder.observer = Crash()
    dead.binder.leading = lambda: len(bound) < 10
    dead.run_once()
    dead.binder.stop()
    assert sum(bool(node_of(cluster, p)) for p in pods) == 10      # cut short mid-gang

    restarted = scheduler(cluster, workers=4)
    result = restarted.run_once()
    restarted.binder.stop()
    assert not result.report.failed
    assert all(node_of(cluster, p) for p in pods)


# -- keep: an API server restart is survived, every gang whole in the end ------------------

def test_an_api_server_restart_is_survived_with_every_gang_whole(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    """Gangs that must be split over nodes (three pods of 2 cpu, nodes of 4),
    on a server that answers 503 to every pod request for a while: no gang is
    partly bound at any look during the outage, and all are whole after it."""
    for i in range(4):
        cluster.create(build_node(f"n{i}", cpu="4"))
    down = [False]

    def restarting(request: kmock.Request) -> Any:
        if not down[0]:
            return NotImplemented
        raise kmock.KubernetesError(status=503, reason="ServiceUnavailable",
                                    message="the API server is restarting")

    gangs = [gang(cluster, f"g{i}", 3, cpu="2") for i in range(2)]

    def bound(pods: list[str]) -> int:      # read behind the outage, from the store
        return sum(bool((apiserver.object(PODS, "default", p) or {}).get("spec", {})
                        .get("nodeName")) for p in pods)

    apiserver.call(lambda: apiserver.emu.override[kmock.resource(PODS)] << restarting)
    down[0] = True
    with serving(scheduler(cluster, workers=4)):
        tried = apiserver.count(kmock.resource(PODS))
        while apiserver.count(kmock.resource(PODS)) < tried + 12:     # it tries, and fails
            assert all(bound(g) in (0, len(g)) for g in gangs)
            time.sleep(0.01)
        down[0] = False
        eventually(lambda: all(node_of(cluster, p) for g in gangs for p in g))
    for g in gangs:
        assert bound(g) == len(g) and len({node_of(cluster, p) for p in g}) == 2


# -- issue: an unreachable server is said once per state change, then reminded ----------

def test_an_unreachable_server_is_said_once_then_reminded(
        caplog: pytest.LogCaptureFixture) -> None:
    import socket

    from kaisched.cluster.reachability import Reachability
    from kaisched.errors import UnreachableError

    with socket.socket() as sock:               # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    now = [0.0]
    health = Reachability(remind=60.0, monotonic=lambda: now[0])
    client = KubeCluster.at(f"http://127.0.0.1:{port}", timeout=2.0, health=health)
    with caplog.at_level(logging.WARNING, logger="kaisched.api"):
        for second in range(0, 130, 2):         # two minutes of failing requests
            now[0] = float(second)
            with pytest.raises(UnreachableError):
                client.get(POD, "default", "p")
        health.answered()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4                      # down, two reminders, back
    assert lines[0].startswith(f"the API server cannot be reached: http://127.0.0.1:{port}: ")
    assert "Connection refused" in lines[0] and len(lines[0]) < 250
    assert lines[1].startswith("the API server is still unreachable after 60s (31 failed")
    assert lines[3].startswith("the API server answers again after 128s (65 failed requests)")
