"""The in-process API server (kaisched.cluster.memory): a list comes in key
order, as an API server's, and shows every write before it, though what it
lists is kept between writes."""
from __future__ import annotations

from kaisched.cluster.kinds import NODE, POD
from kaisched.cluster.memory import MemoryCluster
from tests.builders.objects import build_node, build_pod


def names(cluster: MemoryCluster) -> list[tuple[str, str]]:
    return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in cluster.list(POD)]


def test_a_list_is_in_key_order_whatever_the_order_of_writes() -> None:
    cluster = MemoryCluster()
    for namespace, name in (("b", "x"), ("a", "y"), ("a", "x"), ("b", "a")):
        cluster.create(build_pod(name, namespace=namespace))
    assert names(cluster) == [("a", "x"), ("a", "y"), ("b", "a"), ("b", "x")]
    assert [o["metadata"]["name"] for o in cluster.list(POD, "b")] == ["a", "x"]


def test_a_list_and_a_new_subscription_show_every_write_before_them() -> None:
    cluster = MemoryCluster()
    cluster.create(build_node("n1"))
    cluster.create(build_pod("p2"))
    assert names(cluster) == [("default", "p2")]        # listed: kept until the next write
    cluster.create(build_pod("p1"))
    assert names(cluster) == [("default", "p1"), ("default", "p2")]
    cluster.bind("default", "p1", "", "n1")
    assert [o["spec"].get("nodeName") for o in cluster.list(POD)] == ["n1", None]
    cluster.delete(POD, "default", "p2")
    first = cluster.subscribe([POD, NODE]).drain()
    assert [(e.type, e.obj["metadata"]["name"]) for e in first if e.kind is POD] == [("ADDED", "p1")]
    assert first[[e.kind for e in first].index(POD)].obj["spec"]["nodeName"] == "n1"
    # What one subscription drained is its own: a write after it reaches it alone as an event.
    cluster.create(build_pod("p3"))
    assert [e.obj["metadata"]["name"] for e in cluster.subscribe([POD]).drain()] == ["p1", "p3"]
    assert len(first) == 2
