"""The queue tree asked as a graph, and cycles of parents, checked against
networkx over every shape of parents (its graph of the same edges is the
oracle); and the tree build_queue_tree makes from them: each queue under the
parent it names, or under the root with a problem that says why."""
from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.queue import ROOT, QueueInfo, build_queue_tree
from kaisched.api.queuetree import QueueTree, parent_cycles
from kaisched.api.types import QueueName

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
def test_built_tree_keeps_each_queue_where_it_asked_or_says_why(
        parents: dict[QueueName, QueueName | None]) -> None:
    by_name, tree = build_queue_tree([QueueInfo(n, p) for n, p in parents.items()])
    graph = nx.DiGraph([(p, n) for n, p in parents.items()
                        if p is not None and p in parents and p != n])
    cycles = {n: cycle for cycle in nx.simple_cycles(graph) for n in cycle}
    assert nx.is_arborescence(as_graph(tree)) and set(tree) == {ROOT, *by_name}
    for cycle in {tuple(sorted(c)) for c in cycles.values()}:      # each cut once, under ROOT
        assert [tree.parent(n) for n in cycle].count(ROOT) == 1
    for name, info in by_name.items():
        declared = parents.get(name)
        if name in cycles or declared == name:
            assert info.problem is not None and info.problem.startswith("queue cycle: ")
            assert all(member in info.problem for member in cycles.get(name, [name]))
            assert tree.parent(name) in (declared, ROOT)
        elif declared is not None and declared not in by_name:
            assert info.problem == f"parent queue {declared!r} does not exist"
            assert tree.parent(name) == ROOT
        elif declared is not None:
            assert tree.parent(name) == declared
            above = by_name[declared].problem
            assert info.problem == (None if above is None
                                    else f"parent queue {declared!r} is unusable: {above}")
        else:
            assert tree.parent(name) == ROOT and info.problem is None
