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
placement is forgotten (ON_ALLOCATE / ON_DEALLOCATE). Cached answers stay
true: when a count changes on a node, every node of its domain is marked
changed, and all nodes when the first selected pod appears or the last goes.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from kaisched.api.podindex import Change, PodIndex, present
from kaisched.api.task import TaskInfo
from kaisched.errors import ConfigError
from kaisched.framework import Hook, PluginBase, Session


class PodAffinityPlugin(PluginBase):
    name = "podaffinity"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        arguments = dict(arguments or {})
        unknown = sorted(set(arguments) - {"weight"})
        if unknown:
            raise ConfigError(f"unknown argument {unknown[0]!r} (known: weight)")
        weight = arguments.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ConfigError(f"weight: expected a number >= 0, not {weight!r}")
        self.weight = float(weight)

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
        self.required = {t.matcher for r in rules for t in r.affinity}
        self.index = PodIndex(cluster, self.keys_of, hold_terms=True)
        ssn.register(Hook.PREDICATE, self.affinity, "node(s) didn't match pod affinity rules")
        ssn.register(Hook.PREDICATE, self.anti_affinity,
                     "node(s) didn't match pod anti-affinity rules")
        ssn.register(Hook.PREDICATE, self.symmetric,
                     "node(s) didn't satisfy existing pods' anti-affinity rules")
        ssn.register(Hook.NODE_ORDER, self.score)
        ssn.register(Hook.ON_ALLOCATE, lambda task: self._changed(self.index.add(task)))
        ssn.register(Hook.ON_DEALLOCATE, self._deallocated)

    # -- filters and score -------------------------------------------------------------
    def _in_domain(self, counts: np.ndarray, key: str, rows: np.ndarray) -> np.ndarray:
        """Per row asked: does the row's domain of key hold a counted pod?"""
        domains = self.cluster.domains(key)
        per_domain = domains.sums(counts)
        ids = domains.ids[rows]
        return (ids >= 0) & (per_domain[np.maximum(ids, 0)] > 0)

    def affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        out = np.ones(len(rows), dtype=bool)
        terms = task.placement.rules.affinity
        if not terms:
            return out
        index = self.index
        if all(index.totals[t.matcher] == 0 for t in terms) and \
                all(index.matches(t.matcher, task) for t in terms):
            return out          # the first of its group: anywhere
        for term in terms:
            out &= self._in_domain(index.counts[term.matcher], term.topology_key, rows)
        return out

    def anti_affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        out = np.ones(len(rows), dtype=bool)
        for term in task.placement.rules.anti_affinity:
            if self.index.totals[term.matcher]:
                out &= ~self._in_domain(self.index.counts[term.matcher], term.topology_key, rows)
        return out

    def symmetric(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        out = np.ones(len(rows), dtype=bool)
        for term in self.index.held_against(dict(task.labels), task.namespace):
            held = self.index.held[term]
            if held.any():
                out &= ~self._in_domain(held, term.topology_key, rows)
        return out

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        rules = task.placement.rules
        weighted = [(w, 1.0) for w in rules.preferred_affinity] + \
                   [(w, -1.0) for w in rules.preferred_anti_affinity]
        total = sum(abs(w.weight) for w, _ in weighted)
        out = np.zeros(len(rows))
        if not total or not self.weight:
            return out
        for w, sign in weighted:
            if self.index.totals[w.term.matcher]:
                found = self._in_domain(self.index.counts[w.term.matcher], w.term.topology_key, rows)
                out += found * (sign * w.weight)
        return out * (100.0 * self.weight / total)

    # -- keeping up with the session ---------------------------------------------------
    def _deallocated(self, task: TaskInfo) -> None:
        if not present(self.cluster, task):      # an eviction leaves it there, releasing
            self._changed(self.index.remove(task.key))

    def _changed(self, change: Change | None) -> None:
        """Mark changed every node whose answer may have moved."""
        if change is None:
            return
        table, cluster = self.table, self.cluster
        for matcher in change.matchers:
            total = self.index.totals[matcher]
            if matcher in self.required and total == max(change.delta, 0):
                table.touch(np.arange(len(table)))   # the first pod appeared, or the last went
                return
            for key in self.keys_of[matcher]:
                table.touch(cluster.domains(key).rows_of(change.row))
        for term in change.terms:
            table.touch(cluster.domains(term.topology_key).rows_of(change.row))
