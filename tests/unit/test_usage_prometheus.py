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
from pathlib import Path
from typing import Any, Iterator

import pytest

from kaisched.api.clock import ManualClock
from kaisched.api.usage import UsageParams
from kaisched.catalog import register_builtins
from kaisched.cluster.memory import MemoryCluster
from kaisched.cluster.prometheus import PrometheusClient
from kaisched.errors import UsageDBError
from kaisched.framework import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.metrics import Metrics
from kaisched.runtime.scheduler import Scheduler
from kaisched.runtime.usage import PrometheusBook, fetch_usage

from .conftest import build_node, build_pod, build_queue

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


@pytest.fixture
def exporting() -> Iterator[tuple[int, Scheduler]]:
    """A kaisched whose cycles set its metrics, served on a loopback port:
    team-a holds 6 of the 8 GPUs, team-b 1."""
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in [build_node("gpu-1", cpu=16, gpu=8), build_queue("team-a"), build_queue("team-b"),
                *[build_pod(f"a-{i}", cpu=1, gpu=1, queue="team-a", node="gpu-1") for i in range(6)],
                build_pod("b-0", cpu=1, gpu=1, queue="team-b", node="gpu-1")]:
        cluster.create(obj)
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now))
    metrics = Metrics()
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
def prometheus(tmp_path: Path, exporting: tuple[int, Scheduler]) -> Iterator[str]:
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (Debian: apt-get install prometheus)")
    target, _ = exporting
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: kaisched\n    static_configs: [{{targets: ['127.0.0.1:{target}']}}]\n")
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
    with caplog.at_level(logging.WARNING, logger="kaisched.runtime.usage"):
        for _ in range(3):
            book.refresh(time.time())
    assert book.observe(cluster, time.time())["team-a"][GPU] == pytest.approx(6 / 8, abs=0.01)
    lines = [r for r in caplog.records if "last known usage stands" in r.getMessage()]
    assert len(lines) == 1
