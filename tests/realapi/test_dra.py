"""A pod with a ResourceClaim, scheduled by kaisched on a real kube-apiserver
that serves resource.k8s.io (v1beta1 in 1.32, v1 from 1.34): the claim is
allocated a device of the fake Node's ResourceSlice and reserved for the pod,
both through its status, and the pod is bound there. The test plays the DRA
driver (it publishes the slice); the scheduler runs here, its cycles one at a
time, under a scheduler name of its own so that it touches no other pod of a
shared server."""
from __future__ import annotations

from typing import Callable

import attrs

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.client import Obj
from kaisched.cluster.kinds import DEVICE_CLASSES, POD, RESOURCE_CLAIMS, RESOURCE_SLICES, Kind
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import ApiError
from kaisched.framework import default_config
from kaisched.runtime.scheduler import Scheduler
from tests.builders.realapi import Components, delete_quietly, eventually

OWNER = "dra"
DRIVER = "gpu.rt-dra.example.com"
SCHEDULER = "kaisched-rt-dra"


def served(admin: KubeCluster, kinds: tuple[Kind, ...]) -> Kind:
    """The newest version of a DRA kind the server serves."""
    for kind in kinds:
        try:
            admin.list(kind)
            return kind
        except ApiError:        # not served (404)
            continue
    raise AssertionError(f"the server serves no version of {kinds[0].kind}")


def device_fields(kind: Kind, attributes: Obj) -> Obj:
    """v1 puts a device's attributes on it; v1beta1 under `basic`."""
    return {"attributes": attributes} if kind.version == "v1" else {"basic": {"attributes": attributes}}


def request(kind: Kind, body: Obj) -> Obj:
    """v1 puts an exact request under `exactly`; v1beta1 on the request."""
    return {"name": "gpu", "exactly": body} if kind.version == "v1" else {"name": "gpu", **body}


def publish(admin: KubeCluster, namespace: str, node: str, scheduler: str) -> tuple[Obj, Kind, Kind, Kind]:
    """A DeviceClass, the node's ResourceSlice (a T4 and an L4), a claim for an
    L4 and the pod that names it; returns the pod and the kinds served."""
    classes, slices, claims = (served(admin, k) for k in (DEVICE_CLASSES, RESOURCE_SLICES,
                                                          RESOURCE_CLAIMS))
    admin.create({"apiVersion": classes.api_version, "kind": "DeviceClass",
                  "metadata": {"name": f"rt-dra-{namespace[-5:]}"},
                  "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}})
    admin.create({"apiVersion": slices.api_version, "kind": "ResourceSlice",
                  "metadata": {"name": f"rt-dra-{node}"},
                  "spec": {"driver": DRIVER, "nodeName": node,
                           "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                           "devices": [{"name": f"gpu-{i}", **device_fields(slices, {
                               "model": {"string": model}})}
                               for i, model in enumerate(("T4", "L4"))]}})
    selector = f'device.attributes["{DRIVER}"].model == "L4"'
    admin.create({"apiVersion": claims.api_version, "kind": "ResourceClaim",
                  "metadata": {"name": "gpu", "namespace": namespace},
                  "spec": {"devices": {"requests": [request(claims, {
                      "deviceClassName": f"rt-dra-{namespace[-5:]}",
                      "selectors": [{"cel": {"expression": selector}}]})]}}})
    pod = admin.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "infer", "namespace": namespace},
        "spec": {"schedulerName": scheduler,
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu"}],
                 "containers": [{"name": "main", "image": "infer:1",
                                 "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}]}})
    return pod, classes, slices, claims


def check_allocated(admin: KubeCluster, claims: Kind, namespace: str, node: str, pod: Obj) -> None:
    status = admin.get(claims, namespace, "gpu")["status"]
    results = [{k: r[k] for k in ("request", "driver", "pool", "device")}
               for r in status["allocation"]["devices"]["results"]]
    assert results == [{"request": "gpu", "driver": DRIVER, "pool": node, "device": "gpu-1"}]
    terms = status["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == [node]
    assert [(r["name"], r["uid"]) for r in status["reservedFor"]] == [("infer", pod["metadata"]["uid"])]


def unpublish(admin: KubeCluster, namespace: str, node: str, kinds: tuple[Kind, Kind, Kind]) -> None:
    classes, slices, claims = kinds
    delete_quietly(admin, POD, namespace, "infer")
    delete_quietly(admin, claims, namespace, "gpu")
    delete_quietly(admin, slices, "", f"rt-dra-{node}")
    delete_quietly(admin, classes, "", f"rt-dra-{namespace[-5:]}")


def test_a_pod_with_a_resource_claim_is_bound_with_its_device_allocated(
        admin: KubeCluster, installed: list[Obj], namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    node = fake_nodes(1, cpu="8")[0]
    kinds = tuple(served(admin, k) for k in (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS))
    try:
        pod, *_ = publish(admin, namespace, node, SCHEDULER)
        registry = register_builtins()
        config = attrs.evolve(default_config(registry), scheduler_name=SCHEDULER)
        scheduler = Scheduler(admin, config, registry, ManualClock())

        def cycle() -> str | None:
            result = scheduler.run_once()
            assert not result.report.failed, result.report.failed
            return (admin.get(POD, namespace, "infer") or {}).get("spec", {}).get("nodeName")

        try:
            bound = eventually(cycle, what="the pod bound", timeout=30)
        except AssertionError:
            raise AssertionError(f"not bound: {admin.get(POD, namespace, 'infer').get('status')}; "
                                 f"claim {admin.get(kinds[2], namespace, 'gpu')}") from None
        assert bound == node
        check_allocated(admin, kinds[2], namespace, node, pod)
    finally:
        unpublish(admin, namespace, node, kinds)  # type: ignore[arg-type]


def test_installed_as_shipped_it_allocates_a_claim_and_binds_its_pod(
        admin: KubeCluster, components: Components, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    """The same by `kaisched run` as installed: the shipped RBAC lets it read the
    devices and claims and write the claim's status."""
    node = fake_nodes(1, cpu="8")[0]
    kinds = tuple(served(admin, k) for k in (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS))
    try:
        pod, *_ = publish(admin, namespace, node, "kaisched")
        bound = eventually(lambda: (admin.get(POD, namespace, "infer") or {}).get("spec", {}).get(
            "nodeName"), what="the pod bound by the installed scheduler", timeout=90)
        assert bound == node, components.logs()
        check_allocated(admin, kinds[2], namespace, node, pod)
    finally:
        unpublish(admin, namespace, node, kinds)  # type: ignore[arg-type]
