"""Topology domains: the nodes grouped by the value of one node label (a
rack, a zone, a host), laid out over the node table's rows; and the free
room of the nodes summed per domain, kept up to date row by row."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from kaisched.api.constraints import HOSTNAME_KEY
from kaisched.api.node import NodeSpec, NodeTable


class Domains:
    """One topology key: each row's domain id (-1 for a node without the
    label), the domain names, and the rows of each domain."""

    def __init__(self, key: str, specs: Sequence[NodeSpec]) -> None:
        self.key = key
        # The kubelet sets the hostname label; nodes written by hand may lack it.
        values = [s.labels.get(key) or (s.name if key == HOSTNAME_KEY else None) for s in specs]
        self.names: list[str] = sorted({v for v in values if v is not None})
        index = {n: i for i, n in enumerate(self.names)}
        self.ids = np.array([index[v] if v is not None else -1 for v in values], dtype=np.int64)
        self.has = self.ids >= 0
        self.everywhere = bool(self.has.all())      # every node has the label
        # Every node its own domain (hostnames, as the kubelet sets them).
        self.per_node = bool(self.has.all()) and len(self.names) == len(values)
        order = np.argsort(self.ids, kind="stable")
        bounds = np.searchsorted(self.ids[order], np.arange(len(self.names) + 1))
        self.rows: list[np.ndarray] = [order[bounds[i]:bounds[i + 1]]
                                       for i in range(len(self.names))]
        # Rows grouped by domain (labelled ones only), for sums in one pass.
        self._grouped = order[bounds[0]:]
        self._starts = bounds[:-1] - bounds[0]

    def __len__(self) -> int:
        return len(self.names)

    def rows_of(self, row: int) -> np.ndarray:
        """The rows sharing a domain with row (just row when it has no label)."""
        d = int(self.ids[row])
        return self.rows[d] if d >= 0 else np.array([row])

    def totals(self, per_row: np.ndarray) -> np.ndarray:
        """A table (rows x columns) summed per domain: domains x columns."""
        if not len(self.names):
            return np.zeros((0,) + per_row.shape[1:])
        return np.add.reduceat(per_row[self._grouped], self._starts, axis=0)

    def sums(self, per_row: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """per_row summed per domain (over rows only, when given)."""
        if rows is None and self.everywhere:
            return np.bincount(self.ids, weights=per_row, minlength=len(self.names))
        ids = self.ids if rows is None else self.ids[rows]
        values = per_row if rows is None else per_row[rows]
        keep = ids >= 0
        return np.bincount(ids[keep], weights=values[keep], minlength=len(self.names))


class DomainRoom:
    """Free room of usable nodes (idle now, or once releasing pods are gone),
    summed per domain of each level asked about, and the pod slots of each
    pod shape per domain. Kept up to date row by row: between two gangs only
    the rows they took change, so a gang's domains are weighed without
    summing the whole cluster again. Amounts are whole numbers in float64
    (millicores, bytes, milli-units), so the running sums are exact."""

    def __init__(self, table: NodeTable, usable: np.ndarray, idle_only: bool) -> None:
        self.table = table
        self.usable = usable[:, None]
        self.idle_only = idle_only
        self.version = table.version
        self.room = self._room(slice(None))
        self._domains: dict[str, Domains] = {}
        self._totals: dict[str, np.ndarray] = {}
        self._slots: dict[tuple[str, bytes, bool], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def _room(self, rows: slice | np.ndarray) -> np.ndarray:
        source = self.table.idle if self.idle_only else self.table.future
        return np.maximum(source[rows], 0.0) * self.usable[rows]

    def sync(self) -> None:
        if self.version == self.table.version:
            return
        rows = np.flatnonzero(self.table.row_version > self.version)
        self.version = self.table.version
        if not len(rows):
            return
        new = self._room(rows)
        delta = new - self.room[rows]
        self.room[rows] = new
        for key, totals in self._totals.items():
            ids = self._domains[key].ids[rows]
            keep = ids >= 0
            np.add.at(totals, ids[keep], delta[keep])
        for (key, _, apart), (biggest, per_node, sums) in self._slots.items():
            ids = self._domains[key].ids[rows]
            now = pod_slots(new, biggest, apart)
            keep = ids >= 0
            np.add.at(sums, ids[keep], (now - per_node[rows])[keep])
            per_node[rows] = now

    def totals(self, domains: Domains) -> np.ndarray:
        """Free room per domain (domains x resources)."""
        found = self._totals.get(domains.key)
        if found is None:
            self._domains[domains.key] = domains
            found = self._totals[domains.key] = domains.totals(self.room)
        return found

    def slots(self, domains: Domains, biggest: np.ndarray, apart: bool) -> np.ndarray:
        """Per domain: how many pods of the shape biggest its nodes take
        (at most one a node when apart)."""
        key = (domains.key, biggest.tobytes(), apart)
        found = self._slots.get(key)
        if found is None:
            self._domains[domains.key] = domains
            shape = biggest.copy()
            per_node = pod_slots(self.room, shape, apart)
            keep = domains.has
            sums = np.bincount(domains.ids[keep], weights=per_node[keep], minlength=len(domains))
            found = self._slots[key] = (shape, per_node, sums)
        return found[2]


def pod_slots(room: np.ndarray, biggest: np.ndarray, apart: bool = False) -> np.ndarray:
    """Per node: how many pods of the shape biggest fit in room (over the
    resources the shape asks for)."""
    cols = np.flatnonzero(biggest > 0)
    per_node = np.floor(np.min(room[:, cols] / biggest[cols] + 1e-9, axis=1)) if len(cols) \
        else np.full(len(room), np.inf)
    return np.minimum(per_node, 1.0) if apart else per_node
