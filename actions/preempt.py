"""preempt (DESIGN 6.3): within one queue, a starving job evicts tasks of
preemptible jobs with strictly lower priority, gang-wise, and is pipelined
onto the room; nothing is evicted unless the job becomes pipelined-ready."""
from __future__ import annotations

from actions.eviction import (
    RoomFinder, evictable_tasks, place_by_eviction, starving_jobs, victim_order,
)
from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import QueueName
from kaisched.framework import Hook, Session


class PreemptAction:
    name = "preempt"

    def execute(self, ssn: Session) -> None:
        jobs = starving_jobs(ssn)
        if not jobs:
            return
        releasing_at_start = ssn.cluster.table.releasing.copy()
        by_queue: dict[QueueName, list[TaskInfo]] = {}
        for task in sorted(evictable_tasks(ssn), key=victim_order(ssn)):
            by_queue.setdefault(ssn.cluster.jobs[task.job].queue, []).append(task)
        finders: dict[tuple[QueueName, int], RoomFinder] = {}
        for job, tasks in jobs:
            if not by_queue.get(job.queue) or ssn.job_pipelined(job):
                continue

            def finder(task: TaskInfo, job: JobInfo = job) -> RoomFinder:
                key = (job.queue, job.priority)
                if key not in finders:
                    victims = ssn.victims(Hook.PREEMPTABLE, task, by_queue[job.queue])
                    finders[key] = RoomFinder(ssn, victims, releasing_at_start)
                return finders[key]

            place_by_eviction(ssn, job, tasks, Hook.PREEMPTABLE, finder, "Preempted",
                              lambda t, job=job: ssn.allocatable(job, t))
