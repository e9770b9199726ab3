"""Objects as the API server sees them: what a cluster would reject.

A file that replays happily must also apply to a real cluster, else a policy
tried in replay or simulate meets a different world on the cluster. Three
checks, the ones a kube-apiserver makes on create:

- built-in kinds against the OpenAPI schemas of one pinned Kubernetes version
  (bundled by `kubernetes-validate`), unknown fields refused as
  `kubectl apply`'s strict field validation does;
- kaisched's own kinds against the CRD schemas in config/crds;
- the semantic rules no schema states and scheduling depends on: extended
  resources (nvidia.com/gpu) and hugepages need limits equal to their
  requests, whole numbers, requests within limits, names that are DNS-1123,
  labels and tolerations the API accepts, priority values in range.

An object of a kind neither Kubernetes nor kaisched serves is a problem too
(a cluster has nowhere to put it). `check_object` judges one object,
`partition` a whole input (and refuses a second object of the same name).
"""
from __future__ import annotations

import functools
import importlib.resources
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import attrs
import jsonschema
import orjson
import yaml
from referencing import Registry, Resource

from kaisched.api.quantity import parse_quantity
from kaisched.cluster.kinds import UPSTREAM_PODGROUP, XK8S_PODGROUP, kind_for
from kaisched.errors import InputError

KUBERNETES_VERSION = "1.32"
Obj = Mapping[str, Any]


@attrs.frozen
class Problem:
    """Why a cluster would reject an object: which object, which field, which rule."""

    object: str         # "Pod research/bert-0"
    field: str          # "spec.containers[0].resources.limits"
    rule: str

    def __str__(self) -> str:
        return f"{self.object}: {self.field}: {self.rule}"


def check_object(raw: Obj) -> list[Problem]:
    """Every reason a Kubernetes API server (with kaisched's CRDs) would refuse `raw` on create."""
    label = describe(raw)
    if not isinstance(raw, Mapping):
        return [Problem(label, "", "not an object")]
    api, kind = raw.get("apiVersion"), raw.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str) or not api or not kind:
        return [Problem(label, "apiVersion", "apiVersion and kind are required")]
    found: list[tuple[str, str]] = []
    group = api.rpartition("/")[0]
    if _read_without_schema(api, kind):
        found += _schema_errors(_object_meta(), raw.get("metadata"), "metadata")
    elif group in _crds():
        crd = _crds()[group]
        if (api, kind) not in crd:
            served = ", ".join(sorted(f"{k} {a}" for a, k in crd))
            return [Problem(label, "apiVersion",
                            f"{group} serves no {kind} in {api.rpartition('/')[2]} (it serves {served})")]
        found += _schema_errors(crd[(api, kind)], raw)
        found += _schema_errors(_object_meta(), raw.get("metadata"), "metadata")
    elif _is_builtin_group(group):
        validator = _builtin(api, kind)
        if validator is None:
            return [Problem(label, "kind", f"unknown kind {kind} in {api}: "
                                           f"Kubernetes {KUBERNETES_VERSION} serves no such kind")]
        found += _schema_errors(validator, _without_newer_fields(raw, group, kind))
    else:
        return [Problem(label, "apiVersion",
                        f"unknown kind {kind} in {api}: neither Kubernetes {KUBERNETES_VERSION} "
                        "nor kaisched serves it")]
    found += _semantic(raw, kind, group)
    return [Problem(label, f, r) for f, r in found]


def partition(objects: Iterable[Obj]) -> tuple[list[Obj], list[Problem]]:
    """Split objects into those a cluster would accept, in input order, and the
    problems of the rest; an object whose name an earlier one took is refused too."""
    kept: list[Obj] = []
    problems: list[Problem] = []
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        found = check_object(obj)
        if not found:
            key = _identity(obj)
            if key is not None and key in seen:
                found = [Problem(describe(obj), "metadata.name",
                                 "already exists: an earlier object in the input has this name")]
            elif key is not None:
                seen.add(key)
        if found:
            problems.extend(found)
        else:
            kept.append(obj)
    return kept, problems


def summarize(problems: Iterable[Problem]) -> list[str]:
    """One line per refused object: the object, then each field and rule."""
    by_object: dict[str, list[str]] = {}
    for problem in problems:
        by_object.setdefault(problem.object, []).append(
            f"{problem.field}: {problem.rule}" if problem.field else problem.rule)
    return [f"{name}: {'; '.join(rules)}" for name, rules in by_object.items()]


def describe(raw: object) -> str:
    """"Kind namespace/name" of a raw object, as far as it says."""
    if not isinstance(raw, Mapping):
        return "object"
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "?")
    ns = meta.get("namespace")
    return f"{raw.get('kind') or '?'} {ns}/{name}" if ns else f"{raw.get('kind') or '?'} {name}"


# --- schemas ----------------------------------------------------------------------------------

def _schema_errors(validator: jsonschema.protocols.Validator, value: Any,
                   prefix: str = "") -> list[tuple[str, str]]:
    if value is None:
        return []
    key = _memo_key(value) if not prefix else None
    if key is not None:
        cached = _SCHEMA_MEMO.get((id(validator), key))
        if cached is not None:
            return cached
    out = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path))):
        path = _path([prefix, *error.absolute_path] if prefix else list(error.absolute_path))
        out.append((path or "(object)", _message(error)))
    if key is not None and len(_SCHEMA_MEMO) < 100_000:
        _SCHEMA_MEMO[(id(validator), key)] = out
    return out


# Replayed snapshots hold thousands of pods made from a few templates: the schema
# verdict of an object does not depend on the strings that identify it.
_SCHEMA_MEMO: dict[tuple[int, bytes], list[tuple[str, str]]] = {}
_IDENTITY_FIELDS = ("name", "generateName", "uid", "resourceVersion", "creationTimestamp")
# Status strings every running pod has its own of, and no schema constrains beyond "a string".
_FREE_TEXT = frozenset({"lastTransitionTime", "lastProbeTime", "startTime", "startedAt",
                        "finishedAt", "lastHeartbeatTime", "podIP", "hostIP", "ip",
                        "containerID", "imageID", "message"})


def _blank_free_text(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: ("" if k in _FREE_TEXT and isinstance(v, str) else _blank_free_text(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [_blank_free_text(v) for v in node]
    return node


def _memo_key(value: Any) -> bytes | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("metadata"), Mapping):
        return None
    meta = {k: ("" if k in _IDENTITY_FIELDS and isinstance(v, str) else v)
            for k, v in value["metadata"].items()}
    out = {**value, "metadata": meta}
    spec = value.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("nodeName"), str):
        out["spec"] = {**spec, "nodeName": ""}
    if "status" in value:
        out["status"] = _blank_free_text(value["status"])
    try:
        return orjson.dumps(out, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator in ("oneOf", "anyOf") and error.context:
        types = sorted({str(c.schema.get("type")) for c in error.context if "type" in c.schema})
        if types:
            return f"{error.instance!r} is not one of the accepted types ({', '.join(types)})"
    if error.validator == "additionalProperties" and error.validator_value is False:
        extra = sorted(set(error.instance) - set(error.schema.get("properties") or {}))
        return f"unknown field{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))}"
    return error.message


def _path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part:
            out += f".{part}" if out else str(part)
    return out


def _schemas_dir() -> importlib.resources.abc.Traversable:
    return (importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
            / f"v{KUBERNETES_VERSION}.0-local-strict")


@functools.cache
def _registry() -> tuple[Registry, dict[str, Any]]:
    definitions = orjson.loads((_schemas_dir() / "_definitions.json").read_bytes())
    return Resource.from_contents(definitions) @ Registry(), definitions


def _is_builtin_group(group: str) -> bool:
    """Groups the Kubernetes API itself serves: core, the dot-less ones, *.k8s.io."""
    return "." not in group or group.endswith(".k8s.io")


@functools.cache
def _builtin(api: str, kind: str) -> jsonschema.protocols.Validator | None:
    # kubernetes-validate names its files <kind>-<first label of the group>-<version>.json
    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api)
    path = _schemas_dir() / f"{kind.lower()}-{short}.json"
    if not path.is_file():
        return None
    schema = orjson.loads(path.read_bytes())
    props = schema.get("properties") or {}
    if api not in (props.get("apiVersion") or {}).get("enum", ()) \
            or kind not in (props.get("kind") or {}).get("enum", ()):
        return None
    registry, _ = _registry()
    return jsonschema.Draft202012Validator(schema, registry=Resource.from_contents(schema) @ registry)


@functools.cache
def _object_meta() -> jsonschema.protocols.Validator:
    registry, definitions = _registry()
    ref = {"$ref": f"{definitions['$id']}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    return jsonschema.Draft202012Validator(ref, registry=registry)


def crd_dir() -> Path:
    """config/crds of the checkout, else where setup.cfg's data_files put it."""
    for candidate in (Path(__file__).resolve().parents[1] / "config" / "crds",
                      Path(sys.prefix) / "share" / "kaisched" / "crds"):
        if candidate.is_dir():
            return candidate
    raise InputError("cannot check kaisched objects: the CRD manifests (config/crds) are not installed")


@functools.cache
def _crds() -> dict[str, dict[tuple[str, str], jsonschema.protocols.Validator]]:
    """Per API group, a validator per (apiVersion, kind) served by the CRDs."""
    out: dict[str, dict[tuple[str, str], jsonschema.protocols.Validator]] = {}
    for path in sorted(crd_dir().glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            for version in spec["versions"]:
                if not version.get("served", True):
                    continue
                schema = _closed(version["schema"]["openAPIV3Schema"])
                out.setdefault(spec["group"], {})[(f"{spec['group']}/{version['name']}",
                                                   spec["names"]["kind"])] = \
                    jsonschema.Draft4Validator(schema)
    return out


def _closed(node: Any) -> Any:
    """A structural schema that refuses unknown fields, as strict field validation does."""
    if not isinstance(node, dict):
        return node
    out = {k: ([_closed(i) for i in v] if isinstance(v, list) and k in ("anyOf", "allOf", "oneOf")
               else _closed(v) if k in ("items", "additionalProperties", "not") else v)
           for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {k: _closed(v) for k, v in node["properties"].items()}
        if "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    return out


@functools.cache
def _read_without_schema(api: str, kind: str) -> bool:
    """Kinds kaisched reads whose schema is not at hand: other schedulers' gangs, the
    upstream Workload API (alpha, newer than the pinned version) and the owners the
    PodGrouper groups (any version). Only their metadata is checked."""
    from podgrouper.groupers.registry import builtin_groupers

    if (api, kind) in {(XK8S_PODGROUP.api_version, XK8S_PODGROUP.kind),
                       (UPSTREAM_PODGROUP.api_version, UPSTREAM_PODGROUP.kind)}:
        return True
    group = api.rpartition("/")[0]
    return not _is_builtin_group(group) and (group, kind) in builtin_groupers()


# Pod fields of the upstream Workload API (alpha, Kubernetes 1.35+) that kaisched reads
# and the pinned schema does not know yet.
_NEWER_POD_FIELDS = ("schedulingGroup", "workloadRef")


def _without_newer_fields(raw: Obj, group: str, kind: str) -> Obj:
    spec = raw.get("spec")
    if (group, kind) != ("", "Pod") or not isinstance(spec, Mapping) \
            or not any(f in spec for f in _NEWER_POD_FIELDS):
        return raw
    return {**raw, "spec": {k: v for k, v in spec.items() if k not in _NEWER_POD_FIELDS}}


def _identity(obj: Obj) -> tuple[str, str, str, str] | None:
    meta = obj.get("metadata") or {}
    if not meta.get("name"):
        return None             # generateName: the server picks a fresh name
    api, kind = str(obj["apiVersion"]), str(obj["kind"])
    namespace = (meta.get("namespace") or "default") if kind_for(api, kind).namespaced else ""
    return api.rpartition("/")[0], kind, namespace, str(meta["name"])


# --- semantic rules ------------------------------------------------------------------------------

Found = list[tuple[str, str]]
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
_TOLERATION_EFFECTS = {"", "NoSchedule", "PreferNoSchedule", "NoExecute"}
_HIGHEST_USER_PRIORITY = 1_000_000_000
_SYSTEM_PRIORITY_CLASSES = {"system-node-critical", "system-cluster-critical"}
# Where built-in workloads keep the pod they make: a pod the API would refuse is refused
# in the template already.
_TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "Deployment"): ("spec", "template"), ("apps", "ReplicaSet"): ("spec", "template"),
    ("apps", "StatefulSet"): ("spec", "template"), ("apps", "DaemonSet"): ("spec", "template"),
    ("batch", "Job"): ("spec", "template"), ("", "ReplicationController"): ("spec", "template"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template"), ("", "PodTemplate"): ("template",),
}


def dns_label(value: object) -> str | None:
    """Why `value` is not a DNS-1123 label, or None."""
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > 63:
        return "must be no more than 63 characters (DNS-1123 label)"
    if not _DNS_LABEL.match(value):
        return ("must be a DNS-1123 label: lower case letters, digits and '-', "
                "starting and ending with a letter or digit")
    return None


def dns_subdomain(value: object) -> str | None:
    """Why `value` is not a DNS-1123 subdomain, or None."""
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > 253:
        return "must be no more than 253 characters (DNS-1123 subdomain)"
    if not _DNS_SUBDOMAIN.match(value):
        return ("must be a DNS-1123 subdomain: lower case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit")
    return None


def _dns1035_label(value: object) -> str | None:
    if isinstance(value, str) and len(value) <= 63 and not _DNS1035_LABEL.match(value):
        return "must be a DNS-1035 label: lower case letters, digits and '-', starting with a letter"
    return dns_label(value)


def _path_segment(value: object) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if value in (".", "..") or "/" in value or "%" in value:
        return "may not be '.' or '..' nor contain '/' or '%'"
    return None


def _name_rule(group: str, kind: str) -> Callable[[object], str | None]:
    if (group, kind) == ("", "Namespace"):
        return dns_label
    if (group, kind) == ("", "Service"):
        return _dns1035_label
    if group == "rbac.authorization.k8s.io":
        return _path_segment
    return dns_subdomain


def _qualified_name(key: object) -> str | None:
    if not isinstance(key, str):
        return "must be a string"
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or dns_subdomain(prefix)):
        return "prefix must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return ("must be a qualified name: up to 63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit, with an optional DNS subdomain prefix and '/'")
    return None


def _label_map(values: object, where: str, check_values: bool = True) -> Found:
    if not isinstance(values, Mapping):
        return []           # the schema says what is wrong with its type
    out: Found = []
    for key, value in values.items():
        why = _qualified_name(key)
        if why:
            out.append((f"{where}[{key}]", f"key {why}"))
        if check_values and isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.match(value)):
            out.append((f"{where}[{key}]", "value must be at most 63 letters, digits, '-', '_' or "
                                            "'.', starting and ending with a letter or digit"))
    return out


def _semantic(raw: Obj, kind: str, group: str) -> Found:
    out = _metadata(raw, kind, group)
    spec = raw.get("spec")
    if (group, kind) == ("", "Pod") and isinstance(spec, Mapping):
        out += _pod_spec(spec, "spec")
    elif (group, kind) in _TEMPLATES:
        node: Any = raw
        for part in _TEMPLATES[(group, kind)]:
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and isinstance(node.get("spec"), Mapping):
            where = ".".join(_TEMPLATES[(group, kind)])
            out += _label_map((node.get("metadata") or {}).get("labels"), f"{where}.metadata.labels")
            out += _pod_spec(node["spec"], f"{where}.spec")
    elif (group, kind) == ("", "Node"):
        out += _node(raw)
    elif (group, kind) == ("scheduling.k8s.io", "PriorityClass"):
        out += _priority_class(raw)
    return out


def _metadata(raw: Obj, kind: str, group: str) -> Found:
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        return [("metadata", "required")]
    out: Found = []
    rule = _name_rule(group, kind)
    if meta.get("name") is not None:
        why = rule(meta["name"])
        if why:
            out.append(("metadata.name", why))
    elif meta.get("generateName"):
        why = rule(f"{str(meta['generateName']).rstrip('-')}x")
        if why:
            out.append(("metadata.generateName", why))
    else:
        out.append(("metadata.name", "name or generateName is required"))
    if meta.get("namespace") is not None:
        why = dns_label(meta["namespace"])
        if why:
            out.append(("metadata.namespace", why))
    out += _label_map(meta.get("labels"), "metadata.labels")
    out += _label_map(meta.get("annotations"), "metadata.annotations", check_values=False)
    return out


def _pod_spec(spec: Mapping[str, Any], where: str) -> Found:
    out: Found = []
    containers = spec.get("containers")
    if isinstance(containers, list) and not containers:
        out.append((f"{where}.containers", "at least one container is required"))
    names: set[str] = set()
    for field in ("initContainers", "containers"):
        items = spec.get(field)
        for i, container in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(container, Mapping):
                continue
            at = f"{where}.{field}[{i}]"
            name = container.get("name")
            why = dns_label(name) if name is not None else "required"
            if why:
                out.append((f"{at}.name", why))
            elif name in names:
                out.append((f"{at}.name", f"duplicate container name {name!r}"))
            else:
                names.add(name)
            resources = container.get("resources")
            if isinstance(resources, Mapping):
                out += _requirements(resources, f"{at}.resources")
    out += _label_map(spec.get("nodeSelector"), f"{where}.nodeSelector")
    tolerations = spec.get("tolerations")
    for i, toleration in enumerate(tolerations if isinstance(tolerations, list) else ()):
        if isinstance(toleration, Mapping):
            out += [(f"{where}.tolerations[{i}]{f}", r) for f, r in _toleration(toleration)]
    return out


def is_native(name: str) -> bool:
    """A resource Kubernetes itself accounts (cpu, memory, kubernetes.io/...)."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended(name: str) -> bool:
    """A resource a device plugin or operator advertises (nvidia.com/gpu)."""
    return not is_native(name) and not name.startswith("requests.") \
        and _qualified_name(f"requests.{name}") is None


def overcommit_allowed(name: str) -> bool:
    """Extended resources and hugepages are handed out whole: requests must equal limits."""
    return is_native(name) and not name.startswith("hugepages-")


def _resource_name(name: str) -> str | None:
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            return "must be a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>)"
    elif not is_native(name) and not is_extended(name):
        return "does not follow the extended resource name standard (domain/name)"
    return None


def _amounts(values: object, where: str, out: Found) -> dict[str, Decimal]:
    amounts: dict[str, Decimal] = {}
    if not isinstance(values, Mapping):
        return amounts
    for name, raw in values.items():
        at = f"{where}[{name}]"
        why = _resource_name(str(name))
        if why:
            out.append((at, why))
            continue
        try:
            amount = parse_quantity(raw)
        except ValueError:
            out.append((at, f"{raw!r} is not a quantity"))
            continue
        if amount < 0:
            out.append((at, "must be greater than or equal to 0"))
        elif is_extended(str(name)) and amount != amount.to_integral_value():
            out.append((at, f"must be an integer: {name} is handed out in whole units"))
        amounts[str(name)] = amount
    return amounts


def _requirements(resources: Mapping[str, Any], where: str) -> Found:
    out: Found = []
    limits = _amounts(resources.get("limits"), f"{where}.limits", out)
    requests = _amounts(resources.get("requests"), f"{where}.requests", out)
    for name, amount in requests.items():
        limit = limits.get(name)
        if limit is None:
            if not overcommit_allowed(name) and name not in _unparsed(resources.get("limits")):
                out.append((f"{where}.limits", f"a limit must be set for {name}: it is not "
                                               "overcommittable, so requests must equal limits"))
        elif amount != limit and not overcommit_allowed(name):
            out.append((f"{where}.requests[{name}]",
                        f"must be equal to the {name} limit of {resources['limits'][name]}"))
        elif amount > limit:
            out.append((f"{where}.requests[{name}]",
                        f"must be less than or equal to the {name} limit of {resources['limits'][name]}"))
    return out


def _unparsed(values: object) -> set[str]:
    return set(map(str, values)) if isinstance(values, Mapping) else set()


def _toleration(t: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    key, operator, value, effect = (t.get("key") or "", t.get("operator") or "Equal",
                                    t.get("value") or "", t.get("effect") or "")
    if key:
        why = _qualified_name(key)
        if why:
            yield ".key", why
    elif operator != "Exists":
        yield ".operator", "must be Exists when key is empty (which matches every taint)"
    if operator == "Exists" and value:
        yield ".value", "must be empty when operator is Exists"
    elif operator not in ("Equal", "Exists"):
        yield ".operator", f"unsupported value {operator!r}: Equal or Exists"
    elif operator == "Equal" and isinstance(value, str) and (len(value) > 63 or not _LABEL_VALUE.match(value)):
        yield ".value", "must be a valid label value"
    if effect not in _TOLERATION_EFFECTS:
        yield ".effect", f"unsupported value {effect!r}: NoSchedule, PreferNoSchedule or NoExecute"
    if t.get("tolerationSeconds") is not None and effect != "NoExecute":
        yield ".effect", "must be NoExecute when tolerationSeconds is set"


def _node(raw: Obj) -> Found:
    out: Found = []
    status = raw.get("status")
    if isinstance(status, Mapping):
        for field in ("capacity", "allocatable"):
            values = status.get(field)
            for name, amount in (values.items() if isinstance(values, Mapping) else ()):
                at = f"status.{field}[{name}]"
                try:
                    parsed = parse_quantity(amount)
                except ValueError:
                    out.append((at, f"{amount!r} is not a quantity"))
                    continue
                if parsed < 0:
                    out.append((at, "must be greater than or equal to 0"))
                elif is_extended(str(name)) and parsed != parsed.to_integral_value():
                    out.append((at, f"must be an integer: {name} is handed out in whole units"))
    spec = raw.get("spec")
    taints = spec.get("taints") if isinstance(spec, Mapping) else None
    for i, taint in enumerate(taints if isinstance(taints, list) else ()):
        if isinstance(taint, Mapping) and taint.get("effect") not in _TOLERATION_EFFECTS - {""}:
            out.append((f"spec.taints[{i}].effect",
                        "must be NoSchedule, PreferNoSchedule or NoExecute"))
    return out


def _priority_class(raw: Obj) -> Found:
    name = str((raw.get("metadata") or {}).get("name") or "")
    value = raw.get("value")
    if name.startswith("system-"):
        if name not in _SYSTEM_PRIORITY_CLASSES:
            return [("metadata.name", "names starting with 'system-' are reserved")]
        return []
    if isinstance(value, int) and not isinstance(value, bool) and value > _HIGHEST_USER_PRIORITY:
        return [("value", f"must be at most {_HIGHEST_USER_PRIORITY} (higher values are for "
                          "system-node-critical and system-cluster-critical)")]
    return []
