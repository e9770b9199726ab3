"""Quota is not room, on a real kube-apiserver, kaisched installed as shipped.

A cluster autoscaler adds nodes for pods whose PodScheduled condition is False
with reason Unschedulable. A pod that waits only for its queue's limit must
not be one of them: its condition says WaitingForQuota, with the numbers,
and so does its PodGroup's; a pod that needs a bigger node than any keeps
Unschedulable. Both are written by the scheduler through its own
ServiceAccount and read back from the server.

The preemption delay's clock is the PodGroup status's pendingSince: the
server's schema must keep it (a pruned field would restart every delay on
each restart of the scheduler), and the condition says from when the gang
may preempt; once its delay is over, it does.

The scheduler runs under a schedulerName of its own and without leader
election, so that other schedulers on a shared server neither schedule these
pods (with their own code) nor hold the Lease it would wait for.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from kaisched.api.clock import from_rfc3339
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import POD, PODGROUP, PRIORITY_CLASS, QUEUE
from kaisched.cluster.kube import KubeCluster
from tests.builders.realapi import (
    Process,
    as_account,
    delete_quietly,
    describe,
    eventually,
    scheduler_process,
    shipped_config,
)

OWNER = "protect"
SCHEDULER = "protect-kaisched"
QUEUE_NAME = "protect-capped"
LOW, HIGH = "protect-low", "protect-high"


@pytest.fixture(scope="module")
def scheduler(admin_kubeconfig: str, installed: list[Obj], admin_api: k8s_client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """The shipped config under a scheduler name of its own, as the shipped account."""
    folder = tmp_path_factory.mktemp("protect")
    process = scheduler_process(as_account(admin_kubeconfig, admin_api, folder),
                                shipped_config(folder, SCHEDULER), folder,
                                f"rt-{OWNER}-scheduler", "--no-leader-elect")
    process.start()
    yield process
    process.stop()
    print(f"--- scheduler ---\n{process.log()[-4000:]}")     # shown when a test failed


def _pod(namespace: str, name: str, group: str, cpu: str,
         priority: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {"kaisched.io/pod-group": group}},
            "spec": {"schedulerName": SCHEDULER,
                     **({"priorityClassName": priority} if priority else {}),
                     "nodeSelector": {"kaisched.io/test": OWNER},
                     "containers": [{"name": "main", "image": "worker:1",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


def _group(namespace: str, name: str, queue: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": 1}
    if queue:
        spec["queue"] = queue
    return {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def _condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    found = ((obj or {}).get("status") or {}).get("conditions") or ()
    return next((c for c in found if c.get("type") == kind), {})


def test_a_pod_waiting_for_its_queue_is_not_unschedulable(
        admin: KubeCluster, scheduler: Process, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    node = fake_nodes(1, cpu="8")[0]
    delete_quietly(admin, QUEUE, "", QUEUE_NAME)        # a leftover of an interrupted run
    eventually(lambda: admin.get(QUEUE, "", QUEUE_NAME) is None, what="old queue gone")
    admin.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
                  "metadata": {"name": QUEUE_NAME, "labels": {"kaisched.io/test": OWNER}},
                  "spec": {"resources": {"cpu": {"limit": "1"}}}})
    try:
        admin.create(_group(namespace, "first", QUEUE_NAME))
        admin.create(_pod(namespace, "first-0", "first", "1"))
        eventually(lambda: (admin.get(POD, namespace, "first-0") or {}).get("spec", {})
                   .get("nodeName") == node, what="first-0 bound within the queue's limit")

        admin.create(_group(namespace, "second", QUEUE_NAME))
        admin.create(_pod(namespace, "second-0", "second", "1"))
        admin.create(_group(namespace, "huge"))
        admin.create(_pod(namespace, "huge-0", "huge", "64"))

        def reasons() -> dict[str, str] | None:
            found = {name: _condition(admin.get(POD, namespace, name), "PodScheduled")
                     for name in ("second-0", "huge-0")}
            if not all(c.get("status") == "False" for c in found.values()):
                return None
            return {name: str(c.get("reason")) for name, c in found.items()}

        got = eventually(reasons, what="both pods told why they wait")
        assert got == {"second-0": "WaitingForQuota", "huge-0": "Unschedulable"}, \
            describe(admin, namespace)
        waiting = _condition(admin.get(POD, namespace, "second-0"), "PodScheduled")
        assert f"queue {QUEUE_NAME} at limit for cpu (1/1)" in waiting["message"]
        assert "insufficient cpu" in _condition(admin.get(POD, namespace, "huge-0"),
                                                "PodScheduled")["message"]

        def group_reasons() -> dict[str, str] | None:
            found = {name: _condition(admin.get(PODGROUP, namespace, name), "Scheduled")
                     for name in ("second", "huge")}
            if not all(c.get("status") == "False" for c in found.values()):
                return None
            return {name: str(c.get("reason")) for name, c in found.items()}

        assert eventually(group_reasons, what="both PodGroups told why they wait") == \
            {"second": "WaitingForQuota", "huge": "Unschedulable"}, describe(admin, namespace)
        assert not (admin.get(POD, namespace, "second-0") or {}).get("spec", {}).get("nodeName")
    finally:
        delete_quietly(admin, QUEUE, "", QUEUE_NAME)



def test_a_gang_in_its_preemption_delay_keeps_its_clock_in_status_then_preempts(
        admin: KubeCluster, scheduler: Process, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    node = fake_nodes(1, cpu="4")[0]
    for name, value in ((LOW, 10), (HIGH, 1000)):
        delete_quietly(admin, PRIORITY_CLASS, "", name)
        admin.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                      "metadata": {"name": name}, "value": value})
    try:
        admin.create(_group(namespace, "low"))
        admin.create(_pod(namespace, "low-0", "low", "4", LOW))
        eventually(lambda: (admin.get(POD, namespace, "low-0") or {}).get("spec", {})
                   .get("nodeName") == node, what="low-0 bound")

        urgent = _group(namespace, "urgent")
        urgent["spec"].update(priorityClassName=HIGH, preemptionDelaySeconds=3600)
        admin.create(urgent)
        admin.create(_pod(namespace, "urgent-0", "urgent", "4", HIGH))

        def held_back() -> dict[str, Any] | None:
            group = admin.get(PODGROUP, namespace, "urgent") or {}
            condition = _condition(group, "Scheduled")
            if "may preempt from" not in str(condition.get("message")):
                return None
            return group

        group = eventually(held_back, what="urgent told when it may preempt")
        condition = _condition(group, "Scheduled")
        assert condition["reason"] == "Unschedulable", describe(admin, namespace)
        assert "(preemptionDelay 1h)" in condition["message"]
        # The clock was kept by the server: the gang's creation, as written.
        since = from_rfc3339(group["status"].get("pendingSince"))
        created = from_rfc3339(group["metadata"]["creationTimestamp"])
        assert since is not None and created is not None and abs(since - created) < 2, group["status"]
        low = admin.get(POD, namespace, "low-0") or {}
        assert not low["metadata"].get("deletionTimestamp"), "evicted within the delay"

        # The delay over (the PodGroup's override lowered), the gang preempts.
        admin.patch(PODGROUP, namespace, "urgent", {"spec": {"preemptionDelaySeconds": 0}})
        eventually(lambda: (gone := admin.get(POD, namespace, "low-0")) is None
                   or bool(gone["metadata"].get("deletionTimestamp")),
                   what="low-0 preempted once the delay is over")
    finally:
        for name in (LOW, HIGH):
            delete_quietly(admin, PRIORITY_CLASS, "", name)
