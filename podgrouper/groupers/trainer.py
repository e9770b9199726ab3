"""Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1).

The trainer controller turns a TrainJob and its (Cluster)TrainingRuntime into a
JobSet it owns; the JobSet's Jobs own the pods. The TrainJob is the top owner
and names the PodGroup; the gang is its JobSet's, in the JobSet's start order
(a runtime's initializers run first, the `node` replicatedJob after them).
Without the JobSet in the pod's owners the gang is the TrainJob's own
spec.trainer.numNodes.
"""
from __future__ import annotations

import attrs

from kaisched.api.workloadkinds import JOBSET
from podgrouper.groupers.jobset import gang_of, stages
from podgrouper.groupers.spec import (
    NO_POD,
    GroupSpec,
    Lineage,
    Owner,
    base,
    count,
    defaulted,
    section,
)


def train_job(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    problems: list[str] = []
    child = lineage.nearest(JOBSET)
    if child is not None:
        found = stages(child, problems)
        if problems:
            name = (child.get("metadata") or {}).get("name")
            return defaulted(owner, [f"JobSet {name}: {p}" for p in problems])
        return gang_of(owner, found, lineage)
    spec = section(owner, "spec", "spec", problems, required=True)
    trainer = section(spec, "trainer", "spec.trainer", problems)
    nodes = count(trainer.get("numNodes"), "spec.trainer.numNodes", 1, problems)
    if problems:
        return defaulted(owner, problems)
    return attrs.evolve(base(owner), min_member=max(1, nodes))
