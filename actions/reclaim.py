"""reclaim: across queues, a job of a queue within its fair share evicts
tasks of queues over theirs, gang-wise, and is pipelined onto the room.

Which victims may go is the proportion plugin's rule (compared where the two
queues' branches meet, only the resources the reclaimer lacks, the victim's
side over its fair share and never below its quota, the reclaimer's side
within its fair share). A running elastic job's extra tasks may reclaim too,
but only other jobs' surplus tasks.
"""
from __future__ import annotations

from typing import Callable

from actions.common.eviction import (
    RoomFinder, elastic_jobs, evictable_tasks, place_by_eviction, place_extras_by_eviction,
    starving_jobs, victim_order,
)
from kaisched.api.job import JobInfo
from kaisched.api.resource import Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import QueueName
from kaisched.framework import Hook, Session
from kaisched.framework.effects import Cause


class ReclaimAction:
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        jobs, extras = starving_jobs(ssn), elastic_jobs(ssn)
        if not jobs and not extras:
            return
        evictable = evictable_tasks(ssn)
        order = victim_order(ssn, evictable)
        candidates = sorted(evictable, key=order)
        if not candidates:
            return
        releasing_at_start = ssn.cluster.table.releasing.copy()
        finders: dict[tuple[QueueName, Resource], RoomFinder] = {}

        def finder_of(job: JobInfo) -> Callable[[TaskInfo], RoomFinder]:
            def finder(task: TaskInfo) -> RoomFinder:
                key = (job.queue, task.resreq)
                if key not in finders:
                    victims = ssn.victims(Hook.RECLAIMABLE, task, candidates)
                    finders[key] = RoomFinder(ssn, victims, releasing_at_start, order)
                return finders[key]
            return finder

        def check(job: JobInfo) -> Callable[[TaskInfo], str | None]:
            return lambda t: ssn.allocatable(job, t) or ssn.overused(job, t)

        for job, tasks in jobs:
            if ssn.job_pipelined(job) or ssn.overused(job, tasks[0]):
                continue
            place_by_eviction(ssn, job, tasks, Hook.RECLAIMABLE, finder_of(job), Cause.RECLAIM,
                              check(job), order)
        for job, tasks in extras:
            place_extras_by_eviction(ssn, job, tasks, Hook.RECLAIMABLE, finder_of(job),
                                     check(job), Cause.RECLAIM, order)
