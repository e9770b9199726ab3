"""The PodGrouper's subgroup trees and the sizes it reads as KAI does, on a
cluster (the memory backend): a multi-host Ray worker group as two levels,
Grove's PodGang, an MPIJob whose launcher comes later, a LeaderReady
LeaderWorkerSet group whose workers come later."""
from __future__ import annotations

from typing import Any, Callable

from kaisched.cluster.kinds import POD

Obj = dict[str, Any]


def tree(group: Obj) -> list[tuple[str, str, str]]:
    """(name, minimum, parent) of a PodGroup's subGroups as written."""
    return [(sg["name"], str(sg.get("minMember", f"{sg.get('minSubGroup', 'all')} of")),
             sg.get("parent", "")) for sg in group["spec"].get("subGroups") or ()]


def test_a_multi_host_ray_group_is_a_subgroup_per_replica(kit: Any,
                                                          name_of: Callable[[Obj], str]) -> None:
    docs = kit.load("raycluster-multihost.yaml")
    kit.sync()
    group = kit.podgroup(name_of(docs[0]))
    # the head, and the TPU group needing 1 of its 2 slices, each slice 2 hosts whole
    assert group["spec"]["minMember"] == 3
    assert tree(group) == [("head", "1", ""), ("tpu-group", "1 of", ""),
                           ("tpu-group-0", "2", "tpu-group"), ("tpu-group-1", "2", "tpu-group")]
    workers = {d["metadata"]["name"]: d["metadata"]["labels"]["ray.io/worker-group-replica-index"]
               for d in docs if d["kind"] == "Pod"
               and d["metadata"]["labels"]["ray.io/node-type"] == "worker"}
    assert {kit.subgroup_of(p) for p in workers} == {"tpu-group-0", "tpu-group-1"}
    assert all(kit.subgroup_of(p) == f"tpu-group-{i}" for p, i in workers.items())
    assert kit.subgroup_of("tpu-cluster-head-7r4kp") == "head"


def test_ray_pods_without_replica_indexes_keep_one_subgroup_per_group(
        kit: Any, manifest: Callable[[str], list[Obj]], name_of: Callable[[Obj], str]) -> None:
    """An older KubeRay labels no replica index: the group stays one subgroup
    of minReplicas x numOfHosts pods, which its pods can meet."""
    docs = manifest("raycluster-multihost.yaml")
    for doc in docs:
        for key in ("ray.io/worker-group-replica-index", "ray.io/worker-group-replica-name",
                    "ray.io/replica-host-index"):
            (doc["metadata"].get("labels") or {}).pop(key, None)
    for doc in docs:
        kit.create(doc)
    kit.sync()
    group = kit.podgroup(name_of(docs[0]))
    assert tree(group) == [("head", "1", ""), ("tpu-group", "2", "")]


def test_a_grove_podgang_is_one_podgroup_with_a_subgroup_per_podgroup(kit: Any) -> None:
    docs = kit.load("grove-podgang.yaml")
    kit.sync()
    gang = next(d for d in docs if d["kind"] == "PodGang")
    group = kit.podgroup(f"pg-disagg-0-{gang['metadata']['uid'][:8]}")
    assert group["spec"]["minMember"] == 3          # the podgroups' minReplicas, summed
    assert group["spec"]["priorityClassName"] == "inference"
    assert tree(group) == [("disagg-0-frontend", "1", ""), ("disagg-0-worker", "2", "")]
    pods = [d["metadata"]["name"] for d in docs if d["kind"] == "Pod"]
    assert {kit.group_of(p) for p in pods} == {group["metadata"]["name"]}
    assert {p: kit.subgroup_of(p) for p in pods} == {
        p: "disagg-0-frontend" if "frontend" in p else "disagg-0-worker" for p in pods}
    assert kit.events() == []


def test_a_pod_waits_for_its_podgang(kit: Any, manifest: Callable[[str], list[Obj]]) -> None:
    """Grouped without its PodGang the pod would get the wrong gang: it is left
    for the next sync, and grouped once Grove has made the PodGang."""
    docs = manifest("grove-podgang.yaml")
    gang = next(d for d in docs if d["kind"] == "PodGang")
    for doc in docs:
        if doc is not gang:
            kit.create(doc)
    kit.sync()
    assert kit.podgroups() == []
    kit.create(gang)
    kit.sync()
    assert [g["metadata"]["name"] for g in kit.podgroups()] == [
        f"pg-disagg-0-{gang['metadata']['uid'][:8]}"]


def test_an_mpijob_counts_its_launcher_once_it_exists(kit: Any, manifest: Callable[[str], list[Obj]],
                                                      name_of: Callable[[Obj], str]) -> None:
    """launcherCreationPolicy WaitForWorkersReady: the workers first (the
    launcher's subgroup asks for 0); once the operator has made the launcher
    pod, the gang is launcher + workers -- the same PodGroup grows."""
    docs = kit.load("mpijob-wait.yaml")
    kit.sync()
    name = name_of(docs[0])
    assert kit.podgroup(name)["spec"]["minMember"] == 2
    launcher = kit.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "pi-wait-launcher-k2x8p", "namespace": "default",
        "labels": {"training.kubeflow.org/job-name": "pi-wait",
                   "training.kubeflow.org/job-role": "launcher",
                   "training.kubeflow.org/operator-name": "mpi-operator"},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
                             "name": "pi-wait", "uid": docs[0]["metadata"]["uid"],
                             "controller": True}]},
        "spec": {"schedulerName": "kaisched", "containers": [{"name": "l", "image": "mpi"}]}})
    kit.sync()
    group = kit.podgroup(name)
    assert group["spec"]["minMember"] == 3
    assert tree(group) == [("launcher", "1", ""), ("worker", "2", "")]
    assert kit.subgroup_of(launcher["metadata"]["name"]) == "launcher"


def test_a_leader_ready_group_grows_to_its_size(kit: Any, name_of: Callable[[Obj], str]) -> None:
    """startupPolicy LeaderReady: the leader alone until it has a node; its
    workers, made once it is ready, join the same PodGroup, which now needs
    the whole group, leader included."""
    lws = kit.owner("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "vllm", {
        "replicas": 1, "startupPolicy": "LeaderReady",
        "leaderWorkerTemplate": {"size": 3, "leaderTemplate": {"spec": {}},
                                 "workerTemplate": {"spec": {}}}})
    labels = {"leaderworkerset.sigs.k8s.io/name": "vllm",
              "leaderworkerset.sigs.k8s.io/group-index": "0"}
    leader = kit.pod("vllm-0", lws, labels={**labels, "leaderworkerset.sigs.k8s.io/worker-index": "0"})
    kit.sync()
    name = f"{name_of(lws)}-0"
    assert (kit.podgroup(name)["spec"]["minMember"], tree(kit.podgroup(name))) == (
        1, [("leader", "1", "")])
    kit.cluster.replace({**kit.get_pod("vllm-0"), "spec": {**leader["spec"], "nodeName": "gpu-a"}})
    for i in (1, 2):
        kit.pod(f"vllm-0-{i}", lws, labels={**labels, "leaderworkerset.sigs.k8s.io/worker-index": str(i)})
    kit.sync()
    group = kit.podgroup(name)
    assert (group["spec"]["minMember"], tree(group)) == (3, [("leader", "1", ""), ("worker", "2", "")])
    assert [kit.group_of(p) for p in ("vllm-0", "vllm-0-1", "vllm-0-2")] == [name] * 3
    assert len(kit.podgroups()) == 1
    assert kit.cluster.get(POD, "default", "vllm-0-2")["metadata"]["labels"][
        "kaisched.io/subgroup"] == "worker"
