"""A pod's role in its gang, read from the labels the operators set on it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaisched.api.workloadkinds import KINDS, WORKER, PodNaming, RoleFrom
from podgrouper.groupers.ray import worker_role

# Each way of labelling roles once, in the table's order: a pod carries one
# operator's labels (the training operator's replica type is read before the
# MPI operator's job role, which it also sets on its leading pods).
_NAMINGS: tuple[tuple[PodNaming, tuple[str, ...]], ...] = tuple(
    {(k.pods.role_from, k.pods.role_label or k.pods.group_label): (k.pods, k.roles)
     for k in KINDS if k.pods.role_label or k.pods.role_from is RoleFrom.INDEX}.values())


def pod_role(labels: Mapping[str, Any]) -> str | None:
    """Its role as a subgroup name, lower-cased (the training operator has
    written both "Master" and "master"); None when no operator's labels say."""
    for naming, roles in _NAMINGS:
        if naming.role_from is RoleFrom.LABEL:
            value = labels.get(naming.role_label)
            if isinstance(value, str) and value:
                return value.lower()
        elif naming.role_from is RoleFrom.NODE_TYPE:
            node_type = labels.get(naming.role_label)
            if node_type == roles[0]:
                return roles[0]
            if node_type == WORKER:
                group = labels.get(naming.group_label)
                return worker_role(group) if isinstance(group, str) and group else None
        elif naming.group_label in labels:
            # Index 0 of a group is its leading role (a LeaderWorkerSet's leader).
            lead = str(labels.get(naming.index_label) or "0") == "0"
            return roles[0] if lead else roles[1]
    return None
