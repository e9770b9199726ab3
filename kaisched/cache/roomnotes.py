"""The room pods took or gave back on their nodes since the last snapshot,
noted per event and summed into the node table in one go: a row update a
pod costs more than the pod's whole conversion. Or, when the table must be
laid out again (a node came or went, a resource no column holds), nothing
noted: the layout counts every pod anew."""
from __future__ import annotations

import numpy as np

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.gpudevices import ONE_GPU, Change, WholeGpu
from kaisched.api.resource import Resource
from kaisched.api.types import NodeName


class RoomNotes:
    """Kept by the model, written by it and by the books whose pods take room
    (kaisched.cache.foreign, kaisched.cache.sharers)."""

    def __init__(self, cluster: ClusterInfo) -> None:
        self.cluster = cluster
        self.relayout = True                # the table is laid out again at snapshot
        self._rows: list[int] = []
        self._vecs: list[np.ndarray] = []
        self._signs: list[float] = []
        self._releasing: list[bool] = []

    def note(self, node: NodeName, request: Resource, releasing: bool, sign: float) -> None:
        """A pod takes (sign 1) or gives back (-1) room on its node."""
        if self.relayout:
            return
        table = self.cluster.table
        row = table.index.get(node)
        if row is None:
            return              # no such node (yet): a layout counts it if one comes
        vec = table.known_vector(request)
        if vec is None:
            self.relayout = True            # a resource no column holds yet
            return
        self._rows.append(row)
        self._vecs.append(vec)
        self._signs.append(sign)
        self._releasing.append(releasing)

    def holds(self, changes: list[Change]) -> None:
        """Shared devices whose GPU is held otherwise now: the table counts
        each once, as a pod holding one GPU (none is pipelined outside a session)."""
        for node, was, now in changes:
            for hold, sign in ((was, -1.0), (now, 1.0)):
                if hold is not None and hold is not WholeGpu.PIPELINED:
                    self.note(node, ONE_GPU, hold is WholeGpu.RELEASING, sign)

    def sum_into_table(self) -> None:
        """What was noted, into the table (unless it is laid out again), and forgotten."""
        if self._rows and not self.relayout:
            self.cluster.table.add_many(np.array(self._rows),
                                        np.array(self._vecs) * np.array(self._signs)[:, None],
                                        np.array(self._releasing))
        self._rows, self._vecs, self._signs, self._releasing = [], [], [], []
