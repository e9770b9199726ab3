"""What is in use, kept up to date from a watch on pods and PodGroups: per
node (Releasing pods still hold their node), per queue (as the scheduler
counts it: bound pods not on their way out), and per gang (pods alive:
bound and not leaving, or done). The invariants and the timeline read it.

Shared GPUs: a reservation pod holds its GPU whole on its node (and counts
as SHARED_GPUS, in no queue); a pod sharing GPUs holds nothing of the node's
GPUs itself, but counts its share as GPUs in its queue and as GPU_SHARES in
the cluster's use, so that what shared GPUs are filled with can be told.
"""
from __future__ import annotations

from collections import defaultdict

import attrs

from kaisched.api import labels as L
from kaisched.api.gpuask import (
    GPU_GROUP,
    RESERVATION_APP,
    RESERVATION_NAMESPACE,
    gpu_memory_label,
    groups_of,
    parse_share,
)
from kaisched.api.job import GangSpec
from kaisched.api.resource import GPU, PODS, Resource
from kaisched.api.subgroups import SubGroupTree, tree_of
from kaisched.api.types import Disruption, GangMode, JobKey, PodKey, job_key, pod_key
from kaisched.cache import convert
from kaisched.cluster.kinds import (
    KAI_PODGROUP,
    NODE,
    POD,
    PODGROUP,
    UPSTREAM_PODGROUPS,
    WORKLOAD_V1ALPHA1,
    Kind,
    object_key,
)
from kaisched.cluster.memory import MemoryCluster

# Where gangs are declared (the scheduler's readers say what each declares),
# and the pods' references that name them.
_READERS = {PODGROUP: convert.podgroup, KAI_PODGROUP: convert.kai_podgroup,
            **{k: convert.podgroup_v1alpha2 if k.version == "v1alpha2" else convert.podgroup_v1beta1
               for k in UPSTREAM_PODGROUPS}}
_GANG_KINDS = (*_READERS, WORKLOAD_V1ALPHA1)
_NAMED = ("kaisched", "upstream", "workload", "kai")

_EPS = 1e-6
SHARED_GPUS = "kaisched.io/shared-gpus"     # GPUs reservation pods hold for their sharers
GPU_SHARES = "kaisched.io/gpu-shares"       # what of them the sharers use, in GPUs


@attrs.frozen(slots=True)
class PodUse:
    node: str | None
    queue: str
    job: JobKey | None
    subgroup: str | None
    request: tuple[tuple[str, float], ...]
    on_node: bool          # bound and not finished: it takes room on the node
    counted: bool          # ... and not leaving: it counts against its queue
    alive: bool            # counts towards its gang (placed and staying, or done)
    share: float = 0.0     # the GPUs it uses of shared ones (a sharer)
    reserves: bool = False  # a reservation pod: its GPU is held for sharers
    groups: tuple[str, ...] = ()    # the shared GPUs it is on (its runai-gpu-group labels)


@attrs.frozen(slots=True)
class Gang:
    min_member: int
    tree: SubGroupTree | None       # its subgroups, if it has any
    strict: bool


class Meter:
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self.allocatable: dict[str, dict[str, float]] = {}
        self.gpu_memory: dict[str, int | None] = {}       # MiB per GPU, where labelled
        for node in cluster.list(NODE):
            self._node(node)
        self.node_used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.queue_used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.total_used: dict[str, float] = defaultdict(float)
        # Per shared GPU (node, group): what of it its sharers take.
        self.gpu_fill: dict[tuple[str, str], float] = defaultdict(float)
        self.alive: dict[JobKey, int] = defaultdict(int)
        self.alive_in: dict[tuple[JobKey, str], int] = defaultdict(int)
        self.gangs: dict[JobKey, Gang] = {}
        self._gangs_of: dict[tuple[Kind, str, str], tuple[JobKey, ...]] = {}
        self.pods: dict[PodKey, PodUse] = {}
        self.dirty_nodes: set[str] = set()
        # Nodes come and go only where an autoscaler is simulated.
        self._subscription = cluster.subscribe((POD, NODE, *_GANG_KINDS))

    def _node(self, node: dict) -> None:
        name = node["metadata"]["name"]
        alloc = Resource.from_quantities(node["status"]["allocatable"])
        self.allocatable[name] = {k: v for k, v in alloc.items if k != PODS}
        self.gpu_memory[name] = gpu_memory_label(node["metadata"].get("labels") or {})

    def capacity(self, resource: str) -> float:
        return sum(a.get(resource, 0.0) for a in self.allocatable.values())

    def update(self) -> None:
        for event in self._subscription.drain():
            meta = event.obj["metadata"]
            if event.kind == NODE:
                if event.type == "DELETED":
                    self.allocatable.pop(meta["name"], None)
                    self.gpu_memory.pop(meta["name"], None)
                else:
                    self._node(event.obj)
                continue
            if event.kind in _GANG_KINDS:
                where = (event.kind, *object_key(event.obj))
                for key in self._gangs_of.pop(where, ()):
                    self.gangs.pop(key, None)
                if event.type != "DELETED":
                    gangs = _gangs(event.kind, event.obj)
                    self.gangs.update(gangs)
                    self._gangs_of[where] = tuple(gangs)
                continue
            pod = pod_key(meta["namespace"], meta["name"])
            old = self.pods.pop(pod, None)
            if old is not None:
                self._account(old, -1.0)
            if event.type != "DELETED":
                use = _use(event.obj, old, self.gpu_memory)
                self.pods[pod] = use
                self._account(use, 1.0)

    def _account(self, use: PodUse, sign: float) -> None:
        if use.on_node and use.node is not None:
            row = self.node_used[use.node]
            for name, amount in use.request:
                row[name] += sign * amount
                self.total_used[name] += sign * amount
            self.total_used[SHARED_GPUS] += sign * use.reserves
            self.total_used[GPU_SHARES] += sign * use.share
            for group in use.groups:
                key = (use.node, group)
                self.gpu_fill[key] += sign * use.share / len(use.groups)
                if abs(self.gpu_fill[key]) < _EPS:
                    del self.gpu_fill[key]
            self.dirty_nodes.add(use.node)
        if use.counted:
            row = self.queue_used[use.queue]
            for name, amount in use.request:
                row[name] += sign * amount
            row[GPU] += sign * use.share
        if use.alive and use.job is not None:
            self.alive[use.job] += int(sign)
            if use.subgroup:
                self.alive_in[(use.job, use.subgroup)] += int(sign)


def _use(pod: dict, old: PodUse | None, gpu_memory: dict[str, int | None]) -> PodUse:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    if old is not None and old.request:
        request = old.request          # a pod's requests never change
    else:
        request = tuple((k, v) for k, v in convert.pod_request(spec, []).items if k != PODS)
    labels = meta.get("labels") or {}
    reserves = meta.get("namespace") == RESERVATION_NAMESPACE \
        and labels.get("app") == RESERVATION_APP and bool(labels.get(GPU_GROUP))
    share = 0.0
    annotations = meta.get("annotations") or {}
    if "gpu-fraction" in annotations or "gpu-memory" in annotations:
        found, _ = parse_share(annotations, labels, 0)
        if found is not None and found.fraction is not None:
            share = found.fraction * found.devices
        elif found is not None and found.memory is not None:
            memory = gpu_memory.get(str(spec.get("nodeName"))) or 0
            share = found.memory / memory * found.devices if memory else 0.0
    phase = status.get("phase", "Pending")
    node = spec.get("nodeName")
    finished = phase in ("Succeeded", "Failed")
    leaving = bool(meta.get("deletionTimestamp"))
    on_node = bool(node) and not finished
    gang = convert.upstream_gang_ref(spec) or convert.gang_ref(meta)
    key = pod_key(meta["namespace"], meta["name"])
    return PodUse(
        node=node, queue=str(L.queue_label(labels) or "default"),
        job=convert.gang_job(key, meta["namespace"], gang) if gang.source in _NAMED else None,
        subgroup=labels.get(L.SUBGROUP_LABEL) or labels.get(L.KAI_SUBGROUP_LABEL), request=request,
        on_node=on_node, counted=on_node and not leaving and not reserves,
        alive=(on_node and not leaving) or phase == "Succeeded",
        share=share, reserves=reserves, groups=groups_of(labels) if share else ())


def _gangs(kind: Kind, obj: dict) -> dict[JobKey, Gang]:
    """The gangs an object declares, by the key its pods' job has."""
    ns, name = object_key(obj)
    if kind == WORKLOAD_V1ALPHA1:
        return {job_key(ns, f"{name}:{group}"): _gang(spec)
                for group, spec in convert.workload_v1alpha1(obj).gangs}
    return {job_key(ns, name): _gang(_READERS[kind](obj)[0])}


def _gang(spec: GangSpec) -> Gang:
    # A gang that may be disrupted pod by pod is not kept whole: no Strict invariant.
    strict = spec.mode is GangMode.STRICT and spec.disruption is not Disruption.SINGLE
    return Gang(spec.min_member,
                tree_of(spec.subgroups, spec.min_sub_group) if spec.subgroups else None, strict)
