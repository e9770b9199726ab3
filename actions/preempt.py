"""preempt: within one queue, a starving job evicts tasks of preemptible jobs
with strictly lower priority, gang-wise, and is pipelined onto the room;
nothing is evicted unless the job becomes pipelined-ready. A running elastic
job's extra tasks may preempt too, but only other jobs' surplus tasks."""
from __future__ import annotations

from typing import Callable

from actions.common.domainchoice import DomainChoice
from actions.common.eviction import (
    Check,
    RoomFinder,
    elastic_jobs,
    note_kept,
    place_by_eviction,
    place_extras_by_eviction,
    preempt_candidates,
    starving_jobs,
    victim_order,
)
from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import QueueName
from kaisched.framework import Session
from kaisched.framework.effects import Cause


class PreemptAction:
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        jobs, extras = starving_jobs(ssn), elastic_jobs(ssn)
        if not jobs and not extras:
            return
        releasing_at_start = ssn.cluster.table.releasing.copy()
        domains = DomainChoice(ssn)
        # Only the queues with jobs waiting, and there only the jobs they could
        # evict. The candidates are in no particular order: whoever takes them
        # sorts them by the victim order.
        by_queue, any_victim = preempt_candidates(ssn, [*jobs, *extras])
        order = victim_order(ssn, [t for tasks in by_queue.values() for t in tasks])
        finders: dict[tuple[QueueName, int], RoomFinder] = {}

        def finder_of(job: JobInfo) -> Callable[[TaskInfo], RoomFinder]:
            def finder(task: TaskInfo) -> RoomFinder:
                key = (job.queue, job.priority)
                if key not in finders:
                    victims = ssn.preemptable(task, by_queue[job.queue])
                    finders[key] = RoomFinder(ssn, domains, victims, releasing_at_start, order)
                return finders[key]
            return finder

        def check_of(job: JobInfo) -> Check:
            return lambda t: ssn.allocatable(job, t)

        def preempt_for(job: JobInfo, tasks: list[TaskInfo]) -> None:
            if ssn.job_pipelined(job):
                return
            if not place_by_eviction(ssn, domains, job, tasks, ssn.preemptable, finder_of(job),
                                     Cause.PREEMPT, check_of(job), order) \
                    and (ssn.protects or ssn.disruptions.budgets):
                lower = {t.job for t in by_queue[job.queue]
                         if ssn.cluster.jobs[t.job].priority < job.priority}
                note_kept(ssn, job, Cause.PREEMPT, (ssn.cluster.jobs[k] for k in sorted(lower)))

        def preempt_extras(job: JobInfo, tasks: list[TaskInfo]) -> None:
            place_extras_by_eviction(ssn, domains, job, tasks, ssn.preemptable, finder_of(job),
                                     check_of(job), Cause.PREEMPT, order)

        # Each job under its own guard: one whose decision raises loses its turn.
        for job, tasks in jobs:
            if job.queue in any_victim:
                ssn.decide(job, preempt_for, job, tasks)
        for job, tasks in extras:
            if job.queue in any_victim:
                ssn.decide(job, preempt_extras, job, tasks)
