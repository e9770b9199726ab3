"""The placements this scheduler's tasks hold, equal ones made one object:
a session's per-class caches then find theirs by identity, not by comparing
pod rules field by field. Counted by the tasks holding each, so its keys are
every distinct placement in use: what the pods' rules read is found without
walking every task (and worked out again only when that set changes)."""
from __future__ import annotations

from typing import Sequence

from kaisched.api.clusterinfo import ForeignPod, RulesInPlay
from kaisched.api.constraints import Placement


class Placements:
    """Kept by the model: put_pod interns each task's placement (keep) and
    lets go of the one it held (drop); refresh lends the rules in play."""

    def __init__(self) -> None:
        self._counts: dict[Placement, tuple[Placement, int]] = {}
        self._rules: RulesInPlay | None = None

    def keep(self, placement: Placement) -> Placement:
        """The one object equal to placement, counted once more."""
        shared, count = self._counts.get(placement, (placement, 0))
        self._counts[placement] = (shared, count + 1)
        if not count:
            self._rules = None
        return shared

    def drop(self, placement: Placement) -> None:
        shared, count = self._counts[placement]
        if count > 1:
            self._counts[placement] = (shared, count - 1)
        else:
            del self._counts[placement]
            self._rules = None

    def rules_in_play(self, foreign: Sequence[ForeignPod]) -> RulesInPlay:
        """What the rules of the tasks' placements and of other schedulers' pods read."""
        if self._rules is None:
            self._rules = RulesInPlay.of(p.rules for p in self._counts)
        if not any(p.rules for p in foreign):
            return self._rules
        return RulesInPlay.of([*(p.rules for p in self._counts), *(p.rules for p in foreign)])
