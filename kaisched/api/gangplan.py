"""In what units a gang's pending tasks are placed, following its subgroup tree.

First the tasks that take the gang to its minimum: each needed leaf's
missing pods (a leaf that is simply required gives them one by one; a child
that a choice takes -- "2 of my 4 stages" -- is one whole unit), then the
children no choice took, each whole (tried when a needed one does not fit,
or as an extra once the gang runs), then the single extra pods of leaves
that are not inside a child still short of its minimum. Without subgroups
every task is its own unit, in task order, as always.

A whole unit is placed entire or undone (actions/common/attempt.py): no
subgroup is left half placed.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import attrs

from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, TaskStatus

HELD = READY_STATUSES | {TaskStatus.PIPELINED}     # what counts as placed for the plan


@attrs.frozen(slots=True)
class Unit:
    """Tasks placed together. whole: all or none of them; needed: part of
    what takes the gang to its subgroup tree's minimum."""

    tasks: tuple[TaskInfo, ...]
    whole: bool = False
    needed: bool = False


def placement_units(job: JobInfo, ordered: Sequence[TaskInfo]) -> list[Unit]:
    """`ordered` (tasks in task order) as units to place in turn; tasks that
    can be placed in no unit now (inside a child whose other pods do not
    exist yet) are left out."""
    if not job.spec.subgroups:
        return [Unit((t,)) for t in ordered]
    tree = job.tree
    plan = tree.plan(job.leaf_counts(HELD), job.alive_counts())
    waiting: dict[str, deque[TaskInfo]] = {}
    for task in ordered:
        if task.subgroup is not None and tree.is_leaf(task.subgroup):
            waiting.setdefault(task.subgroup, deque()).append(task)
    used: set[str] = set()
    units: list[Unit] = []
    steps = [(step, True) for step in plan.needed] + [(step, False) for step in plan.alternatives]
    for step, needed in steps:
        taken: list[TaskInfo] = []
        complete = True
        for leaf, n in step.parts:
            queue = waiting.get(leaf, deque())
            got = [queue.popleft() for _ in range(min(n, len(queue)))]
            complete = complete and len(got) == n
            taken += got
            used.update(t.key for t in got)
            if not step.whole:
                units += [Unit((t,), needed=needed) for t in got]
        if step.whole and taken and complete:
            units.append(Unit(tuple(taken), whole=True, needed=needed))
    for task in ordered:
        if task.key in used:
            continue
        if task.subgroup is None or not tree.is_leaf(task.subgroup) or task.subgroup in plan.open:
            units.append(Unit((task,)))
    return units


def minimum_tasks(job: JobInfo, ordered: Sequence[TaskInfo]) -> list[TaskInfo]:
    """The tasks that take the job to its minimum (the tree's needed units,
    then more until minMember), in placement order; the first unit once the
    minimum holds -- one task, or a whole subgroup."""
    units = placement_units(job, ordered)
    out = [t for u in units if u.needed for t in u.tasks]
    missing = job.min_member - job.count(HELD) - len(out)
    for unit in units:
        if missing <= 0:
            break
        if not unit.needed:
            out += unit.tasks
            missing -= len(unit.tasks)
    if out:
        return out
    return list(units[0].tasks) if units else []
