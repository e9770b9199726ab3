"""The PodGroup object the PodGrouper writes, and the patches that keep it and
the pods in step with the top owner. Plain dicts: this is the wire boundary."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from kaisched.api import labels as L
from kaisched.cluster.kinds import PODGROUP
from podgrouper.groupers import GroupSpec
from podgrouper.owners import OwnerRef, controller_refs

Obj = dict[str, Any]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kaisched-podgrouper"
# What the PodGrouper last computed from the owner. The spec is patched only
# when this changes (the owner was scaled), so a user's edits survive until then.
COMPUTED_ANNOTATION = "podgrouper.kaisched.io/computed"


def owner_reference(owner: Mapping[str, Any]) -> Obj:
    meta = owner.get("metadata") or {}
    return {"apiVersion": owner.get("apiVersion", "v1"), "kind": owner.get("kind", ""),
            "name": meta.get("name", ""), "uid": meta.get("uid", ""),
            "controller": True, "blockOwnerDeletion": True}


def computed(spec: GroupSpec) -> str:
    return orjson.dumps({"minMember": spec.min_member, "subGroups": _subgroups(spec)},
                        option=orjson.OPT_SORT_KEYS).decode()


def podgroup_object(namespace: str, spec: GroupSpec, owner: Mapping[str, Any], queue: str,
                    priority_class: str | None, created: str | None = None) -> Obj:
    """created: the creationTimestamp of the pod it is made for. The scheduler orders
    jobs by PodGroup age, and a gang is as old as its pods: the memory backend (replay,
    simulate) keeps it; an API server sets its own, a sync period later at most."""
    body: Obj = {"minMember": spec.min_member, "queue": queue}
    if priority_class:
        body["priorityClassName"] = priority_class
    if spec.subgroups:
        body["subGroups"] = _subgroups(spec)
    # The owner's estimate of its run time goes with its gang (the scheduler
    # reads it off the PodGroup: the owner is no kind it watches).
    owner_meta = owner.get("metadata") or {}
    annotations, labels = owner_meta.get("annotations") or {}, owner_meta.get("labels") or {}
    meta: Obj = {
        "name": spec.name, "namespace": namespace,
        "labels": {MANAGED_BY_LABEL: MANAGED_BY,
                   **{k: labels[k] for k in (L.KUEUE_MAX_EXEC_TIME,) if k in labels}},
        "annotations": {COMPUTED_ANNOTATION: computed(spec),
                        **{k: annotations[k] for k in (L.EXPECTED_RUNTIME,) if k in annotations}},
        "ownerReferences": [owner_reference(owner)],
    }
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": PODGROUP.api_version, "kind": PODGROUP.kind, "metadata": meta,
            "spec": body}


def is_managed(group: Mapping[str, Any]) -> bool:
    labels = (group.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY_LABEL) == MANAGED_BY


def needs_refresh(group: Mapping[str, Any], spec: GroupSpec) -> bool:
    """Ours, and the owner now asks for another minMember or other subgroups."""
    annotations = (group.get("metadata") or {}).get("annotations") or {}
    return is_managed(group) and annotations.get(COMPUTED_ANNOTATION) != computed(spec)


def refresh_patch(spec: GroupSpec) -> Obj:
    """minMember and subGroups only: the queue and priority class stay as made or edited."""
    return {"metadata": {"annotations": {COMPUTED_ANNOTATION: computed(spec)}},
            "spec": {"minMember": spec.min_member, "subGroups": _subgroups(spec) or None}}


def top_owner_ref(group: Mapping[str, Any]) -> OwnerRef | None:
    """The top owner a PodGroup was made for (its controller ownerReference)."""
    refs, _ = controller_refs(group)
    return refs[0] if len(refs) == 1 else None


def pod_patch(pod: Mapping[str, Any], group: str, role: str | None) -> Obj | None:
    """Name the pod's PodGroup and subgroup; None when it already says so. A
    subgroup label the pod already carries (set by its author) is kept."""
    meta = pod.get("metadata") or {}
    annotations, labels = meta.get("annotations") or {}, meta.get("labels") or {}
    patch: Obj = {}
    if annotations.get(L.POD_GROUP_ANNOTATION) != group:
        patch["annotations"] = {L.POD_GROUP_ANNOTATION: group}
    if role and not labels.get(L.SUBGROUP_LABEL):
        patch["labels"] = {L.SUBGROUP_LABEL: role}
    return {"metadata": patch} if patch else None


def _subgroups(spec: GroupSpec) -> list[Obj]:
    """Leaves with their minMember; a subgroup that holds others with its
    minSubGroup when it needs only some of them; each with its parent."""
    leaves = spec.leaves()
    out = []
    for sg in spec.subgroups:
        entry: Obj = {"name": sg.name}
        if sg.name in leaves:
            entry["minMember"] = sg.min_member
        elif sg.min_sub_group is not None:
            entry["minSubGroup"] = sg.min_sub_group
        if sg.parent:
            entry["parent"] = sg.parent
        out.append(entry)
    return out
