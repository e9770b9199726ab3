"""bench volumes-5k: volume binding at scale, the local-NVMe way: 5,000 nodes
with two local PersistentVolumes each (a WaitForFirstConsumer class with no
provisioner), 1,000 gangs of 8 pods, each pod with a claim of its own. Every
pod is placed where a volume of its own is (the smallest that fits), and the
volume pre-bound to its claim at commit."""
from __future__ import annotations

from kaisched.bench.objects import Obj, node, pod, podgroup


def volumes(scale: float) -> tuple[list[Obj], list[Obj]]:
    count = int(5000 * scale)
    nodes = []
    for i in range(count):
        n = node(f"node-{i:05d}")
        n["metadata"]["labels"] = {"kubernetes.io/hostname": f"node-{i:05d}"}
        nodes.append(n)
    objs: list[Obj] = [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                        "metadata": {"name": "local-nvme"},
                        "provisioner": "kubernetes.io/no-provisioner",
                        "volumeBindingMode": "WaitForFirstConsumer"}]
    for i in range(count * 2):
        objs.append({"apiVersion": "v1", "kind": "PersistentVolume",
                     "metadata": {"name": f"nvme-{i // 2:05d}-{i % 2}"},
                     "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteOnce"],
                              "storageClassName": "local-nvme",
                              "local": {"path": f"/mnt/nvme{i % 2}"},
                              "nodeAffinity": {"required": {"nodeSelectorTerms": [
                                  {"matchExpressions": [{"key": "kubernetes.io/hostname",
                                                         "operator": "In",
                                                         "values": [f"node-{i // 2:05d}"]}]}]}}}})
    for g in range(int(1000 * scale)):
        name = f"gang-{g:04d}"
        objs.append(podgroup(name, 8))
        for t in range(8):
            claim = f"{name}-{t}-scratch"
            objs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                         "metadata": {"name": claim, "namespace": "bench"},
                         "spec": {"storageClassName": "local-nvme",
                                  "accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": "500Gi"}}}})
            p = pod(f"{name}-{t}", cpu="2", gpu=1, group=name)
            p["spec"]["volumes"] = [{"name": "scratch",
                                     "persistentVolumeClaim": {"claimName": claim}}]
            objs.append(p)
    return nodes, objs
