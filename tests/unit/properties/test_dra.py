"""Properties of device allocation over random clusters and gangs, run
through the replay path: no device is ever allocated to two claims; no claim
is allocated for a gang that was not placed whole; every bound pod's claims
are allocated on its node and reserved for it."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, RESOURCE_CLAIMS
from kaisched.framework import default_config
from kaisched.tools.replay import replay
from tests.builders.dra import DRIVER, Obj, objects


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


def held_by_running(gpus: list[int], held: list[int]) -> list[Obj]:
    """Low-priority pods running on each node, each holding one of its GPUs."""
    objs: list[Obj] = []
    for n, (count, busy) in enumerate(zip(gpus, held, strict=False)):
        for i in range(min(count, busy)):
            name, node = f"low-{n}-{i}", f"node-{n}"
            objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": name, "namespace": "default"},
                         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                             "deviceClassName": "gpu"}}]}},
                         "status": {"allocation": {"devices": {"results": [
                             {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{i}"}]}},
                             "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]}})
            objs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                         "spec": {"schedulerName": "kaisched", "nodeName": node,
                                  "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                                  "containers": [{"name": "main", "resources": {
                                      "requests": {"cpu": "1"}}}]},
                         "status": {"phase": "Running"}})
    return objs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpus=st.lists(st.integers(1, 3), min_size=1, max_size=3),
       held=st.lists(st.integers(0, 3), min_size=3, max_size=3),
       gangs=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 2), st.booleans()),
                      min_size=1, max_size=3),
       sessions=st.integers(1, 4))
def test_preemption_never_allocates_a_device_twice(gpus: list[int], held: list[int],
                                                   gangs: list[tuple[int, int, bool]],
                                                   sessions: int) -> None:
    objs = objects(gpus, gangs) + held_by_running(gpus, held)
    objs.insert(0, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": "high"}, "value": 1000})
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith("gang-"):
            obj["spec"]["priorityClassName"] = "high"
    registry = register_builtins()
    result = replay(objs, default_config(registry), registry, sessions)
    owner: dict[tuple[str, str, str], str] = {}
    for kind in RESOURCE_CLAIMS:
        for claim in result.cluster.list(kind, "default"):
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for r in allocation.get("devices", {}).get("results", []):
                key = (r["driver"], r["pool"], r["device"])
                assert key not in owner, f"{key} allocated to {owner[key]} and {claim['metadata']['name']}"
                owner[key] = claim["metadata"]["name"]
    for g, (size, _, _) in enumerate(gangs):
        bound = [t for t in range(size)
                 if result.cluster.get(POD, "default", f"gang-{g}-{t}")["spec"].get("nodeName")]
        assert not bound or len(bound) == size, f"gang-{g} placed in part"
