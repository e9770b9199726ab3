"""Devices over the wire, against an API server that serves resource.k8s.io
only as v1beta1 (as Kubernetes 1.32): the scheduler reads the class, slice
and claim, writes the claim's allocation and reservation through its status
subresource, and only then binds the pod."""
from __future__ import annotations

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, RESOURCE_CLAIMS
from kaisched.cluster.kube import KubeCluster
from kaisched.framework.config import default_config
from kaisched.runtime.scheduler import Scheduler
from tests.builders.wire import Emulator, build_node

BETA = "resource.k8s.io/v1beta1"


def test_a_claim_is_allocated_and_reserved_before_the_bind(apiserver: Emulator,
                                                           cluster: KubeCluster) -> None:
    cluster.create(build_node("n1", cpu="4"))
    cluster.create({"apiVersion": BETA, "kind": "DeviceClass", "metadata": {"name": "gpu"},
                    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.io"'}}]}})
    cluster.create({"apiVersion": BETA, "kind": "ResourceSlice", "metadata": {"name": "n1-gpus"},
                    "spec": {"driver": "gpu.io", "nodeName": "n1",
                             "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                             "devices": [{"name": "gpu-0", "basic": {
                                 "attributes": {"model": {"string": "L4"}}}}]}})
    cluster.create({"apiVersion": BETA, "kind": "ResourceClaim",
                    "metadata": {"name": "gpu", "namespace": "default"},
                    "spec": {"devices": {"requests": [{
                        "name": "one", "deviceClassName": "gpu",
                        "selectors": [{"cel": {"expression":
                                               'device.attributes["gpu.io"].model == "L4"'}}]}]}}})
    pod = cluster.create({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "infer", "namespace": "default"},
                          "spec": {"schedulerName": "kaisched",
                                   "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                                   "containers": [{"name": "main", "image": "x"}]}})
    registry = register_builtins()

    result = Scheduler(cluster, default_config(registry), registry, ManualClock()).run_once()

    assert not result.report.failed, result.report.failed
    assert cluster.get(POD, "default", "infer")["spec"]["nodeName"] == "n1"
    claim = cluster.get(RESOURCE_CLAIMS[1], "default", "gpu")
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": "one", "driver": "gpu.io", "pool": "n1", "device": "gpu-0"}]
    assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"] == ["n1"]
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "infer", "uid": pod["metadata"]["uid"]}]
    order = apiserver.call(lambda: [(r.subresource, r.name) for r in apiserver.emu._requests
                                    if r.subresource in ("status", "binding")
                                    and r.name in ("gpu", "infer")])
    assert order.index(("status", "gpu")) < order.index(("binding", "infer"))
