"""The upstream Workload API (KEP-4671), one small adapter per version: each
reads what its version says into GangSpecs, and every gang follows the
upstream rules (completed pods drop out of the count, one schedulerName per
group, gangs queued from the moment their pods make up the minimum).

- v1alpha1 (Kubernetes 1.35): a Workload whose spec.podGroups[] are the gangs,
  {name, policy: {gang: {minCount}} | {basic: {}}}; pods name one with
  spec.workloadRef, each podGroupReplicaKey a gang of its own. A Workload has
  no status: nothing is written back.
- v1alpha2 (1.36): runtime PodGroup objects: spec.schedulingPolicy,
  schedulingConstraints.topology[{key}], disruptionMode `Pod` (default) or
  `PodGroup`, priorityClassName / priority; the condition PodGroupScheduled.
- v1beta1 (1.37, and the alpha v1alpha3 served beside it): the same, with
  disruptionMode a union {single: {}} (default) | {all: {}}; the condition
  PodGroupInitiallyScheduled, which once True is never written again.

A PodGroup's spec.resourceClaims (v1alpha2 and v1beta1) are claims its pods
share: a pod whose own spec.resourceClaims entry equals one of them uses the
group's claim (a template's is made once for the group, named in the
group's status.resourceClaimStatuses), reserved for the PodGroup.

A `basic` policy is a gang of one: its pods are placed one by one. Fields the
API server refuses (see kaisched.validation) are problems here too, for input
that did not pass one.
"""
from __future__ import annotations

from typing import Any, Mapping

import attrs

from kaisched.api.clock import from_rfc3339
from kaisched.api.dradevices import PODGROUPS, Consumer
from kaisched.api.job import (
    NO_TOPOLOGY,
    Condition,
    GangSpec,
    PodGroupStatus,
    StatusTarget,
    TopologyRule,
)
from kaisched.api.types import Disruption, GangRules
from kaisched.cache.convert.common import Obj, metadata
from kaisched.cache.convert.draobjects import WORKLOAD_GROUP, group_claims

V1ALPHA2_CONDITION = "PodGroupScheduled"
V1BETA1_CONDITION = "PodGroupInitiallyScheduled"


@attrs.frozen(slots=True)
class Workload:
    """A v1alpha1 Workload as read: its gangs by podGroup name."""

    gangs: tuple[tuple[str, GangSpec], ...]
    problem: str | None
    creation: float

    def gang(self, name: str) -> GangSpec | None:
        return next((spec for n, spec in self.gangs if n == name), None)


def workload_v1alpha1(obj: Obj) -> Workload:
    spec = obj.get("spec") or {}
    problems: list[str] = []
    gangs: list[tuple[str, GangSpec]] = []
    groups = spec.get("podGroups")
    if not isinstance(groups, list) or not groups:
        problems.append("spec.podGroups must list at least one podGroup")
        groups = []
    for i, group in enumerate(groups):
        where = f"spec.podGroups[{i}]"
        if not isinstance(group, dict) or not group.get("name"):
            problems.append(f"{where} needs a name")
            continue
        name = str(group["name"])
        if any(n == name for n, _ in gangs):
            problems.append(f"{where}.name {name!r} is listed twice")
            continue
        min_count = _policy(group.get("policy"), f"{where}.policy", problems)
        gangs.append((name, GangSpec(min_member=min_count, rules=GangRules.WORKLOAD,
                                     disruption=Disruption.SINGLE,
                                     generation=int(metadata(obj).get("generation") or 0))))
    return Workload(tuple(gangs), "; ".join(problems) or None, _created(obj))


def podgroup_v1alpha2(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    spec = obj.get("spec") or {}
    problems: list[str] = []
    mode = spec.get("disruptionMode")
    disruption = Disruption.SINGLE
    if mode == "PodGroup":
        disruption = Disruption.ALL
    elif mode not in (None, "Pod"):
        problems.append(f"spec.disruptionMode must be Pod or PodGroup, got {mode!r}")
    target = StatusTarget(str(obj.get("apiVersion")), V1ALPHA2_CONDITION)
    return _podgroup(obj, disruption, target, problems)


def podgroup_v1beta1(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    """v1beta1, and v1alpha3 (the same fields)."""
    spec = obj.get("spec") or {}
    problems: list[str] = []
    mode = spec.get("disruptionMode")
    disruption = Disruption.SINGLE
    if mode is not None:
        chosen = [k for k in ("single", "all") if isinstance(mode, dict) and k in mode]
        if not isinstance(mode, dict) or len(chosen) != 1 or set(mode) - {"single", "all"}:
            problems.append("spec.disruptionMode must set exactly one of single, all")
        elif chosen == ["all"]:
            disruption = Disruption.ALL
    target = StatusTarget(str(obj.get("apiVersion")), V1BETA1_CONDITION, terminal=True)
    return _podgroup(obj, disruption, target, problems)


def _podgroup(obj: Obj, disruption: Disruption, target: StatusTarget,
              problems: list[str]) -> tuple[GangSpec, PodGroupStatus, str | None]:
    spec = obj.get("spec") or {}
    min_count = _policy(spec.get("schedulingPolicy"), "spec.schedulingPolicy", problems)
    priority = spec.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        problems.append(f"spec.priority must be an integer, got {priority!r}")
        priority = None
    meta = metadata(obj)
    status = obj.get("status")
    gang = GangSpec(
        min_member=min_count,
        priority_class=str(spec.get("priorityClassName") or "") or None,
        priority=priority,
        topology=_topology(spec.get("schedulingConstraints"), problems),
        disruption=disruption,
        rules=GangRules.WORKLOAD,
        status_target=target,
        generation=int(meta.get("generation") or 0),
        claims=group_claims(spec, status if isinstance(status, dict) else {}, problems),
        claim_holder=Consumer(str(meta.get("name", "")), str(meta.get("uid", "")), PODGROUPS,
                              WORKLOAD_GROUP),
    )
    return gang, upstream_status(obj.get("status")), "; ".join(problems) or None


def _policy(policy: Any, where: str, problems: list[str]) -> int:
    """The gang's minCount; a basic policy is a gang of one."""
    if not isinstance(policy, dict):
        problems.append(f"{where} must set exactly one of basic, gang")
        return 1
    chosen = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(chosen) != 1:
        problems.append(f"{where} must set exactly one of basic, gang")
        return 1
    if chosen == ["basic"]:
        return 1
    gang = policy["gang"]
    count = gang.get("minCount") if isinstance(gang, dict) else None
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        problems.append(f"{where}.gang.minCount must be an integer >= 1, got {count!r}")
        return 1
    return count


def _topology(constraints: Any, problems: list[str]) -> TopologyRule:
    """schedulingConstraints.topology: at most one key, all pods in one domain of it."""
    if constraints is None:
        return NO_TOPOLOGY
    terms = constraints.get("topology") if isinstance(constraints, dict) else None
    if not terms:
        return NO_TOPOLOGY
    if not isinstance(terms, list) or len(terms) > 1:
        problems.append("spec.schedulingConstraints.topology takes at most one constraint")
        return NO_TOPOLOGY
    key = terms[0].get("key") if isinstance(terms[0], dict) else None
    if not isinstance(key, str) or not key:
        problems.append("spec.schedulingConstraints.topology[0].key must name a node label")
        return NO_TOPOLOGY
    return TopologyRule(required=key)


def upstream_status(status: Any) -> PodGroupStatus:
    """The conditions a PodGroup's status holds (the rest of kaisched's status has no place here)."""
    if not isinstance(status, dict):
        return PodGroupStatus()
    conditions = tuple(
        Condition(str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or ""),
                  str(c.get("message") or ""), c.get("lastTransitionTime"),
                  c.get("observedGeneration") if isinstance(c.get("observedGeneration"), int)
                  else None)
        for c in status.get("conditions") or () if isinstance(c, dict))
    return PodGroupStatus(conditions=conditions)


def upstream_status_dict(status: PodGroupStatus) -> Obj:
    """What is written to an upstream PodGroup's status: its conditions (a
    merge patch replaces the list, so those kaisched did not write are kept)."""
    return {"conditions": [condition_dict(c) for c in status.conditions]}


def condition_dict(c: Condition) -> Mapping[str, Any]:
    out: dict[str, Any] = {"type": c.type, "status": c.status, "reason": c.reason,
                           "message": c.message, "lastTransitionTime": c.last_transition_time}
    if c.observed_generation is not None:
        out["observedGeneration"] = c.observed_generation
    return out


def _created(obj: Obj) -> float:
    return from_rfc3339(metadata(obj).get("creationTimestamp")) or 0.0
