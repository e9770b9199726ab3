"""QueueInfo, QueueStatus and the queue tree (kaisched.api.queuetree: parent -> child)."""
from __future__ import annotations

from typing import Iterable

import attrs

from kaisched.api.queuetree import QueueTree, parent_cycles
from kaisched.api.resource import Resource
from kaisched.api.types import DEFAULT_QUEUE, QueueName

ROOT = QueueName("")      # the implicit root above every top-level queue

# Amounts by resource name, sorted; unlike a Resource it keeps zeros, which a
# person reading a queue's status wants to see ("0 of 4 GPUs").
Amounts = tuple[tuple[str, float], ...]


@attrs.frozen(slots=True)
class QueueStatus:
    """What kaisched reports on a Queue: its use against its shares, and its jobs.

    Amounts are rounded as they are written (whole millicores and bytes,
    thousandths of anything else), so a status read back equals the one written.
    """

    allocated: Amounts = ()         # held by the queue's (and its children's) pods
    fair_share: Amounts = ()        # its deserved share, last session
    quota: Amounts = ()
    limit: Amounts = ()             # only the resources that have one
    running_jobs: int = 0
    pending_jobs: int = 0


@attrs.frozen(slots=True)
class Bucket:
    start: float                 # on the grid: a multiple of the bucket's length
    seconds: float               # how much of it was accounted
    held: Amounts = ()           # resource x seconds the queue held
    offered: Amounts = ()        # resource x seconds the cluster offered


@attrs.frozen(slots=True)
class UsageRecord:
    """A queue's usage as its status keeps it: the buckets, what they come to
    and when they were last added to."""

    buckets: tuple[Bucket, ...] = ()
    normalized: Amounts = ()
    updated: float = 0.0


@attrs.frozen(slots=True)
class QueueInfo:
    name: QueueName
    parent: QueueName | None = None
    priority: int = 100
    quota: Resource = Resource()
    limits: tuple[tuple[str, float], ...] = ()     # absent: unlimited; zero is kept
    weights: tuple[tuple[str, float], ...] = ()    # absent: 1
    creation: float = 0.0
    problem: str | None = None
    declared: bool = False              # a Queue object exists (the implicit default has none)
    status: QueueStatus | None = None   # as last written to the object
    # Its own spec.preemptMinRuntime and spec.reclaimMinRuntime, in seconds
    # (None: unset, its parent's count; the minruntime plugin resolves them).
    preempt_min_runtime: float | None = None
    reclaim_min_runtime: float | None = None
    usage: UsageRecord | None = None    # status.usage, as last written (kaisched.api.decayedusage)
    # spec.autoscaling: whether its gangs' capacity is asked of an autoscaler
    # (None: as the scheduler's config says).
    autoscaling: bool | None = None
    expected_runtime: float | None = None   # spec.expectedRuntime: its pods' estimate, by default
    # False: the queue of another node pool's scheduler, here only to give the
    # tree its shape; that scheduler writes its status.
    owned: bool = True

    # Loops, not next() over a generator: a queue's limits are asked per
    # resource at every placement.
    def limit(self, name: str) -> float | None:
        for key, value in self.limits:
            if key == name:
                return value
        return None

    def weight(self, name: str) -> float:
        for key, value in self.weights:
            if key == name:
                return value
        return 1.0


def build_queue_tree(queues: Iterable[QueueInfo]) -> tuple[dict[QueueName, QueueInfo], QueueTree]:
    """The queues by name (with problems filled in) and the tree under ROOT.

    A missing parent or a cycle is a problem of the queue, not an exception:
    such a queue hangs under ROOT so the rest of the tree stays usable.
    """
    by_name = {q.name: q for q in queues}
    by_name.setdefault(DEFAULT_QUEUE, QueueInfo(DEFAULT_QUEUE))
    parents = {q.name: q.parent for q in by_name.values()
               if q.parent and q.parent in by_name and q.parent != q.name}
    for cycle in list(parent_cycles(parents)):
        path = " -> ".join(cycle + [cycle[0]])
        for name in cycle:
            by_name[name] = attrs.evolve(by_name[name], problem=f"queue cycle: {path}")
        del parents[cycle[0]]       # the cycle cut before its first queue, which hangs under ROOT
    for queue in list(by_name.values()):
        if queue.parent and queue.parent not in by_name:
            by_name[queue.name] = attrs.evolve(
                queue, problem=queue.problem or f"parent queue {queue.parent!r} does not exist")
        if queue.parent == queue.name:
            by_name[queue.name] = attrs.evolve(queue, problem=f"queue cycle: {queue.name} -> {queue.name}")
    tree = QueueTree(ROOT, {name: parents.get(name, ROOT) for name in by_name})
    # A broken queue's children cannot be placed under it either.
    for name in tree.top_down():
        parent = by_name.get(name)
        if parent is None or not parent.problem:
            continue
        for child in tree.successors(name):
            if not by_name[child].problem:
                by_name[child] = attrs.evolve(
                    by_name[child], problem=f"parent queue {name!r} is unusable: {parent.problem}")
    return by_name, tree
