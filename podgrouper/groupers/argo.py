"""Argo Workflows (argoproj.io/v1alpha1 Workflow): the workflow controller runs
each step as a pod owned by the Workflow, one after another or fanned out as
the DAG allows. Steps are not a gang: each step pod is its own PodGroup of 1
(pg-<pod>-<uid>), in the Workflow's queue, so a step never waits for steps the
controller has not created yet.
"""
from __future__ import annotations

import attrs

from podgrouper.groupers.spec import NO_POD, GroupSpec, Lineage, Owner, base, podgroup_name


def workflow(owner: Owner, lineage: Lineage = NO_POD) -> GroupSpec:
    group = base(owner)
    if not lineage.pod:
        return group
    return attrs.evolve(group, name=podgroup_name(lineage.pod))
