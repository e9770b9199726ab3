"""The live binder writes a pod's claims before its bind, the newest status
decided for a shared claim; a claim that cannot be written fails the bind."""
from __future__ import annotations

from kaisched.api.clock import ManualClock
from kaisched.api.dradevices import Allocation, Consumer, DeviceResult
from kaisched.api.types import JobKey, NodeName, PodKey
from kaisched.cluster.kinds import POD, RESOURCE_CLAIMS, Kind
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import PermanentApiError
from kaisched.framework.effects import Bind, SetClaimStatus
from kaisched.runtime.binder import Binder

V1 = "resource.k8s.io/v1"


class Recording(MemoryCluster):
    def __init__(self, refuse: str = "") -> None:
        super().__init__(ManualClock())
        self.calls: list[tuple[str, str]] = []
        self.refuse = refuse

    def patch_status(self, kind: Kind, namespace: str, name: str, status: dict) -> dict:
        self.calls.append(("status", name))
        if name == self.refuse:
            raise PermanentApiError(f"resourceclaims {name}: forbidden", 403)
        return super().patch_status(kind, namespace, name, status)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.calls.append(("bind", name))
        super().bind(namespace, name, uid, node)


def setup(cluster: MemoryCluster) -> None:
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    cluster.create({"apiVersion": V1, "kind": "ResourceClaim",
                    "metadata": {"name": "shared", "namespace": "default"}, "spec": {}})
    for name in ("a", "b"):
        cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                        "spec": {"containers": [{"name": "c"}]}})


def claim(*pods: str, pod: str) -> SetClaimStatus:
    allocation = Allocation((DeviceResult("r", "gpu.io", "n1", "gpu-0"),), NodeName("n1"))
    return SetClaimStatus("default/shared", "", V1, allocation,
                          tuple(Consumer(p, "") for p in pods), PodKey(f"default/{pod}"))


def bind(pod: str) -> Bind:
    uid = ""
    return Bind(PodKey(f"default/{pod}"), uid, NodeName("n1"), JobKey("default/g"))


def test_claims_are_written_before_the_bind_newest_first() -> None:
    cluster = Recording()
    setup(cluster)
    binder = Binder(cluster, cluster.clock.now, workers=1)
    binder.apply([claim("a", pod="a"), claim("a", "b", pod="b"), bind("a"), bind("b")])
    binder.stop()
    assert cluster.calls[0] == ("status", "shared") and cluster.calls[1] == ("bind", "a")
    assert ("bind", "b") in cluster.calls
    status = cluster.get(RESOURCE_CLAIMS[0], "default", "shared")["status"]
    assert [r["name"] for r in status["reservedFor"]] == ["a", "b"]
    assert status["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


def test_a_claim_that_cannot_be_written_fails_the_bind() -> None:
    cluster = Recording(refuse="shared")
    setup(cluster)
    binder = Binder(cluster, cluster.clock.now, workers=1)
    report = binder.apply([claim("a", pod="a"), bind("a")])
    binder.stop()
    assert ("bind", "a") not in cluster.calls
    assert [type(f.effect) for f in report.failed] == [Bind]
    assert "forbidden" in report.failed[0].error
    assert not cluster.get(POD, "default", "a")["spec"].get("nodeName")
