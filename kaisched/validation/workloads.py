"""What the API servers refuse of the gang APIs beyond their schemas.

The upstream Workload API (kube-apiserver's validation of scheduling.k8s.io,
and the pod fields that name a group): a podGroup's or PodGroup's policy sets
exactly one of basic and gang, a gang's minCount is at least 1, at most 8
podGroups (templates) per Workload with unique DNS-label names, the
disruption mode is one of its version's (v1alpha2's enum `Pod`|`PodGroup`,
v1beta1's union {single}|{all}; a basic group may be disrupted whole too,
as kube-scheduler's own preemption tests create one), at most one topology
constraint whose key is a label key, a priority no higher than users may
set, names of the formats each reference takes.

KAI's admission webhooks: subGroup names lowercase and unique, each parent
one of the subGroups, no cycle; a Queue sets spec.resources.
"""
from __future__ import annotations

from typing import Any, Mapping

import networkx as nx

from kaisched.validation.rules import Found, dns_label, dns_subdomain, qualified_name

_MAX_POD_GROUPS = 8             # podGroups (v1alpha1) or podGroupTemplates per Workload
_MAX_RESOURCE_CLAIMS = 4        # per PodGroup or template
_HIGHEST_USER_PRIORITY = 1_000_000_000
_SYSTEM_CLASSES = ("system-node-critical", "system-cluster-critical")
_INT32 = 2**31 - 1


def workload_rules(raw: Mapping[str, Any], kind: str, group: str) -> Found:
    """(field, rule) for what the Workload API's (or KAI's) server refuses of raw."""
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        return []
    version = str(raw.get("apiVersion", "")).rpartition("/")[2]
    if group == "scheduling.k8s.io" and kind == "Workload":
        if version == "v1alpha1":
            return _workload_v1alpha1(spec)
        return _workload_templates(spec, version)
    if group == "scheduling.k8s.io" and kind == "PodGroup":
        return _podgroup(spec, version)
    if group == "" and kind == "Pod":
        return _pod_refs(spec)
    if group == "scheduling.run.ai" and kind == "PodGroup":
        return _kai_subgroups(spec.get("subGroups"))
    if group == "scheduling.run.ai" and kind == "Queue" and spec.get("resources") is None:
        return [("spec.resources", "required: a KAI Queue sets its gpu, cpu and memory resources")]
    return []


def _workload_v1alpha1(spec: Mapping[str, Any]) -> Found:
    out = _controller_ref(spec.get("controllerRef"))
    groups = spec.get("podGroups")
    if not isinstance(groups, list):
        return out          # the schema says what is wrong
    out += _count("spec.podGroups", groups)
    seen: set[str] = set()
    for i, group in enumerate(groups):
        if isinstance(group, Mapping):
            at = f"spec.podGroups[{i}]"
            out += _name(group.get("name"), f"{at}.name", seen)
            out += _policy(group.get("policy"), f"{at}.policy")
    return out


def _workload_templates(spec: Mapping[str, Any], version: str) -> Found:
    out = _controller_ref(spec.get("controllerRef"))
    templates = spec.get("podGroupTemplates")
    composite = spec.get("compositePodGroupTemplates")
    if version != "v1alpha2" and (templates is None) == (composite is None):
        out.append(("spec", "exactly one of podGroupTemplates, compositePodGroupTemplates is required"))
    if not isinstance(templates, list):
        return out
    out += _count("spec.podGroupTemplates", templates)
    seen: set[str] = set()
    for i, template in enumerate(templates):
        if isinstance(template, Mapping):
            at = f"spec.podGroupTemplates[{i}]"
            out += _name(template.get("name"), f"{at}.name", seen)
            out += _group_fields(template, at, version)
    return out


def _podgroup(spec: Mapping[str, Any], version: str) -> Found:
    out = _group_fields(spec, "spec", version)
    if version == "v1alpha2":
        ref = spec.get("podGroupTemplateRef")
        workload = ref.get("workload") if isinstance(ref, Mapping) else None
        if isinstance(ref, Mapping) and not isinstance(workload, Mapping):
            out.append(("spec.podGroupTemplateRef", "must set workload"))
        elif isinstance(workload, Mapping):
            out += _why("spec.podGroupTemplateRef.workload.workloadName",
                        dns_label(workload.get("workloadName")))
            out += _why("spec.podGroupTemplateRef.workload.podGroupTemplateName",
                        dns_label(workload.get("podGroupTemplateName")))
        return out
    ref = spec.get("workloadRef")
    if isinstance(ref, Mapping):
        out += _why("spec.workloadRef.workloadName", dns_subdomain(ref.get("workloadName")))
        out += _why("spec.workloadRef.templateName", dns_label(ref.get("templateName")))
    parent = spec.get("parentCompositePodGroupName")
    if parent is not None:
        out += _why("spec.parentCompositePodGroupName", dns_subdomain(parent))
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy not in ("Never", "PreemptLowerPriority"):
        out.append(("spec.preemptionPolicy", f"unsupported value {policy!r}: Never or "
                                             "PreemptLowerPriority"))
    return out


def _group_fields(spec: Mapping[str, Any], at: str, version: str) -> Found:
    """What a PodGroup and a Workload's template share: policy, constraints,
    disruption mode, priority, resource claims."""
    out = _policy(spec.get("schedulingPolicy"), f"{at}.schedulingPolicy")
    out += _topology(spec.get("schedulingConstraints"), f"{at}.schedulingConstraints")
    mode = spec.get("disruptionMode")
    where = f"{at}.disruptionMode"
    if mode is None:
        pass
    elif version == "v1alpha2":
        if mode not in ("Pod", "PodGroup"):
            out.append((where, f"unsupported value {mode!r}: Pod or PodGroup"))
    elif not isinstance(mode, Mapping) or len([k for k in ("single", "all") if mode.get(k) is not None]) != 1:
        out.append((where, "exactly one of single, all is required"))
    out += _priority(spec, at)
    claims = spec.get("resourceClaims")
    if isinstance(claims, list):
        if len(claims) > _MAX_RESOURCE_CLAIMS:
            out.append((f"{at}.resourceClaims", f"must have at most {_MAX_RESOURCE_CLAIMS} items"))
        seen: set[str] = set()
        for i, claim in enumerate(claims):
            if isinstance(claim, Mapping):
                out += _name(claim.get("name"), f"{at}.resourceClaims[{i}].name", seen)
                named = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if claim.get(k)]
                if len(named) != 1:
                    out.append((f"{at}.resourceClaims[{i}]", "exactly one of resourceClaimName, "
                                                             "resourceClaimTemplateName is required"))
    return out


def _policy(policy: Any, where: str) -> Found:
    if not isinstance(policy, Mapping):
        return []           # required: the schema says so
    chosen = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(chosen) != 1:
        return [(where, "exactly one of basic, gang is required")]
    gang = policy.get("gang")
    count = gang.get("minCount") if isinstance(gang, Mapping) else None
    if isinstance(count, int) and not isinstance(count, bool) and count < 1:
        return [(f"{where}.gang.minCount", f"must be greater than or equal to 1, got {count}")]
    return []


def _topology(constraints: Any, where: str) -> Found:
    terms = constraints.get("topology") if isinstance(constraints, Mapping) else None
    if not isinstance(terms, list):
        return []
    out: Found = []
    if len(terms) > 1:
        out.append((f"{where}.topology", "must have at most 1 item"))
    for i, term in enumerate(terms):
        key = term.get("key") if isinstance(term, Mapping) else None
        if isinstance(key, str):
            out += _why(f"{where}.topology[{i}].key", qualified_name(key))
    return out


def _priority(spec: Mapping[str, Any], at: str) -> Found:
    out: Found = []
    name = spec.get("priorityClassName")
    if name:
        out += _why(f"{at}.priorityClassName", dns_subdomain(name))
    value = spec.get("priority")
    if isinstance(value, int) and not isinstance(value, bool):
        if not -_INT32 - 1 <= value <= _INT32:
            out.append((f"{at}.priority", "must fit in a 32-bit integer"))
        elif value > _HIGHEST_USER_PRIORITY and name not in _SYSTEM_CLASSES:
            out.append((f"{at}.priority", f"must be at most {_HIGHEST_USER_PRIORITY} (higher values "
                                          "are for system-node-critical and system-cluster-critical)"))
    return out


def _pod_refs(spec: Mapping[str, Any]) -> Found:
    """The pod fields that name its group: workloadRef (1.35), schedulingGroup (1.36+)."""
    out: Found = []
    ref = spec.get("workloadRef")
    if isinstance(ref, Mapping):
        out += _why("spec.workloadRef.name", dns_subdomain(ref.get("name")))
        out += _why("spec.workloadRef.podGroup", dns_label(ref.get("podGroup")))
        if ref.get("podGroupReplicaKey"):
            out += _why("spec.workloadRef.podGroupReplicaKey", dns_label(ref["podGroupReplicaKey"]))
    group = spec.get("schedulingGroup")
    if isinstance(group, Mapping):
        if not group.get("podGroupName"):
            out.append(("spec.schedulingGroup", "must set podGroupName"))
        else:
            out += _why("spec.schedulingGroup.podGroupName", dns_subdomain(group["podGroupName"]))
    return out


def _kai_subgroups(raw: Any) -> Found:
    if not isinstance(raw, list):
        return []
    out: Found = []
    graph = nx.DiGraph()
    seen: set[str] = set()
    for i, sg in enumerate(raw):
        name = sg.get("name") if isinstance(sg, Mapping) else None
        if not isinstance(name, str) or not name:
            continue        # the schema requires it
        if name != name.lower():
            out.append((f"spec.subGroups[{i}].name", f"subgroup name {name!r} must be lowercase"))
        if name in seen:
            out.append((f"spec.subGroups[{i}].name", f"duplicate subgroup name {name}"))
        seen.add(name)
        graph.add_node(name)
    for i, sg in enumerate(raw):
        if not isinstance(sg, Mapping) or not sg.get("parent"):
            continue
        parent = str(sg["parent"])
        if parent not in seen:
            out.append((f"spec.subGroups[{i}].parent", f"parent {parent} of {sg.get('name')} was not found"))
        else:
            graph.add_edge(parent, str(sg.get("name")))
    if not nx.is_directed_acyclic_graph(graph):
        out.append(("spec.subGroups", "cycle detected in subgroups"))
    return out


def _controller_ref(ref: Any) -> Found:
    if not isinstance(ref, Mapping):
        return []
    out: Found = []
    if ref.get("apiGroup"):
        out += _why("spec.controllerRef.apiGroup", dns_subdomain(ref["apiGroup"]))
    for field in ("kind", "name"):
        value = ref.get(field)
        if isinstance(value, str) and (value in (".", "..") or "/" in value or "%" in value):
            out.append((f"spec.controllerRef.{field}", "may not be '.' or '..' nor contain '/' or '%'"))
    return out


def _count(where: str, items: list[Any]) -> Found:
    if not items:
        return [(where, "at least one is required")]
    if len(items) > _MAX_POD_GROUPS:
        return [(where, f"must have at most {_MAX_POD_GROUPS} items")]
    return []


def _name(value: Any, where: str, seen: set[str]) -> Found:
    why = dns_label(value)
    if why:
        return [(where, why)]
    if value in seen:
        return [(where, f"duplicate name {value!r}")]
    seen.add(str(value))
    return []


def _why(where: str, why: str | None) -> Found:
    return [(where, why)] if why else []
