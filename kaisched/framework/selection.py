"""Node selection: which node a task goes to, per equivalence class of tasks.

The filters and scores of every node are cached per class (what every filter
and score reads of a task) and refreshed only on the rows that changed since
the class last asked -- read from the node table's log of touched rows, not
by comparing versions over every node -- and the best node is kept ranked as
they change (kaisched.framework.ranking), so a placement costs the same on
50,000 nodes as on 500. The rules over other pods (affinity, spread) are
asked afresh, but only about the rows the cached filters leave; a gang bound
to a topology domain and room held for starving gangs are scanned over the
whole table.

A refresh of a few rows -- what most placements leave, the one row they
took -- asks the callbacks' one-row forms in plain Python where every
callback has one (numpy's cost per call is all there is on one row); bigger
refreshes ask the array forms.
"""
from __future__ import annotations

from typing import Any, Callable, Literal, Mapping, Protocol

import attrs
import numpy as np

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.constraints import NO_RULES, Placement
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, JobKey, NodeName
from kaisched.framework.hooks import (
    Hook,
    HookRegistry,
    Mask,
    NodeFilter,
    OneRow,
    PodFilter,
    Registration,
    Rows,
    TaskTest,
)
from kaisched.framework.ranking import Ranking

# The label under which the predicates plugin registers its resource fit: the
# explanations give it per resource, in numbers.
RESOURCE_FIT = "resources"
# Up to this many rows to refresh, a class asks the one-row forms row by row;
# beyond, the array forms (a row's answers in plain Python cost about what one
# array call costs, and a refresh makes a dozen).
FEW_ROWS = 8
SHORT_LOG = 64      # touches since a class last asked read without numpy


@attrs.define(eq=False, slots=True)
class _ClassCache:
    """Per equivalence class: filters and scores of every node, each row
    refreshed only once it changed and is asked about."""

    seen: np.ndarray       # per row: the table version its answers are from
    mask: np.ndarray       # passes every predicate (resources against future idle)
    idle_fit: np.ndarray   # resources fit idle now (else the task would be pipelined)
    score: np.ndarray
    version: int = -1      # every row is up to date as of this table version
    pos: int = -1          # ... which is this position of the table's log of touches
    ranking: Ranking | None = None      # the best rows, once the class is asked unbounded


@attrs.frozen(slots=True)
class Choice:
    node: NodeName
    pipelined: bool


class HeldRoom(Protocol):
    """Room held for gangs (the session's): per gang, and what the others hold."""

    @property
    def rooms(self) -> Mapping[JobKey, np.ndarray]: ...

    @property
    def reservations(self) -> Mapping[JobKey, Any]: ...

    def lent(self, ends_by: float | None) -> tuple[JobKey, ...]: ...

    def start(self, job: JobKey) -> float | None: ...

    def beside(self, job: JobKey | None,
               lent: tuple[JobKey, ...] = ()) -> tuple[np.ndarray, np.ndarray]: ...


class NodeSelection:
    """A session's node choices. starving is the session's room held for
    starving gangs (and booked, and made by consolidation), read as it changes."""

    def __init__(self, cluster: ClusterInfo, hooks: HookRegistry, starving: HeldRoom,
                 ends_by: Callable[[JobKey], float | None]) -> None:
        self.cluster = cluster
        self.ends_by = ends_by          # when a job is sure to have ended (None: not known)
        self.hooks = hooks
        self._idle_filters = bool(hooks.callbacks(Hook.IDLE))     # none: idle is the table's
        # The one-row forms of the cached filters, idle tests and scores (None
        # when a callback has none: refreshes then always ask the array forms).
        ones = [hooks.ones(Hook.PREDICATE), hooks.ones(Hook.IDLE), hooks.ones(Hook.NODE_ORDER)]
        self._ones: tuple[list[OneRow], list[OneRow], list[OneRow]] | None = None
        if ones[0] is not None and ones[1] is not None and ones[2] is not None:
            self._ones = (ones[0], ones[1], ones[2])
        self.starving = starving
        self.reserved_for = starving.rooms
        # Per owner (a gang holding room, or None) and the gangs lending it
        # theirs: the rows and room the others hold.
        self._held: dict[tuple[JobKey | None, tuple[JobKey, ...]], tuple[np.ndarray, np.ndarray]] = {}
        self._outside: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}  # fits outside them
        self._caches: dict[Any, _ClassCache] = {}
        self._bases: dict[Placement, Placement] = {}
        self.all_rows = np.arange(len(cluster.table))
        self._rules = cluster.rules_in_play()
        # Per rule over other pods, the tasks it is about (None: every task).
        whens = [*(r.when for r in hooks.registrations(Hook.POD_PREDICATE)),
                 *(r.when for r in hooks.registrations(Hook.POD_ORDER))]
        self._pod_rules = bool(whens)
        # When every such rule says which tasks it is about (volumes: pods that
        # mount claims), the others take the cached path as if there were none.
        tests = [when for when in whens if when is not None]
        self._pod_when = _any_of(list(dict.fromkeys(tests))) \
            if whens and len(tests) == len(whens) else None

    def class_key(self, task: TaskInfo) -> tuple[Any, ...]:
        """The task's equivalence class: what every filter and score reads of it.
        Its requests and placement, the volume claims it mounts, the shape of
        its ResourceClaims; and where some pod's rules select pods by label,
        its namespace and the labels those rules read. Tasks of one class get
        the same answers, so a failed one speaks for its twins."""
        if task.claims:
            return (*self._base_class_key(task), self._claims_class(task))
        if task.gpu is not None:        # a share of a GPU: alike only with the same ask
            return (*self._base_class_key(task), task.gpu.ask)
        return self._base_class_key(task)

    def _base_class_key(self, task: TaskInfo) -> tuple[Any, ...]:
        rules = self._rules
        if not rules.any_rule:
            if task.pvcs:     # the claims it mounts: pods alike but for them differ
                return (task.resreq, task.placement, task.pvcs)
            return (task.resreq, task.placement)
        keys = rules.label_keys
        return (task.resreq, task.placement, task.namespace,
                tuple(kv for kv in task.labels if kv[0] in keys), task.pvcs)

    def _claims_class(self, task: TaskInfo) -> tuple[Any, ...]:
        """What allocating the task's ResourceClaims reads: claims of one shape,
        none allocated yet, fit the same nodes; an allocated or missing one is
        its own."""
        claims = self.cluster.devices.claims
        found = [claims.get(key) for key in task.claims]
        shapes = tuple(c.shape for c in found if c is not None and c.allocation is None)
        return shapes if len(shapes) == len(found) else task.claims

    def held_changed(self) -> None:
        """Room held for a starving gang was taken or given back."""
        self._held.clear()
        self._outside.clear()

    def static_mask(self, task: TaskInfo, evicting: bool = False) -> np.ndarray:
        """Nodes passing every filter but resources: where room could be made
        (evicting: by evicting pods). Each filter is asked in its form for
        that, where its plugin registered one (Registration.room_form)."""
        rows = self.all_rows
        out = np.ones(len(self.cluster.table), dtype=bool)
        for f in self.hooks.registrations(Hook.PREDICATE):
            if f.label != RESOURCE_FIT:
                out &= f.room_form(evicting)(task, rows)
        for p in self.hooks.registrations(Hook.POD_PREDICATE):
            if p.label != RESOURCE_FIT:
                found = p.room_form(evicting)(task, rows)
                if found is not None:       # the rule leaves the task alone
                    out &= found
        return out

    def node_mask(self, task: TaskInfo) -> np.ndarray:
        """Nodes whose own facts (readiness, labels, taints) let the task in,
        room aside (resources, and any filter whose refusal is a lack of
        room, such as a shared GPU's free part): what no eviction changes."""
        return self._passing(task, [f for f in self.hooks.registrations(Hook.PREDICATE)
                                    if f.label != RESOURCE_FIT and f.blocker is not Blocker.RESOURCES])

    def _passing(self, task: TaskInfo, filters: list[Registration[NodeFilter]]) -> np.ndarray:
        """The nodes every one of these filters lets the task onto."""
        out = np.ones(len(self.cluster.table), dtype=bool)
        for found in filters:
            out &= found.fn(task, self.all_rows)
        return out

    def filters(self) -> list[Registration[NodeFilter]]:
        """Every node filter as registered, cached ones first (a POD_PREDICATE
        answering None, for a task its rule leaves alone, passes every node)."""
        def passing(fn: PodFilter) -> NodeFilter:
            def ask(task: TaskInfo, rows: Rows) -> Mask:
                found = fn(task, rows)
                return np.ones(len(rows), dtype=bool) if found is None else found
            return ask
        return [*self.hooks.registrations(Hook.PREDICATE),
                *(Registration(passing(r.fn), r.label, r.blocker)
                  for r in self.hooks.registrations(Hook.POD_PREDICATE))]

    def select(self, task: TaskInfo, idle_only: bool = False,
               within: np.ndarray | None = None) -> Choice | None:
        """The best node for the task, preferring room that is idle now; a node
        that has room only once releasing pods are gone gives a pipelined choice.
        within (a mask over nodes) keeps a topology-bound gang inside its domain."""
        if not self._pod_rules or (self._pod_when is not None and not self._pod_when(task)):
            cache = self._refresh(task)
            if not self.reserved_for and within is None:
                ranked = self._ranked(cache, idle_only)
                if ranked is not False:
                    return ranked
            mask, idle_fit = cache.mask, cache.idle_fit
            if self.reserved_for:
                mask, idle_fit = self._outside_reservations(task, cache)
            if within is not None:
                mask = mask & within
            idle = mask & idle_fit
            has_idle = bool(idle.any())
            if not has_idle and (idle_only or not mask.any()):
                return None
            pick = idle if has_idle else mask
            best = int(np.argmax(np.where(pick, cache.score, -np.inf)))
            return Choice(self.cluster.table.names[best], not has_idle)
        # The rules over other pods change with every placement nearby, so they
        # are asked afresh, but only about the nodes the cached filters leave
        # (a gang's domain is a rack, not the cluster). Rows changed since the
        # class last looked are refreshed only if those rules let them through:
        # the node a gang mate just took is mostly ruled out by anti-affinity.
        stale = None
        if self.reserved_for:
            cache = self._refresh(task)
            mask, idle_fit = self._outside_reservations(task, cache)
        else:
            cache = self._class_cache(task)
            mask, idle_fit = cache.mask, cache.idle_fit
            if cache.version != self.cluster.table.version:
                stale = self.cluster.table.row_version > cache.seen
                mask = mask | stale
        if within is not None:
            mask = mask & within
        rows = self._pod_filtered(task, np.flatnonzero(mask))
        if stale is not None and len(rows):
            old = rows[stale[rows]]
            if len(old):
                self._update(task, cache, old)
                rows = rows[cache.mask[rows]]
        if not len(rows):
            return None
        idle = idle_fit[rows]
        for fn in self.hooks.callbacks(Hook.POD_IDLE):
            found = fn(task, rows)
            if found is not None:
                idle = idle & found
        has_idle = bool(idle.any())
        if not has_idle and idle_only:
            return None
        if has_idle and not idle.all():
            rows = rows[idle]
        score = cache.score[rows]
        for rule in self.hooks.callbacks(Hook.POD_ORDER):
            scored = rule(task, rows)
            if scored is not None:
                score = score + scored
        best = int(rows[int(np.argmax(score))])     # the first best row, as over all nodes
        return Choice(self.cluster.table.names[best], not has_idle)

    # -- internals -------------------------------------------------------------------
    def _ranked(self, cache: _ClassCache, idle_only: bool) -> Choice | None | Literal[False]:
        """The choice the scan below would make, from the class's ranking;
        False when only the scan can say (see Ranking.best)."""
        ranking = cache.ranking
        if ranking is None:
            ranking = cache.ranking = Ranking(cache.mask, cache.idle_fit, cache.score)
        names = self.cluster.table.names
        best = ranking.best(True, cache.score)
        if best is not None:
            return Choice(names[best], False) if best >= 0 else False
        if idle_only:
            return None
        best = ranking.best(False, cache.score)
        if best is None:
            return None
        return Choice(names[best], True) if best >= 0 else False

    def _pod_filtered(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """The rows that every rule over other pods lets the task take (a
        POD_PREDICATE answering None leaves it alone); each rule is asked
        only about the rows the ones before it left."""
        for fn in self.hooks.callbacks(Hook.POD_PREDICATE):
            if not len(rows):
                break
            found = fn(task, rows)
            if found is not None and not found.all():
                rows = rows[found]
        return rows

    def _outside_reservations(self, task: TaskInfo,
                              cache: _ClassCache) -> tuple[np.ndarray, np.ndarray]:
        """The class's fits again on rows where other gangs hold room, without
        it; the same for every alike task while no node changes."""
        owner = task.job if task.job in self.reserved_for else None
        lent = self.starving.lent(self.ends_by(task.job))
        memo_key = (self.class_key(task), owner, lent, self.cluster.table.version)
        found = self._outside.get(memo_key)
        if found is not None:
            return found
        held = self._held.get((owner, lent))
        if held is None:
            held = self._held[(owner, lent)] = self.starving.beside(owner, lent)
        rows, room = held
        mask, idle_fit = cache.mask, cache.idle_fit
        if len(rows):           # else only the task's own gang holds room
            table = self.cluster.table
            vec = table.vector(task.resreq)
            mask, idle_fit = mask.copy(), idle_fit.copy()
            mask[rows] &= table.fits(vec, table.future[rows] - room)
            idle_fit[rows] &= table.fits(vec, table.idle[rows] - room)
        self._outside[memo_key] = (mask, idle_fit)
        return mask, idle_fit

    def _class_cache(self, task: TaskInfo) -> _ClassCache:
        """The task's class's cached answers, as they are (rows may be stale)."""
        placement = task.placement
        if placement.rules:     # cached answers never read the pod rules
            base = self._bases.get(placement)
            if base is None:
                base = self._bases[placement] = attrs.evolve(placement, rules=NO_RULES)
            placement = base
        key: tuple[Any, ...] = (task.resreq, placement)
        if task.gpu is not None:        # a share of a GPU: alike only with the same ask
            key = (task.resreq, placement, task.gpu.ask)
        cache = self._caches.get(key)
        if cache is None:
            size = len(self.cluster.table)
            # seen -1: every row is stale until first asked about.
            cache = self._caches[key] = _ClassCache(
                np.full(size, -1, dtype=np.int64), np.zeros(size, dtype=bool),
                np.zeros(size, dtype=bool), np.zeros(size))
        return cache

    def _refresh(self, task: TaskInfo) -> _ClassCache:
        """The task's class's cached answers brought up to date on every row
        that changed since (the rules over other pods are not cached: select
        asks them afresh)."""
        table = self.cluster.table
        cache = self._class_cache(task)
        if cache.version != table.version:
            rows = self._stale(cache)
            if self._ones is not None and len(rows) <= FEW_ROWS:
                if len(rows):
                    self._update_few(task, cache, rows if isinstance(rows, list) else rows.tolist())
            elif len(rows):
                self._update(task, cache, np.asarray(rows, dtype=np.intp))
            cache.version, cache.pos = table.version, table.log_end()
        return cache

    def _stale(self, cache: _ClassCache) -> np.ndarray | list[int]:
        """The rows changed since the class last caught up, in row order: those
        touched since, by the table's log, that its answers are older than
        (the rules' path may have asked some already). Compared over every
        row only when the log no longer reaches back, or holds more than a
        pass over the rows would cost; a short log is read in plain Python
        (a list, not an array)."""
        table = self.cluster.table
        touched = table.touched_since(cache.pos) if cache.pos >= 0 else None
        if touched is None or len(touched) * 8 > len(table):
            return np.flatnonzero(table.row_version > cache.seen)
        if len(touched) <= SHORT_LOG:
            versions, seen = table.row_version, cache.seen
            return [row for row in sorted(set(touched)) if versions[row] > seen[row]]
        rows = np.array(sorted(set(touched)), dtype=np.intp)
        return rows[table.row_version[rows] > cache.seen[rows]]

    def _update(self, task: TaskInfo, cache: _ClassCache, rows: np.ndarray) -> None:
        """Ask the cached filters and scores again about these rows."""
        table = self.cluster.table
        cache.mask[rows] = self.hooks.mask(Hook.PREDICATE, task, rows)
        cache.idle_fit[rows] = table.request_fits(task.resreq, table.idle[rows])
        if self._idle_filters:
            cache.idle_fit[rows] &= self.hooks.mask(Hook.IDLE, task, rows)
        cache.score[rows] = self.hooks.score(Hook.NODE_ORDER, task, rows)
        cache.seen[rows] = table.version
        if cache.ranking is not None and not cache.ranking.refreshed(
                rows.tolist(), cache.mask, cache.idle_fit, cache.score):
            cache.ranking = None        # rebuilt in bulk when next asked

    def _update_few(self, task: TaskInfo, cache: _ClassCache, rows: list[int]) -> None:
        """_update for a few rows, through the one-row forms: the same answers
        (the filters ANDed, the scores summed in registration order, as the
        registry's combinators do), without an array call per callback."""
        assert self._ones is not None
        filters, idles, scores = self._ones
        table = self.cluster.table
        mask, idle_fit, score, seen = cache.mask, cache.idle_fit, cache.score, cache.seen
        resreq, idle, version = task.resreq, table.idle, table.version
        for row in rows:
            passes = True
            for fn in filters:
                if not fn(task, row):
                    passes = False
                    break
            fits = table.request_fits_row(resreq, idle, row)
            if fits:
                for fn in idles:
                    if not fn(task, row):
                        fits = False
                        break
            if scores:
                total = float(scores[0](task, row))
                for fn in scores[1:]:
                    total += fn(task, row)
            else:
                total = 0.0
            mask[row], idle_fit[row], score[row], seen[row] = passes, fits, total, version
        if cache.ranking is not None and not cache.ranking.refreshed(rows, mask, idle_fit, score):
            cache.ranking = None


def _any_of(tests: list[TaskTest]) -> TaskTest:
    if len(tests) == 1:
        return tests[0]
    return lambda task: any(test(task) for test in tests)
