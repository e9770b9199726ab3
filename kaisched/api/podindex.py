"""PodIndex: the pods on nodes as placement rules see them, and for each
selector of interest how many pods it selects on each node row.

Counts are per row (a node); per-domain counts are one bincount away (see
Domains.sums), so one counter serves every topology key. The index follows the
session: a task placed (even pipelined) counts at once; undone, it is gone.

It can also count the terms present pods hold (per kind, see Held), for the
rules that read other pods' terms toward a new pod: an existing pod's required
anti-affinity keeps a new pod away, and its required affinity and preferred
terms score the new pod's nodes. Terms are indexed by a label their selector
needs, so a new pod finds the terms selecting it without a loop over pods.
"""
from __future__ import annotations

import enum
from typing import Callable, Iterable, Mapping

import attrs
import numpy as np

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.constraints import Matcher, PodAffinityTerm, PodMatcher, PodRules
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES, OCCUPYING_STATUSES, PodKey, TaskStatus

# A pipelined task will run where it is pipelined: rules count it already.
PRESENT = OCCUPYING_STATUSES | {TaskStatus.PIPELINED}


class Held(enum.Enum):
    """A kind of term a present pod holds toward the pods that come after it."""

    ANTI_AFFINITY = "anti-affinity"                  # required: refuses (the symmetric rule)
    AFFINITY = "affinity"                            # required: scores hardPodAffinityWeight
    PREFERRED_AFFINITY = "preferred-affinity"        # scores + its weight
    PREFERRED_ANTI_AFFINITY = "preferred-anti-affinity"   # scores - its weight


@attrs.frozen(slots=True, cache_hash=True)
class HeldTerm:
    kind: Held
    term: PodAffinityTerm
    weight: int = 0                 # preferred terms only


def held_terms(rules: PodRules, kinds: frozenset[Held]) -> tuple[HeldTerm, ...]:
    """The terms of these kinds among a pod's rules."""
    out: list[HeldTerm] = []
    if Held.ANTI_AFFINITY in kinds:
        out += [HeldTerm(Held.ANTI_AFFINITY, t) for t in rules.anti_affinity]
    if Held.AFFINITY in kinds:
        out += [HeldTerm(Held.AFFINITY, t) for t in rules.affinity]
    if Held.PREFERRED_AFFINITY in kinds:
        out += [HeldTerm(Held.PREFERRED_AFFINITY, w.term, w.weight) for w in rules.preferred_affinity]
    if Held.PREFERRED_ANTI_AFFINITY in kinds:
        out += [HeldTerm(Held.PREFERRED_ANTI_AFFINITY, w.term, w.weight)
                for w in rules.preferred_anti_affinity]
    return tuple(out)


@attrs.define(slots=True)
class Occupant:
    key: PodKey
    row: int
    namespace: str
    labels: Mapping[str, str]
    rules: PodRules


class PodIndex:
    def __init__(self, cluster: ClusterInfo, matchers: Iterable[Matcher],
                 held: Iterable[Held] = (), keep: Callable[[TaskInfo], bool] | None = None) -> None:
        """keep: the tasks it counts (default: every one on a node)."""
        self.cluster = cluster
        self.keep = keep
        self.ns_labels = cluster.namespace_labels
        self.kinds = frozenset(held)      # the kinds of terms present pods hold that are counted
        rows = len(cluster.table)
        self.pods: dict[PodKey, Occupant] = {}
        self.counts: dict[Matcher, np.ndarray] = {}
        self.totals: dict[Matcher, int] = {}
        self._anchored: dict[tuple[str, str], list[Matcher]] = {}
        self._generic: list[Matcher] = []
        for m in dict.fromkeys(matchers):
            self.counts[m] = np.zeros(rows)
            self.totals[m] = 0
            anchor = m.selector.anchor if m.selector is not None else None
            if m.selector is None:
                continue          # selects nothing: its count stays zero
            if anchor is None:
                self._generic.append(m)
            else:
                self._anchored.setdefault(anchor, []).append(m)
        # Terms present pods hold, per row, indexed per kind by a label they need.
        self.held: dict[HeldTerm, np.ndarray] = {}
        self.held_totals: dict[HeldTerm, int] = {}
        self._held_anchored: dict[Held, dict[tuple[str, str], list[HeldTerm]]] = \
            {k: {} for k in Held}
        self._held_generic: dict[Held, list[HeldTerm]] = {k: [] for k in Held}
        self._terms_of: dict[PodRules, tuple[HeldTerm, ...]] = {}
        # The terms selecting a pod, per (labels, namespace, kind), while no new term comes.
        self._against: dict[tuple[tuple[tuple[str, str], ...], str, Held], list[HeldTerm]] = {}
        index = cluster.table.index
        for job in cluster.jobs.values():
            for task in job.tasks.values():
                if task.node_name in index and task.status in PRESENT \
                        and (keep is None or keep(task)):
                    self.add(task)
        for pod in cluster.foreign:
            row = index.get(pod.node_name)
            if row is not None:
                self._add(Occupant(pod.key, row, pod.namespace, dict(pod.labels), pod.rules))

    # -- questions -------------------------------------------------------------------
    def selecting(self, labels: Mapping[str, str], namespace: str) -> list[Matcher]:
        """The matchers that select a pod with these labels in this namespace."""
        found = list(self._generic)
        for kv in labels.items():
            found.extend(self._anchored.get(kv, ()))
        return [m for m in found if m.matches(labels, namespace, self.ns_labels)]

    def holds(self, kind: Held) -> bool:
        """Some present pod holds (or held this session) a term of this kind."""
        return bool(self._held_generic[kind] or self._held_anchored[kind])

    def held_against(self, labels: Mapping[str, str], namespace: str,
                     kind: Held = Held.ANTI_AFFINITY) -> list[HeldTerm]:
        """Terms of this kind held by present pods that select this pod."""
        found = list(self._held_generic[kind])
        anchored = self._held_anchored[kind]
        if anchored:
            for kv in labels.items():
                found.extend(anchored.get(kv, ()))
        return [h for h in found if h.term.matcher.matches(labels, namespace, self.ns_labels)]

    def held_against_task(self, task: TaskInfo, kind: Held = Held.ANTI_AFFINITY) -> list[HeldTerm]:
        """held_against for a task, remembered for its labels and namespace:
        a new pod is asked about as often as it is weighed."""
        key = (task.labels, task.namespace, kind)
        found = self._against.get(key)
        if found is None:
            found = self._against[key] = self.held_against(dict(task.labels), task.namespace, kind)
        return found

    def matches(self, matcher: PodMatcher, task: TaskInfo) -> bool:
        return matcher.matches(dict(task.labels), task.namespace, self.ns_labels)

    # -- changes -----------------------------------------------------------------------
    def add(self, task: TaskInfo) -> None:
        """Count a task that is now on a node (once: an undone eviction
        announces a task that never left). One on a node the table does not
        hold (another pool's, or one not known) counts here no more than it did
        before its eviction was tried."""
        if task.key in self.pods or task.node_name is None \
                or (self.keep is not None and not self.keep(task)):
            return
        if not self._generic and not self._holding(task.placement.rules) \
                and not any(kv in self._anchored for kv in task.labels):
            return              # no rule could count it: most pods of a big cluster
        row = self.cluster.table.index.get(task.node_name)
        if row is None:
            return
        self._add(Occupant(task.key, row, task.namespace, dict(task.labels),
                           task.placement.rules))

    def remove(self, key: PodKey) -> None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            self._count(pod, -1)

    def _holding(self, rules: PodRules) -> tuple[HeldTerm, ...]:
        found = self._terms_of.get(rules)
        if found is None:
            found = self._terms_of[rules] = held_terms(rules, self.kinds) if self.kinds else ()
        return found

    def _add(self, pod: Occupant) -> None:
        self.pods[pod.key] = pod
        self._count(pod, 1)

    def _count(self, pod: Occupant, delta: int) -> None:
        for m in self.selecting(pod.labels, pod.namespace):
            self.counts[m][pod.row] += delta
            self.totals[m] += delta
        for term in self._holding(pod.rules):
            held = self.held.get(term)
            if held is None:
                held = self.held[term] = np.zeros(len(self.cluster.table))
                self.held_totals[term] = 0
                self._against.clear()
                selector = term.term.matcher.selector
                if selector is not None:
                    anchor = selector.anchor
                    if anchor is None:
                        self._held_generic[term.kind].append(term)
                    else:
                        self._held_anchored[term.kind].setdefault(anchor, []).append(term)
            held[pod.row] += delta
            self.held_totals[term] += delta


def left(cluster: ClusterInfo, task: TaskInfo) -> bool:
    """The task, as the session has it now, is no longer on a node, or it was
    evicted this session: placement rules stop counting it (a preemptor that
    clears a conflict is placed as if its victims were gone, and binds once
    they are). A pod that was leaving before the session still counts."""
    current = cluster.jobs[task.job].tasks.get(task.key)
    return current is None or current.node_name is None or current.status not in PRESENT \
        or (current.status is TaskStatus.RELEASING and task.status is not TaskStatus.RELEASING)


def evictable(cluster: ClusterInfo, task: TaskInfo) -> bool:
    """An eviction could remove the task: it runs, is not critical, and its job
    is preemptible. Rules that eviction may clear count only the others when
    the session plans evictions."""
    return task.status in EVICTABLE_STATUSES and not task.critical \
        and cluster.jobs[task.job].spec.preemptible


def present(cluster: ClusterInfo, task: TaskInfo) -> bool:
    """The task, as the session has it now, is on a node (placed, pipelined,
    running or releasing): the rules count it."""
    current = cluster.jobs[task.job].tasks.get(task.key)
    return current is not None and current.node_name is not None and current.status in PRESENT
