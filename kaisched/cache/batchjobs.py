"""The batch Jobs that say something of their pods' run time (a deadline the
Job controller enforces, Kueue's maximum execution time), and the pods each
controls: a pod's facts carry its Job's, read again when the Job changes."""
from __future__ import annotations

import attrs

from kaisched.api.types import PodKey
from kaisched.cache.convert import PodFacts
from kaisched.cache.convert.runtimes import BatchJob


class BatchJobs:
    def __init__(self) -> None:
        self._jobs: dict[str, BatchJob] = {}                # uid -> what it says
        self._pods: dict[str, set[PodKey]] = {}             # uid -> the pods it controls

    def resolve(self, facts: PodFacts) -> PodFacts:
        """The pod's facts with its Job's deadline and estimate."""
        runtime = facts.runtime
        owner = runtime.job if runtime is not None else None
        if runtime is None or owner is None:
            return facts
        job = self._jobs.get(owner.uid)
        deadline = job.deadline + owner.grace if job is not None and job.deadline is not None \
            else None
        expected = job.estimate if job is not None else None
        if runtime.deadline == deadline and runtime.job_expected == expected:
            return facts
        return facts._replace(runtime=attrs.evolve(runtime, deadline=deadline, job_expected=expected))

    def track(self, key: PodKey, before: PodFacts | None, facts: PodFacts | None) -> None:
        """Follow which Job controls the pod."""
        old, new = job_uid(before), job_uid(facts)
        if old == new:
            return
        if old is not None:
            pods = self._pods[old]
            pods.discard(key)
            if not pods:
                del self._pods[old]
        if new is not None:
            self._pods.setdefault(new, set()).add(key)

    def put(self, uid: str, job: BatchJob | None) -> tuple[PodKey, ...]:
        """The Job as it is now (None: gone, or saying nothing of run time);
        the pods whose facts must be read again."""
        if self._jobs.get(uid) == job:
            return ()
        if job is None:
            self._jobs.pop(uid, None)
        else:
            self._jobs[uid] = job
        return tuple(sorted(self._pods.get(uid, ())))


def job_uid(facts: PodFacts | None) -> str | None:
    """The uid of the batch Job that controls the pod, if one does."""
    runtime = facts.runtime if facts is not None else None
    return runtime.job.uid if runtime is not None and runtime.job is not None else None
