"""PodIndex: the pods on nodes as placement rules see them, and for each
selector of interest how many pods it selects on each node row.

Counts are per row (a node); per-domain counts are one bincount away (see
Domains.sums), so one counter serves every topology key. The index follows the
session: a task placed (even pipelined) counts at once; undone, it is gone.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import attrs
import numpy as np

from kaisched.api.cluster import ClusterInfo
from kaisched.api.placement import PodAffinityTerm, PodMatcher, PodRules
from kaisched.api.task import TaskInfo
from kaisched.api.types import OCCUPYING_STATUSES, PodKey, TaskStatus

# A pipelined task will run where it is pipelined: rules count it already.
PRESENT = OCCUPYING_STATUSES | {TaskStatus.PIPELINED}


@attrs.define(slots=True)
class Occupant:
    key: PodKey
    row: int
    namespace: str
    labels: Mapping[str, str]
    rules: PodRules


class PodIndex:
    def __init__(self, cluster: ClusterInfo, matchers: Iterable[PodMatcher],
                 hold_terms: bool = False) -> None:
        self.cluster = cluster
        self.ns_labels = cluster.namespace_labels
        self.hold_terms = hold_terms      # keep counts of pods holding anti-affinity terms
        rows = len(cluster.table)
        self.pods: dict[PodKey, Occupant] = {}
        self.counts: dict[PodMatcher, np.ndarray] = {}
        self.totals: dict[PodMatcher, int] = {}
        self._anchored: dict[tuple[str, str], list[PodMatcher]] = {}
        self._generic: list[PodMatcher] = []
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
        # Held required anti-affinity terms (the symmetric rule), per row.
        self.held: dict[PodAffinityTerm, np.ndarray] = {}
        self.held_totals: dict[PodAffinityTerm, int] = {}
        self._held_anchored: dict[tuple[str, str], list[PodAffinityTerm]] = {}
        self._held_generic: list[PodAffinityTerm] = []
        index = cluster.table.index
        for job in cluster.jobs.values():
            for task in job.tasks.values():
                if task.node_name in index and task.status in PRESENT:
                    self.add(task)
        for pod in cluster.foreign:
            row = index.get(pod.node_name)
            if row is not None:
                self._add(Occupant(pod.key, row, pod.namespace, dict(pod.labels), pod.rules))

    # -- questions -------------------------------------------------------------------
    def selecting(self, labels: Mapping[str, str], namespace: str) -> list[PodMatcher]:
        """The matchers that select a pod with these labels in this namespace."""
        found = list(self._generic)
        for kv in labels.items():
            found.extend(self._anchored.get(kv, ()))
        return [m for m in found if m.matches(labels, namespace, self.ns_labels)]

    def held_against(self, labels: Mapping[str, str], namespace: str) -> list[PodAffinityTerm]:
        """Required anti-affinity terms of present pods that select this pod."""
        found = list(self._held_generic)
        for kv in labels.items():
            found.extend(self._held_anchored.get(kv, ()))
        return [t for t in found if t.matcher.matches(labels, namespace, self.ns_labels)]

    def matches(self, matcher: PodMatcher, task: TaskInfo) -> bool:
        return matcher.matches(dict(task.labels), task.namespace, self.ns_labels)

    # -- changes -----------------------------------------------------------------------
    def add(self, task: TaskInfo) -> None:
        """Count a task that is now on a node (once: an undone eviction
        announces a task that never left)."""
        if task.key in self.pods or task.node_name is None:
            return
        if not self._generic and not (self.hold_terms and task.placement.rules.anti_affinity) \
                and not any(kv in self._anchored for kv in task.labels):
            return              # no rule could count it: most pods of a big cluster
        row = self.cluster.table.index[task.node_name]
        self._add(Occupant(task.key, row, task.namespace, dict(task.labels),
                           task.placement.rules))

    def remove(self, key: PodKey) -> None:
        pod = self.pods.pop(key, None)
        if pod is not None:
            self._count(pod, -1)

    def _add(self, pod: Occupant) -> None:
        self.pods[pod.key] = pod
        self._count(pod, 1)

    def _count(self, pod: Occupant, delta: int) -> None:
        for m in self.selecting(pod.labels, pod.namespace):
            self.counts[m][pod.row] += delta
            self.totals[m] += delta
        for term in pod.rules.anti_affinity if self.hold_terms else ():
            held = self.held.get(term)
            if held is None:
                held = self.held[term] = np.zeros(len(self.cluster.table))
                selector = term.matcher.selector
                if selector is not None:
                    anchor = selector.anchor
                    if anchor is None:
                        self._held_generic.append(term)
                    else:
                        self._held_anchored.setdefault(anchor, []).append(term)
            held[pod.row] += delta
            self.held_totals[term] = self.held_totals.get(term, 0) + delta


def present(cluster: ClusterInfo, task: TaskInfo) -> bool:
    """The task, as the session has it now, is on a node (placed, pipelined,
    running or releasing): the rules count it."""
    current = cluster.jobs[task.job].tasks.get(task.key)
    return current is not None and current.node_name is not None and current.status in PRESENT
