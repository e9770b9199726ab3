"""Garbage collection on a living cluster: what an owner leaves behind goes.

- A shared GPU's reservation pod (kaisched-system) goes once the last pod sharing that GPU is
  gone: the sharer's Deployment is deleted, its kubelet terminates the pod, the scheduler
  deletes the reservation pod, and the reservation pod's kubelet terminates it too.
- Deleting a batch/v1 Job (propagationPolicy Background) deletes its pods and, through the
  garbage collector, the PodGroup the PodGrouper made for it (owned by the Job); its queue's
  allocated GPUs go back to none."""
from __future__ import annotations

import time
from typing import Callable

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import POD, PODGROUP, QUEUE
from kaisched.cluster.kube import KubeCluster
from tests.builders.cluster import (
    DEPLOYMENT,
    GPU,
    JOB,
    delete_quietly,
    deployment,
    explainer,
    job,
    placed,
    pods_of,
    running,
    stuck_terminating,
    template,
    wait_for,
)
from tests.builders.realapi import SYSTEM, Components

RESERVATION = "kaisched-gpu-reservation"


def test_a_reservation_pod_goes_with_the_last_sharer_of_its_gpu(
        admin: KubeCluster, components: Components, namespace: str,
        nodes: Callable[[int], list[str]]) -> None:
    ns = namespace
    (node,) = nodes(1)

    why = explainer(admin, ns, components)

    def reservations() -> list[Obj]:
        return [p for p in admin.list(POD, SYSTEM) if p["spec"].get("nodeName") == node
                and (p["metadata"].get("labels") or {}).get("app") == RESERVATION]

    admin.create(deployment(ns, "share", 1, placed(
        template("share", annotations={"gpu-fraction": "0.5"}), ns)))
    wait_for(lambda: running(admin, ns, "share", 1), 120, "the sharer running", why)
    held = wait_for(reservations, 60, "the reservation pod of the shared GPU", why)
    resources = held[0]["spec"]["containers"][0]["resources"]
    assert len(held) == 1, why()
    assert (resources.get("limits") or resources.get("requests") or {}).get(GPU) == "1", resources
    delete_quietly(admin, DEPLOYMENT, ns, "share")
    wait_for(lambda: not pods_of(admin, ns, "share"), 90, "the sharer gone", why)
    wait_for(lambda: not reservations(), 90, "the reservation pod gone", why)
    assert not stuck_terminating(admin, SYSTEM, time.time())


def test_deleting_a_job_removes_its_podgroup_and_frees_its_queue(
        admin: KubeCluster, components: Components, namespace: str,
        nodes: Callable[[int], list[str]]) -> None:
    ns = namespace
    nodes(1)
    queue = f"{ns}-q"
    admin.create({"apiVersion": QUEUE.api_version, "kind": "Queue", "metadata": {"name": queue},
                  "spec": {"resources": {GPU: {"quota": 8}}}})

    why = explainer(admin, ns, components)

    def allocated() -> float:
        status = (admin.get(QUEUE, "", queue) or {}).get("status") or {}
        return float((status.get("allocated") or {}).get(GPU, 0) or 0)

    try:
        admin.create(job(ns, "train", 2, placed(template("train", gpus=2, queue=queue), ns),
                         min_member=2))
        wait_for(lambda: running(admin, ns, "train", 2), 120, "the Job's pods running", why)
        (group,) = admin.list(PODGROUP, ns)
        assert group["metadata"]["ownerReferences"][0]["kind"] == "Job"
        assert group["spec"]["minMember"] == 2 and group["spec"].get("queue") == queue
        wait_for(lambda: allocated() == 4, 60, "the queue's status counting 4 GPUs", why)
        delete_quietly(admin, JOB, ns, "train")
        wait_for(lambda: not pods_of(admin, ns, "train"), 90, "the Job's pods gone", why)
        wait_for(lambda: not admin.list(PODGROUP, ns), 90, "the PodGroup collected", why)
        wait_for(lambda: allocated() == 0, 60, "the queue's share freed", why)
    finally:
        delete_quietly(admin, QUEUE, "", queue)
