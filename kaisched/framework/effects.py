"""What a session decides, as values; binder.py turns them into API calls.
(A CarriedGang is the one the scheduler keeps instead: room a NonStrict gang holds
into the next session.)"""
from __future__ import annotations

import enum
from typing import Union

import attrs

from kaisched.api.constraints import Toleration
from kaisched.api.dradevices import Allocation, Consumer
from kaisched.api.job import Condition, PodGroupStatus
from kaisched.api.queue import QueueStatus, UsageRecord
from kaisched.api.resource import Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, QueueName, Reason


@attrs.frozen(slots=True)
class CarriedGang:
    """A NonStrict gang's placements carried to the next session (kaisched.framework.holds)."""

    tasks: tuple[tuple[PodKey, NodeName], ...]
    since: float


@attrs.frozen(slots=True)
class CarriedMove:
    """Room carried from the session consolidation planned in to the next
    ones: on each node, what the pods it moved (made again by their
    controller) or the job it made room for will take there."""

    slots: tuple[tuple[NodeName, Resource], ...]
    since: float
    settled: tuple[PodKey, ...] = ()    # its pods on those nodes already: they take no slot
    awaited: tuple[PodKey, ...] = ()    # the moved pods, until they are gone and made again
    # The moved pods that share GPUs, as the plan placed the pods made again
    # (their successors: node and GPU groups), so that each takes the very
    # part of a GPU planned for it, and no other pod takes that part meanwhile.
    sharers: tuple[TaskInfo, ...] = ()


@attrs.frozen(slots=True)
class Bind:
    pod: PodKey
    uid: str
    node: NodeName
    job: JobKey


class Cause(str, enum.Enum):
    """Why a pod is evicted."""
    PREEMPT = "preempt"         # for a higher-priority job of the same queue
    RECLAIM = "reclaim"         # for a job of another queue, below its fair share
    STALE_GANG = "stale-gang"   # its gang fell below its minimum for too long
    CONSOLIDATION = "consolidation"     # moved to another node, to make room for a pending job


@attrs.frozen(slots=True)
class Preemptor:
    """The pod an eviction makes room for."""
    pod: PodKey
    job: JobKey
    priority: int
    queue: QueueName


@attrs.frozen(slots=True)
class Evict:
    pod: PodKey
    uid: str
    node: NodeName | None
    job: JobKey
    cause: Cause
    by: Preemptor | None = None     # set for preempt, reclaim and consolidation
    detail: str = ""                # the stale gang's own account
    moved_to: NodeName | None = None    # consolidation: where the pod is placed again

    @property
    def reason(self) -> str:
        """The Event reason: Preempted for a preemptor, Evicted otherwise (a
        pod moved by consolidation is not preempted: it runs again elsewhere)."""
        if self.by is not None and self.cause is not Cause.CONSOLIDATION:
            return Reason.PREEMPTED.value
        return Reason.EVICTED.value

    @property
    def message(self) -> str:
        if self.by is None:
            return self.detail
        if self.cause is Cause.CONSOLIDATION:
            return (f"moved by consolidation to make room for {self.by.job} "
                    f"(queue {self.by.queue}); its pod is placed again on node {self.moved_to}")
        verb = "reclaimed" if self.cause is Cause.RECLAIM else "preempted"
        return (f"{verb} by pod {self.by.pod} of {self.by.job} "
                f"(priority {self.by.priority}, queue {self.by.queue})")


@attrs.frozen(slots=True)
class SetPodGroupStatus:
    job: JobKey
    status: PodGroupStatus
    # A PodGroup of another API (the upstream Workload API's): its apiVersion,
    # whose status subresource takes the conditions. Empty: kaisched's own.
    api_version: str = ""


@attrs.frozen(slots=True)
class SetQueueStatus:
    queue: QueueName
    status: QueueStatus
    previous: QueueStatus | None    # what the object holds: amounts it no longer has are cleared


@attrs.frozen(slots=True)
class SetQueueUsage:
    """A Queue's status.usage: what it used over the window (the buckets the
    leader keeps, when usage is built in) and what that comes to. Written by
    the runtime at most once a minute per queue, not by a session."""
    queue: QueueName
    usage: UsageRecord
    previous: UsageRecord | None    # what the object holds: resources it no longer has are cleared


@attrs.frozen(slots=True)
class SetPodCondition:
    pod: PodKey
    condition: Condition


@attrs.frozen(slots=True)
class RecordEvent:
    kind: str                   # Pod | PodGroup | Node
    key: str                    # namespace/name
    type: str                   # Normal | Warning
    reason: str
    message: str


@attrs.frozen(slots=True)
class SelectClaimNode:
    """Annotate a WaitForFirstConsumer claim with the node its first consumer
    goes to (volume.kubernetes.io/selected-node): its provisioner makes the
    volume there. Written before the pod's bind, which waits for the claim."""
    claim: str                  # namespace/name
    node: NodeName
    pod: PodKey
    job: JobKey


@attrs.frozen(slots=True)
class PrebindVolume:
    """Set a static volume's spec.claimRef to the claim it was picked for (the
    smallest that fits where the pod goes); the PV controller then binds the
    claim to it. Refused if another claim took the volume meanwhile."""
    volume: str
    claim: str                  # namespace/name
    claim_uid: str
    pod: PodKey
    job: JobKey


VOLUME_EFFECTS = (SelectClaimNode, PrebindVolume)


@attrs.frozen(slots=True)
class Reservation:
    """A reservation pod: it asks for one whole GPU on the node, which holds
    the shared device from the kubelet's view (its sharers ask for none)."""
    pod: PodKey                 # namespace/name
    node: NodeName
    group: str                  # the shared device (KAI's runai-gpu-group)
    tolerations: tuple[Toleration, ...]     # what its sharers tolerate
    image: str


@attrs.frozen(slots=True)
class ShareGpu:
    """Before a fractional pod's bind: a reservation pod made for each of its
    devices that has none, then the devices recorded on the pod (KAI's
    runai-gpu-group label, received-resource-type annotation)."""
    pod: PodKey
    job: JobKey
    node: NodeName
    groups: tuple[str, ...]
    previous: tuple[str, ...] = ()          # devices its labels named before: unlabelled
    reserve: tuple[Reservation, ...] = ()


@attrs.frozen(slots=True)
class ReserveGpu:
    """A reservation pod made again: its device's sharers run, and none holds it."""
    reservation: Reservation


@attrs.frozen(slots=True)
class ReleaseGpu:
    """A reservation pod whose device no pod shares any more: deleted (one of
    KAI's, through the eviction API)."""
    pod: PodKey
    node: NodeName
    group: str
    kai: bool = False


GPU_EFFECTS = (ShareGpu, ReserveGpu, ReleaseGpu)


@attrs.frozen(slots=True)
class Prebind:
    """What a plugin needs done for an allocated task before it may be bound:
    writes that go before the binds, and, when the gang must wait for them
    (volumes being provisioned), why. Nothing of it is held in the session:
    what it decided goes with the placement's own undo."""

    effects: tuple[SelectClaimNode | PrebindVolume | ShareGpu, ...]
    job: JobKey
    waiting: str | None = None


@attrs.frozen(slots=True)
class SetClaimStatus:
    """A ResourceClaim's allocation and reservations as the scheduler decided
    them. With pod set, written before that pod's bind."""

    claim: str                      # namespace/name
    uid: str
    api_version: str                # as the cluster serves it
    allocation: Allocation | None
    reserved_for: tuple[Consumer, ...]
    pod: PodKey | None = None


@attrs.frozen(slots=True)
class AskedPodSet:
    """Pods of one shape asked for: the PodTemplate is made from the pod
    named (one of them), under the name given."""
    template: str
    count: int
    pod: PodKey


@attrs.frozen(slots=True)
class AskCapacity:
    """A ProvisioningRequest for a gang, owned by its PodGroup, with a
    PodTemplate per pod set; the gang's pods get the consume annotations."""
    job: JobKey
    name: str                       # the request's, in the job's namespace
    class_name: str
    attempt: int
    pod_sets: tuple[AskedPodSet, ...]
    pods: tuple[PodKey, ...]        # the gang's pods that consume it


@attrs.frozen(slots=True)
class WithdrawCapacity:
    """The request is no longer wanted (placed otherwise, answered, asked
    anew): deleted, with its PodTemplates."""
    request: str                    # namespace/name
    templates: tuple[str, ...]


Effect = Union[Bind, Evict, SetPodGroupStatus, SetQueueStatus, SetQueueUsage, SetPodCondition,
               RecordEvent, SelectClaimNode, PrebindVolume, SetClaimStatus, ShareGpu, ReserveGpu,
               ReleaseGpu, AskCapacity, WithdrawCapacity]
