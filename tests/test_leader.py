"""Leader election on a Lease: one leader at a time, a takeover only after the
holder stops renewing, a compare-and-swap against races, a release on exit."""
from __future__ import annotations

import pytest

from kaisched.api.clock import ManualClock
from kaisched.cluster.kinds import LEASE
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import ConflictError
from kaisched.leader import LeaderElector


@pytest.fixture
def world() -> tuple[MemoryCluster, ManualClock]:
    clock = ManualClock()
    return MemoryCluster(clock), clock


def holder(cluster: MemoryCluster) -> str | None:
    return cluster.get(LEASE, "kaisched-system", "kaisched")["spec"].get("holderIdentity")


def test_first_candidate_takes_the_lease_and_keeps_it(world) -> None:
    cluster, clock = world
    a, b = LeaderElector(cluster, clock, "a"), LeaderElector(cluster, clock, "b")
    assert a.lead() and not b.lead()
    for _ in range(5):
        clock.advance(10)           # within the 15 s lease, each renewal keeps it
        assert a.lead() and not b.lead()
    assert holder(cluster) == "a"


def test_takeover_only_after_the_holder_stops_renewing(world) -> None:
    cluster, clock = world
    a, b = LeaderElector(cluster, clock, "a"), LeaderElector(cluster, clock, "b")
    assert a.lead()
    clock.advance(14)
    assert not b.lead()
    clock.advance(2)                # 16 s since a renewed: its lease ran out
    assert b.lead()
    assert not a.lead()             # a sees b's fresh renewal and stands down
    lease = cluster.get(LEASE, "kaisched-system", "kaisched")
    assert lease["spec"]["holderIdentity"] == "b"
    assert lease["spec"]["leaseTransitions"] == 1


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
