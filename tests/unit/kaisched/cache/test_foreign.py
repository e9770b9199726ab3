"""Other schedulers' pods as the cache's model counts them
(kaisched.cache.foreign): room on their node while they hold it, published
to the cluster by key, and in a shard, waiting apart while their node is
another pool's."""
from __future__ import annotations

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.node import NodeSpec
from kaisched.api.resource import Resource
from kaisched.api.types import NodeName, PodKey
from kaisched.cache import convert
from kaisched.cache.convert import PodFacts
from kaisched.cache.foreign import Foreign
from kaisched.cache.roomnotes import RoomNotes
from tests.builders.objects import build_pod

N1, N2 = NodeName("n1"), NodeName("n2")
SPECS = {name: NodeSpec(name, Resource.of(cpu=4000, pods=10)) for name in (N1, N2)}


def book(pool: dict[str, NodeSpec] | None = None) -> Foreign:
    """pool: a shard's nodes (None: the whole cluster)."""
    cluster = ClusterInfo.assemble(SPECS.values(), (), ())
    room = RoomNotes(cluster)
    room.relayout = False
    return Foreign(cluster, room, pool is not None, pool if pool is not None else {})


def theirs(name: str, node: str | None = "n1", cpu: float = 3) -> PodFacts:
    return convert.pod_facts(build_pod(name, cpu=cpu, node=node, scheduler="other"))


def used_cpu(foreign: Foreign, node: NodeName) -> float:
    foreign.room.sum_into_table()
    return foreign.cluster.nodes[node].used.get("cpu")


def test_a_pod_takes_room_until_it_is_dropped() -> None:
    foreign = book()
    foreign.put(PodKey("default/b"), theirs("b", cpu=1))
    foreign.put(PodKey("default/a"), theirs("a"))
    assert used_cpu(foreign, N1) == 4000
    foreign.publish()
    assert [p.key for p in foreign.cluster.foreign] == ["default/a", "default/b"]
    foreign.drop(PodKey("default/a"))
    assert used_cpu(foreign, N1) == 1000
    foreign.publish()
    assert [p.key for p in foreign.cluster.foreign] == ["default/b"]


def test_a_pod_holding_no_room_is_not_counted() -> None:
    foreign = book()
    foreign.put(PodKey("default/a"), theirs("a", node=None))       # pending
    foreign.publish()
    assert foreign.cluster.foreign == ()
    assert used_cpu(foreign, N1) == 0


def test_a_shard_counts_pods_on_another_pool_s_node_once_it_joins() -> None:
    pool = {N1: SPECS[N1]}
    foreign = book(pool)
    key = PodKey("default/a")
    foreign.put(key, theirs("a", node="n2"))
    assert key in foreign.elsewhere and not foreign.pods
    pool[N2] = SPECS[N2]
    foreign.node_joined(N2)
    assert key in foreign.pods and not foreign.elsewhere
    foreign.node_left(N2)
    assert key in foreign.elsewhere and not foreign.pods
    foreign.drop(key)
    assert not foreign.elsewhere
    foreign.publish()
    assert foreign.cluster.foreign == ()
