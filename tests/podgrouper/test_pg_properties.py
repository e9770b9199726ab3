"""Properties over random input: no owner spec makes a grouper raise, and no
ownerReference graph makes the walk raise or loop. A bad owner is a value."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from podgrouper.groupers import builtin_groupers, group_owner, pick
from podgrouper.owners import OwnerRef, top_owner
from tests.builders.strategies import counts, json_values

replica_specs = st.dictionaries(st.sampled_from(["Master", "Worker", "PS", "Chief", "Launcher"]),
                                st.fixed_dictionaries({"replicas": counts}) | json_values, max_size=4)
specs = st.fixed_dictionaries({}, optional={
    "pytorchReplicaSpecs": replica_specs, "tfReplicaSpecs": replica_specs,
    "mpiReplicaSpecs": replica_specs,
    "elasticPolicy": st.fixed_dictionaries({"minReplicas": counts}) | json_values,
    "runPolicy": st.fixed_dictionaries({"schedulingPolicy": st.fixed_dictionaries(
        {"minAvailable": counts, "queue": json_values})}) | json_values,
    "replicatedJobs": st.lists(st.fixed_dictionaries(
        {"name": st.text(max_size=5) | json_values, "replicas": counts,
         "template": st.fixed_dictionaries({"spec": st.fixed_dictionaries(
             {"parallelism": counts, "completions": counts})}) | json_values}), max_size=3)
        | json_values,
    "headGroupSpec": json_values,
    "workerGroupSpecs": st.lists(st.fixed_dictionaries(
        {"minReplicas": counts, "numOfHosts": counts, "suspend": json_values}), max_size=3) | json_values,
    "rayClusterSpec": json_values,
    "clusterSelector": json_values,
})
kinds = st.sampled_from([("kubeflow.org/v1", "PyTorchJob"), ("kubeflow.org/v1", "TFJob"),
                         ("kubeflow.org/v2beta1", "MPIJob"), ("jobset.x-k8s.io/v1alpha2", "JobSet"),
                         ("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob"), ("batch/v1", "Job"),
                         ("apps/v1", "Deployment"), ("example.com/v1", "Thing")])


@settings(max_examples=400, deadline=None)
@given(kind=kinds, spec=specs | json_values, annotation=st.none() | st.text(max_size=4),
       labels=st.dictionaries(st.sampled_from(["kaisched.io/queue", "app"]), json_values, max_size=2))
def test_groupers_never_raise(kind: tuple[str, str], spec: Any, annotation: str | None,
                              labels: dict[str, Any]) -> None:
    meta: dict[str, Any] = {"name": "owner", "uid": "0f3c2a9e-aaaa", "labels": labels}
    if annotation is not None:
        meta["annotations"] = {"kaisched.io/min-member": annotation}
    owner = {"apiVersion": kind[0], "kind": kind[1], "metadata": meta, "spec": spec}
    group = group_owner(owner, pick(builtin_groupers(), owner))
    assert group.name == "pg-owner-0f3c2a9e"
    assert isinstance(group.min_member, int) and group.min_member >= 1
    assert all(isinstance(sg.name, str) and sg.min_member >= 0 for sg in group.subgroups)
    assert group.queue is None or isinstance(group.queue, str)
    if group.problems:
        assert group.subgroups == ()


@settings(max_examples=300, deadline=None)
@given(edges=st.lists(st.lists(st.integers(0, 6), max_size=2), min_size=1, max_size=6),
       missing=st.sets(st.integers(0, 6)))
def test_the_walk_ends_on_any_owner_graph(edges: list[list[int]], missing: set[int]) -> None:
    """Object i has a controller reference to each object in edges[i]; indexes past the
    end, or in `missing`, do not exist."""
    objs = {i: {"apiVersion": "example.com/v1", "kind": "Thing",
                "metadata": {"name": f"t{i}", "namespace": "ns", "uid": f"u{i}", "ownerReferences": [
                    {"apiVersion": "example.com/v1", "kind": "Thing", "name": f"t{j}",
                     "uid": f"u{j}", "controller": True} for j in targets]}}
            for i, targets in enumerate(edges) if i not in missing}
    reads: list[str] = []

    def read(namespace: str, ref: OwnerRef) -> dict[str, Any] | None:
        reads.append(ref.name)
        return next((o for o in objs.values() if o["metadata"]["name"] == ref.name), None)

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "p", "namespace": "ns", "ownerReferences": [
            {"apiVersion": "example.com/v1", "kind": "Thing", "name": "t0", "uid": "u0",
             "controller": True}]}}
    walk = top_owner(pod, read)
    assert len(reads) <= len(edges) + 1
    assert walk.top is pod or walk.top in objs.values()
    assert len(walk.chain) == len(set(walk.chain))
    if walk.broken:
        assert walk.problems
