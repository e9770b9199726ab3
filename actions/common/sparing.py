"""Sparing victims: what preempt or reclaim evicts for a job, made as small as
it can be, unit by unit.

Once the job is placed over its victims, each unit of them is tried back in
turn, the one the victim order would take last first: its pods are kept
running, the others evicted again, and the job's tasks placed again as they
are placed over victims (best node, pipelined onto the room being freed). If
the job still fits, the unit stays running, and the next is tried against
what is left. A unit is what goes together: a pod above its job's minimum
(and every subgroup's), or else the whole gang -- for a gang that would lose
every pod, keeping its minimum (its pods the order takes last) is one unit
too. What is left is minimal: keeping any one unit leaves the job unplaced.

Two quick bounds save most placements: with the job placed, a victim holding
more than the whole cluster has free is needed; and with a unit kept, the
room of the whole cluster, freed pods included, must still hold what the
job's tasks ask.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES, Disruption, JobKey, PodKey
from kaisched.framework import Session, Statement
from kaisched.framework.statement import EvictOp, PipelineOp

# Place the job's tasks under the statement (their victims evicted); True if all are placed.
Place = Callable[[Statement, list[TaskInfo]], bool]
Order = Callable[[TaskInfo], tuple[Any, ...]]


def spare(ssn: Session, stmt: Statement, order: Order, place: Place) -> int:
    """stmt (fresh for this job) holds its evictions and placements: keep
    running every unit the job can do without. The statement then holds the
    fewer evictions and the placement made over them, or, when none could be
    spared, what it held. Returns how many pods were spared."""
    ops = list(stmt.ops)
    evicts = [op for op in ops if isinstance(op, EvictOp)]
    tasks = [op.previous for op in ops if isinstance(op, PipelineOp)]
    if not evicts or not tasks:
        return 0
    how = {op.previous.key: op for op in evicts}
    table = ssn.cluster.table
    free = np.clip(table.future, 0, None).sum(axis=0)
    if all((ssn.cluster.freed_by(op.previous) > free + EPSILON).any() for op in evicts):
        # Free room is conserved: with the job placed, the cluster has less
        # free than any one victim holds, so keeping any would leave it unplaced.
        return 0
    stmt.rollback(0)
    gone = set(how)
    spared = 0
    need = np.sum([table.vector(t.resreq) for t in tasks], axis=0)
    room = np.clip(table.future, 0, None).sum(axis=0)    # before any eviction

    def held(keys: set[PodKey]) -> np.ndarray:
        total = np.zeros_like(need)
        for key in keys:
            task = how[key].previous
            if task.node_name in table.index:
                total = total + ssn.cluster.freed_by(task)
        return total

    def placed_without(keep: set[PodKey]) -> bool:
        rest = gone - keep
        if (need > room + held(rest) + EPSILON * len(tasks)).any():
            return False        # the cluster could not hold the job even so
        _evict(ssn, stmt, how, rest)
        ok = place(stmt, tasks)
        stmt.rollback(0)
        return ok

    found = True
    while found:
        found = False
        for keep in _units(ssn, how, gone, order):
            if placed_without(keep):
                gone -= keep
                spared += len(keep)
                found = True
                break
    if spared:
        _evict(ssn, stmt, how, gone)
        placed = place(stmt, tasks)
        assert placed, "the job was placed over these victims a moment ago"
    else:
        _replay(ssn, stmt, ops)
    return spared


def _units(ssn: Session, how: dict[PodKey, EvictOp], gone: set[PodKey],
           order: Order) -> list[set[PodKey]]:
    """The units that could be kept, each as the pods kept, the last in
    victim order first: a pod (or a subgroup's pods) of a job that keeps its
    minimum anyway; of a job losing every pod, its minimum (no subgroups: its
    pods the order takes last; any one pod, for a minimum of one), or the
    whole job. A job that declares how it is disrupted is taken at its word:
    pod by pod, or all of it."""
    jobs = ssn.cluster.jobs
    by_job: dict[JobKey, list[TaskInfo]] = {}
    for key, op in how.items():         # in the order they were evicted
        if key in gone:
            by_job.setdefault(op.previous.job, []).append(op.previous)
    units: list[tuple[tuple[Any, ...], set[PodKey]]] = []
    for job_key, lost in by_job.items():
        job = jobs[job_key]
        running = [t for t in job.tasks.values() if t.status in EVICTABLE_STATUSES]
        lost.sort(key=order)
        mode = job.spec.disruption
        if mode is Disruption.ALL:          # all of it or nothing, as it declares
            units.append((order(lost[0]), {t.key for t in lost}))
        elif mode is Disruption.SINGLE:     # pod by pod, as it declares
            units += [(order(t), {t.key}) for t in lost]
        elif len(lost) < len(running):      # the job keeps its minimum
            for part in _parts(job, lost):
                keys = {t.key for t in part}
                if _keeps(job, [t for t in lost if t.key not in keys]):
                    units.append((order(part[0]), keys))
        elif len(running) > job.min_member and not job.spec.subgroups:
            if job.min_member <= 1:         # any one pod kept is its minimum
                units += [(order(t), {t.key}) for t in lost]
            else:
                kept = lost[-job.min_member:]
                units.append((order(kept[0]), {t.key for t in kept}))
        else:
            units.append((order(lost[0]), {t.key for t in lost}))
    units.sort(key=lambda u: u[0], reverse=True)
    return [keys for _, keys in units]


def _parts(job: JobInfo, lost: list[TaskInfo]) -> list[list[TaskInfo]]:
    """What of the pods a job lost could be kept together: each pod; with a
    subgroup tree, also each subgroup's lost pods (a subgroup that went whole
    comes back whole)."""
    parts = [[t] for t in lost]
    if job.spec.subgroups:
        tree = job.tree
        for node in tree.post:
            under = set(tree.leaves_under(node))
            group = [t for t in lost if t.subgroup in under]
            if len(group) > 1:
                parts.append(group)
    return parts


def _keeps(job: JobInfo, lost: list[TaskInfo]) -> bool:
    """Losing these pods leaves the job at its minimum, and every subgroup at
    its own (or without a pod)."""
    ready = job.ready_statuses
    if job.count(ready) - sum(1 for t in lost if t.status in ready) < job.min_member:
        return False
    if not job.spec.subgroups:
        return True
    remove: dict[str, int] = {}
    for t in lost:
        if t.subgroup is not None and t.status in ready:
            remove[t.subgroup] = remove.get(t.subgroup, 0) + 1
    return job.tree.keeps(job.leaf_counts(ready), remove)


def _evict(ssn: Session, stmt: Statement, how: dict[PodKey, EvictOp], keys: set[PodKey]) -> None:
    jobs = ssn.cluster.jobs
    for key, op in how.items():         # in the order they were evicted
        if key in keys:
            task = jobs[op.previous.job].tasks[key]
            stmt.evict(task, op.cause, op.by, op.detail)


def _replay(ssn: Session, stmt: Statement, ops: list[Any]) -> None:
    """Make the evictions and placements of ops again (their devices follow)."""
    jobs = ssn.cluster.jobs
    for op in ops:
        if isinstance(op, EvictOp):
            stmt.evict(jobs[op.previous.job].tasks[op.previous.key], op.cause, op.by, op.detail)
        elif isinstance(op, PipelineOp):
            node = op.task.node_name
            assert node is not None
            stmt.pipeline(jobs[op.previous.job].tasks[op.previous.key], node)
