"""What one scheduling cycle came to: the effects its session decided, what it
placed and reserved, how the binder fared, and how long it took. The scheduler
returns it; metrics, the tools and the simulator read it."""
from __future__ import annotations

import attrs

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.types import Blocker, JobKey, NodeName, PodKey
from kaisched.framework.effects import Effect
from kaisched.framework.failures import JobError
from kaisched.framework.reservation import Reservation
from kaisched.runtime.binder import BindReport


@attrs.frozen
class CycleResult:
    effects: list[Effect]
    placed: dict[PodKey, NodeName]
    reservations: dict[PodKey, NodeName]
    report: BindReport
    snapshot_seconds: float
    session_seconds: float
    abandoned: bool = False     # stopped between actions: nothing after that was applied
    # The snapshot the session decided on (its jobs' queues, sizes, creation times and
    # PodGroup statuses as they were), and the class of what blocks each pending gang.
    cluster: ClusterInfo | None = None
    blockers: dict[JobKey, Blocker] = attrs.field(factory=dict)
    # Gangs that would have evicted others but for their preemption delay, until when;
    # running jobs the session found protected from eviction (min-runtime), until when.
    delayed: dict[JobKey, float] = attrs.field(factory=dict)
    protected: dict[JobKey, float] = attrs.field(factory=dict)
    # The snapshot's and the session's CPU time (the process's, every thread).
    snapshot_cpu_seconds: float = 0.0
    session_cpu_seconds: float = 0.0
    # Jobs whose decision raised: each lost its turn, every other job was decided.
    errors: tuple[JobError, ...] = ()
    # The starvation guard's reservations still held at the end (each with its
    # start: when its room is sure to be free; None: not known); and what of
    # their room nothing used then, per resource (nvidia.com/gpu: GPUs).
    reserved: dict[JobKey, Reservation] = attrs.field(factory=dict)
    held_idle: dict[str, float] = attrs.field(factory=dict)
