"""Tests against a real kube-apiserver: kaisched installed as shipped.

Every test under tests/realapi/ is marked `realapi` and skipped unless
KAISCHED_TEST_KUBECONFIG names an admin kubeconfig of a real cluster (a local
kube-apiserver + etcd on loopback is enough: no kubelet or controller-manager
is needed, Nodes are objects the tests create and pods never start). Run them
with

    KAISCHED_TEST_KUBECONFIG=/path/to/admin.kubeconfig python -m pytest -m realapi tests/realapi

The fixtures, for any module of this directory:

- `admin` (session): a KubeCluster with the admin credentials, for the test's own reads
  and writes (it plays the user and the operators); `admin_api` the kubernetes client's
  ApiClient with the same credentials, for what KubeCluster does not do.
- `installed` (session): `kubectl kustomize config/` (our own reading of the kustomization
  where kubectl is absent) applied through the client, the CRDs established; removed at the
  end of the session (all but the namespace: without a controller-manager a deleted
  namespace stays Terminating). Returns the rendered objects.
- `components` (module): `kaisched run` and `podgrouper run` started as subprocesses of
  this checkout, each with a kubeconfig holding a token minted for its own ServiceAccount
  with the TokenRequest API (so the shipped RBAC is what they may do) and the shipped
  config/scheduler.yaml. `components.scheduler.url("/metrics")`, `.log()`, `.stop()`
  (SIGTERM, returns the exit code and the seconds it took), `.start()`; stopped at the
  end of the module.
- `namespace` (function): a namespace `rt-<owner>-<test name>-<suffix>`; its pods are
  deleted at once afterwards (no kubelet confirms a graceful delete), then the namespace.
- `fake_nodes` (function): `fake_nodes(count, cpu=..., memory=..., extra=...)` creates
  Nodes labelled `kaisched.io/test=<owner>` (deleted afterwards) and returns their names.
  Create Nodes only through it: it also sets the `no-shard` label (see NO_SHARD), and
  give every pod a name (no generateName), for the same server's sake.
- `minimal_crd` (session): `minimal_crd(group, version, kind, plural)` serves a kind with
  an open schema (x-kubernetes-preserve-unknown-fields), as an operator's CRD would, so a
  test can create its objects; removed at the end of the session.
- `describe(admin, namespace)`: the namespace's pods, PodGroups and Events as text,
  for a failing assertion's message.
- `shipped_config(folder, scheduler_name, **settings)`, `as_account(admin_kubeconfig,
  admin_api, folder)`, `scheduler_process(kubeconfig, config, folder, identity, *flags)`:
  a `kaisched run` of this checkout as the shipped ServiceAccount, with the shipped config
  under a scheduler name of its own (and the test's settings), not started -- for a test
  that runs its own scheduler (a config of its own, replicas, restarts).
- `make_gang(admin, namespace, scheduler, name, size, **requests)` and
  `all_bound(admin, namespace, pods)`: a gang of pods for a scheduler, and whether all
  of them are bound.
- `make_owner_chain` (function): plays a controller: `make_owner_chain([top, middle, ...],
  pods)` creates each object owned (controller ownerReference) by the one before, then the
  pods owned by the last one, and returns what the server made of them.

The fixtures are here; the helpers (`describe`, `shipped_config`, `as_account`,
`scheduler_process`, `make_gang`, `all_bound`, `eventually`...) are in tests/builders/realapi.py,
where test modules import them from.

<owner> is the module's OWNER attribute (a helper's or feature's name), else "realapi":
the names of everything a module creates carry it, so tests of several people on one
shared server never touch each other's objects.
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
from kaisched.cluster.kinds import NAMESPACE, NODE, PODGROUP, Kind
from kaisched.cluster.kube import KubeCluster
from tests.builders.realapi import (
    CONFIG,
    CRD,
    ENV,
    NO_SHARD,
    Components,
    Process,
    admin_api_client,
    admin_cluster,
    admin_kubeconfig_from,
    apply,
    as_account,
    delete_quietly,
    established,
    eventually,
    free_port,
    gone,
    install,
    owned,
    owner_of,
    render,
    scheduler_identity,
    scheduler_process,
    slug,
    uninstall,
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realapi)
            if not os.environ.get(ENV):
                item.add_marker(pytest.mark.skip(reason=f"{ENV} names no real cluster"))


@pytest.fixture(scope="session")
def admin_kubeconfig() -> str:
    return admin_kubeconfig_from(ENV, "real cluster")


@pytest.fixture(scope="session")
def admin(admin_kubeconfig: str) -> Iterator[KubeCluster]:
    yield from admin_cluster(admin_kubeconfig)


@pytest.fixture(scope="session")
def admin_api(admin_kubeconfig: str) -> Iterator[k8s_client.ApiClient]:
    yield from admin_api_client(admin_kubeconfig)


@pytest.fixture(scope="session")
def installed(admin: KubeCluster) -> Iterator[list[Obj]]:
    objects = render(CONFIG)
    install(admin, objects)
    yield objects
    uninstall(admin, objects)


@pytest.fixture(scope="session")
def minimal_crd(admin: KubeCluster) -> Iterator[Callable[..., Kind]]:
    made: list[str] = []

    def serve(group: str, version: str, kind: str, plural: str, namespaced: bool = True) -> Kind:
        name = f"{plural}.{group}"
        apply(admin, {
            "apiVersion": CRD.api_version, "kind": CRD.kind,
            "metadata": {"name": name, "labels": {"kaisched.io/test": "realapi"}},
            "spec": {"group": group, "scope": "Namespaced" if namespaced else "Cluster",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                               "listKind": f"{kind}List"},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}})
        if name not in made:
            made.append(name)
        eventually(lambda: established(admin, name), what=f"CRD {name} established")
        return Kind(f"{group}/{version}", kind, plural, namespaced)

    yield serve
    for name in made:
        delete_quietly(admin, CRD, "", name)


@pytest.fixture(scope="module")
def components(request: pytest.FixtureRequest, admin_kubeconfig: str, installed: list[Obj],
               admin_api: k8s_client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Components]:
    folder = tmp_path_factory.mktemp("components")
    configs = {account: as_account(admin_kubeconfig, admin_api, folder, account)
               for account in ("kaisched", "kaisched-podgrouper")}
    grouper_port = free_port()
    scheduler = scheduler_process(configs["kaisched"], CONFIG / "scheduler.yaml", folder,
                                  scheduler_identity(request))
    podgrouper = Process("podgrouper", "podgrouper.cli", [
        "run", "--kubeconfig", str(configs["kaisched-podgrouper"]),
        "--metrics-port", str(grouper_port), "--identity", f"rt-{owner_of(request)}-podgrouper"],
        folder / "podgrouper.log", grouper_port)
    both = Components(scheduler, podgrouper)
    both.start()
    yield both
    both.stop()
    if request.session.testsfailed:
        sys.stderr.write(both.logs()[-20000:])


@pytest.fixture
def namespace(request: pytest.FixtureRequest, admin: KubeCluster,
              admin_api: k8s_client.ApiClient) -> Iterator[str]:
    # Unique: without a controller-manager a deleted namespace stays Terminating.
    suffix = format(int(time.time() * 10) % 36 ** 5, "x")
    name = f"{slug(f'rt-{owner_of(request)}-{request.node.name}')[:55].rstrip('-')}-{suffix}"
    admin.create({"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": name, "labels": {"kaisched.io/test": owner_of(request)}}})
    yield name
    # Pods go at once (no kubelet confirms a graceful delete); then the namespace.
    k8s_client.CoreV1Api(admin_api).delete_collection_namespaced_pod(name, grace_period_seconds=0)
    for group in admin.list(PODGROUP, name):
        delete_quietly(admin, PODGROUP, name, group["metadata"]["name"])
    delete_quietly(admin, NAMESPACE, "", name)


@pytest.fixture
def fake_nodes(request: pytest.FixtureRequest, admin: KubeCluster) -> Iterator[Callable[..., list[str]]]:
    made: list[str] = []
    owner = owner_of(request)

    def create(count: int, cpu: str = "8", memory: str = "32Gi", prefix: str = "node",
               extra: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> list[str]:
        names = []
        for _ in range(count):
            name = f"rt-{owner}-{prefix}-{len(made)}"
            allocatable = {"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})}
            delete_quietly(admin, NODE, "", name)      # a leftover of an interrupted run
            eventually(lambda: gone(admin, NODE, "", name), what=f"old node {name} gone")
            admin.create({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kaisched.io/test": owner,
                                                      "kubernetes.io/hostname": name,
                                                      NO_SHARD: "", **(labels or {})}},
                "spec": {},
                "status": {"capacity": allocatable, "allocatable": allocatable,
                           "conditions": [{"type": "Ready", "status": "True",
                                           "reason": "KubeletReady", "message": "fake node"}]}})
            made.append(name)
            names.append(name)
        return names

    yield create
    for name in made:
        delete_quietly(admin, NODE, "", name)


@pytest.fixture
def make_owner_chain(admin: KubeCluster) -> Callable[[list[Obj], list[Obj]], list[Obj]]:
    def make(chain: list[Obj], pods: list[Obj]) -> list[Obj]:
        made: list[Obj] = []
        owner: Obj | None = None
        for obj in chain:
            owner = admin.create(owned(obj, owner))
            owner.setdefault("apiVersion", obj["apiVersion"])
            owner.setdefault("kind", obj["kind"])
            made.append(owner)
        for pod in pods:
            made.append(admin.create(owned(pod, owner)))
        return made

    return make
