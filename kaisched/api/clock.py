"""Time as one injected object: the loop, timers and the simulator read it here."""
from __future__ import annotations

import datetime as _dt
import functools
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class WallClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """Virtual time for replay, simulate and tests."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:   # 2026-01-01T00:00:00Z
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def set(self, when: float) -> None:
        self._now = max(self._now, when)


def to_rfc3339(ts: float) -> str:
    return _rfc3339_of(int(ts))


# Memoised, both ways: each session writes and reads back every PodGroup's
# timestamps, and most of them are the same few seconds.
@functools.lru_cache(maxsize=1 << 16)
def _rfc3339_of(seconds: int) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock_text(ts: float, now: float) -> str:
    """A moment as a person reads it beside now: "10:42" (UTC), "10:42:30"
    when not on the minute, with the date when it is another day."""
    when = _dt.datetime.fromtimestamp(int(ts), _dt.timezone.utc)
    text = when.strftime("%H:%M" if when.second == 0 else "%H:%M:%S")
    today = _dt.datetime.fromtimestamp(int(now), _dt.timezone.utc).date()
    return text if when.date() == today else f"{when.date().isoformat()} {text}"


def from_rfc3339(text: str | None) -> float | None:
    if not text:
        return None
    return _seconds_of(text)


@functools.lru_cache(maxsize=1 << 16)
def _seconds_of(text: str) -> float | None:
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
