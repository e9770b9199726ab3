"""Snapshot files: load a Snapshot, a `kind: List`, or multi-document YAML of
plain Kubernetes objects; build (and redact) a Snapshot for dumping."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import attrs
import orjson
import yaml

from kaisched.api import labels as L
from kaisched.api.clock import from_rfc3339, to_rfc3339
from kaisched.cluster.files import LOADER, read_text, yaml_problem
from kaisched.errors import InputError

SNAPSHOT_API_VERSION = "kaisched.io/v1alpha1"
_CORE_KINDS = {"Pod", "Node", "Namespace", "Event", "ConfigMap", "Secret", "Service",
               "ServiceAccount", "PersistentVolume", "PersistentVolumeClaim", "LimitRange",
               "ResourceQuota", "Endpoints", "ReplicationController"}
_KNOWN_GROUP_KINDS = {
    "apps": {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision"},
    "batch": {"Job", "CronJob"},
    "scheduling.k8s.io": {"PriorityClass", "PodGroup", "Workload"},     # the Workload API too
    "scheduling.kaisched.io": {"PodGroup", "Queue"},
    "storage.k8s.io": {"StorageClass", "CSINode"},
    "policy": {"PodDisruptionBudget"},
}


@attrs.frozen
class LoadedFile:
    objects: list[dict[str, Any]]
    config: dict[str, Any] | None = None
    taken: float | None = None          # when a Snapshot was dumped, if it says


def load_file(path: str | Path, check_kinds: bool = True) -> LoadedFile:
    """Objects of a file; `check_kinds=False` leaves unknown kinds to the caller
    (replay reports and skips them, see kaisched.validation)."""
    return load_text(read_text(path), str(path), check_kinds)


def load_text(text: str, source: str = "input", check_kinds: bool = True) -> LoadedFile:
    if text.lstrip().startswith("{"):
        try:
            docs: list[Any] = [orjson.loads(text)]
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{source}: invalid JSON: {exc}") from None
    else:
        try:
            docs = [d for d in yaml.load_all(text, Loader=LOADER) if d is not None]
        except yaml.YAMLError as exc:
            raise InputError(f"{source}: {yaml_problem(exc)}") from None
    if len(docs) == 1 and is_scenario(docs[0]):
        raise InputError(scenario_not_objects(source))
    objects: list[dict[str, Any]] = []
    config = None
    taken = None
    for i, doc in enumerate(docs, 1):
        if not isinstance(doc, dict):
            raise InputError(f"{source}: document {i} is not a Kubernetes object")
        if doc.get("kind") == "Snapshot":
            if doc.get("apiVersion") != SNAPSHOT_API_VERSION:
                raise InputError(f"{source}: Snapshot apiVersion must be {SNAPSHOT_API_VERSION}")
            config = doc.get("config") or None
            stamp = (doc.get("metadata") or {}).get("creationTimestamp")
            taken = from_rfc3339(stamp) if isinstance(stamp, str) else None
            objects.extend(_checked(doc.get("items") or [], source, i, check_kinds))
        elif str(doc.get("kind", "")).endswith("List") and "items" in doc:
            objects.extend(_checked(doc.get("items") or [], source, i, check_kinds))
        else:
            objects.extend(_checked([doc], source, i, check_kinds))
    return LoadedFile(objects, config, taken)


def is_scenario(doc: Any) -> bool:
    """A `kaisched simulate` scenario: a mapping of a scenario's keys, no kind."""
    return isinstance(doc, dict) and "kind" not in doc and \
        bool({"nodePools", "jobs", "generate"} & set(doc))


def scenario_not_objects(source: str) -> str:
    """The one message of every command that reads Kubernetes objects and is given a
    scenario (replay, explain, --from-snapshot, podgrouper sync)."""
    return (f"{source}: this is a simulate scenario (nodePools, queues, jobs), not Kubernetes "
            f"objects: run it with `kaisched simulate {source}`")


def _checked(items: Iterable[Any], source: str, doc: int, check_kinds: bool) -> list[dict[str, Any]]:
    out = []
    for obj in items:
        where = f"{source}: document {doc}"
        if not isinstance(obj, dict):
            raise InputError(f"{where}: an item is not an object")
        api, kind = obj.get("apiVersion"), obj.get("kind")
        meta = obj.get("metadata")
        if not isinstance(api, str) or not api or not isinstance(kind, str) or not kind:
            raise InputError(f"{where}: every object needs apiVersion and kind")
        if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
            raise InputError(f"{where}: {kind} has no metadata.name")
        group = api.rpartition("/")[0]
        known = _CORE_KINDS if api == "v1" else _KNOWN_GROUP_KINDS.get(group)
        if check_kinds and known is not None and kind not in known:
            raise InputError(f"{where}: unknown kind {kind!r} for apiVersion {api}")
        out.append(obj)
    return out


# What scheduling reads of a pod, everything else is dropped by --redact.
_POD_SPEC_KEYS = ("nodeName", "schedulerName", "priority", "priorityClassName", "nodeSelector",
                  "affinity", "tolerations", "overhead", "topologySpreadConstraints",
                  "schedulingGroup", "workloadRef")
# sim.kaisched.io/: the run times a what-if reads (remaining, duration).
_KEEP_ANNOTATION_PREFIXES = ("kaisched.io/", "sim.kaisched.io/", "gang.scheduling.koordinator.sh/",
                             "scheduling.k8s.io/", "kai.scheduler/",
                             # volume binding: a claim's selected node, the default class
                             "volume.kubernetes.io/selected-node",
                             "storageclass.kubernetes.io/is-default-class")


def redact(obj: dict[str, Any]) -> dict[str, Any]:
    """Keep what scheduling reads: no env, commands, images or foreign annotations."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("managedFields", None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k.startswith(_KEEP_ANNOTATION_PREFIXES)
                   or k in (L.VOLCANO_GROUP_NAME, L.KAI_POD_GROUP_ANNOTATION)}
    meta["annotations"] = annotations
    if not annotations:
        del meta["annotations"]
    out = {**obj, "metadata": meta}
    if obj.get("kind") == "Pod":
        spec = obj.get("spec") or {}
        kept = {k: spec[k] for k in _POD_SPEC_KEYS if k in spec}

        def container(c: dict[str, Any]) -> dict[str, Any]:
            kept: dict[str, Any] = {k: c[k] for k in ("name", "resources", "restartPolicy") if k in c}
            ports = [p for p in c.get("ports") or () if isinstance(p, dict) and p.get("hostPort")]
            if ports:          # host ports are a placement rule
                kept["ports"] = ports
            return kept

        # The claims it mounts place it; other volumes (secrets, config) are dropped.
        claims = [v for v in spec.get("volumes") or ()
                  if isinstance(v, dict) and (v.get("persistentVolumeClaim") or v.get("ephemeral"))]
        if claims:
            kept["volumes"] = claims
        kept["containers"] = [container(c) for c in spec.get("containers") or ()]
        if spec.get("initContainers"):
            kept["initContainers"] = [container(c) for c in spec["initContainers"]]
        status = obj.get("status") or {}
        out["spec"] = kept
        # startTime: how long a running pod has run, for a what-if's run times.
        out["status"] = {k: status[k] for k in ("phase", "conditions", "startTime") if k in status}
    return out


def build_snapshot(objects: Iterable[dict[str, Any]], config: dict[str, Any],
                   redacted: bool = False, taken: float | None = None) -> dict[str, Any]:
    """taken: when the objects were read; a what-if counts run times from it."""
    items = [redact(o) if redacted else o for o in objects]
    out: dict[str, Any] = {"apiVersion": SNAPSHOT_API_VERSION, "kind": "Snapshot"}
    if taken is not None:
        out["metadata"] = {"creationTimestamp": to_rfc3339(taken)}
    return {**out, "config": config, "items": items}
