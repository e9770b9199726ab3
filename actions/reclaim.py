"""reclaim (DESIGN 6.4): across queues, a job of a queue below its fair share
evicts tasks of queues above theirs, while each victim queue stays at or
above its fair share and quota and the reclaimer stays within its own."""
from __future__ import annotations

from actions.eviction import (
    RoomFinder, evictable_tasks, place_by_eviction, starving_jobs, victim_order,
)
from kaisched.api.task import TaskInfo
from kaisched.api.types import QueueName
from kaisched.framework import Hook, Session


class ReclaimAction:
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        jobs = starving_jobs(ssn)
        candidates = sorted(evictable_tasks(ssn), key=victim_order(ssn)) if jobs else []
        if not candidates:
            return
        releasing_at_start = ssn.cluster.table.releasing.copy()
        finders: dict[QueueName, RoomFinder] = {}
        for job, tasks in jobs:
            if ssn.job_pipelined(job) or ssn.overused(job, tasks[0]):
                continue

            def finder(task: TaskInfo, queue: QueueName = job.queue) -> RoomFinder:
                if queue not in finders:
                    victims = ssn.victims(Hook.RECLAIMABLE, task, candidates)
                    finders[queue] = RoomFinder(ssn, victims, releasing_at_start)
                return finders[queue]

            place_by_eviction(ssn, job, tasks, Hook.RECLAIMABLE, finder, "Preempted",
                              lambda t, job=job: ssn.allocatable(job, t) or ssn.overused(job, t),
                              verb="reclaimed")
