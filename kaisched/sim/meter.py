"""What is in use, kept up to date from a watch on pods and PodGroups: per
node (Releasing pods still hold their node), per queue (as the scheduler
counts it: bound pods not on their way out), and per gang (pods alive:
bound and not leaving, or done). The invariants and the timeline read it.
"""
from __future__ import annotations

from collections import defaultdict

import attrs

from kaisched.api import labels as L
from kaisched.api.resource import PODS, Resource
from kaisched.api.subgroups import SubGroupTree, tree_of
from kaisched.api.types import GangMode, JobKey, PodKey, job_key, pod_key
from kaisched.cache.convert import pod_request
from kaisched.cache.convert.groups import podgroup
from kaisched.cluster.kinds import NODE, POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster

_EPS = 1e-6


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


@attrs.frozen(slots=True)
class Gang:
    min_member: int
    tree: SubGroupTree | None       # its subgroups, if it has any
    strict: bool


class Meter:
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster
        self.allocatable: dict[str, dict[str, float]] = {}
        for node in cluster.list(NODE):
            alloc = Resource.from_quantities(node["status"]["allocatable"])
            self.allocatable[node["metadata"]["name"]] = {
                k: v for k, v in alloc.items if k != PODS}
        self.node_used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.queue_used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.total_used: dict[str, float] = defaultdict(float)
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
                    gang, _, _ = podgroup(event.obj)
                    self.gangs[key] = Gang(
                        gang.min_member,
                        tree_of(gang.subgroups, gang.min_sub_group) if gang.subgroups else None,
                        gang.mode is GangMode.STRICT)
                continue
            pod = pod_key(meta["namespace"], meta["name"])
            old = self.pods.pop(pod, None)
            if old is not None:
                self._account(old, -1.0)
            if event.type != "DELETED":
                use = _use(event.obj, old)
                self.pods[pod] = use
                self._account(use, 1.0)

    def _account(self, use: PodUse, sign: float) -> None:
        if use.on_node and use.node is not None:
            row = self.node_used[use.node]
            for name, amount in use.request:
                row[name] += sign * amount
                self.total_used[name] += sign * amount
            self.dirty_nodes.add(use.node)
        if use.counted:
            row = self.queue_used[use.queue]
            for name, amount in use.request:
                row[name] += sign * amount
        if use.alive and use.job is not None:
            self.alive[use.job] += int(sign)
            if use.subgroup:
                self.alive_in[(use.job, use.subgroup)] += int(sign)


def _use(pod: dict, old: PodUse | None) -> PodUse:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    if old is not None and old.request:
        request = old.request          # a pod's requests never change
    else:
        request = tuple((k, v) for k, v in pod_request(spec, []).items if k != PODS)
    phase = status.get("phase", "Pending")
    node = spec.get("nodeName")
    finished = phase in ("Succeeded", "Failed")
    leaving = bool(meta.get("deletionTimestamp"))
    on_node = bool(node) and not finished
    group = (meta.get("annotations") or {}).get(L.POD_GROUP_ANNOTATION)
    labels = meta.get("labels") or {}
    return PodUse(
        node=node, queue=str(labels.get(L.QUEUE_LABEL) or "default"),
        job=job_key(meta["namespace"], group) if group else None,
        subgroup=labels.get(L.SUBGROUP_LABEL), request=request,
        on_node=on_node, counted=on_node and not leaving,
        alive=(on_node and not leaving) or phase == "Succeeded")
