"""What a simulation saw over virtual time: cluster use and per-queue use and
fair share after every session (use is constant between sessions, so averages
weigh each sample by how long it held), job starts, and evictions.
"""
from __future__ import annotations

import attrs


def hms(seconds: float) -> str:
    """Virtual time since the start, as H:MM:SS."""
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


@attrs.frozen(slots=True)
class Eviction:
    at: float
    pod: str
    job: str
    queue: str
    cause: str             # reclaim | preempt | stale-gang | other
    by_job: str = ""
    by_queue: str = ""


@attrs.define
class Timeline:
    resource: str                                   # the resource shares are shown in
    queues: tuple[str, ...]
    times: list[float] = attrs.field(factory=list)
    used: dict[str, list[float]] = attrs.field(factory=dict)          # resource -> series
    queue_used: dict[str, list[float]] = attrs.field(factory=dict)    # queue -> series
    fair_share: dict[str, list[float]] = attrs.field(factory=dict)    # queue -> series
    # queue -> normalised usage over the window (fair share with memory; else empty)
    usage: dict[str, list[float]] = attrs.field(factory=dict)
    starts: list[tuple[float, str, str]] = attrs.field(factory=list)  # at, queue, job
    evictions: list[Eviction] = attrs.field(factory=list)
    # resource -> what the nodes offered, where nodes come and go (an autoscaler)
    capacity: dict[str, list[float]] = attrs.field(factory=dict)

    def sample(self, at: float, used: dict[str, float], queue_used: dict[str, dict[str, float]],
               fair: dict[str, float] | None, usage: dict[str, float] | None = None,
               capacity: dict[str, float] | None = None) -> None:
        if self.times and self.times[-1] == at:
            self.times.pop()
            for series in (*self.used.values(), *self.queue_used.values(),
                           *self.fair_share.values(), *self.usage.values(),
                           *self.capacity.values()):
                series.pop()
        self.times.append(at)
        for name, amount in (capacity or {}).items():
            self.capacity.setdefault(name, []).append(amount)
        for name, amount in used.items():
            self.used.setdefault(name, [0.0] * (len(self.times) - 1)).append(max(amount, 0.0))
        for series in self.used.values():
            if len(series) < len(self.times):
                series.append(0.0)
        for queue in self.queues:
            self.queue_used.setdefault(queue, []).append(
                max(queue_used.get(queue, {}).get(self.resource, 0.0), 0.0))
            share = (fair or {}).get(queue)
            self.fair_share.setdefault(queue, []).append(share if share is not None else float("nan"))
            if usage is not None or self.usage:
                self.usage.setdefault(queue, [0.0] * (len(self.times) - 1)).append(
                    (usage or {}).get(queue, 0.0))

    def average(self, series: list[float], end: float) -> float:
        """Time-weighted mean over [first sample, end]."""
        if not self.times or end <= self.times[0]:
            return 0.0
        total = 0.0
        for i, value in enumerate(series):
            until = self.times[i + 1] if i + 1 < len(self.times) else end
            if value == value:             # a missing fair share (NaN) adds nothing
                total += value * (until - self.times[i])
        return total / (end - self.times[0])
