"""Usage from a real Prometheus (Debian's `prometheus` package) on loopback,
scraping a kaisched's own /metrics: the queue-allocation and cluster-capacity
metrics it exports come back as each queue's normalised usage; with the server
gone, the last known usage stands and one line says so. Skipped where
`prometheus` is not installed (.ci/run installs it where it can)."""
from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from kaisched.api.clock import ManualClock
from kaisched.api.decayedusage import UsageParams
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.memory import MemoryCluster
from kaisched.cluster.prometheus import PrometheusClient
from kaisched.errors import UsageDBError
from kaisched.framework import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.metrics import Metrics
from kaisched.runtime.scheduler import Scheduler
from kaisched.runtime.usagebooks import PrometheusBook, fetch_usage
from tests.builders.objects import build_node, build_pod, build_queue

GPU = "nvidia.com/gpu"
PROMETHEUS = shutil.which("prometheus")
PATIENCE = 120.0            # seconds: only bounds a hang


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Any, patience: float = PATIENCE) -> Any:
    deadline = time.monotonic() + patience
    while True:
        try:
            got = check()
        except UsageDBError:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.5)


@contextmanager
def exported(objects: list[dict[str, Any]], pool: str | None = None
             ) -> Iterator[tuple[int, Scheduler]]:
    """A kaisched whose cycles set its metrics (labelled with its node pool,
    if any), served on a loopback port."""
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in objects:
        cluster.create(obj)
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now))
    metrics = Metrics(pool)
    for _ in range(2):
        metrics.observe(scheduler.run_once(), clock.now())
        clock.advance(1.0)
    port = free_port()
    server = metrics.serve(port, host="127.0.0.1")
    try:
        yield port, scheduler
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def exporting() -> Iterator[tuple[int, Scheduler]]:
    """team-a holds 6 of the 8 GPUs, team-b 1."""
    with exported([build_node("gpu-1", cpu=16, gpu=8), build_queue("team-a"),
                   build_queue("team-b"),
                   *[build_pod(f"a-{i}", cpu=1, gpu=1, queue="team-a", node="gpu-1")
                     for i in range(6)],
                   build_pod("b-0", cpu=1, gpu=1, queue="team-b", node="gpu-1")]) as served:
        yield served


@contextmanager
def scraping(tmp_path: Path, targets: list[int]) -> Iterator[str]:
    """A real Prometheus on loopback scraping the given ports each second."""
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (Debian: apt-get install prometheus)")
    listed = ", ".join(f"'127.0.0.1:{t}'" for t in targets)
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: kaisched\n    static_configs: [{{targets: [{listed}]}}]\n")
    port = free_port()
    process = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("wb"))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def prometheus(tmp_path: Path, exporting: tuple[int, Scheduler]) -> Iterator[str]:
    with scraping(tmp_path, [exporting[0]]) as url:
        yield url


def scraped(client: PrometheusClient, series: str, count: int) -> bool:
    """Prometheus holds at least count samples of each of the series."""
    got = client.query_range(series, time.time() - 60, time.time(), 1.0)
    return bool(got) and all(len(samples) >= count for _, samples in got)


def test_usage_comes_back_from_a_real_prometheus(prometheus: str, exporting: tuple[int, Scheduler],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    client = PrometheusClient(prometheus, timeout=10.0)
    params = UsageParams(window=240.0)          # buckets of 5 s
    # Enough scrapes for a few buckets of kaisched's figures.
    wait_for("kaisched's metrics in Prometheus", lambda: len(client.query_range(
        "kaisched_cluster_capacity", time.time() - 60, time.time(), 1.0)[0][1]) >= 15
        if client.query_range("kaisched_cluster_capacity", time.time() - 60, time.time(), 1.0)
        else None)
    usage = fetch_usage(client, params, time.time())
    assert usage["team-a"][GPU] == pytest.approx(6 / 8, abs=0.01)
    assert usage["team-b"][GPU] == pytest.approx(1 / 8, abs=0.01)
    assert usage["team-a"]["cpu"] == pytest.approx(6 / 16, abs=0.01)

    # The book a scheduler with clientType prometheus keeps: asked in a thread of its own.
    _, scheduler = exporting
    book = PrometheusBook(params, client)
    cluster = scheduler.cache.snapshot(scheduler.clock.now())
    assert book.observe(cluster, time.time()) == {}           # nothing known before the answer
    wait_for("the book's first answer", lambda: book.known)
    assert book.observe(cluster, time.time())["team-a"][GPU] == pytest.approx(6 / 8, abs=0.01)
    (write,) = [w for w in book.writes(time.time()) if w.queue == "team-a"]
    assert dict(write.usage.normalized)[GPU] == pytest.approx(6 / 8, abs=0.01)

    # Prometheus gone: the last known usage stands, and one line says so.
    book.client = PrometheusClient(f"http://127.0.0.1:{free_port()}", timeout=2.0)
    with caplog.at_level(logging.WARNING, logger="kaisched.runtime.usagebooks"):
        for _ in range(3):
            book.refresh(time.time())
    assert book.observe(cluster, time.time())["team-a"][GPU] == pytest.approx(6 / 8, abs=0.01)
    lines = [r for r in caplog.records if "last known usage stands" in r.getMessage()]
    assert len(lines) == 1


def test_a_shard_asks_for_its_own_pools_series(tmp_path: Path) -> None:
    """Two shards' schedulers exported to one Prometheus: each one's usage is
    its queue's use over what its own pool offered, not the largest pool's."""
    pool_a = [build_node("a-1", cpu=16, gpu=8), build_queue("team-a"),
              *[build_pod(f"a-{i}", cpu=1, gpu=1, queue="team-a", node="a-1") for i in range(6)]]
    pool_b = [build_node("b-1", cpu=32, gpu=16), build_queue("team-b"),
              *[build_pod(f"b-{i}", cpu=1, gpu=1, queue="team-b", node="b-1") for i in range(4)]]
    with exported(pool_a, "a") as (port_a, _), exported(pool_b, "b") as (port_b, _), \
            scraping(tmp_path, [port_a, port_b]) as url:
        client = PrometheusClient(url, timeout=10.0)
        wait_for("both pools' metrics in Prometheus",
                 lambda: scraped(client, 'kaisched_cluster_capacity{resource="nvidia.com/gpu"}', 15)
                 and len(client.query("kaisched_cluster_capacity{resource=\"nvidia.com/gpu\"}",
                                      time.time())) == 2)
        params = UsageParams(window=240.0)
        a = fetch_usage(client, params, time.time(), pool="a")
        b = fetch_usage(client, params, time.time(), pool="b")
    assert set(a) == {"team-a"} and set(b) == {"team-b"}
    assert a["team-a"][GPU] == pytest.approx(6 / 8, abs=0.01)       # not 6 of pool b's 16
    assert b["team-b"][GPU] == pytest.approx(4 / 16, abs=0.01)
