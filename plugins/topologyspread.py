"""topologyspread: topologySpreadConstraints, as kube-scheduler applies them.

For a constraint over topologyKey K with selector S (pods of the pod's own
namespace), the pods S selects are counted per domain of K, only on the
nodes the constraint considers (nodeAffinityPolicy Honor: nodes matching the
pod's nodeSelector and required node affinity; nodeTaintsPolicy Honor: nodes
whose taints it tolerates). With min the smallest count over those domains
(0 while they are fewer than minDomains), a node of domain D is allowed when
count(D) + (1 if S selects the pod itself) - min <= maxSkew.
DoNotSchedule refuses the others and nodes without K; ScheduleAnyway only
scores, more for emptier domains.

A pod placed earlier in the session counts at once, an undone one is
forgotten, and so is one evicted this session (a preemptor that evicts pods to
even the spread is placed as if they were gone). While the session plans
evictions, the hard constraints count only pods no eviction could remove.
The answers read whole domains, so they are POD_PREDICATE / POD_ORDER hooks,
asked afresh: per-node counts summed per domain in one bincount.
"""
from __future__ import annotations

from typing import Any, Mapping

import attrs
import numpy as np

from kaisched.api.constraints import Placement, SpreadConstraint
from kaisched.api.podindex import PodIndex, evictable, left
from kaisched.api.task import TaskInfo
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.registry import weight_argument


@attrs.define(slots=True)
class _Considered:
    """The nodes one constraint considers for one placement, laid out for
    per-domain sums."""

    constraint: SpreadConstraint
    rows: np.ndarray           # bool per row
    row_ids: np.ndarray        # the same, as row numbers
    domains: np.ndarray        # bool per domain of the key
    ids: np.ndarray            # the domain of each considered row
    lookup: np.ndarray         # per row: its domain, or len(domains) for a node without the key
    every: bool                # every node with the key is considered


class TopologySpreadPlugin(PluginBase):
    name = "topologyspread"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.weight = weight_argument(arguments)

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        if not cluster.rules_in_play().any_rule:
            return
        constraints = {c for job in cluster.jobs.values() for t in job.tasks.values()
                       for c in t.placement.rules.spread}
        if not constraints:
            return
        self.cluster, self.table = cluster, cluster.table
        self.specs = [n.spec for n in cluster.nodes.values()]
        self.index = PodIndex(cluster, {c.matcher for c in constraints})
        self._fixed: PodIndex | None = None     # pods no eviction could remove, when asked
        self.considered: dict[tuple[Placement, SpreadConstraint], _Considered] = {}
        # While an eviction is planned, the hard constraints count only the
        # pods no eviction could remove.
        ssn.register(Hook.POD_PREDICATE, self.filter,
                     "node(s) didn't match pod topology spread constraints",
                     evicting=self.filter_evicting)
        ssn.register(Hook.POD_ORDER, self.score)
        ssn.register(Hook.ON_ALLOCATE, self._allocated)
        ssn.register(Hook.ON_DEALLOCATE, self._deallocated)

    # -- filter and score --------------------------------------------------------------
    def _skew(self, task: TaskInfo, c: SpreadConstraint,
              index: PodIndex | None = None) -> tuple[np.ndarray, _Considered]:
        """Per domain: count + self - min, over the nodes the constraint considers."""
        seen = self._considered(task.placement, c)
        counts = (index or self.index).counts[c.matcher]
        if seen.every:
            per_domain = self.cluster.domains(c.topology_key).sums(counts)
        else:
            per_domain = np.bincount(seen.ids, weights=counts[seen.row_ids],
                                     minlength=len(seen.domains))
        own = 1.0 if self.index.matches(c.matcher, task) else 0.0
        return per_domain + own - _low(per_domain, seen), seen

    # None: no constraint concerns the task (the session skips it).
    def filter(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        return self._filter(task, rows, self.index)

    def filter_evicting(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        return self._filter(task, rows, self._fixed_index())

    def _filter(self, task: TaskInfo, rows: np.ndarray, index: PodIndex) -> np.ndarray | None:
        out = None
        for c in task.placement.rules.spread:
            if c.hard:
                skew, seen = self._skew(task, c, index)
                # Per domain, then to rows in one lookup (a node without the key: last, refused).
                allowed = np.append(skew <= c.max_skew, False)
                found = allowed[seen.lookup if len(rows) == len(seen.lookup) else seen.lookup[rows]]
                out = found if out is None else out & found
        return out

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        soft = [c for c in task.placement.rules.spread if not c.hard]
        if not soft or not self.weight:
            return None
        out = np.zeros(len(rows))
        for c in soft:
            skew, seen = self._skew(task, c)
            closeness = np.append(1.0 / (1.0 + np.maximum(skew, 0.0)), 0.0)
            out += closeness[seen.lookup[rows]]
        return out * (100.0 * self.weight / len(soft))

    def _considered(self, placement: Placement, c: SpreadConstraint) -> _Considered:
        key = (placement, c)
        seen = self.considered.get(key)
        if seen is None:
            domains = self.cluster.domains(c.topology_key)
            rows = domains.has.copy()
            for i, spec in enumerate(self.specs):
                if not rows[i]:
                    continue
                if c.honor_node_affinity and not placement.matches_labels(spec.labels, spec.name):
                    rows[i] = False
                elif c.honor_taints and placement.untolerated(spec.taints) is not None:
                    rows[i] = False
            hit = np.zeros(len(domains), dtype=bool)
            hit[domains.ids[rows]] = True
            row_ids = np.flatnonzero(rows)
            lookup = np.where(domains.has, domains.ids, len(domains))
            seen = self.considered[key] = _Considered(
                c, rows, row_ids, hit, domains.ids[row_ids], lookup,
                bool((rows == domains.has).all()))
        return seen

    # -- keeping up with the session ---------------------------------------------------
    def _fixed_index(self) -> PodIndex:
        """The pods the hard constraints count while an eviction is planned:
        those no eviction could remove (all of them, otherwise: self.index)."""
        if self._fixed is None:
            cluster = self.cluster
            self._fixed = PodIndex(cluster, set(self.index.counts),
                                   keep=lambda t: not evictable(cluster, t))
        return self._fixed

    def _allocated(self, task: TaskInfo) -> None:
        self.index.add(task)
        if self._fixed is not None:
            self._fixed.add(task)

    def _deallocated(self, task: TaskInfo) -> None:
        if left(self.cluster, task):
            self.index.remove(task.key)
            if self._fixed is not None:
                self._fixed.remove(task.key)


def _low(counts: np.ndarray, seen: _Considered) -> float:
    """The smallest count over the considered domains; 0 while they are fewer
    than minDomains."""
    if int(seen.domains.sum()) < seen.constraint.min_domains or not seen.domains.any():
        return 0.0
    return float(counts[seen.domains].min())
