"""This scheduler's GPU sharers as the cache's model counts them
(kaisched.cache.sharers): how many, and the placed ones whose share waits
for their node's GPU memory to be known."""
from __future__ import annotations

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.node import NodeSpec
from kaisched.api.resource import GPU, Resource
from kaisched.api.types import NodeName, PodKey
from kaisched.cache import convert
from kaisched.cache.jobs import Priorities, make_task
from kaisched.cache.roomnotes import RoomNotes
from kaisched.cache.sharers import Sharers
from tests.builders.objects import build_pod

KEY = PodKey("default/a")


def test_a_sharer_placed_on_a_node_not_known_waits_until_it_is() -> None:
    cluster = ClusterInfo.assemble((), (), ())
    sharers = Sharers(cluster, RoomNotes(cluster))
    facts = convert.pod_facts(build_pod("a", cpu=1, node="n1", annotations={"gpu-memory": "2048"}))
    task = make_task(facts, Priorities(), facts.placement)
    assert task.gpu is not None and task.gpu.portion is None
    sharers.came(KEY, task)
    assert sharers.count == 1 and sharers.unresolved == {KEY}
    assert list(sharers.resolvable({KEY: facts}, {})) == []         # n1 still unknown
    assert sharers.unresolved == {KEY}
    n1 = NodeSpec(NodeName("n1"), Resource.of({"cpu": 4000, GPU: 1}))
    assert list(sharers.resolvable({KEY: facts}, {"n1": n1})) == [(KEY, facts)]
    assert sharers.unresolved == set()
    sharers.left(KEY, task)
    assert sharers.count == 0
