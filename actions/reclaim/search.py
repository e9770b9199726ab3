"""The victim search of reclaim, task by task.

For k = 1, 2, ... up to the tasks the job needs, keeping the victims chosen
for k - 1: try to place the first k tasks with every chosen unit evicted;
when they do not fit, add the next unit in victim order and try again (only
when one of its nodes could now take one of the tasks). A scenario that
places the k tasks puts back every victim job that still fits where it runs,
whole (one put back is no victim), and must pass the plugins' fairness check on
what is left; the first such scenario is kept for this k. If some k has
none, nothing is evicted for the job.

The walk stops early when no scenario can place every task: once it has
handed out as many units as there are nodes some task may take (so the
check costs no more than the walk so far), the room those nodes could ever
offer -- free now plus everything the candidate jobs could give there -- is
compared with what the tasks ask: a task that fits on none of its nodes, or
tasks asking more than all of them together, end the search (a gang kept to
a few full nodes of its own queue no longer walks every victim of the
cluster).
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from actions.common.victims import Unit, VictimPicker
from kaisched.api.dradevices import DeviceKey
from kaisched.api.node import EPSILON
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES
from kaisched.framework import Session, Statement
from kaisched.framework.effects import Cause, Preemptor
from kaisched.framework.statement import ClaimOp

Within = Callable[[TaskInfo], "np.ndarray | None"]
Fair = Callable[[list[Unit]], "str | None"]


class ReclaimSearch:
    def __init__(self, ssn: Session, tasks: list[TaskInfo], picker: VictimPicker,
                 within: Within, fair: Fair) -> None:
        self.ssn = ssn
        self.tasks = tasks
        self.picker = picker
        self.within = within
        self.fair = fair
        table = ssn.cluster.table
        self._freed: dict[int, np.ndarray] = {}     # per row: what the chosen units hold there
        self._vecs = [table.vector(t.resreq) for t in tasks]
        # Per task, the nodes its own rules let it onto (one mask per class):
        # a victim elsewhere frees nothing it could use, so no placement is
        # tried for it -- without this a gang kept to one rack tried and
        # undid a placement for nearly every unit of a 50,000-node cluster.
        classes: dict[object, int] = {}
        masks: list[np.ndarray] = []
        of_task = []
        for task in tasks:
            key = ssn.class_key(task)
            if key not in classes:
                classes[key] = len(masks)
                masks.append(ssn.node_mask(task))
            of_task.append(classes[key])
        self._masks = np.array(masks)
        self._class = np.array(of_task, dtype=int)
        # The nodes some task may take: room freed elsewhere is never looked at.
        self._usable: np.ndarray = np.any(self._masks, axis=0)
        # Units handed out before the bound is checked (see the module's docstring).
        self._check_after = max(int(self._usable.sum()), 1)

    def solve(self) -> list[Unit] | None:
        """The victims of the scenario that places every task, or None."""
        chosen: list[Unit] = []
        victims: list[Unit] | None = None
        walked = 0
        for k in range(1, len(self.tasks) + 1):
            want = self.tasks[:k]
            newest: Unit | None = None
            while True:
                if newest is None or self._may_help(newest, k):
                    victims = self._attempt(chosen, want)
                    self.picker.forget()
                    if victims is not None and (not victims or self.fair(victims) is None):
                        break
                newest = self.picker.next()
                if newest is None:
                    return None
                walked += 1
                if walked == self._check_after and not self._could_fit():
                    return None     # what the walk would end with, after every unit
                chosen.append(newest)
                self._note(newest)
        return victims

    def apply(self, victims: list[Unit], by: Callable[[TaskInfo], Preemptor],
              cause: Cause = Cause.RECLAIM) -> Statement | None:
        """The victims evicted and every task pipelined, under one statement."""
        stmt = self.ssn.statement()
        self._evict(stmt, victims, cause, by(self.tasks[0]))
        if self.place(stmt, self.tasks):
            return stmt
        stmt.discard()
        return None

    # -- internals ------------------------------------------------------------------
    def _could_fit(self) -> bool:
        """Every task fits on one of its nodes, and all of them within those
        nodes together, with every task of a candidate job there evicted (the
        most room any scenario could have). Devices (claims, shares of a GPU)
        are not in the table's columns: for such tasks no bound is drawn."""
        if any(t.claims or t.gpu is not None for t in self.tasks):
            return True
        cluster = self.ssn.cluster
        table, jobs = cluster.table, self.picker.jobs
        rows = np.flatnonzero(self._usable)
        room = table.future[rows].copy()
        for i, row in enumerate(rows.tolist()):
            node = cluster.nodes.get(table.names[row])
            for task in node.tasks.values() if node is not None else ():
                if task.job in jobs and task.status in EVICTABLE_STATUSES:
                    room[i] += cluster.freed_by(task)
        need = np.array(self._vecs)
        fits = (need[:, None, :] <= room[None, :, :] + EPSILON).all(axis=2)
        if not (fits & self._masks[:, rows][self._class]).any(axis=1).all():
            return False
        slack = EPSILON * len(self.tasks)        # each placement's own tolerance
        return bool((need.sum(axis=0) <= np.clip(room, 0, None).sum(axis=0) + slack).all())

    def _rows(self, unit: Unit) -> Iterator[tuple[int, TaskInfo]]:
        """The unit's tasks on the nodes this scheduler sees, with their rows. A
        gang goes whole, on every node, but its pods on a node of another pool
        (relabelled, or its own pods there) or on a node gone free nothing here."""
        index = self.ssn.cluster.table.index
        for task in unit.tasks:
            row = index.get(task.node_name) if task.node_name is not None else None
            if row is not None:
                yield row, task

    def _note(self, unit: Unit) -> None:
        usable = self._usable
        for row, task in self._rows(unit):
            if not usable[row]:
                continue        # no task may take the node: what it frees there never counts
            vec = self.ssn.cluster.freed_by(task)
            if row in self._freed:
                self._freed[row] = self._freed[row] + vec
            else:
                self._freed[row] = vec

    def _may_help(self, unit: Unit, k: int) -> bool:
        """One of the unit's nodes, with every chosen unit gone, would have
        room for one of the first k tasks, and lets it in."""
        table = self.ssn.cluster.table
        usable = self._usable
        rows = sorted({row for row, _ in self._rows(unit) if usable[row]})
        if not rows:
            return False        # none of its nodes lets any of the tasks in
        room = table.future[rows] + np.array([self._freed[r] for r in rows])
        need = np.array(self._vecs[:k])
        fits = (need[:, None, :] <= room[None, :, :] + EPSILON).all(axis=2)
        return bool((fits & self._masks[:, rows][self._class[:k]]).any())

    def _relevant(self, chosen: list[Unit], k: int) -> list[Unit]:
        """The chosen units with a task on a node that, with every chosen
        unit gone, would have room for one of the first k tasks and lets it
        in: evicting the others could help no task, and they would be put
        back anyway."""
        if not self._freed:
            return []       # none of them frees room on a node here
        table = self.ssn.cluster.table
        rows = np.fromiter(self._freed, dtype=int, count=len(self._freed))
        room = table.future[rows] + np.array([self._freed[r] for r in rows])
        need = np.array(self._vecs[:k])
        fits = (need[:, None, :] <= room[None, :, :] + EPSILON).all(axis=2)
        useful = set(rows[(fits & self._masks[:, rows][self._class[:k]]).any(axis=0)].tolist())
        jobs = {u.job for u in chosen if any(row in useful for row, _ in self._rows(u))}
        # A job's units go together: its rest was a unit only once its surplus was taken.
        return [u for u in chosen if u.job in jobs]

    def _evict(self, stmt: Statement, units: list[Unit], cause: Cause,
               by: Preemptor | None) -> None:
        jobs = self.ssn.cluster.jobs
        for unit in units:
            for task in unit.tasks:
                current = jobs[task.job].tasks.get(task.key)
                if current is not None and current.status in EVICTABLE_STATUSES:
                    stmt.evict(current, cause, by)

    def place(self, stmt: Statement, tasks: list[TaskInfo]) -> bool:
        """Pipeline the tasks, each on its best node; True if all are placed."""
        for task in tasks:
            choice = self.ssn.select_node(task, within=self.within(task))
            if choice is None:
                return False
            stmt.pipeline(task, choice.node)
        return True

    @staticmethod
    def _devices_taken(stmt: Statement) -> set[DeviceKey]:
        """The devices the statement's placed tasks' ResourceClaims were given."""
        return {r.key for op in stmt.ops if isinstance(op, ClaimOp) and op.new.allocation
                for r in op.new.allocation.results if op.old.allocation is None}

    def _holds(self, units: list[Unit], devices: set[DeviceKey]) -> bool:
        """Some task of the units holds one of these devices through a claim."""
        claims = self.ssn.cluster.devices.claims
        return any(claim.allocation is not None and any(r.key in devices for r in claim.allocation.results)
                   for u in units for t in u.tasks for key in t.claims
                   if (claim := claims.get(key)) is not None)

    def _attempt(self, chosen: list[Unit], want: list[TaskInfo]) -> list[Unit] | None:
        """The victims that placing want with every chosen unit gone needs:
        the chosen, less those that still fit where they run; None when want
        does not fit even so."""
        chosen = self._relevant(chosen, len(want))
        stmt = self.ssn.statement()
        self._evict(stmt, chosen, Cause.RECLAIM, None)
        if not self.place(stmt, want):
            stmt.discard()
            return None
        table = self.ssn.cluster.table
        room = table.future.copy()
        # A victim job is put back whole or not at all: its surplus task put
        # back while the rest of it goes would leave a partial gang.
        by_job: dict[str, list[Unit]] = {}
        for unit in chosen:
            by_job.setdefault(unit.job, []).append(unit)
        kept: set[str] = set()
        promised = self._devices_taken(stmt)
        for job, units in by_job.items():
            back: dict[int, np.ndarray] = {}
            for row, task in (rt for u in units for rt in self._rows(u)):
                back[row] = back.get(row, 0) + self.ssn.cluster.freed_by(task)
            if promised and self._holds(units, promised):
                continue        # the placed tasks took its devices: it cannot come back
            if all(table.fits(vec, room[row:row + 1])[0] for row, vec in back.items()):
                for row, vec in back.items():
                    room[row] -= vec
                kept.add(job)
        stmt.discard()
        return [u for u in chosen if u.job not in kept]
