"""Every grouper on its own: a raw owner dict in, a GroupSpec out, no cluster."""
from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from podgrouper.groupers import (
    GroupSpec,
    SubGroup,
    argo,
    builtin_groupers,
    group_owner,
    jobset,
    knative,
    kubeflow,
    lws,
    pick,
    ray,
    trainer,
    workload,
)
from podgrouper.groupers.spec import Lineage, in_role_order, named_object, owner_spec, podgroup_name

UID = "0f3c2a9e-6b1d-4c8e-9a57-4b1d0c3e2a10"


def owner(text: str) -> dict[str, Any]:
    obj = yaml.safe_load(text)
    obj.setdefault("metadata", {}).setdefault("uid", UID)
    return obj


def subgroups(spec: GroupSpec) -> list[tuple[str, int]]:
    return [(sg.name, sg.min_member) for sg in spec.subgroups]


def tree(spec: GroupSpec) -> list[tuple[str, ...]]:
    """Subgroups as (name, minimum, parent): a leaf's minimum is its pods
    ("4"), an inner subgroup's its children ("all", or "2 of")."""
    parents = {sg.parent for sg in spec.subgroups}
    return [(sg.name, ("all" if sg.min_sub_group is None else f"{sg.min_sub_group} of")
             if sg.name in parents else str(sg.min_member), sg.parent or "")
            for sg in spec.subgroups]


def first_owner(manifest: Any, name: str) -> dict[str, Any]:
    doc = manifest(name)[0]
    doc["metadata"]["uid"] = UID
    return doc


# -- the owners of the manifests, through the registry --------------------------
@pytest.mark.parametrize("file, min_member, roles", [
    ("pytorchjob.yaml", 4, [("master", 1), ("worker", 3)]),
    # elasticPolicy.minReplicas 2 is the whole gang, the master among them (as KAI reads it)
    ("pytorchjob-elastic.yaml", 2, [("master", 1), ("worker", 1)]),
    ("mpijob.yaml", 5, [("launcher", 1), ("worker", 4)]),
    ("tfjob.yaml", 7, [("chief", 1), ("ps", 2), ("worker", 4)]),
    # two levels: a subgroup per replicatedJob holding one per Job (see test_jobset_two_levels)
    ("jobset.yaml", 9, [("driver", 0), ("driver-0", 1), ("workers", 0), ("workers-0", 4),
                        ("workers-1", 4)]),
    ("raycluster.yaml", 3, [("head", 1), ("workergroup", 2)]),
    ("rayjob.yaml", 2, [("head", 1), ("small-group", 1)]),
    ("job.yaml", 1, []),
    ("cronjob.yaml", 1, []),
    ("deployment.yaml", 1, []),
    ("workflow.yaml", 1, []),
])
def test_manifest_owners(manifest: Any, file: str, min_member: int,
                         roles: list[tuple[str, int]]) -> None:
    doc = first_owner(manifest, file)
    spec = group_owner(doc, pick(builtin_groupers(), doc))
    assert (spec.min_member, subgroups(spec)) == (min_member, roles)
    assert spec.name == f"pg-{doc['metadata']['name']}-{UID[:8]}"
    assert spec.problems == spec.warnings == ()


def test_queue_comes_from_the_owner_label(manifest: Any) -> None:
    assert kubeflow.pytorch_job(first_owner(manifest, "pytorchjob.yaml")).queue == "team-a"
    assert workload.cron_job(first_owner(manifest, "cronjob.yaml")).queue == "nightly"
    assert workload.default_grouper(first_owner(manifest, "deployment.yaml")).queue is None


def test_kubeflow_scheduling_policy_gives_queue_and_priority(manifest: Any) -> None:
    spec = kubeflow.tf_job(first_owner(manifest, "tfjob.yaml"))
    assert (spec.queue, spec.priority_class_name) == ("research", "batch-high")


# -- Kubeflow -----------------------------------------------------------------
PYTORCH = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: pt}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 1}
    Worker: {replicas: 3}
"""


@pytest.mark.parametrize("extra, min_member, roles", [
    ({}, 4, [("master", 1), ("worker", 3)]),
    ({"elasticPolicy": {"minReplicas": 2, "maxReplicas": 3}}, 2, [("master", 1), ("worker", 1)]),
    ({"elasticPolicy": {"minReplicas": 0}}, 1, [("master", 1), ("worker", 0)]),
    ({"elasticPolicy": {"maxReplicas": 3}}, 4, [("master", 1), ("worker", 3)]),
    ({"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}, 2, [("master", 1), ("worker", 1)]),
    ({"runPolicy": {"schedulingPolicy": {"minAvailable": 6}}}, 6, [("master", 1), ("worker", 3)]),
    ({"elasticPolicy": {"minReplicas": 1},
      "runPolicy": {"schedulingPolicy": {"minAvailable": 4}}}, 4, [("master", 1), ("worker", 3)]),
])
def test_pytorch(extra: dict[str, Any], min_member: int, roles: list[tuple[str, int]]) -> None:
    obj = owner(PYTORCH)
    obj["spec"].update(extra)
    spec = kubeflow.pytorch_job(obj)
    assert (spec.min_member, subgroups(spec), spec.warnings) == (min_member, roles, ())


def test_pytorch_replicas_default_to_one_and_roles_are_ordered() -> None:
    obj = owner(PYTORCH)
    obj["spec"]["pytorchReplicaSpecs"] = {"Worker": {"replicas": 2}, "Master": {}}
    assert subgroups(kubeflow.pytorch_job(obj)) == [("master", 1), ("worker", 2)]


@pytest.mark.parametrize("policy, message", [
    ({"elasticPolicy": {"minReplicas": -1}}, "spec.elasticPolicy.minReplicas must not be negative"),
    ({"runPolicy": {"schedulingPolicy": {"minAvailable": 0}}}, "minAvailable must be an integer >= 1"),
    ({"runPolicy": {"schedulingPolicy": {"minAvailable": "many"}}}, "minAvailable must be an integer"),
])
def test_bad_overrides_are_warnings_and_ignored(policy: dict[str, Any], message: str) -> None:
    obj = owner(PYTORCH)
    obj["spec"].update(policy)
    spec = kubeflow.pytorch_job(obj)
    assert spec.min_member == 4 and spec.problems == ()
    assert len(spec.warnings) == 1 and message in spec.warnings[0]


MPI = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: pi}
spec:
  mpiReplicaSpecs:
    Worker: {replicas: 4}
    Launcher: {}
"""


def test_mpi_launcher_defaults_to_one_and_comes_first() -> None:
    spec = kubeflow.mpi_job(owner(MPI))
    assert (spec.min_member, subgroups(spec)) == (5, [("launcher", 1), ("worker", 4)])


def test_mpi_min_available_trims_workers_not_the_launcher() -> None:
    obj = owner(MPI)
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 3}}
    spec = kubeflow.mpi_job(obj)
    assert (spec.min_member, subgroups(spec)) == (3, [("launcher", 1), ("worker", 2)])


def test_mpi_worker_replicas_default_to_zero() -> None:
    obj = owner(MPI)
    obj["spec"]["mpiReplicaSpecs"]["Worker"] = {}
    assert kubeflow.mpi_job(obj).min_member == 1


def test_tf_roles_in_start_order() -> None:
    obj = owner("""
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: tf}
spec:
  tfReplicaSpecs:
    Evaluator: {replicas: 1}
    Worker: {replicas: 2}
    PS: {replicas: 1}
    Chief: {replicas: 1}
""")
    assert [n for n, _ in subgroups(kubeflow.tf_job(obj))] == ["chief", "ps", "worker", "evaluator"]


# -- malformed owners: the default grouping and a problem -------------------------
def _mutated(text: str, path: list[Any], value: Any) -> dict[str, Any]:
    obj = owner(text)
    target = obj
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return obj


DELETE = object()
RAY = """
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: rc}
spec:
  headGroupSpec: {rayStartParams: {}}
  workerGroupSpecs:
    - {groupName: small, replicas: 2, minReplicas: 2, maxReplicas: 4}
"""
JOBSET = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
  replicatedJobs:
    - name: workers
      replicas: 2
      template: {spec: {parallelism: 3, completions: 3}}
"""


@pytest.mark.parametrize("grouper, text, path, value, message", [
    (kubeflow.pytorch_job, PYTORCH, ["spec"], DELETE, "spec is missing"),
    (kubeflow.pytorch_job, PYTORCH, ["spec", "pytorchReplicaSpecs", "Worker", "replicas"], -1,
     "spec.pytorchReplicaSpecs.Worker.replicas must not be negative, got -1"),
    (kubeflow.pytorch_job, PYTORCH, ["spec", "pytorchReplicaSpecs", "Worker", "replicas"], "3",
     "spec.pytorchReplicaSpecs.Worker.replicas must be an integer, got '3'"),
    (kubeflow.pytorch_job, PYTORCH, ["spec", "pytorchReplicaSpecs", "Worker", "replicas"], 2.5,
     "must be an integer, got 2.5"),
    (kubeflow.pytorch_job, PYTORCH, ["spec", "pytorchReplicaSpecs"], {}, "has no replica types"),
    (kubeflow.pytorch_job, PYTORCH, ["spec", "pytorchReplicaSpecs", "Master"], [1],
     "spec.pytorchReplicaSpecs.Master must be an object"),
    (kubeflow.pytorch_job, PYTORCH, ["spec"], "oops", "spec must be an object, got str"),
    (kubeflow.mpi_job, MPI, ["spec", "mpiReplicaSpecs"], DELETE, "spec.mpiReplicaSpecs is missing"),
    (kubeflow.mpi_job, MPI, ["spec", "mpiReplicaSpecs", "Worker", "replicas"], True,
     "must be an integer, got True"),
    (jobset.jobset, JOBSET, ["spec", "replicatedJobs"], [], "spec.replicatedJobs must be a non-empty list"),
    (jobset.jobset, JOBSET, ["spec", "replicatedJobs", 0, "replicas"], -2,
     "spec.replicatedJobs[0].replicas must not be negative"),
    (jobset.jobset, JOBSET, ["spec", "replicatedJobs", 0, "name"], DELETE,
     "spec.replicatedJobs[0].name is missing"),
    (jobset.jobset, JOBSET, ["spec", "replicatedJobs", 0, "template", "spec", "parallelism"], "x",
     "parallelism must be an integer"),
    (ray.ray_cluster, RAY, ["spec", "headGroupSpec"], DELETE, "spec.headGroupSpec is missing"),
    (ray.ray_cluster, RAY, ["spec", "workerGroupSpecs", 0, "minReplicas"], -1,
     "spec.workerGroupSpecs[0].minReplicas must not be negative"),
    (ray.ray_cluster, RAY, ["spec", "workerGroupSpecs"], {"a": 1}, "workerGroupSpecs must be a list"),
])
def test_malformed_owner_gets_default_grouping(grouper: Any, text: str, path: list[Any],
                                               value: Any, message: str) -> None:
    spec = grouper(_mutated(text, path, value))
    assert (spec.min_member, spec.subgroups) == (1, ())
    assert any(message in p for p in spec.problems), spec.problems


def test_groupers_do_not_change_their_input() -> None:
    obj = owner(PYTORCH)
    before = copy.deepcopy(obj)
    group_owner(obj, kubeflow.pytorch_job)
    assert obj == before


# -- JobSet and Ray -----------------------------------------------------------------
@pytest.mark.parametrize("template, replicas, expected", [
    ({"spec": {"parallelism": 3, "completions": 3}}, 2, 6),
    ({"spec": {"parallelism": 4, "completions": 2}}, 2, 4),     # completions cap
    ({"spec": {"parallelism": 4}}, 1, 4),                       # no completions: no cap
    ({"spec": {}}, None, 1),                                    # all defaults
    ({}, 3, 3),
])
def test_jobset_sizes(template: dict[str, Any], replicas: int | None, expected: int) -> None:
    job: dict[str, Any] = {"name": "workers", "template": template}
    if replicas is not None:
        job["replicas"] = replicas
    obj = owner(JOBSET)
    obj["spec"]["replicatedJobs"] = [job]
    spec = jobset.jobset(obj)
    jobs = replicas or 1
    assert (spec.min_member, tree(spec)) == (expected, [("workers", "all", "")] + [
        (f"workers-{i}", str(expected // jobs), "workers") for i in range(jobs)])


def test_jobset_two_levels(manifest: Any) -> None:
    """As KAI v0.16 gives a JobSet: a subgroup per replicatedJob (the leading
    driver first), each holding one subgroup per Job replica with that Job's
    pods at once; a pod's subgroup is its Job's (replicatedJob and job index)."""
    docs = manifest("jobset.yaml")
    pod = next(d for d in docs if d["kind"] == "Pod"
               and d["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "workers")
    spec = jobset.jobset(docs[0], Lineage(pod, ()))
    assert tree(spec) == [("driver", "all", ""), ("driver-0", "1", "driver"),
                          ("workers", "all", ""), ("workers-0", "4", "workers"),
                          ("workers-1", "4", "workers")]
    index = pod["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]
    assert spec.pod_subgroup == f"workers-{index}"


@pytest.mark.parametrize("groups, min_member, roles", [
    ([{"groupName": "cpu", "minReplicas": 2}], 3, [("head", 1), ("cpu", 2)]),
    # each worker group its own subgroup with its own minimum
    ([{"groupName": "tpu", "minReplicas": 1, "numOfHosts": 4},
      {"groupName": "cpu", "minReplicas": 2}], 7, [("head", 1), ("tpu", 4), ("cpu", 2)]),
    ([{"groupName": "cpu", "replicas": 3}], 1, [("head", 1), ("cpu", 0)]),  # minReplicas default 0
    ([{"groupName": "cpu", "minReplicas": 2, "suspend": True}], 1, [("head", 1), ("cpu", 0)]),
    ([{"groupName": "GPU_Group", "minReplicas": 1}], 2, [("head", 1), ("gpu-group", 1)]),
    ([{"groupName": "head", "minReplicas": 1}], 2, [("head", 1), ("head-workers", 1)]),
    ([], 1, [("head", 1)]),
])
def test_ray_cluster_sizes(groups: list[dict[str, Any]], min_member: int,
                           roles: list[tuple[str, int]]) -> None:
    obj = owner(RAY)
    obj["spec"]["workerGroupSpecs"] = groups
    spec = ray.ray_cluster(obj)
    assert (spec.min_member, subgroups(spec)) == (min_member, roles)


def test_ray_job_on_an_existing_cluster_is_the_default_grouping() -> None:
    obj = owner("""
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: rj}
spec:
  entrypoint: python job.py
  clusterSelector: {ray.io/cluster: shared}
""")
    assert ray.ray_job(obj) == workload.default_grouper(obj)
    del obj["spec"]["clusterSelector"]
    assert ray.ray_job(obj).problems == ("spec.rayClusterSpec is missing",)


# -- the min-member annotation, for every kind ------------------------------------
@pytest.mark.parametrize("kind_text, value, min_member, warned", [
    (PYTORCH, "10", 10, False),
    (PYTORCH, "2", 2, False),
    (MPI, "3", 3, False),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec: {parallelism: 10}", "10", 10, False),
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}", "2", 2, False),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}", "3", 3, False),
    ("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}", "4", 4, False),
    (PYTORCH, "abc", 4, True),
    (PYTORCH, "0", 4, True),
    (PYTORCH, "-3", 4, True),
    (PYTORCH, "", 4, True),
], ids=["pytorch-10", "pytorch-2", "mpi-3", "job-10", "deployment-2", "pod-3", "unknown-4",
        "abc", "zero", "negative", "empty"])
def test_min_member_annotation(kind_text: str, value: str, min_member: int, warned: bool) -> None:
    obj = owner(kind_text)
    obj["metadata"]["annotations"] = {"kaisched.io/min-member": value}
    spec = group_owner(obj, pick(builtin_groupers(), obj))
    assert spec.min_member == min_member
    assert bool(spec.warnings) is warned
    if warned:
        assert "kaisched.io/min-member" in spec.warnings[0] and repr(value) in spec.warnings[0]


def test_annotation_below_subgroup_minima_trims_them_in_role_order() -> None:
    obj = owner(PYTORCH)
    obj["metadata"]["annotations"] = {"kaisched.io/min-member": "3"}
    spec = group_owner(obj, kubeflow.pytorch_job)
    assert subgroups(spec) == [("master", 1), ("worker", 2)]


# -- registry, names, ordering --------------------------------------------------
@pytest.mark.parametrize("api_version, kind, expected", [
    ("kubeflow.org/v1", "PyTorchJob", kubeflow.pytorch_job),
    ("kubeflow.org/v1", "TFJob", kubeflow.tf_job),
    ("kubeflow.org/v2beta1", "MPIJob", kubeflow.mpi_job),
    ("kubeflow.org/v1", "MPIJob", kubeflow.mpi_job),
    ("jobset.x-k8s.io/v1alpha2", "JobSet", jobset.jobset),
    ("ray.io/v1", "RayCluster", ray.ray_cluster),
    ("ray.io/v1", "RayJob", ray.ray_job),
    ("batch/v1", "Job", workload.job),
    ("batch/v1", "CronJob", workload.cron_job),
    ("apps/v1", "StatefulSet", workload.default_grouper),
    ("v1", "Pod", workload.default_grouper),
    ("argoproj.io/v1alpha1", "Workflow", argo.workflow),
    ("trainer.kubeflow.org/v1alpha1", "TrainJob", trainer.train_job),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", lws.leader_worker_set),
    ("kubeflow.org/v1", "XGBoostJob", kubeflow.xgboost_job),
    ("kubeflow.org/v1", "JAXJob", kubeflow.jax_job),
    ("kubeflow.org/v1", "PaddleJob", kubeflow.paddle_job),
    ("ray.io/v1", "RayService", ray.ray_service),
    ("serving.knative.dev/v1", "Service", knative.knative),
    ("serving.knative.dev/v1", "Revision", knative.knative),
    ("example.com/v1", "Workflow", workload.default_grouper),
    ("example.com/v1", "PyTorchJob", workload.default_grouper),
])
def test_pick(api_version: str, kind: str, expected: Any) -> None:
    assert pick(builtin_groupers(), {"apiVersion": api_version, "kind": kind}) is expected


def test_registry_is_a_fresh_dict_each_time() -> None:
    registry = builtin_groupers()
    registry.clear()
    assert builtin_groupers()


@pytest.mark.parametrize("name, uid, expected", [
    ("train", UID, "pg-train-0f3c2a9e"),
    ("train", "", "pg-train"),
    ("x" * 300, UID, "pg-" + "x" * 241 + "-0f3c2a9e"),
])
def test_podgroup_name(name: str, uid: str, expected: str) -> None:
    result = podgroup_name({"metadata": {"name": name, "uid": uid}})
    assert result == expected and len(result) <= 253


def test_role_order_puts_leading_roles_first_and_keeps_the_rest() -> None:
    roles = [SubGroup(n, 1) for n in ("trainer", "evaluator", "driver", "launcher")]
    assert [sg.name for sg in in_role_order(roles)] == ["launcher", "driver", "trainer", "evaluator"]


def test_the_validation_heads_say_each_problem_once_in_order() -> None:
    """The helpers the groupers open with: a spec they must have, a list's item
    that must be an object with a name."""
    spec, problems = owner_spec({"kind": "JobSet", "spec": "oops"})
    assert spec == {} and problems == ["spec must be an object, got str"]
    problems = []
    assert named_object({"name": "a", "replicas": 2}, "spec.jobs[0]", problems) == \
        ({"name": "a", "replicas": 2}, "a")
    assert named_object("oops", "spec.jobs[1]", problems) is None
    assert named_object({"name": ""}, "spec.jobs[2]", problems) is None
    assert problems == ["spec.jobs[1] must be an object", "spec.jobs[2].name is missing"]
