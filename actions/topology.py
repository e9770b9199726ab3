"""Topology-aware gangs: a gang (or a subgroup) placed whole inside one domain
of a topology level, a node label such as a rack, a block, a zone or an
NVLink clique (`nvidia.com/gpu.clique`).

- required level: only domains of that level are tried; when none fits the
  gang's minimum it waits, and the reason says so in numbers;
- preferred level: the tightest fitting domain, widening level by level to
  the levels whose domains hold its domains whole (up to the required level,
  else to the whole cluster);
- among the domains that fit, the one that would leave the least room
  stranded goes first (domains are binpacked, not only nodes), so large gangs
  keep finding whole racks.

A domain is tried by placing the gang's tasks restricted to its nodes under
a checkpoint of the job's statement; a domain that does not take the gang is
rolled back and the next one tried. Placement never splits across domains.
"""
from __future__ import annotations

import weakref
from typing import Callable, Iterable, Protocol

import numpy as np

from kaisched.api.job import JobInfo, TopologyRule
from kaisched.api.placement import HOSTNAME_KEY
from kaisched.api.podindex import PRESENT
from kaisched.api.resource import format_amount
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, TaskStatus
from kaisched.framework import Session, Statement

# A gang's pods that stay where they are (releasing ones are leaving).
_STAYING = PRESENT - {TaskStatus.RELEASING}
_MET = READY_STATUSES           # what counts towards a minimum
# Levels tried when widening, besides those the gangs name (narrowest first
# by their domain count, whichever exist on the nodes).
WELL_KNOWN_LEVELS = ("nvidia.com/gpu.clique", "topology.kubernetes.io/zone",
                     "topology.kubernetes.io/region")


class Outcome(Protocol):
    placed: int
    failure: str | None


PlaceFn = Callable[[Session, Statement, JobInfo, list[TaskInfo], bool, "np.ndarray | None"], Outcome]


def place_in_topology(ssn: Session, stmt: Statement, job: JobInfo, tasks: list[TaskInfo],
                      idle_only: bool, place: PlaceFn) -> Outcome:
    """Place the job's tasks as place() does, inside one domain when the
    PodGroup asks for a topology (and each subgroup with its own inside one of
    its level, within the gang's); otherwise just place()."""
    ruled = [sg for sg in job.spec.subgroups if sg.topology]
    if not tasks or not (job.spec.topology or ruled):
        return place(ssn, stmt, job, tasks, idle_only, None)

    def whole(within: np.ndarray | None) -> Outcome:
        return _subgroups(ssn, stmt, job, tasks, idle_only, place, ruled, within)

    members = list(job.tasks.values())
    return _in_one_domain(ssn, stmt, job, job.spec.topology, members, tasks, job.min_member,
                          idle_only, whole, lambda: ssn.job_ready(job)
                          or (not idle_only and ssn.job_pipelined(job)), None, place)


def _subgroups(ssn: Session, stmt: Statement, job: JobInfo, tasks: list[TaskInfo],
               idle_only: bool, place: PlaceFn, ruled: list, within: np.ndarray | None) -> Outcome:
    """Each subgroup with a topology inside one domain of its level, then the rest."""
    total: Outcome | None = None
    for sg in ruled:
        mine = [t for t in tasks if t.subgroup == sg.name]
        if not mine:
            continue
        members = [t for t in job.tasks.values() if t.subgroup == sg.name]

        def met(sg=sg) -> bool:
            return job.count(_MET if idle_only else _MET | {TaskStatus.PIPELINED}, sg.name) \
                >= max(sg.min_member, 1)

        outcome = _in_one_domain(ssn, stmt, job, sg.topology, members, mine, sg.min_member,
                                 idle_only, lambda rows, mine=mine: place(
                                     ssn, stmt, job, mine, idle_only, rows), met, within, place,
                                 f"subgroup {sg.name}: ")
        if total is None:
            total = outcome
        else:
            total.placed += outcome.placed
            total.failure = total.failure or outcome.failure
        if not met():
            return total
    rest = [t for t in tasks if t.subgroup not in {sg.name for sg in ruled}]
    outcome = place(ssn, stmt, job, rest, idle_only, within)
    if total is None:
        return outcome
    total.placed += outcome.placed
    total.failure = total.failure or outcome.failure
    return total


def _in_one_domain(ssn: Session, stmt: Statement, job: JobInfo, rule: TopologyRule,
                   members: list[TaskInfo], tasks: list[TaskInfo], minimum: int,
                   idle_only: bool, attempt: Callable[[np.ndarray | None], Outcome],
                   done: Callable[[], bool], within: np.ndarray | None, place: PlaceFn,
                   who: str = "") -> Outcome:
    """Try attempt() in the domains of the rule's levels, tightest level and
    least stranded domain first, until done(); roll back each that is not."""
    if not rule:
        return attempt(within)
    state = _state(ssn)
    need = _need(ssn, job, tasks, minimum, members)
    outcome: Outcome | None = None
    tried: list[str] = []
    for level in state.levels(rule):
        if level is None:                       # the preferred level widened to the whole cluster
            return attempt(within)
        for rows in state.candidates(members, tasks, level, need, minimum, idle_only, within):
            mark = stmt.checkpoint()
            outcome = attempt(rows)
            if outcome.placed and done():
                return outcome
            stmt.rollback(mark)
        tried.append(level)
    failed = place(ssn, stmt, job, [], idle_only, None)     # places nothing: carries the reason
    failed.failure = who + state.shortfall(minimum, tried[-1] if tried else str(rule.required),
                                           need, idle_only, outcome)
    return failed


def bound_domain(ssn: Session, job: JobInfo,
                 room: Callable[[], np.ndarray] | None = None) -> np.ndarray | None:
    """Where preempt and reclaim may work for a topology-bound gang (its
    required level, else its preferred one): the domain its pods already sit
    in; before it has any, the one domain whose room (room(): free plus what
    eviction could free, per node) holds the whole gang with the least
    eviction. No domain at all when none could, so nothing is evicted for a
    placement that would still be split. None: no topology, no limit."""
    level = job.spec.topology.required or job.spec.topology.preferred
    if not level:
        return None
    table = ssn.cluster.table
    domains = ssn.cluster.domains(level)
    ids = {int(domains.ids[table.index[t.node_name]]) for t in job.tasks.values()
           if t.status in _STAYING and t.node_name in table.index}
    if ids:
        return np.isin(domains.ids, sorted(ids - {-1}))
    if room is None:
        return None
    waiting = [t for t in job.tasks.values() if t.status is TaskStatus.PENDING]
    need = _need(ssn, job, waiting)
    state = _state(ssn)
    possible = domains.totals(np.maximum(room(), 0.0) * state.usable[:, None])
    fits = np.flatnonzero((possible >= need - 1e-6).all(axis=1))
    mask = np.zeros(len(table), dtype=bool)
    if len(fits):
        free = domains.totals(state.room(False))[fits]
        evict = (np.maximum(need - free, 0.0) / np.where(state.capacity > 0, state.capacity, 1.0))
        best = fits[np.lexsort((fits, evict.sum(axis=1)))[0]]
        mask[domains.rows[best]] = True
    return mask


class _State:
    """Per session: the usable nodes and which levels nest in which."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.cluster = ssn.cluster
        self.usable = ssn.cluster.usable_nodes()
        self.capacity = ssn.cluster.table.alloc.sum(axis=0)
        self._wider: dict[str, list[str]] = {}

    def levels(self, rule: TopologyRule) -> list[str | None]:
        """The levels to try, tightest first."""
        if not rule.preferred or rule.preferred == rule.required:
            return [rule.required]
        wider = self.wider(rule.preferred)
        if rule.required:
            top = self.cluster.domains(rule.required)
            wider = [w for w in wider if w != rule.required and _nests(self.cluster.domains(w), top)]
            return [rule.preferred, *wider, rule.required]
        return [rule.preferred, *wider, None]

    def wider(self, level: str) -> list[str]:
        found = self._wider.get(level)
        if found is None:
            inner = self.cluster.domains(level)
            names = {j.spec.topology.required for j in self.cluster.jobs.values()} | \
                    {j.spec.topology.preferred for j in self.cluster.jobs.values()} | \
                    set(WELL_KNOWN_LEVELS)
            outer = [self.cluster.domains(k) for k in sorted(n for n in names if n and n != level)]
            found = [d.key for d in sorted(outer, key=lambda d: (-len(d), d.key))
                     if 0 < len(d) < len(inner) and _nests(inner, d)]
            self._wider[level] = found
        return found

    def room(self, idle_only: bool, cols: np.ndarray | None = None) -> np.ndarray:
        """Free room of usable nodes (rows x the resources in cols)."""
        table = self.cluster.table
        room = table.idle if idle_only else table.future
        if cols is not None:
            room = room[:, cols]
        return np.maximum(room, 0.0) * self.usable[:, None]

    def candidates(self, members: list[TaskInfo], tasks: list[TaskInfo], level: str,
                   need: np.ndarray, minimum: int, idle_only: bool,
                   within: np.ndarray | None) -> Iterable[np.ndarray]:
        """Masks of the domains of level (inside within) that could hold need,
        least stranded room first. Members with pods on nodes already keep the
        rest in their domain."""
        domains = self.cluster.domains(level)
        table = self.cluster.table
        biggest = np.max([table.vector(t.resreq) for t in tasks], axis=0)
        cols = np.flatnonzero((biggest > 0) | (need > 0))
        room = self.room(idle_only, cols)          # only what the gang asks for
        if within is not None:
            room = room * within[:, None]
        free = domains.totals(room)
        fits = (free >= need[cols] - 1e-6).all(axis=1)
        # Room in total is not enough: the pods must fit node by node.
        count = max(minimum - sum(1 for t in members if t.status in _MET), 1)
        per_node = np.floor(np.min(room / biggest[cols] + 1e-9, axis=1)) if len(cols) \
            else np.full(len(table), float(count))
        if all(self.apart(t) for t in tasks):
            per_node = np.minimum(per_node, 1.0)     # its pods keep to one per node
        keep = domains.has
        slots = np.bincount(domains.ids[keep], weights=per_node[keep], minlength=len(domains))
        fits &= slots >= count
        here = {int(domains.ids[table.index[t.node_name]]) for t in members
                if t.status in _STAYING and t.node_name in table.index}
        if here:
            fits &= np.isin(np.arange(len(domains)), list(here))
        order = _least_stranded(free, need[cols], fits, self.capacity[cols])
        for d in order:
            mask = np.zeros(len(table), dtype=bool)
            mask[domains.rows[d]] = True
            yield mask if within is None else mask & within

    def apart(self, task: TaskInfo) -> bool:
        """The task keeps away from its own kind on a host (required
        anti-affinity on the hostname selecting itself)."""
        labels = dict(task.labels)
        return any(t.topology_key == HOSTNAME_KEY and t.matcher.matches(
            labels, task.namespace, self.cluster.namespace_labels)
            for t in task.placement.rules.anti_affinity)

    def shortfall(self, minimum: int, level: str, need: np.ndarray, idle_only: bool,
                  last: Outcome | None) -> str:
        """Why no domain of level took the gang, in numbers."""
        table = self.cluster.table
        domains = self.cluster.domains(level)
        if not len(domains):
            return f"topology {level}: no node has the label {level}"
        free = domains.totals(self.room(idle_only))
        cols = [c for c in np.flatnonzero(need > 0) if table.dims[c] != "pods"] or \
            list(np.flatnonzero(need > 0))
        short = [c for c in cols if free[:, c].max() < need[c] - 1e-6]
        if short:
            c = max(short, key=lambda c: need[c] / max(free[:, c].max(), 1e-9))
            best = int(np.argmax(free[:, c]))
            name = table.dims[c]
            return (f"topology {level}: the largest domain ({domains.names[best]}) has "
                    f"{format_amount(name, max(table.amount(c, free[best, c]), 0.0))} free "
                    f"{name}, the gang needs {format_amount(name, table.amount(c, need[c]))}")
        fitting = int((free >= need - 1e-6).all(axis=1).sum())
        why = f"; {last.failure}" if last is not None and last.failure else ""
        return (f"topology {level}: {fitting} domain(s) have the room in total but none "
                f"takes the {minimum} pods it needs{why}")


_STATES: weakref.WeakKeyDictionary[Session, _State] = weakref.WeakKeyDictionary()


def _state(ssn: Session) -> _State:
    state = _STATES.get(ssn)
    if state is None:
        state = _STATES[ssn] = _State(ssn)
    return state


def _need(ssn: Session, job: JobInfo, tasks: list[TaskInfo], minimum: int | None = None,
          members: list[TaskInfo] | None = None) -> np.ndarray:
    """What the gang (or subgroup: its members) still needs to reach its
    minimum: the first tasks in task order (one, once the minimum is met)."""
    table = ssn.cluster.table
    if minimum is None or members is None:
        minimum, members = job.min_member, list(job.tasks.values())
    missing = minimum - sum(1 for t in members if t.status in _MET)
    ordered = ssn.ordered_tasks(job, tasks)
    chosen = ordered[:missing] if missing > 0 else ordered[:1]
    return np.sum([table.vector(t.resreq) for t in chosen], axis=0) if chosen else \
        np.zeros(len(table.dims))


def _least_stranded(free: np.ndarray, need: np.ndarray, fits: np.ndarray,
                    capacity: np.ndarray) -> list[int]:
    """Fitting domains by the room they would leave, scaled per resource by
    the cluster's capacity, counting only resources the gang asks for."""
    rows = np.flatnonzero(fits)
    if not len(rows):
        return []
    asked = (need > 0) & (capacity > 0)
    left = np.where(asked, (free[rows] - need) / np.where(capacity > 0, capacity, 1.0), 0.0)
    order = np.lexsort((rows, left.sum(axis=1)))
    return [int(rows[i]) for i in order]


def _nests(inner, outer) -> bool:     # type: ignore[no-untyped-def]
    """Every domain of inner lies whole inside one domain of outer."""
    if inner.key == HOSTNAME_KEY:
        return bool(outer.has[inner.has].all())
    both = inner.has & outer.has
    if (inner.has & ~outer.has).any():
        return False
    pairs = np.unique(np.stack([inner.ids[both], outer.ids[both]]), axis=1)
    return len(pairs[0]) == len(np.unique(pairs[0]))
