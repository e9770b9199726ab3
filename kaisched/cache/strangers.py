"""Other schedulers' pods in a gang of the upstream Workload API, whose pods
must all name one scheduler: the gang's declaration reads them (a mixed
group waits)."""
from __future__ import annotations

from typing import Mapping

from kaisched.api.types import JobKey, PodKey, TaskStatus
from kaisched.cache.convert import PodFacts
from kaisched.cache.jobs import WORKLOAD_SOURCES

# Pods that no longer count in a gang: another scheduler's are not strangers to it then.
_DONE = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
_NONE: tuple[JobKey, ...] = ()


class Strangers:
    """Kept by the model: put_pod hands it every pod (note), catch_up reads
    each changed job's strangers (of) for its declaration."""

    def __init__(self, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self._by_job: dict[JobKey, dict[PodKey, str]] = {}     # job -> pod -> its schedulerName
        self._job_of: dict[PodKey, JobKey] = {}

    def note(self, key: PodKey, facts: PodFacts | None) -> tuple[JobKey, ...]:
        """The pod as it is now (None: gone); the jobs whose strangers changed
        (the one it left, then the one it joined)."""
        was = self._job_of.get(key)
        now = None
        if facts is not None and facts.scheduler_name != self.scheduler_name \
                and facts.gang.source in WORKLOAD_SOURCES \
                and facts.status is not None and facts.status not in _DONE:
            now = facts.job
        if was == now and (now is None or facts is None
                           or self._by_job[now][key] == facts.scheduler_name):
            return _NONE
        changed: tuple[JobKey, ...] = ()
        if was is not None:
            del self._job_of[key]
            members = self._by_job[was]
            del members[key]
            if not members:
                del self._by_job[was]
            changed = (was,)
        if now is not None and facts is not None:
            self._job_of[key] = now
            self._by_job.setdefault(now, {})[key] = facts.scheduler_name
            changed += (now,)
        return changed

    def of(self, job: JobKey) -> Mapping[PodKey, str] | None:
        """The job's strangers: pod -> the scheduler it names (None: none)."""
        return self._by_job.get(job)
