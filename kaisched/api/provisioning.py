"""Capacity asked of a cluster autoscaler for a gang: cluster-autoscaler's
ProvisioningRequest (autoscaling.x-k8s.io/v1), as the scheduler reads the
ones it made.

A request is made for one gang, owned by its PodGroup, and asks in one go
for the pods of the gang's minimum that today's free room cannot hold (one
pod set per pod shape). The autoscaler answers with conditions; the request
is in the state of the last of them that holds.
"""
from __future__ import annotations

import enum

import attrs

from kaisched.api.types import JobKey

# Both must be on a pod that consumes a request: the autoscaler then does
# not scale up for it again, pod by pod.
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
# Which try a request is (1 for the first): kept on the request, so that a
# restarted scheduler counts on from it.
ATTEMPT_ANNOTATION = "kaisched.io/provisioning-attempt"
ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
MAX_POD_SETS = 32           # the API's limit


class CapacityState(str, enum.Enum):
    """Where a request stands, from the autoscaler's conditions."""
    WAITING = "Waiting"                 # no answer yet
    ACCEPTED = "Accepted"               # taken up, not provisioned yet
    PROVISIONED = "Provisioned"         # the capacity is there, booked for the gang
    FAILED = "Failed"                   # it could not be had
    BOOKING_EXPIRED = "BookingExpired"  # provisioned, but not used in time
    CAPACITY_REVOKED = "CapacityRevoked"    # provisioned, then taken back

    @property
    def over(self) -> bool:
        """The request will give nothing more: ask again, or give up."""
        return self in (CapacityState.FAILED, CapacityState.BOOKING_EXPIRED,
                        CapacityState.CAPACITY_REVOKED)


@attrs.frozen(slots=True)
class PodSet:
    """Pods of one shape asked for: the PodTemplate made from one of them."""
    template: str
    count: int


@attrs.frozen(slots=True)
class CapacityRequest:
    namespace: str
    name: str
    job: JobKey                         # the gang whose PodGroup owns it
    class_name: str
    pod_sets: tuple[PodSet, ...]
    state: CapacityState
    since: float                        # when it got to its state (made, for WAITING)
    message: str                        # the autoscaler's, for that state
    attempt: int                        # 1 for the first request of the gang
    creation: float

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def pods(self) -> int:
        return sum(s.count for s in self.pod_sets)
