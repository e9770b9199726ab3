"""On a real kube-apiserver, with kaisched and the PodGrouper installed as
shipped (their own ServiceAccounts and RBAC): the owner chains the operators of
2026 make, created as those operators would (minimal CRDs standing in for
theirs), are grouped by their top owner's rule and their gangs bind whole.

- Kubeflow Trainer v2: TrainJob -> JobSet -> Job -> pods; one gang of the
  JobSet's nodes, named after the TrainJob.
- LeaderWorkerSet: LWS -> leader StatefulSet -> leader pods, each leader pod ->
  its workers' StatefulSet -> worker pods; one gang per group, so with room for
  one group it binds whole and the other waits whole.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from kaisched.api import labels as L
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.kube import KubeCluster
from podgrouper.groupers.spec import podgroup_name
from tests.builders.realapi import eventually, owned

OWNER = "pg"
Obj = dict[str, Any]
LWS = "leaderworkerset.sigs.k8s.io"


def pod(name: str, namespace: str, labels: dict[str, str], cpu: str,
        restart: str = "Never") -> Obj:
    """restart: Never for a Job's pods, Always for a StatefulSet's."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"schedulerName": "kaisched", "restartPolicy": restart,
                     "containers": [{"name": "main", "image": "registry.example.com/train:1",
                                     "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}


def template(labels: dict[str, str], cpu: str, restart: str = "Never") -> Obj:
    body = pod("x", "x", labels, cpu, restart)
    return {"metadata": {"labels": labels}, "spec": body["spec"]}


def bound(admin: KubeCluster, namespace: str, names: list[str]) -> dict[str, str] | None:
    """pod -> node once every one of them is bound, else None."""
    nodes = {}
    for name in names:
        found = admin.get(POD, namespace, name)
        node = (found or {}).get("spec", {}).get("nodeName")
        if not node:
            return None
        nodes[name] = node
    return nodes


def waited(check: Callable[[], Any], what: str, admin: KubeCluster, namespace: str,
           components: Any) -> Any:
    """eventually(check); on failure the pods, PodGroups and component logs say why."""
    try:
        return eventually(check, timeout=60, what=what)
    except AssertionError as exc:
        pods = {p["metadata"]["name"]: (p["spec"].get("nodeName"),
                                         (p["metadata"].get("annotations") or {}).get(
                                             L.POD_GROUP_ANNOTATION))
                for p in admin.list(POD, namespace)}
        groups = {g["metadata"]["name"]: (g["spec"], g.get("status"))
                  for g in admin.list(PODGROUP, namespace)}
        logs = "\n".join(line for line in components.logs().splitlines()
                         if namespace in line or line.startswith("---"))
        raise AssertionError(f"{exc}\npods {pods}\npodgroups {groups}\n{logs[-6000:]}") from None


def group_of(admin: KubeCluster, namespace: str, name: str) -> str | None:
    found = admin.get(POD, namespace, name) or {}
    return ((found.get("metadata") or {}).get("annotations") or {}).get(L.POD_GROUP_ANNOTATION)


def test_trainjob_chain_is_one_gang_named_after_the_trainjob(
        components: Any, admin: KubeCluster, minimal_crd: Callable[..., Any], namespace: str,
        fake_nodes: Callable[..., list[str]],
        make_owner_chain: Callable[[list[Obj], list[Obj]], list[Obj]]) -> None:
    minimal_crd("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
    minimal_crd("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
    fake_nodes(2, cpu="4")
    labels = {"jobset.sigs.k8s.io/jobset-name": "mnist",
              "jobset.sigs.k8s.io/replicatedjob-name": "node",
              "jobset.sigs.k8s.io/job-index": "0"}
    node_template = template({"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}, "3")
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "mnist", "namespace": namespace},
                "spec": {"runtimeRef": {"name": "torch-distributed"},
                         "trainer": {"numNodes": 2}}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "mnist", "namespace": namespace},
              "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                  "parallelism": 2, "completions": 2, "completionMode": "Indexed",
                  "template": node_template}}}]}}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "mnist-node-0", "namespace": namespace, "labels": labels},
           "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed",
                    "template": node_template}}
    names = ["mnist-node-0-0-7xk2p", "mnist-node-0-1-m4q9z"]
    pods = [pod(name, namespace, {**labels, "batch.kubernetes.io/job-completion-index": str(i)},
                "3") for i, name in enumerate(names)]
    made = make_owner_chain([trainjob, jobset, job], pods)
    expected = podgroup_name(made[0])
    placed = waited(lambda: bound(admin, namespace, names), "both TrainJob pods bound",
                    admin, namespace, components)
    # 3 CPUs each on 4-CPU nodes: the gang of two spans both nodes.
    assert sorted(placed.values()) == sorted(set(placed.values()))
    group = admin.get(PODGROUP, namespace, expected)
    assert group is not None and group["spec"]["minMember"] == 2
    # two levels, as the JobSet declares them: the replicatedJob, then its Job of 2 pods
    assert group["spec"]["subGroups"] == [{"name": "node"},
                                          {"name": "node-0", "minMember": 2, "parent": "node"}]
    assert group["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert {group_of(admin, namespace, n) for n in names} == {expected}


def test_leaderworkerset_groups_are_gangs_of_their_own(
        components: Any, admin: KubeCluster, minimal_crd: Callable[..., Any], namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    minimal_crd("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets")
    # Room for one group of 3 pods (2 CPUs each), not for two.
    fake_nodes(2, cpu="4")
    base = {f"{LWS}/name": "vllm"}
    lws = admin.create({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "vllm", "namespace": namespace},
        "spec": {"replicas": 2, "startupPolicy": "LeaderCreated",
                 "leaderWorkerTemplate": {"size": 3,
                                          "leaderTemplate": template({}, "2", "Always"),
                                          "workerTemplate": template({}, "2", "Always")}}})
    lws.setdefault("apiVersion", "leaderworkerset.x-k8s.io/v1")
    lws.setdefault("kind", "LeaderWorkerSet")

    def statefulset(name: str, replicas: int, labels: dict[str, str]) -> Obj:
        return {"apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": name, "namespace": namespace, "labels": labels},
                "spec": {"replicas": replicas, "serviceName": "vllm",
                         "podManagementPolicy": "Parallel",
                         "selector": {"matchLabels": labels},
                         "template": template(labels, "2", "Always")}}

    def made(obj: Obj, owner: Obj) -> Obj:
        out = admin.create(owned(obj, owner))
        out.setdefault("apiVersion", obj["apiVersion"])
        out.setdefault("kind", obj["kind"])
        return out

    leaders = made(statefulset("vllm", 2, {**base, f"{LWS}/worker-index": "0"}), lws)
    groups: dict[int, list[str]] = {}
    for g in range(2):
        group = {**base, f"{LWS}/group-index": str(g)}
        leader = made(pod(f"vllm-{g}", namespace, {**group, f"{LWS}/worker-index": "0"}, "2",
                          "Always"), leaders)
        workers = made(statefulset(f"vllm-{g}", 2, group), leader)
        for w in (1, 2):
            made(pod(f"vllm-{g}-{w}", namespace, {**group, f"{LWS}/worker-index": str(w)}, "2",
                     "Always"), workers)
        groups[g] = [f"vllm-{g}", f"vllm-{g}-1", f"vllm-{g}-2"]
    names = {g: podgroup_name(lws, str(g)) for g in groups}

    def one_group_bound() -> list[int] | None:
        whole = [g for g, pods in groups.items() if bound(admin, namespace, pods)]
        return whole if len(whole) == 1 else None

    (first,) = waited(one_group_bound, "one LWS group bound whole", admin, namespace, components)
    other = 1 - first
    time.sleep(3)       # a few scheduling periods: the other group stays whole, unbound
    assert not any(((admin.get(POD, namespace, p) or {}).get("spec") or {}).get("nodeName")
                   for p in groups[other])
    for g, pods in groups.items():
        group = admin.get(PODGROUP, namespace, names[g])
        assert group is not None and group["spec"]["minMember"] == 3
        assert group["spec"]["subGroups"] == [{"name": "leader", "minMember": 1},
                                              {"name": "worker", "minMember": 2}]
        assert group["metadata"]["ownerReferences"][0]["uid"] == lws["metadata"]["uid"]
        assert {group_of(admin, namespace, p) for p in pods} == {names[g]}
