"""Claims an upstream PodGroup shares with its pods (spec.resourceClaims of
v1alpha2 and v1beta1): read from the group, matched to a pod's own entries
only when every field is equal, reserved for the PodGroup (read and written
back in that shape), held until the group is gone; and allocations whose
devices a slice offers to a set of nodes admit those nodes."""
from __future__ import annotations

from typing import Any

from kaisched.api.clock import ManualClock
from kaisched.api.constraints import Requirement, SelectorTerm
from kaisched.api.dradevices import PODGROUPS, Allocation, Consumer, DeviceResult, GroupClaim
from kaisched.cache.cache import Cache
from kaisched.cache.convert import draobjects as dra
from kaisched.cache.convert import podgroup_v1alpha2, podgroup_v1beta1
from kaisched.cache.drastore import DeviceStore
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import RESOURCE_CLAIMS, UPSTREAM_PODGROUPS
from kaisched.cluster.memory import MemoryCluster

BETA = "scheduling.k8s.io/v1beta1"


def group(claims: list[dict[str, Any]], made: list[dict[str, Any]] | None = None,
          api: str = BETA) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ns", "uid": "pg-uid"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": claims},
            "status": {"resourceClaimStatuses": made or []}}


def pod(name: str, claims: list[dict[str, Any]], made: list[dict[str, Any]] | None = None,
        group_name: str = "train") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"schedulerName": "kaisched", "schedulingGroup": {"podGroupName": group_name},
                     "resourceClaims": claims, "containers": [{"name": "c"}]},
            "status": {"resourceClaimStatuses": made or []}}


def test_a_podgroups_claims_are_read_in_both_versions_that_have_them() -> None:
    claims = [{"name": "fabric", "resourceClaimTemplateName": "rack"},
              {"name": "gpus", "resourceClaimName": "shared-gpus"}]
    made = [{"name": "fabric", "resourceClaimName": "train-fabric-x"}]
    for read, api in ((podgroup_v1beta1, BETA), (podgroup_v1alpha2, "scheduling.k8s.io/v1alpha2")):
        spec, _, problem = read(group(claims, made, api))
        assert problem is None
        assert spec.claims == (GroupClaim("fabric", None, "rack", "train-fabric-x"),
                               GroupClaim("gpus", "shared-gpus"))
        assert spec.claim_holder == Consumer("train", "pg-uid", PODGROUPS, "scheduling.k8s.io")
    spec, _, problem = podgroup_v1beta1(group([{"name": "x"}]))
    assert spec.claims == () and "exactly one of resourceClaimName" in problem


def test_a_pod_entry_stands_for_the_groups_claim_only_when_every_field_is_equal() -> None:
    shared = (GroupClaim("fabric", None, "rack", "train-fabric-x"), GroupClaim("gpus", "shared-gpus"))
    refs = dra.pod_claim_refs(pod("p", [
        {"name": "fabric", "resourceClaimTemplateName": "rack"},        # the group's, by template
        {"name": "gpus", "resourceClaimName": "shared-gpus"},           # the group's, by name
        {"name": "other", "resourceClaimName": "shared-gpus"},          # same claim, another name: its own
        {"name": "scratch", "resourceClaimTemplateName": "rack"}],      # same template, another name: its own
        [{"name": "scratch", "resourceClaimName": "p-scratch-y"}]))
    keys, group_keys, problem = dra.resolve_claims(refs, "ns", shared)
    assert keys == ("ns/train-fabric-x", "ns/shared-gpus", "ns/shared-gpus", "ns/p-scratch-y")
    assert group_keys == ("ns/train-fabric-x", "ns/shared-gpus") and problem is None
    # The group's claim from a template, not made yet: the pod waits for it, not
    # for a claim of its own (none will be made for an entry the group shares).
    waiting = (GroupClaim("fabric", None, "rack"),)
    keys, group_keys, problem = dra.resolve_claims(refs[:1], "ns", waiting)
    assert keys == () and "fabric (its PodGroup's, template rack)" in problem


def test_reservations_for_a_podgroup_are_read_and_written_as_such() -> None:
    holder = Consumer("train", "pg-uid", PODGROUPS, "scheduling.k8s.io")
    written = dra.reserved_dict((Consumer("p", "pu"), holder))
    assert written == [{"resource": "pods", "name": "p", "uid": "pu"},
                       {"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                        "name": "train", "uid": "pg-uid"}]
    claim = dra.claim({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                       "metadata": {"name": "c", "namespace": "ns"},
                       "status": {"reservedFor": [*written, {"apiGroup": "x.io", "resource": "things",
                                                             "name": "t", "uid": "tu"}]}})
    assert claim.reserved_for == (Consumer("p", "pu"), holder)
    assert claim.reserved("ns/p") and not claim.reserved("ns/train") and claim.pods() == 1


def test_an_allocation_keeps_its_pods_on_the_nodes_of_its_devices() -> None:
    rack = (SelectorTerm((Requirement("rack", "In", ("r1",)),)),)
    spread = Allocation((DeviceResult("link", "fabric.io", "rack-r1", "link-0"),), None, rack)
    pinned = Allocation((DeviceResult("gpu", "gpu.io", "n1", "gpu-0"),), "n1")
    anywhere = Allocation((DeviceResult("net", "net.io", "all", "vlan-0"),))
    for found in (spread, pinned, anywhere):
        assert dra.allocation(dra.allocation_dict(found)) == found
    assert spread.admits("a", {"rack": "r1"}) and not spread.admits("c", {"rack": "r2"})
    assert pinned.admits("n1", {}) and not pinned.admits("n2", {})
    assert anywhere.admits("any", {})


def test_a_claim_reserved_for_a_podgroup_is_held_until_the_group_is_gone() -> None:
    store = DeviceStore()
    holder = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": "pg-uid"}
    store.apply(WatchEvent("ADDED", RESOURCE_CLAIMS[0], {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "status": {"allocation": {"devices": {"results": []}}, "reservedFor": [holder]}}))
    # No pod of the group is left: the group still holds its claim.
    assert "ns/c" not in store.lend({}, lambda key: "pg-uid" if key == "ns/train" else None).gone
    # The group gone (or made again under another uid): its reservation goes.
    assert [c.name for c in store.lend({}, lambda key: None).gone["ns/c"]] == ["train"]
    assert [c.name for c in store.lend({}, lambda key: "new-uid").gone["ns/c"]] == ["train"]


def test_pods_take_their_groups_claims_whichever_comes_first() -> None:
    """The pods before their PodGroup, or the group's claim made after both:
    the cache's tasks follow, as a model rebuilt from scratch has them."""
    cluster = MemoryCluster(ManualClock())
    cache = Cache()
    entry = {"name": "fabric", "resourceClaimTemplateName": "rack"}
    for name in ("p0", "p1"):
        cluster.create(pod(name, [entry]))
    cache.sync(cluster)
    job = cache.snapshot(0.0).jobs["ns/train"]
    assert "does not exist" in job.problem
    cluster.create(group([entry]))
    cache.sync(cluster)
    job = cache.snapshot(0.0).jobs["ns/train"]
    assert "fabric (its PodGroup's, template rack)" in job.problem
    assert all(t.claims == () for t in job.tasks.values())
    cluster.patch_status(UPSTREAM_PODGROUPS[0], "ns", "train", {
        "resourceClaimStatuses": [{"name": "fabric", "resourceClaimName": "train-fabric-x"}]})
    cache.sync(cluster)
    job = cache.snapshot(0.0).jobs["ns/train"]
    assert job.problem is None
    assert {t.claims for t in job.tasks.values()} == {("ns/train-fabric-x",)}
    assert {t.shared for t in job.tasks.values()} == {("ns/train-fabric-x",)}
    assert cache.check(0.0) == []

