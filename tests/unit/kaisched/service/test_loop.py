"""The leader/standby loop both controllers run (kaisched.service.loop), over a
Duty that records what it was asked: a standby follows, a leader leads, a lost
lead is told before the next pass, a failing pass is told to the Failures and
the duty, and on stop the duty finishes before the Lease is released."""
from __future__ import annotations

import logging
import threading
from typing import Callable

from kaisched.api.clock import ManualClock
from kaisched.cluster.kinds import LEASE
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import ApiError, TransientApiError
from kaisched.service import loop
from kaisched.service.leader import LeaderElector
from kaisched.service.outage import Outage


class Recorded(loop.Duty):
    def __init__(self, cluster: MemoryCluster, fail: int = 0) -> None:
        self.cluster = cluster
        self.fail = fail            # passes that fail first
        self.said: list[str] = []

    def lead(self, proceed: Callable[[], bool]) -> None:
        self._pass("lead")

    def follow(self) -> None:
        self._pass("follow")

    def _pass(self, what: str) -> None:
        if self.fail:
            self.fail -= 1
            raise TransientApiError("the API is busy")
        self.said.append(what)

    def turned(self, turn: loop.Turn) -> None:
        if turn.lost:
            self.said.append("lost")

    def passed(self, turn: loop.Turn, failure: ApiError | None) -> None:
        if failure is not None:
            self.said.append(f"failed: {failure}")

    def finish(self) -> None:
        lease = self.cluster.get(LEASE, "kaisched-system", "kaisched")
        if lease is not None:
            self.said.append(f"finish, the Lease held by {lease['spec']['holderIdentity']}")


def test_without_election_every_pass_leads_and_cycles_bound_the_periods() -> None:
    cluster = MemoryCluster(ManualClock())
    duty = Recorded(cluster)
    outage = Outage(logging.getLogger("test.loop"), "test pass", 0.0)
    assert loop.serve(duty, threading.Event(), 0.0, outage, cycles=3) == 3
    assert duty.said == ["lead", "lead", "lead"]


def test_a_standby_follows_and_the_leader_finishes_before_it_releases_the_lease() -> None:
    cluster = MemoryCluster(ManualClock())
    other = LeaderElector(cluster, cluster.clock, "other")
    assert other.lead()
    standby = Recorded(cluster)
    outage = Outage(logging.getLogger("test.loop"), "test pass", 0.0)
    loop.serve(standby, threading.Event(), 0.001, outage,
               elector=LeaderElector(cluster, cluster.clock, "me"), cycles=2)
    assert standby.said == ["follow", "follow", "finish, the Lease held by other"]
    other.release()
    leader = Recorded(cluster)
    loop.serve(leader, threading.Event(), 0.001, outage,
               elector=LeaderElector(cluster, cluster.clock, "me"), cycles=1)
    assert leader.said == ["lead", "finish, the Lease held by me"]
    assert not cluster.get(LEASE, "kaisched-system", "kaisched")["spec"].get("holderIdentity")


def test_a_failing_pass_is_told_and_the_next_one_runs() -> None:
    cluster = MemoryCluster(ManualClock())
    duty = Recorded(cluster, fail=1)
    outage = Outage(logging.getLogger("test.loop"), "test pass", 0.0)
    assert loop.serve(duty, threading.Event(), 0.0, outage, cycles=2) == 2
    assert duty.said == ["failed: the API is busy", "lead"]
    assert not outage.failing


def test_a_lead_lost_or_taken_again_in_a_new_term_is_a_loss() -> None:
    terms = loop.Terms()
    assert terms.look(True, 1) == loop.Turn(leads=True, lost=False, taken=True)
    assert terms.look(True, 1) == loop.Turn(leads=True, lost=False, taken=False)
    assert terms.look(True, 2) == loop.Turn(leads=True, lost=True, taken=True)
    assert terms.look(False, 2) == loop.Turn(leads=False, lost=True, taken=False)
    assert terms.look(False, 2) == loop.Turn(leads=False, lost=False, taken=False)
