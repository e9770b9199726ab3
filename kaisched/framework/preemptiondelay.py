"""The preemption delay: a pending job evicts nobody until it has waited
preemptionDelay (the config's; its PodGroup's or KAI's annotation override
it) since it last became pending -- created, or evicted -- and again after
each eviction it causes, so a cluster autoscaler can add room first (KAI's
preemption delay). It gates preempt, reclaim and consolidation alike; plain
placement onto free room never waits. The clock is the PodGroup status's
pendingSince, so a restart keeps it.
"""
from __future__ import annotations

from typing import Callable

from kaisched.api.clock import clock_text, from_rfc3339
from kaisched.api.job import JobInfo
from kaisched.api.quantity import format_duration
from kaisched.api.types import JobKey, PodGroupPhase


class PreemptionDelay:
    def __init__(self, default: float, now: float, ready: Callable[[JobInfo], bool]) -> None:
        self.default = default
        self.now = now
        self.ready = ready
        self.rearmed: dict[JobKey, float] = {}   # jobs that evicted others this session
        self.delayed: dict[JobKey, float] = {}   # jobs it held back, until when

    def of(self, job: JobInfo) -> float:
        return job.spec.preemption_delay if job.spec.preemption_delay is not None else self.default

    def pending_since(self, job: JobInfo) -> float:
        """When the job last became pending: created, or evicted (it ran when
        its status was last written and does not now); moved on to now each
        time it evicts others."""
        if job.key in self.rearmed:
            return self.rearmed[job.key]
        if job.status.phase is PodGroupPhase.RUNNING and not self.ready(job):
            return self.now
        return from_rfc3339(job.status.pending_since) or job.creation

    def holds_back(self, job: JobInfo) -> str | None:
        """None when the job may evict now; else when it may (remembered in delayed)."""
        delay = self.of(job)
        if delay <= 0:
            return None
        until = self.pending_since(job) + delay
        if self.now >= until:
            return None
        self.delayed[job.key] = until
        return f"may preempt from {clock_text(until, self.now)} (preemptionDelay {format_duration(delay)})"

    def rearm(self, job: JobKey) -> None:
        self.rearmed[job] = self.now
