"""Consolidation and PodDisruptionBudgets on a living cluster, the budgets' status written by
the disruption controller.

Two hollow nodes of 8 GPUs: on each a serving pod (4 GPUs, a Deployment's: serve-a, serve-b,
one PDB over both) and a filler (4 GPUs) that then goes, so each node has 4 GPUs free and a
pending 6-GPU job fits on neither as they stand.

- no PDB, or one of minAvailable 1: consolidation moves a serving pod; its kubelet
  terminates it, its ReplicaSet makes it again, and the new pod is placed on the room held
  for it on the other node; the job binds on the node the move freed; the serving pods are
  never below the budget's minAvailable.
- minAvailable 2 (disruptionsAllowed 0): nothing moves and the job waits."""
from __future__ import annotations

import time
from typing import Callable

import pytest

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import EVENT
from kaisched.cluster.kube import KubeCluster
from tests.builders.cluster import (
    PDB,
    STATEFUL_SET,
    bound_pods,
    delete_quietly,
    deployment,
    explainer,
    pdb,
    placed,
    pods_of,
    running,
    stateful_set,
    stuck_terminating,
    template,
    wait_for,
)
from tests.builders.realapi import Components


def serving(ns: str, app: str) -> Obj:
    tmpl = placed(template(app, gpus=4), ns)
    tmpl["metadata"]["labels"]["tier"] = "serve"
    return deployment(ns, app, 1, tmpl)


@pytest.mark.parametrize("min_available", [None, 1, 2], ids=["no-pdb", "pdb-1", "pdb-2"])
def test_consolidation_moves_a_serving_pod_only_as_its_budget_allows(
        min_available: int | None, admin: KubeCluster, components: Components,
        namespace: str, nodes: Callable[[int], list[str]]) -> None:
    ns = namespace
    nodes(2)

    why = explainer(admin, ns, components)

    def serve_pods() -> list[Obj]:
        return [p for p in bound_pods(admin, ns, "serve-a") + bound_pods(admin, ns, "serve-b")
                if (p.get("status") or {}).get("phase") == "Running"]

    if min_available is not None:
        budget = pdb(ns, "serve", "", min_available)
        budget["spec"]["selector"] = {"matchLabels": {"tier": "serve"}}      # both Deployments
        admin.create(budget)
    # One serving pod and one filler a node: binpack fills the first node before the second.
    for app, owner in (("serve-a", serving(ns, "serve-a")),
                       ("fill-a", stateful_set(ns, "fill-a", 1, placed(template("fill-a", 4), ns))),
                       ("serve-b", serving(ns, "serve-b")),
                       ("fill-b", stateful_set(ns, "fill-b", 1, placed(template("fill-b", 4), ns)))):
        admin.create(owner)
        wait_for(lambda app=app: running(admin, ns, app, 1), 120, f"{app} running", why)
    where = {app: bound_pods(admin, ns, app)[0]["spec"]["nodeName"]
             for app in ("serve-a", "serve-b", "fill-a", "fill-b")}
    assert where["serve-a"] != where["serve-b"], where
    if min_available is not None:
        wait_for(lambda: ((admin.get(PDB, ns, "serve") or {}).get("status") or {}).get(
            "currentHealthy") == 2, 60, "the disruption controller's status", why)
    for filler in ("fill-a", "fill-b"):
        delete_quietly(admin, STATEFUL_SET, ns, filler)
    wait_for(lambda: not pods_of(admin, ns, "fill-a") and not pods_of(admin, ns, "fill-b"),
             60, "the fillers gone", why)
    serve_uids = {p["metadata"]["uid"] for p in serve_pods()}

    admin.create(stateful_set(ns, "big", 1, placed(template("big", 6), ns)))
    floor = min_available or 0
    if min_available == 2:
        for _ in range(30):
            assert {p["metadata"]["uid"] for p in serve_pods()} == serve_uids, why()
            assert not bound_pods(admin, ns, "big"), why()
            time.sleep(1.0)
        assert not [e for e in admin.list(EVENT, ns) if e.get("reason") == "Evicted"], why()
        return

    def moved_and_placed() -> bool:
        assert len(serve_pods()) >= floor, f"serving pods below minAvailable {floor}\n{why()}"
        return bool(running(admin, ns, "big", 1)) and len(serve_pods()) == 2
    wait_for(moved_and_placed, 180, "a serving pod moved and the big job running", why)
    now_uids = {p["metadata"]["uid"] for p in serve_pods()}
    assert len(now_uids - serve_uids) == 1, why()        # one made again by its ReplicaSet
    moved = next(p for p in serve_pods() if p["metadata"]["uid"] not in serve_uids)
    app = moved["metadata"]["labels"]["app"]
    stayed = "serve-b" if app == "serve-a" else "serve-a"
    assert moved["spec"]["nodeName"] == where[stayed], why()       # the room held for it
    big_node = bound_pods(admin, ns, "big")[0]["spec"]["nodeName"]
    assert big_node == where[app], why()                            # the room the move freed
    messages = [e.get("message", "") for e in admin.list(EVENT, ns) if e.get("reason") == "Evicted"]
    assert any("moved by consolidation" in m for m in messages), why()
    assert not stuck_terminating(admin, ns, time.time()), why()
