"""The scheduler's cache: objects converted once as watch events arrive, and
snapshot() that assembles a ClusterInfo from them each cycle."""
from __future__ import annotations

import logging
import time

import attrs

from kaisched.api.cluster import ClusterInfo, ForeignPod, RulesInPlay
from kaisched.api.job import GangSpec, JobInfo, PodGroupStatus
from kaisched.api.node import NodeSpec
from kaisched.api.placement import Placement
from kaisched.api.queue import QueueInfo
from kaisched.api.task import TaskInfo
from kaisched.api.resource import Resource
from kaisched.api.types import (
    DEFAULT_QUEUE, OCCUPYING_STATUSES, JobKey, NodeName, PodKey, QueueName, TaskStatus, job_key,
)
from kaisched.cache import convert
from kaisched.cache.convert import PodFacts
from kaisched.cluster.client import ClusterClient, Obj, Subscription, WatchEvent
from kaisched.cluster.events import event_object, object_reference
from kaisched.errors import ApiError
from kaisched.cluster.kinds import (
    NAMESPACE, NODE, POD, PODGROUP, PRIORITY_CLASS, QUEUE, SCHEDULING_KINDS, UPSTREAM_PODGROUP,
    XK8S_PODGROUP, object_key,
)

# The gang declarations read from each PodGroup kind.
_GROUP_READERS = {PODGROUP: convert.podgroup, XK8S_PODGROUP: convert.xk8s_podgroup,
                  UPSTREAM_PODGROUP: convert.upstream_podgroup}


NO_STATUS = PodGroupStatus()
NODE_NOT_USABLE = "NodeNotUsable"       # the reason of the warning Event about such a node

log = logging.getLogger(__name__)


@attrs.frozen(slots=True)
class _Group:
    spec: GangSpec
    status: PodGroupStatus
    problem: str | None
    creation: float


class Cache:
    def __init__(self, scheduler_name: str = "kaisched") -> None:
        self.scheduler_name = scheduler_name
        self.nodes: dict[str, NodeSpec] = {}
        self.pods: dict[PodKey, PodFacts] = {}
        self.groups: dict[JobKey, _Group] = {}
        self.xk8s_groups: dict[JobKey, _Group] = {}
        self.upstream_groups: dict[JobKey, _Group] = {}
        self.namespaces: dict[str, dict[str, str]] = {}     # name -> labels
        self.queues: dict[str, QueueInfo] = {}
        self.priority_classes: dict[str, tuple[int, bool]] = {}
        self._subscription: Subscription | None = None
        self._tasks: dict[PodKey, tuple[PodFacts, TaskInfo]] = {}
        self._priorities: tuple[dict[str, int], int] = ({}, 0)
        self._singles: dict[QueueName, GangSpec] = {}
        # Equal placements made one object: the session's per-class caches
        # then find theirs by identity, not by comparing pod rules field by field.
        # Its keys are also every distinct placement, so what the pods' rules read
        # is found without walking every task (_rules: for which size of it).
        self._placements: dict[Placement, Placement] = {}
        self._rules: tuple[int, RulesInPlay] = (-1, RulesInPlay())
        self._node_problems: dict[str, str] = {}             # node -> problem, told once
        self._untold: dict[str, tuple[Obj, str]] = {}       # node -> (reference, problem)

    def sync(self, client: ClusterClient) -> int:
        """Apply every event since the last sync; the first one lists everything."""
        if self._subscription is None:
            self._subscription = client.subscribe(SCHEDULING_KINDS)
        events = self._subscription.drain()
        for event in events:
            self.apply(event)
        if self._untold:
            self._tell_node_problems(client)
        return len(events)

    def _note_node(self, obj: Obj, problem: str | None) -> None:
        """Remember a node no pod can be placed on, to say so once (again only
        when what is wrong changes)."""
        name = object_key(obj)[1]
        if problem is None:
            self._node_problems.pop(name, None)
            self._untold.pop(name, None)
        elif self._node_problems.get(name) != problem:
            self._node_problems[name] = problem
            self._untold[name] = (object_reference({**obj, "kind": "Node"}), problem)

    def _tell_node_problems(self, client: ClusterClient) -> None:
        """One warning Event per unusable node. A node is the cluster's, not a
        scheduling decision's, so the cache that read it says it, not a session."""
        for name, (ref, problem) in sorted(self._untold.items()):
            message = f"kaisched places no pod on node {name}: {problem}"
            try:
                client.create(event_object(ref, "Warning", NODE_NOT_USABLE, message, "kaisched",
                                           time.time()))
            except ApiError as exc:
                # Told in the log instead; the node stays out either way.
                log.warning("%s (the Event could not be written: %s)", message, exc)
        self._untold.clear()

    def apply(self, event: WatchEvent) -> None:
        try:
            self._apply(event)
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            # A field of the wrong shape (only hand-written files get past an
            # API server with one): the object is kept as unusable, with why.
            self._apply_broken(event, f"malformed {event.kind.kind}: {exc.__class__.__name__}: {exc}")

    def _apply_broken(self, event: WatchEvent, problem: str) -> None:
        namespace, name = object_key(event.obj)
        if event.kind == POD:
            meta = event.obj.get("metadata") if isinstance(event.obj.get("metadata"), dict) else {}
            spec = event.obj.get("spec") if isinstance(event.obj.get("spec"), dict) else {}
            self.pods[PodKey(f"{namespace}/{name}")] = convert.broken_pod(meta, spec, problem)
        elif event.kind == NODE:
            self.nodes[name] = NodeSpec(NodeName(name), Resource(), ready=False)
            self._note_node(event.obj, problem)
        elif event.kind in _GROUP_READERS:
            store = self._group_store(event.kind)
            store[job_key(namespace, name)] = _Group(GangSpec(declared=event.kind == PODGROUP),
                                                     PodGroupStatus(), problem, 0.0)
        elif event.kind == QUEUE:
            self.queues[name] = QueueInfo(QueueName(name), problem=problem)

    def _apply(self, event: WatchEvent) -> None:
        obj, gone = event.obj, event.type == "DELETED"
        namespace, name = object_key(obj)
        if event.kind == POD:
            key = PodKey(f"{namespace}/{name}")
            if gone:
                self.pods.pop(key, None)
                self._tasks.pop(key, None)
            else:
                self.pods[key] = convert.pod_facts(obj)
        elif event.kind == NODE:
            if gone:
                self.nodes.pop(name, None)
                self._note_node(obj, None)
            else:
                self.nodes[name], problem = convert.node_spec_and_problem(obj)
                self._note_node(obj, problem)
        elif event.kind in _GROUP_READERS:
            store = self._group_store(event.kind)
            key = job_key(namespace, name)
            if gone:
                store.pop(key, None)
            else:
                spec, status, problem = _GROUP_READERS[event.kind](obj)
                creation = convert.from_rfc3339((obj.get("metadata") or {}).get("creationTimestamp"))
                store[key] = _Group(spec, status, problem, creation or 0.0)
        elif event.kind == QUEUE:
            if gone:
                self.queues.pop(name, None)
            else:
                self.queues[name] = convert.queue(obj)
        elif event.kind == PRIORITY_CLASS:
            if gone:
                self.priority_classes.pop(name, None)
            else:
                pc_name, value, default = convert.priority_class(obj)
                self.priority_classes[pc_name] = (value, default)
        elif event.kind == NAMESPACE:
            if gone:
                self.namespaces.pop(name, None)
            else:
                self.namespaces[name] = convert.namespace_labels(obj)

    def _group_store(self, kind: object) -> dict[JobKey, _Group]:
        if kind == PODGROUP:
            return self.groups
        return self.xk8s_groups if kind == XK8S_PODGROUP else self.upstream_groups

    def snapshot(self, now: float) -> ClusterInfo:
        values = {n: v for n, (v, _) in self.priority_classes.items()}
        default_priority = max((v for v, d in self.priority_classes.values() if d), default=0)
        if (values, default_priority) != self._priorities:
            self._priorities, self._tasks = (values, default_priority), {}
        jobs: dict[JobKey, JobInfo] = {}
        foreign: list[ForeignPod] = []
        for facts in self.pods.values():
            if facts.status is None:
                continue
            if facts.scheduler_name != self.scheduler_name:
                if facts.node_name and facts.status in OCCUPYING_STATUSES:
                    # Its labels and rules too: other pods' affinity and spread count it.
                    foreign.append(ForeignPod(facts.node_name, facts.resreq,
                                              facts.status is TaskStatus.RELEASING,
                                              facts.key, facts.labels, facts.placement.rules))
                continue
            job = jobs.get(facts.job)
            if job is None:
                job = jobs[facts.job] = self._new_job(facts, values)
            job.add_task(self._task(facts, values, default_priority))
            if facts.problem and not job.problem:
                job.problem = f"pod {facts.key}: {facts.problem}"
            # A job is as old as its oldest part: a PodGroup made for pods that
            # already waited does not send them to the back of the line.
            if not job.creation or facts.creation < job.creation:
                job.creation = facts.creation
        for job in jobs.values():
            if job.spec.priority_class is None:
                job.priority = max((t.priority for t in job.tasks.values()), default=0)
        return ClusterInfo.assemble(self.nodes.values(), jobs.values(), self.queues.values(),
                                    values, foreign, now, self.namespaces,
                                    self._rules_in_play(foreign))

    def _rules_in_play(self, foreign: list[ForeignPod]) -> RulesInPlay:
        if len(self._placements) > 2 * len(self.pods) + 64:      # forget gone pods' placements
            self._placements = {t.placement: t.placement for _, t in self._tasks.values()}
            self._rules = (-1, self._rules[1])
        size, ours = self._rules
        if size != len(self._placements):
            ours = RulesInPlay.of(p.rules for p in self._placements)
            self._rules = (len(self._placements), ours)
        if not any(p.rules for p in foreign):
            return ours
        return RulesInPlay.of([*(p.rules for p in self._placements), *(p.rules for p in foreign)])

    def _task(self, facts: PodFacts, values: dict[str, int], default: int) -> TaskInfo:
        """The pod's TaskInfo, made again only when the pod changed (it is frozen,
        so every snapshot can share it)."""
        cached = self._tasks.get(facts.key)
        if cached is not None and cached[0] is facts:
            return cached[1]
        priority = facts.priority if facts.priority is not None else \
            values.get(facts.priority_class, default)
        task = TaskInfo(
            key=facts.key, uid=facts.uid, job=facts.job, status=facts.status,  # type: ignore[arg-type]
            resreq=facts.resreq, node_name=facts.node_name, subgroup=facts.subgroup,
            priority=priority, creation=facts.creation,
            placement=self._placements.setdefault(facts.placement, facts.placement),
            critical=facts.critical, unschedulable=facts.unschedulable, labels=facts.labels)
        self._tasks[facts.key] = (facts, task)
        return task

    def _new_job(self, facts: PodFacts, priorities: dict[str, int]) -> JobInfo:
        key = facts.job
        source = facts.gang.source
        problem = None
        creation = 0.0
        status = NO_STATUS
        if source in ("kaisched", "x-k8s", "upstream"):
            store = {"kaisched": self.groups, "x-k8s": self.xk8s_groups,
                     "upstream": self.upstream_groups}[source]
            # An upstream replica's gang is keyed apart; its PodGroup by name.
            group = store.get(job_key(facts.key.split("/", 1)[0], facts.gang.name)
                              if source == "upstream" else key)
            if group is None:
                kind = {"kaisched": "PodGroup", "x-k8s": "PodGroup (scheduling.x-k8s.io)",
                        "upstream": "PodGroup (scheduling.k8s.io)"}[source]
                spec, problem = GangSpec(), (f"{kind} {job_key(facts.key.split('/', 1)[0], facts.gang.name)}"
                                             f" does not exist")
            else:
                spec, status, problem, creation = group.spec, group.status, group.problem, group.creation
        elif source in ("koordinator", "volcano"):
            own = self.groups.get(key)
            if own is not None:
                spec, status, problem, creation = own.spec, own.status, own.problem, own.creation
            else:
                spec, problem = convert.annotated_gang(facts)
        else:
            spec = self._single(facts.queue_label)
            if source == "owner":
                problem = (f"waiting for the PodGrouper to create the PodGroup of its owner "
                           f"{facts.gang.name}")
        if not spec.queue:
            spec = attrs.evolve(spec, queue=QueueName(facts.queue_label or DEFAULT_QUEUE))
        priority = priorities.get(spec.priority_class, 0) if spec.priority_class else 0
        return JobInfo(key, spec, priority=priority, creation=creation, status=status,
                       problem=problem)

    def _single(self, queue_label: str | None) -> GangSpec:
        """The spec of a gang of one, shared by all such gangs of a queue."""
        queue = QueueName(queue_label or DEFAULT_QUEUE)
        spec = self._singles.get(queue)
        if spec is None:
            spec = self._singles[queue] = GangSpec(queue=queue)
        return spec
