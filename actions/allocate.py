"""allocate: place gangs whole, queue by queue, fairest first.

Queues come in proportion order, jobs in a queue by priority, not-ready
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
from typing import Iterable

import attrs
import numpy as np

from actions.common.topology import place_in_topology
from actions.common import starvation
from kaisched.api.job import JobInfo
from kaisched.api.queue import QueueInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, Blocker, GangMode, JobKey, QueueName, TaskStatus
from kaisched.framework import Session, Statement
from kaisched.framework.holds import hold_of

_HELD = READY_STATUSES | {TaskStatus.PIPELINED}     # a NonStrict hold, and what runs


class AllocateAction:
    name = "allocate"

    def execute(self, ssn: Session) -> None:
        seq = itertools.count()
        jobs: dict[QueueName, list] = {}
        for job in ssn.cluster.active_jobs():
            if job.key in ssn.held:
                pass         # a NonStrict hold: it must be finished or kept either way
            elif not placeable(ssn, job) or all(t.best_effort for t in ssn.pending(job)):
                continue     # nothing to place, or all best-effort: backfill's
            jobs.setdefault(job.queue, []).append((ssn.job_order_key(job), next(seq), job))
        for heap in jobs.values():
            heapq.heapify(heap)
        guards = starvation.guard(ssn, heads(ssn, jobs.values()))
        queues = [(ssn.queue_order_key(queue_of(ssn, q)), q) for q in jobs]
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
                    place_group(ssn, members)
            elif place_job(ssn, job) and ssn.pending(job):
                heapq.heappush(heap, (ssn.job_order_key(job), next(seq), job))
            if job.key in ssn.reserved_for and ssn.job_pipelined(job):
                ssn.unreserve(job.key)      # placed, or waiting only for releasing room
            if heap:
                heapq.heappush(queues, (ssn.queue_order_key(queue_of(ssn, name)), name))
        starvation.report(ssn, guards)


def heads(ssn: Session, queues: Iterable[list]) -> list[JobInfo]:
    """The first gang of every queue that still waits for its minimum."""
    out = []
    for heap in queues:
        waiting = [entry for entry in heap if not ssn.job_ready(entry[2])]
        if waiting:
            out.append(min(waiting, key=lambda entry: entry[:2])[2])
    return out


def queue_of(ssn: Session, name: QueueName) -> QueueInfo:
    """The queue, or a plain one when no plugin checked that it exists."""
    return ssn.cluster.queues.get(name) or QueueInfo(name)


def placeable(ssn: Session, job: JobInfo) -> bool:
    """The job has pending tasks, is valid and admitted by the enqueue gate;
    an invalid one is told why."""
    if not job.count_of(TaskStatus.PENDING) or not ssn.admits(job):
        return False
    reason = ssn.job_invalid(job)
    if reason:
        ssn.record_unschedulable(job, reason, Blocker.INVALID)
        return False
    return True


@attrs.define
class Attempt:
    """What placing one job's tasks under a statement came to."""

    placed: int = 0
    failure: str | None = None
    blocker: Blocker | None = None      # the class of the failure


def place_tasks(ssn: Session, stmt: Statement, job: JobInfo, tasks: list[TaskInfo],
                idle_only: bool = False, within: np.ndarray | None = None) -> Attempt:
    """Place tasks in task order until the job is ready; skip what fits nowhere.
    within (a node mask) keeps them inside a topology domain."""
    attempt = Attempt()
    # An admitted gang passed the minResources check when it was enqueued.
    gated = ssn.admitted is not None
    refusal = None if ssn.job_ready(job) or gated else ssn.enqueueable(job)
    if refusal:
        attempt.failure, attempt.blocker = refusal, Blocker.QUOTA
        return attempt
    failed_classes: set = set()
    for task in ssn.ordered_tasks(job, tasks):
        if ssn.class_key(task) in failed_classes:
            continue     # its twin found no node: neither will it
        refusal = ssn.allocatable(job, task)
        choice = None if refusal else ssn.select_node(task, idle_only, within)
        if choice is None:
            failed_classes.add(ssn.class_key(task))
            if attempt.failure is None:
                attempt.failure = refusal or f"pod {task.key}: {ssn.explain_task(task)}"
                attempt.blocker = Blocker.QUOTA if refusal else ssn.blocker_of(task)
            continue
        if choice.pipelined:
            stmt.pipeline(task, choice.node)
        else:
            stmt.allocate(task, choice.node)
        attempt.placed += 1
        if ssn.job_ready(job):
            break
    return attempt


def place_job(ssn: Session, job: JobInfo, idle_only: bool = False,
              tasks: list[TaskInfo] | None = None) -> bool:
    """Place the job's minimum (or, once ready, one more task); True if committed."""
    held = ssn.held.pop(job.key, None)      # a NonStrict hold carried from before
    was_ready = ssn.job_ready(job) and held is None
    stmt = ssn.statement()
    attempt = place_in_topology(ssn, stmt, job, tasks if tasks is not None else ssn.pending(job),
                                idle_only, place_tasks)
    progress = bool(attempt.placed or held)
    if progress and ssn.job_ready(job):
        for done in (held, stmt):
            if done is not None:
                done.commit()
        return True
    if not idle_only and progress and ssn.job_pipelined(job):
        keep(ssn, job, stmt, held)
        ssn.record_unschedulable(job, pipelined_message(job, attempt.placed), Blocker.RESOURCES)
        return False
    if not idle_only and progress and job.spec.mode is GangMode.NON_STRICT \
            and job.key not in ssn.no_hold:
        keep(ssn, job, stmt, held)
        ssn.record_unschedulable(job, "NonStrict: " + shortfall_message(job, attempt, True).replace(
            "tasks placed", "tasks held", 1), attempt.blocker)
        return False
    stmt.discard()
    if held is not None:
        held.discard()
    if not was_ready:
        expired = " (its NonStrict hold expired)" if job.key in ssn.no_hold else ""
        ssn.record_unschedulable(job, shortfall_message(job, attempt) + expired, attempt.blocker)
    return False


def keep(ssn: Session, job: JobInfo, stmt: Statement, held: Statement | None) -> None:
    """Reserve the job's placements for this session; a NonStrict job carries
    them on to the next one as a hold."""
    stmt.reserve()
    if held is not None:
        held.reserve()
    if job.spec.mode is GangMode.NON_STRICT and job.key not in ssn.no_hold:
        ssn.holds[job.key] = hold_of(ssn, job)


def group_members(ssn: Session, job: JobInfo) -> list[JobInfo]:
    keys = sorted(set(job.spec.gang_group) | {job.key})
    return [ssn.cluster.jobs[k] if k in ssn.cluster.jobs else JobInfo(k, job.spec) for k in keys]


def place_group(ssn: Session, members: list[JobInfo]) -> bool:
    """All gangs of a group under one statement: all reach their minimum, or none."""
    names = ", ".join(m.key for m in members)
    missing = [m.key for m in members if m.key not in ssn.cluster.jobs]
    invalid = [(m, ssn.job_invalid(m)) for m in members if m.key not in missing]
    blocker = (f"gang group [{names}]: {missing[0]} has no pods" if missing else next(
        (f"gang group [{names}]: {m.key}: {why}" for m, why in invalid if why), None))
    stmt = ssn.statement()
    attempts: dict[JobKey, Attempt] = {}
    if blocker is None:
        for member in members:
            todo = [] if ssn.job_ready(member) else ssn.pending(member)
            attempts[member.key] = place_in_topology(ssn, stmt, member, todo, False, place_tasks)
        if all(ssn.job_ready(m) for m in members):
            stmt.commit()
            return True
        if all(ssn.job_pipelined(m) for m in members):
            stmt.reserve()
            for member in members:
                ssn.record_unschedulable(member, pipelined_message(member, attempts[member.key].placed),
                                         Blocker.RESOURCES)
            return False
        stmt.discard()
        short = next(m for m in members if not ssn.job_pipelined(m))
        blocker = f"gang group [{names}]: {short.key}: {shortfall_message(short, attempts[short.key])}"
        kind = attempts[short.key].blocker
    else:
        kind = Blocker.INVALID
    for member in members:
        if member.key in ssn.cluster.jobs and not ssn.job_ready(member):
            ssn.record_unschedulable(member, blocker, kind)
    return False


def shortfall_message(job: JobInfo, attempt: Attempt, kept: bool = False) -> str:
    # Kept placements are in the job already; discarded ones only in the attempt.
    placed = job.count(_HELD) if kept else job.ready_count() + attempt.placed
    return (f"{placed}/{len(job.tasks)} tasks placed, "
            f"minMember {job.min_member}; {attempt.failure or 'the gang is not complete'}")


def pipelined_message(job: JobInfo, placed: int) -> str:
    return (f"{placed}/{len(job.tasks)} tasks pipelined, minMember {job.min_member}; "
            f"waiting for pods being deleted to release their room")
