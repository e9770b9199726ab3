"""What consolidation moved this session, and the room it carries on
(kaisched.framework.moves puts last session's back as it opens)."""
from __future__ import annotations

from typing import Final, Mapping

from kaisched.api.types import JobKey, NodeName, PodKey
from kaisched.framework.effects import CarriedMove


class Moves:
    """Each moved pod's new node (its successor holds the room there), when
    each moved job was moved (its cooldown, in its status), and the room to
    carry to the next sessions for moved and waiting jobs."""

    def __init__(self) -> None:
        self._successors: dict[PodKey, NodeName] = {}
        self._moved_at: dict[JobKey, str] = {}
        self._carried: dict[JobKey, CarriedMove] = {}
        self.successors: Final[Mapping[PodKey, NodeName]] = self._successors
        self.moved_at: Final[Mapping[JobKey, str]] = self._moved_at
        self.carried: Final[Mapping[JobKey, CarriedMove]] = self._carried

    def successor_placed(self, pod: PodKey, node: NodeName) -> None:
        """A statement moved the evicted pod: its successor holds room on node."""
        self._successors[pod] = node

    def successor_undone(self, pod: PodKey) -> None:
        """The move was undone: the pod goes nowhere."""
        self._successors.pop(pod, None)

    def moved(self, job: JobKey, when: str) -> None:
        """Pods of the job were moved: its cooldown counts from when."""
        self._moved_at[job] = when

    def carry(self, job: JobKey, hold: CarriedMove) -> None:
        """Hold this room for the job in the next sessions."""
        self._carried[job] = hold

    def to_carry(self) -> dict[JobKey, CarriedMove]:
        """The room for the next session, as the session closes."""
        return dict(self._carried)
