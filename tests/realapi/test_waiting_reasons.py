"""Quota is not room, on a real kube-apiserver, kaisched installed as shipped.

A cluster autoscaler adds nodes for pods whose PodScheduled condition is False
with reason Unschedulable. A pod that waits only for its queue's limit must
not be one of them: its condition says WaitingForQuota, with the numbers,
and so does its PodGroup's; a pod that needs a bigger node than any keeps
Unschedulable. Both are written by the scheduler through its own
ServiceAccount and read back from the server.
"""
from __future__ import annotations

from typing import Any, Callable

from kaisched.cluster.kinds import POD, PODGROUP, QUEUE
from kaisched.cluster.kube import KubeCluster

from .conftest import Components, delete_quietly, describe, eventually

OWNER = "protect"
QUEUE_NAME = "rt-protect-capped"


def _pod(namespace: str, name: str, group: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {"kaisched.io/pod-group": group}},
            "spec": {"schedulerName": "kaisched",
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
        admin: KubeCluster, components: Components, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    node = fake_nodes(1, cpu="8")[0]
    admin.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
                  "metadata": {"name": QUEUE_NAME},
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
