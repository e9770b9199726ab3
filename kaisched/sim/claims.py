"""The resource-claim controller, as replay and the simulated cluster run it
(kube-controller-manager does it in a real cluster): each pod that names a
ResourceClaimTemplate gets a claim of its own, made from the template, owned
by the pod and named in the pod's status.resourceClaimStatuses; a claim whose
pod is gone is deleted with it."""
from __future__ import annotations

import hashlib
from typing import Any

from kaisched.cache.convert.draobjects import POD_CLAIM_ANNOTATION
from kaisched.cluster.client import ClusterClient
from kaisched.cluster.kinds import POD, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS

Obj = dict[str, Any]


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def make_claims(cluster: ClusterClient) -> int:
    """Make the claims pods wait for, and delete those of pods gone; how many changed."""
    templates = {(t["metadata"].get("namespace"), t["metadata"].get("name")): t
                 for kind in RESOURCE_CLAIM_TEMPLATES for t in cluster.list(kind)}
    changed = 0
    pods: dict[tuple[str, str], str] = {}
    for pod in cluster.list(POD):
        meta, spec, status = _dict(pod.get("metadata")), _dict(pod.get("spec")), _dict(pod.get("status"))
        pods[(meta.get("namespace", ""), meta.get("name", ""))] = str(meta.get("uid", ""))
        wanted = [e for e in spec.get("resourceClaims") or () if isinstance(e, dict)
                  and e.get("resourceClaimTemplateName")]
        if not wanted or status.get("phase") in ("Succeeded", "Failed"):
            continue
        made = list(status.get("resourceClaimStatuses") or [])
        names = {s.get("name") for s in made if isinstance(s, dict)}
        for entry in wanted:
            template = templates.get((meta.get("namespace"), entry["resourceClaimTemplateName"]))
            if entry.get("name") in names or template is None:
                continue            # made already, or its template is missing: the pod waits
            claim = cluster.create(_claim(pod, entry, template))
            made.append({"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]})
            changed += 1
        if len(made) != len(status.get("resourceClaimStatuses") or []):
            cluster.patch_status(POD, meta["namespace"], meta["name"], {"resourceClaimStatuses": made})
    for kind in RESOURCE_CLAIMS:
        for claim in cluster.list(kind):
            meta = claim["metadata"]
            owner = next((r for r in meta.get("ownerReferences") or ()
                          if r.get("kind") == "Pod" and r.get("controller")), None)
            if owner is None:
                continue
            uid = pods.get((meta.get("namespace", ""), owner.get("name", "")))
            if uid is None or (owner.get("uid") and uid and uid != owner["uid"]):
                cluster.delete(kind, meta["namespace"], meta["name"])
                changed += 1
    return changed


def _claim(pod: Obj, entry: Obj, template: Obj) -> Obj:
    meta = pod["metadata"]
    suffix = hashlib.sha256(f"{meta.get('uid')}/{entry['name']}".encode()).hexdigest()[:5]
    return {"apiVersion": template.get("apiVersion"), "kind": "ResourceClaim",
            "metadata": {"name": f"{meta['name']}-{entry['name']}-{suffix}",
                         "namespace": meta["namespace"],
                         "labels": dict(_dict(_dict(template.get("spec")).get("metadata")).get("labels") or {}),
                         "annotations": {POD_CLAIM_ANNOTATION: entry["name"]},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                              "uid": meta.get("uid", ""), "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": dict(_dict(_dict(template.get("spec")).get("spec")))}
