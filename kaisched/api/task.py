"""TaskInfo: one pod as the scheduler sees it. Frozen: a session changes a
task by replacing it, so snapshots share tasks with the cache for free."""
from __future__ import annotations

from typing import Any

import attrs

from kaisched.api.constraints import NO_PLACEMENT, Placement
from kaisched.api.gpushare import GpuShare, charged
from kaisched.api.resource import Resource
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus
from kaisched.api.volumes import PodClaim


@attrs.frozen(slots=True)
class TaskInfo:
    key: PodKey
    uid: str
    job: JobKey
    status: TaskStatus
    resreq: Resource                     # includes pods=1
    node_name: NodeName | None = None
    subgroup: str | None = None
    priority: int = 0
    creation: float = 0.0
    started: float | None = None         # status.startTime: when its node's kubelet took it
    placement: Placement = NO_PLACEMENT
    critical: bool = False               # kube-system or a system-* priority class
    unschedulable: str | None = None     # the PodScheduled=False message it carries
    unschedulable_reason: str | None = None   # ... and that condition's reason
    labels: tuple[tuple[str, str], ...] = ()   # sorted; what other pods' selectors read
    never_preempts: bool = False         # preemptionPolicy Never: waits for room, evicts no one
    gates: tuple[str, ...] = ()          # spec.schedulingGates: not to be placed while any remain
    pvcs: tuple[PodClaim, ...] = ()            # PVCs it mounts (most pods: none, no volume checks)
    claims: tuple[str, ...] = ()         # the ResourceClaims it names (namespace/name)
    shared: tuple[str, ...] = ()         # of those, its PodGroup's: reserved for the group
    gpu: GpuShare | None = None          # part of a GPU (KAI's gpu-fraction / gpu-memory)

    @property
    def namespace(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[1]

    @property
    def charge(self) -> Resource:
        """What its queue is charged: its requests, and its share of GPUs
        (the node table counts a shared GPU once, as its device's)."""
        gpu = self.gpu
        return self.resreq if gpu is None else charged(self.resreq, gpu.charge)

    @property
    def best_effort(self) -> bool:
        """Requests nothing but a pod slot (and no part of a GPU)."""
        return self.gpu is None and all(name == "pods" for name in self.resreq.names())

    def evolve(self, **changes: Any) -> TaskInfo:
        return attrs.evolve(self, **changes)
