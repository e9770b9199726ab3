"""allocate (DESIGN 6.1): place gangs whole, queue by queue, fairest first.

Queues come in proportion order, jobs in a queue by priority, not-ready
first, creation and name. A job's minimum is placed under one statement and
committed only when the gang is ready; a job that could start once releasing
pods are gone keeps its placements as reservations for this session; anything
else is undone. Tasks beyond the minimum go one at a time, the job re-queued,
so other jobs' minimums come first.
"""
from __future__ import annotations

import heapq
import itertools

from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import QueueName, TaskStatus
from kaisched.framework import Session


class AllocateAction:
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        seq = itertools.count()
        jobs: dict[QueueName, list] = {}
        for job in ssn.cluster.jobs.values():
            if not placeable(ssn, job) or all(t.best_effort for t in pending(ssn, job)):
                continue     # nothing to place, or all best-effort: backfill's
            jobs.setdefault(job.queue, []).append((ssn.job_order_key(job), next(seq), job))
        for heap in jobs.values():
            heapq.heapify(heap)
        queues = [(ssn.queue_order_key(ssn.cluster.queues[q]), q) for q in jobs]
        heapq.heapify(queues)
        while queues:
            _, name = heapq.heappop(queues)
            heap = jobs[name]
            _, _, job = heapq.heappop(heap)
            if place_job(ssn, job) and pending(ssn, job):
                heapq.heappush(heap, (ssn.job_order_key(job), next(seq), job))
            if heap:
                heapq.heappush(queues, (ssn.queue_order_key(ssn.cluster.queues[name]), name))


def pending(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    return [t for t in job.tasks.values()
            if t.status is TaskStatus.PENDING and t.key not in ssn.reservations]


def placeable(ssn: Session, job: JobInfo) -> bool:
    """The job has pending tasks and is valid; an invalid one is told why."""
    if not any(t.status is TaskStatus.PENDING for t in job.tasks.values()):
        return False
    reason = ssn.job_invalid(job)
    if reason:
        ssn.record_unschedulable(job, reason)
        return False
    return True


def place_job(ssn: Session, job: JobInfo, idle_only: bool = False,
              tasks: list[TaskInfo] | None = None) -> bool:
    """Place the job's minimum (or, once ready, one more task); True if committed."""
    was_ready = ssn.job_ready(job)
    todo = sorted(tasks if tasks is not None else pending(ssn, job), key=ssn.task_order_key)
    stmt = ssn.statement()
    failure = None
    failed_classes: set = set()
    placed = 0
    for task in todo:
        if (task.resreq, task.placement) in failed_classes:
            continue     # its twin found no node: neither will it
        refusal = ssn.allocatable(job, task)
        choice = None if refusal else ssn.select_node(task, idle_only)
        if choice is None:
            failed_classes.add((task.resreq, task.placement))
            failure = failure or refusal or f"pod {task.key}: {ssn.explain_task(task)}"
            continue
        if choice.pipelined:
            stmt.pipeline(task, choice.node)
        else:
            stmt.allocate(task, choice.node)
        placed += 1
        if ssn.job_ready(job):
            break
    if ssn.job_ready(job) and placed:
        stmt.commit()
        return True
    if not idle_only and placed and ssn.job_pipelined(job):
        stmt.reserve()
        ssn.record_unschedulable(job, (
            f"{placed}/{len(job.tasks)} tasks pipelined, minMember {job.min_member}; "
            f"waiting for pods being deleted to release their room"))
        return False
    stmt.discard()
    if not was_ready:
        ready = job.ready_count()
        ssn.record_unschedulable(job, (
            f"{ready + placed}/{len(job.tasks)} tasks placed, minMember {job.min_member}; "
            f"{failure or 'the gang is not complete'}"))
    return False
