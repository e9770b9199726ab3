"""The raw objects the bench scenarios build their clusters from."""
from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def node(name: str, cpu: int = 32, memory: str = "256Gi", gpu: int = 8) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": str(cpu), "memory": memory,
                                       "nvidia.com/gpu": str(gpu), "pods": "110"}}}


def pod(name: str, cpu: str = "1", memory: str = "4Gi", gpu: int = 0, group: str | None = None,
        node_name: str | None = None, priority: int = 0, namespace: str = "bench") -> Obj:
    requests = {"cpu": cpu, "memory": memory}
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    meta: Obj = {"name": name, "namespace": namespace}
    if group:
        meta["annotations"] = {"kaisched.io/pod-group": group}
    spec: Obj = {"schedulerName": "kaisched", "priority": priority,
                 "containers": [{"name": "main", "resources": {"requests": requests}}]}
    status: Obj = {"phase": "Pending"}
    if node_name:
        spec["nodeName"] = node_name
        status = {"phase": "Running"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def podgroup(name: str, min_member: int, namespace: str = "bench") -> Obj:
    return {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": min_member}}
