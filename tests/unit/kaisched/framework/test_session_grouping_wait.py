"""A pod a controller made moments ago, with no gang declared, waits quietly for the
PodGrouper (podGrouperWait, 5 s by default) before it is placed as a gang of one: placed
at once, a StatefulSet's pod made again after an eviction would bind before the PodGrouper
put it back into its gang, and the gang would run partly. Nothing is said of it meanwhile
(no Event, no condition): the PodGrouper usually groups it within the session."""
from __future__ import annotations

import attrs

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT, POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.framework.effects import Bind
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod, build_podgroup, load_cluster


def owner(kind: str = "StatefulSet") -> dict:
    return {"apiVersion": "apps/v1", "kind": kind, "name": "train", "uid": "uid-train",
            "controller": True}


def scheduler(objects: list[dict], wait: float | None = None
              ) -> tuple[Scheduler, MemoryCluster, ManualClock]:
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    registry = register_builtins()
    config = default_config(registry)
    if wait is not None:
        config = attrs.evolve(config, pod_grouper_wait=wait)
    return Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now)), cluster, clock


def binds(sched: Scheduler) -> dict[str, str]:
    return {e.pod: e.node for e in sched.run_once().effects if isinstance(e, Bind)}


def test_a_new_ungrouped_pod_of_a_controller_waits_then_goes_alone() -> None:
    sched, cluster, clock = scheduler([build_node("n1"), build_pod("train-0", owner=owner())])
    assert binds(sched) == {}
    pod = cluster.get(POD, "default", "train-0")
    assert not [c for c in (pod.get("status") or {}).get("conditions") or []
                if c.get("type") == "PodScheduled"], "nothing is said while it waits"
    assert not cluster.list(EVENT, "default")
    clock.advance(4.0)
    assert binds(sched) == {}
    clock.advance(1.5)
    assert binds(sched) == {"default/train-0": "n1"}


def test_a_pod_grouped_meanwhile_joins_its_gang() -> None:
    """The PodGrouper annotates it within the wait: it waits for its sibling, whole."""
    sched, cluster, clock = scheduler([build_node("n1"), build_podgroup("train", min_member=2),
                              build_pod("train-0", owner=owner())])
    assert binds(sched) == {}
    cluster.patch(POD, "default", "train-0",
                        {"metadata": {"annotations": {"kaisched.io/pod-group": "train"}}})
    clock.advance(10.0)
    assert binds(sched) == {}           # a gang of 2 with one pod: never placed alone


def test_who_does_not_wait() -> None:
    objects = [build_node("n1", cpu=8),
               build_pod("bare"),                                        # no controller
               build_podgroup("named", min_member=1),
               build_pod("named-0", owner=owner("ReplicaSet"), group="named"),  # a gang declared
               build_pod("old", owner=owner(), creation="2025-01-01T00:00:00Z")]  # made long ago
    sched, _, _ = scheduler(objects)
    assert set(binds(sched)) == {"default/bare", "default/named-0", "default/old"}


def test_a_wait_of_zero_turns_it_off() -> None:
    sched, _, _ = scheduler([build_node("n1"), build_pod("train-0", owner=owner())], wait=0.0)
    assert binds(sched) == {"default/train-0": "n1"}
