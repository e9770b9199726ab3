"""Node-pool shards: which nodes, pods and queues one scheduler of several
takes, when each schedules one pool of a cluster.

A node is in the pool its label names. A pod names a pool with the same
label on itself, else on its PodGroup, else on its queue (a queue without
the label takes its parent's). The shard of that pool takes it; the
default shard also takes what names no pool. So the pods of a gang, which
share a PodGroup and a queue, land in one shard unless their own labels say
otherwise.

Whatever the shard does not take is another scheduler's: a pod of another
pool running on one of this pool's nodes (the node was relabelled) takes
room like any other scheduler's pod, and a pod of this pool on another
pool's node still counts for its gang but takes no room here.
"""
from __future__ import annotations

from kaisched.api.node import NodeSpec
from kaisched.api.types import DEFAULT_QUEUE, JobKey, PodKey
from kaisched.cache.convert import PodFacts
from kaisched.cache.jobs import Group, Groups, declared_group, group_key
from kaisched.framework.config import NodePool


class PoolView:
    """One shard's view: its pool, the pool each queue names, and the pods
    that read their pool from a PodGroup (so a PodGroup's change finds them)."""

    def __init__(self, pool: NodePool, groups: Groups) -> None:
        self.pool = pool
        self.groups = groups
        self._queues: dict[str, tuple[str | None, str | None]] = {}    # name -> (label, parent)
        self.members: dict[JobKey, set[PodKey]] = {}                    # PodGroup -> its pods

    # -- nodes and queues ------------------------------------------------------------------
    def takes_node(self, spec: NodeSpec) -> bool:
        return self.pool.takes(spec.labels.get(self.pool.label) or None)

    def put_queue(self, name: str, label: str | None, parent: str | None) -> bool:
        """A queue's label and parent as they are now (both None: gone); True when
        the pool of this queue, or of a queue under it, may have changed."""
        before = self._queues.get(name, (None, None))
        if label is None and parent is None:
            self._queues.pop(name, None)
        else:
            self._queues[name] = (label or None, parent or None)
        return before != (label or None, parent or None)

    def queue_pool(self, name: str) -> str | None:
        """The pool a queue names: its own label, else its nearest parent's."""
        seen: set[str] = set()
        current: str | None = name
        while current is not None and current not in seen:
            seen.add(current)
            label, parent = self._queues.get(current, (None, None))
            if label:
                return label
            current = parent
        return None

    def takes_queue(self, name: str) -> bool:
        return self.pool.takes(self.queue_pool(name))

    # -- pods ------------------------------------------------------------------------------
    def pool_of(self, facts: PodFacts) -> str | None:
        key = self.pool.label
        own = next((v for k, v in facts.labels if k == key), None)
        if own:
            return own
        group = declared_group(facts, self.groups)
        if group is not None and group.pool:
            return group.pool
        queue = (group.spec.queue if group is not None else None) or facts.queue_label \
            or DEFAULT_QUEUE
        return self.queue_pool(queue)

    def takes_group(self, group: Group) -> bool:
        """A PodGroup no pod names yet: its own label, else its queue's pool."""
        return self.pool.takes(group.pool or self.queue_pool(group.spec.queue or DEFAULT_QUEUE))

    def takes_pod(self, facts: PodFacts) -> bool:
        return self.pool.takes(self.pool_of(facts))

    def track(self, key: PodKey, before: PodFacts | None, facts: PodFacts | None) -> None:
        """Keep which pods name which PodGroup (only pods of this scheduler)."""
        old = _named_group(before)
        new = _named_group(facts)
        if old == new:
            return
        if old is not None:
            members = self.members.get(old)
            if members is not None:
                members.discard(key)
                if not members:
                    del self.members[old]
        if new is not None:
            self.members.setdefault(new, set()).add(key)

    @staticmethod
    def group_moved(before: Group | None, after: Group | None) -> bool:
        """Whether what a PodGroup says of its pods' pool changed."""
        def says(group: Group | None) -> tuple[object, ...]:
            return (None,) if group is None else (group.pool, group.spec.queue)
        return says(before) != says(after)


def _named_group(facts: PodFacts | None) -> JobKey | None:
    if facts is None or facts.gang.source in ("none", "owner"):
        return None
    return group_key(facts)
