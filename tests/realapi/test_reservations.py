"""Reservation backfill by a batch Job's deadline, on a real kube-apiserver, kaisched
installed as shipped.

The scheduler watches batch/v1 Jobs through its own ServiceAccount (the shipped RBAC
lets it list and watch them): a pod its Job controls is sure to be gone by the Job's
status.startTime + spec.activeDeadlineSeconds + the pod's termination grace period.
The situation of tests/scenarios/reservation-start-by-a-jobs-deadline.yaml, on the
server: an 8-GPU node, half of it taken by the running pod of the Job prep (a 3600 s
deadline, a 60 s grace period); the gang big asks for the whole node and starves, so
the node is held for it, whole by prep's end at the latest, as its condition says.
Then the Job short (600 s) has its pending pod lent the held half, sure to end before;
the Job long, with no deadline, has its pod kept off it.

No Job controller runs on the server: the test writes each Job's status.startTime as
the controller would (before the pods are made), and its pods, labelled and owned as
the controller makes them. The shipped PodGrouper, as its own ServiceAccount, makes
the PodGroups of the Jobs, as in a cluster (a Job's pod waits for one). Both run under
a schedulerName of their own and without leader election, the pods kept to this
test's node.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from kaisched.api.clock import clock_text, to_rfc3339
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import BATCH_JOB, POD, PODGROUP
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import NotFoundError
from tests.builders.realapi import (
    Process,
    as_account,
    describe,
    eventually,
    owned,
    scheduler_process,
    shipped_config,
)

OWNER = "reserve"
SCHEDULER = "reserve-kaisched"
GPU = "nvidia.com/gpu"
PREP_DEADLINE, PREP_GRACE = 3600, 60
SHORT_DEADLINE = 600
PERIOD = 1.0            # config/scheduler.yaml's schedulePeriod


@pytest.fixture(scope="module")
def scheduler(admin_kubeconfig: str, installed: list[Obj], admin_api: k8s_client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """The shipped config under a scheduler name of its own, as the shipped account; and
    the PodGrouper for that name, as its own (a Job's pods wait for the PodGroup it makes)."""
    folder = tmp_path_factory.mktemp(OWNER)
    process = scheduler_process(as_account(admin_kubeconfig, admin_api, folder),
                                shipped_config(folder, SCHEDULER), folder,
                                f"rt-{OWNER}-scheduler", "--no-leader-elect")
    grouper = Process("podgrouper", "podgrouper.cli", [
        "run", "--kubeconfig", str(as_account(admin_kubeconfig, admin_api, folder,
                                              "kaisched-podgrouper")),
        "--scheduler-name", SCHEDULER, "--metrics-port", "0", "--no-leader-elect",
        "--identity", f"rt-{OWNER}-podgrouper"], folder / "podgrouper.log", None)
    process.start()
    grouper.start()
    yield process
    grouper.stop()
    process.stop()
    print(f"--- podgrouper ---\n{grouper.log()[-3000:]}")     # shown when a test failed
    print(f"--- scheduler ---\n{process.log()[-6000:]}")


def _job(admin: KubeCluster, namespace: str, name: str, deadline: int | None,
         started: float) -> Obj:
    """A batch Job (its selector made by the server), started when the Job controller
    would have written so."""
    spec: dict[str, Any] = {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "main", "image": "trainer:1"}]}}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    job = admin.create({"apiVersion": "batch/v1", "kind": "Job",
                        "metadata": {"name": name, "namespace": namespace}, "spec": spec})
    job.setdefault("apiVersion", "batch/v1")
    job.setdefault("kind", "Job")
    admin.patch_status(BATCH_JOB, namespace, name, {"startTime": to_rfc3339(started)})
    written = (admin.get(BATCH_JOB, namespace, name) or {}).get("status") or {}
    assert written.get("startTime") == to_rfc3339(started), written
    return job


def _pod(namespace: str, name: str, gpus: int, group: str | None = None,
         grace: int | None = None, job: Obj | None = None) -> Obj:
    """A pod of gpus GPUs for this test's scheduler and node: of the PodGroup group, or
    of the batch Job job (labelled and owned as the Job controller makes its pods)."""
    requests = {"cpu": "1", GPU: str(gpus)}
    spec: dict[str, Any] = {"schedulerName": SCHEDULER,
                            "nodeSelector": {"kaisched.io/test": OWNER},
                            "containers": [{"name": "main", "image": "trainer:1",
                                            "resources": {"requests": requests,
                                                          "limits": {GPU: str(gpus)}}}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if job is None:
        return pod
    meta["labels"] = dict(job["spec"]["template"]["metadata"]["labels"])
    return owned(pod, job)


def _condition(obj: Obj | None, kind: str) -> dict[str, Any]:
    found = ((obj or {}).get("status") or {}).get("conditions") or ()
    return next((c for c in found if c.get("type") == kind), {})


def _node_of(admin: KubeCluster, namespace: str, name: str) -> str | None:
    return ((admin.get(POD, namespace, name) or {}).get("spec") or {}).get("nodeName")


def test_a_jobs_deadline_starts_the_reservation_and_lends_held_room_to_a_job_sure_to_end(
        admin: KubeCluster, scheduler: Process, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    node = fake_nodes(1, cpu="32", memory="256Gi", prefix="gpu", extra={GPU: "8"})[0]

    def failed(what: str) -> str:
        return f"{what}\n{describe(admin, namespace)}\n{scheduler.log()[-6000:]}"

    def until(check: Callable[[], Any], what: str) -> Any:
        try:
            return eventually(check, what=what)
        except AssertionError as exc:
            raise AssertionError(failed(str(exc))) from None

    try:
        # prep: started ten minutes ago (on the minute), its pod running on half the node.
        prep_start = float(int(time.time()) // 60 * 60 - 600)
        prep = _job(admin, namespace, "prep", PREP_DEADLINE, prep_start)
        pod = _pod(namespace, "prep-0", 4, grace=PREP_GRACE, job=prep)
        pod["spec"]["nodeName"] = node
        admin.create(pod)
        admin.patch_status(POD, namespace, "prep-0", {
            "phase": "Running", "startTime": to_rfc3339(prep_start + 5),
            "conditions": [{"type": "PodScheduled", "status": "True"}]})
        assert (admin.get(POD, namespace, "prep-0") or {})["status"].get("phase") == "Running"

        # big: the whole node, which half of it cannot give; it starves after a second.
        admin.create({"apiVersion": PODGROUP.api_version, "kind": "PodGroup",
                      "metadata": {"name": "big", "namespace": namespace},
                      "spec": {"minMember": 1, "starvationThresholdSeconds": 1}})
        admin.create(_pod(namespace, "big-0", 8, group="big"))

        # The room is sure to be free once prep's deadline has ended prep-0, grace and all.
        # (On another day than the scheduler's now, the condition puts the date before it.)
        ready = prep_start + PREP_DEADLINE + PREP_GRACE
        latest = f" {clock_text(ready, ready)} at the latest"

        def reserving() -> str | None:
            condition = _condition(admin.get(PODGROUP, namespace, "big"), "Scheduled")
            message = str(condition.get("message") or "")
            return message if condition.get("status") == "False" and "reserving" in message \
                else None

        message = until(reserving, "big's node reserved")
        assert "reserving 1 node(s) for this gang since" in message, failed(message)
        assert ", whole by " in message and latest in message, failed(f"not{latest}: {message}")

        # short (600 s, sure to end well before) and long (no deadline): Jobs, then pods.
        short = _job(admin, namespace, "short", SHORT_DEADLINE, float(int(time.time())))
        long = _job(admin, namespace, "long", None, float(int(time.time())))
        admin.create(_pod(namespace, "short-0", 4, job=short))
        admin.create(_pod(namespace, "long-0", 4, job=long))

        until(lambda: _node_of(admin, namespace, "short-0") == node, "short-0 lent held room")
        # long-0 is tried and told why it waits; a few sessions on, it is still unbound.
        until(lambda: _condition(admin.get(POD, namespace, "long-0"), "PodScheduled")
              .get("status") == "False", "long-0 told why it waits")
        why = str(_condition(admin.get(POD, namespace, "long-0"), "PodScheduled").get("message"))
        assert "room held for another gang" in why, failed(why)
        assert "has no enforced limit" in why, failed(why)
        time.sleep(5 * PERIOD)
        assert _node_of(admin, namespace, "long-0") is None, failed("long-0 took held room")
        assert _node_of(admin, namespace, "big-0") is None, failed("big-0 bound beside prep-0")
        # The reservation still stands, starting when it did.
        message = until(reserving, "big's node still reserved")
        assert latest in message, failed(f"not{latest}: {message}")
    finally:
        # In the background: a Job's default (Orphan) waits for a garbage collector.
        for name in ("prep", "short", "long"):
            try:
                admin.delete(BATCH_JOB, namespace, name, "Background")
            except NotFoundError:
                pass
