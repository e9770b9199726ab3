"""A loop's failing passes, said the way an operator wants to read them: one
line when they start failing, a reminder at most once a minute while they
keep failing, one line when a pass works again -- and between tries a delay
that doubles per failure (up to a cap), back to the period once one works."""
from __future__ import annotations

import logging
import time
from typing import Callable

from kaisched.errors import ApiError, UnreachableError

REMIND = 60.0
MAX_DELAY = 30.0


class Outage:
    def __init__(self, log: logging.Logger, what: str, period: float,
                 max_delay: float = MAX_DELAY, remind: float = REMIND,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.log = log
        self.what = what
        self.period = period
        self.max_delay = max(max_delay, period)
        self.remind = remind
        self.monotonic = monotonic
        self.delay = period
        self.failures = 0
        self._since: float | None = None
        self._said_at = 0.0
        self._reason = ""

    @property
    def failing(self) -> bool:
        return self._since is not None

    def failed(self, exc: ApiError) -> float:
        """A pass failed: say so if it is news; returns the seconds to wait."""
        now = self.monotonic()
        # An unreachable server is said by the client once for every request;
        # here it is the failing loop that is news, not each refused connection.
        reason = exc.__class__.__name__ if isinstance(exc, UnreachableError) else str(exc)
        self.failures += 1
        if self._since is None:
            self._since = self._said_at = now
            self.log.warning("%s failed, retrying with backoff: %s", self.what, exc)
        elif reason != self._reason and not isinstance(exc, UnreachableError):
            self._said_at = now
            self.log.warning("%s still fails, now: %s", self.what, exc)
        elif now - self._said_at >= self.remind:
            self._said_at = now
            self.log.warning("%s still fails after %.0fs (%d tries): %s", self.what,
                             now - self._since, self.failures, exc)
        self._reason = reason
        self.delay = self.period if self.failures == 1 else min(self.delay * 2, self.max_delay)
        return self.delay

    def succeeded(self) -> None:
        if self._since is not None:
            self.log.info("%s works again after %.0fs (%d failed tries)", self.what,
                          self.monotonic() - self._since, self.failures)
        self._since = None
        self._reason = ""
        self.failures = 0
        self.delay = self.period
