"""Topology-aware gangs: a gang (or a subgroup) placed whole inside one domain
of a topology level, a node label such as a rack, a block, a zone or an
NVLink clique (`nvidia.com/gpu.clique`).

- required level: only domains of that level are tried; when none fits the
  gang's minimum it waits, and the reason says so in numbers;
- preferred level: the tightest fitting domain, widening level by level to
  the levels whose domains hold its domains whole (up to the required level,
  else to the whole cluster);
- among the domains that fit, KAI's packing at every level: the one inside
  the fullest domain of each outer level goes first (among racks that fit,
  one in the fullest spine that fits), then the fullest itself, then the one
  leaving the least room stranded -- domains are binpacked, not only nodes,
  so large gangs keep finding whole racks and spines.

A domain is tried by placing the gang's tasks restricted to its nodes under
a checkpoint of the job's statement; a domain that does not take the gang is
rolled back and the next one tried. Placement never splits across domains.

How the domains stand (domainchoice.DomainChoice) is worked out once per
action: the action makes one and hands it down with each call.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from actions.common.attempt import Attempt, place_tasks
from actions.common.domainchoice import MET, DomainChoice, level_of, need_of
from kaisched.api.job import JobInfo, SubGroup, TopologyRule
from kaisched.api.task import TaskInfo
from kaisched.api.types import GangMode, TaskStatus
from kaisched.framework import Session, Statement


def place_in_topology(ssn: Session, domains: DomainChoice, stmt: Statement, job: JobInfo,
                      tasks: list[TaskInfo], idle_only: bool) -> Attempt:
    """Place the job's tasks as place_tasks() does, inside one domain when the
    PodGroup asks for a topology (and each subgroup with its own inside one of
    its level, within the gang's); otherwise just place_tasks().

    A NonStrict gang keeps what it could place, to be held until the rest
    fits: with a required level, what one domain of it can take (the one that
    takes the most), never pods split over domains; the rest comes later into
    the same domain."""
    ruled = [sg for sg in job.spec.subgroups if sg.topology]
    if not tasks or not (job.spec.topology or ruled):
        return place_tasks(ssn, stmt, job, tasks, idle_only, None)
    # As allocate decides what a gang short of its minimum may hold.
    partial = not idle_only and job.spec.mode is GangMode.NON_STRICT and not ssn.holds.expired(job.key)

    def whole(within: np.ndarray | None) -> Attempt:
        return _subgroups(ssn, domains, stmt, job, tasks, idle_only, ruled, within, partial)

    members = list(job.tasks.values())
    return _in_one_domain(ssn, domains, stmt, job, job.spec.topology, members, tasks, job.min_member,
                          idle_only, whole, lambda: ssn.job_ready(job)
                          or (not idle_only and ssn.job_pipelined(job)), None,
                          partial=partial)


def _subgroups(ssn: Session, domains: DomainChoice, stmt: Statement, job: JobInfo,
               tasks: list[TaskInfo], idle_only: bool, ruled: list[SubGroup], within: np.ndarray | None,
               partial: bool) -> Attempt:
    """Each subgroup with a topology inside one domain of its level, then the
    rest (a NonStrict gang goes on past a subgroup short of its minimum)."""
    total: Attempt | None = None
    for sg in ruled:
        members = job.members_of(sg.name)
        keys = {t.key for t in members}
        mine = [t for t in tasks if t.key in keys]
        if not mine:
            continue

        def met(sg: SubGroup = sg) -> bool:
            statuses = MET if idle_only else MET | {TaskStatus.PIPELINED}
            placed = sum(1 for t in job.members_of(sg.name) if t.status in statuses)
            return placed >= 1 and job.subgroup_met(sg.name, statuses)

        def place(rows: np.ndarray | None, mine: list[TaskInfo] = mine) -> Attempt:
            return place_tasks(ssn, stmt, job, mine, idle_only, rows)

        outcome = _in_one_domain(ssn, domains, stmt, job, sg.topology, members, mine,
                                 job.tree.min_pods(sg.name),
                                 idle_only, place, met, within,
                                 f"subgroup {sg.name}: ", partial)
        total = outcome if total is None else total.merged(outcome)
        if not met() and not partial:
            return total
    ruled_keys = {t.key for sg in ruled for t in job.members_of(sg.name)}
    rest = [t for t in tasks if t.key not in ruled_keys]
    outcome = place_tasks(ssn, stmt, job, rest, idle_only, within)
    return outcome if total is None else total.merged(outcome)


def _in_one_domain(ssn: Session, domains: DomainChoice, stmt: Statement, job: JobInfo,
                   rule: TopologyRule,
                   members: list[TaskInfo], tasks: list[TaskInfo], minimum: int,
                   idle_only: bool, attempt: Callable[[np.ndarray | None], Attempt],
                   done: Callable[[], bool], within: np.ndarray | None,
                   who: str = "", partial: bool = False) -> Attempt:
    """Try attempt() in the domains of the rule's levels, tightest level and
    least stranded domain first, until done(); roll back each that is not.
    partial: when none is done, keep what one domain of the widest level
    tried takes (the one that takes the most)."""
    if not rule:
        return attempt(within)
    need = need_of(ssn, job, tasks, minimum, members)
    outcome: Attempt | None = None
    tried: list[str] = []
    for level in domains.levels(rule):
        if level is None:                       # the preferred level widened to the whole cluster
            return attempt(within)
        for rows in domains.candidates(members, tasks, level, need, minimum, idle_only, within):
            mark = stmt.checkpoint()
            outcome = attempt(rows)
            if outcome.placed and done():
                return outcome
            stmt.rollback(mark)
        tried.append(level)
    why = who + domains.shortfall(minimum, tried[-1] if tried else str(rule.required),
                                need, idle_only, outcome.failure if outcome is not None else None, members)
    part = domains.partial(members, tasks, tried[-1], need, minimum, within) \
        if partial and tried else None
    if part is not None:
        mark = stmt.checkpoint()
        outcome = attempt(part)
        if outcome.placed:
            outcome.failure = why
            return outcome
        stmt.rollback(mark)
    return Attempt(failure=why)


def bound_domain(ssn: Session, domains: DomainChoice, job: JobInfo,
                 room: Callable[[], np.ndarray] | None = None,
                 task: TaskInfo | None = None) -> np.ndarray | None:
    """Where preempt and reclaim may place the task of a topology-bound gang
    (default: the one they are placing, the job's first pending task in task
    order: they go in that order and stop at the first that finds no room).

    For the gang's level (required, else preferred) and, when the task's
    subgroup has one, for the subgroup's level inside it: the domain its
    members already sit in; before they have any, the one domain whose room
    (room(): free plus what eviction could free, per node) holds the whole
    gang (each subgroup inside one domain of its own level) or subgroup with
    the least eviction. No domain at all when none could, so nothing is
    evicted for a placement that would still be split. None: no topology, no
    limit."""
    if task is None:
        pending = ssn.pending(job)
        task = ssn.ordered_tasks(job, pending)[0] if pending else None
    sub = next((sg for sg in job.spec.subgroups if sg.topology and task is not None
                and task.key in {t.key for t in job.members_of(sg.name)}), None)
    if not job.spec.topology and sub is None:
        return None
    possible = None if room is None else np.maximum(room(), 0.0) * domains.usable[:, None]
    gang = None
    if job.spec.topology:
        ruled = [sg for sg in job.spec.subgroups if sg.topology]
        gang = domains.bound(job, level_of(job.spec.topology), list(job.tasks.values()),
                           job.min_member, possible, None, ruled)
    if sub is None:
        return gang
    return domains.bound(job, level_of(sub.topology), job.members_of(sub.name),
                         job.tree.min_pods(sub.name), possible, gang, [])
