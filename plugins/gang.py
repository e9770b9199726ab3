"""gang: a job is placed only when at least minMember of its tasks (and each
subgroup's minimum) can be; not-ready jobs go first; and the PodGroup status
says, in numbers, why a job waits."""
from __future__ import annotations

from kaisched.api.job import Condition, JobInfo, PodGroupStatus
from kaisched.api.resource import format_amount
from kaisched.api.task import TaskInfo
from kaisched.api.clock import from_rfc3339
from kaisched.api.types import (
    EVICTABLE_STATUSES, READY_STATUSES, PodGroupPhase, Reason, TaskStatus,
)
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import RecordEvent, SetPodCondition, SetPodGroupStatus

_WAITING = (TaskStatus.PENDING, TaskStatus.PIPELINED)
_PIPELINED_READY = READY_STATUSES | {TaskStatus.PIPELINED}
_PLACED = EVICTABLE_STATUSES | {TaskStatus.ALLOCATED, TaskStatus.PIPELINED}


class GangPlugin(PluginBase):
    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.jobs = ssn.cluster.jobs
        self.table = ssn.cluster.table
        self.usable = ssn.cluster.usable_nodes()
        ssn.register(Hook.JOB_VALID, job_invalid_reason)
        ssn.register(Hook.ENQUEUEABLE, self.min_resources_fit)
        ssn.register(Hook.JOB_READY, lambda job: gang_met(job, READY_STATUSES))
        ssn.register(Hook.JOB_PIPELINED, lambda job: gang_met(job, _PIPELINED_READY))
        ssn.register(Hook.JOB_ORDER, lambda job: 1 if gang_met(job, READY_STATUSES) else 0)
        ssn.register(Hook.EVICTION_GROUP, self.eviction_group)

    def on_session_close(self, ssn: Session) -> None:
        # A settled job that did not change has nothing new to say.
        for job in ssn.cluster.active_jobs():
            _report(ssn, job)

    def min_resources_fit(self, job: JobInfo) -> str | None:
        """Coscheduling's pre-check: the gang's minResources must fit what the
        cluster has free, or trying to place it only churns."""
        need = job.spec.min_resources
        if need is None:
            return None
        free = self.table.resource(self.table.future[self.usable].sum(axis=0))
        held = self.ssn.inqueue_request(job)        # admitted gangs not started yet
        short = need.exceeding(free - held)
        if not short:
            return None
        name = short[0]
        amount = format_amount(name, need.get(name))
        total = self.table.resource(self.table.alloc[self.usable].sum(axis=0)).get(name)
        if need.get(name) > total:
            return (f"minResources {name} {amount} exceeds the whole cluster "
                    f"({format_amount(name, total)} {name} on schedulable nodes)")
        spare = f"{format_amount(name, max(free.get(name), 0.0))} free"
        if held.get(name) > 0:
            spare += f", {format_amount(name, held.get(name))} of it held for admitted gangs"
        return f"minResources {name} {amount} does not fit the free cluster ({spare})"

    def eviction_group(self, victim: TaskInfo) -> list[TaskInfo]:
        """Above its minimum a gang loses single tasks; at or below it, a
        partial gang is useless, so all of it goes."""
        job = self.jobs[victim.job]
        if job.ready_count() - 1 >= job.min_member and all(
                job.ready_count(sg.name) - (victim.subgroup == sg.name) >= sg.min_member
                for sg in job.spec.subgroups):
            return [victim]
        # All of it, including tasks placed this session: those cannot be
        # evicted, which keeps the gang from being broken up at all.
        return [t for t in job.tasks.values() if t.status in _PLACED]


def gang_met(job: JobInfo, statuses: frozenset[TaskStatus]) -> bool:
    """minMember and every subgroup minimum are met by tasks in statuses."""
    return job.minimum_met(statuses)


def timed_out(job: JobInfo) -> bool:
    """Failed on Timeout for the spec as it is: not retried until it changes."""
    cond = job.status.condition("Scheduled")
    return (job.status.phase is PodGroupPhase.FAILED and cond is not None
            and cond.reason == Reason.TIMEOUT.value
            and job.status.observed_generation == job.spec.generation)


def job_invalid_reason(job: JobInfo) -> str | None:
    if job.problem:
        return job.problem
    if timed_out(job):
        return "timed out; change the PodGroup spec to retry"
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
    """Write the PodGroup status, pod conditions and an Event, where they changed.

    What was said last is read back from the cluster: the PodGroup's status,
    and each pod's own PodScheduled condition. A job with no PodGroup (a pod
    alone, or one naming a PodGroup that does not exist) has no status to
    compare with, so only its pods' conditions tell whether anything changed --
    else it would look changed, and get a new Event, every cycle.
    """
    if timed_out(job):
        return          # the verdict stands until the spec changes
    extras = _waiting_extras(ssn, job)
    if not job.spec.declared and job.key not in ssn.unschedulable and not job.problem \
            and not extras:
        return          # no PodGroup to write, nothing to tell its pods
    old = job.status
    new = _status(ssn, job, extras)
    if job.spec.declared and new != old:
        ssn.emit(SetPodGroupStatus(job.key, new))
    cond = new.condition("Scheduled")
    if cond is None:
        return
    now = ssn.now_text
    if cond.status != "False":
        # A gang that runs, with pods beyond its minimum that fit nowhere: each
        # of those is told why, as a pod alone would be.
        for task, reason in extras:
            why = f"beyond minMember {job.min_member} of {job.key}, not placed: {reason}"
            if task.unschedulable != why:
                ssn.emit(SetPodCondition(task.key, Condition(
                    "PodScheduled", "False", Reason.UNSCHEDULABLE.value, why, now)))
                ssn.emit(RecordEvent("Pod", task.key, "Warning",
                                     Reason.FAILED_SCHEDULING.value, why))
        return
    changed = job.spec.declared and old.condition("Scheduled") != cond
    for task in job.tasks.values():
        waiting = task.status in _WAITING or (
            task.status is TaskStatus.ALLOCATED and task.key not in ssn.placed)
        if waiting and task.unschedulable != cond.message:
            ssn.emit(SetPodCondition(task.key, Condition(
                "PodScheduled", "False", Reason.UNSCHEDULABLE.value, cond.message, now)))
            changed = changed or not job.spec.declared
    if changed:
        kind, key = ("PodGroup", job.key) if job.spec.declared else ("Pod", min(job.tasks, default=job.key))
        ssn.emit(RecordEvent(kind, key, "Warning", Reason.FAILED_SCHEDULING.value, cond.message))


def _waiting_extras(ssn: Session, job: JobInfo) -> list[tuple[TaskInfo, str]]:
    """The job's pods beyond its minimum that this session could not place,
    and why: its queue's limit, else the filters that refuse it on every node,
    in numbers. Only for a gang that otherwise runs; alike pods share one
    explanation."""
    if not gang_met(job, READY_STATUSES):
        return []
    why: dict[tuple, str] = {}
    out: list[tuple[TaskInfo, str]] = []
    for task in ssn.pending(job):
        like = ssn.class_key(task)
        if like not in why:
            why[like] = ssn.allocatable(job, task) or ssn.explain_task(task)
        out.append((task, why[like]))
    return out


def _status(ssn: Session, job: JobInfo,
            extras: list[tuple[TaskInfo, str]] | None = None) -> PodGroupStatus:
    """The PodGroup status this session leaves: counts, phase, Scheduled condition, timers."""
    old, now = job.status, ssn.now_text
    placed = sum(1 for key in job.tasks if key in ssn.placed) if ssn.placed else 0
    counts = dict.fromkeys(TaskStatus, 0) | job.totals()
    scheduled = (counts[TaskStatus.BINDING] + counts[TaskStatus.BOUND]
                 + counts[TaskStatus.RUNNING] + counts[TaskStatus.SUCCEEDED] + placed)
    started = scheduled >= job.min_member and scheduled > 0
    problem = job.problem or ssn.unschedulable.get(job.key)
    since = (old.unschedulable_since or now) if problem else None
    elapsed = ssn.now - (from_rfc3339(since) or ssn.now)
    timeout = job.spec.schedule_timeout
    expired = bool(problem and timeout and not started and elapsed >= timeout)
    if expired:
        cond: Condition | None = Condition(
            "Scheduled", "False", Reason.TIMEOUT.value,
            f"unschedulable for {elapsed:.0f}s, past scheduleTimeoutSeconds {timeout:.0f}: {problem}",
            now)
    elif problem:
        reason = Reason.INVALID if job.problem else Reason.UNSCHEDULABLE
        cond = _condition(old, "False", reason.value, problem, now)
    elif started:
        message = f"{scheduled}/{len(job.tasks)} tasks scheduled"
        if extras:
            message += f"; {len(extras)} pod(s) beyond minMember not placed: {extras[0][1]}"
        cond = _condition(old, "True", Reason.SCHEDULED.value, message, now)
    else:
        cond = old.condition("Scheduled")
    if expired:
        phase = PodGroupPhase.FAILED
    elif job.tasks and counts[TaskStatus.SUCCEEDED] == len(job.tasks):
        phase = PodGroupPhase.SUCCEEDED
    else:
        phase = PodGroupPhase.RUNNING if started else (
            PodGroupPhase.INQUEUE if ssn.admitted is not None and job.key in ssn.admitted
            else PodGroupPhase.PENDING)
    return PodGroupStatus(
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
        unschedulable_since=since,
        observed_generation=job.spec.generation if expired else old.observed_generation,
    )


def _condition(old: PodGroupStatus, status: str, reason: str, message: str, now: str) -> Condition:
    prev = old.condition("Scheduled")
    if prev is not None and (prev.status, prev.reason, prev.message) == (status, reason, message):
        return prev
    since = prev.last_transition_time if prev is not None and prev.status == status else now
    return Condition("Scheduled", status, reason, message, since)
