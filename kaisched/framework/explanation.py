"""Why no node takes a task, by filter, in numbers: the words of a gang's
condition and of `kaisched explain`, from the same filters that decided."""
from __future__ import annotations

from typing import Any

import numpy as np

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.node import EPSILON
from kaisched.api.resource import format_amount
from kaisched.api.task import TaskInfo
from kaisched.api.types import NodeName
from kaisched.framework.hooks import Hook
from kaisched.framework.selection import RESOURCE_FIT, NodeSelection


class Explanation:
    def __init__(self, cluster: ClusterInfo, selection: NodeSelection) -> None:
        self.cluster = cluster
        self.selection = selection
        self._explained: dict[tuple[Any, ...], str] = {}

    def task(self, task: TaskInfo) -> str:
        """Why no node takes the task. The same for its whole class while no
        node changes: a long queue of alike jobs that wait is explained once."""
        key = (self.selection.class_key(task), self.cluster.table.version)
        found = self._explained.get(key)
        if found is None:
            found = self._explained[key] = self._explain(task)
        return found

    def node(self, task: TaskInfo, node: NodeName) -> str | None:
        """Why this node does not take the task (the first filter that refuses,
        resources in numbers), or None if it fits now or once room is released."""
        table = self.cluster.table
        row = np.array([table.index[node]])
        for found in self.selection.filters():
            if found.fn(task, row)[0]:
                continue
            if found.label != RESOURCE_FIT:
                return found.label.replace("node(s)", "node")
            vec, room = table.vector(task.resreq), table.future[row[0]]
            short = [f"{d} (need {format_amount(d, table.amount(i, vec[i]))}, "
                     f"{format_amount(d, max(table.amount(i, room[i]), 0.0))} free)"
                     for i, d in enumerate(table.dims) if vec[i] > room[i] + EPSILON]
            return "insufficient " + ", ".join(short)
        return None

    def _explain(self, task: TaskInfo) -> str:
        table = self.cluster.table
        alive = np.ones(len(table), dtype=bool)
        parts: list[str] = []
        resource_fit = None
        for found in self.selection.filters():
            if found.label == RESOURCE_FIT:
                resource_fit = found.fn
                continue
            passed = found.fn(task, self.selection.all_rows)
            rejected = int((alive & ~passed).sum())
            alive &= passed
            if rejected:
                parts.append(f"{found.label} on {_nodes(rejected)}")
        if resource_fit is not None and alive.any():
            vec = table.vector(task.resreq)
            room = table.future[alive]
            for d, name in enumerate(table.dims):
                if vec[d] <= 0:
                    continue
                short = room[:, d] < vec[d] - EPSILON
                if short.any():
                    best = max(table.amount(d, room[:, d].max()), 0.0)
                    parts.append(f"insufficient {name} on {_nodes(int(short.sum()))} "
                                 f"(need {format_amount(name, table.amount(d, vec[d]))}, "
                                 f"best node has {format_amount(name, best)} free)")
        if not len(table):
            return "no nodes in the cluster"
        parts += self.selection.hooks.reasons(Hook.EXPLAIN, task)
        return "; ".join(parts) or "no node fits"


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"
