"""A pod's role in its gang, read from the labels the operators set on it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from podgrouper.groupers.lws import GROUP_INDEX_LABEL, WORKER_INDEX_LABEL
from podgrouper.groupers.ray import HEAD, worker_role

# In the order they are tried; the values become subgroup names, lower-cased
# (the training operator has written both "Master" and "master").
ROLE_LABELS = (
    "training.kubeflow.org/replica-type",       # training operator: master, worker, ps, ...
    "training.kubeflow.org/job-role",           # MPI operator: launcher, worker
    "jobset.sigs.k8s.io/replicatedjob-name",    # JobSet (and a TrainJob's JobSet)
)
RAY_NODE_TYPE = "ray.io/node-type"              # KubeRay: head, worker
RAY_GROUP = "ray.io/group"                      # KubeRay: the worker group's name


def pod_role(labels: Mapping[str, Any]) -> str | None:
    for label in ROLE_LABELS:
        value = labels.get(label)
        if isinstance(value, str) and value:
            return value.lower()
    node_type = labels.get(RAY_NODE_TYPE)
    if node_type == "head":
        return HEAD
    if node_type == "worker":
        group = labels.get(RAY_GROUP)
        return worker_role(group) if isinstance(group, str) and group else None
    if GROUP_INDEX_LABEL in labels:
        # LeaderWorkerSet: worker 0 of a group is its leader.
        return "leader" if str(labels.get(WORKER_INDEX_LABEL) or "0") == "0" else "worker"
    return None
