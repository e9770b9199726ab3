"""A starvation guard's reservation as a session ends with it: what the next
session is told, so that a start that moved later is said with what moved it."""
from __future__ import annotations

import attrs

from kaisched.api.types import NodeName, PodKey


@attrs.frozen
class Reservation:
    """Room held for a starving gang, and when it is free."""

    start: float | None             # when its room is sure to be free (None: not known)
    likely: float | None = None     # when it likely is, by estimates of run time
    nodes: tuple[NodeName, ...] = ()      # where room is held
    pods: frozenset[PodKey] = frozenset()  # the pods on those nodes when it was made
    # Its start the session before, when this one is later, and what moved it.
    was: float | None = None
    moved: str | None = None
