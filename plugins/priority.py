"""priority: higher PriorityClass value first, for jobs and for tasks."""
from __future__ import annotations

from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.framework import Hook, PluginBase, Session


class PriorityPlugin(PluginBase):
    name = "priority"

    def on_session_open(self, ssn: Session) -> None:
        ssn.register(Hook.JOB_ORDER, _job_key)
        ssn.register(Hook.TASK_ORDER, _task_key)


def _job_key(job: JobInfo) -> int:
    return -job.priority


def _task_key(task: TaskInfo) -> int:
    return -task.priority
