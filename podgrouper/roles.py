"""A pod's role in its gang, read from the labels the operators set on it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# In the order they are tried; the values become subgroup names, lower-cased
# (the training operator has written both "Master" and "master").
ROLE_LABELS = (
    "training.kubeflow.org/replica-type",       # training operator: master, worker, ps, ...
    "training.kubeflow.org/job-role",           # MPI operator: launcher, worker
    "jobset.sigs.k8s.io/replicatedjob-name",    # JobSet
    "ray.io/node-type",                         # KubeRay: head, worker
)


def pod_role(labels: Mapping[str, Any]) -> str | None:
    for label in ROLE_LABELS:
        value = labels.get(label)
        if isinstance(value, str) and value:
            return value.lower()
    return None
