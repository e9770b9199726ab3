"""The emulated operators: the objects each kind's controller makes (names,
labels, ownerReferences, valid pods), what the real PodGrouper makes of them,
evicted pods made again as each controller does, and finished jobs removed."""
from __future__ import annotations

import re

import pytest

from kaisched.api import labels as L
from kaisched.api.clock import ManualClock
from kaisched.cluster.kinds import NODE, POD, PODGROUP, kind_for
from kaisched.cluster.memory import MemoryCluster
from kaisched.sim.controllers import Controllers, JobRun, JobState
from kaisched.sim.scenario import parse_scenario
from podgrouper.controller import PodGrouper

DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

ROLES = {
    "PyTorchJob": "master: {replicas: 1, requests: {cpu: 1, gpu: 2}}\n"
                  "      worker: {replicas: 2, requests: {cpu: 1, gpu: 2}}",
    "TFJob": "chief: {replicas: 1, requests: {cpu: 1, gpu: 1}}\n"
             "      ps: {replicas: 1, requests: {cpu: 1}}\n"
             "      worker: {replicas: 1, requests: {cpu: 1, gpu: 1}}",
    "MPIJob": "launcher: {replicas: 1, requests: {cpu: 1}}\n"
              "      worker: {replicas: 2, requests: {cpu: 1, gpu: 2}}",
    "JobSet": "trainer: {replicas: 2, requests: {cpu: 1, gpu: 2}}\n"
              "      sidecar: {replicas: 1, requests: {cpu: 1}}",
    "RayJob": "head: {replicas: 1, requests: {cpu: 1}}\n"
              "      gpus: {replicas: 2, requests: {cpu: 1, gpu: 2}}",
    "Job": "main: {replicas: 3, requests: {cpu: 1, gpu: 1}}",
    "PodGroup": "leader: {replicas: 1, requests: {cpu: 1}}\n"
                "      member: {replicas: 2, requests: {cpu: 1, gpu: 2}}",
    "XGBoostJob": "master: {replicas: 1, requests: {cpu: 1, gpu: 1}}\n"
                  "      worker: {replicas: 2, requests: {cpu: 1, gpu: 1}}",
    "JAXJob": "worker: {replicas: 2, requests: {cpu: 1, gpu: 2}}",
    "TrainJob": "node: {replicas: 2, requests: {cpu: 1, gpu: 2}}",
    "LeaderWorkerSet": "leader: {replicas: 1, requests: {cpu: 1, gpu: 1}}\n"
                       "      worker: {replicas: 2, requests: {cpu: 1, gpu: 1}}",
    "RayService": "head: {replicas: 1, requests: {cpu: 1}}\n"
                  "      gpus: {replicas: 2, requests: {cpu: 1, gpu: 2}}",
}
# kind -> (top owner apiVersion, minMember, subgroups, pods made again under the same name)
EXPECTED = {
    "PyTorchJob": ("kubeflow.org/v1", 3, {"master": 1, "worker": 2}, True),
    "TFJob": ("kubeflow.org/v1", 3, {"chief": 1, "ps": 1, "worker": 1}, True),
    "MPIJob": ("kubeflow.org/v2beta1", 3, {"launcher": 1, "worker": 2}, True),
    # two levels: a replicatedJob (None: it holds subgroups) with a subgroup per Job
    "JobSet": ("jobset.x-k8s.io/v1alpha2", 3, {"trainer": None, "trainer-0": 2, "sidecar": None,
                                               "sidecar-0": 1}, False),
    "RayJob": ("ray.io/v1", 3, {"head": 1, "gpus": 2}, False),
    "Job": ("batch/v1", 1, {}, False),
    "PodGroup": ("scheduling.kaisched.io/v1alpha1", 3, {"leader": 1, "member": 2}, None),
    "XGBoostJob": ("kubeflow.org/v1", 3, {"master": 1, "worker": 2}, True),
    "JAXJob": ("kubeflow.org/v1", 2, {"worker": 2}, True),
    "TrainJob": ("trainer.kubeflow.org/v1alpha1", 2, {"node": None, "node-0": 2}, False),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io/v1", 3, {"leader": 1, "worker": 2}, True),
    "RayService": ("ray.io/v1", 3, {"head": 1, "gpus": 2}, False),
}


def setup(kind: str, extra: str = "") -> tuple[MemoryCluster, Controllers, PodGrouper, JobRun]:
    text = f"""
nodePools: [{{name: gpu, count: 2, capacity: {{cpu: 16, memory: 64Gi, nvidia.com/gpu: 8}}}}]
queues: [{{name: team-a}}]
priorityClasses: {{train: 50}}
jobs:
  - name: job-1
    kind: {kind}
    queue: team-a
    priorityClass: train
    duration: 5m{extra}
    roles:
      {ROLES[kind]}
"""
    scenario = parse_scenario(text, "t.yaml")
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                    "status": {"allocatable": {"cpu": "16", "nvidia.com/gpu": "8"}}})
    controllers = Controllers(cluster, "kaisched", {"train": 50})
    grouper = PodGrouper(cluster, clock)
    run = JobRun(scenario.jobs[0])
    controllers.submit(run, 0.0)
    grouper.sync()
    return cluster, controllers, grouper, run


def pods(cluster: MemoryCluster) -> list[dict]:
    return cluster.list(POD, "team-a")


@pytest.mark.parametrize("kind", sorted(ROLES))
def test_operator_objects_and_the_podgroup(kind: str) -> None:
    cluster, _, _, run = setup(kind)
    api_version, min_member, subgroups, _ = EXPECTED[kind]
    owner = run.objects[0]
    assert owner["apiVersion"] == api_version and owner["kind"] == kind
    made = pods(cluster)
    assert len(made) == run.spec.pods
    for pod in made:
        meta, spec = pod["metadata"], pod["spec"]
        assert DNS.match(meta["name"]) and len(meta["name"]) <= 63
        container = spec["containers"][0]
        assert container["image"] and DNS.match(container["name"])
        requests = container["resources"]["requests"]
        if "nvidia.com/gpu" in requests:   # extended resources: limits equal requests
            assert container["resources"]["limits"] == {"nvidia.com/gpu": requests["nvidia.com/gpu"]}
        assert spec["schedulerName"] == "kaisched" and spec["priority"] == 50
        assert spec["priorityClassName"] == "train"
        assert meta["labels"][L.QUEUE_LABEL] == "team-a"
        # the ownerReferences lead, controller by controller, to the top owner
        current = pod
        while current["metadata"].get("ownerReferences"):
            ref = current["metadata"]["ownerReferences"][0]
            assert ref["controller"] is True
            current = cluster.get(kind_for(ref["apiVersion"], ref["kind"]), "team-a", ref["name"])
            assert current is not None and current["metadata"]["uid"] == ref["uid"]
        assert current["kind"] == ("Pod" if kind == "PodGroup" else kind)
        # the PodGrouper (or the author, for a plain gang) named the pod's PodGroup
        assert meta["name"] and cluster.get(POD, "team-a", meta["name"])["metadata"][
            "annotations"][L.POD_GROUP_ANNOTATION] == run.pod_group
    group = cluster.get(PODGROUP, "team-a", run.pod_group)
    assert group is not None
    assert group["spec"]["minMember"] == min_member
    assert {sg["name"]: sg.get("minMember") for sg in group["spec"].get("subGroups", [])} == subgroups
    assert group["spec"]["queue"] == "team-a"


@pytest.mark.parametrize("kind", sorted(ROLES))
def test_evicted_pods_are_made_again_as_the_controller_would(kind: str) -> None:
    cluster, controllers, _, run = setup(kind)
    same_name = EXPECTED[kind][3]
    victim = pods(cluster)[-1]["metadata"]["name"]
    cluster.bind("team-a", victim, "", "n1")
    cluster.evict("team-a", victim)
    cluster.delete(POD, "team-a", victim)          # the kubelet, after the grace period
    controllers.tick(60.0)
    names = {p["metadata"]["name"] for p in pods(cluster)}
    if same_name is None:                          # bare pods: nobody makes them again
        assert run.state is JobState.FAILED and "bare pod" in str(run.failure)
        assert not names and cluster.get(PODGROUP, "team-a", "job-1") is None
        return
    assert run.state is JobState.SUBMITTED and run.restarts == 1
    assert len(names) == run.spec.pods
    assert (victim in names) is same_name


@pytest.mark.parametrize("kind", sorted(ROLES))
def test_a_job_that_succeeded_is_removed_whole(kind: str) -> None:
    cluster, controllers, _, run = setup(kind)
    for pod in pods(cluster):       # every container exits successfully
        cluster.replace({**pod, "status": {"phase": "Succeeded"}})
    finished = controllers.tick(300.0)
    assert finished == [run] and run.state is JobState.SUCCEEDED and run.finished == 300.0
    assert not pods(cluster) and not cluster.list(PODGROUP)
    for obj in run.objects:
        meta = obj["metadata"]
        assert cluster.get(kind_for(obj["apiVersion"], obj["kind"]), "team-a", meta["name"]) is None
    assert cluster.get(NODE, "", "n1") is not None


def test_leaders_finish_a_training_job() -> None:
    cluster, controllers, _, run = setup("PyTorchJob")
    master = cluster.get(POD, "team-a", "job-1-master-0")
    cluster.replace({**master, "status": {"phase": "Succeeded"}})
    assert controllers.tick(10.0) == [run]
    assert not pods(cluster)                  # the workers still running are cleaned up


def test_elastic_and_min_available_reach_the_podgroup() -> None:
    cluster, _, _, run = setup("PyTorchJob", "\n    elastic: {minReplicas: 1}")
    assert cluster.get(PODGROUP, "team-a", run.pod_group)["spec"]["minMember"] == 2
    cluster, _, _, run = setup("MPIJob", "\n    minAvailable: 2")
    assert cluster.get(PODGROUP, "team-a", run.pod_group)["spec"]["minMember"] == 2
    cluster, _, _, run = setup("JobSet", "\n    minAvailable: 2")
    assert cluster.get(PODGROUP, "team-a", run.pod_group)["spec"]["minMember"] == 2
