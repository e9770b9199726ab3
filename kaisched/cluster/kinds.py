"""The API kinds kaisched reads and writes, as typed values."""
from __future__ import annotations

from typing import Any

import attrs

from kaisched.api import workloadkinds


@attrs.frozen(slots=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool = True
    # Only the objects a watch needs (a fieldSelector the API server applies);
    # not part of the kind's identity: the memory backend hands every object over.
    field_selector: str = attrs.field(default="", eq=False)
    # Read only for the words of why a pod waits: a scheduler starting up does
    # not wait for its first list (Subscription.settle says when to).
    late: bool = attrs.field(default=False, eq=False)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    def __str__(self) -> str:
        return f"{self.kind}.{self.api_version}"


POD = Kind("v1", "Pod", "pods")
NODE = Kind("v1", "Node", "nodes", namespaced=False)
EVENT = Kind("v1", "Event", "events")
NAMESPACE = Kind("v1", "Namespace", "namespaces", namespaced=False)
PRIORITY_CLASS = Kind("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", namespaced=False)
PODGROUP = Kind("scheduling.kaisched.io/v1alpha1", "PodGroup", "podgroups")
QUEUE = Kind("scheduling.kaisched.io/v1alpha1", "Queue", "queues", namespaced=False)
XK8S_PODGROUP = Kind("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups")
# Koordinator's PodGroup (read like scheduler-plugins'): watched only where served.
KOORD_PODGROUP = Kind("scheduling.sigs.k8s.io/v1alpha1", "PodGroup", "podgroups")
# The upstream Workload API (KEP-4671), each version watched only where served.
# Kubernetes 1.35 (v1alpha1): a Workload whose spec.podGroups are the gangs, named
# by pods' spec.workloadRef. 1.36 (v1alpha2) and 1.37 (v1beta1, with v1alpha3
# beside it behind a gate): runtime PodGroup objects, named by pods'
# spec.schedulingGroup; later versions' Workloads only hold the templates those
# PodGroups are copied from, which the scheduler has no need to read. A cluster
# serving two PodGroup versions shows each object in both: the first version
# here is the one read.
WORKLOAD_V1ALPHA1 = Kind("scheduling.k8s.io/v1alpha1", "Workload", "workloads")
UPSTREAM_PODGROUPS = tuple(Kind(f"scheduling.k8s.io/{v}", "PodGroup", "podgroups")
                           for v in ("v1beta1", "v1alpha3", "v1alpha2"))
UPSTREAM_KINDS = (WORKLOAD_V1ALPHA1, *UPSTREAM_PODGROUPS)
# KAI Scheduler's own PodGroup and Queue, read so that a KAI user's objects
# schedule unchanged: watched only where served.
KAI_PODGROUP = Kind("scheduling.run.ai/v2alpha2", "PodGroup", "podgroups")
KAI_QUEUE = Kind("scheduling.run.ai/v2", "Queue", "queues", namespaced=False)
LEASE = Kind("coordination.k8s.io/v1", "Lease", "leases")
# Storage: what volume binding reads (and writes: a claim's selected node, a volume's claimRef).
PVC = Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims")
PV = Kind("v1", "PersistentVolume", "persistentvolumes", namespaced=False)
STORAGE_CLASS = Kind("storage.k8s.io/v1", "StorageClass", "storageclasses", namespaced=False)
CSI_NODE = Kind("storage.k8s.io/v1", "CSINode", "csinodes", namespaced=False)
# Provisioners say a claim could not be provisioned with an Event on it.
# Listing them means filtering every Event the API server holds (a third of a
# second for 36,000 on a loopback server), and only a waiting pod's message reads them.
PVC_EVENTS = Kind("v1", "Event", "events", field_selector=(
    "involvedObject.kind=PersistentVolumeClaim,reason=ProvisioningFailed"), late=True)
STORAGE_KINDS = (PVC, PV, STORAGE_CLASS, CSI_NODE)
# Dynamic Resource Allocation: v1 (GA in 1.34) and v1beta1 (1.32-1.33), each
# watched where served; the cache prefers v1 when a cluster serves both.
DRA_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta1")
DEVICE_CLASSES = tuple(Kind(v, "DeviceClass", "deviceclasses", namespaced=False) for v in DRA_VERSIONS)
RESOURCE_SLICES = tuple(Kind(v, "ResourceSlice", "resourceslices", namespaced=False)
                        for v in DRA_VERSIONS)
RESOURCE_CLAIMS = tuple(Kind(v, "ResourceClaim", "resourceclaims") for v in DRA_VERSIONS)
DRA_KINDS = (*DEVICE_CLASSES, *RESOURCE_SLICES, *RESOURCE_CLAIMS)
# Read by the resource-claim controller (emulated by replay and simulate), not the scheduler.
RESOURCE_CLAIM_TEMPLATES = tuple(Kind(v, "ResourceClaimTemplate", "resourceclaimtemplates")
                                 for v in DRA_VERSIONS)
# PodDisruptionBudgets: a move consolidation plans never breaks one.
POD_DISRUPTION_BUDGET = Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets")
# KAI's Topology (the order of a cluster's topology levels): watched only where served.
KAI_TOPOLOGY = Kind("kai.scheduler/v1alpha1", "Topology", "topologies", namespaced=False)
# Capacity asked of cluster-autoscaler for a gang, and the pod shapes it names.
PROVISIONING_REQUEST = Kind("autoscaling.x-k8s.io/v1", "ProvisioningRequest", "provisioningrequests")
POD_TEMPLATE = Kind("v1", "PodTemplate", "podtemplates")
# Jobs: the Job controller ends a Job's pods at its spec.activeDeadlineSeconds, a
# limit reservation backfill counts on (and Kueue's maximum execution time, an estimate).
BATCH_JOB = Kind("batch/v1", "Job", "jobs")

KNOWN = {(k.api_version, k.kind): k for k in (
    POD, NODE, EVENT, NAMESPACE, PRIORITY_CLASS, PODGROUP, QUEUE, XK8S_PODGROUP,
    KOORD_PODGROUP, *UPSTREAM_KINDS, KAI_PODGROUP, KAI_QUEUE, LEASE, KAI_TOPOLOGY, *STORAGE_KINDS,
    *DRA_KINDS, *RESOURCE_CLAIM_TEMPLATES, POD_DISRUPTION_BUDGET, PROVISIONING_REQUEST,
    POD_TEMPLATE, BATCH_JOB)}
# What the scheduler's cache watches (namespaces: their labels, for namespaceSelectors).
SCHEDULING_KINDS = (NODE, POD, PODGROUP, XK8S_PODGROUP, KOORD_PODGROUP, *UPSTREAM_KINDS, KAI_PODGROUP,
                    QUEUE, KAI_QUEUE, PRIORITY_CLASS, NAMESPACE, KAI_TOPOLOGY, *STORAGE_KINDS,
                    PVC_EVENTS, *DRA_KINDS, POD_DISRUPTION_BUDGET, PROVISIONING_REQUEST, BATCH_JOB)
_CLUSTER_SCOPED = {"Node", "Namespace", "PriorityClass", "Queue", "Topology", "ClusterRole",
                   "ClusterRoleBinding", "CustomResourceDefinition", "PersistentVolume",
                   "StorageClass", "CSINode", "DeviceClass", "ResourceSlice"}


def kind_for(api_version: str, kind: str) -> Kind:
    """The Kind of an apiVersion/kind pair, known or guessed the way kubectl does."""
    known = KNOWN.get((api_version, kind))
    if known is not None:
        return known
    workload = workloadkinds.lookup(workloadkinds.group_of(api_version), kind)
    if workload is not None:        # an owner the PodGrouper reads, in any version
        return Kind(api_version, kind, workload.plural)
    lower = kind.lower()
    plural = lower + ("es" if lower.endswith(("s", "x", "ch")) else "s")
    return Kind(api_version, kind, plural, namespaced=kind not in _CLUSTER_SCOPED)


def kind_of(obj: dict[str, Any]) -> Kind:
    return kind_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))


def object_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
