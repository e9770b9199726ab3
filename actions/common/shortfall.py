"""What of a gang today's free room cannot hold, without evicting anyone:
the pods left over when its still-needed pods are packed, largest first,
each onto the node it fits most tightly (free now or being freed, room held
for others counted as taken). Packing is hard in general; this is the
best-fit-decreasing answer, which finds room whenever room is plain."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from kaisched.api.node import EPSILON
from kaisched.api.task import TaskInfo
from kaisched.framework import Session


def unplaceable(ssn: Session, tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
    """The tasks (of those given) no packing of the free room found a node for."""
    table = ssn.cluster.table
    free = table.future.copy()
    usable = ssn.cluster.usable_nodes()
    scale = np.where(table.alloc > 0, table.alloc, 1.0).max(axis=0)      # per resource
    vecs = [table.vector(t.resreq) for t in tasks]
    order = sorted(range(len(tasks)), key=lambda i: -float((vecs[i] / scale).sum()))
    left: list[TaskInfo] = []
    for i in order:
        task, vec = tasks[i], vecs[i]
        fits = ssn.static_mask(task) & usable & (free >= vec - EPSILON).all(axis=1)
        rows = np.flatnonzero(fits)
        if not len(rows):
            left.append(task)
            continue
        spare = ((free[rows] - vec) / scale).sum(axis=1)
        row = rows[int(np.argmin(spare))]
        free[row] -= vec
    return sorted(left, key=lambda t: t.key)
