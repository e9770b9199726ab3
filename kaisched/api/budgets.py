"""PodDisruptionBudgets (policy/v1): how many of the pods a budget selects
may be disrupted at once. A voluntary eviction the budget would refuse is
never planned.

How many disruptions a budget allows is counted as its controller counts
them, from the pods the session sees: of the pods it selects (expected),
those running and not going away are healthy; minAvailable (a number, or a
percentage of expected, rounded up) or expected less maxUnavailable is what
must stay healthy; the rest may go. Where the budget's status says how many
its controller allows, the smaller of the two stands.
"""
from __future__ import annotations

import math
from typing import Mapping

import attrs

from kaisched.api.constraints import LabelSelector


@attrs.frozen(slots=True)
class Amount:
    """An int-or-percent: minAvailable or maxUnavailable."""

    value: int
    percent: bool = False

    def of(self, expected: int) -> int:
        """The amount for this many expected pods (a percentage rounded up)."""
        return math.ceil(self.value * expected / 100) if self.percent else self.value


@attrs.frozen(slots=True)
class DisruptionBudget:
    key: str                                # namespace/name
    namespace: str
    selector: LabelSelector | None          # None (a null selector): it selects no pod
    min_available: Amount | None = None
    max_unavailable: Amount | None = None
    status_allowed: int | None = None       # status.disruptionsAllowed, as its controller counted
    problem: str | None = None              # a spec that cannot be read: nothing it may select goes

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if namespace != self.namespace:
            return False
        if self.problem is not None:
            return True
        return self.selector is not None and self.selector.matches(labels)

    def allowed(self, healthy: int, expected: int) -> int:
        """Disruptions allowed with this many healthy pods of expected."""
        if self.problem is not None:
            return 0
        if self.min_available is not None:
            need = self.min_available.of(expected)
        elif self.max_unavailable is not None:
            need = expected - self.max_unavailable.of(expected)
        else:
            need = expected         # neither given: no disruption is known to be safe
        allowed = max(0, healthy - need)
        return allowed if self.status_allowed is None else min(allowed, self.status_allowed)
