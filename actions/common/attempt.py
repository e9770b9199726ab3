"""An attempt at placing a job's tasks: place_tasks puts them on nodes in task
order under a statement, until the job is ready, and the Attempt says what it
came to. The bottom of placing: topology.py tries it domain by domain, and
placement.py commits, keeps or undoes what it placed."""
from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker
from kaisched.framework import Session, Statement


@attrs.define
class Attempt:
    """What placing one job's tasks under a statement came to."""

    placed: int = 0
    failure: str | None = None
    blocker: Blocker | None = None      # the class of the failure
    placed_in: dict[str, int] = attrs.Factory(dict)     # placed, per subgroup

    def merged(self, other: Attempt) -> Attempt:
        """This attempt and a later one of the same statement, as one."""
        self.placed += other.placed
        for leaf, n in other.placed_in.items():
            self.placed_in[leaf] = self.placed_in.get(leaf, 0) + n
        self.failure = self.failure or other.failure
        self.blocker = self.blocker or other.blocker
        return self

    def count(self, task: TaskInfo, n: int) -> None:
        self.placed += n
        if task.subgroup is not None:
            self.placed_in[task.subgroup] = self.placed_in.get(task.subgroup, 0) + n


def place_tasks(ssn: Session, stmt: Statement, job: JobInfo, tasks: list[TaskInfo],
                idle_only: bool = False, within: np.ndarray | None = None) -> Attempt:
    """Place tasks unit by unit (Session.placement_units) until the job is
    ready; skip what fits nowhere, and undo a whole unit (a subgroup a choice
    takes) that does not fit entire. within (a node mask) keeps them inside
    a topology domain."""
    attempt = Attempt()
    # An admitted gang passed the minResources check when it was enqueued.
    gated = ssn.gate.closed
    refused = None if ssn.job_ready(job) or gated else ssn.enqueue_refusal(job)
    if refused:
        attempt.failure, attempt.blocker = refused
        return attempt
    if len(tasks) == 1 and not job.spec.subgroups:
        # One task and no subgroup tree (most jobs): placement_units would
        # make it one unit, not whole; placed or not, there is no more to do.
        _place(ssn, stmt, job, tasks[0], idle_only, within, attempt, set())
        return attempt
    failed_classes: set[tuple[Any, ...]] = set()
    undone: set[str | None] = set()     # subgroups whose whole unit did not fit
    for unit in ssn.placement_units(job, tasks):
        if not unit.whole and unit.tasks[0].subgroup in undone:
            continue     # an extra for a subgroup that could not be placed whole
        mark = stmt.checkpoint() if unit.whole else 0
        placed = 0
        for task in unit.tasks:
            if not _place(ssn, stmt, job, task, idle_only, within, attempt, failed_classes):
                break
            placed += 1
            if not unit.whole and ssn.job_ready(job):
                return attempt
        else:
            if ssn.job_ready(job):
                return attempt
            continue
        if unit.whole:       # half a subgroup is no subgroup: undo it, try the next
            stmt.rollback(mark)
            for task in unit.tasks[:placed]:
                attempt.count(task, -1)
            undone.update(t.subgroup for t in unit.tasks)
    return attempt


def _place(ssn: Session, stmt: Statement, job: JobInfo, task: TaskInfo, idle_only: bool,
           within: np.ndarray | None, attempt: Attempt, failed_classes: set[tuple[Any, ...]]) -> bool:
    """Place one task on its best node (pipelined onto room being released if
    that is all there is); False, with the first failure kept, if none takes it."""
    if failed_classes and ssn.class_key(task) in failed_classes:
        return False     # its twin found no node: neither will it
    refusal, rows = ssn.allocatable_on(job, task)
    if rows is not None:        # its queue has room for it on these nodes only
        within = rows if within is None else within & rows
    choice = None if refusal else ssn.select_node(task, idle_only, within)
    if choice is None:
        failed_classes.add(ssn.class_key(task))
        if attempt.failure is None:
            attempt.failure = refusal or f"pod {task.key}: {ssn.explain_task(task)}"
            attempt.blocker = Blocker.QUOTA if refusal else ssn.blocker_of(task)
        return False
    if choice.pipelined:
        stmt.pipeline(task, choice.node)
    else:
        stmt.allocate(task, choice.node)
    attempt.count(task, 1)
    return True
