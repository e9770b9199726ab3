"""The queue tree: every queue under the implicit root, each with one parent.

Asked as a directed graph is (edges parent -> child, `predecessors`,
`successors`, `out_degree`, `edges`, `nodes`), and walked top down, up to the
root or down a subtree. A tree needs no graph library: this one is built at
every snapshot, and loading networkx for it took a tenth of a second of
every start before the first bind.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Mapping

from kaisched.api.types import QueueName


class QueueTree:
    """root: the implicit root; parents: each other queue's parent (a queue
    of the tree, or root), in the order the queues are listed."""

    __slots__ = ("root", "_parent", "_children")

    def __init__(self, root: QueueName, parents: Mapping[QueueName, QueueName]) -> None:
        self.root = root
        self._parent = dict(parents)
        self._children: dict[QueueName, list[QueueName]] = {root: []}
        for name in self._parent:
            self._children[name] = []
        for name, parent in self._parent.items():
            self._children[parent].append(name)

    def __contains__(self, name: object) -> bool:
        return name in self._children

    def __iter__(self) -> Iterator[QueueName]:
        return iter(self._children)

    def __len__(self) -> int:
        return len(self._children)

    @property
    def nodes(self) -> list[QueueName]:
        """The root, then every queue, in the order given."""
        return list(self._children)

    @property
    def edges(self) -> list[tuple[QueueName, QueueName]]:
        """(parent, child) for every queue."""
        return [(parent, name) for name, parent in self._parent.items()]

    def parent(self, name: QueueName) -> QueueName | None:
        """The queue's parent; None for the root (or a name not in the tree)."""
        return self._parent.get(name)

    def predecessors(self, name: QueueName) -> Iterator[QueueName]:
        """The queue's parent, if it has one (as a graph's predecessors)."""
        parent = self._parent.get(name)
        if parent is not None:
            yield parent

    def successors(self, name: QueueName) -> list[QueueName]:
        """The queue's children."""
        return list(self._children[name])

    def out_degree(self, name: QueueName) -> int:
        return len(self._children[name])

    def top_down(self) -> list[QueueName]:
        """Every queue after its parent: the root, its children, theirs, ..."""
        order = [self.root]
        for name in order:          # grows as it is walked
            order.extend(self._children[name])
        return order

    def ancestors(self, name: QueueName) -> set[QueueName]:
        """The queue's parent, its parent's, ... up to the root, included."""
        found: set[QueueName] = set()
        parent = self._parent.get(name)
        while parent is not None and parent not in found:
            found.add(parent)
            parent = self._parent.get(parent)
        return found

    def descendants(self, name: QueueName) -> set[QueueName]:
        """The queue's children, theirs, ... (the queue itself not among them)."""
        found: set[QueueName] = set()
        todo: list[QueueName] = list(self._children[name])
        while todo:
            child = todo.pop()
            if child not in found:
                found.add(child)
                todo.extend(self._children[child])
        return found


def parent_cycles(parents: Mapping[QueueName, QueueName]) -> Iterable[list[QueueName]]:
    """The cycles of parents (each queue with at most one): each once, its
    queues in edge order (a parent before its child), from its least name so
    that the same queues always say the same."""
    done: set[QueueName] = set()
    for start in parents:
        path: dict[QueueName, int] = {}
        name: QueueName | None = start
        while name is not None and name not in done and name not in path:
            path[name] = len(path)
            name = parents.get(name)
        done.update(path)
        if name is not None and name in path:      # the walk came back to itself
            cycle = list(path)[path[name]:]        # child -> parent order
            cycle.reverse()                        # parent -> child
            least = cycle.index(min(cycle))
            yield cycle[least:] + cycle[:least]
