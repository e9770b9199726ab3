"""Other schedulers' pods, as the model counts them: each holding room on its
node (and, a reservation pod or a sharer, its shared GPU device), and read
by the placement rules of this scheduler's pods.

A shard (one pool of several) treats every pod it does not take as another
scheduler's; of those, the pods on nodes outside its pool wait apart
(elsewhere) and count only once their node joins the pool."""
from __future__ import annotations

from typing import Mapping

from kaisched.api.clusterinfo import ClusterInfo, ForeignPod
from kaisched.api.node import NodeSpec
from kaisched.api.types import NodeName, PodKey
from kaisched.cache.convert import PodFacts
from kaisched.cache.jobs import foreign_pod
from kaisched.cache.roomnotes import RoomNotes


class Foreign:
    """Kept by the model: put_pod hands it every pod that is not one of its
    tasks, node_joined and node_left the pool's changes; refresh publishes
    the pods to the cluster lent out."""

    def __init__(self, cluster: ClusterInfo, room: RoomNotes, shard: bool,
                 pool_nodes: Mapping[str, NodeSpec]) -> None:
        self.cluster = cluster
        self.room = room
        self.shard = shard                  # one pool of several: pods may wait elsewhere
        self._pool_nodes = pool_nodes       # the cache's nodes: the pool's
        self.pods: dict[PodKey, ForeignPod] = {}
        self.elsewhere: dict[PodKey, ForeignPod] = {}
        self._elsewhere_on: dict[NodeName, set[PodKey]] = {}
        self._changed = True                # pods came or went since they were published

    def drop(self, key: PodKey) -> None:
        """The pod is gone, or changed: what it held is given back."""
        gone = self.pods.pop(key, None)
        if gone is not None:
            self._changed = True
            self.room.note(gone.node_name, gone.resreq, gone.releasing, -1.0)
            gpus = self.cluster.gpus
            if gone.reserves is not None:
                self.room.holds(gpus.reserve(gone.node_name, gone.reserves, key, gone.kai, False))
            elif gone.gpu is not None:
                self.room.holds(gpus.move(gone, None))
        elif self.elsewhere:
            self._drop_elsewhere(key)

    def put(self, key: PodKey, facts: PodFacts) -> None:
        """Another scheduler's pod as it is now: counted when it holds room."""
        pod = foreign_pod(facts)
        if pod is None:
            return
        if self.shard and pod.node_name not in self._pool_nodes:
            self.elsewhere[key] = pod
            self._elsewhere_on.setdefault(pod.node_name, set()).add(key)
            return
        self.pods[key] = pod
        self._changed = True
        self.room.note(pod.node_name, pod.resreq, pod.releasing, 1.0)
        gpus = self.cluster.gpus
        if pod.reserves is not None:
            self.room.holds(gpus.reserve(pod.node_name, pod.reserves, key, pod.kai, True))
        elif pod.gpu is not None:       # another scheduler's sharer holds its share too
            self.room.holds(gpus.move(None, pod))

    def node_joined(self, name: str) -> None:
        """A node came into the pool: the other pods on it take room here now
        (the layout it causes counts them)."""
        for key in self._elsewhere_on.pop(NodeName(name), ()):
            self.pods[key] = self.elsewhere.pop(key)
            self._changed = True

    def node_left(self, name: str) -> None:
        """A node left the pool: the other pods on it matter here no more."""
        for key in [k for k, pod in self.pods.items() if pod.node_name == name]:
            pod = self.pods.pop(key)
            self.elsewhere[key] = pod
            self._elsewhere_on.setdefault(pod.node_name, set()).add(key)
            self._changed = True

    def publish(self) -> None:
        """The cluster's foreign pods, by key, when they changed since."""
        if self._changed:
            self.cluster.foreign = tuple(self.pods[k] for k in sorted(self.pods))
            self._changed = False

    def _drop_elsewhere(self, key: PodKey) -> None:
        pod = self.elsewhere.pop(key, None)
        if pod is not None:
            keys = self._elsewhere_on[pod.node_name]
            keys.discard(key)
            if not keys:
                del self._elsewhere_on[pod.node_name]
