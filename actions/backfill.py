"""backfill: after allocate, place best-effort tasks (no requests)
and the leftovers of jobs whose gang is already met, on idle room only, so a
pipelined gang's reservations are never taken."""
from __future__ import annotations

from actions.common.domainchoice import DomainChoice
from actions.common.placement import place_job, placeable
from kaisched.api.types import TaskStatus
from kaisched.framework import Session


class BackfillAction:
    name = "backfill"

    def execute(self, ssn: Session) -> None:
        domains = DomainChoice(ssn)
        waiting = (j for j in ssn.cluster.active_jobs() if j.count_of(TaskStatus.PENDING))
        for job in sorted(waiting, key=ssn.job_order_key):
            if job.key in ssn.unschedulable or not placeable(ssn, job):
                continue
            ready = ssn.job_ready(job)
            tasks = [t for t in ssn.pending(job) if ready or t.best_effort]
            # A gang of best-effort pods still goes whole: place_job commits
            # only once the job is ready. A ready job's leftovers go one by one.
            while tasks and place_job(ssn, domains, job, idle_only=True, tasks=tasks):
                tasks = [t for t in ssn.pending(job) if t in tasks]
