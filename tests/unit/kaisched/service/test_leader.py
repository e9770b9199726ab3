"""Leader election on a Lease: one leader at a time; a takeover only after the
holder's record stood still for a whole lease duration; a leader that cannot
renew within its renew deadline stops leading on its own; a compare-and-swap
against races; a release on exit; a missing namespace said once, clearly."""
from __future__ import annotations

import logging

import pytest

from kaisched.api.clock import ManualClock
from kaisched.cluster.kinds import LEASE, Kind
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import ConflictError, NotFoundError, UnreachableError
from kaisched.service.leader import LeaderElector


class Outage(MemoryCluster):
    """Our own seam: Lease requests fail while `error` is set."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.error: Exception | None = None
        self.calls = 0

    def get(self, kind: Kind, namespace: str, name: str):
        if kind == LEASE:
            self.calls += 1
            if isinstance(self.error, NotFoundError):
                return None         # as the API server: no Lease in a namespace that is not
            if self.error is not None:
                raise self.error
        return super().get(kind, namespace, name)

    def create(self, obj):
        if obj.get("kind") == "Lease" and isinstance(self.error, NotFoundError):
            raise self.error
        return super().create(obj)


@pytest.fixture
def world() -> tuple[Outage, ManualClock]:
    clock = ManualClock()
    return Outage(clock), clock


def holder(cluster: MemoryCluster) -> str | None:
    return cluster.get(LEASE, "kaisched-system", "kaisched")["spec"].get("holderIdentity")


def test_first_candidate_takes_the_lease_and_keeps_it(world) -> None:
    cluster, clock = world
    a, b = LeaderElector(cluster, clock, "a"), LeaderElector(cluster, clock, "b")
    assert a.lead() and not b.lead()
    for _ in range(10):
        clock.advance(2)            # renewed every retry period
        assert a.lead() and not b.lead()
    assert holder(cluster) == "a"


def test_takeover_only_after_the_record_stood_still_a_lease_duration(world) -> None:
    cluster, clock = world
    a, b = LeaderElector(cluster, clock, "a"), LeaderElector(cluster, clock, "b")
    assert a.lead()
    assert not b.lead()             # b sees a's record now
    clock.advance(14)
    assert not b.lead()
    clock.advance(2)                # 16 s of a record that did not move: a is gone
    assert b.lead()
    assert not a.lead()             # a finds b's name on the Lease and stands down
    lease = cluster.get(LEASE, "kaisched-system", "kaisched")
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1


def test_a_leader_that_cannot_renew_stops_at_its_renew_deadline(world, caplog) -> None:
    cluster, clock = world
    a = LeaderElector(cluster, clock, "a")
    assert a.lead()
    cluster.error = UnreachableError("get Lease: cannot reach the API server")
    clock.advance(6)
    a.tick()                        # fails; within the renew deadline it still leads
    assert a.is_leading()
    with caplog.at_level(logging.WARNING, logger="kaisched.service.leader"):
        clock.advance(4)            # 10 s since the last renewal: the renew deadline
        assert not a.is_leading()   # said by the clock, without another request
    assert "a lost the lease kaisched-system/kaisched" in caplog.text
    assert not a.elected.is_set()


def test_a_stuck_leader_is_no_longer_leading_when_the_standby_takes_over(world) -> None:
    cluster, clock = world
    a, b = LeaderElector(cluster, clock, "a"), LeaderElector(cluster, clock, "b")
    assert a.lead() and not b.lead()
    clock.advance(16)               # a's renew thread hung in a request all along
    assert b.lead()
    assert not a.is_leading()       # its renew deadline passed 6 s before b took over


def test_a_patch_with_a_stale_resource_version_conflicts(world) -> None:
    cluster, clock = world
    LeaderElector(cluster, clock, "a").lead()
    stale = cluster.get(LEASE, "kaisched-system", "kaisched")["metadata"]["resourceVersion"]
    cluster.patch(LEASE, "kaisched-system", "kaisched", {"spec": {"renewTime": "x"}})
    with pytest.raises(ConflictError):
        cluster.patch(LEASE, "kaisched-system", "kaisched",
                      {"metadata": {"resourceVersion": stale}, "spec": {"holderIdentity": "b"}})
    assert holder(cluster) == "a"


def test_release_hands_over_at_once(world) -> None:
    cluster, clock = world
    a, b = LeaderElector(cluster, clock, "a"), LeaderElector(cluster, clock, "b")
    assert a.lead()
    a.release()
    assert holder(cluster) is None
    assert b.lead() and holder(cluster) == "b"


def test_a_missing_namespace_is_said_once_then_reminded_each_minute(world, caplog) -> None:
    cluster, clock = world
    cluster.error = NotFoundError('namespaces "kaisched-system" not found')
    a = LeaderElector(cluster, clock, "a")
    with caplog.at_level(logging.WARNING, logger="kaisched.service.leader"):
        for _ in range(32):         # a minute of tries, one every 2 s
            assert not a.lead()
            clock.advance(2)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2          # said once, reminded once after 60 s
    assert "the namespace kaisched-system does not exist" in lines[0]
    assert "--lease-namespace" in lines[0] and "--no-leader-elect" in lines[0]
    assert lines[1].startswith("lease kaisched-system/kaisched: still: ")
    assert a._delay == 60.0         # backoff between tries, up to a minute


def test_each_lead_taken_is_a_new_term_even_if_lost_and_taken_again_between_two_looks(
        world) -> None:
    cluster, clock = world
    a = LeaderElector(cluster, clock, "a")
    assert a.lead() and a.term == 1
    clock.advance(2)
    assert a.lead() and a.term == 1         # renewed: the same term
    cluster.error = UnreachableError("get Lease: cannot reach the API server")
    clock.advance(10)
    a.tick()                                # the renew deadline passed: lost
    cluster.error = None
    a.tick()                                # its own record: taken again at once
    assert a.is_leading() and a.term == 2   # leading at both looks, but a new term


class _Witness:
    """Stands in for `tried`: notes whether the elector led when it was set."""

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector
        self.leading_when_set: list[bool] = []

    def set(self) -> None:
        self.leading_when_set.append(self.elector.is_leading())


def test_the_first_try_is_said_over_once_its_outcome_is_known(world) -> None:
    # The loop's first pass waits for the first try, then asks whether it
    # leads: a try that took the Lease must already say so (else that pass
    # stands by, converting what a leader would have taken a head start over).
    cluster, clock = world
    a = LeaderElector(cluster, clock, "a")
    a.tried = _Witness(a)           # type: ignore[assignment]
    a.tick()
    b = LeaderElector(cluster, clock, "b")
    b.tried = _Witness(b)           # type: ignore[assignment]
    b.tick()
    cluster.error = UnreachableError("down")
    a.tick()
    assert a.tried.leading_when_set == [True, True]    # type: ignore[attr-defined]
    assert b.tried.leading_when_set == [False]         # type: ignore[attr-defined]
