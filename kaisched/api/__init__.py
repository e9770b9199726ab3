"""The pure model: resources, tasks, jobs, nodes, queues, the cluster.

The names below are imported when first asked for: the cluster layer reads a
few light modules of this package (types, kinds) at start, and `kaisched run`
lists the cluster before it has imported the model's heavy parts (numpy,
networkx) -- the lists wait on the API server meanwhile.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kaisched.api.clusterinfo import ClusterInfo, ForeignPod
    from kaisched.api.constraints import Placement, Requirement, SelectorTerm, Taint, Toleration
    from kaisched.api.job import Condition, GangSpec, JobInfo, PodGroupStatus, SubGroup
    from kaisched.api.node import NodeInfo, NodeSpec, NodeTable
    from kaisched.api.queue import QueueInfo
    from kaisched.api.resource import CPU, GPU, MEMORY, PODS, Resource
    from kaisched.api.task import TaskInfo
    from kaisched.api.types import (
        DEFAULT_QUEUE,
        GangMode,
        JobKey,
        NodeName,
        PodGroupPhase,
        PodKey,
        QueueName,
        Reason,
        TaskStatus,
    )

_HOMES = {
    "clusterinfo": ("ClusterInfo", "ForeignPod"),
    "constraints": ("Placement", "Requirement", "SelectorTerm", "Taint", "Toleration"),
    "job": ("Condition", "GangSpec", "JobInfo", "PodGroupStatus", "SubGroup"),
    "node": ("NodeInfo", "NodeSpec", "NodeTable"),
    "queue": ("QueueInfo",),
    "resource": ("CPU", "GPU", "MEMORY", "PODS", "Resource"),
    "task": ("TaskInfo",),
    "types": ("DEFAULT_QUEUE", "GangMode", "JobKey", "NodeName", "PodGroupPhase", "PodKey",
              "QueueName", "Reason", "TaskStatus"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "CPU", "GPU", "MEMORY", "PODS", "DEFAULT_QUEUE", "ClusterInfo", "Condition", "ForeignPod",
    "GangMode", "GangSpec", "JobInfo", "JobKey", "NodeInfo", "NodeName", "NodeSpec", "NodeTable",
    "Placement", "PodGroupPhase", "PodGroupStatus", "PodKey", "QueueInfo", "QueueName", "Reason",
    "Requirement", "Resource", "SelectorTerm", "SubGroup", "Taint", "TaskInfo", "TaskStatus",
    "Toleration",
]
assert sorted(__all__) == sorted(_HOME_OF)


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
