"""The resource-claim controller, as replay and the simulated cluster run it
(kube-controller-manager does it in a real cluster): each pod that names a
ResourceClaimTemplate gets a claim of its own, made from the template, owned
by the pod and named in the pod's status.resourceClaimStatuses; a claim whose
pod is gone is deleted with it.

An upstream PodGroup's spec.resourceClaims that name a template get one claim
each for the whole group, owned by the PodGroup and named in its
status.resourceClaimStatuses; a pod whose own entry equals the group's (same
name, same template) gets no claim of its own: its status names the group's.
A claim whose PodGroup is gone is deleted with it."""
from __future__ import annotations

import hashlib
from typing import Any

from kaisched.cache.convert.draobjects import POD_CLAIM_ANNOTATION, PODGROUP_CLAIM_ANNOTATION
from kaisched.cluster.client import ClusterClient
from kaisched.cluster.kinds import POD, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS, UPSTREAM_PODGROUPS

Obj = dict[str, Any]
_ENTRY = ("name", "resourceClaimName", "resourceClaimTemplateName")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _made(status: Obj) -> list[Obj]:
    return [s for s in status.get("resourceClaimStatuses") or [] if isinstance(s, dict)]


def make_claims(cluster: ClusterClient) -> int:
    """Make the claims pods and PodGroups wait for, and delete those of pods
    and PodGroups gone; how many changed."""
    templates = {(t["metadata"].get("namespace"), t["metadata"].get("name")): t
                 for kind in RESOURCE_CLAIM_TEMPLATES for t in cluster.list(kind)}
    groups, changed = _group_claims(cluster, templates)
    pods: dict[tuple[str, str], str] = {}
    for pod in cluster.list(POD):
        meta, spec, status = _dict(pod.get("metadata")), _dict(pod.get("spec")), _dict(pod.get("status"))
        pods[(meta.get("namespace", ""), meta.get("name", ""))] = str(meta.get("uid", ""))
        wanted = [e for e in spec.get("resourceClaims") or () if isinstance(e, dict)
                  and e.get("resourceClaimTemplateName")]
        if not wanted or status.get("phase") in ("Succeeded", "Failed"):
            continue
        group_name = _dict(spec.get("schedulingGroup")).get("podGroupName")
        group = groups.get((str(meta.get("namespace", "")), str(group_name))) if group_name else None
        if group_name and group is None:
            continue        # its PodGroup is not there yet: whose claim an entry is, it says
        made = _made(status)
        names = {s.get("name") for s in made}
        for entry in wanted:
            if entry.get("name") in names:
                continue            # made already
            shared = _shared(group, entry)
            if shared is not None:
                if shared.get("resourceClaimName"):     # the group's claim, once it is made
                    made.append({"name": entry["name"], "resourceClaimName": shared["resourceClaimName"]})
                continue
            template = templates.get((meta.get("namespace"), entry["resourceClaimTemplateName"]))
            if template is None:
                continue            # its template is missing: the pod waits
            claim = cluster.create(_claim(pod, entry, template))
            made.append({"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]})
            changed += 1
        if len(made) != len(_made(status)):
            cluster.patch_status(POD, meta["namespace"], meta["name"], {"resourceClaimStatuses": made})
    return changed + _collect(cluster, pods, groups)


def _group_claims(cluster: ClusterClient, templates: dict[Any, Obj]
                  ) -> tuple[dict[tuple[str, str], tuple[Obj, list[Obj]]], int]:
    """Each upstream PodGroup (read once, in the newest version that shows it)
    with its claims from templates made; its made claims as its status names them."""
    groups: dict[tuple[str, str], tuple[Obj, list[Obj]]] = {}
    changed = 0
    for kind in UPSTREAM_PODGROUPS:
        for group in cluster.list(kind):
            meta = group["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if key in groups:
                continue
            status = _dict(group.get("status"))
            made = _made(status)
            names = {s.get("name") for s in made}
            for entry in _dict(group.get("spec")).get("resourceClaims") or ():
                if not isinstance(entry, dict) or not entry.get("resourceClaimTemplateName") \
                        or entry.get("name") in names:
                    continue
                template = templates.get((key[0], entry["resourceClaimTemplateName"]))
                if template is None:
                    continue        # its template is missing: the group's pods wait
                claim = cluster.create(_group_claim(group, entry, template))
                made.append({"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]})
                changed += 1
            if len(made) != len(_made(status)):
                group = cluster.patch_status(kind, key[0], key[1], {"resourceClaimStatuses": made})
            groups[key] = (group, made)
    return groups, changed


def _shared(group: tuple[Obj, list[Obj]] | None, entry: Obj) -> Obj | None:
    """The group's claim status for a pod's entry equal to one of the group's
    claims (None: the entry is the pod's own)."""
    if group is None:
        return None
    obj, made = group
    for claim in _dict(obj.get("spec")).get("resourceClaims") or ():
        if isinstance(claim, dict) and all(claim.get(f) == entry.get(f) for f in _ENTRY):
            return next((s for s in made if s.get("name") == claim.get("name")), {})
    return None


def _collect(cluster: ClusterClient, pods: dict[tuple[str, str], str],
             groups: dict[tuple[str, str], tuple[Obj, list[Obj]]]) -> int:
    """Delete the claims whose owner (pod or PodGroup) is gone."""
    changed = 0
    for kind in RESOURCE_CLAIMS:
        for claim in cluster.list(kind):
            meta = claim["metadata"]
            owner = next((r for r in meta.get("ownerReferences") or ()
                          if r.get("kind") in ("Pod", "PodGroup") and r.get("controller")), None)
            if owner is None:
                continue
            key = (meta.get("namespace", ""), owner.get("name", ""))
            if owner["kind"] == "Pod":
                uid = pods.get(key)
            else:
                found = groups.get(key)
                uid = str(found[0]["metadata"].get("uid", "")) if found is not None else None
            if uid is None or (owner.get("uid") and uid and uid != owner["uid"]):
                cluster.delete(kind, meta["namespace"], meta["name"])
                changed += 1
    return changed


def _name(owner: str, uid: str, claim: str) -> str:
    suffix = hashlib.sha256(f"{uid}/{claim}".encode()).hexdigest()[:5]
    return f"{owner}-{claim}-{suffix}"


def _claim(pod: Obj, entry: Obj, template: Obj) -> Obj:
    meta = pod["metadata"]
    return _made_from(template, {
        "name": _name(meta["name"], str(meta.get("uid")), entry["name"]),
        "namespace": meta["namespace"],
        "annotations": {POD_CLAIM_ANNOTATION: entry["name"]},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                             "uid": meta.get("uid", ""), "controller": True,
                             "blockOwnerDeletion": True}]})


def _group_claim(group: Obj, entry: Obj, template: Obj) -> Obj:
    meta = group["metadata"]
    return _made_from(template, {
        "name": _name(meta["name"], str(meta.get("uid")), entry["name"]),
        "namespace": meta["namespace"],
        "annotations": {PODGROUP_CLAIM_ANNOTATION: entry["name"]},
        "ownerReferences": [{"apiVersion": group.get("apiVersion"), "kind": "PodGroup",
                             "name": meta["name"], "uid": meta.get("uid", ""), "controller": True,
                             "blockOwnerDeletion": True}]})


def _made_from(template: Obj, meta: Obj) -> Obj:
    """A claim of the template's spec and labels, with this metadata."""
    spec = _dict(template.get("spec"))
    return {"apiVersion": template.get("apiVersion"), "kind": "ResourceClaim",
            "metadata": {**meta, "labels": dict(_dict(spec.get("metadata")).get("labels") or {})},
            "spec": dict(_dict(spec.get("spec")))}
