"""podaffinity: inter-pod affinity and anti-affinity, as kube-scheduler applies them.

Filters: a node is refused when
- a required podAffinity term finds no selected pod in the node's domain of
  its topologyKey (unless no pod anywhere is selected yet and the pod selects
  itself: the first pod of a group may go anywhere);
- a required podAntiAffinity term finds a selected pod in the node's domain;
- a pod already there (of any scheduler) holds a required anti-affinity term
  that selects this pod, within its topologyKey (the symmetric rule).
Score: preferred terms add (affinity) or take away (anti-affinity) their
weight where a selected pod is in the node's domain, scaled to 0..100 by the
sum of weights, times the plugin's `weight` argument.

Pods placed earlier in the same session count at once, and an undone
placement is forgotten (ON_ALLOCATE / ON_DEALLOCATE keep the counts). The
answers read pods across whole domains, so they are POD_PREDICATE/POD_ORDER
hooks, asked afresh over all nodes: a count per node and one bincount per
topology key, never a loop over pods.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from kaisched.api.podindex import PodIndex, present
from kaisched.api.task import TaskInfo
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.registry import weight_argument


class PodAffinityPlugin(PluginBase):
    name = "podaffinity"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.weight = weight_argument(arguments)

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        if not cluster.rules_in_play().any_rule:
            return
        self.cluster, self.table = cluster, cluster.table
        rules = {t.placement.rules for job in cluster.jobs.values() for t in job.tasks.values()}
        rules |= {p.rules for p in cluster.foreign}
        terms = [t for r in rules for t in (*r.affinity, *r.anti_affinity,
                                           *(w.term for w in r.preferred_affinity),
                                           *(w.term for w in r.preferred_anti_affinity))]
        if not terms:
            return
        self.keys_of: dict[Any, set[str]] = {}
        for term in terms:
            self.keys_of.setdefault(term.matcher, set()).add(term.topology_key)
        self.index = PodIndex(cluster, self.keys_of, hold_terms=True)
        ssn.register(Hook.POD_PREDICATE, self.affinity, "node(s) didn't match pod affinity rules")
        ssn.register(Hook.POD_PREDICATE, self.anti_affinity,
                     "node(s) didn't match pod anti-affinity rules")
        ssn.register(Hook.POD_PREDICATE, self.symmetric,
                     "node(s) didn't satisfy existing pods' anti-affinity rules")
        ssn.register(Hook.POD_ORDER, self.score)
        ssn.register(Hook.ON_ALLOCATE, self.index.add)
        ssn.register(Hook.ON_DEALLOCATE, self._deallocated)

    # -- filters and score -------------------------------------------------------------
    def _in_domain(self, counts: np.ndarray, key: str, rows: np.ndarray,
                   absent: bool = False) -> np.ndarray:
        """Per row asked: does the row's domain of key hold a counted pod (or,
        absent: does it not; a node without the key is in no domain)?"""
        domains = self.cluster.domains(key)
        every = len(rows) == len(counts)            # rows are sorted and distinct: all of them
        if domains.per_node:            # a host: the node's own count
            mine = counts if every else counts[rows]
            return mine == 0 if absent else mine > 0
        per_domain = domains.sums(counts)
        ids = domains.ids if every else domains.ids[rows]
        found = (ids >= 0) & (per_domain[np.maximum(ids, 0)] > 0)
        return ~found if absent else found

    # None: no rule concerns the task (the session skips it).
    def affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        terms = task.placement.rules.affinity
        if not terms:
            return None
        index = self.index
        if all(index.totals[t.matcher] == 0 for t in terms) and \
                all(index.matches(t.matcher, task) for t in terms):
            return None             # the first of its group: anywhere
        out = None
        for term in terms:
            found = self._in_domain(index.counts[term.matcher], term.topology_key, rows)
            out = found if out is None else out & found
        return out

    def anti_affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        out = None
        for term in task.placement.rules.anti_affinity:
            if self.index.totals[term.matcher]:
                found = self._in_domain(self.index.counts[term.matcher], term.topology_key, rows,
                                        absent=True)
                out = found if out is None else out & found
        return out

    def symmetric(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        if not self.index.held:
            return None
        out = None
        for term in self.index.held_against(dict(task.labels), task.namespace):
            if self.index.held_totals[term]:
                found = self._in_domain(self.index.held[term], term.topology_key, rows, absent=True)
                out = found if out is None else out & found
        return out

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        rules = task.placement.rules
        weighted = [(w, 1.0) for w in rules.preferred_affinity] + \
                   [(w, -1.0) for w in rules.preferred_anti_affinity]
        total = sum(abs(w.weight) for w, _ in weighted)
        if not total or not self.weight:
            return None
        out = np.zeros(len(rows))
        for w, sign in weighted:
            if self.index.totals[w.term.matcher]:
                found = self._in_domain(self.index.counts[w.term.matcher], w.term.topology_key, rows)
                out += found * (sign * w.weight)
        return out * (100.0 * self.weight / total)

    # -- keeping up with the session ---------------------------------------------------
    def _deallocated(self, task: TaskInfo) -> None:
        if not present(self.cluster, task):      # an eviction leaves it there, releasing
            self.index.remove(task.key)
