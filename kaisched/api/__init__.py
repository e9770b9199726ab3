"""The pure model: resources, tasks, jobs, nodes, queues, the cluster."""
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

__all__ = [
    "CPU", "GPU", "MEMORY", "PODS", "DEFAULT_QUEUE", "ClusterInfo", "Condition", "ForeignPod",
    "GangMode", "GangSpec", "JobInfo", "JobKey", "NodeInfo", "NodeName", "NodeSpec", "NodeTable",
    "Placement", "PodGroupPhase", "PodGroupStatus", "PodKey", "QueueInfo", "QueueName", "Reason",
    "Requirement", "Resource", "SelectorTerm", "SubGroup", "Taint", "TaskInfo", "TaskStatus",
    "Toleration",
]
