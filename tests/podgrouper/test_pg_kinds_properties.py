"""Properties of the groupers that read the pod and its owners: no owner spec,
no intermediate owner and no pod labels make one raise; a bad spec is the
default grouping with problems, and every name is a PodGroup name."""
from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from podgrouper.groupers import Lineage, builtin_groupers, group_owner, pick
from tests.builders.strategies import counts, json_values

NAME = re.compile(r"^pg-[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
labels = st.dictionaries(st.sampled_from([
    "jobset.sigs.k8s.io/replicatedjob-name", "leaderworkerset.sigs.k8s.io/group-index",
    "leaderworkerset.sigs.k8s.io/worker-index", "kaisched.io/queue", "kaisched.io/priority-class",
    "ray.io/priority-class-name"]), st.sampled_from(["0", "1", "node", "workers", "", "x y"])
    | json_values, max_size=4)
specs = st.fixed_dictionaries({}, optional={
    "replicas": counts, "startupPolicy": st.sampled_from(["LeaderReady", "LeaderCreated", "Maybe"])
    | st.fixed_dictionaries({"startupPolicyOrder": st.sampled_from(["InOrder", "AnyOrder", "?"])})
    | json_values,
    "leaderWorkerTemplate": st.fixed_dictionaries({"size": counts}) | json_values,
    "trainer": st.fixed_dictionaries({"numNodes": counts}) | json_values,
    "launcherCreationPolicy": st.sampled_from(["AtStartup", "WaitForWorkersReady", "Soon"]),
    "xgbReplicaSpecs": json_values, "jaxReplicaSpecs": json_values,
    "paddleReplicaSpecs": json_values, "elasticPolicy": json_values,
    "rayClusterConfig": json_values,
    "replicatedJobs": st.lists(st.fixed_dictionaries(
        {"name": st.sampled_from(["node", "workers"]) | json_values, "replicas": counts,
         "dependsOn": json_values,
         "template": st.fixed_dictionaries({"spec": st.fixed_dictionaries(
             {"parallelism": counts, "completions": counts})}) | json_values}), max_size=3),
    "template": json_values, "headGroupSpec": json_values, "workerGroupSpecs": json_values,
})
kinds = st.sampled_from([
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("kubeflow.org/v1", "XGBoostJob"), ("kubeflow.org/v1", "JAXJob"), ("kubeflow.org/v1", "PaddleJob"),
    ("kubeflow.org/v2beta1", "MPIJob"), ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("ray.io/v1", "RayService"), ("serving.knative.dev/v1", "Service"),
    ("serving.knative.dev/v1", "Revision"), ("argoproj.io/v1alpha1", "Workflow")])
middles = st.sampled_from([("jobset.x-k8s.io/v1alpha2", "JobSet"), ("ray.io/v1", "RayCluster"),
                           ("serving.knative.dev/v1", "Revision"), ("apps/v1", "StatefulSet")])


def obj(kind: tuple[str, str], name: str, spec: Any, meta_extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": "0f3c2a9e-aaaa"}
    if isinstance(meta_extra, dict):
        meta.update(meta_extra)
    return {"apiVersion": kind[0], "kind": kind[1], "metadata": meta, "spec": spec}


@settings(max_examples=400, deadline=None)
@given(kind=kinds, spec=specs | json_values, middle=st.none() | st.tuples(middles, specs | json_values),
       pod_labels=labels, owner_meta=st.fixed_dictionaries({}, optional={
           "labels": labels, "annotations": st.dictionaries(st.sampled_from([
               "autoscaling.knative.dev/min-scale", "kaisched.io/min-member"]),
               st.sampled_from(["2", "0", "-1", "x"]) | json_values, max_size=2)}))
def test_lineage_groupers_never_raise(kind: tuple[str, str], spec: Any, middle: Any,
                                      pod_labels: Any, owner_meta: Any) -> None:
    top = obj(kind, "owner", spec, owner_meta)
    owners: list[dict[str, Any]] = []
    if middle is not None:
        owners.append(obj(middle[0], "middle", middle[1], owner_meta))
    owners.append(top)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "owner-pod-0", "uid": "77aa", "labels": pod_labels},
           "spec": {"priorityClassName": "p"}}
    group = group_owner(top, pick(builtin_groupers(), top), Lineage(pod, tuple(owners)))
    assert NAME.match(group.name), group.name
    assert isinstance(group.min_member, int) and group.min_member >= 1
    assert all(isinstance(sg.name, str) and sg.min_member >= 0 for sg in group.subgroups)
    assert group.queue is None or isinstance(group.queue, str)
    assert group.priority_class_name is None or isinstance(group.priority_class_name, str)
    if group.problems:
        assert group.subgroups == () and group.min_member >= 1
