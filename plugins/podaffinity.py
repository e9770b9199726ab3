"""podaffinity: inter-pod affinity and anti-affinity, as kube-scheduler applies them.

Filters: a node is refused when
- a required podAffinity term finds no pod in the node's domain of its
  topologyKey that matches every required affinity term of the pod (only
  such pods count, as in kube-scheduler), unless no pod anywhere matches them
  all yet and the pod matches them itself: the first pod of a group may go
  to any node that has every term's topology key;
- a required podAntiAffinity term finds a selected pod in the node's domain;
- a pod already there (of any scheduler) holds a required anti-affinity term
  that selects this pod, within its topologyKey (the symmetric rule).
Score, as kube-scheduler's InterPodAffinity: for every pod already in a
node's domain, the new pod's preferred terms that select it add (affinity) or
take away (anti-affinity) their weight; and symmetrically, that pod's own
preferred terms that select the new pod add or take away theirs, and its
required affinity terms that select it add HARD_POD_AFFINITY_WEIGHT. The sums
are scaled to 0..100 over the nodes being weighed (lowest 0, highest 100),
times the plugin's `weight` argument.

Pods placed earlier in the same session count at once, and an undone
placement is forgotten (ON_ALLOCATE / ON_DEALLOCATE keep the counts); so is a
pod evicted this session, so a preemptor that evicts the pods its
anti-affinity conflicts with is placed as if they were gone. While the session
plans evictions (which nodes room could be made on), the anti-affinity rules
count only pods no eviction could remove. The
answers read pods across whole domains, so they are POD_PREDICATE/POD_ORDER
hooks, asked afresh over the nodes in question: a count per node (of
selected pods, or of pods holding a term) and one bincount per topology key,
never a loop over pods.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from kaisched.api.constraints import AllOf, Matcher, PodAffinityTerm
from kaisched.api.podindex import Held, PodIndex, evictable, left
from kaisched.api.task import TaskInfo
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.registry import weight_argument

# kube-scheduler's InterPodAffinityArgs.hardPodAffinityWeight default: what an
# existing pod's required affinity term selecting the new pod adds to a score.
HARD_POD_AFFINITY_WEIGHT = 1
# The terms present pods hold toward a new pod that score it.
_SCORING = ((Held.PREFERRED_AFFINITY, 1), (Held.PREFERRED_ANTI_AFFINITY, -1), (Held.AFFINITY, 1))

def _all_of(terms: tuple[PodAffinityTerm, ...]) -> AllOf:
    """The pods a set of required affinity terms counts: those matching all."""
    return AllOf(tuple(t.matcher for t in terms))


class PodAffinityPlugin(PluginBase):
    name = "podaffinity"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.weight = weight_argument(arguments)

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        if not cluster.rules_in_play().any_rule:
            return
        self.cluster = cluster
        rules = {t.placement.rules for job in cluster.jobs.values() for t in job.tasks.values()}
        rules |= {p.rules for p in cluster.foreign}
        terms = [t for r in rules for t in (*r.affinity, *r.anti_affinity,
                                           *(w.term for w in r.preferred_affinity),
                                           *(w.term for w in r.preferred_anti_affinity))]
        if not terms:
            return
        self.keys_of: dict[Matcher, set[str]] = {}
        for term in terms:
            self.keys_of.setdefault(term.matcher, set()).add(term.topology_key)
        for r in rules:
            if len(r.affinity) > 1:
                self.keys_of.setdefault(_all_of(r.affinity), set()).update(
                    t.topology_key for t in r.affinity)
        self.index = PodIndex(cluster, self.keys_of, held=Held)
        self._fixed: PodIndex | None = None     # pods no eviction could remove, when asked
        ssn.register(Hook.POD_PREDICATE, self.affinity, "node(s) didn't match pod affinity rules")
        # While an eviction is planned, the anti-affinity rules count only the
        # pods no eviction could remove.
        ssn.register(Hook.POD_PREDICATE, self.anti_affinity,
                     "node(s) didn't match pod anti-affinity rules",
                     evicting=self.anti_affinity_evicting)
        ssn.register(Hook.POD_PREDICATE, self.symmetric,
                     "node(s) didn't satisfy existing pods' anti-affinity rules",
                     evicting=self.symmetric_evicting)
        ssn.register(Hook.POD_ORDER, self.score)
        ssn.register(Hook.ON_ALLOCATE, self._allocated)
        ssn.register(Hook.ON_DEALLOCATE, self._deallocated)

    # -- filters and score -------------------------------------------------------------
    def _in_domain(self, counts: np.ndarray, key: str, rows: np.ndarray,
                   absent: bool = False) -> np.ndarray:
        """Per row asked: does the row's domain of key hold a counted pod (or,
        absent: does it not; a node without the key is in no domain)?"""
        found = self._per_domain(counts, key, rows) > 0
        if not absent:
            return found
        return ~found

    def _per_domain(self, counts: np.ndarray, key: str, rows: np.ndarray) -> np.ndarray:
        """Per row asked: the count summed over the row's domain of key (0 for
        a node without the key)."""
        domains = self.cluster.domains(key)
        every = len(rows) == len(counts)            # rows are sorted and distinct: all of them
        if domains.per_node:            # a host: the node's own count
            return counts if every else counts[rows]
        per_domain = np.append(domains.sums(counts), 0.0)     # last: no domain
        ids = domains.ids if every else domains.ids[rows]
        return per_domain[np.where(ids >= 0, ids, len(domains))]

    # None: no rule concerns the task (the session skips it).
    def affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        terms = task.placement.rules.affinity
        if not terms:
            return None
        index = self.index
        counted = terms[0].matcher if len(terms) == 1 else _all_of(terms)
        if index.totals[counted] == 0 and all(index.matches(t.matcher, task) for t in terms):
            # The first of its group: anywhere with every term's topology key
            # (kube-scheduler: "the node has all the requested topologies").
            out = None
            for term in terms:
                has = self.cluster.domains(term.topology_key).has[rows]
                out = has if out is None else out & has
            return out
        out = None
        for term in terms:
            found = self._in_domain(index.counts[counted], term.topology_key, rows)
            out = found if out is None else out & found
        return out

    def anti_affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        return self._anti_affinity(task, rows, self.index)

    def anti_affinity_evicting(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        return self._anti_affinity(task, rows, self._fixed_index())

    def _anti_affinity(self, task: TaskInfo, rows: np.ndarray, index: PodIndex) -> np.ndarray | None:
        out = None
        for term in task.placement.rules.anti_affinity:
            if index.totals[term.matcher]:
                found = self._in_domain(index.counts[term.matcher], term.topology_key, rows,
                                        absent=True)
                out = found if out is None else out & found
        return out

    def symmetric(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        return self._symmetric(task, rows, self.index)

    def symmetric_evicting(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        return self._symmetric(task, rows, self._fixed_index())

    def _symmetric(self, task: TaskInfo, rows: np.ndarray, index: PodIndex) -> np.ndarray | None:
        if not index.holds(Held.ANTI_AFFINITY):
            return None
        out = None
        for held in index.held_against_task(task):
            if index.held_totals[held]:
                found = self._in_domain(index.held[held], held.term.topology_key, rows,
                                        absent=True)
                out = found if out is None else out & found
        return out

    def _fixed_index(self) -> PodIndex:
        """The pods an anti-affinity rule counts while an eviction is planned:
        those no eviction could remove (all of them, otherwise: self.index)."""
        if self._fixed is None:
            cluster = self.cluster
            self._fixed = PodIndex(cluster, self.keys_of, held=Held,
                                   keep=lambda t: not evictable(cluster, t))
        return self._fixed

    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        if not self.weight or len(rows) < 2:
            return None             # nothing to weigh against
        index, rules = self.index, task.placement.rules
        # (counts per row, topology key, signed weight a counted pod is worth)
        parts = [(index.counts[w.term.matcher], w.term.topology_key, sign * w.weight)
                 for terms, sign in ((rules.preferred_affinity, 1), (rules.preferred_anti_affinity, -1))
                 for w in terms if index.totals[w.term.matcher]]
        for kind, sign in _SCORING:
            if index.holds(kind):
                for held in index.held_against_task(task, kind):
                    if index.held_totals[held]:
                        worth = HARD_POD_AFFINITY_WEIGHT if kind is Held.AFFINITY else held.weight
                        parts.append((index.held[held], held.term.topology_key, sign * worth))
        if not parts:
            return None
        raw = np.zeros(len(rows))
        for counts, key, worth in parts:
            if worth:
                raw += worth * self._per_domain(counts, key, rows)
        low, high = float(raw.min()), float(raw.max())
        if high <= low:
            return None             # every node alike
        return (raw - low) * (100.0 * self.weight / (high - low))

    # -- keeping up with the session ---------------------------------------------------
    def _allocated(self, task: TaskInfo) -> None:
        self.index.add(task)
        if self._fixed is not None:
            self._fixed.add(task)

    def _deallocated(self, task: TaskInfo) -> None:
        if left(self.cluster, task):
            self.index.remove(task.key)
            if self._fixed is not None:
                self._fixed.remove(task.key)
