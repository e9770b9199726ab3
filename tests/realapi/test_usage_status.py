"""Fair share with memory on a real kube-apiserver: the scheduler, installed as
shipped (its CRDs, its RBAC, its ServiceAccount's token) and run with the
shipped config plus `usageDBConfig` (built in), keeps each queue's usage in
the Queue's status.usage: the CRD's status schema takes it, the RBAC lets the
scheduler write it, a restart of the scheduler goes on from it, and the
documented reset (a status patch clearing it) starts the queue afresh.

The scheduler runs under a schedulerName of its own and without leader
election, so that other schedulers on a shared server neither schedule its
pods nor hold the Lease it would wait for; the Queue is named `followups-usage`.
"""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import POD, QUEUE
from kaisched.cluster.kube import KubeCluster
from tests.builders.realapi import (
    Process,
    as_account,
    delete_quietly,
    eventually,
    scheduler_process,
    shipped_config,
)

OWNER = "followups"
SCHEDULER = "followups-kaisched"
QUEUE_NAME = "followups-usage"
PODS = 2            # of one cpu each, in the queue


def usage_config(folder: Path) -> Path:
    """The shipped config, with usage memory on (built in) and a scheduler name of its own."""
    return shipped_config(folder, SCHEDULER, usageDBConfig={
        "clientType": "builtin",
        "usageParams": {"halfLifePeriod": "1h", "windowSize": "4h", "windowType": "sliding"}})


@pytest.fixture(scope="module")
def scheduler(admin_kubeconfig: str, installed: list[Obj], admin_api: k8s_client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    folder = tmp_path_factory.mktemp("usage")
    process = scheduler_process(as_account(admin_kubeconfig, admin_api, folder),
                                usage_config(folder), folder, f"rt-{OWNER}-scheduler",
                                "--no-leader-elect")
    yield process
    process.stop()


@pytest.fixture
def usage_queue(admin: KubeCluster) -> Iterator[str]:
    delete_quietly(admin, QUEUE, "", QUEUE_NAME)        # a leftover of an interrupted run
    eventually(lambda: admin.get(QUEUE, "", QUEUE_NAME) is None, what="old queue gone")
    admin.create({"apiVersion": QUEUE.api_version, "kind": QUEUE.kind,
                  "metadata": {"name": QUEUE_NAME, "labels": {"kaisched.io/test": OWNER}},
                  "spec": {"resources": {"cpu": {"quota": "2"}}}})
    yield QUEUE_NAME
    delete_quietly(admin, QUEUE, "", QUEUE_NAME)


def usage(admin: KubeCluster) -> dict[str, Any] | None:
    return ((admin.get(QUEUE, "", QUEUE_NAME) or {}).get("status") or {}).get("usage")


def held_cpu(record: dict[str, Any] | None) -> float:
    """Cores x seconds the record says the queue held, over all its buckets."""
    return sum(float((b.get("held") or {}).get("cpu", 0)) for b in (record or {}).get("buckets") or ())


def reset_usage(admin_kubeconfig: str, admin: KubeCluster) -> None:
    """The reset docs/scheduling.md gives: kubectl's status patch, or the same
    request through the client where kubectl is not installed."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        admin.patch_status(QUEUE, "", QUEUE_NAME, {"usage": None})
        return
    done = subprocess.run(
        [kubectl, "--kubeconfig", admin_kubeconfig, "patch", "queue", QUEUE_NAME,
         "--subresource=status", "--type=merge", "-p", '{"status":{"usage":null}}'],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_queue_usage_is_kept_in_its_status_across_a_restart_and_reset_by_a_patch(
        admin: KubeCluster, admin_kubeconfig: str, scheduler: Process, usage_queue: str,
        namespace: str, fake_nodes: Callable[..., list[str]]) -> None:
    node = fake_nodes(1, cpu="8")[0]
    for i in range(PODS):
        admin.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": f"work-{i}", "namespace": namespace,
                                   "labels": {"kaisched.io/queue": usage_queue}},
                      "spec": {"schedulerName": SCHEDULER, "containers": [{
                          "name": "main", "image": "work:1",
                          "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})
    scheduler.start()

    def bound() -> bool:
        return all((admin.get(POD, namespace, f"work-{i}") or {}).get("spec", {}).get("nodeName")
                   == node for i in range(PODS))

    eventually(bound, what=f"the pods bound\n{scheduler.log()[-5000:]}")
    # The status takes the record (the CRD's schema), written by the scheduler's
    # own ServiceAccount (the RBAC); once the pods run, it counts what they hold
    # (the second write, a minute after the first).
    before = eventually(lambda: (found := usage(admin)) and held_cpu(found) > 0 and found,
                        what=f"status.usage counting the pods\n{scheduler.log()[-5000:]}")
    assert before["normalized"]["cpu"] > 0
    assert all(set(b) >= {"start", "seconds", "held", "capacity"} for b in before["buckets"])
    status, metrics = scheduler.get("/metrics")
    assert status == 200 and 'kaisched_write_failures_total{effect="SetQueueUsage"}' not in metrics

    # A restart goes on from the record: the window's history is kept, and the
    # time since is added to it.
    code, _ = scheduler.stop()
    assert code == 0, scheduler.log()[-5000:]
    kept = usage(admin)
    scheduler.start()
    after = eventually(lambda: (found := usage(admin)) and found["updated"] > kept["updated"]
                       and found,
                       what=f"status.usage written after the restart\n{scheduler.log()[-5000:]}")
    assert held_cpu(after) >= held_cpu(kept) > 0
    assert after["buckets"][0]["start"] == kept["buckets"][0]["start"]

    # The documented reset: the status cleared, the queue's usage starts afresh
    # from that moment, and the fresh record is written back.
    reset_at = time.monotonic()
    reset_usage(admin_kubeconfig, admin)
    fresh = eventually(lambda: (found := usage(admin)) and found["updated"] > after["updated"]
                       and held_cpu(found) < held_cpu(after) and found,
                       what=f"a fresh status.usage after the reset\n{scheduler.log()[-5000:]}")
    # Since the reset the pods can have held no more than their cores for the time since.
    assert held_cpu(fresh) <= PODS * (time.monotonic() - reset_at) + PODS
