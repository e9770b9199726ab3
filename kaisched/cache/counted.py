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

import array
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
from kaisched.cache.convert.common import MALFORMED
from kaisched.cache.convert.pods import PodFacts
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
_UNHASHABLE = object()      # stands in touched for a key no set can hold
_STATUSES = {"Running": TaskStatus.RUNNING, "Pending": TaskStatus.BOUND}
# The fields of a pod's spec that make it converted when set (and, for the
# first two, its gang another's): when none is there, none is looked up.
_RARE_SPEC = frozenset({"schedulingGroup", "workloadRef", "schedulingGates", "resourceClaims",
                        "topologySpreadConstraints", "initContainers"})
_GROUP, _SUBGROUP, _KAI_SUBGROUP = L.POD_GROUP_ANNOTATION, L.SUBGROUP_LABEL, L.KAI_SUBGROUP_LABEL
_GPU_GROUP = G.GPU_GROUP
_pod_request, _pod_pvcs, _scheduler_name = P.pod_request, P.pod_pvcs, P.scheduler_name
_pod_facts = P.pod_facts


class Pod(NamedTuple):
    """What is counted of a running pod (its node and ask are in the Split's
    placements; its ask here too, for its job's charges)."""

    event: WatchEvent
    name: str               # in its job's namespace: its key's order among its job's
    status: TaskStatus
    ask: int                # in Split.asks
    subgroup: str | None
    creation: str
    priority: tuple[object, object]     # spec.priority, spec.priorityClassName as written


_new_pod = tuple.__new__      # a Pod made from its fields in order, as _make does, by one call


class Split(NamedTuple):
    """The first lists split (see split): converted, the events to apply as
    usual, in order; jobs, the pods of the jobs that may be counted (each
    job's pods all countable); others, other schedulers' pods counted; the
    distinct asks of the pods counted; and every pod counted placed: its
    node (in nodes), its ask (in asks) and its job (in order, -1 for
    another scheduler's), in three arrays of one row per pod; firsts, the
    facts of each job's first pod, made as it was read (a job is described
    from its first pod by key, and the lists come in key order: most often
    this one; made then, while the pod is fresh in the processor's caches,
    they cost a third less than later)."""

    converted: list[WatchEvent]
    jobs: dict[JobKey, list[Pod]]
    firsts: dict[JobKey, PodFacts]
    numbers: dict[JobKey, int]      # each job's in placed (a job set apart's too)
    others: list[Pod]
    asks: list[Resource]
    nodes: list[NodeName]
    placed: tuple[array.array[int], array.array[int], array.array[int]]


class Counted(NamedTuple):
    """A job counted: its stand-in (tasks Unread), its ledger entry, its pods."""

    job: JobInfo
    entry: Entry
    pods: list[Pod]


def _age(pod: Pod) -> float:
    # As describe ages a job: by the oldest pod that says when it was made.
    return convert.from_rfc3339(pod.creation) or math.inf


class _Reader:
    """What split keeps as it reads: the jobs of pods that name kaisched's
    PodGroup annotation, found once per group, and the asks and nodes of the
    pods counted, numbered as met."""

    def __init__(self, scheduler_name: str, touched: set[tuple[object, object]]) -> None:
        self.scheduler_name = scheduler_name
        self.touched = touched
        self.named: dict[tuple[str, str], JobKey] = {}
        self.asks: list[Resource] = []
        self.ask_numbers: dict[int, int] = {}   # by the ask's identity: alike pods share one
        self.nodes: list[NodeName] = []
        self.node_numbers: dict[str, int] = {}

    def job(self, meta: Obj, spec: Obj, namespace: str, name: str,
            named: tuple[str, str] | None) -> JobKey | None:
        """The pod's job, when its gang may be counted. named: the kaisched
        PodGroup the pod names, when nothing else declares its gang: its job
        is that group's, found for the group's first pod and kept."""
        if named is not None:
            job = self.named[named] = P.gang_job(PodKey(f"{namespace}/{name}"), namespace,
                                                 P.gang_ref(meta))
            return job
        gang = P.upstream_gang_ref(spec) or P.gang_ref(meta)
        if gang.source in _CONVERTED_SOURCES:
            return None
        return P.gang_job(PodKey(f"{namespace}/{name}"), namespace, gang)

    def read(self, obj: Obj, meta: Obj, spec: Obj,
             event: WatchEvent) -> tuple[JobKey | None, Pod | None, int]:
        """The pod's job, when its gang may be counted, the pod as counted,
        when it may be (else None: it is converted), and its node's number;
        a pod of another scheduler counted has no job."""
        # Read for speed (1,500,000 pods at 50,000 nodes): each field with one
        # lookup, the rare ones looked for one by one only when one of them is there.
        namespace, name = meta.get("namespace") or "default", meta.get("name", "")
        annotations = meta.get("annotations")
        plain = _RARE_SPEC.isdisjoint(spec)
        group = annotations.get(_GROUP) if type(annotations) is dict else None
        named = (namespace, group) if group and type(group) is str and type(namespace) is str \
            and (plain or not spec.get("schedulingGroup") and not spec.get("workloadRef")) else None
        # The group's job when met before (most pods), else found (see job).
        job = self.named.get(named) if named is not None else None
        if job is None:
            job = self.job(meta, spec, namespace, name, named)
        if self.touched:
            try:
                later = (namespace, name) in self.touched
            except TypeError:           # a key no set holds (a hand-written file)
                later = True
            if later:
                return job, None, -1    # converted with what came after, in order
        status = obj.get("status") or _EMPTY
        node, phase = spec.get("nodeName"), status.get("phase")
        if job is None or not node or type(node) is not str or phase not in _STATUSES \
                or meta.get("deletionTimestamp"):
            return job, None, -1
        affinity = spec.get("affinity")
        if not plain and (spec.get("schedulingGates") or spec.get("resourceClaims")
                          or spec.get("topologySpreadConstraints")
                          or spec.get("initContainers")) \
                or affinity and _pod_rules(affinity):
            return job, None, -1    # (init containers are rare: their ports are not looked for)
        containers = spec.get("containers")
        if type(containers) is not list:
            return job, None, -1
        for container in containers:
            if type(container) is not dict:
                return job, None, -1
            ports = container.get("ports")
            if ports and (type(ports) is not list
                          or any(type(p) is not dict or p.get("hostPort") for p in ports)):
                return job, None, -1    # a host port: a rule over other pods
        labels = meta.get("labels") or _EMPTY
        if annotations and not _SKIPPED_ANNOTATIONS.isdisjoint(annotations) \
                or _GPU_GROUP in labels:
            return job, None, -1
        if spec.get("volumes") and _pod_pvcs(spec, namespace, str(name)):
            return job, None, -1
        problems: list[str] = []
        request = _pod_request(spec, problems)
        if problems:
            return job, None, -1
        ask = self.ask_numbers.get(id(request))
        number = self.node_numbers.get(node)
        # Another scheduler's pod is no task of a job: counted, it is only room.
        if spec.get("schedulerName") != self.scheduler_name \
                and _scheduler_name(spec) != self.scheduler_name:
            job = None
        return job, _new_pod(Pod, (
            event, str(name), _STATUSES[phase], self.ask(request) if ask is None else ask,
            labels.get(_SUBGROUP) or labels.get(_KAI_SUBGROUP) if labels else None,
            str(meta.get("creationTimestamp") or ""),
            (spec.get("priority"), spec.get("priorityClassName")))), \
            self.node(node) if number is None else number

    def ask(self, request: Resource) -> int:
        # Kept in asks: no other ask can take its identity.
        number = self.ask_numbers[id(request)] = len(self.asks)
        self.asks.append(request)
        return number

    def node(self, name: str) -> int:
        number = self.node_numbers[name] = len(self.nodes)
        self.nodes.append(NodeName(name))
        return number


def _pod_rules(affinity: object) -> bool:
    return isinstance(affinity, dict) and bool(
        affinity.get("podAffinity") or affinity.get("podAntiAffinity"))


def any_waiting(events: Iterable[WatchEvent], scheduler_name: str) -> bool:
    """Whether some pod of this scheduler waits for a node."""
    for event in events:
        if event.kind is POD:
            spec = event.obj.get("spec")
            if type(spec) is dict and not spec.get("nodeName") \
                    and P.scheduler_name(spec) == scheduler_name:
                return True
    return False


def touched(events: Iterable[WatchEvent]) -> set[tuple[object, object]]:
    """The pods (namespace, name as written) that an update or a deletion
    follows in the events: what the watches said after the first lists, which
    a first drain holds too. Counted once and converted again, such a pod
    would be two pods; none is counted."""
    out: set[tuple[object, object]] = set()
    for event in events:
        if event.type != "ADDED" and event.kind is POD:
            meta = event.obj.get("metadata")
            if type(meta) is dict:
                key = (meta.get("namespace") or "default", meta.get("name", ""))
                try:
                    out.add(key)
                except TypeError:       # a key no set holds: the readers find it there all the same
                    out.add(("", _UNHASHABLE))
    return out


def split(events: list[WatchEvent], scheduler_name: str) -> Split | None:
    """The first lists split into what is converted as usual and what may be
    counted (see Split); None when a pod has a field of the wrong shape, which
    no API server lets through: then nothing is counted. The events may hold
    what the watches said after the lists (a first drain does): the pods they
    touch are converted."""
    reader = _Reader(scheduler_name, touched(events))
    read = reader.read
    converted: list[WatchEvent] = []
    jobs: dict[JobKey, list[Pod]] = {}
    numbers: dict[JobKey, int] = {}
    firsts: dict[JobKey, PodFacts] = {}
    others: list[Pod] = []
    apart: set[JobKey] = set()         # jobs with a pod that must be converted
    nodes, asks, owners = array.array("l"), array.array("l"), array.array("l")
    convert_later = converted.append
    add_node, add_ask, add_owner = nodes.append, asks.append, owners.append
    for event in events:
        if event.kind is not POD or event.type == "DELETED":
            convert_later(event)
            continue
        obj = event.obj
        meta, spec = obj.get("metadata"), obj.get("spec")
        if type(meta) is not dict or type(spec) is not dict:
            convert_later(event)
            continue
        try:
            job, pod, number = read(obj, meta, spec, event)
        except MALFORMED:
            # A field of the wrong shape (only a hand-written file has one): its
            # conversion keeps the pod as unusable, a job of its own; which gang
            # it names, the split cannot tell without converting it.
            return None
        if pod is None:
            convert_later(event)
            if job is not None and job not in apart:
                apart.add(job)
                converted.extend(p.event for p in jobs.pop(job, ()))
            continue
        if job is None:
            others.append(pod)
            owner = -1
        elif job in apart:
            convert_later(event)
            continue
        else:
            pods = jobs.get(job)
            if pods is None:
                try:
                    firsts[job] = _pod_facts(obj)
                except MALFORMED:       # kept as unusable by its conversion, with why
                    apart.add(job)
                    convert_later(event)
                    continue
                pods = jobs[job] = []
                numbers[job] = len(numbers)
            pods.append(pod)
            owner = numbers[job]
        add_node(number)
        add_ask(pod.ask)
        add_owner(owner)
    return Split(converted, jobs, firsts, numbers, others, reader.asks, reader.nodes,
                 (nodes, asks, owners))


def count(job: JobKey, pods: list[Pod], split: Split, groups: Groups,
          priorities: Priorities) -> Counted | None:
    """The job counted (one of split's), or None when it must be converted
    after all (its pods say otherwise once made into facts, or it is not
    settled)."""
    # Made into facts: the first by key (the job's declaration is its), the
    # oldest (its age), one per distinct priority (its priority is their most).
    # Its numbers and charges counted in the same walk.
    first = oldest = pods[0]
    age = _age(oldest)
    by_priority: dict[tuple[object, object], Pod] = {}
    counts: dict[tuple[str | None, TaskStatus], int] = {}
    totals: dict[TaskStatus, int] = {}
    per_ask: dict[int, int] = {}
    for pod in pods:
        if pod.name < first.name:       # one namespace: the names order the keys
            first = pod
        if pod.creation != oldest.creation:
            pod_age = _age(pod)
            if pod_age < age:
                oldest, age = pod, pod_age
        by_priority.setdefault(pod.priority, pod)
        counts[(pod.subgroup, pod.status)] = counts.get((pod.subgroup, pod.status), 0) + 1
        totals[pod.status] = totals.get(pod.status, 0) + 1
        per_ask[pod.ask] = per_ask.get(pod.ask, 0) + 1
    picked = {first.name: first, oldest.name: oldest}
    for pod in by_priority.values():
        picked.setdefault(pod.name, pod)
    made = pods[0]
    try:
        facts = [split.firsts[job] if p is made else _pod_facts(p.event.obj)
                 for p in picked.values()]
    except MALFORMED:
        return None         # kept as unusable by its conversion, with why
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
    charges: dict[Resource, int] = {}
    asks = split.asks
    for ask, n in per_ask.items():      # (equal asks apart by identity are one charge)
        charges[asks[ask]] = charges.get(asks[ask], 0) + n
    return Counted(stand_in, Entry.running(stand_in, charges), pods)


def lend(cluster: ClusterInfo, counted: dict[JobKey, Counted], split: Split) -> bool:
    """The counted jobs (of split's) and other schedulers' pods into a
    snapshot the cache just lent (laid out without them): the jobs'
    stand-ins among its jobs, active as every job is at a first snapshot;
    their entries in its ledger; the room of all in its node table; their
    nodes' tasks, and its other schedulers' pods, Unread. False, and nothing
    changed, when a pod the split counted asks for a resource no column of
    the table holds: a full layout would have one more column (for a pod
    whose node is gone too, or whose job was converted after all)."""
    table = cluster.table
    vectors = [table.known_vector(request) for request in split.asks]
    if any(vec is None for vec in vectors):
        return False
    nodes, asks, owners = (np.asarray(a, dtype=np.int64) for a in split.placed)
    # The pods placed of the jobs counted and other schedulers' (owner -1, the last).
    kept = np.zeros(len(split.numbers) + 1, dtype=bool)
    kept[[split.numbers[key] for key in counted]] = True
    kept[-1] = True
    # Each node's row, -1 for one not known (no room to count, as a layout does).
    rows = np.array([table.index.get(name, -1) for name in split.nodes], dtype=np.int64)[nodes]
    placed = kept[owners] & (rows >= 0)
    rows, asks, own = rows[placed], asks[placed], owners[placed] >= 0
    if len(rows):
        # Pods per row and ask, then their room per row: one row each.
        width = len(vectors)
        per_row = np.bincount(rows * width + asks,
                              minlength=len(table.names) * width).reshape(-1, width)
        held = np.flatnonzero(per_row.any(axis=1))
        table.add_many(held, per_row[held] @ np.array(vectors), np.zeros(len(held), dtype=bool))
    ledger = cluster.ledger()
    for key, found in counted.items():
        cluster.jobs[key] = found.job
        ledger.put(key, found.job, found.entry)
    unmade = np.bincount(rows[own], minlength=len(table.names))
    for row in np.flatnonzero(unmade).tolist():
        node = cluster.nodes[table.names[row]]
        node.tasks = Unread(node.tasks, int(unmade[row]))
    if split.others:
        cluster.foreign = UnreadPods(cluster.foreign, len(split.others))
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
