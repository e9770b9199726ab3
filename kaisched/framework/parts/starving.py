"""Room held for starving gangs this session (consolidation's room for the
pods it moved is held the same way)."""
from __future__ import annotations

from typing import Callable, Final, Mapping

import numpy as np

from kaisched.api.types import JobKey


class StarvingRoom:
    """Per gang, the room held for it (rows x resources of the node table):
    other gangs may use a node's room only beyond it. changed is told each
    time the room held changes (node selection keeps what it derives)."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self._rooms: dict[JobKey, np.ndarray] = {}
        # Read per placement by node selection: the map itself, typed read-only.
        self.rooms: Final[Mapping[JobKey, np.ndarray]] = self._rooms
        self._changed = changed

    def reserve(self, job: JobKey, room: np.ndarray) -> None:
        """Hold room for the gang, this session."""
        self._rooms[job] = room
        self._changed()

    def release(self, job: JobKey) -> None:
        """The gang holds no room any more (placed, or its decision raised)."""
        if self._rooms.pop(job, None) is not None:
            self._changed()
