"""One hook registry keyed by an enum, and the few ways answers combine.

Plugins register callbacks tier by tier; the session asks through a
combinator, never by walking the tiers itself:
- order keys: the tuple of every callback's key in tier order, which is the
  same as "first non-zero comparison wins" and sorts in C;
- all_true: every callback must agree (readiness, pipelined);
- first_reason: the first callback that objects, with its reason (validity,
  queue room);
- masks: node filters are ANDed; scores: node scores are summed;
- victims: intersected within a tier, the first tier with an answer wins.

PREDICATE and NODE_ORDER answers may depend on a task only through its
requests and placement, its pod rules aside (its equivalence class), and on a
node only through its row: the session caches them per class and refreshes
only the rows that changed.
POD_PREDICATE and POD_ORDER answers read the pods across a node's topology
domain (inter-pod affinity, topology spread, host ports): they change with
every placement nearby, so the session asks them afresh each time, over all
nodes at once, and combines them with the cached answers.
A POD_PREDICATE or POD_ORDER may be registered with the tasks it is about
(Session.register's `when`); when every one is, a task none is about takes
the cached path.
"""
from __future__ import annotations

import enum
from typing import Any, Callable, Iterable, Sequence

import numpy as np


class Hook(enum.Enum):
    QUEUE_ORDER = "queue_order"       # (QueueInfo) -> sortable key
    QUEUE_HEAD_ORDER = "queue_head_order"  # ((QueueInfo, head job's need Resource)) -> key
    JOB_ORDER = "job_order"           # (JobInfo) -> sortable key
    TASK_ORDER = "task_order"         # (TaskInfo) -> sortable key
    JOB_VALID = "job_valid"           # (JobInfo) -> reason | None
    ENQUEUEABLE = "enqueueable"       # (JobInfo) -> reason | None: may a not-ready job start now
    JOB_READY = "job_ready"           # (JobInfo) -> bool
    JOB_PIPELINED = "job_pipelined"   # (JobInfo) -> bool
    ALLOCATABLE = "allocatable"       # (JobInfo, TaskInfo) -> reason | None
    PREDICATE = "predicate"           # (TaskInfo, rows) -> bool array over rows
    NODE_ORDER = "node_order"         # (TaskInfo, rows) -> float array over rows
    POD_PREDICATE = "pod_predicate"   # (TaskInfo, rows) -> bool array | None (no rule): not cached
    POD_ORDER = "pod_order"           # (TaskInfo, rows) -> float array | None (no rule): not cached
    PREEMPTABLE = "preemptable"       # (preemptor TaskInfo, [victim TaskInfo]) -> victims
    RECLAIMABLE = "reclaimable"       # (reclaimer TaskInfo, [victim TaskInfo]) -> victims
    EVICTION_GROUP = "eviction_group" # (victim TaskInfo) -> tasks that must go with it
    PROTECTION = "protection"         # (running JobInfo, Cause, preemptor JobInfo | None) ->
                                      # Protection | None: it is no victim of that kind until then
    OVERUSED = "overused"             # (JobInfo, TaskInfo) -> reason | None: no reclaiming
    RECLAIM_GATE = "reclaim_gate"     # (JobInfo, need Resource) -> reason | None: may it reclaim
    RECLAIM_FAIR = "reclaim_fair"     # (JobInfo, need, [(victim queue, Resource)]) -> reason | None
    VICTIM_QUEUE_ORDER = "victim_queue_order"  # ((queue, taken Amounts, need)) -> key: gives first
    ON_ALLOCATE = "on_allocate"       # (TaskInfo) -> None: a task took room
    ON_DEALLOCATE = "on_deallocate"   # (TaskInfo) -> None: a task gave it back
    PREBIND = "prebind"               # (TaskInfo allocated) -> [PrebindOp]: done before its bind
    CLAIMS = "claims"                 # (placed TaskInfo) -> [(old Claim, new Claim)]: its
                                      # ResourceClaims allocated and reserved on its node
    EXPLAIN = "explain"               # (TaskInfo) -> str | None: more on why no node takes it
    POD_IDLE = "pod_idle"             # (TaskInfo, rows) -> bool array | None: where what the
                                      # task needs beyond resources is free now (else pipelined)


Callback = Callable[..., Any]


class HookRegistry:
    def __init__(self) -> None:
        self._tiers: list[dict[Hook, list[tuple[str, Callback]]]] = []
        self._flat: dict[Hook, list[tuple[str, Callback]]] = {}   # asked per placement: kept

    def begin_tier(self) -> None:
        self._tiers.append({})

    def register(self, hook: Hook, plugin: str, fn: Callback) -> None:
        if not self._tiers:
            self.begin_tier()
        self._tiers[-1].setdefault(hook, []).append((plugin, fn))
        self._flat.pop(hook, None)

    def callbacks(self, hook: Hook) -> list[tuple[str, Callback]]:
        flat = self._flat.get(hook)
        if flat is None:
            flat = self._flat[hook] = [cb for tier in self._tiers for cb in tier.get(hook, ())]
        return flat

    # -- combinators -------------------------------------------------------------
    def order_key(self, hook: Hook) -> Callable[[Any], tuple[Any, ...]]:
        fns = [fn for _, fn in self.callbacks(hook)]
        return lambda item: tuple(fn(item) for fn in fns)

    def all_true(self, hook: Hook, *args: Any) -> bool:
        return all(fn(*args) for _, fn in self.callbacks(hook))

    def first_reason(self, hook: Hook, *args: Any) -> str | None:
        for _, fn in self.callbacks(hook):
            reason = fn(*args)
            if reason:
                return reason
        return None

    def notify(self, hook: Hook, *args: Any) -> None:
        for _, fn in self.callbacks(hook):
            fn(*args)

    def mask(self, hook: Hook, task: Any, rows: np.ndarray) -> np.ndarray:
        out = np.ones(len(rows), dtype=bool)
        for _, fn in self.callbacks(hook):
            out &= fn(task, rows)
        return out

    def score(self, hook: Hook, task: Any, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows))
        for _, fn in self.callbacks(hook):
            out += fn(task, rows)
        return out

    def victims(self, hook: Hook, preemptor: Any, candidates: Sequence[Any]) -> list[Any]:
        for tier in self._tiers:
            answers = [set(map(id, fn(preemptor, candidates))) for _, fn in tier.get(hook, ())]
            if answers:
                keep = set.intersection(*answers)
                return [c for c in candidates if id(c) in keep]
        return list(candidates)

    def union(self, hook: Hook, item: Any) -> list[Any]:
        """Every answer of every callback, once each, in the order first given."""
        seen: dict[int, Any] = {}
        for _, fn in self.callbacks(hook):
            for x in fn(item):
                seen.setdefault(id(x), x)
        return list(seen.values())

    def named(self, hook: Hook) -> Iterable[tuple[str, Callback]]:
        return self.callbacks(hook)
