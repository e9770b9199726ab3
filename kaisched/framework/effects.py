"""What a session decides, as values; binder.py turns them into API calls."""
from __future__ import annotations

from typing import Union

import attrs

from kaisched.api.job import Condition, PodGroupStatus
from kaisched.api.types import JobKey, NodeName, PodKey


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


Effect = Union[Bind, Evict, SetPodGroupStatus, SetPodCondition, RecordEvent]
