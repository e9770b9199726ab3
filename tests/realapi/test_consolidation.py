"""Consolidation on a real kube-apiserver, kaisched installed as shipped: the
scheduler (`kaisched run`, the shipped ServiceAccount's token, the shipped
config with `consolidation` among its actions) moves a running pod of a
fragmented cluster so that a pending gang fits.

Two fake 4-GPU nodes each run a 2-GPU pod of a ReplicaSet; a pending 3-GPU
pod fits on neither as they stand. The scheduler evicts one of the two (an
Event with reason Evicted says it was moved by consolidation, and where to),
and the moved job's PodGroup keeps lastMovedTime in its status (the CRD's
schema must keep it: it is the job's cooldown, across restarts). The server
has no kubelet and no controller-manager, so the test plays both for the
moved pod: it force-deletes the evicted pod (no kubelet confirms its graceful
delete) and makes it again under a new name, as its ReplicaSet would. The pod
made again is bound on the other node (the room held for it), and the gang
on the node the move freed.

The scheduler runs under a schedulerName of its own and without leader
election, its pods kept to this test's nodes, so that nothing of other tests
on a shared server meets it.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import EVENT, POD, PODGROUP, Kind
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

OWNER = "consol"
SCHEDULER = "consol-kaisched"
GPU = "nvidia.com/gpu"
REPLICA_SET = Kind("apps/v1", "ReplicaSet", "replicasets")
ACTIONS = ["allocate", "consolidation", "backfill", "reclaim", "preempt", "stalegangeviction"]


@pytest.fixture(scope="module")
def scheduler(admin_kubeconfig: str, installed: list[Obj], admin_api: k8s_client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    folder = tmp_path_factory.mktemp("consol")
    process = scheduler_process(as_account(admin_kubeconfig, admin_api, folder),
                                shipped_config(folder, SCHEDULER, actions=ACTIONS), folder,
                                f"rt-{OWNER}-scheduler", "--no-leader-elect")
    process.start()
    yield process
    process.stop()
    print(f"--- scheduler ---\n{process.log()[-6000:]}")     # shown when a test failed


def _pod(namespace: str, name: str, group: str, gpus: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": group},
                         "annotations": {"kaisched.io/pod-group": group}},
            "spec": {"schedulerName": SCHEDULER, "nodeSelector": {"kaisched.io/test": OWNER},
                     "containers": [{"name": "main", "image": "worker:1", "resources": {
                         "requests": {"cpu": "1", GPU: gpus}, "limits": {GPU: gpus}}}]}}


def _replica_set(namespace: str, name: str) -> Obj:
    """A ReplicaSet as the owner of a pod (no controller-manager acts on it here)."""
    template = _pod(namespace, f"{name}-template", name, "2")
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": template["spec"]}}}


def _owned_by(pod: Obj, owner: Obj) -> Obj:
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
    return {**pod, "metadata": {**pod["metadata"], "ownerReferences": [ref]}}


def _group(namespace: str, name: str) -> Obj:
    return {"apiVersion": PODGROUP.api_version, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": 1}}


def test_a_pod_moved_by_consolidation_makes_room_for_a_pending_gang(
        admin: KubeCluster, admin_api: k8s_client.ApiClient, scheduler: Process, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    nodes = fake_nodes(2, cpu="8", prefix="consol", extra={GPU: "4"})
    core = k8s_client.CoreV1Api(admin_api)
    owners: dict[str, Obj] = {}
    try:
        # The fragmented cluster: a 2-GPU pod of a ReplicaSet running on each node.
        for job, node in zip(("a", "b"), nodes, strict=True):
            admin.create(_group(namespace, job))
            owners[job] = admin.create(_replica_set(namespace, job))
            pod = _owned_by(_pod(namespace, f"{job}-0", job, "2"), owners[job])
            pod["spec"]["nodeName"] = node
            admin.create(pod)
            admin.patch_status(POD, namespace, f"{job}-0", {"status": {
                "phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "PodScheduled", "status": "True"}]}})
        admin.create(_group(namespace, "big"))
        admin.create(_pod(namespace, "big-0", "big", "3"))

        def pod(name: str) -> dict[str, Any]:
            return admin.get(POD, namespace, name) or {}

        def evicted() -> str | None:
            return next((job for job in ("a", "b")
                         if pod(f"{job}-0").get("metadata", {}).get("deletionTimestamp")), None)

        def failed(what: str) -> str:
            return f"{what}\n{describe(admin, namespace)}\n{scheduler.log()[-6000:]}"

        try:
            job = eventually(evicted, what="a pod moved")
        except AssertionError:
            raise AssertionError(failed("no pod moved")) from None
        node = pod(f"{job}-0")["spec"]["nodeName"]
        other = next(n for n in nodes if n != node)
        events = eventually(lambda: [e for e in admin.list(EVENT, namespace)
                                     if e["involvedObject"].get("name") == f"{job}-0"
                                     and e.get("reason") == "Evicted"],
                            what=failed("the move's Event"))
        message = events[0]["message"]
        assert f"moved by consolidation to make room for {namespace}/big" in message, message
        assert f"node {other}" in message, message
        status = eventually(lambda: (admin.get(PODGROUP, namespace, job) or {}).get("status"),
                            what=failed("the moved job's status"))
        assert status.get("lastMovedTime"), status
        assert not pod("big-0")["spec"].get("nodeName")       # waits for the room to be freed

        # The kubelet's part: the evicted pod goes (nothing confirms a graceful
        # delete here); the ReplicaSet's: its pod is made again.
        core.delete_namespaced_pod(f"{job}-0", namespace, grace_period_seconds=0)
        eventually(lambda: not pod(f"{job}-0"), what="the evicted pod gone")
        admin.create(_owned_by(_pod(namespace, f"{job}-1", job, "2"), owners[job]))

        placed = eventually(lambda: (pod(f"{job}-1")["spec"].get("nodeName"),
                                     pod("big-0")["spec"].get("nodeName"))
                            if pod("big-0")["spec"].get("nodeName")
                            and pod(f"{job}-1")["spec"].get("nodeName") else None,
                            what=failed("the pod made again and the gang bound"))
        assert placed == (other, node), failed(f"placed {placed}")
        kept = (admin.get(PODGROUP, namespace, job) or {}).get("status") or {}
        assert kept.get("lastMovedTime") == status["lastMovedTime"], kept
    finally:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        for name in owners:
            delete_quietly(admin, REPLICA_SET, namespace, name)
