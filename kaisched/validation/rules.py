"""The rules an API server applies on create that no schema states, where
scheduling depends on them: extended resources (nvidia.com/gpu) and hugepages
need limits equal to their requests, in whole units; requests within limits
and never negative; DNS-1123 names; labels, node selectors and tolerations the
API accepts; priority values in range. Pure functions over raw objects."""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Callable, Iterator, Mapping

from kaisched.api.quantity import parse_quantity

Obj = Mapping[str, Any]
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


def qualified_name(key: object) -> str | None:
    if not isinstance(key, str):
        return "must be a string"
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or dns_subdomain(prefix)):
        return "prefix must be a DNS-1123 subdomain"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return ("must be a qualified name: up to 63 letters, digits, '-', '_' or '.', starting and "
                "ending with a letter or digit, with an optional DNS subdomain prefix and '/'")
    return None


def _is_label_value(value: object) -> bool:
    return not isinstance(value, str) or (len(value) <= 63 and bool(_LABEL_VALUE.match(value)))


def _label_map(values: object, where: str, annotations: bool = False) -> Found:
    """Labels (and node selectors): qualified keys and short values; annotations: keys only,
    compared in lower case."""
    if not isinstance(values, Mapping):
        return []           # the schema says what is wrong with its type
    out: Found = []
    for key, value in values.items():
        why = qualified_name(key.lower() if annotations and isinstance(key, str) else key)
        if why:
            out.append((f"{where}[{key}]", f"key {why}"))
        if not annotations and not _is_label_value(value):
            out.append((f"{where}[{key}]", "value must be at most 63 letters, digits, '-', '_' or "
                                            "'.', starting and ending with a letter or digit"))
    return out


def semantic(raw: Obj, kind: str, group: str) -> Found:
    """(field, rule) for every rule of the API server's that `raw` breaks."""
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
            meta = node.get("metadata")
            if isinstance(meta, Mapping):
                out += _label_map(meta.get("labels"), f"{where}.metadata.labels")
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
    out += _label_map(meta.get("annotations"), "metadata.annotations", annotations=True)
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
                names.add(str(name))      # a DNS label by now
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
        and qualified_name(f"requests.{name}") is None


def overcommit_allowed(name: str) -> bool:
    """Extended resources and hugepages are handed out whole: requests must equal limits."""
    return is_native(name) and not name.startswith("hugepages-")


def _resource_name(name: str) -> str | None:
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            return ("must be a standard resource for containers "
                    "(cpu, memory, ephemeral-storage, hugepages-<size>)")
    elif not is_native(name) and not is_extended(name):
        return "does not follow the extended resource name standard (domain/name)"
    return None


def _amounts(values: object, where: str, out: Found) -> dict[str, tuple[Decimal, object]]:
    """Each well-formed amount, parsed and as written."""
    amounts: dict[str, tuple[Decimal, object]] = {}
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
        amounts[str(name)] = (amount, raw)
    return amounts


def _requirements(resources: Mapping[str, Any], where: str) -> Found:
    out: Found = []
    limits = _amounts(resources.get("limits"), f"{where}.limits", out)
    requests = _amounts(resources.get("requests"), f"{where}.requests", out)
    for name, (amount, _) in requests.items():
        if name not in limits:
            if not overcommit_allowed(name) and name not in _unparsed(resources.get("limits")):
                out.append((f"{where}.limits", f"a limit must be set for {name}: it is not "
                                               "overcommittable, so requests must equal limits"))
            continue
        limit, written = limits[name]
        if amount != limit and not overcommit_allowed(name):
            out.append((f"{where}.requests[{name}]", f"must be equal to the {name} limit of {written}"))
        elif amount > limit:
            out.append((f"{where}.requests[{name}]",
                        f"must be less than or equal to the {name} limit of {written}"))
    return out


def _unparsed(values: object) -> set[str]:
    return set(map(str, values)) if isinstance(values, Mapping) else set()


def _toleration(t: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    key, operator, value, effect = (t.get("key") or "", t.get("operator") or "Equal",
                                    t.get("value") or "", t.get("effect") or "")
    if not all(isinstance(v, str) for v in (key, operator, value, effect)):
        return              # the schema says which is not a string
    if key:
        why = qualified_name(key)
        if why:
            yield ".key", why
    elif operator != "Exists":
        yield ".operator", "must be Exists when key is empty (which matches every taint)"
    if operator == "Exists" and value:
        yield ".value", "must be empty when operator is Exists"
    elif operator not in ("Equal", "Exists"):
        yield ".operator", f"unsupported value {operator!r}: Equal or Exists"
    elif operator == "Equal" and not _is_label_value(value):
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
        if isinstance(taint, Mapping) and str(taint.get("effect")) not in _TOLERATION_EFFECTS - {""}:
            out.append((f"spec.taints[{i}].effect",
                        "must be NoSchedule, PreferNoSchedule or NoExecute"))
    return out


def _priority_class(raw: Obj) -> Found:
    meta = raw.get("metadata")
    name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
    value = raw.get("value")
    if name.startswith("system-"):
        if name not in _SYSTEM_PRIORITY_CLASSES:
            return [("metadata.name", "names starting with 'system-' are reserved")]
        return []
    if isinstance(value, int) and not isinstance(value, bool) and value > _HIGHEST_USER_PRIORITY:
        return [("value", f"must be at most {_HIGHEST_USER_PRIORITY} (higher values are for "
                          "system-node-critical and system-cluster-critical)")]
    return []
