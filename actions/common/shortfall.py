"""What of a gang today's free room cannot hold, without evicting anyone:
the pods left over when its still-needed pods are packed, largest first,
each onto the node it fits most tightly (free now or being freed, room held
for others counted as taken). Packing is hard in general; this is the
best-fit-decreasing answer, which finds room whenever room is plain.

Many gangs are asked about in one pass (the autoscale action asks about
every waiting one), and most of them find no node at all: so the nodes a
pod shape fits on are found once over the whole table, per shape, and each
gang then packs only within them."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from kaisched.api.node import EPSILON, tightest
from kaisched.api.task import TaskInfo
from kaisched.framework import Session


class Shortfall:
    """Asks about gangs against the free room as it is: nothing may place or
    evict between two questions (the room is read once)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        table = ssn.cluster.table
        self.usable = ssn.cluster.usable_nodes()
        self.weights = table.weights()
        # Free now or being freed, less the room held for any gang: a gang
        # holding room gets its own back on its rows.
        self.free = table.future - ssn.starving.total
        self._rows: dict[tuple[Any, ...], np.ndarray] = {}
        self._static: dict[tuple[Any, ...], np.ndarray] = {}

    def unplaceable(self, tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
        """The tasks (of one gang) no packing of the free room found a node for."""
        table = self.ssn.cluster.table
        own = self.ssn.starving.rooms.get(tasks[0].job) if tasks else None
        vecs = [table.vector(t.resreq) for t in tasks]
        order = sorted(range(len(tasks)), key=lambda i: -float((vecs[i] / self.weights).sum()))
        taken: np.ndarray | None = None         # what this gang's pods took, once one did
        left: list[TaskInfo] = []
        for i in order:
            task, vec = tasks[i], vecs[i]
            rows = self._fitting(task, vec, own)
            room = self.free[rows] if own is None else self.free[rows] + own[rows]
            if taken is not None:
                room = room - taken[rows]
            best = tightest(room, vec, self.weights)
            if best is None:
                left.append(task)
                continue
            row = rows[best]
            if taken is None:
                taken = np.zeros_like(self.free)
            taken[row] += vec
        return sorted(left, key=lambda t: t.key)

    def _fitting(self, task: TaskInfo, vec: np.ndarray, own: np.ndarray | None) -> np.ndarray:
        """The rows a pod of the task's shape fits on, empty: found once per
        shape over the whole table; for a gang holding room, with the rows
        its own room adds."""
        key = self.ssn.class_key(task)
        rows = self._rows.get(key)
        if rows is None:
            static = self._static[key] = self.ssn.static_mask(task) & self.usable
            rows = self._rows[key] = np.flatnonzero(
                static & (self.free >= vec - EPSILON).all(axis=1))
        if own is None:
            return rows
        mine = self.ssn.starving.rows_of(task.job)
        mine = mine[self._static[key][mine]
                    & ((self.free[mine] + own[mine]) >= vec - EPSILON).all(axis=1)]
        return np.union1d(rows, mine)
