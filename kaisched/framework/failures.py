"""Failures: what a session keeps of the jobs whose decision raised.

An exception while one job is decided is a bug (or an object no check
foresaw), and it costs that job its turn, never the cycle: the statements
opened for it are discarded (their operations undone, in reverse), the job
is told why (reason SchedulerError, with the exception's message), is not
tried again in this session, and every other job is decided as if it were
not there. The errors are values the cycle's result carries: the runtime
counts them and logs their tracebacks; the session does no I/O.
"""
from __future__ import annotations

import traceback
from typing import Protocol

import attrs

from kaisched.api.types import JobKey


class Opened(Protocol):
    """A statement opened while a job is decided, as the guard sees it: one it
    can discard (so this module never names the statement, which sits above it)."""

    def discard(self) -> None: ...


@attrs.frozen
class JobError:
    """One job's decision raised: in which action, the exception in one line,
    and its traceback (for the log). An action's own step over many jobs
    that raised has no job ("")."""

    job: JobKey
    action: str
    message: str
    trace: str

    @classmethod
    def of(cls, job: JobKey, action: str, exc: Exception) -> JobError:
        text = str(exc)
        message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        return cls(job, action, message, "".join(traceback.format_exception(exc)))


class Failures:
    """The errors of one session, the jobs they cost their turn, and the
    statements opened while a job is decided (the innermost decision's last)."""

    __slots__ = ("errors", "failed", "opened_stack")

    def __init__(self) -> None:
        self.errors: list[JobError] = []
        self.failed: set[JobKey] = set()
        # Per decision under way (the innermost last), the statements it opened
        # (Session.statement puts each on the innermost).
        self.opened_stack: list[list[Opened]] = []

    def add(self, error: JobError) -> None:
        self.errors.append(error)
        self.failed.add(error.job)
