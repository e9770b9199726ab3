"""The cache's DRA store: an object served under two versions counts once
(the newer), a pool counts only in its newest generation, and the claims'
reservations of pods that are gone are found."""
from __future__ import annotations

from kaisched.cache.convert import pod_facts
from kaisched.cache.drastore import DeviceStore
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import RESOURCE_CLAIMS, RESOURCE_SLICES

V1, BETA = RESOURCE_CLAIMS


def claim(api: str, count: int, reserved: list[str] = ()) -> dict:
    request = {"deviceClassName": "gpu", "count": count}
    body = {"name": "r", "exactly": request} if api.endswith("/v1") else {"name": "r", **request}
    status = {"reservedFor": [{"resource": "pods", "name": n, "uid": f"uid-{n}"} for n in reserved]}
    return {"apiVersion": api, "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {"requests": [body]}}, "status": status}


def test_the_newer_version_counts_and_a_deleted_one_falls_back() -> None:
    store = DeviceStore()
    store.apply(WatchEvent("ADDED", BETA, claim(BETA.api_version, 1)))
    store.apply(WatchEvent("ADDED", V1, claim(V1.api_version, 2)))
    assert store.lend({}).claims["ns/c"].requests[0].count == 2
    store.apply(WatchEvent("DELETED", V1, claim(V1.api_version, 2)))
    assert store.lend({}).claims["ns/c"].requests[0].count == 1
    store.apply(WatchEvent("DELETED", BETA, claim(BETA.api_version, 1)))
    assert "ns/c" not in store.lend({}).claims


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    def sliced(name: str, generation: int, devices: list[str]) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
                "spec": {"driver": "gpu.io", "nodeName": "n1",
                         "pool": {"name": "p", "generation": generation},
                         "devices": [{"name": d} for d in devices]}}
    store = DeviceStore()
    store.apply(WatchEvent("ADDED", RESOURCE_SLICES[0], sliced("old", 1, ["a", "b"])))
    store.apply(WatchEvent("ADDED", RESOURCE_SLICES[0], sliced("new", 2, ["c"])))
    assert [d.name for d in store.lend({}).devices] == ["c"]


def test_reservations_of_pods_gone_or_finished() -> None:
    store = DeviceStore()
    store.apply(WatchEvent("ADDED", V1, claim(V1.api_version, 1, ["running", "done", "deleted"])))
    pods = {}
    for name, phase in (("running", "Running"), ("done", "Succeeded")):
        facts = pod_facts({"apiVersion": "v1", "kind": "Pod",
                           "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
                           "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
                           "status": {"phase": phase}})
        pods[facts.key] = facts
    gone = store.lend(pods).gone["ns/c"]
    assert sorted(c.name for c in gone) == ["deleted", "done"]
