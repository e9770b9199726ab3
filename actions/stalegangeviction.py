"""stalegangeviction: a running gang whose alive tasks
(Succeeded count as alive) stay below minMember for longer than the grace
period is evicted whole: a partial gang holds room and does no work.

A gang some of whose pods Succeeded is finishing, not stale (KAI's rule): its
pods exit one by one, and the ones still running are its last work. This
holds when the Succeeded pods are gone too: the PodGroup status's succeeded
count, which never goes down, remembers them.

A gang still starting is not stale either: what it lacks are pods waiting to
be placed in subgroups none of whose pods has run yet -- the launcher an MPI
operator makes once its workers are ready, the workers a LeaderWorkerSet
makes once its leader is. Those running first wait for them.

The timer lives in the PodGroup status (staleSince), so a restart keeps it.
"""
from __future__ import annotations

from kaisched.api.clock import from_rfc3339, to_rfc3339
from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES as EVICTABLE
from kaisched.api.types import READY_STATUSES, TaskStatus
from kaisched.framework import Session
from kaisched.framework.effects import Cause

_WAITING = frozenset({TaskStatus.PENDING, TaskStatus.PIPELINED})


def starting(job: JobInfo) -> bool:
    """Every pod the gang lacks for its minimum waits in a subgroup none of
    whose pods is placed or running: it has not fallen short, it is still
    starting in the steps its operator takes."""
    if not job.spec.subgroups:
        return False
    have = job.leaf_counts(READY_STATUSES)
    waiting = job.leaf_counts(_WAITING)
    fresh = {leaf: n for leaf, n in waiting.items() if not have.get(leaf) and job.tree.is_leaf(leaf)}
    if not fresh:
        return False
    counted = {leaf: have.get(leaf, 0) + fresh.get(leaf, 0) for leaf in job.tree.leaves}
    return job.count(READY_STATUSES) + sum(fresh.values()) >= job.min_member \
        and job.tree.met(counted)


class StaleGangEvictionAction:
    name = "stalegangeviction"

    def execute(self, ssn: Session) -> None:
        for job in ssn.cluster.active_jobs():   # a settled gang is whole
            if job.min_member <= 1 and not job.spec.subgroups and not job.status.stale_since:
                continue    # a gang of one is never partly alive
            ssn.decide(job, _look_at, ssn, job)     # under its own guard: one that raises loses its turn


def _look_at(ssn: Session, job: JobInfo) -> None:
    """Time the gang's shortfall; evict it whole once past its grace period."""
    # Alive counts Succeeded pods even where the gang's own rules do not
    # (the upstream Workload API's): a finishing gang is not stale; nor is
    # one still starting. The whole gang (the common case) is asked first,
    # its pods on nodes only of a gang short of it.
    on_nodes: list[TaskInfo] = []
    if job.minimum_met(READY_STATUSES) or ssn.job_ready(job) or not (on_nodes := [
            t for t in job.tasks.values() if t.status in EVICTABLE and not t.critical]) \
            or finishing(job) or starting(job):
        if job.status.stale_since:
            ssn.stale_since[job.key] = None
        return
    alive = job.count(READY_STATUSES)
    since = from_rfc3339(job.status.stale_since) or ssn.now
    ssn.stale_since[job.key] = to_rfc3339(since)
    grace = job.spec.stale_grace if job.spec.stale_grace is not None \
        else ssn.config.stale_gang_grace_period
    if ssn.now - since < grace:
        return
    short = f"{alive}/{job.min_member} pods alive"
    have = job.leaf_counts(READY_STATUSES)
    if job.spec.subgroups and not job.tree.met(have):
        short += f" ({job.tree.shortfall(have)})"
    message = (f"gang {job.key} has had {short} for "
               f"{ssn.now - since:.0f}s, past its grace period of {grace:.0f}s")
    stmt = ssn.statement()
    for task in on_nodes:
        stmt.evict(task, Cause.STALE_GANG, detail=message)
    stmt.commit()
    ssn.stale_since[job.key] = None


def finishing(job: JobInfo) -> bool:
    """Some pod of the gang Succeeded: seen now, or counted in its status
    before it was deleted."""
    return job.count_of(TaskStatus.SUCCEEDED) > 0 or job.status.succeeded > 0
