"""The production code paths over the wire: one scheduler cycle binds a gang
through pods/binding and writes its PodGroup status; the PodGrouper makes the
PodGroup of a Job's pod."""
from __future__ import annotations

import kmock

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.kube import KubeCluster
from kaisched.framework.config import default_config
from kaisched.runtime.scheduler import Scheduler
from podgrouper.controller import PodGrouper
from tests.builders.wire import Emulator, build_node, build_pod, build_podgroup


def test_one_cycle_binds_the_gang_and_writes_its_status(apiserver: Emulator,
                                                        cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="4"))
    cluster.create(build_podgroup("train", min_member=2))
    for i in range(2):
        cluster.create(build_pod(f"train-{i}", group="train"))
    registry = register_builtins()

    result = Scheduler(cluster, default_config(registry), registry, ManualClock()).run_once()

    assert not result.report.failed, result.report.failed
    assert {p: cluster.get(POD, "default", p)["spec"].get("nodeName")
            for p in ("train-0", "train-1")} == {"train-0": "n1", "train-1": "n1"}
    bound = apiserver.call(lambda: sorted(r.name for r in apiserver.emu[kmock.subresource("binding")]))
    assert bound == ["train-0", "train-1"]
    status = cluster.get(PODGROUP, "default", "train")["status"]
    assert status["scheduled"] == 2
    assert status["phase"] in ("Inqueue", "Running")
    writes = apiserver.call(lambda: [r.url.path for r in apiserver.emu[kmock.subresource("status")]
                                     if r.name == "train"])
    assert writes, "the PodGroup status was not written through its status subresource"


def test_an_unschedulable_gang_binds_nothing(apiserver: Emulator, cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="1"))
    cluster.create(build_podgroup("train", min_member=2))
    for i in range(2):
        cluster.create(build_pod(f"train-{i}", group="train"))
    registry = register_builtins()

    Scheduler(cluster, default_config(registry), registry, ManualClock()).run_once()

    assert apiserver.count("post", kmock.subresource("binding")) == 0
    assert all("nodeName" not in p["spec"] for p in cluster.list(POD))
    status = cluster.get(PODGROUP, "default", "train")["status"]
    assert status["conditions"][0]["reason"] == "Unschedulable"


def test_podgrouper_makes_the_podgroup_of_a_job(apiserver: Emulator,
                                                cluster: KubeCluster) -> None:
    job = cluster.create({"apiVersion": "batch/v1", "kind": "Job",
                          "metadata": {"name": "etl", "namespace": "default"},
                          "spec": {"parallelism": 3, "completions": 3}})
    uid = job["metadata"]["uid"]
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "etl", "uid": uid,
             "controller": True}
    cluster.create(build_pod("etl-abc", owner=owner))

    written = PodGrouper(cluster, ManualClock()).sync()

    assert written >= 2                         # the PodGroup, and the pod's annotation
    groups = cluster.list(PODGROUP)
    assert len(groups) == 1
    group = groups[0]
    assert group["metadata"]["name"].startswith("pg-etl-")
    assert group["spec"]["minMember"] == 1
    assert group["metadata"]["ownerReferences"][0]["uid"] == uid
    pod = cluster.get(POD, "default", "etl-abc")
    assert pod["metadata"]["annotations"]["kaisched.io/pod-group"] == group["metadata"]["name"]
