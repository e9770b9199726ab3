"""The NonStrict holds a session keeps (kaisched.framework.holds puts last
session's back as it opens and carries them on)."""
from __future__ import annotations

from typing import Final, Generic, Mapping, TypeVar

from kaisched.api.types import JobKey
from kaisched.framework.effects import CarriedGang
from kaisched.framework.failures import Opened

# The statement a hold is put back as (the session's; this module never names it).
S = TypeVar("S", bound=Opened)


class Holds(Generic[S]):
    """Last session's holds, put back as statements, each until a decision
    of its job takes it (consolidation's room for a job is put back here
    too); since when each gang holds; the gangs whose hold expired, which
    may not hold again now; and the holds to carry to the next session."""

    def __init__(self) -> None:
        self._held: dict[JobKey, S] = {}
        self._since: dict[JobKey, float] = {}
        self._expired: set[JobKey] = set()
        self._carried: dict[JobKey, CarriedGang] = {}
        # Read per decision: the maps themselves, typed read-only.
        self.held: Final[Mapping[JobKey, S]] = self._held
        self.carried: Final[Mapping[JobKey, CarriedGang]] = self._carried

    def put_back(self, job: JobKey, stmt: S, since: float | None = None) -> None:
        """The job's placements held from before, as stmt; since: when its
        NonStrict hold began (none for consolidation's room)."""
        self._held[job] = stmt
        if since is not None:
            self._since[job] = since

    def take(self, job: JobKey) -> S | None:
        """The hold put back for the job, for its decision to finish or keep."""
        return self._held.pop(job, None)

    def expire(self, job: JobKey) -> None:
        """The job's hold outlived its waiting time: dropped, and it may not hold again now."""
        self._expired.add(job)

    def expired(self, job: JobKey) -> bool:
        return job in self._expired

    def since(self, job: JobKey, default: float) -> float:
        """When the job's hold began (default: it begins now)."""
        return self._since.get(job, default)

    def carry(self, job: JobKey, hold: CarriedGang) -> None:
        """Carry the job's placements to the next session as its hold."""
        self._carried[job] = hold

    def drop(self, job: JobKey) -> None:
        """Carry no hold of the job on (it deadlocked with an older one)."""
        del self._carried[job]

    def give_up(self, job: JobKey, held: S | None) -> None:
        """A decision of the job raised: the hold it had when the decision
        began (held) is discarded and forgotten, and none is carried on."""
        if held is not None:
            held.discard()
            self._held.pop(job, None)
        self._carried.pop(job, None)

    def to_carry(self) -> dict[JobKey, CarriedGang]:
        """The holds for the next session, as the session closes."""
        return dict(self._carried)
