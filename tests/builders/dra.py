"""Dynamic Resource Allocation's objects for a cluster: nodes publishing GPUs through
ResourceSlices of one driver, a DeviceClass for them, and gangs whose pods each claim
some."""
from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
DRIVER = "gpu.example.com"


def objects(gpus: list[int], gangs: list[tuple[int, int, bool]]) -> list[Obj]:
    """Per node its count of GPUs (a numa attribute of 0 or 1 each); per gang its size,
    the GPUs each pod claims, and whether they must share a numa node."""
    objs: list[Obj] = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                        "metadata": {"name": "gpu"},
                        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}]
    for n, count in enumerate(gpus):
        name = f"node-{n}"
        objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                     "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}}})
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                     "metadata": {"name": f"{name}-gpus"},
                     "spec": {"driver": DRIVER, "nodeName": name,
                              "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                              "devices": [{"name": f"gpu-{i}", "attributes": {
                                  "numa": {"int": i % 2}}} for i in range(count)]}})
    for g, (size, per_pod, same_numa) in enumerate(gangs):
        group = f"gang-{g}"
        objs.append({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                     "metadata": {"name": group, "namespace": "default"}, "spec": {"minMember": size}})
        for t in range(size):
            pod = f"{group}-{t}"
            devices: Obj = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
                                                                     "count": per_pod}}]}
            if same_numa:
                devices["constraints"] = [{"matchAttribute": f"{DRIVER}/numa"}]
            objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": pod, "namespace": "default"},
                         "spec": {"devices": devices}})
            objs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": pod, "namespace": "default",
                                      "annotations": {"kaisched.io/pod-group": group}},
                         "spec": {"schedulerName": "kaisched",
                                  "resourceClaims": [{"name": "gpu", "resourceClaimName": pod}],
                                  "containers": [{"name": "main", "resources": {
                                      "requests": {"cpu": "1"}}}]}})
    return objs
