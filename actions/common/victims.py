"""Victims for reclaim, one unit at a time, in the order they give.

A unit is what goes together: a job running more tasks than its minimum
gives one task at a time (its newest that keeps every subgroup's minimum), or
a whole subgroup its tree can do without ("2 of my 4 stages": a third stage
goes whole), and stays a candidate; otherwise all its running tasks go
together, on every node (a partial gang is useless). The order is re-evaluated after each pick,
walking the queue tree from the root: the plugins rank the queues (over fair
share, over quota, priority, saturation after what was already taken,
newer); inside a leaf, lower job priority first, then jobs above their
minimum, then the newest job.
"""
from __future__ import annotations

from typing import Iterator

import attrs

from kaisched.api.job import JobInfo
from kaisched.api.queue import ROOT
from kaisched.api.resource import Resource, sum_resources
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES, Disruption, JobKey, QueueName, TaskStatus
from kaisched.framework import Session

_PLACED_NOW = (TaskStatus.ALLOCATED, TaskStatus.PIPELINED)


@attrs.frozen(slots=True)
class Unit:
    """Tasks evicted together: one chunk of the victim side's check."""

    job: JobKey
    queue: QueueName
    tasks: tuple[TaskInfo, ...]
    resources: Resource         # what they count against their queue (devices of claims too)


class VictimPicker:
    """Hands out the units of the candidate jobs, best victim first."""

    def __init__(self, ssn: Session, reclaimer: TaskInfo, candidates: list[JobInfo],
                 need: Resource, surplus_only: bool = False) -> None:
        self.ssn = ssn
        self.need = need
        self.surplus_only = surplus_only
        self.reclaimer = reclaimer
        self._queue_key = ssn.victim_queue_order_key
        self.taken: dict[QueueName, dict[str, float]] = {}    # per queue, its subtree's
        self.gone: dict[JobKey, set[str]] = {}                  # tasks handed out, per job
        self.handed: list[TaskInfo] = []        # ... all of them: disruption budgets count them
        self.leaves: dict[QueueName, list[JobInfo]] = {}
        self.jobs = {job.key for job in candidates}     # every job a unit may come from
        for job in candidates:
            self.leaves.setdefault(job.queue, []).append(job)
        for jobs in self.leaves.values():
            self._order(jobs)
        self.live: dict[QueueName, int] = {}          # candidate jobs in each subtree
        tree = ssn.cluster.tree
        for leaf, jobs in self.leaves.items():
            for q in self._up(leaf):
                self.live[q] = self.live.get(q, 0) + len(jobs)
        self._tree = tree
        # Each queue's place in the order, as last worked out: it changes only
        # when the queue's subtree gives a unit, or when the session's use
        # changes (forget()). Asked afresh for every unit, the keys of every
        # queue were most of a long walk through a big cluster's victims.
        self._keys: dict[QueueName, tuple[object, ...]] = {}

    def forget(self) -> None:
        """The session's use may have changed (a scenario was tried and
        undone): every queue's place is worked out again."""
        self._keys.clear()

    def _order(self, jobs: list[JobInfo]) -> None:
        """Lower priority first, then jobs above their minimum, then the
        newest (of equal age, by name)."""
        jobs.sort(key=lambda j: (j.priority, not self._above_min(j), -j.creation, j.key))

    def _up(self, queue: QueueName) -> Iterator[QueueName]:
        tree = self.ssn.cluster.tree
        while queue != ROOT and queue in tree:
            yield queue
            queue = next(iter(tree.predecessors(queue)), ROOT)

    def _running(self, job: JobInfo, here: bool = False) -> list[TaskInfo]:
        """here: only those on a node this scheduler sees. A task going alone is
        picked there: one on another pool's node (or a node gone) frees nothing here."""
        gone = self.gone.get(job.key, ())
        nodes = self.ssn.cluster.nodes
        return [t for t in job.tasks.values() if t.status in EVICTABLE_STATUSES
                and t.key not in gone and (not here or t.node_name in nodes)]

    def _above_min(self, job: JobInfo) -> bool:
        gone = self.gone.get(job.key)
        if job.count(job.ready_statuses) - (len(gone) if gone else 0) <= job.min_member:
            return False        # _spare's first answer, without its work: most jobs run at their minimum
        if job.spec.disruption is Disruption.ALL:
            return False        # it gives nothing but all of it
        return self._spare(job) is not None

    def _spare(self, job: JobInfo) -> list[TaskInfo] | None:
        """What the job can give and keep its minimum (its tree's, every
        subgroup left at its own or gone whole): its newest running task that
        may go alone, else the newest subgroup it can do without; None."""
        gone = self.gone.get(job.key, set())
        if job.count(job.ready_statuses) - len(gone) <= job.min_member:
            return None
        taken = [t for t in job.tasks.values() if t.key in gone]
        subtree: list[TaskInfo] | None = None
        tried: set[str | None] = set()
        for task in sorted(self._running(job, here=True), key=lambda t: (-t.creation, t.key)):
            if task.subgroup in tried:
                continue        # its subgroup's answer is known: the same for every task
            unit = job.eviction_unit(task, taken)
            if unit is None or any(t.status not in EVICTABLE_STATUSES for t in unit):
                tried.add(task.subgroup)
                continue
            if len(unit) == 1:
                return unit
            tried.add(task.subgroup)
            subtree = subtree or unit
        return subtree

    def _unit(self, job: JobInfo) -> tuple[Unit | None, bool]:
        """The job's next unit, and whether it stays a candidate after it. A
        declared disruption mode overrides the gang rule: pod by pod (its
        newest first), or only all of it."""
        job = self.ssn.cluster.jobs[job.key]        # as it is now
        mode = job.spec.disruption
        if mode is Disruption.SINGLE and not self.surplus_only:
            newest = min(self._running(job, here=True), key=lambda t: (-t.creation, t.key), default=None)
            spare = [newest] if newest is not None else None
        else:
            spare = None if mode is Disruption.ALL else self._spare(job)
        if spare is not None:
            tasks: list[TaskInfo] = spare
        elif self.surplus_only:
            return None, False
        else:
            tasks = self._running(job)
            # Tasks placed this session cannot be evicted: the gang stays whole.
            if not tasks or any(t.status in _PLACED_NOW for t in job.tasks.values()):
                return None, False
        # Asked with what was handed out of the job already: the plugins judge
        # everything the job would lose (a protected job gives only its surplus).
        gone = self.gone.get(job.key, ())
        considered = [*(t for t in job.tasks.values() if t.key in gone), *tasks]
        allowed = self.ssn.reclaimable(self.reclaimer, considered)
        if len(allowed) < len(considered) \
                or self.ssn.disruptions.refusing(tasks, beside=self.handed) is not None:
            return None, False
        stays = spare is not None and len(self._running(job)) > len(spare)
        held = sum_resources(self.ssn.quota_request(t) for t in tasks)
        return Unit(job.key, job.queue, tuple(tasks), held), stays

    def next(self) -> Unit | None:
        while True:
            leaf = self._leaf()
            if leaf is None:
                return None
            jobs = self.leaves[leaf]
            job = jobs[0]
            unit, stays = self._unit(job)
            if not stays:
                jobs.pop(0)
                for q in self._up(leaf):
                    self.live[q] -= 1
            if unit is None:
                continue
            self.gone.setdefault(job.key, set()).update(t.key for t in unit.tasks)
            self.handed.extend(unit.tasks)
            res = unit.resources
            for q in self._up(leaf):
                self._keys.pop(q, None)
                row = self.taken.setdefault(q, {})
                for n, v in res.items:
                    row[n] = row.get(n, 0.0) + v
            if stays:       # still above its minimum? it keeps its place in the leaf order
                self._order(jobs)
            return unit

    def _leaf(self) -> QueueName | None:
        queue = ROOT
        tree = self._tree
        while True:
            children = [c for c in tree.successors(queue) if self.live.get(c, 0) > 0]
            if not children:
                return queue if queue != ROOT and self.leaves.get(queue) else None
            queue = min(children, key=self._key)

    def _key(self, queue: QueueName) -> tuple[object, ...]:
        key = self._keys.get(queue)
        if key is None:
            key = self._keys[queue] = self._queue_key(queue, self.taken.get(queue, {}), self.need)
        return key
