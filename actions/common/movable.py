"""Which running pods consolidation may move, and in what units.

A move evicts a pod so that its controller makes it again, and holds room
for it on another node. So only a pod some controller makes again moves, and
never one of a job that is not preemptible, that was moved within its
cooldown (kept in its PodGroup status, so only jobs with a PodGroup move),
that is inside either of its min-runtimes (a move is an eviction as much
as preempt's or reclaim's, so whichever protects the job holds), or that a
PodDisruptionBudget protects; a pod holding ResourceClaims stays
(its devices would have to move with it). A pod moves alone, unless its
group moves only whole (the Workload API's disruption mode `all`).

Which pods move first, of those that free as much: KAI's victim order
(GetVictimsQueue), the reverse of the order jobs are placed in: the last
queue first, in it the last job (the lowest priority, then the newest),
in it the last task.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from kaisched.api.clock import from_rfc3339
from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES, Disruption, JobKey, PodKey
from kaisched.framework import Session
from kaisched.framework.effects import Cause


def why_unmovable(ssn: Session, job: JobInfo, cooldown: float) -> str | None:
    """Why consolidation may not move the job's pods now, if it may not."""
    if not job.spec.preemptible:
        return "not preemptible"
    if not job.spec.declared:
        return "no PodGroup to keep its cooldown in"
    if job.key in ssn.moves.moved_at:
        return "moved in this session"
    moved = from_rfc3339(job.status.last_moved_time)
    if moved is not None and ssn.now < moved + cooldown:
        return f"moved {ssn.now - moved:.0f}s ago, within its cooldown of {cooldown:.0f}s"
    return None


def protected(ssn: Session, job: JobInfo, by: JobInfo) -> str | None:
    """Why the running job may not move for by now: it is inside its
    min-runtime for preemption or for reclaim (until when, and which)."""
    if not ssn.protects:
        return None
    for kind in (Cause.PREEMPT, Cause.RECLAIM):
        found = ssn.protected_until(job, kind, by)
        if found is not None:
            return found.describe(ssn.now)
    return None


def unit_of(ssn: Session, task: TaskInfo, cooldown: float,
            verdicts: dict[JobKey, str | None], by: JobInfo) -> list[TaskInfo] | None:
    """The pods that move with the task to make room for by, or None when
    they may not move: the task alone (a moved pod is placed again in the
    same plan, so its job keeps its count; the pods of its job that are not
    in the way stay where they are, as KAI's solver puts back a victim that
    still fits on its own node), or all of a group the Workload API disrupts
    only whole. verdicts remembers each job's why_unmovable for the action
    (protection depends on by's queue: the session remembers that)."""
    job = ssn.cluster.jobs[task.job]
    if job.key not in verdicts:
        verdicts[job.key] = why_unmovable(ssn, job, cooldown)
    if verdicts[job.key] is not None or protected(ssn, job, by) is not None:
        return None
    unit = ssn.eviction_group(task) if job.spec.disruption is Disruption.ALL else [task]
    if any(t.status not in EVICTABLE_STATUSES or t.critical or not t.controlled or t.claims
           for t in unit):
        return None         # part of it cannot go (placed this session, bare, or holding devices)
    return unit


class VictimOrder:
    """Each pod's place in the victim order, as (its job's place, its own
    place in its job; 0: the first to move): queue order and job order
    reversed, then task order reversed. The jobs are ranked at once; a job's
    pods only when asked (most plans compare pods of different jobs)."""

    def __init__(self, ssn: Session, pods: Mapping[JobKey, Sequence[TaskInfo]]) -> None:
        """pods: the pods to rank, by job."""
        self.ssn = ssn
        self._pods = pods
        queues, jobs = ssn.cluster.queues, ssn.cluster.jobs
        queue_keys: dict[str, tuple[object, ...]] = {}
        keyed = []
        for key in pods:
            job = jobs[key]
            queue_key = queue_keys.get(job.queue)
            if queue_key is None:
                info = queues.get(job.queue)
                queue_key = queue_keys[job.queue] = \
                    ssn.queue_order_key(info) if info is not None else ()
            keyed.append((queue_key, ssn.job_order_key(job), key))
        keyed.sort()
        last = len(keyed) - 1
        self.job: dict[JobKey, int] = {key: last - i for i, (_, _, key) in enumerate(keyed)}
        self._in_job: dict[PodKey, int] = {}

    def of(self, pod: TaskInfo) -> tuple[int, int]:
        """The pod's place (a pod not among those ranked: last)."""
        job = self.job.get(pod.job)
        if job is None:
            return (len(self.job), 0)
        if pod.key not in self._in_job:
            placed = sorted(self._pods[pod.job], key=self.ssn.task_order_key)
            last = len(placed) - 1
            self._in_job.update((p.key, last - i) for i, p in enumerate(placed))
        return (job, self._in_job.get(pod.key, 0))


class Movable:
    """The running pods that might move (of preemptible jobs, made again by
    a controller, not critical), as they stood when the action began, by
    node and as arrays: their rows, requests and start. Made once per action
    and shared by its plans; whether a pod may move now is asked as it is
    tried (it may have moved, or its job may be protected)."""

    def __init__(self, ssn: Session) -> None:
        table = ssn.cluster.table
        self.on_row: dict[int, list[TaskInfo]] = {}
        by_job: dict[JobKey, list[TaskInfo]] = {}
        for job in ssn.cluster.jobs.values():
            if not job.spec.preemptible:
                continue
            mine = [t for t in job.tasks.values() if t.status in EVICTABLE_STATUSES
                    and t.controlled and not t.critical and t.node_name in table.index]
            if mine:
                by_job[job.key] = mine
                for task in mine:
                    self.on_row.setdefault(table.index[task.node_name], []).append(task)  # type: ignore[index]
        self.pods = [p for row in sorted(self.on_row)
                     for p in sorted(self.on_row[row], key=lambda t: t.key)]
        self.created = np.array([p.creation for p in self.pods], dtype=np.float64)
        self.rows = np.array([table.index[p.node_name] for p in self.pods],   # type: ignore[index]  # on a node
                             dtype=np.int64)
        # What moving each gives back: a sharer its part of its GPU (all of
        # it once every sharer of the GPU goes).
        self.vecs = np.array([ssn.cluster.freed_by(p) for p in self.pods]).reshape(
            len(self.pods), len(table.dims))
        self.order = VictimOrder(ssn, by_job)
        # Each pod's job's place in the victim order (0: the first to move).
        rank = self.order.job
        self.job_ranks = np.fromiter((rank[p.job] for p in self.pods), dtype=np.int64,
                                     count=len(self.pods))
