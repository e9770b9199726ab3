"""The kinds users run in 2026, each from a real-shaped manifest (the owner as its
operator's examples write it, the objects in between and the pods its controller
makes): the pure grouper on the pod's lineage, then the controller on a cluster."""
from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from podgrouper.groupers import (
    Lineage,
    builtin_groupers,
    group_owner,
    jobset,
    knative,
    kubeflow,
    lws,
    pick,
    ray,
    trainer,
)
from podgrouper.groupers.spec import podgroup_name

Obj = dict[str, Any]


def lineage_of(docs: list[Obj], pod_name: str) -> tuple[Obj, Lineage]:
    """The top owner and the lineage of a pod of the manifest, walked as the controller does."""
    by_uid = {d["metadata"]["uid"]: d for d in docs if d["metadata"].get("uid")}
    pod = next(d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"] == pod_name)
    owners, current = [], pod
    while current["metadata"].get("ownerReferences"):
        current = by_uid[current["metadata"]["ownerReferences"][0]["uid"]]
        owners.append(current)
    return (owners[-1] if owners else pod), Lineage(pod, tuple(owners))


def grouped(docs: list[Obj], pod_name: str) -> Any:
    top, lineage = lineage_of(docs, pod_name)
    return group_owner(top, pick(builtin_groupers(), top), lineage)


def roles(spec: Any) -> list[tuple[str, int]]:
    return [(sg.name, sg.min_member) for sg in spec.subgroups]


def named(docs: list[Obj], kind: str, name: str | None = None) -> Obj:
    return next(d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name))


# -- the pure groupers on each manifest -------------------------------------------
@pytest.mark.parametrize("file, pod, by_kind, by_name, min_member, subgroups", [
    # the JobSet's two levels: the replicatedJob, then its Job (one, of 2 pods)
    ("trainjob.yaml", "pytorch-mnist-node-0-1-m4q9z", "TrainJob", None, 2,
     [("node", 0), ("node-0", 2)]),
    ("leaderworkerset.yaml", "vllm-0", "LeaderWorkerSet", "0", 3, [("leader", 1), ("worker", 2)]),
    ("leaderworkerset.yaml", "vllm-1-2", "LeaderWorkerSet", "1", 3, [("leader", 1), ("worker", 2)]),
    ("xgboostjob.yaml", "xgboost-dist-iris-test-train-worker-1", "XGBoostJob", None, 3,
     [("master", 1), ("worker", 2)]),
    ("jaxjob.yaml", "jaxjob-simple-worker-0", "JAXJob", None, 2, [("worker", 2)]),
    ("paddlejob.yaml", "paddle-simple-cpu-worker-1", "PaddleJob", None, 2, [("worker", 2)]),
    ("rayservice.yaml", "rayservice-sample-raycluster-6mj28-gpu-group-worker-k2p9d", "RayCluster",
     None, 3, [("head", 1), ("gpu-group", 2)]),
    ("knative-service.yaml", "hello-00001-deployment-5d4f8b7c9-x2kq4", "Revision", None, 2, []),
    ("jobset-inorder.yaml", "startup-in-order-leader-0-0-vq8rt", "JobSet", "leader", 1,
     [("leader", 0), ("leader-0", 1)]),
    ("mpijob-wait.yaml", "pi-wait-worker-1", "MPIJob", None, 2, [("launcher", 0), ("worker", 2)]),
    ("argo-workflow.yaml", "steps-8fq2d-print-message-2781563408", "Pod",
     "steps-8fq2d-print-message-2781563408", 1, []),
])
def test_manifest_gangs(manifest: Callable[[str], list[Obj]], file: str, pod: str, by_kind: str,
                        by_name: str | None, min_member: int, subgroups: list[tuple[str, int]]) -> None:
    docs = manifest(file)
    spec = grouped(docs, pod)
    if by_kind == "Pod" or by_name is None:
        assert spec.name == podgroup_name(named(docs, by_kind, by_name if by_kind == "Pod" else None))
    else:
        assert spec.name == podgroup_name(named(docs, by_kind), by_name)
    assert (spec.min_member, roles(spec)) == (min_member, subgroups)
    assert spec.problems == spec.warnings == ()


def test_trainjob_is_named_and_queued_by_the_trainjob(manifest: Callable[[str], list[Obj]]) -> None:
    docs = manifest("trainjob.yaml")
    spec = grouped(docs, "pytorch-mnist-node-0-0-7xk2p")
    assert spec.name == podgroup_name(named(docs, "TrainJob")) and spec.queue == "team-a"


def test_trainjob_initializers_start_before_the_nodes(manifest: Callable[[str], list[Obj]]) -> None:
    """A runtime with dataset and model initializers (dependsOn): the nodes are
    their own gang, created once the initializers completed."""
    docs = manifest("trainjob.yaml")
    top, lineage = lineage_of(docs, "pytorch-mnist-node-0-0-7xk2p")
    child = copy.deepcopy(lineage.owners[1])
    node = child["spec"]["replicatedJobs"][0]
    node["dependsOn"] = [{"name": "model-initializer", "status": "Complete"}]
    def init(name: str, after: str | None) -> dict:
        return {"name": name, "template": {"spec": {"template": {"spec": {}}}},
                **({"dependsOn": [{"name": after, "status": "Complete"}]} if after else {})}

    child["spec"]["replicatedJobs"] = [init("dataset-initializer", None),
                                       init("model-initializer", "dataset-initializer"), node]
    owners = (lineage.owners[0], child, top)
    spec = trainer.train_job(top, Lineage(lineage.pod, owners))
    assert (spec.name, spec.min_member, roles(spec)) == (podgroup_name(top, "node"), 2,
                                                         [("node", 0), ("node-0", 2)])
    first = {**lineage.pod, "metadata": {**lineage.pod["metadata"], "labels": {
        "jobset.sigs.k8s.io/replicatedjob-name": "dataset-initializer"}}}
    spec = trainer.train_job(top, Lineage(first, owners))
    assert (spec.name, spec.min_member) == (podgroup_name(top), 1)


def test_trainjob_without_its_jobset_is_its_num_nodes(manifest: Callable[[str], list[Obj]]) -> None:
    top = named(manifest("trainjob.yaml"), "TrainJob")
    assert trainer.train_job(top).min_member == 2


# -- JobSet start order -------------------------------------------------------------
JOBSET = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
          "metadata": {"name": "js", "uid": "11111111-2222-3333-4444-555555555555"},
          "spec": {"replicatedJobs": [
              {"name": "driver", "template": {"spec": {"parallelism": 1}}},
              {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 3}}}]}}


def on_pod(role: str) -> Lineage:
    return Lineage({"metadata": {"labels": {"jobset.sigs.k8s.io/replicatedjob-name": role}}})


@pytest.mark.parametrize("change, role, part, min_member", [
    ({}, "workers", "", 7),                                              # AnyOrder: one gang
    ({"startupPolicy": {"startupPolicyOrder": "AnyOrder"}}, "driver", "", 7),
    ({"startupPolicy": {"startupPolicyOrder": "InOrder"}}, "driver", "driver", 1),
    ({"startupPolicy": {"startupPolicyOrder": "InOrder"}}, "workers", "workers", 6),
])
def test_jobset_start_order(change: Obj, role: str, part: str, min_member: int) -> None:
    obj = copy.deepcopy(JOBSET)
    obj["spec"].update(change)
    spec = jobset.jobset(obj, on_pod(role))
    assert (spec.name, spec.min_member) == (podgroup_name(obj, part), min_member)


def test_jobset_depends_on_makes_its_own_gang() -> None:
    obj = copy.deepcopy(JOBSET)
    obj["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "driver", "status": "Ready"}]
    assert jobset.jobset(obj, on_pod("driver")).min_member == 1
    spec = jobset.jobset(obj, on_pod("workers"))
    assert (spec.name, spec.min_member) == (podgroup_name(obj, "workers"), 6)


@pytest.mark.parametrize("change, pod_role, message", [
    ({"startupPolicy": {"startupPolicyOrder": "Sometimes"}}, "driver", "startupPolicyOrder must be"),
    ({"startupPolicy": "InOrder"}, "driver", "spec.startupPolicy must be an object"),
    ({"startupPolicy": {"startupPolicyOrder": "InOrder"}}, None, "the pod has no label"),
    ({"startupPolicy": {"startupPolicyOrder": "InOrder"}}, "other", "names no replicatedJob"),
])
def test_jobset_start_order_problems(change: Obj, pod_role: str | None, message: str) -> None:
    obj = copy.deepcopy(JOBSET)
    obj["spec"].update(change)
    spec = jobset.jobset(obj, on_pod(pod_role) if pod_role else Lineage())
    assert (spec.min_member, spec.name) == (1, podgroup_name(obj))
    assert any(message in p for p in spec.problems), spec.problems


# -- MPI launcher creation policy ---------------------------------------------------------
def test_mpi_wait_for_workers_with_min_available(manifest: Callable[[str], list[Obj]]) -> None:
    obj = named(manifest("mpijob-wait.yaml"), "MPIJob")
    obj["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 1}
    spec = kubeflow.mpi_job(obj)
    assert (spec.min_member, roles(spec)) == (1, [("launcher", 0), ("worker", 1)])
    obj["spec"]["launcherCreationPolicy"] = "Later"
    assert "launcherCreationPolicy must be one of" in kubeflow.mpi_job(obj).problems[0]


# -- LeaderWorkerSet ----------------------------------------------------------------------
def lws_pod(group: str | None, worker: str = "0") -> Lineage:
    labels = {"leaderworkerset.sigs.k8s.io/worker-index": worker}
    if group is not None:
        labels["leaderworkerset.sigs.k8s.io/group-index"] = group
    return Lineage({"metadata": {"labels": labels}})


def test_lws_leader_ready_starts_the_leader_alone(manifest: Callable[[str], list[Obj]]) -> None:
    """LeaderReady: the LWS controller makes the workers once the leader is
    ready. Until the leader has a node its group's gang is the leader alone;
    from then on (a worker, or the placed leader, grouped) the same PodGroup
    needs the whole group, `size` pods, leader included -- as KAI reads it."""
    obj = named(manifest("leaderworkerset.yaml"), "LeaderWorkerSet")
    obj["spec"]["startupPolicy"] = "LeaderReady"
    leader = lws.leader_worker_set(obj, lws_pod("1"))
    worker = lws.leader_worker_set(obj, lws_pod("1", "2"))
    placed = lws_pod("1")
    placed = Lineage({**placed.pod, "spec": {"nodeName": "gpu-a"}})
    assert (leader.name, leader.min_member, roles(leader)) == (podgroup_name(obj, "1"), 1,
                                                               [("leader", 1)])
    for later in (worker, lws.leader_worker_set(obj, placed)):
        assert (later.name, later.min_member, roles(later)) == (
            podgroup_name(obj, "1"), 3, [("leader", 1), ("worker", 2)])
    assert (leader.pod_subgroup, worker.pod_subgroup) == ("leader", "worker")


@pytest.mark.parametrize("size, every, kind, leaves, pods", [
    # LWS numbers subgroups of subGroupSize; the leader in the first
    (8, 4, None, [("subgroup-0", 4), ("subgroup-1", 4)], ["subgroup-0", "subgroup-1", "subgroup-1"]),
    # the leader is the one pod beyond whole subgroups: it joins the first
    (9, 4, None, [("subgroup-0", 5), ("subgroup-1", 4)], ["subgroup-0", "subgroup-0", "subgroup-1"]),
    # LeaderExcluded: the leader on its own, the workers in subgroups
    (9, 4, "LeaderExcluded", [("leader", 1), ("subgroup-0", 4), ("subgroup-1", 4)],
     ["leader", "subgroup-0", "subgroup-1"]),
])
def test_lws_subgroup_policy_gives_the_groups_subgroups(
        manifest: Callable[[str], list[Obj]], size: int, every: int, kind: str | None,
        leaves: list[tuple[str, int]], pods: list[str]) -> None:
    obj = named(manifest("leaderworkerset.yaml"), "LeaderWorkerSet")
    template = obj["spec"]["leaderWorkerTemplate"]
    template["size"] = size
    template["subGroupPolicy"] = {"subGroupSize": every,
                                  **({"subGroupPolicyType": kind} if kind else {})}
    specs = [lws.leader_worker_set(obj, lws_pod("0", str(i))) for i in (0, 4, 5)]
    assert [(s.min_member, roles(s)) for s in specs] == [(size, leaves)] * 3
    assert [s.pod_subgroup for s in specs] == pods


@pytest.mark.parametrize("path, value, pod, message", [
    (["leaderWorkerTemplate", "size"], 0, "0", "size must be at least 1"),
    (["leaderWorkerTemplate", "size"], "4", "0", "size must be an integer"),
    (["startupPolicy"], "WhenReady", "0", "startupPolicy must be one of"),
    (["replicas"], -1, "0", "spec.replicas must not be negative"),
    (["replicas"], 2, None, "group-index must be a group index"),
])
def test_lws_problems(manifest: Callable[[str], list[Obj]], path: list[str], value: Any,
                      pod: str | None, message: str) -> None:
    obj = named(manifest("leaderworkerset.yaml"), "LeaderWorkerSet")
    target = obj["spec"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    spec = lws.leader_worker_set(obj, lws_pod(pod))
    assert (spec.name, spec.min_member) == (podgroup_name(obj), 1)
    assert any(message in p for p in spec.problems), spec.problems


# -- Training operator kinds --------------------------------------------------------------
def test_paddle_elastic_and_min_available(manifest: Callable[[str], list[Obj]]) -> None:
    obj = named(manifest("paddlejob.yaml"), "PaddleJob")
    obj["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2}
    assert (kubeflow.paddle_job(obj).min_member, roles(kubeflow.paddle_job(obj))) == (1, [("worker", 1)])
    obj = named(manifest("xgboostjob.yaml"), "XGBoostJob")
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 2, "queue": "q", "priorityClass": "p"}}
    spec = kubeflow.xgboost_job(obj)
    assert (spec.min_member, spec.queue, spec.priority_class_name) == (2, "q", "p")


@pytest.mark.parametrize("grouper, field", [
    (kubeflow.xgboost_job, "xgbReplicaSpecs"), (kubeflow.jax_job, "jaxReplicaSpecs"),
    (kubeflow.paddle_job, "paddleReplicaSpecs")])
def test_training_kinds_without_replica_specs_are_problems(grouper: Any, field: str) -> None:
    spec = grouper({"apiVersion": "kubeflow.org/v1", "kind": "X", "metadata": {"name": "x"},
                    "spec": {field: {"Worker": {"replicas": -2}}}})
    assert spec.min_member == 1 and f"spec.{field}.Worker.replicas must not be negative" in spec.problems[0]


# -- Ray ----------------------------------------------------------------------------------
def test_rayservice_without_its_cluster_reads_the_config(manifest: Callable[[str], list[Obj]]) -> None:
    svc = named(manifest("rayservice.yaml"), "RayService")
    spec = ray.ray_service(svc)
    assert (spec.name, spec.min_member, roles(spec)) == (
        podgroup_name(svc), 3, [("head", 1), ("gpu-group", 2)])
    del svc["spec"]["rayClusterConfig"]
    assert ray.ray_service(svc).problems == ("spec.rayClusterConfig is missing",)


# -- Knative ------------------------------------------------------------------------------
@pytest.mark.parametrize("annotations, min_member, problem", [
    ({"autoscaling.knative.dev/min-scale": "3"}, 3, None),
    ({"autoscaling.knative.dev/minScale": "2"}, 2, None),
    ({"autoscaling.knative.dev/min-scale": "0"}, 1, None),
    ({}, 1, None),
    ({"autoscaling.knative.dev/min-scale": "two"}, 1, "must be a non-negative integer"),
])
def test_knative_min_scale(manifest: Callable[[str], list[Obj]], annotations: Obj, min_member: int,
                           problem: str | None) -> None:
    docs = manifest("knative-service.yaml")
    top, lineage = lineage_of(docs, "hello-00001-deployment-5d4f8b7c9-x2kq4")
    lineage.owners[2]["metadata"]["annotations"] = annotations          # the Revision
    spec = knative.knative(top, lineage)
    assert spec.min_member == min_member
    assert (problem is None) == (spec.problems == ())


def test_knative_service_alone_reads_its_template(manifest: Callable[[str], list[Obj]]) -> None:
    svc = named(manifest("knative-service.yaml"), "Service")
    assert (knative.knative(svc).name, knative.knative(svc).min_member) == (podgroup_name(svc), 2)


# -- queue and priority: labels on the pod or any owner, the nearest first ----------------
def test_priority_and_queue_labels_nearest_first(manifest: Callable[[str], list[Obj]]) -> None:
    docs = manifest("rayservice.yaml")
    named(docs, "RayService")["metadata"]["labels"] = {
        "ray.io/priority-class-name": "serving", "kaisched.io/queue": "inference"}
    pod = "rayservice-sample-raycluster-6mj28-head-q7v2x"
    spec = grouped(docs, pod)
    assert (spec.priority_class_name, spec.queue) == ("serving", "inference")
    named(docs, "RayCluster")["metadata"]["labels"]["kaisched.io/priority-class"] = "urgent"
    assert grouped(docs, pod).priority_class_name == "urgent"
    named(docs, "Pod", pod)["metadata"]["labels"]["kaisched.io/queue"] = "mine"
    assert grouped(docs, pod).queue == "mine"


# -- on a cluster: the controller makes these PodGroups and names them on the pods -------------
@pytest.mark.parametrize("file, groups", [
    ("trainjob.yaml", {("TrainJob", ""): (2, {"pytorch-mnist-node-0-0-7xk2p": "node-0",
                                             "pytorch-mnist-node-0-1-m4q9z": "node-0"})}),
    ("leaderworkerset.yaml", {
        ("LeaderWorkerSet", "0"): (3, {"vllm-0": "leader", "vllm-0-1": "worker", "vllm-0-2": "worker"}),
        ("LeaderWorkerSet", "1"): (3, {"vllm-1": "leader", "vllm-1-1": "worker", "vllm-1-2": "worker"})}),
    ("rayservice.yaml", {("RayCluster", ""): (3, {
        "rayservice-sample-raycluster-6mj28-head-q7v2x": "head",
        "rayservice-sample-raycluster-6mj28-gpu-group-worker-t8m4w": "gpu-group"})}),
    ("knative-service.yaml", {("Revision", ""): (2, {"hello-00001-deployment-5d4f8b7c9-x2kq4": None,
                                                     "hello-00001-deployment-5d4f8b7c9-p9wz7": None})}),
    ("jobset-inorder.yaml", {("JobSet", "leader"): (1, {"startup-in-order-leader-0-0-vq8rt": "leader-0"})}),
    ("mpijob-wait.yaml", {("MPIJob", ""): (2, {"pi-wait-worker-0": "worker", "pi-wait-worker-1": "worker"})}),
    ("xgboostjob.yaml", {("XGBoostJob", ""): (3, {"xgboost-dist-iris-test-train-master-0": "master"})}),
    ("jaxjob.yaml", {("JAXJob", ""): (2, {"jaxjob-simple-worker-1": "worker"})}),
    ("paddlejob.yaml", {("PaddleJob", ""): (2, {"paddle-simple-cpu-worker-0": "worker"})}),
])
def test_controller_makes_the_gangs(kit: Any, file: str,
                                    groups: dict[tuple[str, str], tuple[int, dict[str, str | None]]]) -> None:
    made = kit.load(file)
    kit.sync()
    names = set()
    for (kind, part), (min_member, pods) in groups.items():
        owner = next(o for o in made if o["kind"] == kind)
        name = podgroup_name(owner, part)
        names.add(name)
        group = kit.podgroup(name)
        assert group["spec"]["minMember"] == min_member
        assert group["metadata"]["ownerReferences"][0]["uid"] == made[0]["metadata"]["uid"]
        for pod, role in pods.items():
            assert (kit.group_of(pod), kit.subgroup_of(pod)) == (name, role)
    assert {g["metadata"]["name"] for g in kit.podgroups()} == names
    assert kit.events() == []


def test_argo_steps_each_their_own_gang_in_the_workflow_queue(kit: Any) -> None:
    made = kit.load("argo-workflow.yaml")
    kit.sync()
    groups = kit.podgroups()
    assert len(groups) == 2
    for pod in made[1:]:
        group = kit.podgroup(podgroup_name(kit.get_pod(pod["metadata"]["name"])))
        assert group["spec"] == {"minMember": 1, "queue": "team-a"}
        assert group["metadata"]["ownerReferences"][0]["kind"] == "Workflow"


def test_bad_owner_spec_is_an_event_and_the_default_grouping(kit: Any) -> None:
    docs = [d for d in kit.load("leaderworkerset.yaml")]
    lws_obj = docs[0]
    kit.patch(lws_obj, {"spec": {"leaderWorkerTemplate": {"size": "three"}}})
    kit.sync()
    assert [g["metadata"]["name"] for g in kit.podgroups()] == [podgroup_name(lws_obj)]
    assert kit.podgroup(podgroup_name(lws_obj))["spec"]["minMember"] == 1
    events = kit.events("vllm-0-1")
    assert events and events[0]["reason"] == "PodGroupDefaulted"
    assert "spec.leaderWorkerTemplate.size must be an integer" in events[0]["message"]
