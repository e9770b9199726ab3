"""What a pod asks of a node beyond resources: selectors, affinity, tolerations.

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
            if not present or len(self.values) != 1:
                return False
            try:
                have, want = int(value), int(self.values[0])  # type: ignore[arg-type]
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


@attrs.frozen(slots=True, cache_hash=True)
class Placement:
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: tuple[SelectorTerm, ...] = ()     # required terms, ORed; empty: no constraint
    tolerations: tuple[Toleration, ...] = ()

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
