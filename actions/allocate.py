"""allocate: place gangs whole, queue by queue, fairest first.

Queues come in proportion order (one whose head job would take it over its
quota after one that would not), jobs in a queue by priority, not-ready
first, creation and name. A job's minimum is placed under one statement and
committed only when the gang is ready; a job that could start once releasing
pods are gone keeps its placements as reservations for this session; anything
else is undone. Tasks beyond the minimum go one at a time, the job re-queued,
so other jobs' minimums come first. The gangs of a gangGroup share one
statement: every one reaches its minimum, or none is placed. Each job is
placed under its own guard (Session.decide): one whose placement raises
loses its turn, the others are placed as if it were not there.
"""
from __future__ import annotations

import functools
import heapq
import itertools
from typing import Any, Iterable, Iterator

from actions.common import starvation
from actions.common.domainchoice import DomainChoice
from actions.common.placement import (
    group_members,
    need_of,
    place_group,
    place_job,
    placeable,
    queue_of,
)
from kaisched.api.job import JobInfo
from kaisched.api.resource import Resource
from kaisched.api.types import JobKey, QueueName
from kaisched.framework import Session


class AllocateAction:
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        seq = itertools.count()
        domains = DomainChoice(ssn)
        entries: dict[QueueName, list[tuple[Any, ...]]] = {}
        active = list(ssn.cluster.active_jobs())
        for job, key in zip(active, ssn.ask_each(active, functools.partial(_entry_key, ssn)), strict=True):
            if key is not None:
                entries.setdefault(job.queue, []).append((key, next(seq), job))
        jobs = {name: _Jobs(found) for name, found in entries.items()}
        guards = starvation.guard(ssn, heads(ssn, jobs.values()))
        head_key = ssn.queue_head_order_key
        several = len(jobs) > 1         # one queue needs no order

        def queue_key(name: QueueName) -> tuple[Any, ...]:
            queue = queue_of(ssn, name)
            if not several:
                return ((), ssn.queue_order_key(queue))
            job = jobs[name].first()[2]
            # A head whose need raised is asked for nothing: it is popped, and passed over.
            need = ssn.decide(job, need_of, ssn, job)
            return (head_key(queue, need if need is not None else Resource()), ssn.queue_order_key(queue))

        queues = [(queue_key(q), q) for q in jobs]
        heapq.heapify(queues)
        grouped: set[JobKey] = set()      # gang-group members already tried together
        while queues:
            _, name = heapq.heappop(queues)
            heap = jobs[name]
            _, _, job = heap.pop()
            again = ssn.decide(job, _place, ssn, domains, job, grouped)
            if again is not None:
                heap.push((again, next(seq), job))
            if heap:        # one queue alone needs no key: nothing to order it against
                heapq.heappush(queues, (queue_key(name) if several else (), name))
        starvation.report(ssn, guards)


class _Jobs:
    """A queue's jobs to place, least entry first: sorted once, and those
    put back (a job with more to place) in a heap beside. Pops in the order
    one heap of them all would (entries are unique: a sequence number
    breaks ties), without a heap's comparisons on every pop of thousands."""

    __slots__ = ("entries", "cursor", "back")

    def __init__(self, entries: list[tuple[Any, ...]]) -> None:
        entries.sort()
        self.entries = entries
        self.cursor = 0
        self.back: list[tuple[Any, ...]] = []

    def __bool__(self) -> bool:
        return self.cursor < len(self.entries) or bool(self.back)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return itertools.chain(itertools.islice(self.entries, self.cursor, None), self.back)

    def _back_first(self) -> bool:
        """The least entry is one put back (not the next of those sorted)."""
        return bool(self.back) and (self.cursor == len(self.entries)
                                    or self.back[0] < self.entries[self.cursor])

    def first(self) -> tuple[Any, ...]:
        return self.back[0] if self._back_first() else self.entries[self.cursor]

    def pop(self) -> tuple[Any, ...]:
        if self._back_first():
            return heapq.heappop(self.back)
        self.cursor += 1
        return self.entries[self.cursor - 1]

    def push(self, entry: tuple[Any, ...]) -> None:
        heapq.heappush(self.back, entry)


def _entry_key(ssn: Session, job: JobInfo) -> tuple[Any, ...] | None:
    """The job's order key when allocate has something to place for it."""
    if job.key not in ssn.holds.held and (       # a NonStrict hold must be finished or kept either way
            not placeable(ssn, job) or all(t.best_effort for t in ssn.pending(job))):
        return None     # nothing to place, or all best-effort: backfill's
    return ssn.job_order_key(job)


def _place(ssn: Session, domains: DomainChoice, job: JobInfo, grouped: set[JobKey]
           ) -> tuple[Any, ...] | None:
    """Place the job's minimum (with its gang group's, once), or one more
    task; the job's key when it has more to place after this."""
    again = None
    if job.spec.gang_group and not ssn.job_ready(job):
        if job.key not in grouped:
            members = group_members(ssn, job)
            grouped.update(m.key for m in members)
            place_group(ssn, domains, members)
    elif place_job(ssn, domains, job) and ssn.pending(job):
        again = ssn.job_order_key(job)
    if job.key in ssn.starving.rooms and ssn.job_pipelined(job):
        ssn.starving.release(job.key)      # placed, or waiting only for releasing room
    return again


def heads(ssn: Session, queues: Iterable[Iterable[tuple[Any, ...]]]) -> list[JobInfo]:
    """The first gang of every queue that still waits for its minimum."""
    out = []
    for heap in queues:
        # (A job whose readiness raised is no head: it is not placed this session.)
        entries = list(heap)
        ready = ssn.ask_each([entry[2] for entry in entries], ssn.job_ready)
        waiting = [entry for entry, r in zip(entries, ready, strict=True) if r is False]
        if waiting:
            out.append(min(waiting, key=lambda entry: entry[:2])[2])
    return out
