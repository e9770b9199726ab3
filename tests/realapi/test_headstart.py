"""A head start on a real kube-apiserver: `kaisched run --head-start-pods 1`
(the kaisched ServiceAccount's token, a Lease of its own) finds a running gang
already bound and a gang waiting. While it tries for the Lease it only lists;
leading, it binds the waiting gang over the first lists with the running gang
counted, then converts everything, and its first cycle binds nothing twice.

The scheduler runs under a name of its own, so other schedulers on the same
server leave this test's pods alone (theirs are other schedulers' pods here).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from kubernetes import client as k8s_client

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import LEASE, NODE, POD, PODGROUP, Kind
from kaisched.cluster.kube import KubeCluster
from tests.builders.realapi import (
    SYSTEM,
    all_bound,
    as_account,
    delete_quietly,
    describe,
    eventually,
    make_gang,
    scheduler_process,
    shipped_config,
)

OWNER = "headstart"
PATIENCE = 120.0


def running_gang(admin: KubeCluster, namespace: str, scheduler: str, nodes: list[str]) -> list[str]:
    """A gang of 3 whose pods were bound already (one cpu each), over the nodes."""
    admin.create({"apiVersion": PODGROUP.api_version, "kind": "PodGroup",
                  "metadata": {"name": "running", "namespace": namespace},
                  "spec": {"minMember": 3}})
    pods = [f"running-{i}" for i in range(3)]
    for i, pod in enumerate(pods):
        admin.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": pod, "namespace": namespace,
                                   "annotations": {"kaisched.io/pod-group": "running"}},
                      "spec": {"schedulerName": scheduler, "nodeName": nodes[i % len(nodes)],
                               "containers": [{"name": "main", "image": "trainer:1",
                                               "resources": {"requests": {"cpu": "1"}}}]}})
    return pods


def cached(admin: KubeCluster, namespace: str, pods: list[str], groups: list[str],
           nodes: list[str]) -> bool:
    """Whether the watch caches the first lists read hold the pods, the PodGroups and the
    nodes (with their room)."""
    def names(kind: Kind, where: str | None) -> dict[str, Obj]:
        return {o["metadata"]["name"]: o
                for o in admin.list_with_version(kind, where, cached=True)[0]}

    listed_nodes = names(NODE, None)
    return set(pods) <= names(POD, namespace).keys() \
        and set(groups) <= names(PODGROUP, namespace).keys() \
        and all(((listed_nodes.get(n) or {}).get("status") or {}).get("allocatable")
                for n in nodes)


def test_a_first_leader_binds_the_waiting_gang_before_converting_the_running_one(
        admin: KubeCluster, admin_api: k8s_client.ApiClient,
        admin_kubeconfig: str, installed: list[Obj], namespace: str,
        fake_nodes: Callable[..., list[str]], tmp_path: Path) -> None:
    suffix = namespace.rsplit("-", 1)[1]
    scheduler = f"headstart-{suffix}"
    lease = f"headstart-{suffix}"
    nodes = fake_nodes(2, cpu="4")
    running = running_gang(admin, namespace, scheduler, nodes)
    waiting = make_gang(admin, namespace, scheduler, "waiting", 2, cpu="1")
    # The scheduler's first lists come from the API server's watch caches, one
    # a kind, each of which may trail a write by a moment: all is there first.
    eventually(lambda: cached(admin, namespace, running + waiting, ["running", "waiting"], nodes),
               PATIENCE, "the nodes, PodGroups and pods in the watch caches")
    config = shipped_config(tmp_path, scheduler)
    kubeconfig = as_account(admin_kubeconfig, admin_api, tmp_path)
    process = scheduler_process(kubeconfig, config, tmp_path, f"{scheduler}-0",
                                "--lease-name", lease, "--head-start-pods", "1")
    try:
        process.start()
        eventually(lambda: all_bound(admin, namespace, waiting), PATIENCE,
                   "the waiting gang is bound")
        log = eventually(lambda: "by its head start" in (text := process.log()) and text,
                         PATIENCE, "the first cycle ends")
        assert "head start: 2 pods bound by allocate" in log, log[-4000:]
        assert "2 by its head start" in log, log[-4000:]
        assert " ERROR " not in log and " failed: " not in log, log[-4000:]     # no bind twice
        placed = {p: (admin.get(POD, namespace, p) or {})["spec"]["nodeName"] for p in running}
        assert placed == {p: nodes[i % 2] for i, p in enumerate(running)}
    except AssertionError:
        print(describe(admin, namespace))
        print(process.log()[-20000:])
        raise
    finally:
        process.stop()
        delete_quietly(admin, LEASE, SYSTEM, lease)
