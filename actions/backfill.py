"""backfill: after allocate, place best-effort tasks (no requests)
and the leftovers of jobs whose gang is already met, on idle room only, so a
pipelined gang's reservations are never taken. Each job under its own
guard (Session.decide), as in allocate."""
from __future__ import annotations

from actions.common.domainchoice import DomainChoice
from actions.common.placement import place_job, placeable
from kaisched.api.job import JobInfo
from kaisched.api.types import TaskStatus
from kaisched.framework import Session


class BackfillAction:
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        domains = DomainChoice(ssn)
        pending = [job for job in ssn.cluster.active_jobs() if job.count_of(TaskStatus.PENDING)]
        waiting = [(key, job) for job, key in zip(pending, ssn.ask_each(pending, ssn.job_order_key), strict=True)
                   if key is not None]
        waiting.sort(key=lambda kj: kj[0])
        for _, job in waiting:
            if job.key not in ssn.unschedulable:
                ssn.decide(job, _backfill, ssn, domains, job)


def _backfill(ssn: Session, domains: DomainChoice, job: JobInfo) -> None:
    if not placeable(ssn, job):
        return
    ready = ssn.job_ready(job)
    tasks = [t for t in ssn.pending(job) if ready or t.best_effort]
    # A gang of best-effort pods still goes whole: place_job commits
    # only once the job is ready. A ready job's leftovers go one by one.
    while tasks and place_job(ssn, domains, job, idle_only=True, tasks=tasks):
        tasks = [t for t in ssn.pending(job) if t in tasks]
