"""The PodGrouper controller on the memory backend: real-shaped owners and pods in,
PodGroups, pod annotations and subgroup labels out."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from kaisched.cluster.kinds import POD, PODGROUP

Obj = dict[str, Any]


def by_name(objs: list[Obj]) -> dict[str, Obj]:
    return {o["metadata"]["name"]: o for o in objs}


def test_pytorchjob_master_and_workers(kit: Any, name_of: Callable[[Obj], str]) -> None:
    made = by_name(kit.load("pytorchjob.yaml"))
    job = made["pytorch-simple"]
    assert kit.sync() == 5                         # 1 PodGroup + 4 pods
    group = kit.podgroup(name_of(job), "kubeflow")
    assert group["spec"] == {
        "minMember": 4, "queue": "team-a", "priorityClassName": "train",
        "subGroups": [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 3}],
    }
    assert group["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytorch-simple",
        "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    assert len(kit.podgroups()) == 1
    for pod, role in [("pytorch-simple-master-0", "master"), ("pytorch-simple-worker-0", "worker"),
                      ("pytorch-simple-worker-1", "worker"), ("pytorch-simple-worker-2", "worker")]:
        assert (kit.group_of(pod, "kubeflow"), kit.subgroup_of(pod, "kubeflow")) == \
            (name_of(job), role)
    assert kit.events() == []


def test_elastic_pytorchjob(kit: Any, name_of: Callable[[Obj], str]) -> None:
    job = kit.load("pytorchjob-elastic.yaml")[0]
    kit.sync()
    spec = kit.podgroup(name_of(job))["spec"]
    # minReplicas 2 counts the master too: master 1, worker 1 (KAI's reading)
    assert spec["minMember"] == 2
    assert spec["subGroups"] == [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 1}]


def test_mpijob_launcher_job_and_workers_share_one_podgroup(kit: Any, name_of: Callable[[Obj], str]) -> None:
    mpi = kit.load("mpijob.yaml")[0]
    kit.sync()
    assert [g["metadata"]["name"] for g in kit.podgroups()] == [name_of(mpi)]
    assert kit.podgroup(name_of(mpi))["spec"]["minMember"] == 5
    assert kit.subgroup_of("pi-launcher-x7bq2") == "launcher"
    assert {kit.group_of(f"pi-worker-{i}") for i in range(4)} == {name_of(mpi)}
    assert kit.subgroup_of("pi-worker-3") == "worker"


def test_mpijob_min_available(kit: Any, name_of: Callable[[Obj], str]) -> None:
    docs = kit.load("mpijob.yaml")
    kit.patch(docs[0], {"spec": {"runPolicy": {"schedulingPolicy": {"minAvailable": 3}}}})
    kit.sync()
    spec = kit.podgroup(name_of(docs[0]))["spec"]
    assert spec["minMember"] == 3
    assert spec["subGroups"] == [{"name": "launcher", "minMember": 1}, {"name": "worker", "minMember": 2}]


def test_job_with_parallelism_is_a_gang_of_one(kit: Any, name_of: Callable[[Obj], str]) -> None:
    job = kit.load("job.yaml")[0]
    kit.sync()
    assert [g["metadata"]["name"] for g in kit.podgroups()] == [name_of(job)]
    assert kit.podgroup(name_of(job))["spec"] == {"minMember": 1, "queue": "default"}
    assert kit.group_of("render-frames-8x2kd") == kit.group_of("render-frames-q9w7c") == name_of(job)
    assert kit.subgroup_of("render-frames-8x2kd") is None


def test_job_min_member_annotation(kit: Any, manifest: Callable[[str], list[Obj]],
                                   name_of: Callable[[Obj], str]) -> None:
    job_doc, *pods = manifest("job.yaml")
    job_doc["metadata"]["annotations"] = {"kaisched.io/min-member": "10"}
    job = kit.create(job_doc)
    for pod in pods:
        kit.create(pod)
    kit.sync()
    assert kit.podgroup(name_of(job))["spec"]["minMember"] == 10
    assert kit.events() == []


def test_deployment_through_replicaset(kit: Any, name_of: Callable[[Obj], str]) -> None:
    made = by_name(kit.load("deployment.yaml"))
    deploy = made["inference"]
    kit.sync()
    group = kit.podgroup(name_of(deploy), "serving")
    assert group["metadata"]["name"] == f"pg-inference-{deploy['metadata']['uid'][:8]}"
    assert group["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert group["spec"] == {"minMember": 1, "queue": "serving"}
    assert len(kit.podgroups()) == 1


@pytest.mark.parametrize("file, owner_index, min_member, pod_roles", [
    # a pod's subgroup is its Job's: the replicatedJob's subgroup holds one per Job
    ("jobset.yaml", 0, 9, {"paralleljobs-driver-0-0-b5l8f": "driver-0",
                           "paralleljobs-workers-0-0-h2x9q": "workers-0"}),
    ("raycluster.yaml", 0, 3, {"raycluster-kuberay-head-v8m2k": "head",
                               "raycluster-kuberay-workergroup-worker-7qz4x": "workergroup"}),
    ("rayjob.yaml", 0, 2, {"rayjob-sample-raycluster-6mj28-head-9fx2c": "head"}),
    ("tfjob.yaml", 0, 7, {"dist-mnist-for-e2e-test-chief-0": "chief",
                          "dist-mnist-for-e2e-test-ps-0": "ps"}),
])
def test_gang_kinds(kit: Any, name_of: Callable[[Obj], str], file: str, owner_index: int,
                    min_member: int, pod_roles: dict[str, str]) -> None:
    top = kit.load(file)[owner_index]
    kit.sync()
    assert [g["metadata"]["name"] for g in kit.podgroups()] == [name_of(top)]
    assert kit.podgroup(name_of(top))["spec"]["minMember"] == min_member
    for pod, role in pod_roles.items():
        assert (kit.group_of(pod), kit.subgroup_of(pod)) == (name_of(top), role)


def test_tfjob_scheduling_policy_queue_and_priority(kit: Any, name_of: Callable[[Obj], str]) -> None:
    job = kit.load("tfjob.yaml")[0]
    kit.sync()
    spec = kit.podgroup(name_of(job))["spec"]
    assert (spec["queue"], spec["priorityClassName"]) == ("research", "batch-high")
    assert [sg["name"] for sg in spec["subGroups"]] == ["chief", "ps", "worker"]


def test_cronjob_pods_are_grouped_per_job_run(kit: Any, name_of: Callable[[Obj], str]) -> None:
    made = by_name(kit.load("cronjob.yaml"))
    first = made["nightly-eval-29450520"]
    second = kit.create({"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": "nightly-eval-29451960", "namespace": "default",
                                      "ownerReferences": first["metadata"]["ownerReferences"]},
                         "spec": first["spec"]})
    kit.pod("nightly-eval-29451960-abcde", second)
    kit.sync()
    groups = sorted(g["metadata"]["name"] for g in kit.podgroups())
    assert groups == sorted([name_of(first), name_of(second)])
    group = kit.podgroup(name_of(first))
    assert group["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert group["spec"]["minMember"] == 1


def test_unknown_kind_gets_the_default_grouping(kit: Any, name_of: Callable[[Obj], str]) -> None:
    widget = kit.owner("example.com/v1", "Widget", "w", {"size": 8})
    kit.pod("w-0", widget)
    kit.sync()
    group = kit.podgroup(name_of(widget))
    assert group["spec"] == {"minMember": 1, "queue": "default"}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "Widget"


def test_workflow_step_is_its_own_gang_owned_by_the_workflow(
        kit: Any, name_of: Callable[[Obj], str]) -> None:
    workflow = kit.load("workflow.yaml")[0]
    kit.sync()
    pod = kit.get_pod("hello-world-4xk2p")
    group = kit.podgroup(name_of(pod))
    assert group["spec"] == {"minMember": 1, "queue": "default"}
    assert group["metadata"]["ownerReferences"][0]["uid"] == workflow["metadata"]["uid"]


def test_bare_pod_is_its_own_owner(kit: Any, name_of: Callable[[Obj], str]) -> None:
    pod = kit.pod("notebook", labels={"kaisched.io/queue": "interactive"},
                  annotations={"kaisched.io/min-member": "1"})
    kit.sync()
    group = kit.podgroup(name_of(pod))
    assert group["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1", "kind": "Pod", "name": "notebook", "uid": pod["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}
    assert group["spec"] == {"minMember": 1, "queue": "interactive"}


def test_pod_queue_label_wins_over_the_owner_label(kit: Any, name_of: Callable[[Obj], str]) -> None:
    job = kit.owner("batch/v1", "Job", "j", {"parallelism": 1})
    kit.patch(job, {"metadata": {"labels": {"kaisched.io/queue": "from-owner"}}})
    kit.pod("j-1", job, labels={"kaisched.io/queue": "from-pod"})
    kit.sync()
    assert kit.podgroup(name_of(job))["spec"]["queue"] == "from-pod"


def test_subgroup_label_set_by_the_author_is_kept(kit: Any) -> None:
    docs = kit.load("pytorchjob.yaml")[:1]
    kit.pod("extra", docs[0], namespace="kubeflow",
            labels={"training.kubeflow.org/replica-type": "worker", "kaisched.io/subgroup": "custom"})
    kit.sync()
    assert kit.subgroup_of("extra", "kubeflow") == "custom"


# -- scaling and user edits --------------------------------------------------------
def test_scaling_updates_min_member_and_keeps_the_users_queue(kit: Any,
                                                              name_of: Callable[[Obj], str]) -> None:
    job = kit.load("pytorchjob.yaml")[0]
    kit.sync()
    name = name_of(job)
    kit.cluster.patch(PODGROUP, "kubeflow", name, {"spec": {"queue": "team-b"}})
    assert kit.sync() == 0                                   # a user edit is not undone
    kit.patch(job, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 7}}}})
    assert kit.sync() == 1
    spec = kit.podgroup(name, "kubeflow")["spec"]
    assert spec["minMember"] == 8 and spec["queue"] == "team-b"
    assert spec["subGroups"] == [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 7}]
    kit.patch(job, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1}}}})
    kit.sync()
    assert kit.podgroup(name, "kubeflow")["spec"]["minMember"] == 2


def test_min_member_annotation_added_later_is_followed(kit: Any, name_of: Callable[[Obj], str]) -> None:
    made = by_name(kit.load("job.yaml"))
    kit.sync()
    kit.patch(made["render-frames"], {"metadata": {"annotations": {"kaisched.io/min-member": "10"}}})
    assert kit.sync() == 1
    assert kit.podgroup(name_of(made["render-frames"]))["spec"]["minMember"] == 10


def test_a_users_min_member_edit_survives_until_the_owner_changes(kit: Any,
                                                                  name_of: Callable[[Obj], str]) -> None:
    job = kit.load("pytorchjob.yaml")[0]
    kit.sync()
    kit.cluster.patch(PODGROUP, "kubeflow", name_of(job), {"spec": {"minMember": 2}})
    assert kit.sync() == 0
    assert kit.podgroup(name_of(job), "kubeflow")["spec"]["minMember"] == 2


def test_new_pods_of_a_scaled_owner_join_the_group(kit: Any, name_of: Callable[[Obj], str]) -> None:
    made = by_name(kit.load("pytorchjob.yaml"))
    job = made["pytorch-simple"]
    kit.sync()
    kit.patch(job, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4}}}})
    kit.pod("pytorch-simple-worker-3", job, namespace="kubeflow",
            labels={"training.kubeflow.org/replica-type": "worker"})
    assert kit.sync() == 2                                   # the PodGroup and the new pod
    assert kit.podgroup(name_of(job), "kubeflow")["spec"]["minMember"] == 5
    assert kit.subgroup_of("pytorch-simple-worker-3", "kubeflow") == "worker"


def test_owner_resync_period_limits_rereads(kit: Any, name_of: Callable[[Obj], str]) -> None:
    job = kit.load("pytorchjob.yaml")[0]
    kit.grouper.owner_resync = 30.0
    kit.sync()
    kit.patch(job, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 5}}}})
    kit.clock.advance(10)
    assert kit.sync() == 0
    kit.clock.advance(25)
    assert kit.sync() == 1
    assert kit.podgroup(name_of(job), "kubeflow")["spec"]["minMember"] == 6


# -- idempotence and what is left alone ---------------------------------------------
@pytest.mark.parametrize("file", ["pytorchjob.yaml", "mpijob.yaml", "jobset.yaml", "deployment.yaml",
                                  "raycluster.yaml", "cronjob.yaml"])
def test_second_sync_changes_nothing(kit: Any, file: str) -> None:
    kit.load(file)
    assert kit.sync() > 0
    versions = kit.versions()
    assert kit.sync() == 0
    assert kit.versions() == versions


def test_pods_that_declare_a_gang_or_use_another_scheduler_are_untouched(kit: Any) -> None:
    job = kit.owner("batch/v1", "Job", "j", {})
    kinds = {
        "own-group": {"annotations": {"kaisched.io/pod-group": "mine"}},
        "xk8s": {"labels": {"scheduling.x-k8s.io/pod-group": "pg"}},
        "koord": {"annotations": {"gang.scheduling.koordinator.sh/name": "g"}},
        "volcano": {"annotations": {"scheduling.k8s.io/group-name": "vg"}},
        "default-scheduler": {"scheduler": "default-scheduler"},
    }
    for name, extra in kinds.items():
        kit.pod(name, job, **extra)
    versions = kit.versions()
    assert kit.sync() == 0
    assert kit.podgroups() == [] and kit.versions() == versions


def test_pods_without_a_scheduler_name_are_untouched(kit: Any) -> None:
    kit.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"}, "spec": {}})
    assert kit.sync() == 0 and kit.podgroups() == []


def test_terminating_pods_are_not_grouped(kit: Any) -> None:
    pod = kit.pod("going")
    kit.cluster.replace({**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert kit.sync() == 0 and kit.podgroups() == []


def test_deleted_podgroup_is_made_again(kit: Any, name_of: Callable[[Obj], str]) -> None:
    job = kit.load("mpijob.yaml")[0]
    kit.sync()
    kit.cluster.delete(PODGROUP, "default", name_of(job))
    assert kit.sync() == 1                                   # the PodGroup; the pods already name it
    assert kit.podgroup(name_of(job))["spec"]["minMember"] == 5


def test_deleted_pod_is_forgotten(kit: Any) -> None:
    kit.load("mpijob.yaml")
    kit.sync()
    kit.cluster.delete(POD, "default", "pi-worker-0")
    assert kit.sync() == 0


def test_the_owners_estimate_of_its_run_time_goes_with_its_podgroup(
        kit: Any, name_of: Callable[[Obj], str]) -> None:
    made = by_name(kit.load("pytorchjob.yaml"))
    job = made["pytorch-simple"]
    kit.patch(job, {"metadata": {"annotations": {"kaisched.io/expected-runtime": "3h"},
                                 "labels": {"kueue.x-k8s.io/max-exec-time-seconds": "14400"}}})
    kit.sync()
    meta = kit.podgroup(name_of(job), "kubeflow")["metadata"]
    assert meta["annotations"]["kaisched.io/expected-runtime"] == "3h"
    assert meta["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "14400"
