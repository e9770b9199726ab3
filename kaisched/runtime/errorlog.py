"""The log of jobs whose decision raised: each error's traceback is logged,
at most once per job (or action, for an action's own step) a minute, so a job that fails every cycle reports its
bug without flooding the log. Every error is counted all the same (the
cycle's result carries them to the metrics), and the job's condition says
SchedulerError with the message: the error is reported, never swallowed."""
from __future__ import annotations

import logging
from typing import Iterable

from kaisched.api.types import JobKey
from kaisched.framework.failures import JobError

log = logging.getLogger("kaisched.runtime.scheduler")

# Seconds between two tracebacks of one job's errors.
EVERY = 60.0


class ErrorLog:
    def __init__(self, every: float = EVERY) -> None:
        self.every = every
        self._last: dict[JobKey, float] = {}

    def report(self, errors: Iterable[JobError], now: float) -> list[JobError]:
        """Log the errors whose job's last traceback is a minute old or more;
        returns those logged."""
        logged = []
        for error in errors:
            who = error.job or JobKey(f"action {error.action}")
            last = self._last.get(who)
            if last is not None and now - last < self.every:
                continue
            self._last[who] = now
            if error.job:
                log.error("deciding %s in %s raised %s (it lost its turn this cycle; "
                          "other jobs were scheduled)\n%s", error.job, error.action or "the session",
                          error.message, error.trace.rstrip())
            else:
                log.error("%s raised %s outside any one job's decision (the rest of it was "
                          "skipped this cycle; the other actions ran)\n%s", error.action,
                          error.message, error.trace.rstrip())
            logged.append(error)
        # Jobs quiet for longer than that are forgotten: the map stays small.
        self._last = {k: t for k, t in self._last.items() if now - t < self.every}
        return logged
