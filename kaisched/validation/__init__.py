"""Objects as the API server sees them: what a cluster would reject.

A file that replays happily must also apply to a real cluster, else a policy
tried in replay or simulate meets a different world on the cluster. Three
checks, the ones a kube-apiserver makes on create:

- built-in kinds against the OpenAPI schemas of one pinned Kubernetes version
  (bundled by `kubernetes-validate`), unknown fields refused as
  `kubectl apply`'s strict field validation does;
- kaisched's own kinds against the CRD schemas in config/crds, and their
  CEL rules (x-kubernetes-validations: a subgroup tree's shape);
- the semantic rules no schema states and scheduling depends on: extended
  resources (nvidia.com/gpu) and hugepages need limits equal to their
  requests, whole numbers, requests within limits, names that are DNS-1123,
  labels and tolerations the API accepts, priority values in range; the gang
  APIs' rules (the Workload API's minCount, unions, disruption modes and
  topology constraints; KAI's subGroup tree), in kaisched.validation.workloads.

An object of a kind neither Kubernetes nor kaisched serves is a problem too
(a cluster has nowhere to put it), unless another object of the input names it
as an owner: then the cluster it came from serves its kind (an operator's CRD),
and it is kept, its metadata checked, so that the PodGrouper walks the same
owners as on that cluster. `check_object` judges one object,
`partition` a whole input (and refuses a second object of the same name),
`summarize` gives one line per refused object.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence, TypeVar

import attrs

from kaisched.cluster.kinds import kind_for
from kaisched.validation.celrules import rule_errors
from kaisched.validation.rules import semantic
from kaisched.validation.schemas import (
    KUBERNETES_VERSION,
    available_versions,
    builtin,
    crd_schemas,
    crds,
    is_builtin_group,
    kube_version,
    object_meta,
    read_without_schema,
    schema_errors,
    use_kube_version,
)
from kaisched.validation.workloads import workload_rules

__all__ = ["KUBERNETES_VERSION", "Problem", "available_versions", "check_object", "describe",
           "kube_version", "partition", "summarize", "use_kube_version"]
Obj = Mapping[str, Any]
ObjT = TypeVar("ObjT", bound=Obj)       # partition gives back the objects it was given


@attrs.frozen
class Problem:
    """Why a cluster would reject an object: which object, which field, which rule."""

    object: str         # "Pod research/bert-0"
    field: str          # "spec.containers[0].resources.limits"
    rule: str

    def __str__(self) -> str:
        return f"{self.object}: {self.field}: {self.rule}"


def check_object(raw: Obj, owns_others: bool = False) -> list[Problem]:
    """Every reason a Kubernetes API server (with kaisched's CRDs) would refuse `raw` on create.
    owns_others: other objects name it as their owner, so its kind is served where they live."""
    label = describe(raw)
    if not isinstance(raw, Mapping):
        return [Problem(label, "", "not an object")]
    api, kind = raw.get("apiVersion"), raw.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str) or not api or not kind:
        return [Problem(label, "apiVersion", "apiVersion and kind are required")]
    found: list[tuple[str, str]] = []
    group = api.rpartition("/")[0]
    if read_without_schema(api, kind):
        found += schema_errors(object_meta(), raw.get("metadata"), "metadata")
    elif group in crds():
        crd = crds()[group]
        if (api, kind) not in crd:
            served = ", ".join(sorted(f"{k} {a}" for a, k in crd))
            return [Problem(label, "apiVersion",
                            f"{group} serves no {kind} in {api.rpartition('/')[2]} (it serves {served})")]
        found += schema_errors(crd[(api, kind)], raw)
        if not found:       # the CRD's CEL rules, on an object its schema accepts
            found += rule_errors(crd_schemas()[(api, kind)], raw)
        found += schema_errors(object_meta(), raw.get("metadata"), "metadata")
    elif is_builtin_group(group):
        validator = builtin(api, kind)
        if validator is None:
            return [Problem(label, "kind", f"unknown kind {kind} in {api}: "
                                           f"Kubernetes {kube_version()} serves no such kind")]
        found += schema_errors(validator, raw)
    elif owns_others:
        found += schema_errors(object_meta(), raw.get("metadata"), "metadata")
    else:
        return [Problem(label, "apiVersion",
                        f"unknown kind {kind} in {api}: neither Kubernetes {kube_version()} "
                        "nor kaisched serves it")]
    found += semantic(raw, kind, group)
    found += workload_rules(raw, kind, group)
    return [Problem(label, f, r) for f, r in found]


def partition(objects: Iterable[ObjT]) -> tuple[list[ObjT], list[Problem]]:
    """Split objects into those a cluster would accept, in input order, and the
    problems of the rest; an object whose name an earlier one took is refused too."""
    objects = list(objects)
    owners = _owner_identities(objects)
    kept: list[ObjT] = []
    problems: list[Problem] = []
    seen: set[tuple[str, str, str, str]] = set()
    for obj in objects:
        found = check_object(obj, _owner_identity(obj) in owners)
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
    found = raw.get("metadata")
    meta: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    name = meta.get("name") or (f"{meta['generateName']}*" if meta.get("generateName") else "?")
    ns = meta.get("namespace")
    return f"{raw.get('kind') or '?'} {ns}/{name}" if ns else f"{raw.get('kind') or '?'} {name}"


def _owner_identities(objects: Sequence[Obj]) -> set[tuple[str, str, str]]:
    """(API group, kind, name) of every owner some object of the input names."""
    found = set()
    for obj in objects:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
        for ref in refs if isinstance(refs, list) else ():
            if isinstance(ref, Mapping):
                found.add((str(ref.get("apiVersion") or "").rpartition("/")[0],
                           str(ref.get("kind") or ""), str(ref.get("name") or "")))
    return found


def _owner_identity(obj: Obj) -> tuple[str, str, str]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return (str(obj.get("apiVersion") or "").rpartition("/")[0] if isinstance(obj, Mapping) else "",
            str(obj.get("kind") or "") if isinstance(obj, Mapping) else "", str(name or ""))


def _identity(obj: Obj) -> tuple[str, str, str, str] | None:
    meta = obj.get("metadata") or {}
    if not meta.get("name"):
        return None             # generateName: the server picks a fresh name
    api, kind = str(obj["apiVersion"]), str(obj["kind"])
    namespace = (meta.get("namespace") or "default") if kind_for(api, kind).namespaced else ""
    return api.rpartition("/")[0], kind, namespace, str(meta["name"])
