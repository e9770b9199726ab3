"""Why no node takes a task, by filter, in numbers: the words of a gang's
condition and of `kaisched explain`, from the same filters that decided."""
from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from kaisched.api.clock import clock_text
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.node import EPSILON
from kaisched.api.resource import format_amount
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, NodeName
from kaisched.framework.hooks import Hook
from kaisched.framework.selection import RESOURCE_FIT, NodeSelection

# The cause of a node that has the room, but holds it for another gang: a
# starving gang's reservation, capacity provisioned for a gang, a moved pod's place.
HELD_ROOM = "room held for another gang"


@attrs.frozen
class Short:
    """A resource a node lacks for a task: what the task needs, what the node has free
    (internal units: millicores, bytes, units)."""
    resource: str
    need: float
    free: float


@attrs.frozen
class Refusal:
    """The first filter that keeps a task off a node: its label as its plugin registered
    it, the class of what blocks it, and for the resource fit the resources short."""
    filter: str
    code: Blocker
    short: tuple[Short, ...] = ()


@attrs.frozen
class Cause:
    """One reason no node takes a task: a filter and how many nodes it refuses, or a
    resource short on node_count nodes (need per pod, best_free the most one node has)."""
    code: Blocker
    filter: str
    node_count: int
    resource: str | None = None
    need: float | None = None
    best_free: float | None = None


class Explanation:
    def __init__(self, cluster: ClusterInfo, selection: NodeSelection,
                 backfill: bool = True) -> None:
        self.cluster = cluster
        self.selection = selection
        self.backfill = backfill            # reservation backfill: held room lent
        self._explained: dict[tuple[Any, ...], str] = {}

    def task(self, task: TaskInfo) -> str:
        """Why no node takes the task. The same for its whole class while no
        node changes: a long queue of alike jobs that wait is explained once."""
        key = (self.selection.class_key(task), self.cluster.table.version,
               # room held is lent by when the job is sure to end
               self.selection.ends_by(task.job) if self.selection.reserved_for else None)
        found = self._explained.get(key)
        if found is None:
            found = self._explained[key] = self._explain(task)
        return found

    def node(self, task: TaskInfo, node: NodeName) -> str | None:
        """Why this node does not take the task (the first filter that refuses,
        resources in numbers), or None if it fits now or once room is released."""
        found = self.refusal(task, node)
        if found is None:
            return None
        if found.filter != RESOURCE_FIT:
            return found.filter.replace("node(s)", "node")
        return "insufficient " + ", ".join(
            f"{s.resource} (need {format_amount(s.resource, s.need)}, "
            f"{format_amount(s.resource, s.free)} free)" for s in found.short)

    def refusal(self, task: TaskInfo, node: NodeName) -> Refusal | None:
        """The first filter that keeps the task off this node, or None if it fits now
        or once room is released."""
        table = self.cluster.table
        row = np.array([table.index[node]])
        for found in self.selection.filters():
            if found.fn(task, row)[0]:
                continue
            if found.label != RESOURCE_FIT:
                return Refusal(found.label, found.blocker)
            vec, room = table.vector(task.resreq), table.future[row[0]]
            return Refusal(found.label, Blocker.RESOURCES, tuple(
                Short(d, table.amount(i, vec[i]), max(table.amount(i, room[i]), 0.0))
                for i, d in enumerate(table.dims) if vec[i] > room[i] + EPSILON))
        return None

    def causes(self, task: TaskInfo) -> list[Cause]:
        """Why no node takes the task: each filter that refuses some node the filters
        before it let in, with how many, then each resource too few of those left have."""
        table = self.cluster.table
        alive = np.ones(len(table), dtype=bool)
        found_causes: list[Cause] = []
        resource_fit = None
        for found in self.selection.filters():
            if found.label == RESOURCE_FIT:
                resource_fit = found.fn
                continue
            passed = found.fn(task, self.selection.all_rows)
            rejected = int((alive & ~passed).sum())
            alive &= passed
            if rejected:
                found_causes.append(Cause(found.blocker, found.label, rejected))
        if resource_fit is not None and alive.any():
            vec = table.vector(task.resreq)
            room = table.future[alive]
            for d, name in enumerate(table.dims):
                if vec[d] <= 0:
                    continue
                short = room[:, d] < vec[d] - EPSILON
                if short.any():
                    found_causes.append(Cause(
                        Blocker.RESOURCES, RESOURCE_FIT, int(short.sum()), name,
                        table.amount(d, vec[d]), max(table.amount(d, room[:, d].max()), 0.0)))
            held = self._held(task, alive)
            if held:
                found_causes.append(Cause(Blocker.RESOURCES, HELD_ROOM, held))
        return found_causes

    def _held(self, task: TaskInfo, alive: np.ndarray) -> int:
        """On how many of the nodes alive the task would fit but for room
        held for other gangs (and not lent to it)."""
        selection = self.selection
        if not selection.reserved_for:
            return 0
        owner = task.job if task.job in selection.reserved_for else None
        rows, room = selection.starving.beside(owner, selection.starving.lent(
            selection.ends_by(task.job)))
        if not len(rows):
            return 0
        table = self.cluster.table
        vec = table.vector(task.resreq)
        free = alive[rows] & table.fits(vec, table.future[rows])
        return int((free & ~table.fits(vec, table.future[rows] - room)).sum())

    def _lending(self, task: TaskInfo) -> str:
        """Why the room held for reservations is not lent to the task's job."""
        if not self.backfill:
            return "reservation backfill is off: held room is lent to no job"
        ends = self.selection.ends_by(task.job)
        if ends is None:
            return ("reservation backfill lends held room only to jobs sure to end before the "
                    "reservation starts: some pod of this job has no enforced limit "
                    "(activeDeadlineSeconds, its own or its Job's)")
        # Said by the reservations' start, not the job's end: a pod not
        # started yet counts from now, and a message that moved with every
        # session would be written again every session.
        starving = self.selection.starving
        starts = [start for job in starving.rooms if job != task.job
                  and (start := starving.start(job)) is not None and start < ends]
        if not starts:
            return ("reservation backfill lends held room only to jobs sure to end before the "
                    "reservation starts: its start is not known")
        return (f"reservation backfill lends held room only to jobs sure to end before the "
                f"reservation starts: this job is not sure to end by "
                f"{clock_text(min(starts), self.cluster.now)}")

    def _explain(self, task: TaskInfo) -> str:
        parts = [f"insufficient {c.resource} on {_nodes(c.node_count)} "
                 f"(need {format_amount(c.resource, c.need or 0.0)}, best node has "
                 f"{format_amount(c.resource, c.best_free or 0.0)} free)"
                 if c.resource is not None else f"{c.filter} on {_nodes(c.node_count)}"
                 for c in self.causes(task)]
        if not len(self.cluster.table):
            return "no nodes in the cluster"
        parts += self.selection.hooks.reasons(Hook.EXPLAIN, task)
        if self.selection.starving.reservations and any(
                part.startswith(HELD_ROOM) for part in parts):
            parts.append(self._lending(task))
        return "; ".join(parts) or "no node fits"


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"
