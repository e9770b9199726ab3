"""reclaim: across queues, a job whose queue is within its fair share takes
room back from queues over theirs, gang-wise, and is pipelined onto it.

For each starving job, once per session, in queue and job order:
- R is what it still needs: its tasks up to its minimum (every subgroup's),
  or one more task for a running elastic job (whose extras take only other
  jobs' surplus tasks, never a gang);
- the gate: its queue's use + R must stay within its fair share (the
  proportion plugin's rule); failing it, the job does not reclaim;
- the victims come from preemptible jobs of every other leaf queue, one unit
  at a time in victim order (actions/common/victims.py), searched task by
  task (actions/reclaim/search.py); the plugins check the victim side before
  each chunk and the queues' saturation after the reclaim;
- every unit the job can do without is then kept running
  (actions/common/sparing.py).
The victims become Releasing and the job's tasks are pipelined onto the room.
"""
from __future__ import annotations

import numpy as np

from actions.common.domainchoice import DomainChoice
from actions.common.eviction import elastic_jobs, note_kept, starving_jobs
from actions.common.placement import still_needed
from actions.common.sparing import spare
from actions.common.topology import bound_domain
from actions.common.victims import Unit, VictimPicker
from actions.reclaim.search import ReclaimSearch
from kaisched.api.job import JobInfo
from kaisched.api.resource import sum_resources
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES
from kaisched.framework import Session
from kaisched.framework.effects import Cause, Preemptor


class ReclaimAction:
    name = "reclaim"

    def execute(self, ssn: Session) -> None:
        jobs, extras = starving_jobs(ssn), elastic_jobs(ssn)
        if not jobs and not extras:
            return
        domains = DomainChoice(ssn)
        # Each job under its own guard: one whose decision raises loses its turn.
        for job, tasks in jobs:
            ssn.decide(job, _reclaim_minimum, ssn, domains, job, tasks)
        for job, tasks in extras:
            ssn.decide(job, _reclaim_extras, ssn, domains, job, tasks)


def _reclaim_minimum(ssn: Session, domains: DomainChoice, job: JobInfo, tasks: list[TaskInfo]) -> None:
    if not ssn.job_pipelined(job) and not reclaim_for(
            ssn, domains, job, still_needed(ssn, job, tasks)) \
            and (ssn.protects or ssn.disruptions.budgets):
        note_kept(ssn, job, Cause.RECLAIM, candidates(ssn, job))


def _reclaim_extras(ssn: Session, domains: DomainChoice, job: JobInfo, tasks: list[TaskInfo]) -> None:
    for task in tasks:
        if not reclaim_for(ssn, domains, job, [task], surplus_only=True):
            break


def candidates(ssn: Session, job: JobInfo) -> list[JobInfo]:
    """Preemptible jobs running in every other leaf queue (found through the
    ledger's index of jobs with tasks to evict, read as they are now)."""
    cluster = ssn.cluster
    ledger = cluster.ledger()
    out = []
    for queue in sorted(ledger.evictable):
        if queue == job.queue or queue not in cluster.queues:
            continue
        for key in ledger.evictable_jobs(queue):
            other = cluster.jobs[key]
            if other.spec.preemptible and any(
                    t.status in EVICTABLE_STATUSES and t.node_name in cluster.nodes
                    for t in other.tasks.values()):
                out.append(other)
    return out


def reclaim_for(ssn: Session, domains: DomainChoice, job: JobInfo, tasks: list[TaskInfo],
                surplus_only: bool = False) -> bool:
    """Evict victims from other queues and pipeline the tasks; True if done."""
    need = sum_resources(ssn.quota_request(t) for t in tasks)
    if ssn.reclaim_blocked(job, need):
        return False
    others = candidates(ssn, job)
    if not others:
        return False
    picker = VictimPicker(ssn, tasks[0], others, need, surplus_only)
    table = ssn.cluster.table

    def room() -> np.ndarray:       # free now plus what the candidates hold
        out = table.future.copy()
        for other in others:
            for t in other.tasks.values():
                if t.status in EVICTABLE_STATUSES and t.node_name in table.index:
                    out[table.index[t.node_name]] += ssn.cluster.freed_by(t)
        return out

    def fair(victims: list[Unit]) -> str | None:
        return ssn.reclaim_unfair(job, need, [(u.queue, u.resources) for u in victims])

    solver = ReclaimSearch(ssn, tasks, picker, lambda t: bound_domain(ssn, domains, job, room, t), fair)
    victims = solver.solve()
    if not victims:
        return False        # no scenario, or none needs an eviction
    stmt = solver.apply(victims, lambda t: Preemptor(t.key, job.key, job.priority, job.queue))
    if stmt is None:
        return False
    # Every unit the job can do without is kept running (the last in victim order first).
    rank = {t.key: i for i, u in enumerate(victims) for t in u.tasks}
    spared = spare(ssn, stmt, lambda t: (rank.get(t.key, len(rank)), t.key), solver.place)
    evicted = sum(len(u.tasks) for u in victims) - spared
    stmt.commit()
    if not surplus_only:
        ssn.record_unschedulable(job, (
            f"{len(tasks)} task(s) pipelined, minMember {job.min_member}; waiting for "
            f"{evicted} reclaimed pod(s) to terminate"))
    return True

