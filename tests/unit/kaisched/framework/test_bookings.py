"""Capacity provisioned for a gang is held for it: the Nodes created after its
request, that its pods may use, take no other gang's pods while the booking lasts; it
ends when the gang is placed, when the booking runs out, or when the request no longer
says Provisioned. Nodes older than the request are never held.

The real scheduler over the memory backend; the test plays the autoscaler."""
from __future__ import annotations

from kaisched.cluster.kinds import POD
from kaisched.framework.bookings import BOOKING
from tests.builders.objects import build_node, build_pod
from tests.builders.provisioning import World, big_gang, gpu_nodes

BIG = [f"default/big-{i}" for i in range(4)]


def running(name: str, node: str) -> dict[str, object]:
    return build_pod(name, cpu=1, gpu=8, node=node, phase="Running")


def world_with_rival() -> World:
    """n1 and n2 full; the gang of 4 x 8 GPUs asks for 4 pods; a bare 8-GPU pod (no
    PodGroup: it gets no request of its own) waits beside it, with a higher priority,
    so without the booking it would take the first new node. The clock is a second on,
    as the autoscaler's nodes come."""
    rival = build_pod("rival", cpu=1, gpu=8, priority=1000)
    world = World([*gpu_nodes("n1", "n2"), running("a", "n1"), running("b", "n2"),
                   *big_gang(), rival])
    assert world.session() == {}
    world.clock.advance(1.0)
    return world


def test_nodes_provisioned_for_a_gang_take_no_other_pod_while_they_come_up() -> None:
    world = world_with_rival()
    [request] = world.requests()
    assert [s["count"] for s in request["spec"]["podSets"]] == [4]
    world.answer(request, "Provisioned")
    for node in gpu_nodes("n3", "n4"):      # half of it up so far
        world.cluster.create(node)
    assert world.session() == {}            # the gang waits for the rest; the rival may not take it
    for node in gpu_nodes("n5", "n6"):
        world.cluster.create(node)
    bound = world.session()
    bound.update(world.session())
    assert sorted(bound) == BIG
    assert sorted(bound.values()) == ["n3", "n4", "n5", "n6"]


def test_room_beyond_what_the_gang_asked_for_stays_open() -> None:
    world = world_with_rival()
    [request] = world.requests()
    world.answer(request, "Provisioned")
    for node in gpu_nodes("n3", "n4", "n5", "n6", "n7"):    # one node more than asked for
        world.cluster.create(node)
    bound = world.session()
    bound.update(world.session())
    assert sorted(bound) == [*BIG, "default/rival"]


def test_the_booking_ends_when_it_runs_out() -> None:
    world = world_with_rival()
    [request] = world.requests()
    world.answer(request, "Provisioned")
    for node in gpu_nodes("n3", "n4"):
        world.cluster.create(node)
    assert world.session() == {}
    assert world.session(BOOKING) == {"default/rival": "n3"}    # the autoscaler's booking is over


def test_the_booking_ends_when_the_request_no_longer_says_provisioned() -> None:
    world = world_with_rival()
    [request] = world.requests()
    world.answer(request, "Provisioned")
    world.cluster.create(gpu_nodes("n3")[0])
    assert world.session() == {}
    world.answer(request, "CapacityRevoked", "the cloud took it back")
    assert world.session() == {"default/rival": "n3"}


def test_nodes_older_than_the_request_or_that_the_gang_cannot_use_are_not_held() -> None:
    world = world_with_rival()
    [request] = world.requests()
    world.answer(request, "Provisioned")
    world.cluster.delete(POD, "default", "a")           # room on an old node frees up
    tainted = build_node("n3", cpu=8, gpu=8, taints=[{"key": "dedicated", "value": "infer",
                                                     "effect": "NoSchedule"}])
    world.cluster.create(tainted)                       # new, but no pod of the gang tolerates it
    assert world.session() == {"default/rival": "n1"}


def test_a_request_not_yet_provisioned_holds_nothing() -> None:
    world = world_with_rival()
    [request] = world.requests()
    world.answer(request, "Accepted")
    world.cluster.create(gpu_nodes("n3")[0])        # a node that came for someone else
    assert world.session() == {"default/rival": "n3"}
