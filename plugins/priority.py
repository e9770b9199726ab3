"""priority: higher PriorityClass value first, for jobs and for tasks; a
preemptor may only evict tasks of jobs with strictly lower priority."""
from __future__ import annotations

from typing import Sequence

from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.framework import Hook, PluginBase, Session


class PriorityPlugin(PluginBase):
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        jobs = ssn.cluster.jobs
        ssn.register(Hook.JOB_ORDER, _job_key)
        ssn.register(Hook.TASK_ORDER, _task_key)

        def lower(preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
            mine = jobs[preemptor.job].priority
            return [c for c in candidates if jobs[c.job].priority < mine]

        ssn.register(Hook.PREEMPTABLE, lower)
        # ... which preempt may ask up front, to look only at jobs below it.
        ssn.register(Hook.PREEMPT_BELOW, lambda preemptor: jobs[preemptor.job].priority)


def _job_key(job: JobInfo) -> int:
    return -job.priority


def _task_key(task: TaskInfo) -> int:
    return -task.priority
