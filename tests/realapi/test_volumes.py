"""Volume binding against a real kube-apiserver, kaisched installed as shipped
(its ServiceAccount's RBAC is all it may do). No provisioner or PV controller
runs there: the tests play them.

A gang of two pods, each with a claim of a WaitForFirstConsumer class allowed
in one zone only. The scheduler places the gang there and writes each
claim's selected node, binding nothing. The test then plays the provisioner
and the PV controller: it creates each volume in the selected node's zone,
pre-bound to its claim, and binds the claim to it. The scheduler then binds
the pods.

A static local volume on one of two nodes: the scheduler sets its claimRef
(a patch naming its resourceVersion), the test binds the claim, and the pod
is bound on the volume's node.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from kaisched.api.volumes import SELECTED_NODE
from kaisched.cluster.kinds import POD, PODGROUP, PV, PVC, STORAGE_CLASS
from kaisched.cluster.kube import KubeCluster
from kaisched.errors import ApiError
from tests.builders.realapi import Components, eventually

OWNER = "vol"
ZONE = "topology.kubernetes.io/zone"


def _unprotected(admin: KubeCluster, kind, namespace: str, name: str) -> None:  # type: ignore[no-untyped-def]
    """Delete, taking the protection finalizers off first: no controller-manager
    is there to remove them."""
    try:
        admin.patch(kind, namespace, name, {"metadata": {"finalizers": None}})
        admin.delete(kind, namespace, name)
    except ApiError:
        pass


def _claim(namespace: str, name: str, cls: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}


def _claiming_pod(namespace: str, name: str, group: str, claim: str, cpu: str) -> dict[str, Any]:
    """A pod of the gang group, on the test's nodes, mounting the claim."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "annotations": {"kaisched.io/pod-group": group}},
            "spec": {"schedulerName": "kaisched", "nodeSelector": {"kaisched.io/test": OWNER},
                     "containers": [{"name": "main", "image": "trainer:1",
                                     "resources": {"requests": {"cpu": cpu}}}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}}


def test_a_gang_with_wait_for_first_consumer_claims_binds_once_they_are_bound(
        admin: KubeCluster, components: Components, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    zone = f"rt-vol-zone-{int(time.time()) % 100000}"
    fake_nodes(1, cpu="8", prefix="other", labels={ZONE: f"{zone}-other"})
    nodes = fake_nodes(2, cpu="8", prefix="zonal", labels={ZONE: zone})
    cls = f"{namespace}-wffc"
    admin.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                  "metadata": {"name": cls}, "provisioner": "rt-vol.example.com",
                  "volumeBindingMode": "WaitForFirstConsumer",
                  "allowedTopologies": [{"matchLabelExpressions": [
                      {"key": ZONE, "values": [zone]}]}]})
    volumes: list[str] = []
    try:
        admin.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                      "metadata": {"name": "train", "namespace": namespace},
                      "spec": {"minMember": 2}})
        for i in range(2):
            admin.create(_claim(namespace, f"ckpt-{i}", cls))
            admin.create(_claiming_pod(namespace, f"train-{i}", "train", f"ckpt-{i}", cpu="6"))

        # Each claim gets a node of the allowed zone, one pod per node; no pod is bound yet.
        def selected() -> dict[str, str] | None:
            found = {}
            for i in range(2):
                claim = admin.get(PVC, namespace, f"ckpt-{i}") or {}
                node = (claim.get("metadata", {}).get("annotations") or {}).get(SELECTED_NODE)
                if not node:
                    return None
                found[f"ckpt-{i}"] = node
            return found

        chosen = eventually(selected, what="selected-node on both claims", timeout=60)
        assert sorted(chosen.values()) == sorted(nodes), (chosen, components.logs()[-3000:])
        for i in range(2):
            assert not (admin.get(POD, namespace, f"train-{i}")["spec"].get("nodeName"))
        status = eventually(lambda: (admin.get(PODGROUP, namespace, "train").get("status")
                                     or {}).get("conditions"), what="the gang's condition")
        assert "to be provisioned on node" in status[0]["message"], status

        # The provisioner and the PV controller, played here.
        for claim_name in chosen:
            claim = admin.get(PVC, namespace, claim_name)
            name = f"{namespace}-{claim_name}"
            admin.create({"apiVersion": "v1", "kind": "PersistentVolume",
                          "metadata": {"name": name},
                          "spec": {"capacity": {"storage": "1Gi"},
                                   "accessModes": ["ReadWriteOnce"],
                                   "storageClassName": cls,
                                   "persistentVolumeReclaimPolicy": "Delete",
                                   "csi": {"driver": "rt-vol.example.com", "volumeHandle": name},
                                   "claimRef": {"apiVersion": "v1",
                                                "kind": "PersistentVolumeClaim",
                                                "namespace": namespace, "name": claim_name,
                                                "uid": claim["metadata"]["uid"]},
                                   "nodeAffinity": {"required": {"nodeSelectorTerms": [
                                       {"matchExpressions": [
                                           {"key": ZONE, "operator": "In", "values": [zone]}]}]}}}})
            volumes.append(name)
            admin.patch_status(PV, "", name, {"phase": "Bound"})
            admin.patch(PVC, namespace, claim_name, {"spec": {"volumeName": name}})
            admin.patch_status(PVC, namespace, claim_name, {"phase": "Bound"})

        # Now the gang binds, each pod where its claim's node was selected.
        def bound() -> dict[str, str] | None:
            where = {f"ckpt-{i}": (admin.get(POD, namespace, f"train-{i}")["spec"]
                                   .get("nodeName") or "") for i in range(2)}
            return where if all(where.values()) else None

        where = eventually(bound, what="the gang bound", timeout=60)
        assert set(where.values()) <= set(nodes), (where, components.logs()[-3000:])
        assert "kaisched_binds_total" in components.scheduler.get("/metrics")[1]
    finally:
        for i in range(2):
            _unprotected(admin, PVC, namespace, f"ckpt-{i}")
        for name in volumes:
            _unprotected(admin, PV, "", name)
        _unprotected(admin, STORAGE_CLASS, "", cls)


def test_a_static_local_volume_is_prebound_then_the_pod_bound_where_it_is(
        admin: KubeCluster, components: Components, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    nodes = fake_nodes(2, cpu="8", prefix="local")
    cls = f"{namespace}-local"
    volume = f"{namespace}-nvme"
    admin.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                  "metadata": {"name": cls}, "provisioner": "kubernetes.io/no-provisioner",
                  "volumeBindingMode": "WaitForFirstConsumer"})
    try:
        admin.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
                      "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                               "storageClassName": cls, "local": {"path": "/mnt/nvme0"},
                               "nodeAffinity": {"required": {"nodeSelectorTerms": [
                                   {"matchExpressions": [{"key": "kubernetes.io/hostname",
                                                          "operator": "In",
                                                          "values": [nodes[1]]}]}]}}}})
        admin.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                      "metadata": {"name": "scratch", "namespace": namespace},
                      "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                               "resources": {"requests": {"storage": "5Gi"}}}})
        admin.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": "solo", "namespace": namespace},
                      "spec": {"schedulerName": "kaisched",
                               "nodeSelector": {"kaisched.io/test": OWNER},
                               "containers": [{"name": "main", "image": "trainer:1",
                                               "resources": {"requests": {"cpu": "1"}}}],
                               "volumes": [{"name": "scratch", "persistentVolumeClaim": {
                                   "claimName": "scratch"}}]}})

        # The scheduler pre-binds the volume to the claim (its claimRef), binding nothing yet.
        claim_uid = admin.get(PVC, namespace, "scratch")["metadata"]["uid"]
        ref = eventually(lambda: (admin.get(PV, "", volume)["spec"].get("claimRef")),
                         what="the volume pre-bound", timeout=60)
        assert (ref["namespace"], ref["name"], ref.get("uid")) == (namespace, "scratch", claim_uid)
        assert not admin.get(POD, namespace, "solo")["spec"].get("nodeName")

        # The PV controller, played here: the claim bound to it.
        admin.patch_status(PV, "", volume, {"phase": "Bound"})
        admin.patch(PVC, namespace, "scratch", {"spec": {"volumeName": volume}})
        admin.patch_status(PVC, namespace, "scratch", {"phase": "Bound"})
        node = eventually(lambda: admin.get(POD, namespace, "solo")["spec"].get("nodeName"),
                          what="the pod bound", timeout=60)
        assert node == nodes[1], components.logs()[-3000:]
    finally:
        _unprotected(admin, PVC, namespace, "scratch")
        _unprotected(admin, PV, "", volume)
        _unprotected(admin, STORAGE_CLASS, "", cls)


def test_a_failed_provisioning_is_quoted_for_the_gang_waiting_on_its_claim(
        admin: KubeCluster, components: Components, namespace: str,
        fake_nodes: Callable[..., list[str]]) -> None:
    """The Events of failed provisionings are not listed when the scheduler
    starts; a pod waiting on a claim makes it list them, and the provisioner's
    words reach the gang's condition (the Event played here, as the external
    provisioner writes it)."""
    fake_nodes(1, cpu="8", prefix="prov")
    cls = f"{namespace}-immediate"
    admin.create({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                  "metadata": {"name": cls}, "provisioner": "rt-vol.example.com",
                  "volumeBindingMode": "Immediate"})
    try:
        claim = admin.create(_claim(namespace, "data", cls))
        admin.create({"apiVersion": "v1", "kind": "Event",
                      "metadata": {"name": "data.provisioning", "namespace": namespace},
                      "involvedObject": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                         "namespace": namespace, "name": "data",
                                         "uid": claim["metadata"]["uid"]},
                      "reason": "ProvisioningFailed", "type": "Warning",
                      "message": "rt-vol: no capacity left in the pool",
                      "source": {"component": "rt-vol-provisioner"}})
        admin.create({"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
                      "metadata": {"name": "prov", "namespace": namespace},
                      "spec": {"minMember": 1}})
        admin.create(_claiming_pod(namespace, "prov-0", "prov", "data", cpu="1"))

        def quoted() -> str | None:
            group = admin.get(PODGROUP, namespace, "prov") or {}
            conditions = (group.get("status") or {}).get("conditions") or []
            return next((c["message"] for c in conditions
                         if "no capacity left in the pool" in (c.get("message") or "")), None)

        message = eventually(quoted, what="the provisioner's words in the gang's condition",
                             timeout=60)
        assert "data" in message, (message, components.logs()[-3000:])
        assert not ((admin.get(POD, namespace, "prov-0") or {}).get("spec") or {}).get("nodeName")
    finally:
        _unprotected(admin, PVC, namespace, "data")
        _unprotected(admin, STORAGE_CLASS, "", cls)
