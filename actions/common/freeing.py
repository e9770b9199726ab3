"""When room on a node is sure to be free: what is free on it now, and then
what its pods give back as they end by their enforced limits
(activeDeadlineSeconds, their Job's, and the grace period after it;
TaskInfo.ends_by). A pod without a limit never ends, as far as this knows;
nor does another scheduler's pod.

And when it is likely free: the same, with the pods' estimated run times
(kaisched.io/expected-runtime, Kueue's maximum execution time, their
gang's or queue's) where sooner. An estimate orders and informs; what is
lent is decided by the limits alone."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from kaisched.api.node import EPSILON
from kaisched.api.task import TaskInfo
from kaisched.api.types import LIVE_READY_STATUSES
from kaisched.framework import Session

Timeline = tuple[np.ndarray, np.ndarray]     # end times in order, the room given back by each


def expected_runtime(ssn: Session, task: TaskInfo) -> float | None:
    """The task's estimated run time: its own (or its Job's), else its gang's, else its queue's."""
    if task.expected is not None:
        return task.expected
    job = ssn.cluster.jobs.get(task.job)
    if job is None:
        return None
    if job.spec.expected_runtime is not None:
        return job.spec.expected_runtime
    queue = ssn.cluster.queues.get(job.queue)
    return queue.expected_runtime if queue is not None else None


class Freeing:
    """Per node row, asked lazily: its pods' ends in time order, and the room
    they give back by then, summed."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._sure: dict[int, Timeline] = {}
        self._likely: dict[int, Timeline] = {}

    def ready_at(self, row: int, need: np.ndarray) -> float:
        """When need (room beyond what is free on the row now) is sure to be
        free there: now when it is nothing, inf when no ends give it."""
        return self._at(self._timeline(row, self._sure, self._sure_end), need)

    def likely_at(self, row: int, need: np.ndarray) -> float:
        """When need is likely free there, by estimates where pods have them."""
        return self._at(self._timeline(row, self._likely, self._likely_end), need)

    def _at(self, timeline: Timeline, need: np.ndarray) -> float:
        if (need <= EPSILON).all():
            return self.ssn.now
        times, given = timeline
        covered = np.flatnonzero((given >= need - EPSILON).all(axis=1))
        return float(times[covered[0]]) if len(covered) else math.inf

    def _sure_end(self, task: TaskInfo) -> float | None:
        return task.ends_by(self.ssn.now)

    def _likely_end(self, task: TaskInfo) -> float | None:
        return task.likely_end(self.ssn.now, expected_runtime(self.ssn, task))

    def _timeline(self, row: int, kept: dict[int, Timeline],
                  end_of: Callable[[TaskInfo], float | None]) -> Timeline:
        found = kept.get(row)
        if found is None:
            table = self.ssn.cluster.table
            node = self.ssn.cluster.nodes[table.names[row]]
            ends = sorted((end, key) for key, task in node.tasks.items()
                          if task.status in LIVE_READY_STATUSES
                          and (end := end_of(task)) is not None)
            times = np.array([end for end, _ in ends], dtype=np.float64)
            vecs = [table.vector(node.tasks[key].resreq) for _, key in ends]
            given = np.cumsum(vecs, axis=0) if vecs else np.zeros((0, table.alloc.shape[1]))
            found = kept[row] = (times, given)
        return found
