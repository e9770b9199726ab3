"""TaskInfo: one pod as the scheduler sees it. Frozen: a session changes a
task by replacing it, so snapshots share tasks with the cache for free. A
named tuple rather than a frozen attrs class: the cache makes one per pod
(1,500,000 at a cold start of a big cluster) and a session one per
placement, and a tuple is made four times faster."""
from __future__ import annotations

from typing import Any, NamedTuple

import attrs

from kaisched.api.constraints import NO_PLACEMENT, Placement
from kaisched.api.gpuask import GpuShare, charged
from kaisched.api.resource import Resource
from kaisched.api.types import JobKey, Keyed, NodeName, PodKey, TaskStatus
from kaisched.api.volumes import PodClaim

# How long a pod placed now may wait for its node's kubelet to start it
# (status.startTime, from which activeDeadlineSeconds counts): seconds as a
# rule; this much is allowed for.
START_SLACK = 30.0


@attrs.frozen(slots=True)
class Runtime:
    """How long a pod runs: its enforced limits, and an estimate (never a limit)."""

    # How long it may run at most, once started, grace period included (its
    # activeDeadlineSeconds); None: no such limit.
    limit: float | None = None
    # When its batch Job's deadline (activeDeadlineSeconds from the Job's
    # start, then its grace period) is sure to have ended it, if it has one.
    deadline: float | None = None
    expected: float | None = None        # its estimated run time


class _TaskFields(NamedTuple):
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
    controlled: bool = False             # a controller owns it: it is made again if evicted
    runtime: Runtime | None = None       # its limits and estimate (most pods: none)
    # A moved pod's successor: the pod its controller will make again, held
    # on its new node for the rest of the session. Its job does not count it
    # (the pod it stands for is still the job's, releasing on its old node).
    successor_of: PodKey | None = None
    shared: tuple[str, ...] = ()         # of those, its PodGroup's: reserved for the group
    gpu: GpuShare | None = None          # part of a GPU (KAI's gpu-fraction / gpu-memory)


class TaskInfo(_TaskFields, Keyed):
    __slots__ = ()

    @property
    def charge(self) -> Resource:
        """What its queue is charged: its requests, and its share of GPUs
        (the node table counts a shared GPU once, as its device's)."""
        gpu = self.gpu
        return self.resreq if gpu is None else charged(self.resreq, gpu.charge)

    @property
    def expected(self) -> float | None:
        """Its own estimated run time (or its Job's), if it has one."""
        return self.runtime.expected if self.runtime is not None else None

    def ends_by(self, now: float) -> float | None:
        """When it is sure to be gone: its start plus its limit (one not
        started yet starts within START_SLACK of now: its limit counts from
        when its node's kubelet takes it), or its Job's deadline, whichever
        is sooner; None when nothing ends it."""
        runtime = self.runtime
        if runtime is None:
            return None
        end = runtime.deadline
        if runtime.limit is not None:
            own = (self.started if self.started is not None else now + START_SLACK) + runtime.limit
            end = own if end is None else min(end, own)
        return end

    def likely_end(self, now: float, expected: float | None) -> float | None:
        """When it likely ends: its estimated run time (expected: its own, or
        its gang's or queue's) from its start, if sooner than its limit."""
        end = self.ends_by(now)
        if expected is None:
            return end
        likely = (self.started if self.started is not None else now + START_SLACK) + expected
        return likely if end is None else min(end, likely)

    @property
    def best_effort(self) -> bool:
        """Requests nothing but a pod slot (and no part of a GPU)."""
        return self.gpu is None and all(name == "pods" for name in self.resreq.names())

    def successor(self) -> TaskInfo:
        """The pod its controller will make again once this one is evicted, not
        placed yet: what a move holds room for on the pod's new node. A
        sharer's successor asks the same share, of no GPU yet (its
        controller's template names none)."""
        return self.evolve(key=PodKey(f"{self.key}~moved"), uid="",
                           status=TaskStatus.PENDING, node_name=None, successor_of=self.key,
                           gpu=self.gpu.ask if self.gpu is not None else None)

    def evolve(self, **changes: Any) -> TaskInfo:
        """A copy with changes (a session and the cache make one per placement
        and per echo: by position, cheaper than _replace)."""
        values = list(self)
        for name, value in changes.items():
            values[_POSITION[name]] = value
        return TaskInfo._make(values)

    def placed_as(self, status: TaskStatus, node_name: NodeName, gpu: GpuShare | None) -> TaskInfo:
        """evolve(status=, node_name=, gpu=): the copy a placement makes, the
        fields it changes put by their known places (no changes to look up)."""
        values = list(self)
        values[3], values[5], values[-1] = status, node_name, gpu
        return TaskInfo._make(values)


_NAMES = TaskInfo._fields
_POSITION = {name: i for i, name in enumerate(_NAMES)}
# placed_as puts these by place.
assert _NAMES[3] == "status" and _NAMES[5] == "node_name" and _NAMES[-1] == "gpu"
