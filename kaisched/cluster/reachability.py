"""Whether the API server answers, as one state with its own log lines.

Every request of a client reports here. During an outage the log gets one
line when the server stops answering, a reminder every REMIND seconds while
it stays away, and one line when it answers again -- not a line per request,
per watch and per retry.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

log = logging.getLogger("kaisched.api")

REMIND = 60.0
# What the scheduler does while the server is away; another program says its own.
SCHEDULER_PAUSES = "scheduling pauses, every state is kept"


class Reachability:
    def __init__(self, remind: float = REMIND,
                 monotonic: Callable[[], float] = time.monotonic,
                 meanwhile: str = SCHEDULER_PAUSES,
                 say: Optional[Callable[[str], None]] = None) -> None:
        self.remind = remind
        self.meanwhile = meanwhile      # what the program does until the server answers
        self.say = say or log.warning   # a one-shot command says it on stderr itself
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._reminded = 0.0
        self.failures = 0           # failed requests during the current outage

    @property
    def reachable(self) -> bool:
        return self._down_since is None

    def failed(self, reason: str) -> None:
        """A request got no answer at all (refused, timed out, dropped)."""
        now = self.monotonic()
        with self._lock:
            self.failures += 1
            if self._down_since is None:
                self._down_since = self._reminded = now
                self.say(f"the API server cannot be reached: {reason}; {self.meanwhile}")
            elif now - self._reminded >= self.remind:
                self._reminded = now
                self.say(f"the API server is still unreachable after "
                         f"{now - self._down_since:.0f}s ({self.failures} failed requests): "
                         f"{reason}")

    def pause(self, seconds: float, stop: threading.Event) -> bool:
        """Wait up to seconds, or less: until stop is set, or until the server
        answers again when it is away now (a retry that backed off during an
        outage comes back as soon as any request gets through). True when it
        was cut short by the server answering."""
        if self.reachable:
            stop.wait(seconds)
            return False
        deadline = time.monotonic() + seconds
        while not self.reachable:
            left = deadline - time.monotonic()
            if left <= 0 or stop.wait(min(left, 0.1)):
                return False
        return True

    def answered(self) -> None:
        """A request got an answer (any HTTP status: the server is there)."""
        if self._down_since is None:
            return                  # the common case, without taking the lock
        with self._lock:
            if self._down_since is None:
                return
            self.say(f"the API server answers again after "
                     f"{self.monotonic() - self._down_since:.0f}s ({self.failures} failed "
                     "requests)")
            self._down_since = None
            self.failures = 0
