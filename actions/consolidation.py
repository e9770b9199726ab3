"""consolidation: a pending gang that fits in no arrangement of the free room
as it stands, but would if running pods moved, gets room made by moving them
(each evicted, its controller makes it again, and the room for it is held
on another node), all under one statement: it commits only if every moved
pod and the pending gang's minimum are placed. How the moves are found:
actions/common/repack.py; which pods may move: actions/common/movable.py.

A running elastic job's next pod beyond its minimum gets room made the same
way, after the starving gangs (KAI consolidates for it too).

The moved pods' new room, and the room made for the gang, are held for
them into the next sessions (kaisched.framework.moves), until they take it.
"""
from __future__ import annotations

from actions.common.eviction import elastic_jobs, starving_jobs
from actions.common.movable import Movable
from actions.common.placement import still_needed
from actions.common.repack import FewestMoves
from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, JobKey, NodeName, TaskStatus
from kaisched.framework import Session
from kaisched.framework.moves import hold_of

# Pending gangs a session plans moves for, at most (those the cluster has room
# for in pieces), in queue and job order: each plan weighs every movable pod.
JOBS_TRIED = 8


class ConsolidationAction:
    name = "consolidation"

    def execute(self, ssn: Session) -> None:
        jobs, extras = starving_jobs(ssn), elastic_jobs(ssn)
        if not jobs and not extras:
            return
        config = ssn.config.consolidation
        movable = Movable(ssn)
        verdicts: dict[JobKey, str | None] = {}     # why each job may not move (None: it may)
        taken: list[TaskInfo] = []                  # pods moved in this session
        tried = 0

        def consolidate(job: JobInfo, tasks: list[TaskInfo], extra: bool) -> None:
            nonlocal tried
            if job.spec.gang_group or (not extra and ssn.job_pipelined(job)):
                return          # one of a gang group, placed with the others only; or placed already
            needed = tasks[:1] if extra else still_needed(ssn, job, tasks)
            if not needed:
                return
            search = FewestMoves(ssn, job, needed, movable, config.max_pods, config.cooldown,
                                 taken, verdicts)
            if not search.room_enough():
                return          # the cluster lacks the room, in pieces or not: moves give none
            tried += 1
            stmt = search.build()
            if stmt is None:
                if not extra:
                    _note_protected(ssn, job, search.protected)
                return
            if extra and not search.moved:
                stmt.discard()      # it fits without a move: allocate's to place
                return
            stmt.commit()
            _record(ssn, job, search.moved, extra)
            taken.extend(search.moved)

        # The starving gangs, then a running elastic job's next pod beyond its
        # minimum (as KAI consolidates for it too), one a job. Each job under
        # its own guard: one whose plan raises loses its turn.
        wanted = [(job, tasks, False) for job, tasks in jobs] + \
            [(job, tasks, True) for job, tasks in extras]
        for job, tasks, extra in wanted:
            if len(taken) >= config.max_pods or tried >= JOBS_TRIED:
                break
            ssn.decide(job, consolidate, job, tasks, extra)


def _note_protected(ssn: Session, job: JobInfo, protected: dict[JobKey, str]) -> None:
    """No plan: say which job in the way its min-runtime kept (the first by name)."""
    if protected:
        key = min(protected)
        more = f" (and {len(protected) - 1} more job(s))" if len(protected) > 1 else ""
        ssn.note_unschedulable(job, f"consolidation may not move {key}: {protected[key]}{more}")


def _record(ssn: Session, job: JobInfo, moved: list[TaskInfo], extra: bool = False) -> None:
    """After a plan commits: each moved job's cooldown starts, the room made
    is carried to the next sessions for the moved pods and for the job, and
    the job says what it waits for."""
    slots: dict[JobKey, list[tuple[NodeName, TaskInfo]]] = {}
    for pod in moved:
        slots.setdefault(pod.job, []).append((ssn.moves.successors[pod.key], pod))
    for key, held in slots.items():
        ssn.moves.moved(key, ssn.now_text)
        sharers = tuple(s for s in (_successor(ssn, node, pod) for node, pod in held) if s is not None)
        ssn.moves.carry(key, hold_of(ssn.cluster.jobs[key], tuple((node, pod.resreq) for node, pod in held),
                                     ssn.now, tuple(pod.key for _, pod in held), sharers))
    placed = tuple((t.node_name, t.resreq) for t in job.tasks.values()
                   if t.status is TaskStatus.PIPELINED and t.node_name is not None)
    ssn.moves.carry(job.key, hold_of(job, placed, ssn.now))
    if extra:
        return      # a running job: its pod beyond its minimum waits, the job does not
    ssn.record_unschedulable(job, (
        f"{len(placed)}/{len(job.tasks)} tasks pipelined, minMember {job.min_member}; "
        f"consolidation moved {len(moved)} pod(s) of {len(slots)} job(s) to make room, "
        f"waiting for them to terminate"), Blocker.RESOURCES)


def _successor(ssn: Session, node: NodeName, pod: TaskInfo) -> TaskInfo | None:
    """A moved sharer's successor as placed (on the GPUs planned for it)."""
    if pod.gpu is None:
        return None
    info = ssn.cluster.nodes.get(node)
    return info.tasks.get(pod.successor().key) if info is not None else None
