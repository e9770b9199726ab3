"""GPU sharing as written to the cluster: the reservation pod that holds a
shared GPU from the kubelet's view, and what is recorded on a sharer."""
from __future__ import annotations

from kaisched.api import gpuask as G
from kaisched.api.constraints import Toleration
from kaisched.cache.convert.common import Obj
from kaisched.framework.effects import Reservation, ShareGpu

CONTAINER = "resource-reservation"


def reservation_pod(r: Reservation) -> Obj:
    """A pod bound to the node from the start (no scheduler places it) that
    asks for one whole GPU and holds it while it lives; it tolerates what its
    sharers tolerate, and is deleted at once when asked (nothing to drain)."""
    namespace, name = r.pod.split("/", 1)
    resources = {"nvidia.com/gpu": "1", "cpu": "1m", "memory": "10Mi"}
    spec: Obj = {
        "nodeName": r.node,
        "priorityClassName": "system-node-critical",
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": CONTAINER, "image": r.image,
                        "resources": {"requests": resources,
                                      "limits": {**resources, "cpu": "50m", "memory": "100Mi"}}}],
    }
    if r.tolerations:
        spec["tolerations"] = [toleration(t) for t in r.tolerations]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": {"app": G.RESERVATION_APP, G.GPU_GROUP: r.group,
                       "app.kubernetes.io/part-of": "kaisched"},
            # A node autoscaler must not drain the node from under the sharers.
            "annotations": {"karpenter.sh/do-not-disrupt": "true"},
        },
        "spec": spec,
        "status": {"phase": "Pending"},     # as the API server makes it
    }


def toleration(t: Toleration) -> Obj:
    out: Obj = {"operator": t.operator}
    if t.key:
        out["key"] = t.key
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    return out


def sharer_patch(effect: ShareGpu) -> Obj:
    """The merge patch recording a sharer's devices: KAI's group label (one
    per device for a share of several) and its received-resource-type."""
    return {"metadata": {"labels": G.group_labels(effect.groups, effect.previous),
                         "annotations": {G.RECEIVED_TYPE: G.RECEIVED_FRACTION}}}
