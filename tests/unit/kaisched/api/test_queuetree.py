"""The queue tree asked as a graph, and cycles of parents, checked against
networkx over every shape of parents (its graph of the same edges is the
oracle); and the tree build_queue_tree makes from them against the one it
made with networkx, up to where a cycle is cut."""
from __future__ import annotations

import re

import attrs
import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.queue import ROOT, QueueInfo, build_queue_tree
from kaisched.api.queuetree import QueueTree, parent_cycles
from kaisched.api.types import DEFAULT_QUEUE, QueueName

NAMES = [QueueName(n) for n in ("a", "b", "c", "d", "e", "f", "g")]

# Each queue names a parent: none, a queue (maybe itself), or one not there.
_PARENTS = st.dictionaries(st.sampled_from(NAMES),
                           st.one_of(st.none(), st.sampled_from([*NAMES, QueueName("gone")])),
                           max_size=len(NAMES))


def as_graph(tree: QueueTree) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(tree.nodes)
    graph.add_edges_from(tree.edges)
    return graph


def test_a_tree_answers_as_its_graph() -> None:
    tree = QueueTree(ROOT, {QueueName("org"): ROOT, QueueName("a"): QueueName("org"),
                            QueueName("b"): QueueName("org"), QueueName("a1"): QueueName("a")})
    assert list(tree.predecessors(QueueName("a1"))) == ["a"]
    assert list(tree.predecessors(ROOT)) == []
    assert tree.successors(QueueName("org")) == ["a", "b"]
    assert tree.out_degree(QueueName("org")) == 2 and tree.out_degree(QueueName("b")) == 0
    assert tree.ancestors(QueueName("a1")) == {"a", "org", ROOT}
    assert tree.descendants(QueueName("org")) == {"a", "b", "a1"}
    assert tree.top_down() == [ROOT, "org", "a", "b", "a1"]
    assert "a1" in tree and "nowhere" not in tree and len(tree) == 5


@settings(max_examples=300, deadline=None)
@given(parents=_PARENTS)
def test_cycles_of_parents_are_networkxs(parents: dict[QueueName, QueueName | None]) -> None:
    edges = {n: p for n, p in parents.items() if p is not None and p in parents and p != n}
    graph = nx.DiGraph([(p, n) for n, p in edges.items()])
    found = list(parent_cycles(edges))
    # The same cycles, each once, in edge order, from its least queue.
    assert sorted(map(frozenset, found)) == sorted(map(frozenset, nx.simple_cycles(graph)))
    for cycle in found:
        assert cycle[0] == min(cycle)
        assert all(edges[child] == parent for parent, child in zip(cycle, cycle[1:] + cycle[:1],
                                                                   strict=True))


@settings(max_examples=300, deadline=None)
@given(parents=_PARENTS)
def test_built_tree_is_the_one_networkx_built(parents: dict[QueueName, QueueName | None]) -> None:
    queues = [QueueInfo(n, p) for n, p in parents.items()]
    by_name, tree = build_queue_tree(queues)
    want, graph = _networkx_built(queues)
    cut = {name for name, info in by_name.items() if info.problem and "queue cycle" in info.problem}
    assert {n: _canonical(i.problem) for n, i in by_name.items()} == \
        {n: _canonical(i.problem) for n, i in want.items()}
    # The same tree but for the edge each cycle is cut at (networkx's start is its own).
    assert {e for e in tree.edges if not {*e} & cut} == \
        {e for e in graph.edges if not {*e} & cut}
    assert nx.is_arborescence(as_graph(tree)) and set(tree) == {ROOT, *by_name}
    order = tree.top_down()
    for name in by_name:
        if not ({name} | nx.ancestors(graph, name)) & cut:
            assert tree.ancestors(name) == nx.ancestors(graph, name)
            assert tree.descendants(name) == nx.descendants(graph, name)
        assert order.index(tree.parent(name) or ROOT) < order.index(name)


def _canonical(problem: str | None) -> str | None:
    """A problem with every cycle's path written from its least queue."""
    def least(match: re.Match[str]) -> str:
        members = match.group(1).split(" -> ")[:-1]
        at = members.index(min(members))
        members = members[at:] + members[:at]
        return "queue cycle: " + " -> ".join([*members, members[0]])
    return re.sub(r"queue cycle: ((?:[^ ]+ -> )+[^ :]+)", least, problem) if problem else problem


def _networkx_built(queues: list[QueueInfo]) -> tuple[dict[QueueName, QueueInfo], nx.DiGraph]:
    """The tree as build_queue_tree made it with networkx, the reference."""
    by_name = {q.name: q for q in queues}
    by_name.setdefault(DEFAULT_QUEUE, QueueInfo(DEFAULT_QUEUE))
    graph = nx.DiGraph()
    graph.add_node(ROOT)
    for queue in by_name.values():
        graph.add_node(queue.name)
    for queue in by_name.values():
        if queue.parent and queue.parent in by_name and queue.parent != queue.name:
            graph.add_edge(queue.parent, queue.name)
    for cycle in list(nx.simple_cycles(graph)):
        for name in cycle:
            path = " -> ".join(cycle + [cycle[0]])
            by_name[name] = attrs.evolve(by_name[name], problem=f"queue cycle: {path}")
        graph.remove_edge(cycle[-1], cycle[0])
    for queue in list(by_name.values()):
        if queue.parent and queue.parent not in by_name:
            by_name[queue.name] = attrs.evolve(
                queue, problem=queue.problem or f"parent queue {queue.parent!r} does not exist")
        if queue.parent == queue.name:
            by_name[queue.name] = attrs.evolve(queue, problem=f"queue cycle: {queue.name} -> {queue.name}")
    for name in list(graph.nodes):
        if name != ROOT and graph.in_degree(name) == 0:
            graph.add_edge(ROOT, name)
    for name in nx.topological_sort(graph):
        parent = by_name.get(name)
        if parent is None or not parent.problem:
            continue
        for child in graph.successors(name):
            if not by_name[child].problem:
                by_name[child] = attrs.evolve(
                    by_name[child], problem=f"parent queue {name!r} is unusable: {parent.problem}")
    return by_name, graph
