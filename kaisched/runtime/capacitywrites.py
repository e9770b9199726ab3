"""The writes of a gang's request for capacity (kaisched.api.provisioning):
a PodTemplate per pod set, made from one pod of that shape, and the
ProvisioningRequest, both owned by the gang's PodGroup; then the consume
annotations on the gang's pods. Each write tolerates finding its object
there already (a restart, or the same request decided twice before the
cache saw the first), so asking twice makes one request."""
from __future__ import annotations

from kaisched.api.provisioning import ATTEMPT_ANNOTATION, CLASS_ANNOTATION, CONSUME_ANNOTATION
from kaisched.cluster.client import ClusterClient, Obj
from kaisched.cluster.kinds import POD, POD_TEMPLATE, PODGROUP, PROVISIONING_REQUEST
from kaisched.errors import ConflictError, NotFoundError
from kaisched.framework.effects import AskCapacity, WithdrawCapacity

# What a PodTemplate keeps of a pod's spec: all of it but what binds it to a node.
_BOUND_FIELDS = ("nodeName",)


def ask_capacity(client: ClusterClient, effect: AskCapacity) -> None:
    ns, group = effect.job.split("/", 1)
    owner_obj = client.get(PODGROUP, ns, group)
    if owner_obj is None:
        raise NotFoundError(f"PodGroup {effect.job} not found: no owner for its request")
    meta = owner_obj.get("metadata") or {}
    owner = {"apiVersion": PODGROUP.api_version, "kind": "PodGroup", "name": group,
             "uid": meta.get("uid", "")}
    for pod_set in effect.pod_sets:
        pod_ns, pod_name = pod_set.pod.split("/", 1)
        pod = client.get(POD, pod_ns, pod_name)
        if pod is None:
            raise NotFoundError(f"pod {pod_set.pod} not found: no shape for {pod_set.template}")
        _create(client, _template(ns, pod_set.template, owner, pod))
    _create(client, {
        "apiVersion": PROVISIONING_REQUEST.api_version, "kind": "ProvisioningRequest",
        "metadata": {"name": effect.name, "namespace": ns, "ownerReferences": [owner],
                     "annotations": {ATTEMPT_ANNOTATION: str(effect.attempt)}},
        "spec": {"provisioningClassName": effect.class_name,
                 "podSets": [{"podTemplateRef": {"name": s.template}, "count": s.count}
                             for s in effect.pod_sets]}})
    notes = {CONSUME_ANNOTATION: effect.name, CLASS_ANNOTATION: effect.class_name}
    for key in effect.pods:
        pod_ns, pod_name = key.split("/", 1)
        try:
            client.patch(POD, pod_ns, pod_name, {"metadata": {"annotations": notes}})
        except NotFoundError:
            pass            # gone meanwhile: its controller's next pod is asked for next time


def withdraw_capacity(client: ClusterClient, effect: WithdrawCapacity) -> None:
    ns, name = effect.request.split("/", 1)
    for kind, names in ((PROVISIONING_REQUEST, (name,)), (POD_TEMPLATE, effect.templates)):
        for one in names:
            try:
                client.delete(kind, ns, one)
            except NotFoundError:
                pass        # gone already


def _template(namespace: str, name: str, owner: Obj, pod: Obj) -> Obj:
    pod_meta = pod.get("metadata") or {}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k not in _BOUND_FIELDS}
    return {"apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
            "template": {"metadata": {"labels": dict(pod_meta.get("labels") or {})},
                         "spec": spec}}


def _create(client: ClusterClient, obj: Obj) -> None:
    try:
        client.create(obj)
    except ConflictError:
        pass                # made already: the same name is the same request
