"""The starvation guard: a gang at the head of its queue that has waited
longer than its threshold gets the room it needs held on the nodes it would
use, so a stream of smaller jobs cannot take that room forever.

Only a gang its queue's fair share can hold is guarded: one that would take
its queue over its share would be reclaimed as soon as it started, by any
queue below its own, while the room held for it sat idle. It is guarded once
the other queues want less (their demand counts in the shares).

Which nodes: those where the gang's minimum would fit once they empty,
preferring the nodes with the least room still missing, so the choice stays
put from session to session as their pods finish. Room on those nodes beyond
what the gang needs, and every other node, stay open to everyone.

A reservation with a start: where the pods on those nodes have enforced
limits (activeDeadlineSeconds), the room is sure to be free by a time, the
latest end among the pods that must go (actions/common/freeing.py). Of the
few nodes that would take each pod with the least room missing, the one
free soonest is taken, so the start is as early as this finds; with no
limits every node is free "never", and the choice is as above. Reservation
backfill lends the held room to jobs sure to end before the start (node
selection reads the start from the room held).
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import attrs
import numpy as np

from actions.common.eviction import refused
from actions.common.freeing import Freeing
from actions.common.setbacks import setback
from kaisched.api.clock import clock_text, from_rfc3339, to_rfc3339
from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.resource import sum_resources
from kaisched.api.types import JobKey
from kaisched.framework import Session
from kaisched.framework.reservation import Reservation

# Of the nodes that would take a pod with the least room missing, how many
# are asked when they are free: enough to find an earlier one, few enough
# that a big cluster's guard stays cheap.
CANDIDATES = 32


@attrs.frozen
class Guard:
    """Room held for one starving gang."""

    job: JobKey
    since: str          # when the gang crossed its threshold
    reservation: Reservation


def starving_since(ssn: Session, job: JobInfo) -> float | None:
    """When the job's wait crossed its starvation threshold, if it has."""
    threshold = job.spec.starvation_threshold
    if threshold is None:
        threshold = ssn.config.starvation_threshold
    waiting = from_rfc3339(job.status.unschedulable_since)
    if not threshold or waiting is None or ssn.job_pipelined(job):
        return None         # 0 turns the guard off; only a gang that failed waits
    crossed = waiting + threshold
    return crossed if crossed <= ssn.now else None


def _starving_since(ssn: Session, job: JobInfo) -> float | None:
    """starving_since, for a gang waiting for room (not for what no room gives)
    that its queue's fair share can hold: started beyond it, the gang would be
    reclaimed whole by the first queue below its own share, and the room held
    for it would have been held for nothing."""
    since = starving_since(ssn, job)
    if since is None or refused(ssn, job):
        return None
    need = sum_resources(ssn.quota_request(t) for t in ssn.minimum_tasks(job, ssn.pending(job)))
    return since if ssn.beyond_share(job, need) is None else None


def plan(ssn: Session, job: JobInfo) -> tuple[np.ndarray, Reservation] | None:
    """Room (rows x resources) for the gang's minimum on the nodes it would
    use, and the reservation it makes: when the room is sure to be free there
    (None: not known) and likely is; or None if it would not fit even on
    empty nodes."""
    table = ssn.cluster.table
    # The minimum: what the gang and its subgroup tree still lack.
    needed = ssn.minimum_tasks(job, ssn.pending(job))
    room = np.zeros_like(table.alloc)
    held = ssn.starving.total
    freeing = Freeing(ssn)
    static: dict[tuple[Any, ...], np.ndarray] = {}        # alike tasks pass the same filters
    with np.errstate(divide="ignore", invalid="ignore"):
        for task in needed:
            vec = table.vector(task.resreq)
            key = ssn.class_key(task)
            if key not in static:
                static[key] = ssn.static_mask(task)
            rows = np.flatnonzero(static[key] & table.fits(vec, table.alloc - held - room))
            if not len(rows):
                return None
            # The room the task adds to what is still missing on each node,
            # as a fraction of the node; ties go to nodes already planned on.
            free = table.future[rows] - held[rows]
            before = np.clip(room[rows] - free, 0, None)
            after = np.clip(room[rows] + vec - free, 0, None)
            alloc = table.alloc[rows]
            added = np.where(alloc > 0, (after - before) / alloc, 0).sum(axis=1)
            planned = ~(room[rows] > 0).any(axis=1)
            order = np.lexsort((rows, planned, added))[:CANDIDATES]
            # Of those, the one whose room is sure to be free soonest; of
            # equally sure ones (all, when no limit is known), the one likely
            # free soonest (the first when none is known).
            ready = [freeing.ready_at(int(rows[i]), after[i]) for i in order]
            first = min(ready)
            ties = [k for k, at in enumerate(ready) if at == first]
            soonest = ties[0] if len(ties) == 1 else min(
                ties, key=lambda k: freeing.likely_at(int(rows[order[k]]), after[order[k]]))
            room[rows[order[soonest]]] += vec
    return room, _reservation(ssn, freeing, room, held)


def _reservation(ssn: Session, freeing: Freeing, room: np.ndarray,
                 held: np.ndarray) -> Reservation:
    """When every node of the room is sure to have it free (the latest of
    their times; None when one is never sure to), and likely to."""
    table = ssn.cluster.table
    rows = np.flatnonzero((room > EPSILON).any(axis=1))
    need = np.clip(room[rows] - (table.future[rows] - held[rows]), 0, None)
    start = max((freeing.ready_at(int(row), need[i]) for i, row in enumerate(rows)),
                default=ssn.now)
    likely = max((freeing.likely_at(int(row), need[i]) for i, row in enumerate(rows)),
                 default=ssn.now)
    names = tuple(table.names[int(row)] for row in rows)
    on = set(names)
    pods = frozenset([*(key for name in names for key in ssn.cluster.nodes[name].tasks),
                      *(p.key for p in ssn.cluster.foreign if p.node_name in on)])
    return Reservation(None if math.isinf(start) else start,
                       None if math.isinf(likely) else likely, names, pods)


def guard(ssn: Session, heads: Iterable[JobInfo]) -> list[Guard]:
    """Hold room for every starving head-of-queue gang; oldest wait first."""
    # A gang waiting for what no room gives (its minResources, gates, ...) holds nothing.
    # Each gang is asked under its own guard: one whose questions raise holds nothing.
    starving = [(since, job) for job in heads
                if (since := ssn.decide(job, _starving_since, ssn, job)) is not None]
    guards = []
    for since, job in sorted(starving, key=lambda sj: (sj[0], sj[1].key)):
        if job.key in ssn.starving.rooms:
            continue        # room is held for it already (made by consolidation, or booked)
        planned = ssn.decide(job, plan, ssn, job)
        if planned is None:
            continue        # it would not fit on empty nodes: holding room helps no one
        room, reservation = planned
        before = ssn.starving.before.get(job.key)
        if before is not None:
            reservation = setback(ssn, before, reservation)
        ssn.starving.reserve(job.key, room, reservation=reservation)
        guards.append(Guard(job.key, to_rfc3339(since), reservation))
    return guards


def report(ssn: Session, guards: list[Guard]) -> None:
    """Say so in the condition of each guarded gang still waiting."""
    for g in guards:
        if g.job in ssn.starving.rooms and g.job in ssn.unschedulable:
            ssn.record_unschedulable(ssn.cluster.jobs[g.job], (
                f"{ssn.unschedulable[g.job]}; reserving {len(g.reservation.nodes)} node(s) "
                f"for this gang since {g.since}{when(g.reservation, ssn.now)}"))


def when(reservation: Reservation, now: float) -> str:
    """When the reservation's room is free, as the condition says it."""
    r = reservation
    text = "" if r.start is None else f", whole by {clock_text(r.start, now)} at the latest"
    if r.likely is not None and (r.start is None or r.likely < r.start - 1):
        text += (f", likely by {clock_text(r.likely, now)}" if r.start is not None
                 else f", likely whole by {clock_text(r.likely, now)} (estimated)")
    if r.moved is not None and r.was is not None:
        text += f" (was {clock_text(r.was, now)}: {r.moved})"
    return text
