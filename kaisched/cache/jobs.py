"""From converted pods and PodGroups to the model's tasks and jobs: the
rules both the incremental model and the from-scratch rebuild follow, so the
two cannot disagree on what a job is."""
from __future__ import annotations

import operator
from typing import Callable, Iterable, Mapping

import attrs

from kaisched.api import labels as L
from kaisched.api.clusterinfo import ForeignPod
from kaisched.api.constraints import Placement
from kaisched.api.dradevices import GroupClaim
from kaisched.api.job import GangSpec, JobInfo, PodGroupStatus
from kaisched.api.task import TaskInfo
from kaisched.api.types import (
    DEFAULT_QUEUE,
    OCCUPYING_STATUSES,
    GangRules,
    JobKey,
    NodeName,
    PodKey,
    QueueName,
    TaskStatus,
    job_key,
)
from kaisched.cache import convert
from kaisched.cache.convert import PodFacts, Workload
from kaisched.cache.convert.draobjects import resolve_claims
from kaisched.cache.convert.koordinator import min_available
from kaisched.cache.convert.pods import preemption_delay
from kaisched.cluster.kinds import UPSTREAM_PODGROUPS

NO_STATUS = PodGroupStatus()
_BY_KEY = operator.attrgetter("key")
# The PodGroup kinds a pod can name, and how a missing one is called.
GROUP_KINDS = {"kaisched": "PodGroup", "x-k8s": "PodGroup (scheduling.x-k8s.io)",
               "koord": "PodGroup (scheduling.sigs.k8s.io)", "kai": "PodGroup (scheduling.run.ai)",
               "upstream": "PodGroup (scheduling.k8s.io)"}
# An upstream PodGroup is kept per version it is served in; the first found is read.
UPSTREAM_STORES = tuple(f"upstream {kind.version}" for kind in UPSTREAM_PODGROUPS)
# Gangs of the upstream Workload API: all their pods must name one scheduler.
WORKLOAD_SOURCES = ("upstream", "workload")


@attrs.frozen(slots=True)
class Group:
    """A PodGroup as read: its declaration, the status written last, why it is
    unusable (if it is), and when it was made."""

    spec: GangSpec
    status: PodGroupStatus
    problem: str | None
    creation: float
    pool: str | None = None         # the node pool its label names (only read by a shard)


@attrs.frozen(slots=True)
class Priorities:
    """PriorityClass values, and the value of the global default."""

    values: Mapping[str, int] = attrs.field(factory=dict)
    default: int = 0
    never: frozenset[str] = frozenset()     # classes whose pods never preempt

    @classmethod
    def of(cls, classes: Mapping[str, tuple[int, bool, bool]]) -> Priorities:
        return cls({n: v for n, (v, _, _) in classes.items()},
                   max((v for v, d, _ in classes.values() if d), default=0),
                   frozenset(n for n, (_, _, never) in classes.items() if never))

    def never_preempts(self, facts: PodFacts) -> bool:
        return facts.never_preempts or facts.priority_class in self.never

    def of_pod(self, facts: PodFacts) -> int:
        if facts.priority is not None:
            return facts.priority
        return self.values.get(facts.priority_class, self.default)


class Groups:
    """The PodGroups of each kind, by key, and the shared specs of gangs of one."""

    def __init__(self) -> None:
        self.stores: dict[str, dict[JobKey, Group]] = {
            "kaisched": {}, "x-k8s": {}, "koord": {}, "kai": {}, **{s: {} for s in UPSTREAM_STORES}}
        self.workloads: dict[JobKey, Workload] = {}     # v1alpha1 Workloads: their podGroups
        self._singles: dict[QueueName, GangSpec] = {}

    def group(self, source: str, key: JobKey) -> Group | None:
        if source == "upstream":
            return next((g for s in UPSTREAM_STORES if (g := self.stores[s].get(key)) is not None),
                        None)
        return self.stores[source].get(key)

    def single(self, queue_label: str | None) -> GangSpec:
        """The spec of a gang of one, shared by all such gangs of a queue."""
        queue = QueueName(queue_label or DEFAULT_QUEUE)
        spec = self._singles.get(queue)
        if spec is None:
            spec = self._singles[queue] = GangSpec(queue=queue)
        return spec


def group_key(facts: PodFacts) -> JobKey:
    """The object a pod's job reads its declaration from: for the gangs of a
    v1alpha1 Workload (each podGroup and replica a job of its own), the Workload."""
    if facts.gang.source == "workload":
        return job_key(facts.key.split("/", 1)[0], facts.gang.name)
    return facts.job


# A node's GPU memory (MiB per GPU; None: not labelled, or no such node).
GpuMemory = Callable[[NodeName], "int | None"]
def declared_group(facts: PodFacts, groups: Groups) -> Group | None:
    """The PodGroup object the pod's job reads its declaration from, if one exists."""
    source = facts.gang.source
    if source in GROUP_KINDS:
        found = groups.group(source, group_key(facts))
        if found is not None or source != "koord":
            return found
        source = "koordinator"      # no PodGroup object: the gang annotations declare it
    if source in ("koordinator", "volcano"):
        return groups.stores["kaisched"].get(facts.job)
    return None


def shared_claims(facts: PodFacts, groups: Groups) -> tuple[GroupClaim, ...]:
    """The claims the pod's upstream PodGroup shares with its pods, when the
    pod names claims ((): no such group, or it shares none)."""
    if not facts.claim_refs:
        return ()
    group = groups.group("upstream", facts.job)
    return group.spec.claims if group is not None else ()


def pod_claims(facts: PodFacts, shared: tuple[GroupClaim, ...]
               ) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """The claims a pod uses, those of them its group's, and why it waits for one."""
    if not facts.claim_refs:
        return facts.claims, (), None
    return resolve_claims(facts.claim_refs, facts.key.split("/", 1)[0], shared)


def make_task(facts: PodFacts, priorities: Priorities, placement: Placement,
              groups: Groups | None = None, gpu_memory: GpuMemory | None = None) -> TaskInfo:
    """The task of a pod. A placed gpu-memory pod's share of its GPU, as its
    queue is charged, is read off its node's memory (gpu_memory), if known."""
    assert facts.status is not None, "a pod going away without a node is no task"
    claims, shared, _ = pod_claims(facts, shared_claims(facts, groups) if groups else ())
    gpu = facts.gpu
    if gpu is not None and gpu.portion is None and facts.node_name and gpu_memory is not None:
        memory = gpu_memory(facts.node_name)
        if memory:
            gpu = attrs.evolve(gpu, portion=gpu.portion_on(memory))
    runtime = facts.runtime
    return TaskInfo._make((     # by position, in TaskInfo's order: made once per pod event
        facts.key, facts.uid, facts.job, facts.status, facts.resreq, facts.node_name,
        facts.subgroup, priorities.of_pod(facts), facts.creation, facts.started, placement,
        facts.critical, facts.unschedulable, facts.unschedulable_reason, facts.labels,
        priorities.never_preempts(facts), facts.gates, facts.pvcs, claims, facts.controlled,
        runtime.task_runtime() if runtime is not None else None,
        None,           # successor_of: a pod's task stands for itself
        shared, gpu))


def unresolved(task: TaskInfo) -> bool:
    """A placed gpu-memory pod whose share of its GPU is not known (its node
    was not, when it was read)."""
    return (task.gpu is not None and task.gpu.portion is None and task.node_name is not None)


def as_bound(facts: PodFacts, node: NodeName) -> PodFacts:
    """A pending pod whose bind to node was sent and not echoed yet, as the
    echo will show it: bound there, its PodScheduled condition true."""
    return facts._replace(status=TaskStatus.BOUND, node_name=node, unschedulable=None,
                          unschedulable_reason=None)


def foreign_pod(facts: PodFacts) -> ForeignPod | None:
    """Another scheduler's pod, when it holds room on a node."""
    if not facts.node_name or facts.status not in OCCUPYING_STATUSES:
        return None
    # Its labels and rules too: other pods' affinity and spread count it.
    return ForeignPod(facts.node_name, facts.resreq, facts.status is TaskStatus.RELEASING,
                      facts.key, facts.labels, facts.placement.rules, facts.reserves,
                      facts.kai_reservation, facts.gpu, facts.uid)


def describe(job: JobInfo, pods: Iterable[PodFacts], groups: Groups, priorities: Priorities,
             strangers: Mapping[PodKey, str] | None = None) -> None:
    """Fill the job's declaration, status, problem, age and priority from its
    PodGroup and its pods. Order-free: the pod the job's declaration comes from
    (for gangs its pods annotate, and gangs of one) is the one with the least key
    (for Koordinator's, the least whose min-available parses).
    strangers: pods of the same gang that name another scheduler, and which."""
    pods = sorted(pods, key=_BY_KEY)
    first = pods[0]
    if first.gang.source in ("koordinator", "koord"):
        # Koordinator's gang takes its settings from the first pod whose
        # min-available parses; the others belong to it all the same.
        first = next((f for f in pods if min_available(
            f.annotation(L.KOORD_MIN_AVAILABLE) or "1") is not None), first)
    spec, status, problem, creation = _declaration(first, groups)
    if problem is None:
        problem = next((f"pod {f.key}: {f.problem}" for f in pods if f.problem), None)
    if problem is None and spec.claim_holder is not None:
        # Its pods' claims that wait to be made, their group's among them.
        problem = next((f"pod {f.key}: {waits}" for f in pods if f.claim_refs
                        and (waits := pod_claims(f, spec.claims)[2])), None)
    if problem is None and strangers and first.gang.source in WORKLOAD_SOURCES:
        problem = _mixed(first.scheduler_name, len(pods), strangers)
    if not spec.queue:
        spec = attrs.evolve(spec, queue=QueueName(first.queue_label or DEFAULT_QUEUE))
    if spec.preemption_delay is None:     # KAI's annotation on a pod, when the PodGroup has none
        delay = next((d for f in pods if f.annotations and (d := preemption_delay(
            f.annotation(L.KAI_PREEMPTION_DELAY))) is not None), None)
        if delay is not None:
            spec = attrs.evolve(spec, preemption_delay=delay)
    if spec.rules is GangRules.WORKLOAD:
        # Upstream queues a gang once its pods make up the minimum: competing
        # gangs go in the order their pods arrived, not their PodGroups.
        times = sorted(f.creation for f in pods)
        job.creation = times[min(spec.min_member, len(times)) - 1]
    else:
        # A job is as old as its oldest part: a PodGroup made for pods that
        # already waited does not send them to the back of the line.
        job.creation = min((c for c in (creation, *(f.creation for f in pods)) if c), default=0.0)
    if spec.priority is not None:
        job.priority = spec.priority
    elif spec.priority_class:
        job.priority = priorities.values.get(spec.priority_class, 0)
    else:
        job.priority = max((t.priority for t in job.tasks.values()), default=0)
    if spec.preemptible_below is not None:      # KAI: preemptible below a priority, unless it says
        spec = attrs.evolve(spec, preemptible=job.priority < spec.preemptible_below)
    job.spec, job.status, job.problem = spec, status, problem


def _mixed(mine: str, count: int, strangers: Mapping[PodKey, str]) -> str:
    names = {mine: count}
    for name in strangers.values():
        names[name] = names.get(name, 0) + 1
    said = ", ".join(f"{n} ({c} pod{'s' if c > 1 else ''})" for n, c in sorted(names.items()))
    return f"its pods name more than one scheduler: {said}; all pods of a group must name one"


def _declaration(facts: PodFacts, groups: Groups) -> tuple[GangSpec, PodGroupStatus, str | None, float]:
    source = facts.gang.source
    if source == "koord" and group_key(facts) not in groups.stores[source] \
            and facts.annotation(L.KOORD_MIN_AVAILABLE):
        source = "koordinator"      # no PodGroup object, but the gang annotations declare it
    if source in GROUP_KINDS:
        group = groups.group(source, group_key(facts))
        if group is None:
            return GangSpec(), NO_STATUS, f"{GROUP_KINDS[source]} {group_key(facts)} does not exist", 0.0
        return group.spec, group.status, group.problem, group.creation
    if source == "workload":
        workload = groups.workloads.get(group_key(facts))
        if workload is None:
            return (GangSpec(), NO_STATUS,
                    f"Workload (scheduling.k8s.io) {group_key(facts)} does not exist", 0.0)
        spec = workload.gang(facts.gang.member)
        if spec is None:
            return (GangSpec(), NO_STATUS, f"Workload {group_key(facts)} has no podGroup "
                    f"{facts.gang.member!r}", workload.creation)
        return spec, NO_STATUS, workload.problem, workload.creation
    if source in ("koordinator", "volcano"):
        own = groups.stores["kaisched"].get(facts.job)
        if own is not None:
            return own.spec, own.status, own.problem, own.creation
        spec, problem = convert.annotated_gang(facts)
        return spec, NO_STATUS, problem, 0.0
    problem = None
    if source == "owner":
        problem = f"waiting for the PodGrouper to create the PodGroup of its owner {facts.gang.name}"
    return groups.single(facts.queue_label), NO_STATUS, problem, 0.0
