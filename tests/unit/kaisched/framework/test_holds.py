"""A NonStrict gang with a required topology level holds what one domain of
that level can take (the domain that takes the most), never pods split over
domains, and finishes in that domain once room frees up there; a Strict gang
holds nothing."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.framework import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster

RACK = "topology.example.com/rack"
RACKS = {"r1a": "rack-1", "r1b": "rack-1", "r2a": "rack-2", "r2b": "rack-2"}


def world(mode: str) -> list[dict[str, Any]]:
    """rack-1 has 3 of 4 GPUs free (busy takes one), rack-2 has 2 (hog takes
    two); the gang needs 4."""
    objects = [build_node(n, cpu=32, gpu=2, labels={RACK: r}) for n, r in RACKS.items()]
    objects.append(build_pod("busy", gpu=1, node="r1b", scheduler="default-scheduler"))
    objects.append(build_pod("hog", gpu=2, node="r2b", scheduler="default-scheduler"))
    objects.append(build_podgroup("ring", min_member=4, mode=mode, waitTimeSeconds=600,
                                  topology={"required": RACK}))
    objects += [build_pod(f"ring-{i}", gpu=1, group="ring") for i in range(4)]
    return objects


def scheduler(mode: str) -> tuple[Scheduler, Any, ManualClock]:
    clock = ManualClock(1_767_225_600.0)
    cluster = load_cluster(world(mode), clock)
    registry = register_builtins()
    return Scheduler(cluster, default_config(registry), registry, clock,
                     Binder(cluster, clock.now)), cluster, clock


def test_a_nonstrict_gang_holds_inside_one_rack_and_finishes_there() -> None:
    sched, cluster, clock = scheduler("NonStrict")
    first = sched.run_once()
    assert first.placed == {}
    (hold,) = sched.holds.values()
    held = {pod: node for pod, node in hold.tasks}
    assert len(held) == 3 and {RACKS[n] for n in held.values()} == {"rack-1"}

    clock.advance(1)
    second = sched.run_once()           # no room yet: the hold stays where it was
    assert second.placed == {}
    assert {p: n for p, n in next(iter(sched.holds.values())).tasks} == held

    # rack-2 frees up too, but the gang is bound to the rack it holds in
    cluster.delete(POD, "default", "busy")
    cluster.delete(POD, "default", "hog")
    clock.advance(1)
    third = sched.run_once()
    assert len(third.placed) == 4
    assert {RACKS[n] for n in third.placed.values()} == {"rack-1"}
    assert {pod: third.placed[pod] for pod in held} == held     # bound where they were held
    assert sched.holds == {}


def test_a_strict_gang_with_a_required_rack_holds_nothing() -> None:
    sched, _, _ = scheduler("Strict")
    assert sched.run_once().placed == {} and sched.holds == {}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=2, max_size=6), st.integers(2, 6),
       st.sampled_from(["NonStrict", "Strict"]))
def test_holds_and_binds_never_split_over_racks(busy: list[int], size: int, mode: str) -> None:
    """Random racks of two 2-GPU nodes, some GPUs busy: whatever a gang that
    requires one rack binds or holds sits in one rack."""
    clock = ManualClock(1_767_225_600.0)
    objects: list[dict[str, Any]] = []
    racks: dict[str, str] = {}
    for i, taken in enumerate(busy):
        node = f"n{i}"
        racks[node] = f"rack-{i // 2}"
        objects.append(build_node(node, cpu=32, gpu=2, labels={RACK: racks[node]}))
        if taken:
            objects.append(build_pod(f"busy-{i}", gpu=taken, node=node,
                                     scheduler="default-scheduler"))
    objects.append(build_podgroup("ring", min_member=size, mode=mode,
                                  topology={"required": RACK}))
    objects += [build_pod(f"ring-{i}", gpu=1, group="ring") for i in range(size)]
    cluster = load_cluster(objects, clock)
    registry = register_builtins()
    sched = Scheduler(cluster, default_config(registry), registry, clock,
                      Binder(cluster, clock.now))
    placed = sched.run_once().placed
    held = [node for hold in sched.holds.values() for _, node in hold.tasks]
    assert len({racks[n] for n in [*placed.values(), *held]}) <= 1
    assert not (placed and held)
    if mode == "Strict":
        assert not held
