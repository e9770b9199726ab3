"""This scheduler's tasks that ask for part of a GPU, as the model counts
them: how many there are (none: the snapshot skips the shared devices), the
placed ones whose share is not known yet, and the devices each holds."""
from __future__ import annotations

from typing import Iterator, Mapping

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.node import NodeInfo, NodeSpec
from kaisched.api.task import TaskInfo
from kaisched.api.types import PodKey
from kaisched.cache.convert import PodFacts
from kaisched.cache.jobs import unresolved
from kaisched.cache.roomnotes import RoomNotes


class Sharers:
    """Kept by the model: put_pod hands it each sharer that leaves or comes,
    put_node and refresh ask which must be made again."""

    def __init__(self, cluster: ClusterInfo, room: RoomNotes) -> None:
        self.cluster = cluster
        self.room = room
        self.count = 0
        # Placed gpu-memory pods whose node's GPU memory was not known when
        # they were read: made again once it is (their queue's charge needs it).
        self.unresolved: set[PodKey] = set()

    def left(self, key: PodKey, old: TaskInfo) -> None:
        """A sharer's task was taken out: its devices let go of it."""
        self.count -= 1
        self.unresolved.discard(key)
        self.room.holds(self.cluster.share_moved(old, None))

    def came(self, key: PodKey, task: TaskInfo) -> None:
        """A sharer's task was made (its devices take it once it is placed: placed())."""
        self.count += 1
        if unresolved(task) and task.node_name not in self.cluster.nodes:
            self.unresolved.add(key)

    def placed(self, task: TaskInfo) -> None:
        """A sharer's task is in the model: its devices take it."""
        self.room.holds(self.cluster.share_moved(None, task))

    def remeasured(self, node: NodeInfo) -> None:
        """The node's GPUs changed: its sharers' charges are worked out again."""
        self.unresolved.update(k for k, t in node.tasks.items() if t.gpu is not None)

    def resolvable(self, pods: Mapping[PodKey, PodFacts],
                   nodes: Mapping[str, NodeSpec]) -> Iterator[tuple[PodKey, PodFacts]]:
        """The unresolved sharers whose node is known now, by key, each no
        longer unresolved as it is handed out (to be made again from its facts)."""
        for key in sorted(self.unresolved):
            facts = pods.get(key)
            if facts is None or facts.node_name is None or facts.node_name not in nodes:
                continue
            self.unresolved.discard(key)
            yield key, facts
