"""Autoscaling over the wire: the real kubernetes client against the emulator serving
cluster-autoscaler's ProvisioningRequests. A gang of 4 pods x 8 GPUs on room for 2: one
cycle writes a PodTemplate and a ProvisioningRequest for the 2 pods missing, both owned by
the PodGroup, and annotates the gang's pods to consume it; a scheduler started afresh (a
restart, or the standby taking over) finds the request again from its owner and asks
nothing twice. The test plays the autoscaler: it answers Provisioned and adds the Nodes; the
gang is bound whole, and the request and its PodTemplate deleted."""
from __future__ import annotations

import time

from kaisched.api.clock import ManualClock, to_rfc3339
from kaisched.api.provisioning import CONSUME_ANNOTATION
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, POD_TEMPLATE, PODGROUP, PROVISIONING_REQUEST
from kaisched.cluster.kube import KubeCluster
from kaisched.framework import load_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.wire import Emulator, Obj, build_node, build_pod, build_podgroup, cycles_until


def gpu_node(name: str) -> Obj:
    node = build_node(name, cpu="8")
    node["status"]["allocatable"]["nvidia.com/gpu"] = "8"
    return node


def gang_pod(name: str) -> Obj:
    pod = build_pod(name, group="big")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "nvidia.com/gpu": "8"},
                                                 "limits": {"nvidia.com/gpu": "8"}}
    return pod


def scheduler(cluster: KubeCluster) -> Scheduler:
    registry = register_builtins()
    config = load_config({"autoscaling": {"after": "0s"}}, registry)
    clock = ManualClock(time.time())     # the emulator stamps objects with the wall clock
    return Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now, workers=2))


def requests(cluster: KubeCluster) -> list[Obj]:
    return cluster.list(PROVISIONING_REQUEST, "default")


def bound(cluster: KubeCluster) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cluster.list(POD, "default")
                  if p["spec"].get("nodeName"))


def test_a_gang_is_asked_for_once_and_bound_whole_on_what_is_provisioned(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    apiserver.serve("autoscaling")
    for obj in (gpu_node("n1"), gpu_node("n2"), build_podgroup("big", min_member=4),
                *(gang_pod(f"big-{i}") for i in range(4))):
        cluster.create(obj)
    first = scheduler(cluster)
    cycles_until(first, lambda: bool(requests(cluster)))
    first.binder.wait(writes=True)
    [request] = requests(cluster)
    name = request["metadata"]["name"]
    [pod_set] = request["spec"]["podSets"]
    assert pod_set["count"] == 2
    group = cluster.get(PODGROUP, "default", "big")
    template = cluster.get(POD_TEMPLATE, "default", pod_set["podTemplateRef"]["name"])
    for owned in (request, template):
        [owner] = owned["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("PodGroup", "big",
                                                                group["metadata"]["uid"])
    assert {cluster.get(POD, "default", f"big-{i}")["metadata"]["annotations"][CONSUME_ANNOTATION]
            for i in range(4)} == {name}
    assert bound(cluster) == []
    first.close()

    again = scheduler(cluster)          # a scheduler that never saw the request made
    for _ in range(3):
        again.run_once()
    assert [r["metadata"]["name"] for r in requests(cluster)] == [name]     # asked once
    cluster.patch_status(PROVISIONING_REQUEST, "default", name, {"conditions": [
        {"type": "Provisioned", "status": "True", "reason": "Provisioned", "message": "",
         "lastTransitionTime": to_rfc3339(time.time())}]})
    cluster.create(gpu_node("n3"))
    cluster.create(gpu_node("n4"))
    cycles_until(again, lambda: len(bound(cluster)) == 4)
    cycles_until(again, lambda: not requests(cluster) and not cluster.list(POD_TEMPLATE, "default"))
    again.close()
