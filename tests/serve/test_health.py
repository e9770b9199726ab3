"""Health that means something, and failing loops said the way an operator reads them.

/healthz fails when the leader's loop has not finished a period for several
periods (a standby stays healthy); /readyz says whether the caches synced.
The PodGrouper runs as the scheduler does: its own Lease, metrics, probes,
and an outage is one line down, a reminder a minute, one line back, with
exponential backoff in between.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from kaisched.api.clock import ManualClock
from kaisched.cluster.kinds import LEASE
from kaisched.cluster.kube import KubeCluster
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import TransientApiError, UnreachableError
from kaisched.service.health import Health, serve
from kaisched.service.leader import LeaderElector
from kaisched.service.outage import Outage
from podgrouper.controller import PodGrouper
from podgrouper.metrics import GrouperMetrics

PATIENCE = 120.0    # seconds a wait may last: it only keeps a hang from lasting forever


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_leader_whose_loop_stalls_is_unhealthy_and_a_standby_is_not() -> None:
    clock, leading = Clock(), [True]
    health = Health(1.0, leading=lambda: leading[0], synced=lambda: True,
                    stall_periods=10, min_stall=30.0, monotonic=clock)
    clock.now = 29.0
    assert health.alive()[0]
    clock.now = 31.0
    good, why = health.alive()
    assert not good and "has not finished a period for 31s" in why
    leading[0] = False                      # a standby only keeps its cache warm
    assert health.alive()[0]
    leading[0] = True
    health.beat()
    assert health.alive()[0]


def test_the_stall_limit_is_several_periods_of_a_slow_loop() -> None:
    assert Health(10.0, stall_periods=10, min_stall=30.0).stall == 100.0


def test_ready_once_synced_and_watching() -> None:
    synced, watching = [False], [True]
    health = Health(1.0, synced=lambda: synced[0], watching=lambda: watching[0])
    assert health.ready() == (False, "caches not synced yet")
    synced[0] = True
    assert health.ready() == (True, "ok")
    watching[0] = False
    assert not health.ready()[0]


def test_ready_tells_a_warm_standby_from_a_cold_one() -> None:
    clock, leading, warmed = Clock(), [False], [None]
    health = Health(1.0, leading=lambda: leading[0], synced=lambda: True, monotonic=clock,
                    min_stall=30.0, warmed_at=lambda: warmed[0])
    good, why = health.ready()
    assert not good and why.startswith("cold standby: its cache has listed the cluster")
    warmed[0] = 0.0
    assert health.ready() == (True, "ok: warm standby (its cache follows the cluster; a "
                                    "takeover adds only the last events)")
    clock.now = 31.0            # its loop stopped following
    good, why = health.ready()
    assert not good and why == ("cold standby: its cache has not followed the cluster for "
                                "31s (limit 30s)")
    leading[0] = True
    assert health.ready() == (True, "ok: leading")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=PATIENCE) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_probes_over_http() -> None:
    clock, synced = Clock(), [False]
    health = Health(1.0, synced=lambda: synced[0], monotonic=clock)
    metrics = GrouperMetrics()
    server = serve(metrics.registry, health, 0, host="127.0.0.1")
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert get(f"{base}/healthz") == (200, "ok\n")
        assert get(f"{base}/readyz") == (503, "caches not synced yet\n")
        synced[0] = True
        assert get(f"{base}/readyz") == (200, "ok\n")
        clock.now = 1000.0
        assert get(f"{base}/healthz")[0] == 503
        assert "podgrouper_is_leader" in get(f"{base}/metrics")[1]
    finally:
        server.shutdown()
        server.server_close()


# -- failing loops ------------------------------------------------------------------------

def test_an_outage_is_said_once_reminded_each_minute_and_backs_off(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = logging.getLogger("test.outage")
    outage = Outage(log, "sync", period=1.0, max_delay=30.0, monotonic=clock)
    delays = []
    with caplog.at_level(logging.INFO, logger="test.outage"):
        while clock.now < 130:
            delays.append(outage.failed(UnreachableError("connection refused")))
            clock.now += delays[-1]
        outage.succeeded()
    assert delays[:7] == [1, 2, 4, 8, 16, 30, 30]
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "sync failed, retrying with backoff: connection refused"
    assert [line.split(" after ")[0] for line in lines[1:-1]] == ["sync still fails"] * 2
    assert lines[-1].startswith("sync works again after 1")
    assert outage.delay == 1.0


def test_a_new_reason_is_news_but_the_same_one_is_not(caplog: pytest.LogCaptureFixture) -> None:
    outage = Outage(logging.getLogger("test.outage"), "sync", period=1.0, monotonic=Clock())
    with caplog.at_level(logging.INFO, logger="test.outage"):
        outage.failed(TransientApiError("etcd leader changed", 500))
        outage.failed(TransientApiError("etcd leader changed", 500))
        outage.failed(TransientApiError("too many requests", 429))
    assert len(caplog.records) == 2


def test_the_podgrouper_leads_through_its_own_lease_and_beats_its_health() -> None:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    elector = LeaderElector(cluster, clock, "grouper-1", namespace="kaisched-system",
                            name="kaisched-podgrouper")
    metrics = GrouperMetrics()
    health = Health(0.01, leading=elector.is_leading, monotonic=lambda: 0.0)
    health._beat = -100.0       # stale until the loop beats it
    stop = threading.Event()
    grouper = PodGrouper(cluster, clock)
    thread = threading.Thread(target=grouper.run, args=(stop, 0.01, elector, metrics, health))
    thread.start()
    deadline = time.monotonic() + PATIENCE
    while metrics.registry.get_sample_value("podgrouper_is_leader") != 1.0:
        assert time.monotonic() < deadline, "the PodGrouper never led"
        time.sleep(0.01)
    assert cluster.get(LEASE, "kaisched-system", "kaisched-podgrouper")["spec"][
        "holderIdentity"] == "grouper-1"
    assert health.alive()[0] and grouper.synced
    stop.set()
    thread.join(PATIENCE)
    assert not thread.is_alive()
    lease = cluster.get(LEASE, "kaisched-system", "kaisched-podgrouper")
    assert not lease["spec"].get("holderIdentity")          # released on the way out
    assert metrics.registry.get_sample_value("podgrouper_is_leader") == 0.0


def test_the_podgrouper_says_an_unreachable_api_once(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:           # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = KubeCluster.at(f"http://127.0.0.1:{port}", timeout=1.0)
    grouper = PodGrouper(client, ManualClock())
    metrics = GrouperMetrics()
    stop = threading.Event()
    tries = lambda: metrics.registry.get_sample_value("podgrouper_sync_errors_total") or 0  # noqa: E731
    with caplog.at_level(logging.INFO):
        thread = threading.Thread(target=grouper.run, args=(stop, 0.01, None, metrics, None),
                                  kwargs={"max_delay": 0.16})
        started = time.monotonic()
        thread.start()
        deadline = started + PATIENCE
        while tries() < 8:
            assert time.monotonic() < deadline, "the PodGrouper stopped trying"
            time.sleep(0.01)
        took = time.monotonic() - started
        stop.set()
        thread.join(PATIENCE)
    client.close()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 2, lines           # the client's "cannot be reached", the loop's one
    assert lines[1].startswith("PodGrouper sync failed, retrying with backoff")
    # Backed off: the eighth try came after waits of 10, 20, 40, 80 and 3 x 160 ms (0.63 s),
    # where a retry every period (10 ms) comes after 70 ms. A lower bound: load only adds.
    assert took >= 0.6, f"eight tries in {took:.2f}s: no backoff"
