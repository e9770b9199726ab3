"""Replay: load plain objects into the memory backend, run the PodGrouper and
N sessions in virtual time, and report every decision.

Between sessions a minimal kubelet acts: bound pods start Running, evicted
pods are gone; volumes are provisioned and claims bound as a cluster's
storage controllers would (kaisched.sim.provisioner); and the clock moves on
by schedulePeriod.
"""
from __future__ import annotations

from typing import Any, Iterable

import attrs

from kaisched.api.clock import ManualClock, to_rfc3339
from kaisched.api.types import NodeName, PodKey
from kaisched.cache.convert.groups import podgroup
from kaisched.cluster.kinds import POD, PODGROUP, UPSTREAM_PODGROUPS
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Registry, SchedulerConfig
from kaisched.framework.effects import Evict
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.sim.claims import make_claims
from kaisched.sim.provisioner import StorageControllers
from podgrouper.controller import PodGrouper

# Objects are created owners first, so a reader sees a consistent cluster.
_CREATE_ORDER = {"Namespace": 0, "PriorityClass": 1, "Queue": 2, "Node": 3, "StorageClass": 4,
                 "PersistentVolume": 4, "PersistentVolumeClaim": 5, "PodGroup": 5, "Workload": 5,
                 "Pod": 9,
                 "Event": 10}


@attrs.frozen
class ReplayResult:
    sessions: int
    bindings: dict[PodKey, NodeName]
    evictions: list[PodKey]
    pipelined: dict[PodKey, NodeName]
    pod_groups: dict[str, dict[str, Any]]
    failures: list[str]
    eviction_reasons: dict[str, str]
    cluster: MemoryCluster = attrs.field(eq=False, repr=False)
    # Pods consolidation moved, and the node its successor's room is held on.
    moved: dict[PodKey, NodeName] = attrs.field(factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "bindings": self.bindings,
                "evictions": self.evictions, "pipelined": self.pipelined,
                "podGroups": self.pod_groups, "evictionReasons": self.eviction_reasons}


def load_cluster(objects: Iterable[dict[str, Any]], clock: ManualClock) -> MemoryCluster:
    cluster = MemoryCluster(clock)
    for obj in sorted(objects, key=lambda o: _CREATE_ORDER.get(str(o.get("kind")), 4)):
        cluster.create(obj)
    return cluster


def replay(objects: Iterable[dict[str, Any]], config: SchedulerConfig, registry: Registry,
           sessions: int = 1) -> ReplayResult:
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    grouper = PodGrouper(cluster, clock, scheduler_name=config.scheduler_name)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    storage = StorageControllers(cluster)
    bindings: dict[PodKey, NodeName] = {}
    evictions: list[PodKey] = []
    reasons: dict[str, str] = {}
    failures: list[str] = []
    pipelined: dict[PodKey, NodeName] = {}
    moved: dict[PodKey, NodeName] = {}
    for number in range(sessions):
        if number:
            _kubelet(cluster, clock.now())
            storage.step(clock.now())
            clock.advance(config.schedule_period)
        grouper.sync()
        make_claims(cluster)        # the resource-claim controller: claims from templates
        result = scheduler.run_once()
        bindings.update(result.placed)
        for effect in result.effects:
            if isinstance(effect, Evict):
                evictions.append(effect.pod)
                reasons[effect.pod] = f"{effect.reason}: {effect.message}"
                if effect.moved_to is not None:
                    moved[effect.pod] = effect.moved_to
        pipelined = dict(result.reservations)
        failures.extend(f"{f.effect.__class__.__name__} {getattr(f.effect, 'pod', '')}: {f.error}"
                        for f in result.report.failed)
    for key in list(pipelined):
        if key in bindings:
            del pipelined[key]
    return ReplayResult(sessions, dict(sorted(bindings.items())), evictions,
                        dict(sorted(pipelined.items())), _pod_groups(cluster), failures,
                        dict(sorted(reasons.items())), cluster, dict(sorted(moved.items())))


def _kubelet(cluster: MemoryCluster, now: float) -> None:
    """Bound pods start (now: their startTime); pods being deleted are gone."""
    for pod in cluster.list(POD):
        meta, spec, status = pod["metadata"], _section(pod, "spec"), _section(pod, "status")
        if meta.get("deletionTimestamp"):
            cluster.delete(POD, meta["namespace"], meta["name"])
        elif spec.get("nodeName") and status.get("phase", "Pending") == "Pending":
            cluster.replace({**pod, "status": {"startTime": to_rfc3339(now), **status,
                                               "phase": "Running"}})


def _pod_groups(cluster: MemoryCluster) -> dict[str, dict[str, Any]]:
    """kaisched's PodGroups, then the upstream Workload API's (keyed the same,
    with their apiVersion, minCount as minMember and no phase: their status
    holds conditions only); a key two kinds share gets the apiVersion after it."""
    out: dict[str, dict[str, Any]] = {}
    for pg in cluster.list(PODGROUP):
        meta, status = pg["metadata"], _section(pg, "status")
        out[f"{meta['namespace']}/{meta['name']}"] = {
            "phase": status.get("phase", "Pending"),
            "minMember": _min_member(_section(pg, "spec")),
            "conditions": status.get("conditions") or [],
        }
    for kind in UPSTREAM_PODGROUPS:
        for pg in cluster.list(kind):
            meta, status = pg["metadata"], _section(pg, "status")
            policy = _section(_section(pg, "spec"), "schedulingPolicy")
            key = f"{meta['namespace']}/{meta['name']}"
            out[key if key not in out else f"{key} ({pg['apiVersion']})"] = {
                "apiVersion": pg["apiVersion"],
                "minMember": _section(policy, "gang").get("minCount", 1),
                "conditions": status.get("conditions") or [],
            }
    return out


def _min_member(spec: dict[str, Any]) -> Any:
    """minMember as written; a subgroup tree's PodGroup may give minSubGroup
    instead: then the fewest pods that meet its tree."""
    if "minMember" in spec or spec.get("minSubGroup") is None:
        return spec.get("minMember")
    return podgroup({"spec": spec})[0].min_member


def _section(obj: dict[str, Any], name: str) -> dict[str, Any]:
    """spec or status, or nothing when a hand-written file put something else there."""
    value = obj.get(name)
    return value if isinstance(value, dict) else {}
