"""Running gangs counted, not converted: the first list of a big cluster read
for a first decision before all of it is converted (kaisched.runtime.headstart).

Nearly every pod of a busy cluster runs in a gang that is whole and asks
nothing of its neighbours. What a first allocation reads of such a gang is
its room on its nodes, its queue's sums and its job's numbers; all three
are counted straight off the pods, a few lookups each. Its job is described
as the cache describes any job, from some of its pods made into facts (the
first by key, the oldest, one per distinct priority: all describe reads of
pods that differ), and stands in the snapshot with its tasks Unread.

A pod is counted only when it is on a node and holding room there, and
carries nothing a conversion would read further: no claim, volume claim,
gate, GPU share, rule over other pods, host port, preemption delay or
malformed request. Another scheduler's pod so is counted as its room alone
(the snapshot's other schedulers' pods are then Unread too). A job is
counted only when all its pods are and it is settled as described (nothing
wrong, its minimum met, no subgroups, kaisched's gang rules, no claims of
its own); any other job is converted as usual.
"""
from __future__ import annotations

import math
from typing import Iterable, NamedTuple

import numpy as np

from kaisched.api import gpuask as G
from kaisched.api import labels as L
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.job import JobInfo
from kaisched.api.ledger import Entry
from kaisched.api.resource import Resource
from kaisched.api.types import READY_STATUSES, GangRules, JobKey, NodeName, PodKey, TaskStatus
from kaisched.api.unread import Unread, UnreadPods
from kaisched.cache import convert
from kaisched.cache.convert import pods as P
from kaisched.cache.jobs import Groups, Priorities, describe, make_task
from kaisched.cluster.client import Obj, WatchEvent
from kaisched.cluster.kinds import POD

# Gangs whose declaration reads more of their pods than their first, oldest
# and priorities (Koordinator's min-available, a Workload's strangers and
# claims), or whose job waits for its PodGroup: converted.
_CONVERTED_SOURCES = frozenset({"koordinator", "koord", "workload", "upstream", "owner"})
_SKIPPED_ANNOTATIONS = frozenset({G.GPU_FRACTION, G.GPU_MEMORY, G.GPU_DEVICES,
                                  L.KAI_PREEMPTION_DELAY})
_EMPTY: Obj = {}
_STATUSES = {"Running": TaskStatus.RUNNING, "Pending": TaskStatus.BOUND}


class Pod(NamedTuple):
    """What is counted of a running pod."""

    event: WatchEvent
    key: PodKey
    node: NodeName
    status: TaskStatus
    request: Resource
    subgroup: str | None
    creation: str
    priority: tuple[object, object]     # spec.priority, spec.priorityClassName as written


class Counted(NamedTuple):
    """A job counted: its stand-in (tasks Unread), its ledger entry, its pods."""

    job: JobInfo
    entry: Entry
    pods: list[Pod]


def _age(pod: Pod) -> float:
    # As describe ages a job: by the oldest pod that says when it was made.
    return convert.from_rfc3339(pod.creation) or math.inf


def _read(event: WatchEvent, scheduler_name: str) -> tuple[JobKey | None, Pod | None]:
    """The pod's job, when its gang may be counted, and the pod as counted,
    when it may be (else None: it is converted); a pod of another scheduler
    counted has no job. Once per pod of the first lists: each field read
    with one lookup, the rare ones only when present."""
    meta, spec = event.obj.get("metadata"), event.obj.get("spec")
    if type(meta) is not dict or type(spec) is not dict:
        return None, None
    gang = P.upstream_gang_ref(spec) or P.gang_ref(meta)
    if gang.source in _CONVERTED_SOURCES:
        return None, None
    namespace, name = meta.get("namespace") or "default", meta.get("name", "")
    key = PodKey(f"{namespace}/{name}")
    job = P.gang_job(key, namespace, gang)
    status = event.obj.get("status") or _EMPTY
    node, phase = spec.get("nodeName"), status.get("phase")
    if not node or type(node) is not str or phase not in _STATUSES \
            or meta.get("deletionTimestamp"):
        return job, None
    # Another scheduler's pod is no task of a job: counted, it is only room.
    owner = job if _scheduler(spec) == scheduler_name else None
    if spec.get("schedulingGates") or spec.get("resourceClaims") \
            or spec.get("topologySpreadConstraints") or spec.get("initContainers") \
            or _pod_rules(spec.get("affinity")):
        return job, None        # (init containers are rare: their ports are not looked for)
    containers = spec.get("containers")
    if type(containers) is not list:
        return job, None
    for container in containers:
        if type(container) is not dict:
            return job, None
        ports = container.get("ports")
        if ports and (type(ports) is not list
                      or any(type(p) is not dict or p.get("hostPort") for p in ports)):
            return job, None    # a host port: a rule over other pods
    annotations, labels = meta.get("annotations"), meta.get("labels") or _EMPTY
    if annotations and not _SKIPPED_ANNOTATIONS.isdisjoint(annotations) or G.GPU_GROUP in labels:
        return job, None
    if spec.get("volumes") and P.pod_pvcs(spec, namespace, str(name)):
        return job, None
    problems: list[str] = []
    request = P.pod_request(spec, problems)
    if problems:
        return job, None
    return owner, Pod(event, key, NodeName(node), _STATUSES[phase], request,
                    labels.get(L.SUBGROUP_LABEL) or labels.get(L.KAI_SUBGROUP_LABEL) if labels else None,
                    str(meta.get("creationTimestamp") or ""),
                    (spec.get("priority"), spec.get("priorityClassName")))


def _pod_rules(affinity: object) -> bool:
    return isinstance(affinity, dict) and bool(
        affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


def any_waiting(events: Iterable[WatchEvent], scheduler_name: str) -> bool:
    """Whether some pod of this scheduler waits for a node."""
    for event in events:
        if event.kind is POD:
            spec = event.obj.get("spec")
            if type(spec) is dict and not spec.get("nodeName") \
                    and _scheduler(spec) == scheduler_name:
                return True
    return False


def _scheduler(spec: Obj) -> str:
    """The scheduler the pod names, as its conversion reads it."""
    return spec.get("schedulerName") or "default-scheduler"


def split(events: Iterable[WatchEvent], scheduler_name: str
          ) -> tuple[list[WatchEvent], dict[JobKey, list[Pod]], list[Pod]]:
    """The events to apply as usual, in order; the pods of the jobs that may
    be counted, by job (each job's pods all countable); other schedulers'
    pods counted."""
    converted: list[WatchEvent] = []
    jobs: dict[JobKey, list[Pod]] = {}
    others: list[Pod] = []
    apart: set[JobKey] = set()         # jobs with a pod that must be converted
    for event in events:
        if event.kind is not POD or event.type == "DELETED":
            converted.append(event)
            continue
        job, pod = _read(event, scheduler_name)
        if job is None:             # another scheduler's pod counted, or one converted
            if pod is None:
                converted.append(event)
            else:
                others.append(pod)
        elif pod is None or job in apart:
            converted.append(event)
            if job not in apart:
                apart.add(job)
                converted.extend(p.event for p in jobs.pop(job, ()))
        else:
            jobs.setdefault(job, []).append(pod)
    return converted, jobs, others


def count(job: JobKey, pods: list[Pod], groups: Groups, priorities: Priorities) -> Counted | None:
    """The job counted, or None when it must be converted after all (its
    pods say otherwise once made into facts, or it is not settled)."""
    # Made into facts: the first by key (the job's declaration is its), the
    # oldest (its age), one per distinct priority (its priority is their most).
    # Its numbers and charges counted in the same walk.
    first = oldest = pods[0]
    age = _age(oldest)
    by_priority: dict[tuple[object, object], Pod] = {}
    counts: dict[tuple[str | None, TaskStatus], int] = {}
    totals: dict[TaskStatus, int] = {}
    charges: dict[Resource, int] = {}
    for pod in pods:
        if pod.key < first.key:
            first = pod
        if pod.creation != oldest.creation:
            pod_age = _age(pod)
            if pod_age < age:
                oldest, age = pod, pod_age
        by_priority.setdefault(pod.priority, pod)
        counts[(pod.subgroup, pod.status)] = counts.get((pod.subgroup, pod.status), 0) + 1
        totals[pod.status] = totals.get(pod.status, 0) + 1
        charges[pod.request] = charges.get(pod.request, 0) + 1
    picked = {first.key: first, oldest.key: oldest}
    for pod in by_priority.values():
        picked.setdefault(pod.key, pod)
    facts = [convert.pod_facts(p.event.obj) for p in picked.values()]
    if any(f.job != job or f.problem or f.gpu is not None or f.claims or f.pvcs or f.gates
           or f.placement.rules or f.status not in (TaskStatus.RUNNING, TaskStatus.BOUND)
           for f in facts):
        return None
    described = JobInfo(job, groups.single(None))
    for f in facts:
        described.add_task(make_task(f, priorities, f.placement, groups))
    describe(described, facts, groups, priorities)
    spec = described.spec
    if described.problem is not None or spec.subgroups or spec.rules is not GangRules.KAISCHED \
            or spec.claims or spec.claim_holder is not None or len(pods) < spec.min_member:
        return None
    ready = sum(n for status, n in totals.items() if status in READY_STATUSES)
    stand_in = JobInfo(job, spec, described.priority, described.creation, described.status,
                       None, Unread({}, len(pods)), counts, totals, ready)
    return Counted(stand_in, Entry.running(stand_in, charges), pods)


def lend(cluster: ClusterInfo, counted: dict[JobKey, Counted], others: list[Pod]) -> bool:
    """The counted jobs and other schedulers' pods into a snapshot the cache
    just lent (laid out without them): the jobs' stand-ins among its jobs,
    active as every job is at a first snapshot; their entries in its ledger;
    the room of all in its node table; their nodes' tasks, and its other
    schedulers' pods, Unread. False, and nothing changed, when a counted pod
    asks for a resource no column of the table holds (a full layout would
    have one more column)."""
    table = cluster.table
    rows: list[int] = []
    asks: list[int] = []
    distinct: dict[Resource, int] = {}
    unmade: dict[NodeName, int] = {}
    index = table.index
    for pod in others:
        row = index.get(pod.node)
        if row is not None:
            rows.append(row)
            asks.append(distinct.setdefault(pod.request, len(distinct)))
    for found in counted.values():
        for pod in found.pods:
            row = index.get(pod.node)
            if row is None:
                continue        # a node not known: no room to count (as a layout does)
            rows.append(row)
            asks.append(distinct.setdefault(pod.request, len(distinct)))
            unmade[pod.node] = unmade.get(pod.node, 0) + 1
    vectors = [table.known_vector(request) for request in distinct]
    if any(vec is None for vec in vectors):
        return False
    if rows:
        # Pods per row and request, then their room per row: one row each.
        width = len(distinct)
        per_row = np.bincount(np.array(rows) * width + np.array(asks),
                              minlength=len(table.names) * width).reshape(-1, width)
        held = np.flatnonzero(per_row.any(axis=1))
        table.add_many(held, per_row[held] @ np.array(vectors), np.zeros(len(held), dtype=bool))
    ledger = cluster.ledger()
    for key, found in counted.items():
        cluster.jobs[key] = found.job
        ledger.put(key, found.job, found.entry)
    for name, n in unmade.items():
        node = cluster.nodes[name]
        node.tasks = Unread(node.tasks, n)
    if others:
        cluster.foreign = UnreadPods(cluster.foreign, len(others))
    if cluster.active is not None:
        cluster.set_active(cluster.active | counted.keys())
    return True


def take_back(cluster: ClusterInfo, counted: dict[JobKey, Counted]) -> None:
    """The counted jobs out of the model lent with them (its session's moves
    undone): their stand-ins, their entries and the Unread of their nodes and
    of other schedulers' pods go; the caller lays the node table out again
    and converts every pod counted."""
    ledger = cluster.ledger()
    for key in counted:
        if cluster.jobs.get(key) is counted[key].job:
            del cluster.jobs[key]
            ledger.put(key, None)
    for node in cluster.nodes.values():
        if isinstance(node.tasks, Unread):
            node.tasks = node.tasks.made()
    if isinstance(cluster.foreign, UnreadPods):
        cluster.foreign = cluster.foreign.made()
