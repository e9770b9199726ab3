"""What a session decides, as values; binder.py turns them into API calls."""
from __future__ import annotations

from typing import Union

import attrs

from kaisched.api.job import Condition, PodGroupStatus
from kaisched.api.queue import QueueStatus
from kaisched.api.types import JobKey, NodeName, PodKey, QueueName


@attrs.frozen(slots=True)
class Bind:
    pod: PodKey
    uid: str
    node: NodeName
    job: JobKey


@attrs.frozen(slots=True)
class Evict:
    pod: PodKey
    uid: str
    node: NodeName | None
    job: JobKey
    reason: str                 # Preempted | Evicted
    message: str                # names the preemptor, in words


@attrs.frozen(slots=True)
class SetPodGroupStatus:
    job: JobKey
    status: PodGroupStatus


@attrs.frozen(slots=True)
class SetQueueStatus:
    queue: QueueName
    status: QueueStatus
    previous: QueueStatus | None    # what the object holds: amounts it no longer has are cleared


@attrs.frozen(slots=True)
class SetPodCondition:
    pod: PodKey
    condition: Condition


@attrs.frozen(slots=True)
class RecordEvent:
    kind: str                   # Pod | PodGroup
    key: str                    # namespace/name
    type: str                   # Normal | Warning
    reason: str
    message: str


Effect = Union[Bind, Evict, SetPodGroupStatus, SetQueueStatus, SetPodCondition, RecordEvent]
