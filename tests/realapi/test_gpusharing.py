"""GPU sharing on a real kube-apiserver: pods asking for part of a GPU (KAI's
gpu-fraction and gpu-memory annotations) share the GPUs of a fake Node, each
shared GPU held by one reservation pod in kaisched-system, made (bound to the
node from the start, system-node-critical, as the server admits it) before
its first sharer is labelled and bound, and deleted once its last sharer is
gone. The test plays the device plugin (it reports the Node's GPUs through the
status subresource) and the kubelet's absence: sharers are force-deleted, as
nothing would confirm a graceful delete. The scheduler runs here, its cycles
one at a time, under a scheduler name of its own, so that it touches no other
pod of a shared server; every object it makes is named after `gpushare`."""
from __future__ import annotations

from typing import Callable

import attrs
from kubernetes import client as k8s_client

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import NODE, POD
from kaisched.cluster.kube import KubeCluster
from kaisched.framework import default_config
from kaisched.runtime.scheduler import Scheduler
from tests.builders.realapi import SYSTEM, describe, eventually

OWNER = "gpushare"
SCHEDULER = "kaisched-rt-gpushare"


def sharer(namespace: str, name: str, annotations: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
            "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "notebook:1",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


def reservations(admin: KubeCluster, node: str) -> list[Obj]:
    return [p for p in admin.list(POD, SYSTEM) if p["spec"].get("nodeName") == node
            and (p["metadata"].get("labels") or {}).get("app") == "kaisched-gpu-reservation"]


def test_fractions_share_gpus_each_held_by_one_reservation_pod(
        admin: KubeCluster, admin_api: k8s_client.ApiClient, installed: list[Obj], namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    node = fake_nodes(1, cpu="8", prefix="gpushare")[0]
    # The device plugin's report and GPU feature discovery's label.
    gpus = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"}
    admin.patch_status(NODE, "", node, {"capacity": gpus, "allocatable": gpus})
    admin.patch(NODE, "", node, {"metadata": {"labels": {"nvidia.com/gpu.memory": "40960"}}})
    for name, asks in (("gpushare-a", {"gpu-fraction": "0.5"}),
                              ("gpushare-b", {"gpu-fraction": "0.5"}),
                              ("gpushare-c", {"gpu-memory": "20000"})):
        admin.create(sharer(namespace, name, asks))
    registry = register_builtins()
    config = attrs.evolve(default_config(registry), scheduler_name=SCHEDULER)
    scheduler = Scheduler(admin, config, registry, ManualClock())
    core = k8s_client.CoreV1Api(admin_api)

    def cycle_until(done: Callable[[], bool], what: str) -> None:
        def once() -> bool:
            result = scheduler.run_once()
            assert not result.report.failed, result.report.failed
            return done()
        try:
            eventually(once, what=what, timeout=60)
        except AssertionError:
            raise AssertionError(f"{what}:\n{describe(admin, namespace)}\n"
                                 f"reservation pods: {reservations(admin, node)}") from None

    def pod(name: str) -> Obj:
        return admin.get(POD, namespace, name) or {}

    try:
        cycle_until(lambda: all(pod(n).get("spec", {}).get("nodeName") == node
                                for n in ("gpushare-a", "gpushare-b", "gpushare-c")),
                    "the three sharers bound")
        groups = {n: pod(n)["metadata"]["labels"]["runai-gpu-group"]
                  for n in ("gpushare-a", "gpushare-b", "gpushare-c")}
        assert groups["gpushare-a"] == groups["gpushare-b"] != groups["gpushare-c"]
        assert all(pod(n)["metadata"]["annotations"]["received-resource-type"] == "Fraction"
                   for n in groups)
        held = reservations(admin, node)
        assert sorted(r["metadata"]["labels"]["runai-gpu-group"] for r in held) \
            == sorted(set(groups.values()))
        for r in held:
            assert r["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
            assert r["spec"]["priorityClassName"] == "system-node-critical"
            assert r["spec"]["priority"] >= 2000000000          # as the server admitted it
        # Nothing waits for a reservation pod to run (no kubelet runs one here).
        assert all((r.get("status") or {}).get("phase", "Pending") == "Pending" for r in held)

        # The halves go (force-deleted): their GPU's reservation pod is deleted; the
        # gpu-memory pod's stays.
        for name in ("gpushare-a", "gpushare-b"):
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        cycle_until(lambda: [r["metadata"]["labels"]["runai-gpu-group"]
                             for r in reservations(admin, node)] == [groups["gpushare-c"]],
                    "the halves' reservation pod deleted")
    finally:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        for r in reservations(admin, node):
            core.delete_namespaced_pod(r["metadata"]["name"], SYSTEM, grace_period_seconds=0)
