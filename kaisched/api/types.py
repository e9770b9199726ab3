"""Typed ids and enums shared by the whole model."""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING, NewType

PodKey = NewType("PodKey", str)      # "namespace/name"
JobKey = NewType("JobKey", str)      # "namespace/podgroup-name"
NodeName = NewType("NodeName", str)
QueueName = NewType("QueueName", str)

DEFAULT_QUEUE = QueueName("default")
# The scheduler of a pod that names none, as the API server defaults it.
DEFAULT_SCHEDULER = "default-scheduler"
SCHEDULER_NAME = "kaisched"


class TaskStatus(str, enum.Enum):
    PENDING = "Pending"
    PIPELINED = "Pipelined"
    ALLOCATED = "Allocated"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


# Statuses that count towards a gang being ready.
READY_STATUSES = frozenset({
    TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND,
    TaskStatus.RUNNING, TaskStatus.SUCCEEDED,
})
# What counts toward a gang of the upstream Workload API: a completed pod drops
# out of the count, as kube-scheduler forgets terminated pods.
LIVE_READY_STATUSES = READY_STATUSES - {TaskStatus.SUCCEEDED}
# Statuses whose pod occupies a node.
OCCUPYING_STATUSES = frozenset({
    TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND,
    TaskStatus.RUNNING, TaskStatus.RELEASING, TaskStatus.UNKNOWN,
})

# Statuses an eviction can remove: on a node, and not just placed this session.
EVICTABLE_STATUSES = frozenset({TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.BINDING})


class GangMode(str, enum.Enum):
    STRICT = "Strict"
    NON_STRICT = "NonStrict"


class GangRules(str, enum.Enum):
    """Whose rules a gang declaration follows where gang schedulers differ."""
    KAISCHED = "kaisched"   # Succeeded pods keep counting toward the minimum; a gang is as
                            # old as its oldest part (its PodGroup or its first pod)
    WORKLOAD = "workload"   # the upstream Workload API: completed pods drop out of the count,
                            # every pod names one schedulerName, and a gang queues from the
                            # moment its pods first make up its minimum


class Disruption(str, enum.Enum):
    """How a running gang may be taken apart by preempt and reclaim."""
    GANG = "gang"           # kaisched's rule: pods above the minimum one at a time, else whole
    SINGLE = "single"       # any pod on its own (upstream v1alpha2 `Pod`, v1beta1 `single`)
    ALL = "all"             # only all of it together (upstream `PodGroup`, `all`)


class PodGroupPhase(str, enum.Enum):
    PENDING = "Pending"
    INQUEUE = "Inqueue"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class Blocker(str, enum.Enum):
    """What class of thing keeps a gang pending (the pending-gangs metric's label)."""
    RESOURCES = "resources"     # no node has room (or room is being released)
    QUOTA = "quota"             # its queue's quota or limit
    GATES = "gates"             # held at the enqueue gate (minResources, queue capacity)
    VOLUMES = "volumes"         # its volumes or claims cannot be had where it could run
    PLACEMENT = "placement"     # placement rules: affinity, taints, spread, ports, selectors
    INVALID = "invalid"         # its PodGroup or pods are invalid
    CAPACITY = "capacity"       # waits for the capacity asked of a cluster autoscaler
    ERROR = "error"             # deciding it raised: a scheduler error, tried again next cycle


class Reason(str, enum.Enum):
    """Reasons written into conditions and Events."""
    UNSCHEDULABLE = "Unschedulable"
    # Waits for its queue's quota, limit or order, not for a node: cluster
    # autoscalers add nodes only for Unschedulable pods.
    WAITING_FOR_QUOTA = "WaitingForQuota"
    # Waits for the nodes a ProvisioningRequest asked of cluster-autoscaler (the
    # PodGroup's condition; its pods still say Unschedulable, as the autoscaler reads them).
    WAITING_FOR_CAPACITY = "WaitingForCapacity"
    SCHEDULED = "Scheduled"
    FAILED_SCHEDULING = "FailedScheduling"
    INVALID = "InvalidPodGroup"
    # Deciding it raised (a bug, or an object no check foresaw): it lost its
    # turn this cycle, every other job was scheduled (kube-scheduler's word).
    SCHEDULER_ERROR = "SchedulerError"
    TIMEOUT = "Timeout"
    PREEMPTED = "Preempted"
    EVICTED = "Evicted"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


def split_key(key: str) -> tuple[str, str]:
    """A "namespace/name" key's two parts."""
    namespace, _, name = key.partition("/")
    return namespace, name


class Keyed:
    """What is known by a "namespace/name" key (a task, a job, another
    scheduler's pod): its namespace and name, read off the key."""

    __slots__ = ()

    if TYPE_CHECKING:       # a field of each subclass (a named tuple's is read-only)
        @property
        def key(self) -> str: ...

    @property
    def namespace(self) -> str:
        return split_key(self.key)[0]

    @property
    def name(self) -> str:
        return split_key(self.key)[1]


def pod_key(namespace: str, name: str) -> PodKey:
    return PodKey(f"{namespace}/{name}")


def job_key(namespace: str, name: str) -> JobKey:
    return JobKey(f"{namespace}/{name}")
