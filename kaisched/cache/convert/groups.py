"""PodGroups (kaisched, scheduler-plugins) and annotated gangs: spec, status, problems.
The upstream Workload API's are read in workloads.py, KAI's in kai.py."""
from __future__ import annotations

import functools
from typing import Any

import attrs
import orjson

from kaisched.api import labels as L
from kaisched.api.clock import from_rfc3339
from kaisched.api.job import Condition, GangSpec, PodGroupStatus, SubGroup, TopologyRule
from kaisched.api.resource import Resource
from kaisched.api.subgroups import tree_of, tree_problems
from kaisched.api.types import GangMode, JobKey, PodGroupPhase, QueueName, job_key
from kaisched.cache.convert.common import Obj, json_key, metadata, quantities
from kaisched.cache.convert.koordinator import min_available, optional_settings
from kaisched.cache.convert.pods import PodFacts, preemption_delay

# KAI's topology annotations on a PodGroup: node labels naming a topology level.
KAI_TOPOLOGY_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_TOPOLOGY_PREFERRED = "kai.scheduler/topology-preferred-placement"
# When KAI last saw the gang start (its min-runtime counts from there).
KAI_LAST_START = "kai.scheduler/last-start-timestamp"
# By the value written (a lookup, not an enum call: every PodGroup of a list is read).
_MODES = {mode.value: mode for mode in GangMode}
_PHASES = {phase.value: phase for phase in PodGroupPhase}


def _declared(res: Resource) -> Resource | None:
    """None for an absent (or empty) minResources: there is nothing to check."""
    return None if res.is_empty() else res


def _int(value: Any, where: str, minimum: int, problems: list[str]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        problems.append(f"{where} must be an integer >= {minimum}, got {value!r}")
        return None
    try:
        number = int(value)
    except ValueError:
        problems.append(f"{where} must be an integer >= {minimum}, got {value!r}")
        return None
    if number < minimum:
        problems.append(f"{where} must be an integer >= {minimum}, got {number}")
        return None
    return number


def _seconds(value: Any, where: str, problems: list[str], minimum: int = 1) -> float | None:
    if value is None:
        return None
    got = _int(value, where, minimum, problems)
    return float(got) if got is not None else None


def _delay(spec: Obj, annotations: Obj, problems: list[str]) -> float | None:
    """spec.preemptionDelaySeconds, else KAI's annotation on the PodGroup (one
    that is not a duration is ignored, as KAI does)."""
    if spec.get("preemptionDelaySeconds") is not None:
        return _seconds(spec["preemptionDelaySeconds"], "spec.preemptionDelaySeconds", problems, 0)
    raw = annotations.get(L.KAI_PREEMPTION_DELAY)
    return preemption_delay(str(raw)) if raw is not None else None


def topology_rule(raw: Any, annotations: Obj | None = None) -> TopologyRule:
    """spec.topology {required, preferred}; KAI's placement annotations fill what it leaves out."""
    raw = raw if isinstance(raw, dict) else {}
    notes = annotations or {}
    required = raw.get("required") or notes.get(KAI_TOPOLOGY_REQUIRED)
    preferred = raw.get("preferred") or notes.get(KAI_TOPOLOGY_PREFERRED)
    return TopologyRule(str(required) if required else None, str(preferred) if preferred else None)


def subgroup_tree(spec: Obj, problems: list[str]) -> tuple[tuple[SubGroup, ...], int | None]:
    """spec.subGroups (each a leaf with minMember, or an inner subgroup with
    minSubGroup that others name as parent) and the root's spec.minSubGroup."""
    if not spec.get("subGroups") and spec.get("minSubGroup") is None:
        return (), None         # most PodGroups: no tree, nothing wrong with it
    root_sub = None
    if spec.get("minSubGroup") is not None:
        root_sub = _int(spec["minSubGroup"], "spec.minSubGroup", 1, problems)
    subgroups = []
    for i, sg in enumerate(spec.get("subGroups") or ()):
        if not isinstance(sg, dict) or not sg.get("name"):
            problems.append(f"spec.subGroups[{i}] needs a name")
            continue
        where = f"spec.subGroups[{i}]"
        sub_min = _int(sg.get("minMember", 0), f"{where}.minMember", 0, problems)
        need = None
        if sg.get("minSubGroup") is not None:
            need = _int(sg["minSubGroup"], f"{where}.minSubGroup", 0, problems)
        parent = sg.get("parent")
        subgroups.append(SubGroup(str(sg["name"]), sub_min or 0, topology_rule(sg.get("topology")),
                                  str(parent) if parent else None, need))
    problems.extend(tree_problems(subgroups, root_sub))
    parents = {sg.parent for sg in subgroups}
    for i, (sg, raw) in enumerate(zip(subgroups, _named(spec.get("subGroups")), strict=True)):
        if sg.name not in parents and "minMember" not in raw:
            problems.append(f"spec.subGroups[{i}] ({sg.name}) has no subgroups under it: "
                            "it needs minMember")
    return tuple(subgroups), root_sub


def _named(items: Any) -> list[Obj]:
    return [sg for sg in items or () if isinstance(sg, dict) and sg.get("name")]


def podgroup(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    """A scheduling.kaisched.io PodGroup: its spec, status and any problem.
    A cluster holds a PodGroup per running gang, and most say alike: a spec
    of a minimum, a queue and a priority class alone, with no annotations,
    is read once per distinct one; a status once per distinct JSON text."""
    spec, meta = obj.get("spec") or {}, metadata(obj)
    annotations = meta.get("annotations")
    min_member, queue = spec.get("minMember", 1), spec.get("queue")
    priority_class, generation = spec.get("priorityClassName"), meta.get("generation")
    if not annotations and type(spec) is dict and _PLAIN_SPEC.issuperset(spec) \
            and type(min_member) is int and type(generation) in _PLAIN_GENERATION \
            and type(queue) in _PLAIN_TEXT and type(priority_class) in _PLAIN_TEXT:
        # (equal ints, strs and Nones read alike; equal floats may not: -0.0 == 0.0,
        # yet a problem with one says which it is)
        gang, problem = _plain_gang(min_member, queue, priority_class, generation)
    else:
        gang, problem = _gang_spec(spec, meta, annotations)
    return gang, _status(obj.get("status") or {}), problem


# A PodGroup's spec with no other field (and no annotations) is read by its values.
_PLAIN_SPEC = frozenset({"minMember", "queue", "priorityClassName"})
_PLAIN_TEXT = (str, type(None))
_PLAIN_GENERATION = (int, type(None))


@functools.lru_cache(maxsize=4096)
def _plain_gang(min_member: int, queue: str | None, priority_class: str | None,
                generation: int | None) -> tuple[GangSpec, str | None]:
    return _gang_spec({"minMember": min_member, "queue": queue,
                       "priorityClassName": priority_class}, {"generation": generation}, None)


def _status(status: Obj) -> PodGroupStatus:
    key = json_key(status)
    return podgroup_status(status) if key is None else _status_of(key)


@functools.lru_cache(maxsize=4096)
def _status_of(key: bytes) -> PodGroupStatus:
    return podgroup_status(orjson.loads(key))


def _gang_spec(spec: Obj, meta: Obj, annotations: Any) -> tuple[GangSpec, str | None]:
    problems: list[str] = []
    mode = spec.get("mode", "Strict")
    if mode not in ("Strict", "NonStrict"):
        problems.append(f"spec.mode must be Strict or NonStrict, got {mode!r}")
        mode = "Strict"
    subgroups, root_sub = subgroup_tree(spec, problems)
    if root_sub is not None and "minMember" in spec:
        problems.append("spec gives both minMember and minSubGroup: give one")
    if root_sub is not None and "minMember" not in spec:
        # The fewest pods that meet the tree: what "minMember" means for it.
        min_member = max(tree_of(subgroups, root_sub).min_pods(), 1)
    else:
        min_member = _int(spec.get("minMember", 1), "spec.minMember", 1, problems) or 1
    gang_group = tuple(JobKey(str(g)) if "/" in str(g) else job_key(meta.get("namespace") or "default", str(g))
                       for g in spec.get("gangGroup") or ())
    preemptible = spec.get("preemptible", True)
    gang = GangSpec(
        min_member=min_member,
        queue=QueueName(str(spec.get("queue") or "")),
        priority_class=spec.get("priorityClassName") or None,
        min_resources=_declared(quantities(spec.get("minResources"), "spec.minResources", problems)),
        schedule_timeout=_seconds(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", problems),
        mode=_MODES[mode],
        gang_group=gang_group,
        subgroups=subgroups,
        min_sub_group=root_sub,
        preemptible=preemptible if isinstance(preemptible, bool) else True,
        stale_grace=_seconds(spec.get("staleGangGracePeriodSeconds"), "spec.staleGangGracePeriodSeconds", problems),
        wait_time=_seconds(spec.get("waitTimeSeconds"), "spec.waitTimeSeconds", problems),
        starvation_threshold=_seconds(spec.get("starvationThresholdSeconds"),
                                      "spec.starvationThresholdSeconds", problems),
        declared=True,
        generation=int(meta.get("generation") or 0),
        topology=topology_rule(spec.get("topology"), annotations),
        last_start=from_rfc3339((annotations or {}).get(KAI_LAST_START)),
        preemption_delay=_delay(spec, annotations or {}, problems),
    )
    return gang, "; ".join(problems) or None


def xk8s_podgroup(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    """A scheduler-plugins PodGroup: minMember, minResources, scheduleTimeoutSeconds."""
    spec = obj.get("spec") or {}
    problems: list[str] = []
    gang = GangSpec(
        min_member=_int(spec.get("minMember", 1), "spec.minMember", 1, problems) or 1,
        min_resources=_declared(quantities(spec.get("minResources"), "spec.minResources", problems)),
        schedule_timeout=_seconds(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", problems),
        declared=False,
    )
    return gang, PodGroupStatus(), "; ".join(problems) or None


def annotated_gang(facts: PodFacts) -> tuple[GangSpec, str | None]:
    """A gang declared by Koordinator or Volcano annotations on its pods."""
    problems: list[str] = []
    if facts.gang.source in ("koordinator", "koord"):
        raw = facts.annotation(L.KOORD_MIN_AVAILABLE) or "1"
        size = min_available(raw)
        if size is None:
            problems.append(f"{L.KOORD_MIN_AVAILABLE} must be an integer, got {raw!r}")
        # The optional ones fall back to defaults (the pod's warnings say so).
        mode, group_keys, wait, _ = optional_settings(facts.annotation)
        gang = GangSpec(min_member=size or 1, mode=mode, gang_group=group_keys, wait_time=wait)
    else:
        raw = facts.annotation(L.VOLCANO_GROUP_POD_NUM) or "1"
        gang = GangSpec(min_member=_int(raw, L.VOLCANO_GROUP_POD_NUM, 1, problems) or 1)
    return gang, "; ".join(problems) or None


def koord_podgroup(obj: Obj) -> tuple[GangSpec, PodGroupStatus, str | None]:
    """Koordinator's PodGroup (scheduling.sigs.k8s.io): scheduler-plugins'
    fields, and Koordinator's optional gang annotations on the object (mode,
    gang groups), each falling back to its default when it does not parse."""
    gang, status, problem = xk8s_podgroup(obj)
    notes = metadata(obj).get("annotations") or {}
    mode, group_keys, _, _ = optional_settings(lambda k: _text(notes.get(k)))
    namespace = str(metadata(obj).get("namespace") or "default")
    group_keys = tuple(k if "/" in k else job_key(namespace, k) for k in group_keys)
    return attrs.evolve(gang, mode=mode, gang_group=group_keys), status, problem


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def podgroup_status(status: Obj) -> PodGroupStatus:
    phase = status.get("phase") or "Pending"
    parsed = _PHASES.get(phase, PodGroupPhase.UNKNOWN) if isinstance(phase, str) \
        else PodGroupPhase.UNKNOWN
    conditions = tuple(Condition(str(c.get("type", "")), str(c.get("status", "")),
                                 str(c.get("reason") or ""), str(c.get("message") or ""),
                                 c.get("lastTransitionTime"))
                       for c in status.get("conditions") or () if isinstance(c, dict))
    counts: dict[str, int] = {k: v if isinstance(v := status.get(k), int) else 0
                              for k in ("scheduled", "running", "succeeded", "failed", "pending")}
    observed = status.get("observedGeneration")
    return PodGroupStatus(parsed, conditions, last_schedule_time=status.get("lastScheduleTime"),
                          stale_since=status.get("staleSince"),
                          unschedulable_since=status.get("unschedulableSince"),
                          last_moved_time=status.get("lastMovedTime"),
                          pending_since=status.get("pendingSince"),
                          observed_generation=observed if isinstance(observed, int) else 0,
                          **counts)


def status_dict(status: PodGroupStatus) -> Obj:
    """The PodGroup status as written back (a merge patch; None clears)."""
    return {
        "phase": status.phase.value,
        "conditions": [{k: v for k, v in {
            "type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
            "lastTransitionTime": c.last_transition_time}.items() if v is not None}
            for c in status.conditions],
        "scheduled": status.scheduled, "running": status.running,
        "succeeded": status.succeeded, "failed": status.failed, "pending": status.pending,
        "lastScheduleTime": status.last_schedule_time, "staleSince": status.stale_since,
        "unschedulableSince": status.unschedulable_since,
        "lastMovedTime": status.last_moved_time,
        "pendingSince": status.pending_since,
        "observedGeneration": status.observed_generation or None,
    }
