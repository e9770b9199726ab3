"""How the domains of each topology level stand for one gang in a session:
free room and pod slots per domain, which levels nest in which, the domain
a gang's members already sit in, and why none takes a gang, in numbers.
actions/common/topology.py decides with it where a gang goes.

An action makes one DomainChoice when it starts and hands it down to every
placement it makes: what it works out is kept for the action's length."""
from __future__ import annotations

import functools
from typing import Iterable

import attrs
import numpy as np

from kaisched.api.constraints import HOSTNAME_KEY
from kaisched.api.domains import DomainRoom, Domains, pod_slots
from kaisched.api.job import JobInfo, SubGroup, TopologyRule
from kaisched.api.podindex import PRESENT
from kaisched.api.resource import format_amount
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, TaskStatus
from kaisched.framework import Session

# A gang's pods that stay where they are (releasing ones are leaving).
STAYING = PRESENT - {TaskStatus.RELEASING}
MET = READY_STATUSES           # what counts towards a minimum
# Levels tried when widening, besides those the gangs name (narrowest first
# by their domain count, whichever exist on the nodes).
WELL_KNOWN_LEVELS = ("nvidia.com/gpu.clique", "topology.kubernetes.io/zone",
                     "topology.kubernetes.io/region")


def level_of(rule: TopologyRule) -> str:
    """The level eviction keeps a gang (or subgroup) inside."""
    return str(rule.required or rule.preferred)


@attrs.frozen(slots=True, eq=False)
class _Weighed:
    """How the domains of one level stand for one gang (or subgroup)."""

    domains: Domains
    cols: np.ndarray           # the resources the pods ask for
    count: int                 # pods still missing to the minimum
    free: np.ndarray           # per domain: free room in cols
    slots: np.ndarray          # per domain: how many of its pods fit, node by node
    allowed: np.ndarray        # per domain: members already placed leave it open


class DomainChoice:
    """For one action over a session: the usable nodes and which levels nest in
    which, worked out when first asked (most sessions have no topology gang)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.cluster = ssn.cluster
        self._wider: dict[str, list[str]] = {}
        self._views: dict[bool, DomainRoom] = {}

    @functools.cached_property
    def usable(self) -> np.ndarray:
        return self.cluster.usable_nodes()

    @functools.cached_property
    def capacity(self) -> np.ndarray:
        return self.cluster.table.alloc.sum(axis=0)

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
        """The levels whose domains hold level's, tightest first: from the
        cluster's Topology that names level (its outer levels, inside out, as
        KAI widens), else those that nest by the node labels."""
        found = self._wider.get(level)
        if found is None:
            for levels in self.cluster.topologies:
                if level in levels:
                    outer = reversed(levels[:levels.index(level)])
                    found = self._wider[level] = [k for k in outer if len(self.cluster.domains(k))]
                    return found
            inner = self.cluster.domains(level)
            names = {j.spec.topology.required for j in self.cluster.jobs.values()} | \
                    {j.spec.topology.preferred for j in self.cluster.jobs.values()} | \
                    set(WELL_KNOWN_LEVELS)
            around = [self.cluster.domains(k) for k in sorted(n for n in names if n and n != level)]
            found = [d.key for d in sorted(around, key=lambda d: (-len(d), d.key))
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

    def bound(self, job: JobInfo, level: str, members: list[TaskInfo], minimum: int,
              possible: np.ndarray | None, within: np.ndarray | None,
              inner: list[SubGroup]) -> np.ndarray | None:
        """The nodes of the domain of level (inside within) where members sit
        or, before they sit anywhere, the domain the room possible (per node)
        lets hold their minimum with the least eviction, each subgroup of
        inner inside one domain of its own level too. None: no limit known
        (no members placed, no room given)."""
        domains = self.cluster.domains(level)
        table = self.cluster.table
        ids = {int(domains.ids[table.index[t.node_name]]) for t in members
               if t.status in STAYING and t.node_name in table.index}
        if ids:
            mask = np.isin(domains.ids, sorted(ids - {-1}))
            return mask if within is None else mask & within
        if possible is None:
            return within
        if within is not None:
            possible = possible * within[:, None]
        waiting = [t for t in members if t.status is TaskStatus.PENDING]
        need = need_of(self.ssn, job, waiting, minimum, members)
        totals = domains.totals(possible)
        fits = np.array([d for d in np.flatnonzero((totals >= need - 1e-6).all(axis=1))
                         if self._inner_fit(job, inner, possible, domains.rows[d])], dtype=int)
        mask = np.zeros(len(table), dtype=bool)
        if len(fits):
            free = domains.totals(self.room(False))[fits]
            evict = np.maximum(need - free, 0.0) / np.where(self.capacity > 0, self.capacity, 1.0)
            mask[domains.rows[int(fits[np.lexsort((fits, evict.sum(axis=1)))[0]])]] = True
        return mask

    def _inner_fit(self, job: JobInfo, inner: list[SubGroup], possible: np.ndarray,
                   rows: np.ndarray) -> bool:
        """Every subgroup of inner could have its minimum inside one domain of
        its level among these rows."""
        for sg in inner:
            members = job.members_of(sg.name)
            waiting = [t for t in members if t.status is TaskStatus.PENDING]
            need = need_of(self.ssn, job, waiting, job.tree.min_pods(sg.name), members)
            mine = np.zeros_like(possible)
            mine[rows] = possible[rows]
            if not (self.cluster.domains(level_of(sg.topology)).totals(mine)
                    >= need - 1e-6).all(axis=1).any():
                return False
        return True

    def candidates(self, members: list[TaskInfo], tasks: list[TaskInfo], level: str,
                   need: np.ndarray, minimum: int, idle_only: bool,
                   within: np.ndarray | None) -> Iterable[np.ndarray]:
        """Masks of the domains of level (inside within) that could hold need,
        in KAI's packing order (_packed). Members with pods on nodes already
        keep the rest in their domain."""
        w = self._weigh(members, tasks, level, need, minimum, idle_only, within)
        fits = w.allowed & (w.free >= need[w.cols] - 1e-6).all(axis=1) & (w.slots >= w.count)
        for d in self._packed(w, need[w.cols], fits, level, idle_only, within):
            yield self._mask(w.domains, d, within)

    def _packed(self, w: _Weighed, need: np.ndarray, fits: np.ndarray, level: str,
                idle_only: bool, within: np.ndarray | None) -> list[int]:
        """Fitting domains in KAI's packing order, at every level at once: by
        the fullness (the gang's need over the free room, its dominant
        resource) of the domain they sit in at each outer level, outermost
        first, then by their own, fullest first -- among racks that fit, the
        one inside the fullest spine that fits; then the least room stranded,
        then the name."""
        found = np.flatnonzero(fits)
        if not len(found):
            return []
        first = np.array([w.domains.rows[d][0] for d in found])     # a node of each domain
        keys: list[np.ndarray] = []
        for outer in reversed(self.wider(level)):
            domains = self.cluster.domains(outer)
            room = self._view(idle_only).totals(domains) if within is None \
                else domains.totals(self.room(idle_only) * within[:, None])
            ratio = _fullness(need, room[:, w.cols])
            ids = domains.ids[first]
            keys.append(-np.where(ids >= 0, ratio[np.maximum(ids, 0)], 0.0))
        keys.append(-_fullness(need, w.free[found]))
        asked = (need > 0) & (self.capacity[w.cols] > 0)
        scale = np.where(self.capacity[w.cols] > 0, self.capacity[w.cols], 1.0)
        keys.append(np.where(asked, (w.free[found] - need) / scale, 0.0).sum(axis=1))
        order = np.lexsort((found, *reversed(keys)))
        return [int(found[i]) for i in order]

    def partial(self, members: list[TaskInfo], tasks: list[TaskInfo], level: str,
                need: np.ndarray, minimum: int, within: np.ndarray | None) -> np.ndarray | None:
        """The domain of level (inside within, and where members sit, if they
        do) that could take the most of the minimum when none takes all of
        it: where a NonStrict gang holds what it can. The tighter of equals
        first. None: no domain takes any."""
        w = self._weigh(members, tasks, level, need, minimum, False, within)
        takes = np.where(w.allowed, np.minimum(w.slots, w.count), 0.0)
        if not len(takes) or takes.max() < 1:
            return None
        scale = np.where(self.capacity[w.cols] > 0, self.capacity[w.cols], 1.0)
        spare = (w.free / scale).sum(axis=1)
        best = int(np.lexsort((np.arange(len(takes)), spare, -takes))[0])
        return self._mask(w.domains, best, within)

    def _weigh(self, members: list[TaskInfo], tasks: list[TaskInfo], level: str,
               need: np.ndarray, minimum: int, idle_only: bool,
               within: np.ndarray | None) -> _Weighed:
        """Per domain of level: free room in what the pods ask for, pod slots
        (node by node), and whether members already there allow it."""
        domains = self.cluster.domains(level)
        table = self.cluster.table
        biggest = np.max([table.vector(t.resreq) for t in tasks], axis=0)
        cols = np.flatnonzero((biggest > 0) | (need > 0))
        # Room in total is not enough: the pods must fit node by node.
        count = max(minimum - sum(1 for t in members if t.status in MET), 1)
        apart = all(self.apart(t) for t in tasks)       # its pods keep to one per node
        if within is None:
            view = self._view(idle_only)
            free = view.totals(domains)[:, cols]
            slots = view.slots(domains, biggest, apart) if len(cols) \
                else np.full(len(domains), float(count))
        else:
            room = self.room(idle_only, cols) * within[:, None]     # only what the gang asks for
            free = domains.totals(room)
            per_node = pod_slots(room, biggest[cols]) if len(cols) \
                else np.full(len(table), float(count))
            if apart:
                per_node = np.minimum(per_node, 1.0)
            keep = domains.has
            slots = np.bincount(domains.ids[keep], weights=per_node[keep],
                                minlength=len(domains))
        here = {int(domains.ids[table.index[t.node_name]]) for t in members
                if t.status in STAYING and t.node_name in table.index}
        allowed = np.isin(np.arange(len(domains)), list(here)) if here \
            else np.ones(len(domains), dtype=bool)
        return _Weighed(domains, cols, count, free, slots, allowed)

    def _mask(self, domains: Domains, d: int, within: np.ndarray | None) -> np.ndarray:
        mask = np.zeros(len(self.cluster.table), dtype=bool)
        mask[domains.rows[d]] = True
        return mask if within is None else mask & within

    def _view(self, idle_only: bool) -> DomainRoom:
        view = self._views.get(idle_only)
        if view is None:
            view = self._views[idle_only] = DomainRoom(self.cluster.table, self.usable, idle_only)
        view.sync()
        return view

    def apart(self, task: TaskInfo) -> bool:
        """The task keeps away from its own kind on a host (required
        anti-affinity on the hostname selecting itself)."""
        labels = dict(task.labels)
        return any(t.topology_key == HOSTNAME_KEY and t.matcher.matches(
            labels, task.namespace, self.cluster.namespace_labels)
            for t in task.placement.rules.anti_affinity)

    def shortfall(self, minimum: int, level: str, need: np.ndarray, idle_only: bool,
                  last_failure: str | None, members: list[TaskInfo]) -> str:
        """Why no domain of level took the gang, in numbers (last_failure: why the
        last domain tried did not); about the domain its members already sit in,
        when they do."""
        table = self.cluster.table
        domains = self.cluster.domains(level)
        if not len(domains):
            return f"topology {level}: no node has the label {level}"
        free = domains.totals(self.room(idle_only))
        cols = [int(c) for c in np.flatnonzero(need > 0) if table.dims[c] != "pods"] or \
            [int(c) for c in np.flatnonzero(need > 0)]
        why = f"; {last_failure}" if last_failure else ""
        here = sorted({int(domains.ids[table.index[t.node_name]]) for t in members
                       if t.status in STAYING and t.node_name in table.index} - {-1})
        if here:
            missing = max(minimum - sum(1 for t in members if t.status in MET), 1)
            d = max(here, key=lambda d: free[d].sum())
            short = [c for c in cols if free[d, c] < need[c] - 1e-6]
            if not short:
                return (f"topology {level}: its domain ({domains.names[d]}) has the room in "
                        f"total but not node by node for the {missing} more pod(s) it needs{why}")
            c = short[0]
            name = table.dims[c]
            return (f"topology {level}: its domain ({domains.names[d]}) has "
                    f"{format_amount(name, max(table.amount(c, free[d, c]), 0.0))} free {name}, "
                    f"the {missing} more pod(s) it needs ask for "
                    f"{format_amount(name, table.amount(c, need[c]))}")
        short = [c for c in cols if free[:, c].max() < need[c] - 1e-6]
        if short:
            c = max(short, key=lambda c: need[c] / max(free[:, c].max(), 1e-9))
            best = int(np.argmax(free[:, c]))
            name = table.dims[c]
            return (f"topology {level}: the largest domain ({domains.names[best]}) has "
                    f"{format_amount(name, max(table.amount(c, free[best, c]), 0.0))} free "
                    f"{name}, the gang needs {format_amount(name, table.amount(c, need[c]))}")
        fitting = int((free >= need - 1e-6).all(axis=1).sum())
        return (f"topology {level}: {fitting} domain(s) have the room in total but none "
                f"takes the {minimum} pods it needs{why}")


def need_of(ssn: Session, job: JobInfo, tasks: list[TaskInfo], minimum: int | None = None,
          members: list[TaskInfo] | None = None) -> np.ndarray:
    """What the gang (or subgroup: its members) still needs to reach its
    minimum: the first tasks in task order (one, once the minimum is met)."""
    table = ssn.cluster.table
    if minimum is None or members is None:
        chosen = ssn.minimum_tasks(job, tasks)
    else:
        missing = minimum - sum(1 for t in members if t.status in MET)
        ordered = ssn.ordered_tasks(job, tasks)
        chosen = ordered[:missing] if missing > 0 else ordered[:1]
    return np.sum([table.vector(t.resreq) for t in chosen], axis=0) if chosen else \
        np.zeros(len(table.dims))


def _fullness(need: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Per domain: need over free room in its dominant resource (KAI's ratio:
    the higher, the fuller the domain once the gang is in it; over 1 it does
    not fit; a resource the domain has none of counts as very full)."""
    asked = need > 0
    if not asked.any():
        return np.zeros(len(free))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(free[:, asked] > 0, need[asked] / free[:, asked], 1e9)
    return ratio.max(axis=1)


def _nests(inner: Domains, outer: Domains) -> bool:
    """Every domain of inner lies whole inside one domain of outer."""
    if inner.key == HOSTNAME_KEY:
        return bool(outer.has[inner.has].all())
    both = inner.has & outer.has
    if (inner.has & ~outer.has).any():
        return False
    pairs = np.unique(np.stack([inner.ids[both], outer.ids[both]]), axis=1)
    return len(pairs[0]) == len(np.unique(pairs[0]))
