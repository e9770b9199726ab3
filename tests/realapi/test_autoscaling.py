"""Autoscaling on a real kube-apiserver: cluster-autoscaler's ProvisioningRequest CRD
(vendored in kaisched/validation/crds/, which replay and simulate check requests against),
kaisched installed as shipped and run as its ServiceAccount with `autoscaling` configured. The test plays cluster-autoscaler: it reads
the request, creates the Nodes, and sets `Provisioned=True` (or `Failed`).

- A gang of 4 pods x 8 GPUs on room for 2 (two fake 8-GPU nodes): one request, for exactly
  the 2 pods missing, owned by the PodGroup, with the pods annotated to consume it; nothing
  bound before; once Provisioned and the two Nodes are there, the gang bound whole within
  two sessions of the scheduler seeing it.
- A gang its queue's limit holds back gets no request.
- A failed request is reported in the PodGroup's condition and asked again after the backoff.

The scheduler runs under a schedulerName of its own, without leader election, its pods kept
to this test's nodes.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from kaisched.api.provisioning import CONSUME_ANNOTATION
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import POD, PODGROUP, QUEUE
from kaisched.cluster.kube import KubeCluster
from tests.builders.realapi import (
    Process,
    answer,
    autoscaling_scheduler,
    delete_quietly,
    describe,
    eventually,
    provisioning_requests,
    served_provisioning_crd,
)

OWNER = "autosc"
SCHEDULER = "autosc-kaisched"
GPU = "nvidia.com/gpu"
RETRY = {"initial": "20s", "max": "120s"}   # the condition waits 10 s between messages


@pytest.fixture(scope="module")
def provisioning_crd(admin: KubeCluster, installed: list[Obj]) -> Iterator[None]:
    yield from served_provisioning_crd(admin)


@pytest.fixture(scope="module")
def scheduler(admin_kubeconfig: str, provisioning_crd: None, admin_api: k8s_client.ApiClient,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    yield from autoscaling_scheduler(admin_kubeconfig, admin_api, tmp_path_factory.mktemp("autosc"),
                                     SCHEDULER, f"rt-{OWNER}-scheduler", {"after": "0s", "retry": RETRY})


def gang(admin: KubeCluster, namespace: str, name: str, size: int, queue: str = "") -> list[str]:
    spec: dict[str, Any] = {"minMember": size, **({"queue": queue} if queue else {})}
    admin.create({"apiVersion": PODGROUP.api_version, "kind": "PodGroup",
                  "metadata": {"name": name, "namespace": namespace}, "spec": spec})
    pods = []
    for i in range(size):
        pod = f"{name}-{i}"
        admin.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": pod, "namespace": namespace,
                                   "annotations": {"kaisched.io/pod-group": name}},
                      "spec": {"schedulerName": SCHEDULER,
                               "nodeSelector": {"kaisched.io/test": OWNER},
                               "containers": [{"name": "main", "image": "trainer:1", "resources": {
                                   "requests": {"cpu": "1", GPU: "8"}, "limits": {GPU: "8"}}}]}})
        pods.append(pod)
    return pods


def bound(admin: KubeCluster, namespace: str, pods: list[str]) -> list[str]:
    return [p for p in pods if ((admin.get(POD, namespace, p) or {}).get("spec") or {}).get("nodeName")]


def condition(admin: KubeCluster, namespace: str, group: str) -> str:
    obj = admin.get(PODGROUP, namespace, group) or {}
    return " ".join(c.get("message", "") for c in (obj.get("status") or {}).get("conditions") or [])


def test_a_gang_of_4_on_room_for_2_gets_one_request_for_2_and_binds_whole_once_provisioned(
        admin: KubeCluster, scheduler: Process, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    fake_nodes(2, cpu="8", extra={GPU: "8"})
    pods = gang(admin, namespace, "big", 4)

    def why() -> str:
        return f"{describe(admin, namespace)}\n{scheduler.log()[-4000:]}"
    made = eventually(lambda: provisioning_requests(admin, namespace), what="a ProvisioningRequest")
    [request] = made
    assert sum(s["count"] for s in request["spec"]["podSets"]) == 2, request
    owner = request["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("PodGroup", "big")
    eventually(lambda: all(((admin.get(POD, namespace, p) or {}).get("metadata", {}).get(
        "annotations") or {}).get(CONSUME_ANNOTATION) == request["metadata"]["name"] for p in pods),
        what="the pods annotated to consume it")
    time.sleep(3.0)
    assert bound(admin, namespace, pods) == [], why()       # nothing bound before the capacity
    assert len(provisioning_requests(admin, namespace)) == 1, why()  # asked once
    assert "asked the autoscaler for 2 pods x 8 GPUs" in condition(admin, namespace, "big"), why()
    # The autoscaler: the Nodes, then Provisioned=True.
    fake_nodes(2, cpu="8", extra={GPU: "8"}, prefix="provisioned")
    answer(admin, namespace, request, "Provisioned", "2 nodes added")
    seen = time.monotonic()
    eventually(lambda: len(bound(admin, namespace, pods)) == 4, what="the gang bound whole")
    # Two sessions of a second, and the watch and the binds between.
    assert time.monotonic() - seen <= 2 * 1.0 + 2.0, why()
    eventually(lambda: not provisioning_requests(admin, namespace),
               what="the request deleted once placed")


def test_a_gang_its_queue_limit_holds_back_gets_no_request(
        admin: KubeCluster, scheduler: Process, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    fake_nodes(1, cpu="8", extra={GPU: "8"})
    queue = f"rt-{OWNER}-capped-{namespace.rsplit('-', 1)[1]}"
    admin.create({"apiVersion": QUEUE.api_version, "kind": "Queue", "metadata": {"name": queue},
                  "spec": {"resources": {GPU: {"quota": 0, "limit": 16}}}})
    try:
        gang(admin, namespace, "capped", 4, queue=queue)
        time.sleep(5.0)
        assert provisioning_requests(admin, namespace) == [], describe(admin, namespace)
    finally:
        delete_quietly(admin, QUEUE, "", queue)


def test_a_failed_request_is_reported_and_asked_again(
        admin: KubeCluster, scheduler: Process, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    fake_nodes(1, cpu="8", extra={GPU: "8"})
    gang(admin, namespace, "pair", 2)
    [first] = eventually(lambda: provisioning_requests(admin, namespace),
                         what="a ProvisioningRequest")
    answer(admin, namespace, first, "Failed", "no node group can hold 8 GPUs")
    eventually(lambda: "the autoscaler answered Failed: no node group can hold 8 GPUs"
               in condition(admin, namespace, "pair"), what="the failure reported")

    def second() -> Obj | None:
        return next((r for r in provisioning_requests(admin, namespace)
                     if r["metadata"]["name"] != first["metadata"]["name"]), None)
    again = eventually(second, what="a second request after the backoff")
    assert again["metadata"]["annotations"]["kaisched.io/provisioning-attempt"] == "2"
