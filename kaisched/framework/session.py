"""Session: one scheduling cycle over a snapshot.

Plugins register callbacks when it opens; actions ask it questions and change
it only through Statements; when it closes, its decisions are a list of
effects. A session does no I/O.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs
import numpy as np

from kaisched.api.clock import to_rfc3339
from kaisched.api.cluster import ClusterInfo
from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.placement import NO_RULES, Placement
from kaisched.api.queue import QueueInfo
from kaisched.api.resource import Resource, format_amount
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus
from kaisched.framework.effects import Effect
from kaisched.framework.holds import Hold, apply_holds, release_deadlocks
from kaisched.framework.hooks import Hook, HookRegistry
from kaisched.framework.statement import Statement

if TYPE_CHECKING:
    from kaisched.framework.config import SchedulerConfig
    from kaisched.framework.registry import Plugin

# The label under which the predicates plugin registers its resource fit: the
# session explains it per resource, in numbers.
RESOURCE_FIT = "resources"


@attrs.define(eq=False, slots=True)
class _ClassCache:
    """Per equivalence class (see Session.class_key): filters and scores of
    every node, each row refreshed only once it changed and is asked about."""

    seen: np.ndarray       # per row: the table version its answers are from
    mask: np.ndarray       # passes every predicate (resources against future idle)
    idle_fit: np.ndarray   # resources fit idle now (else the task would be pipelined)
    score: np.ndarray
    version: int = -1      # every row is up to date as of this table version


@attrs.frozen(slots=True)
class Choice:
    node: NodeName
    pipelined: bool


class Session:
    def __init__(self, cluster: ClusterInfo, config: SchedulerConfig,
                 plugins: Sequence[Sequence[Plugin]],
                 holds: Mapping[JobKey, Hold] | None = None) -> None:
        self.cluster = cluster
        self.config = config
        self.now = cluster.now
        self.now_text = to_rfc3339(cluster.now)          # for every timestamp it writes
        self.hooks = HookRegistry()
        self.plugins = [p for tier in plugins for p in tier]
        self.effects: list[Effect] = []
        self.placed: dict[PodKey, NodeName] = {}          # committed binds
        self.reservations: dict[PodKey, NodeName] = {}    # held for this session only
        self.unschedulable: dict[JobKey, str] = {}        # why a job was not placed
        self.stale_since: dict[JobKey, str | None] = {}   # gang below minMember since when
        self.hold_since: dict[JobKey, float] = {}         # NonStrict holds: since when
        self.no_hold: set[JobKey] = set()                 # holds that just expired
        self.holds: dict[JobKey, Hold] = {}               # holds to carry to the next session
        # The enqueue gate: None when no enqueue action runs (nothing gated),
        # else the gangs admitted; inqueue holds the minResources of those
        # admitted that have not started, which later admissions must leave.
        self.admitted: set[JobKey] | None = None
        self.inqueue: dict[JobKey, Resource] = {}
        # Room held for starving gangs, per gang (rows x resources of the node
        # table): other gangs may use a node's room only beyond it.
        self.reserved_for: dict[JobKey, np.ndarray] = {}
        # Per owner (a gang holding room, or None): the rows and room the others hold.
        self._held: dict[JobKey | None, tuple[np.ndarray, np.ndarray]] = {}
        self._outside: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # fits outside them
        self._caches: dict[Any, _ClassCache] = {}
        self._explained: dict[tuple, str] = {}
        self._bases: dict[Placement, Placement] = {}
        self._all_rows = np.arange(len(cluster.table))
        self._rules = cluster.rules_in_play()
        self._current_plugin = ""
        # Set while room_mask asks the filters: devices evictable pods hold count as free.
        self.planning_eviction = False
        for tier in plugins:
            self.hooks.begin_tier()
            for plugin in tier:
                self._current_plugin = plugin.name
                plugin.on_session_open(self)
        self._queue_key = self.hooks.order_key(Hook.QUEUE_ORDER)
        self._job_key = self.hooks.order_key(Hook.JOB_ORDER)
        self._task_key = self.hooks.order_key(Hook.TASK_ORDER)
        self._pod_rules = bool(self.hooks.callbacks(Hook.POD_PREDICATE)
                               or self.hooks.callbacks(Hook.POD_ORDER))
        self.held: dict[JobKey, Statement] = apply_holds(self, holds or {})

    # -- registration (plugins, while the session opens) -------------------------
    def register(self, hook: Hook, fn: Callable[..., Any], label: str | None = None) -> None:
        self.hooks.register(hook, label or self._current_plugin, fn)

    def close(self) -> list[Effect]:
        self.holds = release_deadlocks(self, self.holds)
        for plugin in reversed(self.plugins):
            plugin.on_session_close(self)
        return self.effects

    # -- questions actions ask -----------------------------------------------------
    def queue_order_key(self, queue: QueueInfo) -> tuple:
        return (self._queue_key(queue), queue.name)

    def job_order_key(self, job: JobInfo) -> tuple:
        return (self._job_key(job), job.creation, job.key)

    def task_order_key(self, task: TaskInfo) -> tuple:
        job = self.cluster.jobs[task.job]
        rank = next((i for i, sg in enumerate(job.spec.subgroups) if sg.name == task.subgroup),
                    len(job.spec.subgroups))
        return (rank, self._task_key(task), task.key)

    def pending(self, job: JobInfo) -> list[TaskInfo]:
        """The job's tasks still to place: Pending, and not reserved this session."""
        return [t for t in job.tasks.values()
                if t.status is TaskStatus.PENDING and t.key not in self.reservations]

    def ordered_tasks(self, job: JobInfo, tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Tasks in the order a gang is placed: what every subgroup still needs
        to reach its minimum first (subgroups in declared order), then the
        extras, so no subgroup's extras take the room another's minimum needs."""
        ordered = sorted(tasks, key=self.task_order_key)
        if not job.spec.subgroups:
            return ordered
        need = {sg.name: max(sg.min_member - job.ready_count(sg.name), 0)
                for sg in job.spec.subgroups}
        first, extras = [], []
        for task in ordered:
            if need.get(task.subgroup, 0) > 0:      # type: ignore[arg-type]
                need[task.subgroup] -= 1             # type: ignore[index]
                first.append(task)
            else:
                extras.append(task)
        return first + extras

    def job_invalid(self, job: JobInfo) -> str | None:
        return self.hooks.first_reason(Hook.JOB_VALID, job)

    def enqueueable(self, job: JobInfo) -> str | None:
        """None when a not-ready job may try to start now (minResources fits)."""
        return self.hooks.first_reason(Hook.ENQUEUEABLE, job)

    def admits(self, job: JobInfo) -> bool:
        """The enqueue gate lets the job be placed (always, with no gate)."""
        return self.admitted is None or job.key in self.admitted

    def admit(self, job: JobInfo) -> None:
        assert self.admitted is not None, "admit() is the enqueue action's"
        self.admitted.add(job.key)
        if job.spec.min_resources is not None and not self.job_ready(job):
            self.inqueue[job.key] = job.spec.min_resources

    def inqueue_request(self, but: JobInfo, queues: Sequence[str] | None = None) -> Resource:
        """minResources of the admitted gangs not started yet, but one, in
        the given queues (default: everywhere)."""
        total = Resource()
        for key, need in self.inqueue.items():
            if key != but.key and (queues is None or self.cluster.jobs[key].queue in queues):
                total = total + need
        return total

    def job_ready(self, job: JobInfo) -> bool:
        return self.hooks.all_true(Hook.JOB_READY, job)

    def job_pipelined(self, job: JobInfo) -> bool:
        return self.hooks.all_true(Hook.JOB_PIPELINED, job)

    def allocatable(self, job: JobInfo, task: TaskInfo) -> str | None:
        """None when the job's queue has room for the task, else why not."""
        return self.hooks.first_reason(Hook.ALLOCATABLE, job, task)

    def overused(self, job: JobInfo, task: TaskInfo) -> str | None:
        """None when the job's queue may still take the task by reclaiming."""
        return self.hooks.first_reason(Hook.OVERUSED, job, task)

    def victims(self, hook: Hook, preemptor: TaskInfo,
                candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Candidates the plugins agree may be evicted for preemptor.

        The conformance rule comes first and is not a plugin: kube-system and
        critical pods, and jobs that are not preemptible, are never victims.
        """
        allowed = [c for c in candidates
                   if not c.critical and self.cluster.jobs[c.job].spec.preemptible]
        return self.hooks.victims(hook, preemptor, allowed) if allowed else []

    def eviction_group(self, victim: TaskInfo) -> list[TaskInfo]:
        """The victim and every task that must be evicted with it (its gang)."""
        group = self.hooks.union(Hook.EVICTION_GROUP, victim)
        return group if any(t.key == victim.key for t in group) else [victim, *group]

    def static_mask(self, task: TaskInfo) -> np.ndarray:
        """Nodes passing every filter but resources: where room could be made."""
        out = np.ones(len(self.cluster.table), dtype=bool)
        for label, fn in self._filters():
            if label != RESOURCE_FIT:
                out &= fn(task, self._all_rows)
        return out

    def room_mask(self, task: TaskInfo) -> np.ndarray:
        """static_mask, where what evictable pods hold beyond resources (their
        devices) counts as freed: the nodes eviction could make room on."""
        self.planning_eviction = True
        try:
            return self.static_mask(task)
        finally:
            self.planning_eviction = False

    def pod_fits(self, task: TaskInfo, node: NodeName) -> bool:
        """Every filter over the pods and devices around the node lets the
        task take it (once what is releasing there is gone)."""
        return self._passes(Hook.POD_PREDICATE, task, node)

    def free_beyond_resources(self, task: TaskInfo, node: NodeName) -> bool:
        """What the task needs beyond resources on the node (devices) is free
        now, not only once pods going away are gone."""
        return self._passes(Hook.POD_IDLE, task, node)

    def _passes(self, hook: Hook, task: TaskInfo, node: NodeName) -> bool:
        row = np.array([self.cluster.table.index[node]])
        for _, fn in self.hooks.callbacks(hook):
            found = fn(task, row)
            if found is not None and not found[0]:
                return False
        return True

    def select_node(self, task: TaskInfo, idle_only: bool = False,
                    within: np.ndarray | None = None) -> Choice | None:
        """The best node for the task, preferring room that is idle now; a node
        that has room only once releasing pods are gone gives a pipelined choice.
        within (a mask over nodes) keeps a topology-bound gang inside its domain."""
        if not self._pod_rules:
            cache = self._refresh(task)
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
        for _, fn in self.hooks.callbacks(Hook.POD_IDLE):
            found = fn(task, rows)
            if found is not None:
                idle = idle & found
        has_idle = bool(idle.any())
        if not has_idle and idle_only:
            return None
        if has_idle and not idle.all():
            rows = rows[idle]
        score = cache.score[rows]
        for _, fn in self.hooks.callbacks(Hook.POD_ORDER):
            found = fn(task, rows)
            if found is not None:
                score = score + found
        best = int(rows[int(np.argmax(score))])     # the first best row, as over all nodes
        return Choice(self.cluster.table.names[best], not has_idle)

    def _pod_filtered(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        """The rows that every rule over other pods lets the task take (a
        POD_PREDICATE answering None leaves it alone); each rule is asked
        only about the rows the ones before it left."""
        for _, fn in self.hooks.callbacks(Hook.POD_PREDICATE):
            if not len(rows):
                break
            found = fn(task, rows)
            if found is not None and not found.all():
                rows = rows[found]
        return rows

    def record_unschedulable(self, job: JobInfo, message: str) -> None:
        self.unschedulable[job.key] = message

    def explain_task(self, task: TaskInfo) -> str:
        """Why no node takes the task, by filter, in numbers. The same for its
        whole class while no node changes: a long queue of alike jobs that
        wait is explained once."""
        key = (self.class_key(task), self.cluster.table.version)
        found = self._explained.get(key)
        if found is None:
            found = self._explained[key] = self._explain(task)
        return found

    def _explain(self, task: TaskInfo) -> str:
        table = self.cluster.table
        alive = np.ones(len(table), dtype=bool)
        parts: list[str] = []
        resource_fit = None
        for label, fn in self._filters():
            if label == RESOURCE_FIT:
                resource_fit = fn
                continue
            passed = fn(task, self._all_rows)
            rejected = int((alive & ~passed).sum())
            alive &= passed
            if rejected:
                parts.append(f"{label} on {_nodes(rejected)}")
        if resource_fit is not None and alive.any():
            vec = table.vector(task.resreq)
            room = table.future[alive]
            for d, name in enumerate(table.dims):
                if vec[d] <= 0:
                    continue
                short = room[:, d] < vec[d] - EPSILON
                if short.any():
                    best = max(table.amount(d, room[:, d].max()), 0.0)
                    parts.append(f"insufficient {name} on {_nodes(int(short.sum()))} "
                                 f"(need {format_amount(name, table.amount(d, vec[d]))}, "
                                 f"best node has {format_amount(name, best)} free)")
        if not len(table):
            return "no nodes in the cluster"
        parts += [found for _, fn in self.hooks.callbacks(Hook.EXPLAIN) if (found := fn(task))]
        return "; ".join(parts) or "no node fits"

    def explain_node(self, task: TaskInfo, node: NodeName) -> str | None:
        """Why this node does not take the task (the first filter that refuses,
        resources in numbers), or None if it fits now or once room is released."""
        table = self.cluster.table
        row = np.array([table.index[node]])
        for label, fn in self._filters():
            if fn(task, row)[0]:
                continue
            if label != RESOURCE_FIT:
                return label.replace("node(s)", "node")
            vec, room = table.vector(task.resreq), table.future[row[0]]
            short = [f"{d} (need {format_amount(d, table.amount(i, vec[i]))}, "
                     f"{format_amount(d, max(table.amount(i, room[i]), 0.0))} free)"
                     for i, d in enumerate(table.dims) if vec[i] > room[i] + EPSILON]
            return "insufficient " + ", ".join(short)
        return None

    # -- changes (only Statement operations call these) ----------------------------
    def statement(self) -> Statement:
        return Statement(self)

    def emit(self, effect: Effect) -> None:
        self.effects.append(effect)

    def assign(self, task: TaskInfo, status: TaskStatus, node: NodeName) -> TaskInfo:
        placed = self.cluster.assign(task, status, node)
        self.hooks.notify(Hook.ON_ALLOCATE, placed)
        return placed

    def claim_moves(self, placed: TaskInfo) -> list[tuple[Any, Any]]:
        """Allocate and reserve the placed task's ResourceClaims on its node
        (the plugins decide how); the moves are made here, undone by the
        statement."""
        moves = [move for _, fn in self.hooks.callbacks(Hook.CLAIMS) for move in fn(placed)]
        for old, new in moves:
            self.cluster.devices.put(old, new)
        return moves

    def unassign(self, placed: TaskInfo, previous: TaskInfo) -> None:
        self.cluster.unassign(placed, previous)
        self.hooks.notify(Hook.ON_DEALLOCATE, placed)

    def release(self, task: TaskInfo) -> TaskInfo:
        released = self.cluster.release(task)
        self.hooks.notify(Hook.ON_DEALLOCATE, task)     # its queue share is given back
        return released

    def unrelease(self, released: TaskInfo, previous: TaskInfo) -> None:
        self.cluster.unrelease(released, previous)
        self.hooks.notify(Hook.ON_ALLOCATE, previous)

    def reserve(self, job: JobKey, room: np.ndarray) -> None:
        """Hold room (rows x resources) for a starving gang, this session."""
        self.reserved_for[job] = room
        self._held.clear()
        self._outside.clear()

    def unreserve(self, job: JobKey) -> None:
        if self.reserved_for.pop(job, None) is not None:
            self._held.clear()
            self._outside.clear()

    # -- internals -------------------------------------------------------------------
    def _outside_reservations(self, task: TaskInfo,
                              cache: _ClassCache) -> tuple[np.ndarray, np.ndarray]:
        """The class's fits again on rows where other gangs hold room, without
        it; the same for every alike task while no node changes."""
        owner = task.job if task.job in self.reserved_for else None
        memo_key = (self.class_key(task), owner, self.cluster.table.version)
        found = self._outside.get(memo_key)
        if found is not None:
            return found
        held = self._held.get(owner)
        if held is None:
            others = [room for job, room in self.reserved_for.items() if job != owner]
            total = np.sum(others, axis=0) if others else np.zeros((0, 0))
            rows = np.flatnonzero(total.any(axis=1)) if others else np.zeros(0, dtype=int)
            held = self._held[owner] = (rows, total[rows] if others else total)
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

    def _filters(self) -> list[tuple[str, Callable[..., Any]]]:
        """Every node filter with its label, cached ones first (a POD_PREDICATE
        answering None, for a task its rule leaves alone, passes every node)."""
        def passing(fn: Callable[..., Any]) -> Callable[..., Any]:
            def ask(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
                found = fn(task, rows)
                return np.ones(len(rows), dtype=bool) if found is None else found
            return ask
        return [*self.hooks.named(Hook.PREDICATE),
                *((label, passing(fn)) for label, fn in self.hooks.named(Hook.POD_PREDICATE))]

    def class_key(self, task: TaskInfo) -> tuple:
        """The task's equivalence class: what every filter and score reads of it.
        Its requests and placement; and where some pod's rules select pods by
        label, its namespace and the labels those rules read. Tasks of one
        class get the same answers, so a failed one speaks for its twins."""
        if task.claims:
            return (*self._base_class_key(task), self._claims_class(task))
        return self._base_class_key(task)

    def _base_class_key(self, task: TaskInfo) -> tuple:
        rules = self._rules
        if not rules.any_rule:
            return (task.resreq, task.placement)
        keys = rules.label_keys
        return (task.resreq, task.placement, task.namespace,
                tuple(kv for kv in task.labels if kv[0] in keys))

    def _claims_class(self, task: TaskInfo) -> tuple:
        """What allocating the task's ResourceClaims reads: claims of one shape,
        none allocated yet, fit the same nodes; an allocated or missing one is
        its own."""
        claims = self.cluster.devices.claims
        found = [claims.get(key) for key in task.claims]
        if any(c is None or c.allocation is not None for c in found):
            return task.claims
        return tuple(c.shape for c in found)  # type: ignore[union-attr]

    def _class_cache(self, task: TaskInfo) -> _ClassCache:
        """The task's class's cached answers, as they are (rows may be stale)."""
        placement = task.placement
        if placement.rules:     # cached answers never read the pod rules
            base = self._bases.get(placement)
            if base is None:
                base = self._bases[placement] = attrs.evolve(placement, rules=NO_RULES)
            placement = base
        key = (task.resreq, placement)
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
        that changed since (the rules over other pods are not cached:
        select_node asks them afresh)."""
        table = self.cluster.table
        cache = self._class_cache(task)
        if cache.version != table.version:
            rows = np.flatnonzero(table.row_version > cache.seen)
            if len(rows):
                self._update(task, cache, rows)
            cache.version = table.version
        return cache

    def _update(self, task: TaskInfo, cache: _ClassCache, rows: np.ndarray) -> None:
        """Ask the cached filters and scores again about these rows."""
        table = self.cluster.table
        cache.mask[rows] = self.hooks.mask(Hook.PREDICATE, task, rows)
        cache.idle_fit[rows] = table.fits(table.vector(task.resreq), table.idle[rows])
        cache.score[rows] = self.hooks.score(Hook.NODE_ORDER, task, rows)
        cache.seen[rows] = table.version


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"
