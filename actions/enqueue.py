"""enqueue: admit PodGroups to their queue before allocate tries them.

A Pending PodGroup becomes Inqueue once its minResources fit the free
cluster and its queue's limits, counting the minResources of the gangs
admitted before it that have not started yet; one without minResources is
admitted at once. Allocate then takes only admitted gangs, so a stream of
gangs that cannot start does not churn the cluster. An Inqueue gang stays
Inqueue until it runs. Without this action nothing is gated: allocate checks
minResources itself, just before placing a gang.

A PodGroup no pod names yet is enqueued the same way (its own minResources,
if it has any): some controllers (Volcano's) make their pods only once their
PodGroup is Inqueue.

Each job is asked under its own guard (Session.decide): one whose gate
raises stays Pending with reason SchedulerError; the others are gated as if
it were not there.
"""
from __future__ import annotations

from typing import Any

from actions.common.placement import queue_of
from kaisched.api.job import JobInfo
from kaisched.api.types import Blocker, PodGroupPhase, TaskStatus
from kaisched.framework import Session


class EnqueueAction:
    name = "enqueue"

    def execute(self, ssn: Session) -> None:
        ssn.gate.close()
        waiting: list[tuple[tuple[Any, ...], JobInfo]] = []
        for job in ssn.cluster.active_jobs():
            key = ssn.decide(job, _waiting_key, ssn, job)
            if key is not None:
                waiting.append((key, job))
        # PodGroups whose pods are not made yet: their controller may wait for Inqueue.
        for job in ssn.cluster.waiting_groups:
            key = None if job.problem else ssn.decide(job, _order_key, ssn, job)
            if key is not None:
                waiting.append((key, job))
        waiting.sort(key=lambda kj: kj[0])
        for _, job in waiting:
            ssn.decide(job, _gate, ssn, job)


def _waiting_key(ssn: Session, job: JobInfo) -> tuple[Any, ...] | None:
    """Admit a job that needs no gate now; the order key of one that waits
    at it (None: neither, as a job with nothing pending or invalid)."""
    if ssn.job_ready(job) or job.status.phase is not PodGroupPhase.PENDING \
            or not job.spec.declared:
        ssn.gate.admit(job, ssn.job_ready)      # running, admitted before, or a bare pod
    elif job.count_of(TaskStatus.PENDING) and not ssn.job_invalid(job):
        return _order_key(ssn, job)
    return None


def _order_key(ssn: Session, job: JobInfo) -> tuple[Any, ...]:
    return (ssn.queue_order_key(queue_of(ssn, job.queue)), ssn.job_order_key(job))


def _gate(ssn: Session, job: JobInfo) -> None:
    refused = ssn.enqueue_refusal(job)
    if refused:
        reason, blocker = refused
        # Its queue's room taken (by running and admitted gangs) is a
        # wait for quota; too little free cluster, the gate's own.
        ssn.record_unschedulable(job, f"not enqueued: {reason}",
                                 Blocker.QUOTA if blocker is Blocker.QUOTA else Blocker.GATES)
    else:
        ssn.gate.admit(job, ssn.job_ready)
