"""Volume binding over the wire: the scheduler writes a WaitForFirstConsumer
claim's selected node (a merge patch naming the claim's resourceVersion),
binds the pod only once the claim is bound, pre-binds a static volume by its
claimRef, and refuses to take a volume another claim took meanwhile."""
from __future__ import annotations

import time

import kmock
import pytest

from kaisched.api.clock import ManualClock
from kaisched.api.volumes import SELECTED_NODE
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP, PV, PVC
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import ConflictError
from kaisched.framework.config import default_config
from kaisched.framework.effects import PrebindVolume
from kaisched.runtime.binder import write_volume
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.scheduler import Scheduler
from tests.builders.wire import (
    PATIENCE,
    Emulator,
    build_claim,
    build_node,
    build_pod,
    build_podgroup,
    build_volume,
    storage_class,
    with_volume,
)

Obj = dict


def _until(scheduler: Scheduler, done: "callable") -> CycleResult:  # type: ignore[valid-type]
    """Cycles until done(result) holds: watch events land in their own time."""
    deadline = time.monotonic() + PATIENCE
    while True:
        result = scheduler.run_once()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up; last effects {result.effects}")
        time.sleep(0.05)


def test_selected_node_written_then_bound_once_the_claim_is(apiserver: Emulator,
                                                            cluster: KubeCluster) -> None:
    cluster.create(build_node("n1"))
    cluster.create(storage_class("fast", "ebs.csi.aws.com"))
    cluster.create(build_claim("data", "fast"))
    cluster.create(build_podgroup("train", min_member=1))
    cluster.create(with_volume(build_pod("train-0", group="train"), "data"))
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, ManualClock())

    first = scheduler.run_once()

    assert not first.report.failed, first.report.failed
    claim = cluster.get(PVC, "default", "data")
    assert claim["metadata"]["annotations"][SELECTED_NODE] == "n1"
    assert "nodeName" not in cluster.get(POD, "default", "train-0")["spec"]
    assert apiserver.count("post", kmock.subresource("binding")) == 0
    patches = apiserver.call(lambda: [r.data for r in apiserver.emu[
        "patch", kmock.resource("v1/persistentvolumeclaims")] if r.name == "data"])
    assert patches and patches[0]["metadata"]["resourceVersion"]
    status = cluster.get(PODGROUP, "default", "train")["status"]
    assert "PVC default/data to be provisioned on node n1" in status["conditions"][0]["message"]

    # The provisioner and the PV controller, played by the test.
    volume = build_volume("pvc-data", "fast", "n1", claim="data")
    volume["spec"]["csi"] = {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"}
    del volume["spec"]["local"]
    cluster.create(volume)
    cluster.patch(PVC, "default", "data", {"spec": {"volumeName": "pvc-data"}})
    cluster.patch_status(PVC, "default", "data", {"phase": "Bound"})

    bound = _until(scheduler, lambda r: bool(r.placed))
    assert bound.placed == {"default/train-0": "n1"}
    assert cluster.get(POD, "default", "train-0")["spec"]["nodeName"] == "n1"


def test_a_static_volume_is_prebound_where_the_pod_goes(apiserver: Emulator,
                                                        cluster: KubeCluster) -> None:
    for node in ("n1", "n2"):
        cluster.create(build_node(node))
    cluster.create(storage_class("local", "kubernetes.io/no-provisioner"))
    cluster.create(build_volume("pv-n2", "local", "n2"))
    cluster.create(build_claim("data", "local"))
    cluster.create(with_volume(build_pod("solo"), "data"))
    registry = register_builtins()

    result = Scheduler(cluster, default_config(registry), registry, ManualClock()).run_once()

    assert not result.report.failed, result.report.failed
    assert result.reservations == {"default/solo": "n2"}
    ref = cluster.get(PV, "", "pv-n2")["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"]) == ("default", "data")
    assert ref["uid"] == cluster.get(PVC, "default", "data")["metadata"]["uid"]
    assert apiserver.count("post", kmock.subresource("binding")) == 0


def test_a_volume_taken_meanwhile_is_not_taken_over(cluster: KubeCluster) -> None:
    cluster.create(build_volume("pv-1", "local", "n1", claim="theirs"))
    with pytest.raises(ConflictError):
        write_volume(cluster, PrebindVolume("pv-1", "default/ours", "", "default/p", "default/p"))
    assert cluster.get(PV, "", "pv-1")["spec"]["claimRef"]["name"] == "theirs"
