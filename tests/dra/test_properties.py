"""Properties of device allocation over random clusters and gangs, run
through the replay path: no device is ever allocated to two claims; no claim
is allocated for a gang that was not placed whole; every bound pod's claims
are allocated on its node and reserved for it."""
from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaisched.builtins import register_builtins
from kaisched.cluster.kinds import POD, RESOURCE_CLAIMS
from kaisched.framework import default_config
from kaisched.tools.replay import replay

Obj = dict[str, Any]
DRIVER = "gpu.example.com"


def objects(gpus: list[int], gangs: list[tuple[int, int, bool]]) -> list[Obj]:
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


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpus=st.lists(st.integers(0, 4), min_size=1, max_size=4),
       gangs=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 2), st.booleans()),
                      min_size=1, max_size=5),
       sessions=st.integers(1, 2))
def test_devices_once_gangs_whole(gpus: list[int], gangs: list[tuple[int, int, bool]],
                                  sessions: int) -> None:
    registry = register_builtins()
    result = replay(objects(gpus, gangs), default_config(registry), registry, sessions)
    cluster = result.cluster
    claims = {c["metadata"]["name"]: c for k in RESOURCE_CLAIMS for c in cluster.list(k, "default")}
    owner: dict[tuple[str, str, str], str] = {}
    for name, claim in claims.items():
        allocation = (claim.get("status") or {}).get("allocation")
        for r in (allocation or {}).get("devices", {}).get("results", []):
            key = (r["driver"], r["pool"], r["device"])
            assert key not in owner, f"{key} allocated to {owner[key]} and {name}"
            owner[key] = name
    for g, (size, per_pod, same_numa) in enumerate(gangs):
        pods = [cluster.get(POD, "default", f"gang-{g}-{t}") for t in range(size)]
        bound = [p for p in pods if p["spec"].get("nodeName")]
        assert not bound or len(bound) == size, f"gang-{g} placed in part"
        for pod in pods:
            name = pod["metadata"]["name"]
            status = claims[name].get("status") or {}
            if not pod["spec"].get("nodeName"):
                assert not status.get("allocation"), f"{name} not placed, its claim allocated"
                continue
            results = status["allocation"]["devices"]["results"]
            assert len(results) == per_pod
            assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
            if same_numa:       # gpu-i sits on numa i % 2
                assert len({int(r["device"].rsplit("-", 1)[1]) % 2 for r in results}) == 1
            assert [r["name"] for r in status["reservedFor"]] == [name]
