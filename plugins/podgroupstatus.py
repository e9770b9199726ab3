"""podgroupstatus: at session close, write each PodGroup's status (counts,
phase, the Scheduled condition, timers), its pods' PodScheduled condition and
an Event, where they changed; the message says in numbers why a gang waits.
A PodGroup of the upstream Workload API gets its own condition instead
(PodGroupScheduled, or v1beta1's PodGroupInitiallyScheduled), in the words its
API allows: Unschedulable, or SchedulerError for a group kaisched cannot use."""
from __future__ import annotations

from typing import Any

import attrs

from kaisched.api.clock import from_rfc3339, to_rfc3339
from kaisched.api.job import Condition, JobInfo, PodGroupStatus, StatusTarget
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, Blocker, PodGroupPhase, Reason, TaskStatus
from kaisched.framework import PluginBase, Session
from kaisched.framework.effects import RecordEvent, SetPodCondition, SetPodGroupStatus

_WAITING = (TaskStatus.PENDING, TaskStatus.PIPELINED)
_NONE = dict.fromkeys(TaskStatus, 0)     # every status counted, as none (copied by `|`)
# The gang's reasons its pods' PodScheduled condition says too (no node helps them).
_KEPT_BY_PODS = (Reason.WAITING_FOR_QUOTA.value, Reason.SCHEDULER_ERROR.value)
# How a gang ended: the upstream API's condition has no word for it.
_ENDED = (Reason.SUCCEEDED.value, Reason.FAILED.value)


class PodGroupStatusPlugin(PluginBase):
    name = "podgroupstatus"

    def on_session_open(self, ssn: Session) -> None:
        return None

    def on_session_close(self, ssn: Session) -> None:
        # A settled job that did not change has nothing new to say.
        # Each under its own guard: a job whose report raises keeps the
        # status it had (the error is counted and logged), the others are
        # reported; one whose decision raised is reported too (SchedulerError).
        ssn.report_each(list(ssn.cluster.active_jobs()), _report)
        ssn.report_each(ssn.cluster.waiting_groups, _enqueued)


def _enqueued(ssn: Session, job: JobInfo) -> None:
    """A PodGroup no pod names yet: Inqueue once admitted (at once, with no
    enqueue action to gate it), so a controller waiting for that makes its
    pods; else Pending, saying why when enqueue said so (waiting for quota
    when only its queue's room refused it, as for a gang with pods)."""
    admitted = ssn.gate.admits(job)
    why = job.problem or ssn.unschedulable.get(job.key)
    cond = None if admitted or not why else _condition(
        job.status, "False", (Reason.INVALID if job.problem else _waiting_reason(ssn, job)).value,
        why, ssn.now_text)
    new = attrs.evolve(job.status, phase=PodGroupPhase.INQUEUE if admitted and not job.problem
                       else PodGroupPhase.PENDING, conditions=tuple(
                           c for c in job.status.conditions if c.type != "Scheduled")
                       + ((cond,) if cond else ()))
    if new != job.status:
        ssn.report(SetPodGroupStatus(job.key, new))


def _report(ssn: Session, job: JobInfo) -> None:
    """Write the PodGroup status, pod conditions and an Event, where they changed.

    What was said last is read back from the cluster: the PodGroup's status,
    and each pod's own PodScheduled condition. A job with no PodGroup (a pod
    alone, or one naming a PodGroup that does not exist) has no status to
    compare with, so only its pods' conditions tell whether anything changed --
    else it would look changed, and get a new Event, every cycle.
    """
    if job.timed_out():
        return          # the verdict stands until the spec changes
    extras = _waiting_extras(ssn, job)
    target = job.spec.status_target
    if not job.spec.declared and target is None and job.key not in ssn.unschedulable \
            and not job.problem and not extras:
        return          # no PodGroup to write, nothing to tell its pods
    old = job.status
    new = _status(ssn, job, extras)
    if job.spec.declared and new != old:
        ssn.report(SetPodGroupStatus(job.key, new))
    cond = new.condition("Scheduled")
    if target is not None and cond is not None:
        _upstream(ssn, job, target, cond)
    if cond is None:
        return
    now = ssn.now_text
    if cond.status != "False":
        # A gang that runs, with pods beyond its minimum that fit nowhere: each
        # of those is told why, as a pod alone would be.
        for task, reason, said_of in extras:
            why = f"beyond minMember {job.min_member} of {job.key}, not placed: {reason}"
            if task.unschedulable != why or task.unschedulable_reason != said_of.value:
                ssn.report(SetPodCondition(task.key, Condition(
                    "PodScheduled", "False", said_of.value, why, now)))
                ssn.report(RecordEvent("Pod", task.key, "Warning",
                                     Reason.FAILED_SCHEDULING.value, why))
        return
    changed = job.spec.declared and old.condition("Scheduled") != cond
    # Its pods say Unschedulable (which cluster autoscalers act on) unless
    # they wait only for their queue, or deciding them raised.
    said = cond.reason if cond.reason in _KEPT_BY_PODS else Reason.UNSCHEDULABLE.value
    for task in job.tasks.values():
        waiting = task.status in _WAITING or (
            task.status is TaskStatus.ALLOCATED and task.key not in ssn.placed)
        if waiting and (task.unschedulable != cond.message or task.unschedulable_reason != said):
            ssn.report(SetPodCondition(task.key, Condition(
                "PodScheduled", "False", said, cond.message, now)))
            changed = changed or not job.spec.declared
    if changed:
        kind, key = ("PodGroup", job.key) if job.spec.declared else ("Pod", min(job.tasks, default=job.key))
        ssn.report(RecordEvent(kind, key, "Warning", Reason.FAILED_SCHEDULING.value, cond.message))


def _upstream(ssn: Session, job: JobInfo, target: StatusTarget, said: Condition) -> None:
    """Write the condition of an upstream PodGroup where it changed. Its other
    conditions are kept; v1beta1's, once True, is never written again."""
    if said.reason in _ENDED:
        return
    # In the words its API allows: waiting for room, quota or order is Unschedulable; a
    # group that cannot be used as it is, SchedulerError.
    reason = "Scheduled" if said.status == "True" else "SchedulerError" \
        if said.reason in (Reason.INVALID.value, Reason.SCHEDULER_ERROR.value) else Reason.UNSCHEDULABLE.value
    old = job.status.condition(target.condition)
    if target.terminal and old is not None and old.status == "True":
        return
    generation = job.spec.generation or None
    if old is not None and (old.status, old.reason, old.message, old.observed_generation) \
            == (said.status, reason, said.message, generation):
        return
    since = old.last_transition_time if old is not None and old.status == said.status \
        else ssn.now_text
    cond = Condition(target.condition, said.status, reason, said.message, since, generation)
    kept = tuple(c for c in job.status.conditions if c.type != target.condition)
    ssn.report(SetPodGroupStatus(job.key, PodGroupStatus(conditions=(*kept, cond)),
                               target.api_version))


Extra = tuple[TaskInfo, str, Reason]


def _waiting_extras(ssn: Session, job: JobInfo) -> list[Extra]:
    """The job's pods beyond its minimum that this session could not place,
    why, and the reason their condition gives: its queue's limit (waiting for
    quota), else the filters that refuse it on every node, in numbers
    (unschedulable). Only for a gang that otherwise runs; alike pods share one
    explanation."""
    if not job.count_of(TaskStatus.PENDING) or not job.minimum_met(READY_STATUSES):
        return []       # (none pending: asked first, the common case of a job that runs)
    why: dict[tuple[Any, ...], tuple[str, Reason]] = {}
    out: list[Extra] = []
    for task in ssn.pending(job):
        like = ssn.class_key(task)
        if like not in why:
            refusal, _ = ssn.allocatable_on(job, task)
            why[like] = (refusal, Reason.WAITING_FOR_QUOTA) if refusal \
                else (ssn.explain_task(task), Reason.UNSCHEDULABLE)
        out.append((task, *why[like]))
    return out


_REASON_OF = {Blocker.QUOTA: Reason.WAITING_FOR_QUOTA, Blocker.ERROR: Reason.SCHEDULER_ERROR,
              Blocker.CAPACITY: Reason.WAITING_FOR_CAPACITY}


def _waiting_reason(ssn: Session, job: JobInfo) -> Reason:
    """Unschedulable, unless the gang waits only for its queue's quota,
    limit or order (then no node would help, and autoscalers must not add
    one), or deciding it raised: SchedulerError, which no node helps either."""
    blocker = ssn.blockers.get(job.key)
    return Reason.UNSCHEDULABLE if blocker is None else _REASON_OF.get(blocker, Reason.UNSCHEDULABLE)


def _status(ssn: Session, job: JobInfo, extras: list[Extra] | None = None) -> PodGroupStatus:
    """The PodGroup status this session leaves: counts, phase, Scheduled condition, timers."""
    old, now = job.status, ssn.now_text
    # The keys' intersection walks the smaller side: few placed in a big gang.
    placed = len(job.tasks.keys() & ssn.placed.keys()) if ssn.placed else 0
    counts = _NONE | job.totals()
    # Succeeded pods may be deleted while their gang finishes: the count they
    # leave in the status stays (stale-gang eviction reads it).
    succeeded = max(counts[TaskStatus.SUCCEEDED], old.succeeded)
    scheduled = (counts[TaskStatus.BINDING] + counts[TaskStatus.BOUND]
                 + counts[TaskStatus.RUNNING] + succeeded + placed)
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
        reason = Reason.INVALID if job.problem else _waiting_reason(ssn, job)
        cond = _condition(old, "False", reason.value, problem, now)
    elif started:
        message = f"{scheduled}/{len(job.tasks)} tasks scheduled"
        if extras:
            message += f"; {len(extras)} pod(s) beyond minMember not placed: {extras[0][1]}"
        cond = _condition(old, "True", Reason.SCHEDULED.value, message, now)
    else:
        cond = old.condition("Scheduled")
    finished = _finished(job, counts, now, old)
    if finished is not None:
        cond = finished
    if expired:
        phase = PodGroupPhase.FAILED
    elif finished is not None:
        phase = PodGroupPhase(finished.reason)
    else:
        phase = PodGroupPhase.RUNNING if started else (
            PodGroupPhase.INQUEUE if ssn.gate.admitted(job)
            else PodGroupPhase.PENDING)
    return PodGroupStatus(
        phase=phase,
        conditions=tuple(c for c in old.conditions if c.type != "Scheduled") + ((cond,) if cond else ()),
        scheduled=scheduled,
        running=counts[TaskStatus.RUNNING],
        succeeded=succeeded,
        failed=counts[TaskStatus.FAILED],
        pending=counts[TaskStatus.PENDING] + counts[TaskStatus.PIPELINED]
        + counts[TaskStatus.ALLOCATED] - placed,
        last_schedule_time=now if placed else old.last_schedule_time,
        stale_since=ssn.stale_since.get(job.key, old.stale_since),
        unschedulable_since=since,
        last_moved_time=ssn.moves.moved_at.get(job.key, old.last_moved_time),
        pending_since=to_rfc3339(ssn.pending_since(job)),
        observed_generation=job.spec.generation if expired else old.observed_generation,
    )


def _finished(job: JobInfo, counts: dict[TaskStatus, int], now: str,
              old: PodGroupStatus) -> Condition | None:
    """Every pod is done: Succeeded when at least minMember succeeded (so when
    all did), else Failed (so when all failed). The Scheduled condition then
    says how it ended."""
    done, failed = counts[TaskStatus.SUCCEEDED], counts[TaskStatus.FAILED]
    if not job.tasks or done + failed < len(job.tasks):
        return None
    if done >= job.min_member:
        reason = Reason.SUCCEEDED
        message = f"{done}/{len(job.tasks)} pods succeeded"
    else:
        reason = Reason.FAILED
        message = f"{failed}/{len(job.tasks)} pods failed, {done} succeeded (minMember {job.min_member})"
    return _condition(old, "True" if reason is Reason.SUCCEEDED else "False", reason.value,
                      message, now)


def _condition(old: PodGroupStatus, status: str, reason: str, message: str, now: str) -> Condition:
    prev = old.condition("Scheduled")
    if prev is not None and (prev.status, prev.reason, prev.message) == (status, reason, message):
        return prev
    since = prev.last_transition_time if prev is not None and prev.status == status else now
    return Condition("Scheduled", status, reason, message, since)
