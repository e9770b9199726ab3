"""build_queue_tree: the queue hierarchy under an implicit root, with bad
input (missing parents, cycles) turned into per-queue problems."""
from __future__ import annotations

import networkx as nx
import pytest

from kaisched.api.queue import ROOT, QueueInfo, build_queue_tree
from kaisched.api.queuetree import QueueTree
from kaisched.api.resource import Resource
from kaisched.api.types import DEFAULT_QUEUE, QueueName
from kaisched.cache.convert import queue as queue_from_raw
from tests.builders.objects import build_queue


def q(name: str, parent: str | None = None, quota: Resource | None = None) -> QueueInfo:
    return QueueInfo(QueueName(name), QueueName(parent) if parent else None,
                     quota=quota if quota is not None else Resource())


def parent_of(graph: QueueTree, name: str) -> str:
    (parent,) = graph.predecessors(QueueName(name))
    return parent


def as_graph(tree: QueueTree) -> nx.DiGraph:
    """The tree as networkx has it, for its checks."""
    graph = nx.DiGraph()
    graph.add_nodes_from(tree.nodes)
    graph.add_edges_from(tree.edges)
    return graph


@pytest.mark.parametrize("queues", [[], [q("team-a")], [q("team-a"), q("team-b", "team-a")]],
                         ids=["none", "one", "nested"])
def test_default_queue_exists_implicitly(queues: list[QueueInfo]) -> None:
    by_name, graph = build_queue_tree(queues)
    assert by_name[DEFAULT_QUEUE] == QueueInfo(DEFAULT_QUEUE)
    assert parent_of(graph, DEFAULT_QUEUE) == ROOT


def test_declared_default_queue_is_kept() -> None:
    mine = q("default", quota=Resource.of(cpu=4000))
    by_name, _ = build_queue_tree([mine])
    assert by_name[DEFAULT_QUEUE] is mine


def test_parent_links_form_a_tree_under_root() -> None:
    by_name, graph = build_queue_tree([
        q("org"), q("team-a", "org"), q("team-b", "org"), q("a-train", "team-a")])
    assert parent_of(graph, "org") == ROOT
    assert parent_of(graph, "team-a") == "org"
    assert parent_of(graph, "team-b") == "org"
    assert parent_of(graph, "a-train") == "team-a"
    assert sorted(graph.successors("org")) == ["team-a", "team-b"]
    assert nx.is_arborescence(as_graph(graph))
    assert all(info.problem is None for info in by_name.values())


def test_missing_parent_is_a_problem_and_hangs_under_root() -> None:
    by_name, graph = build_queue_tree([q("orphan", "nowhere"), q("fine")])
    assert "nowhere" in by_name["orphan"].problem
    assert "does not exist" in by_name["orphan"].problem
    assert parent_of(graph, "orphan") == ROOT
    assert by_name["fine"].problem is None
    assert "nowhere" not in graph


@pytest.mark.parametrize("cycle", [
    ["a"],                      # its own parent
    ["a", "b"],
    ["a", "b", "c"],
], ids=["self", "two", "three"])
def test_cycle_is_a_problem_not_an_exception(cycle: list[str]) -> None:
    queues = [q(name, cycle[(i + 1) % len(cycle)]) for i, name in enumerate(cycle)]
    by_name, graph = build_queue_tree([*queues, q("bystander")])
    for name in cycle:
        problem = by_name[QueueName(name)].problem
        assert problem is not None and "cycle" in problem
        assert all(member in problem for member in cycle)
    assert by_name["bystander"].problem is None
    assert nx.is_arborescence(as_graph(graph))           # the rest of the tree stays usable
    assert set(graph.nodes) == {ROOT, DEFAULT_QUEUE, "bystander", *cycle}


def test_input_queues_are_not_changed() -> None:
    orphan = q("orphan", "nowhere")
    build_queue_tree([orphan])
    assert orphan.problem is None


def test_every_queue_is_reachable_from_root() -> None:
    queues = [q("a", "b"), q("b", "a"), q("c", "missing"), q("d", "c"), q("e")]
    by_name, graph = build_queue_tree(queues)
    assert nx.descendants(as_graph(graph), ROOT) == set(by_name) == graph.descendants(ROOT)


# -- from raw Queue objects ------------------------------------------------------------

def test_queue_from_raw() -> None:
    info = queue_from_raw(build_queue("team-a", parent="org", priority=7, resources={
        "cpu": {"quota": "2", "limit": "8", "overQuotaWeight": 3},
        "nvidia.com/gpu": {"limit": 0}}))
    assert info.name == "team-a" and info.parent == "org" and info.priority == 7
    assert info.quota == Resource.of(cpu=2000)
    assert info.limit("cpu") == 8000
    assert info.limit("nvidia.com/gpu") == 0          # zero limit is kept, not "unlimited"
    assert info.limit("memory") is None
    assert info.weight("cpu") == 3 and info.weight("memory") == 1
    assert info.problem is None


@pytest.mark.parametrize(("resources", "key"), [
    ({"cpu": {"limit": "lots"}}, "spec.resources.cpu.limit"),
    ({"cpu": {"overQuotaWeight": -1}}, "spec.resources.cpu.overQuotaWeight"),
    ({"cpu": {"overQuotaWeight": "heavy"}}, "spec.resources.cpu.overQuotaWeight"),
    ({"cpu": "4"}, "spec.resources.cpu"),
])
def test_bad_queue_spec_is_a_problem(resources: dict, key: str) -> None:
    info = queue_from_raw(build_queue("team-a", resources=resources))
    assert info.problem is not None and key in info.problem
