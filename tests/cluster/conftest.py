"""Tests on a living cluster: kube-controller-manager and hollow kubelets beside the API
server, so that what kaisched evicts is terminated by a kubelet and made again by its
controller, PodDisruptionBudgets get their status from the disruption controller, the garbage
collector deletes what an owner leaves, and a node can fail.

Every test under tests/cluster/ is marked `cluster` and skipped unless
KAISCHED_TEST_CLUSTER_KUBECONFIG names the admin kubeconfig of such a cluster and hollow
nodes (label `k8s-up/hollow=true`) are Ready in it. It is not KAISCHED_TEST_KUBECONFIG: the
realapi tests expect no controllers. CI has no such cluster. On a loopback one:

    K8S_KCM_CONTROLLERS='*,-nodeipam' bash k8s-up.sh --controllers --hollow-nodes 8
    KAISCHED_TEST_CLUSTER_KUBECONFIG=/tmp/k8s/admin.kubeconfig \\
        python -m pytest -m cluster tests/cluster

(node lifecycle must run for the node-failure test: it marks a stopped node NotReady.) The
node-failure test stops a hollow node with the script that brought the cluster up, named by
KAISCHED_TEST_K8S_UP (skipped without it), and starts it again at its end.

The fixtures:

- `admin` (session): a KubeCluster with the admin credentials (it plays the users and the
  operator); `admin_api` the kubernetes client's ApiClient with them.
- `installed` (session): config/ as `kubectl kustomize` renders it, applied, with the two
  Deployments at 0 replicas (the hollow nodes cannot run this checkout: the components run
  as processes, below); removed at the end but for the namespace.
- `components` (session): `kaisched run` (the shipped config with consolidation among its
  actions, under schedulerName `cl-kaisched`, no leader election) and `podgrouper run`
  (grouping that scheduler's pods), each with a token of its own ServiceAccount.
- `namespace` (function): a namespace of its own, deleted afterwards (the namespace
  controller deletes what it holds).
- `nodes` (function): `nodes(count)` labels that many Ready hollow nodes
  `kaisched.io/cluster-test=<namespace>` (the test's pods select it) and returns their
  names; the label is removed afterwards.
- `priorities` (session): PriorityClasses `cl-low` (10) and `cl-high` (1000).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest
from kubernetes import client as k8s_client

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import NAMESPACE, PRIORITY_CLASS
from kaisched.cluster.kube import KubeCluster
from tests.builders.cluster import ENV, SCHEDULER, hollow_nodes, label_nodes
from tests.builders.realapi import (
    CONFIG,
    Components,
    Process,
    admin_api_client,
    admin_cluster,
    admin_kubeconfig_from,
    apply,
    as_account,
    delete_quietly,
    free_port,
    install,
    render,
    scheduler_process,
    shipped_config,
    slug,
    uninstall,
)

ACTIONS = ["allocate", "consolidation", "backfill", "reclaim", "preempt", "stalegangeviction"]


def _why_not() -> str:
    """Why the tests cannot run here ('' when they can)."""
    path = os.environ.get(ENV)
    if not path:
        return f"{ENV} names no living cluster"
    try:
        client = KubeCluster(path, timeout=10.0, connect_timeout=5.0)
        try:
            found = hollow_nodes(client)
        finally:
            client.close()
    except Exception as exc:        # noqa: BLE001 -- any failure means: no cluster to test
        return f"the cluster of {ENV} does not answer: {exc}"
    return "" if found else "no Ready hollow nodes (k8s-up.sh --hollow-nodes N)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if here in Path(str(item.fspath)).parents]
    if not mine:
        return
    reason = _why_not()
    for item in mine:
        item.add_marker(pytest.mark.cluster)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def admin_kubeconfig() -> str:
    return admin_kubeconfig_from(ENV, "living cluster")


@pytest.fixture(scope="session")
def admin(admin_kubeconfig: str) -> Iterator[KubeCluster]:
    yield from admin_cluster(admin_kubeconfig)


@pytest.fixture(scope="session")
def admin_api(admin_kubeconfig: str) -> Iterator[k8s_client.ApiClient]:
    yield from admin_api_client(admin_kubeconfig)


@pytest.fixture(scope="session")
def installed(admin: KubeCluster) -> Iterator[list[Obj]]:
    objects = render(CONFIG)
    for obj in objects:
        if obj["kind"] == "Deployment":
            obj["spec"]["replicas"] = 0
    install(admin, objects)
    yield objects
    uninstall(admin, objects)


@pytest.fixture(scope="session")
def priorities(admin: KubeCluster) -> Iterator[None]:
    made = []
    for name, value in (("cl-low", 10), ("cl-high", 1000)):
        apply(admin, {"apiVersion": PRIORITY_CLASS.api_version, "kind": "PriorityClass",
                      "metadata": {"name": name}, "value": value})
        made.append(name)
    yield
    for name in made:
        delete_quietly(admin, PRIORITY_CLASS, "", name)


@pytest.fixture(scope="session")
def components(admin_kubeconfig: str, installed: list[Obj], admin_api: k8s_client.ApiClient,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Components]:
    folder = tmp_path_factory.mktemp("cluster-components")
    configs = {account: as_account(admin_kubeconfig, admin_api, folder, account)
               for account in ("kaisched", "kaisched-podgrouper")}
    scheduler = scheduler_process(configs["kaisched"],
                                  shipped_config(folder, SCHEDULER, actions=ACTIONS), folder,
                                  "cl-scheduler", "--no-leader-elect")
    podgrouper = Process("podgrouper", "podgrouper.cli", [
        "run", "--kubeconfig", str(configs["kaisched-podgrouper"]), "--no-leader-elect",
        "--scheduler-name", SCHEDULER, "--metrics-port", str(free_port())],
        folder / "podgrouper.log", None)
    both = Components(scheduler, podgrouper)
    both.start()
    yield both
    both.stop()
    sys.stderr.write(both.logs()[-20000:])


@pytest.fixture
def namespace(request: pytest.FixtureRequest, admin: KubeCluster) -> Iterator[str]:
    suffix = format(int(time.time() * 10) % 36 ** 5, "x")
    name = f"{slug(f'cl-{request.node.name}')[:50].rstrip('-')}-{suffix}"
    admin.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": name, "labels": {"kaisched.io/test": "cluster"}}})
    yield name
    delete_quietly(admin, NAMESPACE, "", name)
    deadline = time.monotonic() + 60
    while admin.get(NAMESPACE, "", name) is not None and time.monotonic() < deadline:
        time.sleep(1.0)


@pytest.fixture
def nodes(admin: KubeCluster, namespace: str) -> Iterator[Callable[[int], list[str]]]:
    taken: list[str] = []

    def take(count: int) -> list[str]:
        free = [n for n in hollow_nodes(admin) if n not in taken]
        if len(free) < count:
            pytest.skip(f"needs {count} Ready hollow nodes, has {len(free)}")
        chosen = free[:count]
        label_nodes(admin, chosen, namespace)
        taken.extend(chosen)
        return chosen

    yield take
    label_nodes(admin, taken, None)
