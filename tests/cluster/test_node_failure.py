"""A node fails on a living cluster: its kubelet is stopped (k8s-up.sh --stop-node), node
lifecycle marks it NotReady, and the test, as an operator, taints it
`node.kubernetes.io/out-of-service=nodeshutdown:NoExecute` (non-graceful node shutdown). Its
pods are deleted, their StatefulSet makes them again, and kaisched places the gang whole again
on the spare node -- nothing on the dead one. At the end the node is started again and
untainted."""
from __future__ import annotations

import time
from typing import Callable

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import NODE
from kaisched.cluster.kube import KubeCluster
from tests.builders.cluster import (
    HOLLOW,
    GangWatch,
    explainer,
    hollow_nodes,
    k8s_up,
    placed,
    pods_of,
    ready,
    running,
    stateful_set,
    stuck_terminating,
    taint_out_of_service,
    template,
    wait_for,
)
from tests.builders.realapi import Components


def test_a_failed_nodes_gang_is_made_again_and_placed_whole_elsewhere(
        admin: KubeCluster, components: Components, namespace: str,
        nodes: Callable[[int], list[str]]) -> None:
    ns = namespace
    three = nodes(3)
    every = len([n for n in admin.list(NODE) if (n["metadata"].get("labels") or {}).get(HOLLOW)])

    why = explainer(admin, ns, components)

    admin.create(stateful_set(ns, "g", 2, placed(template("g", gpus=8), ns), min_member=2))
    first = wait_for(lambda: running(admin, ns, "g", 2), 120, "the gang running", why)
    used = {p["spec"]["nodeName"] for p in first}
    dead = sorted(used)[0]
    spare = next(n for n in three if n not in used)
    lost = {p["metadata"]["uid"] for p in first if p["spec"]["nodeName"] == dead}
    gang = GangWatch(admin, ns, "g", 2)
    k8s_up("--stop-node", dead)
    try:
        wait_for(lambda: not ready(admin.get(NODE, "", dead) or {}), 150,
                 f"node lifecycle marking {dead} NotReady", why)
        taint_out_of_service(admin, dead, on=True)

        def whole_again() -> list[Obj] | None:
            gang.sample()
            pods = running(admin, ns, "g", 2)
            return pods if pods and not {p["metadata"]["uid"] for p in pods} & lost else None
        again = wait_for(whole_again, 180, "the lost pod made again and the gang whole", why)
        assert {p["spec"]["nodeName"] for p in again} == used - {dead} | {spare}, why()
        assert all(p["spec"].get("nodeName") != dead for p in pods_of(admin, ns, "g")), why()
        assert not stuck_terminating(admin, ns, time.time()), why()
    finally:
        k8s_up("--hollow-nodes", str(every))
        taint_out_of_service(admin, dead, on=False)
        wait_for(lambda: dead in hollow_nodes(admin), 120, f"{dead} Ready again")
