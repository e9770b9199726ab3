"""KAI Scheduler's own objects, read so that a team moving from KAI keeps its
objects as they are: its PodGroup (scheduling.run.ai/v2alpha2, named by the
pod annotation `pod-group-name`) and its Queue (scheduling.run.ai/v2), read as
kaisched Queues. docs/gang-apis.md lists what maps and what does not.

A KAI PodGroup's subGroups form a tree (`parent`; an inner node has
`minSubGroup`: how many of its children must each reach their own minimum),
read into kaisched's own subgroup tree as declared.
"""
from __future__ import annotations

from typing import Any

import attrs

from kaisched.api import labels as L
from kaisched.api.clock import from_rfc3339
from kaisched.api.job import NO_TOPOLOGY, GangSpec, PodGroupStatus, SubGroup, TopologyRule
from kaisched.api.quantity import parse_duration
from kaisched.api.queue import QueueInfo
from kaisched.api.resource import GPU, Resource
from kaisched.api.subgroups import tree_of, tree_problems
from kaisched.api.types import QueueName
from kaisched.cache.convert.common import Obj, metadata
from kaisched.cache.convert.groups import KAI_LAST_START
from kaisched.cache.convert.pods import preemption_delay
from kaisched.cache.convert.queues import queue_basics

# KAI: a PodGroup that does not say is preemptible when its priority is below this.
NON_PREEMPTIBLE_FROM = 100
# KAI's -1 quota ("deserved: all of it"): more than any cluster holds, so the
# queue deserves whatever it asks, within its limit.
UNLIMITED_QUOTA = 1e18
# KAI Queue amounts are plain numbers: cpu in millicores, memory in megabytes
# (10^6 bytes), gpu in devices (fractions allowed).
_QUEUE_RESOURCES = (("cpu", "cpu", 1.0), ("memory", "memory", 1e6), ("gpu", GPU, 1.0))


@attrs.frozen(slots=True)
class KaiSubGroup:
    """One of a KAI PodGroup's subGroups as declared: a node of its tree."""

    name: str
    parent: str | None
    min_member: int | None          # pods, at a leaf
    min_sub_group: int | None       # children that must each reach their minimum, inside
    topology: TopologyRule = NO_TOPOLOGY


def kai_podgroup(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    spec = obj.get("spec") or {}
    annotations = metadata(obj).get("annotations") or {}
    problems: list[str] = []
    min_member = _count(spec.get("minMember"), "spec.minMember", problems)
    min_sub_group = _count(spec.get("minSubGroup"), "spec.minSubGroup", problems)
    if min_member is not None and min_sub_group is not None:
        problems.append("spec.minMember and spec.minSubGroup are mutually exclusive")
    declared = subgroup_tree(spec.get("subGroups"), problems)
    root_sub: int | None = min_sub_group
    if min_sub_group == 0:
        # KAI's "no gang": every subGroup elastic, each pod placed on its own.
        subgroups = tuple(SubGroup(sg.name, 0, sg.topology) for sg in flat_subgroups(declared))
        min_member, root_sub = min_member or 1, None
    else:
        subgroups = tuple(SubGroup(sg.name, sg.min_member or 0, sg.topology, sg.parent,
                                   sg.min_sub_group) for sg in declared)
        problems.extend(tree_problems(subgroups, root_sub))
        if min_member is None:
            # The fewest pods that meet the tree: what "minMember" means for it.
            min_member = tree_of(subgroups, root_sub).min_pods() if subgroups else 1
    preemptibility = spec.get("preemptibility")
    if preemptibility not in (None, "", "preemptible", "non-preemptible", "semi-preemptible"):
        problems.append("spec.preemptibility must be preemptible, non-preemptible or "
                        f"semi-preemptible, got {preemptibility!r}")
        preemptibility = None
    gang = GangSpec(
        # 0 is KAI's "no gang": each pod goes on its own.
        min_member=max(min_member, 1),
        queue=QueueName(str(spec.get("queue") or "")),
        priority_class=str(spec.get("priorityClassName") or "") or None,
        subgroups=subgroups,
        min_sub_group=root_sub,
        # A semi-preemptible group's core is protected: read as not preemptible.
        preemptible=preemptibility == "preemptible",
        preemptible_below=NON_PREEMPTIBLE_FROM if not preemptibility else None,
        stale_grace=_grace(spec.get("stalenessGracePeriod"), problems),
        topology=_topology(spec.get("topologyConstraint")),
        generation=int(metadata(obj).get("generation") or 0),
        last_start=from_rfc3339(annotations.get(KAI_LAST_START)),
        preemption_delay=_delay(spec.get("preemptionDelay"), annotations.get(L.KAI_PREEMPTION_DELAY),
                                problems),
    )
    return gang, PodGroupStatus(), "; ".join(problems) or None


def _delay(field: Any, annotation: Any, problems: list[str]) -> float | None:
    """spec.preemptionDelay (a duration), else the kai.scheduler/preemption-delay
    annotation (one that is not a duration is ignored, as KAI does)."""
    if field is not None:
        try:
            return parse_duration(field)
        except ValueError as exc:
            problems.append(f"spec.preemptionDelay: {exc}")
            return None
    return preemption_delay(str(annotation)) if annotation is not None else None


def subgroup_tree(raw: Any, problems: list[str]) -> tuple[KaiSubGroup, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        problems.append("spec.subGroups must be a list")
        return ()
    out: list[KaiSubGroup] = []
    for i, sg in enumerate(raw):
        where = f"spec.subGroups[{i}]"
        if not isinstance(sg, dict) or not sg.get("name"):
            problems.append(f"{where} needs a name")
            continue
        min_member = _count(sg.get("minMember"), f"{where}.minMember", problems)
        min_sub_group = _count(sg.get("minSubGroup"), f"{where}.minSubGroup", problems)
        if min_member is not None and min_sub_group is not None:
            problems.append(f"{where}: minMember and minSubGroup are mutually exclusive")
        out.append(KaiSubGroup(str(sg["name"]), str(sg["parent"]) if sg.get("parent") else None,
                               min_member, min_sub_group, _topology(sg.get("topologyConstraint"))))
    names = {sg.name for sg in out}
    for sg in out:
        if sg.parent is not None and sg.parent not in names:
            problems.append(f"subGroup {sg.name}: parent {sg.parent!r} is not a subGroup")
    return tuple(out)


def flat_subgroups(tree: tuple[KaiSubGroup, ...]) -> tuple[KaiSubGroup, ...]:
    """The leaves (those no subGroup names as parent): where pods join."""
    parents = {sg.parent for sg in tree if sg.parent}
    return tuple(sg for sg in tree if sg.name not in parents)


def _count(value: Any, where: str, problems: list[str]) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(f"{where} must be an integer >= 0, got {value!r}")
        return None
    return value


def _topology(raw: Any) -> TopologyRule:
    """topologyConstraint {requiredTopologyLevel, preferredTopologyLevel}: node
    labels of levels; its `topology` (which Topology object orders the levels)
    is not needed: kaisched orders levels by every Topology object it reads."""
    if not isinstance(raw, dict):
        return NO_TOPOLOGY
    required, preferred = raw.get("requiredTopologyLevel"), raw.get("preferredTopologyLevel")
    return TopologyRule(str(required) if required else None, str(preferred) if preferred else None)


def _grace(value: Any, problems: list[str]) -> float | None:
    """stalenessGracePeriod; negative disables stale-gang eviction for the group."""
    if value is None:
        return None
    text = str(value)
    try:
        return float("inf") if text.startswith("-") else parse_duration(text)
    except ValueError as exc:
        problems.append(f"spec.stalenessGracePeriod: {exc}")
        return None


def kai_queue(obj: Obj) -> QueueInfo:
    """A KAI Queue as a kaisched Queue: quota (KAI's deserved), limit and
    overQuotaWeight per resource, priority and parent. -1 is unlimited; a
    missing limit is no limit. kaisched writes no status to it (KAI's queue
    controller owns that)."""
    meta, spec = metadata(obj), obj.get("spec") or {}
    problems: list[str] = []
    resources = spec.get("resources") or {}
    if not isinstance(resources, dict):
        problems.append("spec.resources must be a map of gpu, cpu, memory")
        resources = {}
    quota: dict[str, float] = {}
    limits: list[tuple[str, float]] = []
    weights: list[tuple[str, float]] = []
    for field, name, unit in _QUEUE_RESOURCES:
        entry = resources.get(field)
        if entry is None:
            continue
        if not isinstance(entry, dict):
            problems.append(f"spec.resources.{field} must be a map")
            continue
        values = {k: _number(entry.get(k), f"spec.resources.{field}.{k}", problems)
                  for k in ("quota", "limit", "overQuotaWeight")}
        if values["quota"] is not None:
            quota[name] = UNLIMITED_QUOTA if values["quota"] < 0 else values["quota"] * unit
        if values["limit"] is not None and values["limit"] >= 0:
            limits.append((name, values["limit"] * unit))
        if values["overQuotaWeight"] is not None:
            weights.append((name, max(values["overQuotaWeight"], 0.0)))
    basics = queue_basics(meta, spec, problems)
    return QueueInfo(**basics, quota=Resource.of(quota), limits=tuple(limits),
                     weights=tuple(weights), problem="; ".join(problems) or None)


def _number(value: Any, where: str, problems: list[str]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.append(f"{where} must be a number, got {value!r}")
        return None
    return float(value)
