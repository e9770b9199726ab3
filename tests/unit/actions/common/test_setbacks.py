"""A reservation whose start moves later says what moved it.

Two 8-GPU nodes, each with a running pod whose activeDeadlineSeconds ends it:
n1's sooner. A starving 8-GPU gang holds n1. Then the cluster changes under
the reservation; the next session works it out again, on n2, and the gang's
condition says the start it had and why it moved."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from kaisched.api.clock import ManualClock, clock_text, to_rfc3339
from kaisched.api.task import START_SLACK
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import NODE, POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from tests.builders.objects import build_node, build_pod

BIG = "default/big"


def _running(name: str, node: str, gpus: int, limit: int | None, now: float,
             scheduler: str = "kaisched") -> dict[str, Any]:
    pod = build_pod(name, gpu=gpus, node=node, scheduler=scheduler)
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    if limit is not None:
        pod["spec"]["activeDeadlineSeconds"] = limit
    pod["status"]["startTime"] = to_rfc3339(now)
    return pod


def _world() -> tuple[MemoryCluster, Scheduler, float]:
    clock = ManualClock()
    now = clock.now()
    cluster = MemoryCluster(clock)
    for obj in (build_node("n1", cpu=32, gpu=8), build_node("n2", cpu=32, gpu=8),
                _running("a", "n1", 4, 600, now), _running("b", "n2", 8, 3600, now),
                {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": "big", "namespace": "default"},
                 "spec": {"minMember": 1, "starvationThresholdSeconds": 60},
                 "status": {"phase": "Pending", "unschedulableSince": to_rfc3339(now - 600)}},
                build_pod("big-0", gpu=8, group="big")):
        cluster.create(obj)
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now))
    return cluster, scheduler, now


def _message(cluster: MemoryCluster) -> str:
    group = cluster.get(PODGROUP, "default", "big")
    assert group is not None
    return next(c["message"] for c in group["status"]["conditions"] if c["type"] == "Scheduled")


def _node_gone(cluster: MemoryCluster, now: float) -> None:
    cluster.delete(NODE, "", "n1")


def _cordoned(cluster: MemoryCluster, now: float) -> None:
    node = cluster.get(NODE, "", "n1")
    assert node is not None
    cluster.replace({**node, "spec": {**node.get("spec", {}), "unschedulable": True}})


def _pod_came(cluster: MemoryCluster, now: float) -> None:
    cluster.create(_running("x", "n1", 4, None, now, scheduler="other"))


def _lent_pod_ran_late(cluster: MemoryCluster, now: float) -> None:
    """A pod of this scheduler whose limit ends it after the start (as a pod
    lent the room would, had its kubelet started it much later than planned)."""
    cluster.create(_running("y", "n1", 4, 1200, now))


def test_a_pod_not_started_yet_moves_the_start_with_the_clock() -> None:
    """Its limit counts from its start: each session it has not started, the start moves
    on by as much as the clock did, and the condition says why."""
    cluster, scheduler, now = _world()
    pod = cluster.get(POD, "default", "a")
    assert pod is not None
    cluster.replace({**pod, "status": {"phase": "Pending"}})        # bound, not started
    first = scheduler.run_once().reserved[BIG]
    assert first.start == now + START_SLACK + 600
    scheduler.clock.advance(60)
    second = scheduler.run_once().reserved[BIG]
    assert (second.start, second.was) == (now + 60 + START_SLACK + 600, first.start)
    assert second.moved == "pod default/a on node n1 has not started yet (its limit counts from then)"


@pytest.mark.parametrize("change, because, start, node", [
    (_node_gone, "node n1 is gone", 3600, "n2"),
    (_cordoned, "node n1 was cordoned", 3600, "n2"),
    (_pod_came, "pod default/x of another scheduler came to node n1", 3600, "n2"),
    # n1 is still free sooner than n2: held again, from y's end.
    (_lent_pod_ran_late, "pod default/y (priority 0) came to node n1 and ends by ", 1200, "n1"),
], ids=["node-gone", "cordoned", "pod-came", "lent-pod-late"])
def test_the_condition_says_what_moved_the_start(
        change: Callable[[MemoryCluster, float], None], because: str, start: int,
        node: str) -> None:
    cluster, scheduler, now = _world()
    first = scheduler.run_once().reserved[BIG]
    assert (first.start, first.nodes, first.moved) == (now + 600, ("n1",), None)
    assert f"whole by {clock_text(now + 600, now)} at the latest" in _message(cluster)

    change(cluster, now)
    second = scheduler.run_once().reserved[BIG]
    assert (second.start, second.nodes) == (now + start, (node,))
    assert second.was == now + 600 and second.moved is not None
    assert second.moved.startswith(because)
    assert (f"whole by {clock_text(now + start, now)} at the latest "
            f"(was {clock_text(now + 600, now)}: {because}") in _message(cluster)


def test_a_start_that_stays_says_nothing_moved() -> None:
    cluster, scheduler, now = _world()
    scheduler.run_once()
    again = scheduler.run_once().reserved[BIG]
    assert (again.start, again.moved) == (now + 600, None)
    assert "(was" not in _message(cluster)
