"""The loop both controllers run as a process: lead when this replica holds the
Lease, keep in step while it stands by, stop promptly, and say an outage once.

Each period the loop looks at the Lease and hands the period to the
controller's Duty: a leader's pass (the scheduler's cycle, the PodGrouper's
sync) or a standby's (keep the cache warm, write nothing). A lead lost since
the last look -- or lost and taken again between two looks, a new term -- is
told to the duty first, so what the old term meant to do is dropped. A pass
that fails on the API is told to the loop's Failures, which say it and choose
the wait before the next pass. Between passes a standby wakes as soon as it is
elected, and a leader keeps up with what the watches report. On stop the duty
finishes (the scheduler's binder ends the gangs it began) before the Lease is
released, so a standby takes over at once.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable, Protocol

import attrs

from kaisched.errors import ApiError

if TYPE_CHECKING:
    from kaisched.cluster.reachability import Reachability
    from kaisched.service.health import Health
    from kaisched.service.leader import LeaderElector

# How often a leader keeps up (Duty.keep_up) while it waits for the next period.
KEEP_UP_EVERY = 0.1
# How long the first pass waits for the first Lease try, beyond one period.
FIRST_TRY_GRACE = 10.0


@attrs.frozen
class Turn:
    """How the lead stands at the start of a period: leads now; lost since the
    last look (or lost and taken again, a new term); taken since the last look."""

    leads: bool
    lost: bool
    taken: bool


class Duty(Protocol):
    """What a controller does in the loop. lead and follow are its passes; the
    other hooks do nothing unless a controller (subclassing Duty) has
    something to add there."""

    def lead(self, proceed: Callable[[], bool]) -> None:
        """A leader's pass. proceed() says whether it may go on (this replica
        still leads and no stop was asked for). An ApiError fails the pass."""

    def follow(self) -> None:
        """A standby's pass: keep up with the cluster, write nothing, so that a
        takeover starts warm. An ApiError fails the pass."""

    def prepare(self) -> None:
        """With leader election, before the first Lease try is awaited: what can
        overlap it (the scheduler's first lists)."""
        return None

    def turned(self, turn: Turn) -> None:
        """Told at the start of every period, before its pass."""
        return None

    def passed(self, turn: Turn, failure: ApiError | None) -> None:
        """Told after every pass, failed (failure) or not."""
        return None

    def keep_up(self) -> None:
        """A leader's work while it waits for its next period. An ApiError ends
        it for that wait: the next pass meets the failure again, and says so."""
        return None

    def finish(self) -> None:
        """On stop, before the Lease is released (while this replica still leads)."""
        return None


class Failures(Protocol):
    """How failing passes are said, and how long the loop waits after one
    (service.outage.Outage backs off; zero waits out the period)."""

    @property
    def failing(self) -> bool: ...

    def failed(self, exc: ApiError) -> float: ...

    def succeeded(self) -> None: ...


def _always() -> bool:
    return True


class Terms:
    """Whether this replica led at the last look, and in which term (the
    elector's count of leads taken): a lead lost and taken again between two
    looks is a loss all the same."""

    def __init__(self) -> None:
        self._leading: bool | None = None
        self._term = 0

    def look(self, leads: bool, term: int) -> Turn:
        lost = bool(self._leading) and (not leads or term != self._term)
        taken = leads and (lost or not self._leading)
        self._leading, self._term = leads, term
        return Turn(leads, lost, taken)


def serve(duty: Duty, stop: threading.Event, period: float, failures: Failures, *,
          elector: LeaderElector | None = None, health: Health | None = None,
          cycles: int | None = None, reachability: Reachability | None = None) -> int:
    """Run periods until stop (or cycles of them), each as leader or standby.
    Each finished period is told to health (the liveness probe). reachability:
    the client's, so that a backoff during an outage is cut short when the API
    answers again. Returns the number of periods run."""
    leading: Callable[[], bool] = elector.is_leading if elector is not None else _always
    lease_stop = threading.Event()
    if elector is not None:
        elector.start(lease_stop)
    terms = Terms()
    done = 0
    try:
        if elector is not None:
            # The first lists and the first Lease try overlap; the first pass
            # runs as soon as both are done.
            try:
                duty.prepare()
            except ApiError as exc:
                failures.failed(exc)
            elector.tried.wait(period + FIRST_TRY_GRACE)
        while not stop.is_set() and (cycles is None or done < cycles):
            started = time.monotonic()
            turn = Turn(False, False, False)
            failure: ApiError | None = None
            try:
                turn = terms.look(leading(), elector.term if elector is not None else 0)
                duty.turned(turn)
                if turn.leads:
                    duty.lead(lambda: not stop.is_set() and leading())
                else:
                    duty.follow()
                failures.succeeded()
                delay = 0.0
            except ApiError as exc:
                failure = exc
                delay = failures.failed(exc)
            duty.passed(turn, failure)
            done += 1
            if health is not None:
                health.beat()
            rest = max(0.0, period - (time.monotonic() - started))
            _pause(duty, stop, elector, max(rest, delay), turn.leads,
                   reachability if failures.failing else None)
    finally:
        duty.finish()
        lease_stop.set()
        if elector is not None:
            elector.release()
    return done


def _pause(duty: Duty, stop: threading.Event, elector: LeaderElector | None, seconds: float,
           leads: bool, reachability: Reachability | None) -> None:
    """Until the next pass. During an outage, cut short when the API answers
    again; a standby (or a leader that lost the lead in its pass) wakes at once
    when this replica is elected; a leader keeps up meanwhile -- the watch
    events it applies now are applied in the same order as at the next pass,
    so that pass decides the same, but starts with few left to apply."""
    if reachability is not None:
        reachability.pause(seconds, stop)
        return
    if elector is not None and (not leads or not elector.elected.is_set()):
        elector.stand_by(stop, seconds)
        return
    deadline = time.monotonic() + seconds
    keeping_up = leads
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or stop.wait(min(left, KEEP_UP_EVERY)):
            return
        if keeping_up:
            try:
                duty.keep_up()
            except ApiError:
                keeping_up = False
