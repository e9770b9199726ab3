"""Both API shapes of resource.k8s.io (v1 and v1beta1) read into one model."""
from __future__ import annotations

from decimal import Decimal

from kaisched.api.dradevices import Allocation, Consumer, DeviceResult
from kaisched.cache.convert import draobjects as dra
from kaisched.cache.convert import pod_facts


def test_v1_and_v1beta1_requests_read_alike() -> None:
    request = {"deviceClassName": "gpu", "count": 2, "allocationMode": "ExactCount",
               "selectors": [{"cel": {"expression": 'device.driver == "x"'}}]}
    v1 = dra.claim({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                    "metadata": {"name": "c", "namespace": "ns"},
                    "spec": {"devices": {"requests": [{"name": "r", "exactly": request}]}}})
    beta = dra.claim({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
                      "metadata": {"name": "c", "namespace": "ns"},
                      "spec": {"devices": {"requests": [{"name": "r", **request}]}}})
    assert v1.requests == beta.requests
    assert v1.requests[0].count == 2 and v1.requests[0].device_class == "gpu"
    assert (v1.api_version, beta.api_version) == ("resource.k8s.io/v1", "resource.k8s.io/v1beta1")


def test_v1_and_v1beta1_devices_read_alike() -> None:
    body = {"attributes": {"productName": {"string": "A100"}, "index": {"int": 3},
                           "other.io/flag": {"bool": True}},
            "capacity": {"memory": {"value": "40Gi"}}}

    def sliced(api: str, device: dict) -> dict:
        return {"apiVersion": api, "kind": "ResourceSlice", "metadata": {"name": "s"},
                "spec": {"driver": "gpu.io", "nodeName": "n1", "pool": {"name": "p", "generation": 2},
                         "devices": [device]}}

    v1 = dra.slice_devices(sliced("resource.k8s.io/v1", {"name": "d", **body}))
    beta = dra.slice_devices(sliced("resource.k8s.io/v1beta1", {"name": "d", "basic": body}))
    assert v1 == beta
    device = v1[0]
    assert device.node == "n1"
    assert device.attribute("gpu.io/productName") == "A100" and device.attribute("index") == 3
    assert device.attribute("other.io/flag") is True
    assert device.capacity == (("gpu.io", "memory", Decimal(40 * 2**30)),)
    assert dra.slice_pool(sliced("resource.k8s.io/v1", {"name": "d"})) == ("gpu.io", "p", 2)


def test_first_available_constraints_status_and_owner() -> None:
    claim = dra.claim({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u",
                     "ownerReferences": [{"kind": "Pod", "name": "p", "controller": True}]},
        "spec": {"devices": {
            "requests": [{"name": "r", "firstAvailable": [
                {"name": "big", "deviceClassName": "gpu", "count": 2},
                {"name": "small", "deviceClassName": "gpu", "allocationMode": "All"}]}],
            "constraints": [{"requests": ["r"], "matchAttribute": "gpu.io/numa"}]}},
        "status": {"allocation": {
            "devices": {"results": [{"request": "r/big", "driver": "gpu.io", "pool": "n1", "device": "d"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}]}})
    subs = claim.requests[0].alternatives
    assert [(s.name, s.count, s.all) for s in subs] == [("big", 2, False), ("small", 1, True)]
    assert claim.constraints[0].match_attribute == "gpu.io/numa"
    assert claim.allocation == Allocation((DeviceResult("r/big", "gpu.io", "n1", "d"),), "n1")
    assert claim.reserved_for == (Consumer("p", "pu"),)
    assert claim.owner_pod == "ns/p" and claim.problem is None
    # and written back in the same shape
    assert dra.allocation(dra.allocation_dict(claim.allocation)) == claim.allocation


def test_bad_fields_are_problems() -> None:
    claim = dra.claim({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": {"name": "c", "namespace": "ns"},
                       "spec": {"devices": {"requests": [
                           {"name": "r", "exactly": {"deviceClassName": "gpu", "count": 0,
                                                     "allocationMode": "Some"}}]}}})
    assert "count must be a positive integer" in claim.problem
    assert "unknown allocationMode Some" in claim.problem


def test_pod_claims_direct_and_from_templates() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
           "spec": {"schedulerName": "kaisched", "containers": [{"name": "c"}],
                    "resourceClaims": [{"name": "a", "resourceClaimName": "shared"},
                                       {"name": "b", "resourceClaimTemplateName": "t"}]}}
    facts = pod_facts(pod)
    assert facts.claims == ("ns/shared",)
    assert "waiting for the ResourceClaim of resourceClaims b (template t)" in facts.problem
    pod["status"] = {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-x"}]}
    facts = pod_facts(pod)
    assert facts.claims == ("ns/shared", "ns/p-b-x") and facts.problem is None
    assert pod_facts({**pod, "spec": {**pod["spec"], "resourceClaims": []}}).claims == ()
