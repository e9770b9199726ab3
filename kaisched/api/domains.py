"""Topology domains: the nodes grouped by the value of one node label (a
rack, a zone, a host), laid out over the node table's rows."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from kaisched.api.node import NodeSpec
from kaisched.api.placement import HOSTNAME_KEY


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
        ids = self.ids if rows is None else self.ids[rows]
        values = per_row if rows is None else per_row[rows]
        keep = ids >= 0
        return np.bincount(ids[keep], weights=values[keep], minlength=len(self.names))
