"""What the static node filters read, kept between sessions: whether each node
is Ready and schedulable, and the nodes grouped by label set and by taints.

A placement's node selector, required and preferred node affinity and
tolerations are asked once per group of alike nodes, not once per node. The
hostname label is left out of the label sets -- it makes every set unique --
so a placement whose terms read it (or the node's name) is asked node by
node. The answers are kept per placement until a node's labels or taints
change. The model the cache keeps changes the shapes row by row as node
events arrive; a layout (nodes added or removed) makes them anew.
"""
from __future__ import annotations

from typing import Callable, Hashable, Sequence

import numpy as np

from kaisched.api.constraints import HOSTNAME_KEY, Placement, SelectorTerm
from kaisched.api.node import NodeSpec

# Past this many placements remembered, the answers are dropped and asked again.
_REMEMBERED = 1024


class _Grouping:
    """Rows grouped by one key of their spec: each row's group, and one spec a group."""

    def __init__(self, key: Callable[[NodeSpec], Hashable], specs: Sequence[NodeSpec]) -> None:
        self.key = key
        self.ids: dict[Hashable, int] = {}
        self.reps: list[NodeSpec] = []          # a spec of each group, as it was when made
        self.of_row = np.array([self._id(s) for s in specs], dtype=np.intp)

    def _id(self, spec: NodeSpec) -> int:
        key = self.key(spec)
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.reps)
            self.reps.append(spec)
        return found

    def move(self, row: int, spec: NodeSpec) -> None:
        """The row's spec changed: it joins the group of its new key."""
        self.of_row[row] = self._id(spec)

    def per_row(self, fn: Callable[[NodeSpec], float], dtype: type) -> np.ndarray:
        """fn asked of each group, laid over the rows."""
        return np.array([fn(s) for s in self.reps], dtype=dtype)[self.of_row]


def _label_set(spec: NodeSpec) -> Hashable:
    return frozenset(kv for kv in spec.labels.items() if kv[0] != HOSTNAME_KEY)


def _taints(spec: NodeSpec) -> Hashable:
    return spec.taints


def _per_node(terms: Sequence[SelectorTerm], keys: Sequence[str] = ()) -> bool:
    """Terms (or selector keys) that read the hostname label or the node's name
    answer node by node."""
    return HOSTNAME_KEY in keys or any(
        t.fields or any(r.key == HOSTNAME_KEY for r in t.expressions) for t in terms)


class NodeShapes:
    def __init__(self, specs: Sequence[NodeSpec]) -> None:
        self.specs = list(specs)
        self.ready = np.array([s.ready for s in specs], dtype=bool)
        self.schedulable = np.array([not s.unschedulable for s in specs], dtype=bool)
        self._labels = _Grouping(_label_set, specs)
        self._taints = _Grouping(_taints, specs)
        self._answers: dict[tuple[str, Placement], np.ndarray] = {}
        self._everyone = np.ones(len(self.specs), dtype=bool)

    def described(self) -> list[tuple[object, ...]]:
        """Per row, what the shapes hold of its node -- its name and labels, and
        as its groups say, its label set and taints -- with its readiness: a
        model kept by events must describe its nodes as a fresh one does."""
        labels, taints = self._labels, self._taints
        return [(spec.name, dict(spec.labels), labels.key(labels.reps[lg]), taints.key(taints.reps[tg]),
                 bool(ready), bool(schedulable))
                for spec, lg, tg, ready, schedulable in zip(
                    self.specs, labels.of_row, taints.of_row, self.ready, self.schedulable,
                    strict=True)]

    def usable(self) -> np.ndarray:
        """Ready and not cordoned, per row."""
        return self.ready & self.schedulable

    def update(self, row: int, spec: NodeSpec) -> None:
        """The node of this row says something else now."""
        old = self.specs[row]
        self.specs[row] = spec
        self.ready[row] = spec.ready
        self.schedulable[row] = not spec.unschedulable
        relabelled, retainted = old.labels != spec.labels, old.taints != spec.taints
        if relabelled:
            self._labels.move(row, spec)
        if retainted:
            self._taints.move(row, spec)
        if relabelled or retainted:
            self._answers.clear()

    def selected(self, placement: Placement) -> np.ndarray:
        """Per row: the node meets the placement's node selector and required
        node affinity."""
        if not placement.node_selector and not placement.affinity:
            return self._everyone
        keys = [k for k, _ in placement.node_selector]
        return self._answer("selected", placement, lambda s: placement.matches_labels(
            s.labels, s.name), bool, self._labels, _per_node(placement.affinity, keys))

    def tolerated(self, placement: Placement) -> np.ndarray:
        """Per row: the placement tolerates every NoSchedule/NoExecute taint."""
        return self._answer("tolerated", placement, lambda s: placement.untolerated(s.taints) is None,
                            bool, self._taints, False)

    def preferred(self, placement: Placement) -> np.ndarray:
        """Per row: the sum of the weights of the preferred node affinity terms
        the node matches."""
        terms = [t for _, t in placement.preferred]
        return self._answer("preferred", placement, lambda s: float(sum(
            w for w, t in placement.preferred if t.matches(s.labels, s.name))), float,
            self._labels, _per_node(terms))

    def _answer(self, what: str, placement: Placement, fn: Callable[[NodeSpec], float | bool],
                dtype: type, grouping: _Grouping, per_node: bool) -> np.ndarray:
        found = self._answers.get((what, placement))
        if found is None:
            if per_node:
                found = np.array([fn(s) for s in self.specs], dtype=dtype)
            else:
                found = grouping.per_row(fn, dtype)
            if len(self._answers) >= _REMEMBERED:
                self._answers.clear()
            self._answers[(what, placement)] = found
        return found
