"""Room held for starving gangs this session (consolidation's room for the
pods it moved, and capacity an autoscaler provisioned for a gang, are held
the same way)."""
from __future__ import annotations

from typing import Callable, Final, Mapping

import numpy as np

from kaisched.api.node import EPSILON
from kaisched.api.types import JobKey
from kaisched.framework.reservation import Reservation


class StarvingRoom:
    """Per gang, the room held for it (rows x resources of the node table):
    other gangs may use a node's room only beyond it. changed is told each
    time the room held changes (node selection keeps what it derives).

    Many gangs may hold room at once (each gang capacity was provisioned
    for), so what they hold in all is kept as a running sum, and each gang's
    rows are found once: what another gang may not use is read from them,
    not summed again per gang."""

    def __init__(self, changed: Callable[[], None], shape: tuple[int, int]) -> None:
        self._rooms: dict[JobKey, np.ndarray] = {}
        self._rows: dict[JobKey, np.ndarray] = {}      # each gang's rows with room held
        self._starts: dict[JobKey, float] = {}        # ... and when it is sure to be free
        # The starvation guard's reservations among them; and the last session's.
        self._reservations: dict[JobKey, Reservation] = {}
        self.reservations: Final[Mapping[JobKey, Reservation]] = self._reservations
        self.before: Mapping[JobKey, Reservation] = {}
        # Read per placement by node selection: the map itself, typed read-only.
        self.rooms: Final[Mapping[JobKey, np.ndarray]] = self._rooms
        self._total = np.zeros(shape)
        self._held_rows: np.ndarray | None = np.zeros(0, dtype=np.intp)
        self._changed = changed

    @property
    def total(self) -> np.ndarray:
        """What every gang holds, in all (read only)."""
        return self._total

    def reserve(self, job: JobKey, room: np.ndarray, rows: np.ndarray | None = None,
                reservation: Reservation | None = None) -> None:
        """Hold room for the gang, this session; rows: where room is held in
        it, when the caller knows (else they are looked for). reservation: the
        starvation guard's, whose start is when the room is sure to be free,
        if that is known."""
        self._drop(job)
        if reservation is not None:
            self._reservations[job] = reservation
            if reservation.start is not None:
                self._starts[job] = reservation.start
        if rows is None:
            rows = np.flatnonzero((room > EPSILON).any(axis=1))
        self._rooms[job] = room
        self._rows[job] = rows
        self._total[rows] += room[rows]
        self._held_rows = None
        self._changed()

    def release(self, job: JobKey) -> None:
        """The gang holds no room any more (placed, or its decision raised)."""
        if self._drop(job):
            self._changed()

    def _drop(self, job: JobKey) -> bool:
        """Forget the gang's room; True if it held any."""
        room = self._rooms.pop(job, None)
        self._starts.pop(job, None)
        self._reservations.pop(job, None)
        if room is None:
            return False
        rows = self._rows.pop(job)
        self._total[rows] -= room[rows]
        self._held_rows = None
        return True

    def rows_of(self, job: JobKey) -> np.ndarray:
        """The rows where the gang holds room (none if it holds none)."""
        return self._rows.get(job, np.zeros(0, dtype=np.intp))

    def idle_held(self, idle: np.ndarray) -> np.ndarray:
        """Of the reservations' room, what nothing uses (idle: the table's
        idle room): per resource, summed over the nodes."""
        out = np.zeros(self._total.shape[1])
        for job in self._reservations:
            rows = self._rows[job]
            out += np.minimum(self._rooms[job][rows], np.clip(idle[rows], 0, None)).sum(axis=0)
        return out

    def start(self, job: JobKey) -> float | None:
        """When the gang's room is sure to be free (its reservation's start), if known."""
        return self._starts.get(job)

    def lent(self, ends_by: float | None) -> tuple[JobKey, ...]:
        """The gangs whose held room is lent to a job sure to have ended by
        ends_by: those whose reservation starts no sooner (reservation
        backfill). None: the job may end any time; nothing is lent."""
        if ends_by is None or not self._starts:
            return ()
        return tuple(sorted(j for j, start in self._starts.items() if ends_by <= start))

    def beside(self, job: JobKey | None,
               lent: tuple[JobKey, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
        """The rows where gangs other than job hold room, and that room there,
        less the room the gangs named in lent lend it."""
        if self._held_rows is None:
            self._held_rows = np.flatnonzero((self._total > EPSILON).any(axis=1))
        rows = self._held_rows
        room = self._total[rows]
        others = [j for j in ((job,) if job in self._rooms else ()) + lent if j in self._rooms]
        for other in dict.fromkeys(others):
            room = room - self._rooms[other][rows]
        if others:
            keep = (room > EPSILON).any(axis=1)
            rows, room = rows[keep], room[keep]
        return rows, room
