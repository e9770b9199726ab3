"""Eviction and recreation on a living cluster: a gang that preempt or reclaim evicts is
terminated by its kubelet and made again by its StatefulSet controller; kaisched then places
the new pods whole, once the room is there, never one of them alone, and no pod stays
Terminating.

Two hollow nodes of 8 GPUs each. A low gang (a StatefulSet of 2 pods x 8 GPUs, min-member 2)
fills them; a job of one 8-GPU pod comes that needs one node: by a higher priority in the same
queue (preempt), or by its queue's quota while the low gang's queue has none (reclaim). The
low gang goes whole (one pod alone would break it); its controller makes both pods again;
they wait, whole, while only 8 GPUs are free, and bind together once the job is gone."""
from __future__ import annotations

import time
from typing import Callable

import pytest

from kaisched.cluster.kinds import EVENT
from kaisched.cluster.kube import KubeCluster
from tests.builders.cluster import (
    STATEFUL_SET,
    GangWatch,
    Outranking,
    bound_pods,
    delete_quietly,
    explainer,
    placed,
    pods_of,
    running,
    stateful_set,
    stuck_terminating,
    template,
    wait_for,
)
from tests.builders.realapi import Components


@pytest.mark.parametrize("cause", ["preempt", "reclaim"])
def test_an_evicted_gang_is_made_again_and_placed_whole(
        cause: str, admin: KubeCluster, components: Components, priorities: None,
        namespace: str, nodes: Callable[[int], list[str]]) -> None:
    nodes(2)
    ns = namespace
    rank = Outranking.made(admin, cause, ns)

    why = explainer(admin, ns, components)

    try:
        admin.create(stateful_set(ns, "low", 2, placed(
            template("low", gpus=8, priority="cl-low", queue=rank.low_queue), ns), min_member=2))
        first = wait_for(lambda: running(admin, ns, "low", 2), 120, "the low gang running", why)
        first_uids = {p["metadata"]["uid"] for p in first}
        low = GangWatch(admin, ns, "low", 2)

        admin.create(stateful_set(ns, "high", 1, placed(
            template("high", gpus=8, priority=rank.high_priority, queue=rank.high_queue), ns),
            min_member=1))
        wait_for(lambda: (low.sample(), running(admin, ns, "high", 1))[1], 120,
                 f"the {cause}ing job running", why)

        def made_again() -> bool:
            low.sample()
            pods = pods_of(admin, ns, "low")
            return len(pods) == 2 and not {p["metadata"]["uid"] for p in pods} & first_uids
        wait_for(made_again, 120, "the low gang's pods made again by its StatefulSet", why)
        reasons = {e.get("reason") for e in admin.list(EVENT, ns)
                   if e["involvedObject"].get("name", "").startswith("low-")}
        assert "Preempted" in reasons, why()
        for _ in range(10):         # 8 GPUs free, the gang needs 16: it waits whole
            assert low.sample() == 0, why()
            time.sleep(1.0)

        delete_quietly(admin, STATEFUL_SET, ns, "high")
        wait_for(lambda: (low.sample(), running(admin, ns, "low", 2))[1], 120,
                 "the low gang placed whole again", why)
        assert low.longest <= 10.0, f"the low gang was partly bound {low.longest:.0f} s"
        assert len(bound_pods(admin, ns, "low")) == 2
        assert not stuck_terminating(admin, ns, time.time()), why()
    finally:
        rank.remove(admin)
