"""gang: a job is placed only when at least minMember of its tasks (and each
subgroup's minimum) can be; not-ready jobs go first; and the PodGroup status
says, in numbers, why a job waits."""
from __future__ import annotations

from kaisched.api.job import Condition, JobInfo, PodGroupStatus
from kaisched.api.task import TaskInfo
from kaisched.api.types import (
    EVICTABLE_STATUSES, READY_STATUSES, PodGroupPhase, Reason, TaskStatus,
)
from kaisched.api.clock import to_rfc3339
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import RecordEvent, SetPodCondition, SetPodGroupStatus

_WAITING = (TaskStatus.PENDING, TaskStatus.PIPELINED)

_PIPELINED_READY = READY_STATUSES | {TaskStatus.PIPELINED}


class GangPlugin(PluginBase):
    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        ssn.register(Hook.JOB_VALID, job_invalid_reason)
        ssn.register(Hook.JOB_READY, lambda job: gang_met(job, READY_STATUSES))
        ssn.register(Hook.JOB_PIPELINED, lambda job: gang_met(job, _PIPELINED_READY))
        ssn.register(Hook.JOB_ORDER, lambda job: 1 if gang_met(job, READY_STATUSES) else 0)
        jobs = ssn.cluster.jobs

        def eviction_group(victim: TaskInfo) -> list[TaskInfo]:
            """Above its minimum a gang loses single tasks; at or below it, a
            partial gang is useless, so all of it goes."""
            job = jobs[victim.job]
            if job.ready_count() - 1 >= job.min_member and all(
                    job.ready_count(sg.name) - (victim.subgroup == sg.name) >= sg.min_member
                    for sg in job.spec.subgroups):
                return [victim]
            return [t for t in job.tasks.values() if t.status in EVICTABLE_STATUSES]

        ssn.register(Hook.EVICTION_GROUP, eviction_group)

    def on_session_close(self, ssn: Session) -> None:
        for job in ssn.cluster.jobs.values():
            _report(ssn, job)


def gang_met(job: JobInfo, statuses: frozenset[TaskStatus]) -> bool:
    """minMember and every subgroup minimum are met by tasks in statuses."""
    if job.count(statuses) < job.min_member:
        return False
    return all(job.count(statuses, sg.name) >= sg.min_member for sg in job.spec.subgroups)


def job_invalid_reason(job: JobInfo) -> str | None:
    if job.problem:
        return job.problem
    alive = READY_STATUSES | set(_WAITING)
    have = job.count(alive)
    if have < job.min_member:
        return f"minMember is {job.min_member} but only {have} pod(s) exist"
    for sg in job.spec.subgroups:
        have = job.count(alive, sg.name)
        if have < sg.min_member:
            return f"subgroup {sg.name} needs {sg.min_member} pod(s), only {have} exist"
    return None


def _report(ssn: Session, job: JobInfo) -> None:
    """Write the PodGroup status, pod conditions and an Event, where they changed."""
    placed = sum(1 for key in job.tasks if key in ssn.placed)
    counts = {s: job.count((s,)) for s in TaskStatus}
    scheduled = (counts[TaskStatus.BINDING] + counts[TaskStatus.BOUND]
                 + counts[TaskStatus.RUNNING] + counts[TaskStatus.SUCCEEDED] + placed)
    problem = job.problem or ssn.unschedulable.get(job.key)
    old = job.status
    now = to_rfc3339(ssn.now)
    if problem:
        reason = Reason.INVALID if job.problem else Reason.UNSCHEDULABLE
        cond = _condition(old, "False", reason.value, problem, now)
    elif scheduled >= job.min_member and scheduled:
        cond = _condition(old, "True", Reason.SCHEDULED.value,
                          f"{scheduled}/{len(job.tasks)} tasks scheduled", now)
    else:
        cond = old.condition("Scheduled")
    total = len(job.tasks)
    if total and counts[TaskStatus.SUCCEEDED] == total:
        phase = PodGroupPhase.SUCCEEDED
    elif scheduled >= job.min_member and scheduled:
        phase = PodGroupPhase.RUNNING
    elif old.phase is PodGroupPhase.FAILED:
        phase = old.phase
    else:
        phase = PodGroupPhase.PENDING
    new = PodGroupStatus(
        phase=phase,
        conditions=tuple(c for c in old.conditions if c.type != "Scheduled") + ((cond,) if cond else ()),
        scheduled=scheduled,
        running=counts[TaskStatus.RUNNING],
        succeeded=counts[TaskStatus.SUCCEEDED],
        failed=counts[TaskStatus.FAILED],
        pending=counts[TaskStatus.PENDING] + counts[TaskStatus.PIPELINED]
        + counts[TaskStatus.ALLOCATED] - placed,
        last_schedule_time=now if placed else old.last_schedule_time,
        stale_since=ssn.stale_since.get(job.key, old.stale_since),
        unschedulable_since=(old.unschedulable_since or now) if problem else None,
    )
    if job.spec.declared and new != old:
        ssn.emit(SetPodGroupStatus(job.key, new))
    if not problem:
        return
    message = problem
    changed = old.condition("Scheduled") != cond
    for task in job.tasks.values():
        waiting = task.status in _WAITING or (
            task.status is TaskStatus.ALLOCATED and task.key not in ssn.placed)
        if waiting and task.unschedulable != message:
            ssn.emit(SetPodCondition(task.key, Condition(
                "PodScheduled", "False", Reason.UNSCHEDULABLE.value, message, now)))
            changed = changed or not job.spec.declared
    if changed:
        kind, key = ("PodGroup", job.key) if job.spec.declared else ("Pod", next(iter(job.tasks), job.key))
        ssn.emit(RecordEvent(kind, key, "Warning", Reason.FAILED_SCHEDULING.value, message))


def _condition(old: PodGroupStatus, status: str, reason: str, message: str, now: str) -> Condition:
    prev = old.condition("Scheduled")
    if prev is not None and (prev.status, prev.reason, prev.message) == (status, reason, message):
        return prev
    since = prev.last_transition_time if prev is not None and prev.status == status else now
    return Condition("Scheduled", status, reason, message, since)
