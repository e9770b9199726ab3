"""Protection: why a running job may not be a victim now, and until when.

A job younger than its min-runtime is not evicted for another job (the
minruntime plugin answers, per kind of eviction: in-queue preemption or a
reclaim by another queue). Preempt and reclaim meet it in the session's victim
filter; an action that moves jobs (consolidation) asks it for both kinds.
Protection comes from the plugin, so it holds only where the plugin is
configured, and whatever tier it is in.
"""
from __future__ import annotations

from typing import Callable, Iterable

import attrs

from kaisched.api.clock import clock_text
from kaisched.api.job import JobInfo
from kaisched.api.quantity import format_duration
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, PodKey
from kaisched.framework.effects import Cause


@attrs.frozen(slots=True)
class Protection:
    until: float        # a victim again from this moment
    minimum: float      # the min-runtime that protects it, in seconds
    kind: Cause         # the eviction it is protected from (preempt or reclaim)

    def describe(self, now: float) -> str:
        """ "protected until 10:42 (min-runtime 10m)" """
        return f"protected until {clock_text(self.until, now)} (min-runtime {format_duration(self.minimum)})"


Answer = Callable[[JobInfo, Cause, "JobInfo | None"], "Protection | None"]


class Protections:
    """A session's protections: the plugins' answers, once per job, kind and
    preemptor's queue (as the job was when the session opened)."""

    def __init__(self, answers: Iterable[Answer], jobs: dict[JobKey, JobInfo], now: float) -> None:
        self.answers = list(answers)
        self.jobs = jobs
        self.now = now
        self._found: dict[tuple[JobKey, Cause, str | None], Protection | None] = {}
        self.protected: dict[JobKey, float] = {}    # jobs found protected, until when (the latest)

    def __bool__(self) -> bool:
        return bool(self.answers)

    def of(self, job: JobInfo, kind: Cause, by: JobInfo | None = None) -> Protection | None:
        """The latest protection any plugin gives the job from this kind of
        eviction for by; None when it may be a victim now."""
        key = (job.key, kind, by.queue if by is not None else None)
        if key in self._found:
            return self._found[key]
        found: Protection | None = None
        for answer in self.answers:
            got = answer(job, kind, by)
            if got is not None and got.until > self.now and (found is None or got.until > found.until):
                found = got
        self._found[key] = found
        if found is not None and found.until > self.protected.get(job.key, 0.0):
            self.protected[job.key] = found.until
        return found

    def unprotected(self, kind: Cause, by: JobInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """The candidates, less those of protected jobs but for each such job's
        pods beyond its minimum (the newest: KAI's elastic rule, a protected
        job is never taken below its minimum). The candidates are what would
        go together: a job's surplus is counted against all of them."""
        if not candidates or not self.answers:
            return candidates
        jobs = self.jobs
        held: dict[JobKey, list[TaskInfo]] = {}
        for c in candidates:
            if c.job in held or self.of(jobs[c.job], kind, by) is not None:
                held.setdefault(c.job, []).append(c)
        if not held:
            return candidates
        kept: set[PodKey] = set()
        for key, tasks in held.items():
            job = jobs[key]
            surplus = max(job.ready_count() - job.min_member, 0)
            tasks.sort(key=lambda t: (-t.creation, t.key))
            kept.update(t.key for t in tasks[:surplus])
        return [c for c in candidates if c.job not in held or c.key in kept]
