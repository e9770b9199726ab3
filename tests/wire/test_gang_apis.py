"""The gang APIs of others over the wire, each where the emulator serves it as
a cluster of that kind would: the upstream Workload API of Kubernetes 1.35
(Workload + workloadRef), 1.36 (v1alpha2 PodGroups) and 1.37 (v1beta1
PodGroups, whose condition is written through their status subresource), and
KAI's PodGroup and Queue. Where a cluster serves none of them, nothing of
them is watched and one line says so."""
from __future__ import annotations

import logging
from typing import Any

import kmock
import pytest

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import KAI_PODGROUP, KAI_QUEUE, POD, SCHEDULING_KINDS, UPSTREAM_KINDS, kind_for
from kaisched.cluster.kube import KubeCluster
from kaisched.framework.config import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.wire import Emulator, Obj, build_node, build_pod


def cycle(cluster: KubeCluster) -> Any:
    registry = register_builtins()
    clock = ManualClock()
    return Scheduler(cluster, default_config(registry), registry, clock,
                     Binder(cluster, clock.now)).run_once()


def member(name: str, **spec: Any) -> Obj:
    pod = build_pod(name)
    pod["spec"].update(spec)
    return pod


def bound(cluster: KubeCluster, *names: str) -> dict[str, str | None]:
    return {n: cluster.get(POD, "default", n)["spec"].get("nodeName") for n in names}


def status_writes(apiserver: Emulator) -> list[str]:
    return apiserver.call(lambda: [r.url.path for r in apiserver.emu[kmock.subresource("status")]
                                   if "scheduling.k8s.io" in r.url.path])


def test_v1beta1_gang_binds_and_its_condition_is_written_to_its_status(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    apiserver.serve("1.37")
    cluster.create(build_node("n1", cpu="4"))
    cluster.create({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "train", "namespace": "default"},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
    for i in range(2):
        cluster.create(member(f"train-{i}", schedulingGroup={"podGroupName": "train"}))

    result = cycle(cluster)

    assert not result.report.failed, result.report.failed
    assert bound(cluster, "train-0", "train-1") == {"train-0": "n1", "train-1": "n1"}
    assert status_writes(apiserver) == [
        "/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/train/status"]
    group = cluster.get(kind_for("scheduling.k8s.io/v1beta1", "PodGroup"), "default", "train")
    [cond] = group["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == \
        ("PodGroupInitiallyScheduled", "True", "Scheduled")
    assert cond["lastTransitionTime"] and cond["message"] == "2/2 tasks scheduled"


def test_v1alpha2_gang_that_cannot_fit_says_so_in_its_condition(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    apiserver.serve("1.36")
    cluster.create(build_node("n1", cpu="1"))
    cluster.create({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                    "metadata": {"name": "train", "namespace": "default"},
                    "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}})
    for i in range(2):
        cluster.create(member(f"train-{i}", schedulingGroup={"podGroupName": "train"}))

    cycle(cluster)

    assert apiserver.count("post", kmock.subresource("binding")) == 0
    group = cluster.get(kind_for("scheduling.k8s.io/v1alpha2", "PodGroup"), "default", "train")
    [cond] = group["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == \
        ("PodGroupScheduled", "False", "Unschedulable")
    assert "1/2 tasks placed, minMember 2" in cond["message"]


def test_v1alpha1_workload_gang_binds(apiserver: Emulator, cluster: KubeCluster) -> None:
    apiserver.serve("1.35")
    cluster.create(build_node("n1", cpu="4"))
    cluster.create({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                    "metadata": {"name": "training", "namespace": "default"},
                    "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]}})
    for i in range(2):
        cluster.create(member(f"w-{i}", workloadRef={"name": "training", "podGroup": "workers"}))

    result = cycle(cluster)

    assert not result.report.failed, result.report.failed
    assert bound(cluster, "w-0", "w-1") == {"w-0": "n1", "w-1": "n1"}
    assert status_writes(apiserver) == []       # a v1alpha1 Workload has no status


def test_kai_podgroup_and_queue(apiserver: Emulator, cluster: KubeCluster) -> None:
    apiserver.serve("kai")
    cluster.create(build_node("n1", cpu="4"))
    cluster.create({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                    "metadata": {"name": "team-a"},
                    "spec": {"resources": {"cpu": {"quota": 0, "limit": 2000, "overQuotaWeight": 1}}}})
    cluster.create({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                    "metadata": {"name": "fits", "namespace": "default"},
                    "spec": {"minMember": 2, "queue": "team-a"}})
    cluster.create({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                    "metadata": {"name": "over", "namespace": "default"},
                    "spec": {"minMember": 1, "queue": "team-a"}})
    for name, group in (("fits-0", "fits"), ("fits-1", "fits"), ("over-0", "over")):
        pod = build_pod(name)
        pod["metadata"]["annotations"] = {"pod-group-name": group}
        cluster.create(pod)

    cycle(cluster)

    # team-a may hold 2 cpus (KAI's millicores): `fits` takes them, `over` waits.
    assert bound(cluster, "fits-0", "fits-1", "over-0") == \
        {"fits-0": "n1", "fits-1": "n1", "over-0": None}
    assert apiserver.count("patch", kmock.resource("scheduling.run.ai/v2/queues")) == 0


def test_unserved_gang_apis_are_one_line_and_not_watched(
        apiserver: Emulator, cluster: KubeCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kaisched.cluster.watch")
    sub = cluster.subscribe(SCHEDULING_KINDS)
    sub.drain()
    lines = [r.getMessage() for r in caplog.records if "not served" in r.getMessage()]
    assert len(lines) == 1, lines
    for kind in (*UPSTREAM_KINDS, KAI_PODGROUP, KAI_QUEUE):
        assert str(kind) in lines[0]
        assert apiserver.count("watch", kmock.resource(f"{kind.api_version}/{kind.plural}")) == 0
