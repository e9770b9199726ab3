"""How often the same thing is told to the API: status, conditions and Events.

A session says what each waiting pod and PodGroup should show, every cycle.
Written as said, 3,000 waiting pods would cost thousands of requests a
second. As kube-scheduler does, a write goes out at once when its reason
changes; a new message under the same reason waits at least MIN_GAP since the
last write; the very same content is written again only after a backoff that
doubles from FIRST_REPEAT up to MAX_REPEAT (for an Event, as a repeat of the
Event already written: count and series, not a new object).
The session is level-triggered -- what a skipped write should have said is
said again next cycle -- so nothing is lost, only delayed.
"""
from __future__ import annotations

import enum
import threading
from typing import Hashable

import attrs

from kaisched.api.job import PodGroupStatus
from kaisched.framework.effects import Effect, RecordEvent, SetPodCondition, SetPodGroupStatus

MIN_GAP = 10.0
FIRST_REPEAT = 60.0
MAX_REPEAT = 300.0


class Verdict(enum.Enum):
    WRITE = "write"         # new content: write it
    REPEAT = "repeat"       # the same content again, after its backoff
    SKIP = "skip"           # too soon: the next cycle says it again


@attrs.frozen
class Admission:
    verdict: Verdict
    target: Hashable
    count: int = 1          # occurrences this write stands for (an Event's count)
    name: str = ""          # the Event written before, to repeat


@attrs.define
class _Written:
    word: Hashable          # the reason: a change is written at once
    content: Hashable       # the message: a change waits MIN_GAP
    at: float
    interval: float
    count: int = 1          # occurrences told so far (an Event's count)
    unsaid: int = 0         # occurrences skipped since the last write
    name: str = ""


class WriteThrottle:
    def __init__(self, min_gap: float = MIN_GAP, first_repeat: float = FIRST_REPEAT,
                 max_repeat: float = MAX_REPEAT) -> None:
        self.min_gap = min_gap
        self.first_repeat = first_repeat
        self.max_repeat = max_repeat
        self._lock = threading.Lock()
        self._written: dict[Hashable, _Written] = {}
        self._swept = 0.0
        self.skipped = 0

    def admit(self, effect: Effect, now: float) -> Admission:
        target, word, content = _identity(effect)
        with self._lock:
            self._sweep(now)
            last = self._written.get(target)
            if last is None or last.word != word:
                self._written[target] = _Written(word, content, now, self.first_repeat)
                return Admission(Verdict.WRITE, target)
            if last.content != content:
                if now - last.at < self.min_gap:
                    self.skipped += 1
                    return Admission(Verdict.SKIP, target)
                self._written[target] = _Written(word, content, now, self.first_repeat)
                return Admission(Verdict.WRITE, target)
            if now - last.at < last.interval:
                last.unsaid += 1
                self.skipped += 1
                return Admission(Verdict.SKIP, target)
            last.count += last.unsaid + 1
            last.unsaid = 0
            last.at = now
            last.interval = min(last.interval * 2, self.max_repeat)
            return Admission(Verdict.REPEAT, target, last.count, last.name)

    def named(self, target: Hashable, name: str) -> None:
        """The Event a write created, for its repeats."""
        with self._lock:
            last = self._written.get(target)
            if last is not None:
                last.name = name

    def forget(self, target: Hashable) -> None:
        """A write that failed or was dropped: the next one goes out at once."""
        with self._lock:
            self._written.pop(target, None)

    def _sweep(self, now: float) -> None:
        # Pods come and go: forget what was told long ago (its next write is new).
        if now - self._swept < self.max_repeat:
            return
        self._swept = now
        horizon = now - 2 * self.max_repeat
        for target in [t for t, w in self._written.items() if w.at < horizon]:
            del self._written[target]


def _identity(effect: Effect) -> tuple[Hashable, Hashable, Hashable]:
    """(what is written to, its reason, its message) of a status-like effect."""
    if isinstance(effect, SetPodCondition):
        c = effect.condition
        return ("condition", effect.pod, c.type), (c.status, c.reason), c.message
    if isinstance(effect, SetPodGroupStatus):
        return ("status", effect.job), _shape(effect.status), _messages(effect.status)
    if isinstance(effect, RecordEvent):
        return ("event", effect.kind, effect.key, effect.reason), effect.type, effect.message
    raise TypeError(f"not a status write: {effect!r}")


def _shape(status: PodGroupStatus) -> Hashable:
    """What must never wait: phase, counts, timers, conditions' status and reason."""
    return (status.phase, status.scheduled, status.running, status.succeeded, status.failed,
            status.pending, status.last_schedule_time, status.stale_since, status.last_moved_time,
            status.observed_generation,
            tuple((c.type, c.status, c.reason) for c in status.conditions))


def _messages(status: PodGroupStatus) -> Hashable:
    return tuple(c.message for c in status.conditions)
