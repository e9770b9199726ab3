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
from kaisched.api.gpushare import (
    GPU_GROUP,
    RESERVATION_APP,
    RESERVATION_NAMESPACE,
    gpu_memory_label,
    groups_of,
    parse_share,
)
from kaisched.api.resource import GPU, PODS, Resource
from kaisched.api.types import JobKey, PodKey, job_key, pod_key
from kaisched.cache.convert import pod_request
from kaisched.cluster.kinds import NODE, POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster

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
    subgroups: tuple[tuple[str, int], ...]
    strict: bool


class Meter:
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self.allocatable: dict[str, dict[str, float]] = {}
        self.gpu_memory: dict[str, int | None] = {}       # MiB per GPU, where labelled
        for node in cluster.list(NODE):
            alloc = Resource.from_quantities(node["status"]["allocatable"])
            self.allocatable[node["metadata"]["name"]] = {
                k: v for k, v in alloc.items if k != PODS}
            self.gpu_memory[node["metadata"]["name"]] = gpu_memory_label(
                node["metadata"].get("labels") or {})
        self.node_used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.queue_used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.total_used: dict[str, float] = defaultdict(float)
        # Per shared GPU (node, group): what of it its sharers take.
        self.gpu_fill: dict[tuple[str, str], float] = defaultdict(float)
        self.alive: dict[JobKey, int] = defaultdict(int)
        self.alive_in: dict[tuple[JobKey, str], int] = defaultdict(int)
        self.gangs: dict[JobKey, Gang] = {}
        self.pods: dict[PodKey, PodUse] = {}
        self.dirty_nodes: set[str] = set()
        self._subscription = cluster.subscribe((POD, PODGROUP))

    def capacity(self, resource: str) -> float:
        return sum(a.get(resource, 0.0) for a in self.allocatable.values())

    def update(self) -> None:
        for event in self._subscription.drain():
            meta = event.obj["metadata"]
            if event.kind == PODGROUP:
                key = job_key(meta["namespace"], meta["name"])
                if event.type == "DELETED":
                    self.gangs.pop(key, None)
                else:
                    spec = event.obj.get("spec") or {}
                    self.gangs[key] = Gang(
                        int(spec.get("minMember", 1)),
                        tuple((sg["name"], int(sg.get("minMember", 0)))
                              for sg in spec.get("subGroups") or ()),
                        spec.get("mode", "Strict") != "NonStrict")
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
        request = tuple((k, v) for k, v in pod_request(spec, []).items if k != PODS)
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
    group = annotations.get(L.POD_GROUP_ANNOTATION)
    return PodUse(
        node=node, queue=str(labels.get(L.QUEUE_LABEL) or "default"),
        job=job_key(meta["namespace"], group) if group else None,
        subgroup=labels.get(L.SUBGROUP_LABEL), request=request,
        on_node=on_node, counted=on_node and not leaving and not reserves,
        alive=(on_node and not leaving) or phase == "Succeeded",
        share=share, reserves=reserves, groups=groups_of(labels) if share else ())
