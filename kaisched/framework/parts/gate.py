"""The enqueue gate: which gangs may be placed this session."""
from __future__ import annotations

from typing import Callable, Sequence

from kaisched.api.job import JobInfo
from kaisched.api.resource import Resource
from kaisched.api.types import JobKey, QueueName


class Gate:
    """Open (every gang may be placed) until the enqueue action closes it;
    then only the gangs it admits. Of those, the ones not started yet keep
    their queue and minResources, which later admissions must leave (the
    queue kept here: a PodGroup with no pods yet is no job of the cluster's)."""

    def __init__(self) -> None:
        self._admitted: set[JobKey] | None = None       # None: open
        self._inqueue: dict[JobKey, tuple[QueueName, Resource]] = {}

    @property
    def closed(self) -> bool:
        """The enqueue action runs: only the gangs it admits pass."""
        return self._admitted is not None

    def close(self) -> None:
        """From now on only the gangs admitted (from now on) pass."""
        self._admitted = set()

    def admits(self, job: JobInfo) -> bool:
        """The gate lets the job be placed (always, while it is open)."""
        return self._admitted is None or job.key in self._admitted

    def admitted(self, job: JobInfo) -> bool:
        """The enqueue action admitted the job (never, while the gate is open)."""
        return self._admitted is not None and job.key in self._admitted

    def admit(self, job: JobInfo, ready: Callable[[JobInfo], bool]) -> None:
        """Let the job pass; its minResources count as waiting to start
        until it is ready (asked only of a job that declares them)."""
        assert self._admitted is not None, "admit() is the enqueue action's"
        self._admitted.add(job.key)
        if job.spec.min_resources is not None and not ready(job):
            self._inqueue[job.key] = (job.queue, job.spec.min_resources)

    def inqueue_request(self, but: JobInfo, queues: Sequence[str] | None = None) -> Resource:
        """minResources of the admitted gangs not started yet, but one, in
        the given queues (default: everywhere)."""
        total = Resource()
        for key, (queue, need) in self._inqueue.items():
            if key != but.key and (queues is None or queue in queues):
                total = total + need
        return total
