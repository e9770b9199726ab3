"""dra-1k: Dynamic Resource Allocation at scale. 1,000 nodes, each publishing
8 GPUs as DRA devices (a ResourceSlice per node: product name, uuid, index,
memory), and 1,000 gangs of 8 pods, each pod with a claim of its own made
from a template (as the resource-claim controller makes them), asking for one
GPU by product name through a CEL selector. Everything fits: the session
allocates 8,000 claims, one device each."""
from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
DRIVER = "gpu.nvidia.com"
PRODUCT = "NVIDIA A100-SXM4-80GB"
GPUS = 8


def device_class() -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def node(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}}


def gpu_slice(node_name: str, gpus: int = GPUS) -> Obj:
    devices = [{"name": f"gpu-{i}",
                "attributes": {"productName": {"string": PRODUCT},
                               "uuid": {"string": f"GPU-{node_name}-{i}"},
                               "index": {"int": i}},
                "capacity": {"memory": {"value": "80Gi"}}} for i in range(gpus)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}


def claim_spec() -> Obj:
    selector = f'device.attributes["{DRIVER}"].productName == "{PRODUCT}"'
    return {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": DRIVER, "selectors": [{"cel": {"expression": selector}}]}}]}}


def gang_pod(name: str, group: str, namespace: str = "bench") -> tuple[Obj, Obj]:
    """A pod claiming one GPU from the template "one-gpu", and the claim made for it."""
    claim_name = f"{name}-gpu"
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                        "annotations": {"kaisched.io/pod-group": group}},
           "spec": {"schedulerName": "kaisched",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                    "containers": [{"name": "main", "resources": {
                        "requests": {"cpu": "4", "memory": "32Gi"},
                        "claims": [{"name": "gpu"}]}}]},
           "status": {"phase": "Pending",
                      "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim_name}]}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": claim_name, "namespace": namespace,
                          "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                               "uid": f"uid-{name}", "controller": True}]},
             "spec": claim_spec()}
    return pod, claim


def dra_1k(scale: float) -> tuple[list[Obj], list[Obj]]:
    count = max(1, int(1000 * scale))
    nodes = [node(f"node-{i:05d}") for i in range(count)]
    objs: list[Obj] = [device_class(), *(gpu_slice(n["metadata"]["name"]) for n in nodes)]
    for g in range(count):
        group = f"gang-{g:04d}"
        objs.append({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                     "metadata": {"name": group, "namespace": "bench"}, "spec": {"minMember": 8}})
        for t in range(8):
            objs.extend(gang_pod(f"{group}-{t}", group))
    return nodes, objs
