"""What a pod asks of a node beyond resources: selectors, affinity, tolerations,
and of the pods around it: inter-pod affinity, topology spread, host ports.

Pods with equal Placement (and equal requests) form an equivalence class: the
node filters run once for the class, not once per pod.
"""
from __future__ import annotations

from typing import Mapping

import attrs


@attrs.frozen(slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"   # NoSchedule | PreferNoSchedule | NoExecute


@attrs.frozen(slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"      # Equal | Exists
    value: str = ""
    effect: str = ""             # empty: every effect

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"     # an empty key with Exists tolerates all
        if self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@attrs.frozen(slots=True)
class Requirement:
    """One matchExpressions / matchFields entry of a node selector term."""

    key: str
    operator: str                # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return present and value in self.values
        if op == "NotIn":
            return not present or value not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            if value is None or len(self.values) != 1:
                return False
            try:
                have, want = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


@attrs.frozen(slots=True)
class SelectorTerm:
    """A nodeSelectorTerm: all its requirements must hold (terms are ORed)."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if not self.expressions and not self.fields:
            return False     # an empty term matches nothing (as kube-scheduler)
        return (all(r.matches(labels) for r in self.expressions)
                and all(r.matches({"metadata.name": node_name}) for r in self.fields))




# -- rules over other pods: inter-pod affinity, topology spread, host ports -----------

HOSTNAME_KEY = "kubernetes.io/hostname"


@attrs.frozen(slots=True, cache_hash=True)
class LabelSelector:
    """A metav1.LabelSelector: matchLabels and matchExpressions, all must hold.
    An empty selector matches every pod."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return (all(labels.get(k) == v for k, v in self.match_labels)
                and all(r.matches(labels) for r in self.expressions))

    def keys(self) -> frozenset[str]:
        return frozenset(k for k, _ in self.match_labels) | frozenset(r.key for r in self.expressions)

    @property
    def anchor(self) -> tuple[str, str] | None:
        """One label a matching pod must carry: indexes selectors by label."""
        if self.match_labels:
            return self.match_labels[0]
        for r in self.expressions:
            if r.operator == "In" and len(r.values) == 1:
                return (r.key, r.values[0])
        return None


@attrs.frozen(slots=True, cache_hash=True)
class PodMatcher:
    """Which pods a term counts: a label selector over pods of some namespaces.

    namespaces is already resolved against the pod that carries the term (an
    empty list with no namespaceSelector means the pod's own namespace);
    all_namespaces is an empty namespaceSelector; namespace_selector matches
    namespace labels.
    """

    selector: LabelSelector | None       # None matches no pod
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None

    def matches(self, labels: Mapping[str, str], namespace: str,
                namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        if self.selector is None or not self.selector.matches(labels):
            return False
        if namespace in self.namespaces:
            return True
        ns_sel = self.namespace_selector
        return ns_sel is not None and ns_sel.matches(namespace_labels.get(namespace, {}))


@attrs.frozen(slots=True, cache_hash=True)
class AllOf:
    """Pods that every one of several matchers selects: what a set of required
    affinity terms counts (kube-scheduler counts only pods matching all of
    them). Indexed by the first part's selector, which such a pod meets too."""

    parts: tuple[PodMatcher, ...]

    @property
    def selector(self) -> LabelSelector | None:
        return self.parts[0].selector if self.parts else None

    def matches(self, labels: Mapping[str, str], namespace: str,
                namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        return all(p.matches(labels, namespace, namespace_labels) for p in self.parts)


# What a pod index counts: the pods one matcher, or several at once, select.
Matcher = PodMatcher | AllOf


@attrs.frozen(slots=True, cache_hash=True)
class PodAffinityTerm:
    matcher: PodMatcher
    topology_key: str


@attrs.frozen(slots=True, cache_hash=True)
class WeightedPodTerm:
    weight: int
    term: PodAffinityTerm


@attrs.frozen(slots=True, cache_hash=True)
class SpreadConstraint:
    """One topologySpreadConstraint; its selector (matchLabelKeys folded in)
    counts pods of the pod's own namespace."""

    max_skew: int
    topology_key: str
    matcher: PodMatcher
    hard: bool = True                   # whenUnsatisfiable: DoNotSchedule
    min_domains: int = 1
    honor_node_affinity: bool = True    # nodeAffinityPolicy: Honor (default) | Ignore
    honor_taints: bool = False          # nodeTaintsPolicy: Ignore (default) | Honor


@attrs.frozen(slots=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    host_ip: str = ""                   # empty or 0.0.0.0: every address

    def conflicts(self, other: HostPort) -> bool:
        if self.port != other.port or self.protocol != other.protocol:
            return False
        wild = ("", "0.0.0.0", "::")
        return self.host_ip in wild or other.host_ip in wild or self.host_ip == other.host_ip


@attrs.frozen(slots=True, cache_hash=True)
class PodRules:
    """What a pod asks of the pods around it. Part of its Placement, so pods
    asking the same share one equivalence class."""

    affinity: tuple[PodAffinityTerm, ...] = ()           # required
    anti_affinity: tuple[PodAffinityTerm, ...] = ()      # required
    preferred_affinity: tuple[WeightedPodTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedPodTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.affinity or self.anti_affinity or self.preferred_affinity
                    or self.preferred_anti_affinity or self.spread or self.host_ports)

    def matchers(self) -> list[PodMatcher]:
        terms = [*self.affinity, *self.anti_affinity,
                 *(w.term for w in self.preferred_affinity),
                 *(w.term for w in self.preferred_anti_affinity)]
        return [t.matcher for t in terms] + [c.matcher for c in self.spread]

    def topology_keys(self) -> set[str]:
        terms = [*self.affinity, *self.anti_affinity,
                 *(w.term for w in self.preferred_affinity),
                 *(w.term for w in self.preferred_anti_affinity)]
        return {t.topology_key for t in terms} | {c.topology_key for c in self.spread}


NO_RULES = PodRules()


@attrs.frozen(slots=True, cache_hash=True)
class Placement:
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[SelectorTerm, ...] = ()     # required terms, ORed; empty: no constraint
    tolerations: tuple[Toleration, ...] = ()
    preferred: tuple[tuple[int, SelectorTerm], ...] = ()   # preferred node affinity (weight, term)
    rules: PodRules = NO_RULES                             # rules over the pods around it

    def matches_labels(self, labels: Mapping[str, str], node_name: str) -> bool:
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        if self.affinity and not any(t.matches(labels, node_name) for t in self.affinity):
            return False
        return True

    def untolerated(self, taints: tuple[Taint, ...]) -> Taint | None:
        """The first NoSchedule/NoExecute taint this placement does not tolerate."""
        for taint in taints:
            if taint.effect == "PreferNoSchedule":
                continue
            if not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None


NO_PLACEMENT = Placement()
