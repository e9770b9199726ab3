"""When room on a node is sure to be free: what is free on it now, and then
what its pods give back as they end by their enforced limits
(activeDeadlineSeconds and the grace period after it; TaskInfo.ends_by). A
pod without a limit never ends, as far as this knows; nor does another
scheduler's pod."""
from __future__ import annotations

import math

import numpy as np

from kaisched.api.node import EPSILON
from kaisched.api.types import LIVE_READY_STATUSES
from kaisched.framework import Session


class Freeing:
    """Per node row, asked lazily: its pods' ends in time order, and the room
    they give back by then, summed."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self._rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def ready_at(self, row: int, need: np.ndarray) -> float:
        """When need (room beyond what is free on the row now) is sure to be
        free there: now when it is nothing, inf when no ends give it."""
        if (need <= EPSILON).all():
            return self.ssn.now
        times, given = self._ends(row)
        covered = np.flatnonzero((given >= need - EPSILON).all(axis=1))
        return float(times[covered[0]]) if len(covered) else math.inf

    def _ends(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        found = self._rows.get(row)
        if found is None:
            table, now = self.ssn.cluster.table, self.ssn.now
            node = self.ssn.cluster.nodes[table.names[row]]
            ends = sorted((end, key) for key, task in node.tasks.items()
                          if task.status in LIVE_READY_STATUSES
                          and (end := task.ends_by(now)) is not None)
            times = np.array([end for end, _ in ends], dtype=np.float64)
            vecs = [table.vector(node.tasks[key].resreq) for _, key in ends]
            given = np.cumsum(vecs, axis=0) if vecs else np.zeros((0, table.alloc.shape[1]))
            found = self._rows[row] = (times, given)
        return found

