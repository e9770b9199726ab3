"""What of a gang the free room cannot hold: its pods packed largest first, each onto the
node it fits most tightly; room held for another gang is taken, the gang's own is free;
a node that is not usable or that the pod's rules exclude holds nothing; and gangs asked
about one after another each see the room as it is (one gang's packing takes nothing
from the next)."""
from __future__ import annotations

import numpy as np

from actions.common.shortfall import Shortfall
from kaisched.framework import Session
from tests.builders.objects import build_node, build_pod, build_podgroup, default_session


def session(*nodes: dict[str, object], pods: int = 4, gpus: int = 4) -> Session:
    group = [build_podgroup("g", min_member=pods)]
    return default_session([*nodes, *group, *(build_pod(f"g-{i}", gpu=gpus, group="g")
                                              for i in range(pods))])


def missing(ssn: Session, job: str = "default/g") -> list[str]:
    tasks = sorted(ssn.cluster.jobs[job].tasks.values(), key=lambda t: t.key)
    return [t.name for t in Shortfall(ssn).unplaceable(tasks)]


def test_pods_left_over_when_packed_tightest_first() -> None:
    # 8 + 4 + 4 GPUs free: four 4-GPU pods take two on the 8, one on each 4; a fifth is left.
    ssn = session(build_node("a", gpu=8), build_node("b", gpu=4), build_node("c", gpu=4), pods=5)
    assert missing(ssn) == ["g-4"]


def test_best_fit_leaves_the_big_node_for_the_big_pod() -> None:
    # A 4-GPU pod packed first-fit onto the 8-GPU node would leave the 8-GPU pod nowhere.
    objects = [build_node("a", gpu=8), build_node("b", gpu=4), build_podgroup("g", min_member=2),
               build_pod("g-0", gpu=4, group="g"), build_pod("g-1", gpu=8, group="g")]
    assert missing(default_session(objects)) == []


def test_room_held_for_another_gang_is_taken_and_the_gangs_own_is_free() -> None:
    ssn = session(build_node("a", gpu=8), pods=2)
    table = ssn.cluster.table
    room = np.zeros_like(table.alloc)
    room[table.index["a"]] = table.vector(ssn.cluster.jobs["default/g"].tasks[
        next(iter(ssn.cluster.jobs["default/g"].tasks))].resreq)
    ssn.starving.reserve("default/other", room)     # 4 of the 8 GPUs held for another gang
    assert missing(ssn) == ["g-1"]
    ssn.starving.release("default/other")
    ssn.starving.reserve("default/g", room)         # held for this gang: free to it
    assert missing(ssn) == []


def test_cordoned_nodes_and_nodes_the_pod_may_not_use_hold_nothing() -> None:
    objects = [build_node("a", gpu=8, unschedulable=True), build_node("b", gpu=8, labels={"x": "y"}),
               build_podgroup("g", min_member=1),
               build_pod("g-0", gpu=8, group="g", node_selector={"x": "z"})]
    assert missing(default_session(objects)) == ["g-0"]


def test_each_gang_sees_the_room_as_it_is() -> None:
    objects = [build_node("a", gpu=8), *(build_podgroup(g, min_member=2) for g in "pq"),
               *(build_pod(f"{g}-{i}", gpu=4, group=g) for g in "pq" for i in range(2))]
    ssn = default_session(objects)
    shortfall = Shortfall(ssn)
    for job in ("default/p", "default/q"):
        tasks = sorted(ssn.cluster.jobs[job].tasks.values(), key=lambda t: t.key)
        assert shortfall.unplaceable(tasks) == []
