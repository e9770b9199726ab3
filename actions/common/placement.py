"""Placing a job's tasks under a statement: what allocate and backfill share.

place_job places a job's minimum (or one more task once it runs) inside its
topology domain (topology.py, which places tasks as attempt.py does), and
commits, keeps as a reservation, or undoes the lot; place_group does the same
for the gangs of a gangGroup under one statement.
"""
from __future__ import annotations

from actions.common import topology
from actions.common.attempt import Attempt
from actions.common.domainchoice import DomainChoice
from kaisched.api.job import JobInfo
from kaisched.api.queue import QueueInfo
from kaisched.api.resource import Resource, sum_resources
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, Blocker, GangMode, JobKey, QueueName, TaskStatus
from kaisched.framework import Session, Statement
from kaisched.framework.holds import hold_of

_HELD = READY_STATUSES | {TaskStatus.PIPELINED}     # a NonStrict hold, and what runs


def queue_of(ssn: Session, name: QueueName) -> QueueInfo:
    """The queue, or a plain one when no plugin checked that it exists."""
    return ssn.cluster.queues.get(name) or QueueInfo(name)


def placeable(ssn: Session, job: JobInfo) -> bool:
    """The job has pending tasks, is valid and admitted by the enqueue gate;
    an invalid one is told why (also when the gate held it back for that);
    one that waits for the PodGrouper, nothing."""
    if not job.count_of(TaskStatus.PENDING) or ssn.awaits_grouping(job):
        return False
    reason = ssn.job_invalid(job)
    if reason:
        gated = any(t.gates for t in job.tasks.values() if t.status is TaskStatus.PENDING)
        ssn.record_unschedulable(job, reason, Blocker.GATES if gated else Blocker.INVALID)
        return False
    return ssn.gate.admits(job)


def still_needed(ssn: Session, job: JobInfo, tasks: list[TaskInfo] | None = None
                 ) -> list[TaskInfo]:
    """The first pending tasks, in placement order, that take the job to its
    minimum and every subgroup to the minimum its tree needs; the next unit
    (one task, or a whole subgroup) once it is there."""
    return ssn.minimum_tasks(job, ssn.pending(job) if tasks is None else tasks)


def need_of(ssn: Session, job: JobInfo) -> Resource:
    """What the job still needs (see still_needed), as its queue counts it."""
    return sum_resources(ssn.quota_request(t) for t in still_needed(ssn, job))


def place_job(ssn: Session, domains: DomainChoice, job: JobInfo, idle_only: bool = False,
              tasks: list[TaskInfo] | None = None) -> bool:
    """Place the job's minimum (or, once ready, one more task); True if committed.
    domains: how the topology domains stand, kept by the calling action."""
    held = ssn.holds.take(job.key)      # a NonStrict hold carried from before
    was_ready = ssn.job_ready(job) and held is None
    stmt = ssn.statement()
    attempt = topology.place_in_topology(ssn, domains, stmt, job,
                                         tasks if tasks is not None else ssn.pending(job), idle_only)
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
            and not ssn.holds.expired(job.key):
        keep(ssn, job, stmt, held)
        ssn.record_unschedulable(job, "NonStrict: " + shortfall_message(job, attempt, True).replace(
            "tasks placed", "tasks held", 1), attempt.blocker)
        return False
    stmt.discard()
    if held is not None:
        held.discard()
    if not was_ready:
        expired = " (its NonStrict hold expired)" if ssn.holds.expired(job.key) else ""
        ssn.record_unschedulable(job, shortfall_message(job, attempt) + expired, attempt.blocker)
    return False


def keep(ssn: Session, job: JobInfo, stmt: Statement, held: Statement | None) -> None:
    """Reserve the job's placements for this session; a NonStrict job carries
    them on to the next one as a hold."""
    stmt.reserve()
    if held is not None:
        held.reserve()
    if job.spec.mode is GangMode.NON_STRICT and not ssn.holds.expired(job.key):
        ssn.holds.carry(job.key, hold_of(ssn, job))


def group_members(ssn: Session, job: JobInfo) -> list[JobInfo]:
    keys = sorted(set(job.spec.gang_group) | {job.key})
    return [ssn.cluster.jobs[k] if k in ssn.cluster.jobs else JobInfo(k, job.spec) for k in keys]


def place_group(ssn: Session, domains: DomainChoice, members: list[JobInfo]) -> bool:
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
            attempts[member.key] = topology.place_in_topology(ssn, domains, stmt, member, todo, False)
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
    # Pods that no longer count toward the minimum (completed, under the
    # upstream rules) are left out of both numbers.
    counted = job.ready_statuses
    gone = 0 if TaskStatus.SUCCEEDED in counted else job.count_of(TaskStatus.SUCCEEDED)
    placed = job.count(_HELD) - gone if kept else job.count(counted) + attempt.placed
    text = f"{placed}/{len(job.tasks) - gone} tasks placed, minMember {job.min_member}"
    if job.spec.subgroups:
        have = job.leaf_counts(_HELD if kept else counted)
        if not kept:
            for leaf, n in attempt.placed_in.items():
                have[leaf] = have.get(leaf, 0) + n
        if not job.tree.met(have):
            text += "; " + job.tree.shortfall(have, job.alive_counts())
    return f"{text}; {attempt.failure or 'the gang is not complete'}"


def pipelined_message(job: JobInfo, placed: int) -> str:
    return (f"{placed}/{len(job.tasks)} tasks pipelined, minMember {job.min_member}; "
            f"waiting for pods being deleted to release their room")
