"""For the tests on a living cluster (tests/cluster/, whose conftest.py holds the fixtures
and says how to run them): the workloads the controllers own, what their pods show, and the
operator's part in a node failure (k8s-up.sh stops a hollow node's kubelet; the test taints
the node out of service, then starts it again)."""
from __future__ import annotations

import datetime
import os
import subprocess
import time
from typing import Any, Callable

import attrs
import pytest

from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import NODE, POD, QUEUE, Kind
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import NotFoundError
from tests.builders.realapi import Components, describe

ENV = "KAISCHED_TEST_CLUSTER_KUBECONFIG"
# The script that brought the cluster up, for --stop-node and starting a node again.
# The script that brought the cluster up, which stops a hollow node and starts them again.
K8S_UP = os.environ.get("KAISCHED_TEST_K8S_UP", "")
HOLLOW = "k8s-up/hollow"
SCHEDULER = "cl-kaisched"
GPU = "nvidia.com/gpu"
GRACE = 5                           # the pods' grace period: the kubelet ends them quickly
STUCK = GRACE + 30                  # Terminating longer than this is stuck
STATEFUL_SET = Kind("apps/v1", "StatefulSet", "statefulsets")
DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
JOB = Kind("batch/v1", "Job", "jobs")
PDB = Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets")
OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
                  "effect": "NoExecute"}
# Each test keeps its pods to a few hollow nodes it labels so.
PLACE = "kaisched.io/cluster-test"


def hollow_nodes(client: KubeCluster) -> list[str]:
    """The Ready hollow nodes, by name."""
    return sorted(n["metadata"]["name"] for n in client.list(NODE)
                  if (n["metadata"].get("labels") or {}).get(HOLLOW) == "true" and ready(n))


def ready(node: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or ())


def wait_for(check: Callable[[], Any], timeout: float, what: str, why: Callable[[], str]
             = lambda: "") -> Any:
    """check()'s first truthy value; fails after timeout, saying what and why."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}\n{why()}")
        time.sleep(0.5)
    return result


def template(app: str, gpus: int = 0, priority: str = "", queue: str = "",
             restart: str = "Always", annotations: dict[str, str] | None = None) -> Obj:
    """A pod template for the test's scheduler: a pause container, little cpu (a hollow node
    has 1), its GPUs, kept to the nodes labelled PLACE=app's namespace by the caller."""
    requests: dict[str, str] = {"cpu": "10m", "memory": "16Mi"}
    limits: dict[str, str] = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    labels = {"app": app, **({"kaisched.io/queue": queue} if queue else {})}
    spec: Obj = {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": GRACE,
                 "restartPolicy": restart,
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": requests,
                                               **({"limits": limits} if limits else {})}}]}
    if priority:
        spec["priorityClassName"] = priority
    return {"metadata": {"labels": labels, **({"annotations": annotations} if annotations else {})},
            "spec": spec}


def placed(tmpl: Obj, place: str) -> Obj:
    """The template kept to the nodes the test labelled PLACE=place."""
    spec = {**tmpl["spec"], "nodeSelector": {PLACE: place}}
    return {**tmpl, "spec": spec}


def stateful_set(namespace: str, name: str, replicas: int, tmpl: Obj,
                 min_member: int | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if min_member is not None:
        meta["annotations"] = {"kaisched.io/min-member": str(min_member)}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"app": tmpl["metadata"]["labels"]["app"]}},
                     "template": tmpl}}


def deployment(namespace: str, name: str, replicas: int, tmpl: Obj) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas,
                     "selector": {"matchLabels": {"app": tmpl["metadata"]["labels"]["app"]}},
                     "template": tmpl}}


def job(namespace: str, name: str, parallelism: int, tmpl: Obj,
        min_member: int | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace}
    if min_member is not None:
        meta["annotations"] = {"kaisched.io/min-member": str(min_member)}
    body = {**tmpl, "spec": {**tmpl["spec"], "restartPolicy": "Never"}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": parallelism, "completions": parallelism,
                     "backoffLimit": 0, "template": body}}


def pdb(namespace: str, name: str, app: str, min_available: int) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}}


def queue(name: str, quota: int, weight: float) -> Obj:
    """A Queue with a GPU quota and an over-quota weight."""
    return {"apiVersion": QUEUE.api_version, "kind": "Queue", "metadata": {"name": name},
            "spec": {"resources": {GPU: {"quota": quota, "overQuotaWeight": weight}}}}


@attrs.frozen
class Outranking:
    """How a job outranks a low one: preempt, by a higher priority in the same queue; or
    reclaim, by its queue owed every GPU while the low one's queue borrows (no quota, no
    share of what is left over). Queue names empty: the default queue."""
    low_queue: str
    high_queue: str
    high_priority: str

    @classmethod
    def made(cls, client: KubeCluster, cause: str, namespace: str) -> "Outranking":
        if cause == "preempt":
            return cls("", "", "cl-high")
        suffix = namespace.rsplit("-", 1)[1]       # a label value: the namespace is too long
        low, high = f"cl-{suffix}-borrow", f"cl-{suffix}-owner"
        client.create(queue(low, 0, 0.0))
        client.create(queue(high, 10_000, 1.0))
        return cls(low, high, "cl-low")

    def remove(self, client: KubeCluster) -> None:
        for name in (self.low_queue, self.high_queue):
            if name:
                delete_quietly(client, QUEUE, "", name)


def explainer(client: KubeCluster, namespace: str, components: Components) -> Callable[[], str]:
    """What a failed wait prints: the namespace's objects and the scheduler's latest log."""
    return lambda: f"{describe(client, namespace)}\n{components.scheduler.log()[-4000:]}"


def pods_of(client: KubeCluster, namespace: str, app: str) -> list[Obj]:
    return [p for p in client.list(POD, namespace)
            if (p["metadata"].get("labels") or {}).get("app") == app]


def bound(pod: Obj) -> bool:
    """On a node and not on its way out (a Terminating pod holds nothing for its gang)."""
    return bool(pod["spec"].get("nodeName")) and not pod["metadata"].get("deletionTimestamp")


def bound_pods(client: KubeCluster, namespace: str, app: str) -> list[Obj]:
    return [p for p in pods_of(client, namespace, app) if bound(p)]


def running(client: KubeCluster, namespace: str, app: str, count: int) -> list[Obj] | None:
    """The app's pods once count of them are bound and Running, else None."""
    found = [p for p in bound_pods(client, namespace, app)
             if (p.get("status") or {}).get("phase") == "Running"]
    return found if len(found) >= count else None


def stuck_terminating(client: KubeCluster, namespace: str, now: float) -> list[str]:
    """Pods Terminating longer than their grace period + 30 s (deletionTimestamp is the
    delete's time plus the grace period)."""
    out = []
    for pod in client.list(POD, namespace):
        deleted = pod["metadata"].get("deletionTimestamp")
        if deleted and now - _epoch(deleted) > 30:
            out.append(pod["metadata"]["name"])
    return out


def _epoch(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class GangWatch:
    """Samples a gang's bound pods and keeps the longest stretch it was partly bound
    (0 < bound < minimum), as each test's guard that no gang is left half placed."""

    def __init__(self, client: KubeCluster, namespace: str, app: str, minimum: int) -> None:
        self.client, self.namespace, self.app, self.minimum = client, namespace, app, minimum
        self.since: float | None = None
        self.longest = 0.0

    def sample(self) -> int:
        count = len(bound_pods(self.client, self.namespace, self.app))
        now = time.monotonic()
        if 0 < count < self.minimum:
            self.since = self.since if self.since is not None else now
            self.longest = max(self.longest, now - self.since)
        else:
            self.since = None
        return count


def label_nodes(client: KubeCluster, names: list[str], value: str | None) -> None:
    """PLACE=value on the nodes (None: the label removed)."""
    for name in names:
        client.patch(NODE, "", name, {"metadata": {"labels": {PLACE: value}}})


def taint_out_of_service(client: KubeCluster, name: str, on: bool) -> None:
    """The operator's non-graceful node shutdown taint, put on or taken off."""
    node = client.get(NODE, "", name) or {}
    taints = [t for t in (node.get("spec") or {}).get("taints") or ()
              if t.get("key") != OUT_OF_SERVICE["key"]]
    client.patch(NODE, "", name, {"spec": {"taints": [*taints, OUT_OF_SERVICE] if on else
                                           (taints or None)}})


def k8s_up(*args: str) -> None:
    if not K8S_UP:
        pytest.skip("KAISCHED_TEST_K8S_UP names no script to stop and start hollow nodes with")
    done = subprocess.run(["bash", K8S_UP, *args], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, f"k8s-up.sh {' '.join(args)}: {done.stderr[-2000:]}"


def delete_quietly(client: KubeCluster, kind: Kind, namespace: str, name: str,
                   propagation: str = "Background") -> None:
    try:
        client.delete(kind, namespace, name, propagation=propagation)
    except NotFoundError:
        pass
