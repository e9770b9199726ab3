"""Storage objects -> kaisched.api.volumes values: StorageClasses, claims,
volumes, CSINodes' attach limits, and the claims a pod mounts."""
from __future__ import annotations

from typing import Any

from kaisched.api.constraints import LabelSelector, Requirement, SelectorTerm
from kaisched.api.quantity import parse_quantity
from kaisched.api.types import NodeName
from kaisched.api.volumes import (
    DEFAULT_CLASS_ANNOTATION,
    SELECTED_NODE,
    BindingMode,
    ClaimInfo,
    PodClaim,
    StorageClassInfo,
    VolumeInfo,
)
from kaisched.cache.convert.common import Obj, metadata

PROVISIONING_FAILED = "ProvisioningFailed"


def _requirements(raw: Any) -> tuple[Requirement, ...]:
    return tuple(Requirement(str(r.get("key", "")), str(r.get("operator", "")),
                             tuple(str(v) for v in r.get("values") or ()))
                 for r in raw or () if isinstance(r, dict))


def _terms(raw: Any) -> tuple[SelectorTerm, ...]:
    return tuple(SelectorTerm(_requirements(t.get("matchExpressions")),
                              _requirements(t.get("matchFields")))
                 for t in raw or () if isinstance(t, dict))


def _bytes(raw: Any, where: str, problems: list[str]) -> int:
    if raw is None:
        return 0
    try:
        return int(parse_quantity(raw))
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return 0


def storage_class(obj: Obj) -> StorageClassInfo:
    meta = metadata(obj)
    mode = obj.get("volumeBindingMode") or "Immediate"
    topologies = tuple(
        SelectorTerm(tuple(Requirement(str(e.get("key", "")), "In",
                                       tuple(str(v) for v in e.get("values") or ()))
                           for e in t.get("matchLabelExpressions") or () if isinstance(e, dict)))
        for t in obj.get("allowedTopologies") or () if isinstance(t, dict))
    annotations = meta.get("annotations") or {}
    return StorageClassInfo(
        name=str(meta.get("name", "")), provisioner=str(obj.get("provisioner") or ""),
        mode=BindingMode.WAIT if mode == BindingMode.WAIT.value else BindingMode.IMMEDIATE,
        allowed_topologies=topologies,
        default=str(annotations.get(DEFAULT_CLASS_ANNOTATION, "")).lower() == "true")


def claim(obj: Obj) -> ClaimInfo:
    meta, spec, status = metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    problems: list[str] = []
    namespace = meta.get("namespace") or "default"
    requests = ((spec.get("resources") or {}).get("requests") or {})
    selector = spec.get("selector")
    class_name = spec.get("storageClassName")
    annotations = meta.get("annotations") or {}
    return ClaimInfo(
        key=f"{namespace}/{meta.get('name', '')}", uid=str(meta.get("uid", "")),
        class_name=str(class_name) if class_name is not None else None,
        volume_name=str(spec.get("volumeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        access_modes=frozenset(str(m) for m in spec.get("accessModes") or ()),
        request=_bytes(requests.get("storage"), "spec.resources.requests.storage", problems),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        selector=_selector(selector) if isinstance(selector, dict) else None,
        selected_node=NodeName(annotations[SELECTED_NODE]) if annotations.get(SELECTED_NODE) else None,
        deleting=bool(meta.get("deletionTimestamp")),
        problem="; ".join(problems) or None)


def _selector(raw: Obj) -> LabelSelector:
    pairs = {str(k): str(v) for k, v in (raw.get("matchLabels") or {}).items()}
    return LabelSelector(tuple(sorted(pairs.items())), _requirements(raw.get("matchExpressions")))


def volume(obj: Obj) -> VolumeInfo:
    meta, spec, status = metadata(obj), obj.get("spec") or {}, obj.get("status") or {}
    problems: list[str] = []
    ref = spec.get("claimRef") if isinstance(spec.get("claimRef"), dict) else None
    affinity = ((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")
    csi = spec.get("csi")
    if not isinstance(csi, dict):
        csi = {}
    return VolumeInfo(
        name=str(meta.get("name", "")), class_name=str(spec.get("storageClassName") or ""),
        capacity=_bytes((spec.get("capacity") or {}).get("storage"), "spec.capacity.storage",
                        problems),
        access_modes=frozenset(str(m) for m in spec.get("accessModes") or ()),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        node_affinity=_terms(affinity),
        claim=f"{ref.get('namespace') or 'default'}/{ref.get('name', '')}" if ref else None,
        claim_uid=str(ref.get("uid") or "") if ref else "",
        phase=str(status.get("phase") or "Available"),
        driver=str(csi.get("driver") or ""),
        labels=tuple(sorted((str(k), str(v)) for k, v in (meta.get("labels") or {}).items())),
        deleting=bool(meta.get("deletionTimestamp")))


def csi_limits(obj: Obj) -> tuple[str, dict[str, int]]:
    """A CSINode: its node's name, and per driver how many volumes it may attach."""
    limits: dict[str, int] = {}
    for driver in (obj.get("spec") or {}).get("drivers") or ():
        if not isinstance(driver, dict):
            continue
        count = (driver.get("allocatable") or {}).get("count")
        if isinstance(count, int) and not isinstance(count, bool) and driver.get("name"):
            limits[str(driver["name"])] = count
    return str(metadata(obj).get("name", "")), limits


def pod_pvcs(spec: Obj, namespace: str, pod_name: str) -> tuple[PodClaim, ...]:
    """The claims a pod mounts, by key; an ephemeral volume's is `<pod>-<volume>`."""
    found: dict[str, PodClaim] = {}
    for vol in spec.get("volumes") or ():
        if not isinstance(vol, dict):
            continue
        pvc = vol.get("persistentVolumeClaim")
        if isinstance(pvc, dict) and pvc.get("claimName"):
            key = f"{namespace}/{pvc['claimName']}"
            found.setdefault(key, PodClaim(key))
        elif isinstance(vol.get("ephemeral"), dict):
            key = f"{namespace}/{pod_name}-{vol.get('name', '')}"
            found.setdefault(key, PodClaim(key, ephemeral=True))
    return tuple(found[k] for k in sorted(found))


def provisioning_failure(obj: Obj) -> tuple[str, str] | None:
    """A ProvisioningFailed Event of a claim: (claim key, message), else None."""
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    if obj.get("reason") != PROVISIONING_FAILED or involved.get("kind") != "PersistentVolumeClaim":
        return None
    namespace = involved.get("namespace") or metadata(obj).get("namespace") or "default"
    return f"{namespace}/{involved.get('name', '')}", str(obj.get("message") or obj.get("note") or "")
