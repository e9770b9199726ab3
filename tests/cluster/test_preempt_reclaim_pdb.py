"""Preempt, reclaim and PodDisruptionBudgets on a living cluster, the budgets' status
written by the disruption controller.

Two hollow nodes of 8 GPUs, each running one pod of a low serving Deployment (8 GPUs, two
replicas) behind a budget of minAvailable 1. Two 8-GPU jobs come that outrank it: by
priority in the same queue (preempt), or by their queue's quota while the serving queue has
none (reclaim). kaisched evicts through the Eviction API, which refuses what a budget
forbids, so it never plans such an eviction: one serving pod goes, the first job runs on
its node, its ReplicaSet makes the pod again (it waits: no room), and the second job waits
too, its PodGroup naming the budget. The serving pods running never drop below 1, and no
eviction is refused by the API server (the scheduler logs none)."""
from __future__ import annotations

import time
from typing import Callable

import pytest

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import EVENT, PODGROUP
from kaisched.cluster.kube import KubeCluster
from tests.builders.cluster import (
    PDB,
    STATEFUL_SET,
    Outranking,
    delete_quietly,
    deployment,
    explainer,
    pdb,
    placed,
    running,
    stateful_set,
    stuck_terminating,
    template,
    wait_for,
)
from tests.builders.realapi import Components


@pytest.mark.parametrize("cause", ["preempt", "reclaim"])
def test_a_budget_keeps_its_pods_from_preempt_and_reclaim(
        cause: str, admin: KubeCluster, components: Components, priorities: None,
        namespace: str, nodes: Callable[[int], list[str]]) -> None:
    nodes(2)
    ns = namespace
    rank = Outranking.made(admin, cause, ns)

    why = explainer(admin, ns, components)

    def serving() -> list[Obj]:
        return running(admin, ns, "serve", 0) or []

    try:
        admin.create(pdb(ns, "serve", "serve", 1))
        admin.create(deployment(ns, "serve", 2, placed(
            template("serve", gpus=8, priority="cl-low", queue=rank.low_queue), ns)))
        wait_for(lambda: len(serving()) == 2, 120, "both serving pods running", why)
        wait_for(lambda: ((admin.get(PDB, ns, "serve") or {}).get("status") or {}).get(
            "disruptionsAllowed") == 1, 60, "the disruption controller's status", why)

        for name in ("high-a", "high-b"):
            admin.create(stateful_set(ns, name, 1, placed(
                template(name, gpus=8, priority=rank.high_priority, queue=rank.high_queue), ns),
                min_member=1))

        def one_placed() -> bool:
            assert len(serving()) >= 1, f"serving pods below the budget's minAvailable\n{why()}"
            return bool(running(admin, ns, "high-a", 1) or running(admin, ns, "high-b", 1))
        wait_for(one_placed, 120, f"one {cause}ing job running", why)

        def names_the_budget() -> bool:
            for group in admin.list(PODGROUP, ns):
                for cond in (group.get("status") or {}).get("conditions") or []:
                    if "PodDisruptionBudget" in cond.get("message", ""):
                        return True
            return False
        wait_for(names_the_budget, 60, "the waiting job's PodGroup naming the budget", why)
        for _ in range(15):         # the budget holds: the second job keeps waiting
            assert len(serving()) >= 1, f"serving pods below the budget's minAvailable\n{why()}"
            placed_jobs = [n for n in ("high-a", "high-b") if running(admin, ns, n, 1)]
            assert len(placed_jobs) == 1, why()
            time.sleep(1.0)
        evicted = [e for e in admin.list(EVENT, ns)
                   if e["involvedObject"].get("name", "").startswith("serve-")
                   and e.get("reason") in ("Preempted", "Evicted")]
        assert sum(e.get("count") or 1 for e in evicted) == 1, why()
        log = components.scheduler.log()
        assert "disruption budget" not in log.lower(), log[-4000:]      # none refused by the API
        assert not stuck_terminating(admin, ns, time.time()), why()
    finally:
        for name in ("high-a", "high-b"):
            delete_quietly(admin, STATEFUL_SET, ns, name)
        rank.remove(admin)
