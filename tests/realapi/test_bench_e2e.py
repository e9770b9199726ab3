"""`kaisched bench e2e` runs against a real kube-apiserver: both schedulers
bind the whole (small) workload, and the figures say how long each took.
The figures are a measurement, not checked here."""
from __future__ import annotations

import os

import orjson
import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.cluster.kinds import NODE
from kaisched.cluster.kube import KubeCluster

KUBE_SCHEDULER = os.environ.get("KAISCHED_TEST_KUBE_SCHEDULER", "/tmp/k8s/bin/kube-scheduler")
PREFIX = "shards-bench-e2e"


def test_the_end_to_end_bench_runs_both_schedulers_to_their_last_bind(
        admin_kubeconfig: str, admin: KubeCluster) -> None:
    if not os.access(KUBE_SCHEDULER, os.X_OK):
        pytest.skip(f"no kube-scheduler at {KUBE_SCHEDULER} (KAISCHED_TEST_KUBE_SCHEDULER)")
    result = CliRunner().invoke(main, [
        "bench", "e2e", "--kubeconfig", admin_kubeconfig, "--scale", "0.02", "--runs", "1",
        "--kube-scheduler", KUBE_SCHEDULER, "--prefix", PREFIX])
    assert result.exit_code == 0, result.output
    figures = orjson.loads(result.stdout)
    assert (figures["nodes"], figures["pods"]) == (10, 96)
    for which in ("kube-scheduler", "kaisched"):
        (run,) = figures[which]["each_run"]
        assert 0 < run["first_bind_seconds"] <= run["last_bind_seconds"]
        # The cores each process kept busy meanwhile: the scheduler's own at least (the API
        # server and etcd when, as here, they run on this machine).
        assert run["cores"]["scheduler"] > 0
        assert {"kube-apiserver", "etcd"} <= run["cores"].keys()
    assert figures["ratio"]["median"] > 0
    # The same pods bound by a bare loop: all of them, each costing the API server CPU.
    alone = figures["binds_alone"]["each_run"][0]
    assert alone["per_second"] > 0 and alone["cpu_ms_per_bind"]["kube-apiserver"] > 0
    assert figures["best_ratio"]["median"] > 0
    # Nothing of the bench is left behind but its namespace.
    assert not [n for n in admin.list(NODE) if n["metadata"]["name"].startswith(PREFIX)]
