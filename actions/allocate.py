"""allocate: place gangs whole, queue by queue, fairest first.

Queues come in proportion order (one whose head job would take it over its
quota after one that would not), jobs in a queue by priority, not-ready
first, creation and name. A job's minimum is placed under one statement and
committed only when the gang is ready; a job that could start once releasing
pods are gone keeps its placements as reservations for this session; anything
else is undone. Tasks beyond the minimum go one at a time, the job re-queued,
so other jobs' minimums come first. The gangs of a gangGroup share one
statement: every one reaches its minimum, or none is placed.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Iterable

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
from kaisched.api.types import JobKey, QueueName
from kaisched.framework import Session


class AllocateAction:
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        seq = itertools.count()
        domains = DomainChoice(ssn)
        jobs: dict[QueueName, list[tuple[Any, ...]]] = {}
        for job in ssn.cluster.active_jobs():
            if job.key in ssn.held:
                pass         # a NonStrict hold: it must be finished or kept either way
            elif not placeable(ssn, job) or all(t.best_effort for t in ssn.pending(job)):
                continue     # nothing to place, or all best-effort: backfill's
            jobs.setdefault(job.queue, []).append((ssn.job_order_key(job), next(seq), job))
        for heap in jobs.values():
            heapq.heapify(heap)
        guards = starvation.guard(ssn, heads(ssn, jobs.values()))
        head_key = ssn.queue_head_order_key
        several = len(jobs) > 1         # one queue needs no order

        def queue_key(name: QueueName) -> tuple[Any, ...]:
            queue = queue_of(ssn, name)
            head = head_key(queue, need_of(ssn, jobs[name][0][2])) if several else ()
            return (head, ssn.queue_order_key(queue))

        queues = [(queue_key(q), q) for q in jobs]
        heapq.heapify(queues)
        grouped: set[JobKey] = set()      # gang-group members already tried together
        while queues:
            _, name = heapq.heappop(queues)
            heap = jobs[name]
            _, _, job = heapq.heappop(heap)
            if job.spec.gang_group and not ssn.job_ready(job):
                if job.key not in grouped:
                    members = group_members(ssn, job)
                    grouped.update(m.key for m in members)
                    place_group(ssn, domains, members)
            elif place_job(ssn, domains, job) and ssn.pending(job):
                heapq.heappush(heap, (ssn.job_order_key(job), next(seq), job))
            if job.key in ssn.reserved_for and ssn.job_pipelined(job):
                ssn.unreserve(job.key)      # placed, or waiting only for releasing room
            if heap:        # one queue alone needs no key: nothing to order it against
                heapq.heappush(queues, (queue_key(name) if several else (), name))
        starvation.report(ssn, guards)


def heads(ssn: Session, queues: Iterable[list[tuple[Any, ...]]]) -> list[JobInfo]:
    """The first gang of every queue that still waits for its minimum."""
    out = []
    for heap in queues:
        waiting = [entry for entry in heap if not ssn.job_ready(entry[2])]
        if waiting:
            out.append(min(waiting, key=lambda entry: entry[:2])[2])
    return out
