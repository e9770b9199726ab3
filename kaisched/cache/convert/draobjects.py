"""DeviceClasses, ResourceSlices and ResourceClaims (resource.k8s.io v1 and
v1beta1) -> the model's device values; pods' spec.resourceClaims -> the
claims they name.

The two API versions differ in two places: a v1 request holds its class,
selectors and count under `exactly` (v1beta1: on the request itself), and a
v1 device holds its attributes and capacity directly (v1beta1: under
`basic`). Everything else is read alike.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Any

import attrs

from kaisched.api.cel import Selector, Version
from kaisched.api.claimquota import QUOTA_RESOURCE_ANNOTATION
from kaisched.api.constraints import Requirement, SelectorTerm
from kaisched.api.dradevices import (
    PODGROUPS,
    PODS,
    Allocation,
    AttrValue,
    Claim,
    Constraint,
    Consumer,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
    GroupClaim,
    PodClaimRef,
)
from kaisched.api.quantity import parse_quantity
from kaisched.api.types import NodeName
from kaisched.cache.convert.common import Obj, metadata

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# On a claim the resource-claim controller made from a template for a PodGroup.
PODGROUP_CLAIM_ANNOTATION = "resource.kubernetes.io/podgroup-claim-name"
WORKLOAD_GROUP = "scheduling.k8s.io"       # the API group of a PodGroup a claim is reserved for


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def selectors(raw: Any, problems: list[str]) -> tuple[Selector, ...]:
    out = []
    for i, entry in enumerate(_list(raw)):
        expression = _dict(_dict(entry).get("cel")).get("expression")
        if not isinstance(expression, str):
            problems.append(f"selectors[{i}] has no cel.expression")
            continue
        out.append(Selector.of(expression))
    return tuple(out)


def device_class(obj: Obj) -> DeviceClass:
    problems: list[str] = []
    found = selectors(_dict(obj.get("spec")).get("selectors"), problems)
    quota = _dict(metadata(obj).get("annotations")).get(QUOTA_RESOURCE_ANNOTATION)
    return DeviceClass(str(metadata(obj).get("name", "")), found, "; ".join(problems) or None,
                       str(quota) if quota else None)


def _attribute(value: Any) -> AttrValue | None:
    value = _dict(value)
    if isinstance(value.get("string"), str):
        return value["string"]
    if isinstance(value.get("version"), str):
        return Version(value["version"])        # a semver value to selectors
    if isinstance(value.get("bool"), bool):
        return value["bool"]
    if isinstance(value.get("int"), int):
        return value["int"]
    return None


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, _, short = str(name).rpartition("/")
    return (domain or driver), short


def node_terms(selector: Any) -> tuple[SelectorTerm, ...]:
    """A core NodeSelector's terms."""
    def reqs(raw: Any) -> tuple[Requirement, ...]:
        return tuple(Requirement(str(r.get("key", "")), str(r.get("operator", "")),
                                 tuple(str(v) for v in _list(r.get("values"))))
                     for r in map(_dict, _list(raw)))
    return tuple(SelectorTerm(reqs(t.get("matchExpressions")), reqs(t.get("matchFields")))
                 for t in map(_dict, _list(_dict(selector).get("nodeSelectorTerms"))))


def slice_pool(obj: Obj) -> tuple[str, str, int]:
    """(driver, pool, generation) of a ResourceSlice: only a pool's newest generation counts."""
    spec = _dict(obj.get("spec"))
    pool = _dict(spec.get("pool"))
    generation = pool.get("generation")
    return (str(spec.get("driver", "")), str(pool.get("name", "")),
            generation if isinstance(generation, int) else 0)


def slice_devices(obj: Obj) -> tuple[Device, ...]:
    spec = _dict(obj.get("spec"))
    driver, pool, _ = slice_pool(obj)
    node = NodeName(spec["nodeName"]) if isinstance(spec.get("nodeName"), str) and spec["nodeName"] else None
    terms = () if node is not None or spec.get("allNodes") else node_terms(spec.get("nodeSelector"))
    out = []
    for raw in map(_dict, _list(spec.get("devices"))):
        body = _dict(raw.get("basic")) if "basic" in raw else raw
        attributes = []
        for name, value in _dict(body.get("attributes")).items():
            found = _attribute(value)
            if found is not None:
                attributes.append((*_qualified(name, driver), found))
        capacity = []
        for name, value in _dict(body.get("capacity")).items():
            amount = _dict(value).get("value") if isinstance(value, dict) else value
            try:
                capacity.append((*_qualified(name, driver), Decimal(parse_quantity(amount))))
            except ValueError:
                continue        # an unreadable capacity is as good as none
        out.append(Device(driver, pool, str(raw.get("name", "")), node, terms,
                          tuple(sorted(attributes, key=lambda a: (a[0], a[1]))),
                          tuple(sorted(capacity, key=lambda c: (c[0], c[1])))))
    return tuple(out)


def _request(raw: Obj, name: str, problems: list[str]) -> DeviceRequest:
    """One exact request (a v1 `exactly`, a v1beta1 request, a sub-request)."""
    mode = raw.get("allocationMode") or "ExactCount"
    count = raw.get("count", 1)
    if mode not in ("ExactCount", "All"):
        problems.append(f"request {name}: unknown allocationMode {mode}")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        problems.append(f"request {name}: count must be a positive integer, not {count!r}")
        count = 1
    return DeviceRequest(name, str(raw.get("deviceClassName") or ""),
                         selectors(raw.get("selectors"), problems), mode == "All", count)


def claim(obj: Obj) -> Claim:
    meta, spec, status = metadata(obj), _dict(obj.get("spec")), _dict(obj.get("status"))
    problems: list[str] = []
    devices = _dict(spec.get("devices"))
    requests = []
    for raw in map(_dict, _list(devices.get("requests"))):
        name = str(raw.get("name", ""))
        subs = _list(raw.get("firstAvailable"))
        if subs:
            alternatives = tuple(
                attrs.evolve(_request(sub, f"{name}/{sub.get('name', '')}", problems),
                             name=str(sub.get("name", "")))
                for sub in map(_dict, subs))
            requests.append(DeviceRequest(name, alternatives=alternatives))
        else:
            body = _dict(raw.get("exactly")) if "exactly" in raw else raw
            requests.append(_request(body, name, problems))
    constraints = tuple(
        Constraint(tuple(str(r) for r in _list(c.get("requests"))), str(c.get("matchAttribute")))
        for c in map(_dict, _list(devices.get("constraints"))) if c.get("matchAttribute"))
    namespace = str(meta.get("namespace") or "default")
    owner = next((f"{namespace}/{r.get('name')}" for r in map(_dict, _list(meta.get("ownerReferences")))
                  if r.get("kind") == "Pod" and r.get("controller")), None)
    return Claim(
        key=f"{namespace}/{meta.get('name', '')}", uid=str(meta.get("uid", "")),
        api_version=str(obj.get("apiVersion") or "resource.k8s.io/v1"),
        requests=tuple(requests), constraints=constraints,
        allocation=allocation(_dict(status.get("allocation"))),
        reserved_for=tuple(consumer(r) for r in map(_dict, _list(status.get("reservedFor")))
                           if _consumer_kind(r) is not None),
        owner_pod=owner, problem="; ".join(problems) or None)


def _consumer_kind(raw: Obj) -> str | None:
    """pods, or podgroups (the Workload API's); None: a consumer kaisched does not know."""
    resource = raw.get("resource", PODS)
    if resource == PODS and not raw.get("apiGroup"):
        return PODS
    if resource == PODGROUPS and raw.get("apiGroup") == WORKLOAD_GROUP:
        return PODGROUPS
    return None


def consumer(raw: Obj) -> Consumer:
    kind = _consumer_kind(raw) or PODS
    return Consumer(str(raw.get("name", "")), str(raw.get("uid", "")), kind,
                    WORKLOAD_GROUP if kind == PODGROUPS else "")


def allocation(raw: Obj) -> Allocation | None:
    if not raw:
        return None
    results = tuple(DeviceResult(str(r.get("request", "")), str(r.get("driver", "")),
                                 str(r.get("pool", "")), str(r.get("device", "")))
                    for r in map(_dict, _list(_dict(raw.get("devices")).get("results"))))
    terms = node_terms(raw.get("nodeSelector"))
    if len(terms) == 1 and not terms[0].expressions and len(terms[0].fields) == 1:
        field = terms[0].fields[0]
        if field.key == "metadata.name" and field.operator == "In" and len(field.values) == 1:
            return Allocation(results, NodeName(field.values[0]))
    return Allocation(results, None, terms)


def _requirements(found: tuple[Requirement, ...]) -> list[Obj]:
    return [{"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in found]


def allocation_dict(found: Allocation | None) -> Obj | None:
    """The status.allocation the scheduler writes (None: deallocated)."""
    if found is None:
        return None
    out: Obj = {"devices": {"results": [
        {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
        for r in found.results]}}
    if found.node is not None:
        out["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [found.node]}]}]}
    elif found.terms:
        out["nodeSelector"] = {"nodeSelectorTerms": [
            {k: v for k, v in (("matchExpressions", _requirements(t.expressions)),
                               ("matchFields", _requirements(t.fields))) if v}
            for t in found.terms]}
    return out


def reserved_dict(consumers: tuple[Consumer, ...]) -> list[Obj]:
    return [{**({"apiGroup": c.api_group} if c.api_group else {}), "resource": c.resource,
             "name": c.name, "uid": c.uid} for c in consumers]


def _text(value: Any) -> str | None:
    return str(value) if value else None


def pod_claim_refs(pod: Obj) -> tuple[PodClaimRef, ...]:
    """The entries of a pod's spec.resourceClaims, with the claims made for
    its templates (status.resourceClaimStatuses; "" where none was needed)."""
    spec, status = _dict(pod.get("spec")), _dict(pod.get("status"))
    made = {str(s.get("name")): str(s.get("resourceClaimName") or "")
            for s in map(_dict, _list(status.get("resourceClaimStatuses")))}
    return tuple(PodClaimRef(str(e.get("name", "")), _text(e.get("resourceClaimName")),
                             _text(e.get("resourceClaimTemplateName")), made.get(str(e.get("name", ""))))
                 for e in map(_dict, _list(spec.get("resourceClaims"))))


def group_claims(spec: Obj, status: Obj, problems: list[str]) -> tuple[GroupClaim, ...]:
    """A PodGroup's spec.resourceClaims, with the claims made for its templates
    (status.resourceClaimStatuses)."""
    made = {str(s.get("name")): str(s.get("resourceClaimName") or "")
            for s in map(_dict, _list(status.get("resourceClaimStatuses")))}
    out = []
    for i, entry in enumerate(_list(spec.get("resourceClaims"))):
        entry = _dict(entry)
        name, claim_name = str(entry.get("name") or ""), _text(entry.get("resourceClaimName"))
        template = _text(entry.get("resourceClaimTemplateName"))
        if not name or (claim_name is None) == (template is None):
            problems.append(f"spec.resourceClaims[{i}] needs a name and exactly one of "
                            "resourceClaimName, resourceClaimTemplateName")
            continue
        out.append(GroupClaim(name, claim_name, template, made.get(name) if template else None))
    return tuple(out)


def resolve_claims(refs: tuple[PodClaimRef, ...], namespace: str,
                   shared: tuple[GroupClaim, ...] = ()
                   ) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """The claims a pod uses (namespace/name); of those, its PodGroup's (an
    entry equal to one of shared, which then stands for the group's claim,
    never one of the pod's own); and why it must wait, if it must: a claim
    from a template that is not made yet."""
    keys: list[str] = []
    group: list[str] = []
    waiting = []
    for ref in refs:
        match = next((g for g in shared if g.matches(ref)), None)
        if match is not None:
            if match.claim:
                keys.append(f"{namespace}/{match.claim}")
                group.append(keys[-1])
            elif match.made is None:
                waiting.append(f"{ref.name} (its PodGroup's, template {ref.template_name})")
        elif ref.claim_name:
            keys.append(f"{namespace}/{ref.claim_name}")
        elif ref.template_name:
            if ref.made is None:
                waiting.append(f"{ref.name} (template {ref.template_name})")
            elif ref.made:
                keys.append(f"{namespace}/{ref.made}")
    problem = ("waiting for the ResourceClaim of resourceClaims " + ", ".join(waiting)
               + " to be created") if waiting else None
    return tuple(keys), tuple(group), problem


def pod_claims(pod: Obj) -> tuple[tuple[str, ...], str | None]:
    """The claims a pod names (namespace/name), read without its PodGroup, and
    why it must wait, if it must."""
    namespace = str(metadata(pod).get("namespace") or "default")
    keys, _, problem = resolve_claims(pod_claim_refs(pod), namespace)
    return keys, problem
