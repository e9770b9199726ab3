"""Cluster-wide sums over jobs, kept by difference: what each queue holds and
wants, how many of its jobs run or wait, and which jobs are unsettled.

A busy cluster has a hundred thousand jobs, and nearly all of them just run:
nothing of them waits, their gang is whole, nothing about them is wrong. A
session need not look at those one by one. The cache keeps this ledger up to
date as jobs change (only a changed job is summed again); a cluster built
any other way sums it once, on first use.
"""
from __future__ import annotations

from typing import Any, Iterable

import attrs

from kaisched.api.job import JobInfo
from kaisched.api.resource import Resource
from kaisched.api.types import EVICTABLE_STATUSES, OCCUPYING_STATUSES, JobKey, QueueName, TaskStatus

# What counts as a queue's use: on a node, or about to be (not on its way out).
HOLDING = (OCCUPYING_STATUSES - {TaskStatus.UNKNOWN, TaskStatus.RELEASING}) | {TaskStatus.PIPELINED}
_ALLOCATED, _BINDING, _BOUND, _RUNNING, _SUCCEEDED, _PENDING, _PIPELINED = (
    TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING,
    TaskStatus.SUCCEEDED, TaskStatus.PENDING, TaskStatus.PIPELINED)

# queue, what it is charged (TaskInfo.charge), not preemptible
Holding = tuple[QueueName, Resource, bool]
Wanted = tuple[QueueName, Resource]


def job_state(job: JobInfo) -> str | None:
    """running (its gang is met and some pod runs or binds), pending (it waits
    for room), or None (done, or nothing of it left to place). Read from the
    job's counts by status: this runs for every job the cycle looks at."""
    get = job.totals().get
    active = get(_RUNNING, 0) + get(_BOUND, 0) + get(_ALLOCATED, 0) + get(_BINDING, 0)
    if active and active + get(_SUCCEEDED, 0) >= job.spec.min_member:
        return "running"
    return "pending" if get(_PENDING, 0) or get(_PIPELINED, 0) else None


def unsettled(job: JobInfo) -> bool:
    """Something of the job waits, its minimum does not hold, or it is
    unusable: every cycle looks at it (a settled job only when it changes)."""
    return bool(job.problem or job.count_of(_PENDING) or job.count_of(_PIPELINED)
                or not job.minimum_met())


@attrs.frozen(slots=True)
class Entry:
    """One job's part of the sums."""

    queue: QueueName
    state: str | None
    unsettled: bool
    holding: tuple[tuple[Holding, int], ...]
    wanted: tuple[tuple[Wanted, int], ...]
    priority: int = 0
    evictable: bool = False     # some task of it is on a node, in a status eviction removes

    @classmethod
    def of(cls, job: JobInfo) -> Entry:
        pinned = not job.spec.preemptible
        holding: dict[Holding, int] = {}
        wanted: dict[Wanted, int] = {}
        evictable = False
        queue, usable = job.queue, job.problem is None
        for task in job.tasks.values():
            status = task.status
            if status in HOLDING:
                key = (queue, task.charge, pinned)
                holding[key] = holding.get(key, 0) + 1
            elif status is TaskStatus.PENDING and usable:
                want = (queue, task.charge)
                wanted[want] = wanted.get(want, 0) + 1
            if status in EVICTABLE_STATUSES and task.node_name:
                evictable = True
        return cls(job.queue, job_state(job), unsettled(job), tuple(holding.items()),
                   tuple(wanted.items()), job.priority, evictable)

    @classmethod
    def running(cls, job: JobInfo, charges: dict[Resource, int]) -> Entry:
        """A job whose pods all run (or are bound), its minimum met, nothing
        wrong with it, counted rather than walked: charges is what its pods
        are charged, each with how many pods are (kaisched.runtime.headstart)."""
        pinned = not job.spec.preemptible
        return cls(job.queue, job_state(job), False,
                   tuple(((job.queue, charge, pinned), n) for charge, n in charges.items()),
                   (), job.priority, bool(charges))


class Ledger:
    def __init__(self) -> None:
        self.entries: dict[JobKey, Entry] = {}
        self.holding: dict[Holding, int] = {}
        self.wanted: dict[Wanted, int] = {}
        self.states: dict[tuple[QueueName, str | None], int] = {}
        self.unsettled: set[JobKey] = set()
        # The jobs with tasks eviction could remove, per queue and job priority:
        # where preempt and reclaim look for victims, rather than at every task.
        self.evictable: dict[QueueName, dict[int, set[JobKey]]] = {}

    @classmethod
    def of(cls, jobs: Iterable[JobInfo]) -> Ledger:
        ledger = cls()
        for job in jobs:
            ledger.put(job.key, job)
        return ledger

    def put(self, key: JobKey, job: JobInfo | None, entry: Entry | None = None) -> None:
        """The job as it is now (None: gone): its old part out, its new part in
        (entry: that part, when the job's tasks are not all made)."""
        old = self.entries.pop(key, None)
        if old is not None:
            self._add(old, -1)
            if old.evictable:
                self._unindex(key, old)
        if job is None:
            self.unsettled.discard(key)
            return
        new = self.entries[key] = entry if entry is not None else Entry.of(job)
        self._add(new, 1)
        if new.evictable:
            self.evictable.setdefault(new.queue, {}).setdefault(new.priority, set()).add(key)
        if new.unsettled:
            self.unsettled.add(key)
        else:
            self.unsettled.discard(key)

    def _add(self, entry: Entry, sign: int) -> None:
        _bump(self.states, (entry.queue, entry.state), sign)
        for hkey, count in entry.holding:
            _bump(self.holding, hkey, sign * count)
        for wkey, count in entry.wanted:
            _bump(self.wanted, wkey, sign * count)

    def _unindex(self, key: JobKey, entry: Entry) -> None:
        by_priority = self.evictable[entry.queue]
        jobs = by_priority[entry.priority]
        jobs.discard(key)
        if not jobs:
            del by_priority[entry.priority]
            if not by_priority:
                del self.evictable[entry.queue]

    def evictable_jobs(self, queue: QueueName, below: int | None = None) -> list[JobKey]:
        """The jobs of the queue that had tasks eviction could remove when the
        ledger was last told of them (of a priority below `below`, if given),
        by key. A session's moves only make tasks less evictable (what it
        placed is not; what it evicted is releasing): the caller reads the
        tasks as they are now."""
        by_priority = self.evictable.get(queue, {})
        return sorted(key for priority, jobs in by_priority.items()
                      if below is None or priority < below for key in jobs)

    def sums(self) -> tuple[dict[Any, int], dict[Any, int], dict[Any, int], set[JobKey],
                            dict[QueueName, dict[int, set[JobKey]]]]:
        """What two ledgers must agree on."""
        return self.holding, self.wanted, self.states, self.unsettled, self.evictable


def _bump(counts: dict[Any, int], key: object, by: int) -> None:
    value = counts.get(key, 0) + by
    if value:
        counts[key] = value
    else:
        counts.pop(key, None)
