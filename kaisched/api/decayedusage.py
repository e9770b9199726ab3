"""Fair share with memory: what each queue held over a window of time.

A queue's usage of a resource is what it held, each moment weighted by
0.5^(age / halfLifePeriod), divided by what the cluster offered over the same
moments, weighted alike: a queue that held 24 of a possible 100 GPU-hours
scores 0.24, so a small use of an idle cluster costs little, and the usage of
the queues under one parent never adds up to more than 1.

Time is cut into buckets on a fixed grid (the window over BUCKETS): each
bucket keeps resource x seconds held and offered, so a record stays small
(at most BUCKETS buckets per queue) and fits in the Queue's status. A sliding
window keeps the newest buckets; a tumbling window starts again at every
multiple of its size (which falls on the grid, the window being a whole
number of buckets).

Pure values and arithmetic: who records, writes and reads them is the
runtime's business (kaisched.runtime.usagebooks).
"""
from __future__ import annotations

import enum
import math
from typing import Iterable, Mapping

import attrs

from kaisched.api.queue import ROOT, Amounts, Bucket, UsageRecord
from kaisched.api.resource import PODS, Resource
from kaisched.api.types import QueueName

BUCKETS = 48
WEEK = 7 * 24 * 3600.0

Usage = Mapping[QueueName, Mapping[str, float]]     # queue -> resource -> normalised usage


class WindowType(str, enum.Enum):
    SLIDING = "sliding"       # the last windowSize, always
    TUMBLING = "tumbling"     # from the last multiple of windowSize: forgotten at once, then


class UsageSource(str, enum.Enum):
    BUILTIN = "builtin"         # the leader adds up what queues hold, kept in their status
    PROMETHEUS = "prometheus"   # a Prometheus server that scrapes kaisched's metrics


@attrs.frozen(slots=True)
class UsageParams:
    window: float = WEEK
    half_life: float | None = None       # None: no decay, every moment of the window counts alike
    window_type: WindowType = WindowType.SLIDING

    @property
    def bucket(self) -> float:
        return self.window / BUCKETS

    def window_start(self, now: float) -> float:
        if self.window_type is WindowType.TUMBLING:
            return math.floor(now / self.window) * self.window
        return now - self.window

    def weight(self, age: float) -> float:
        if not self.half_life:
            return 1.0
        return float(0.5 ** (max(age, 0.0) / self.half_life))


@attrs.frozen(slots=True)
class UsageDBConfig:
    """Where usage comes from, and over what window (KAI's usageDBConfig)."""

    client_type: UsageSource = UsageSource.BUILTIN
    connection_string: str | None = None      # the Prometheus server's URL
    params: UsageParams = UsageParams()


def record(buckets: tuple[Bucket, ...], params: UsageParams, now: float) -> UsageRecord:
    return UsageRecord(buckets, normalised_amounts(buckets, params, now), now)


def add_interval(buckets: tuple[Bucket, ...], params: UsageParams, since: float, until: float,
                 held: Mapping[str, float], offered: Mapping[str, float]) -> tuple[Bucket, ...]:
    """The buckets with [since, until) added: what was held and offered, at
    the given rates, split where the interval crosses the grid; then only
    those of the window at `until`."""
    size = params.bucket
    since = max(since, until - params.window)        # older than the window counts for nothing
    by_start = {b.start: b for b in buckets}
    at = since
    while at < until - 1e-9:
        start = math.floor(at / size) * size
        end = min(start + size, until)
        span = end - at
        if span > 0:
            by_start[start] = _added(by_start.get(start), start, span, held, offered)
        at = end
    return in_window(tuple(by_start[s] for s in sorted(by_start)), params, until)


def in_window(buckets: tuple[Bucket, ...], params: UsageParams, now: float) -> tuple[Bucket, ...]:
    """The buckets that end inside the window, the newest BUCKETS of them."""
    begin = params.window_start(now)
    kept = [b for b in buckets if b.start + params.bucket > begin + 1e-9 and b.start <= now]
    if params.window_type is WindowType.TUMBLING:
        kept = [b for b in kept if b.start >= begin - 1e-9]
    return tuple(kept[-BUCKETS:])


def normalised(buckets: Iterable[Bucket], params: UsageParams, now: float) -> dict[str, float]:
    """Per resource the cluster offered: held over offered, both weighted by
    the age of each bucket's middle."""
    held: dict[str, float] = {}
    offered: dict[str, float] = {}
    for bucket in in_window(tuple(buckets), params, now):
        weight = params.weight(now - (bucket.start + min(bucket.seconds, params.bucket) / 2))
        for name, amount in bucket.offered:
            offered[name] = offered.get(name, 0.0) + weight * amount
        for name, amount in bucket.held:
            held[name] = held.get(name, 0.0) + weight * amount
    return {name: held.get(name, 0.0) / total for name, total in offered.items() if total > 0}


def normalised_amounts(buckets: Iterable[Bucket], params: UsageParams, now: float) -> Amounts:
    """As normalised, rounded to millionths (what a status keeps)."""
    return tuple(sorted((n, round(v, 6)) for n, v in normalised(buckets, params, now).items()))


def offered(total: Resource) -> dict[str, float]:
    """What the cluster offers: its allocatable, pod slots aside (nobody's share)."""
    return {name: amount for name, amount in total.items if name != PODS and amount > 0}


def holdings(held: Iterable[tuple[QueueName, Resource, int]],
             parents: Mapping[QueueName, QueueName]) -> dict[QueueName, dict[str, float]]:
    """What each queue holds, a parent the sum of its children (as a queue's
    allocation reads); held is (leaf queue, request, count of such tasks)."""
    out: dict[QueueName, dict[str, float]] = {}
    for queue, res, count in held:
        name: QueueName | None = queue
        seen: set[QueueName] = set()
        while name is not None and name != ROOT and name not in seen:
            seen.add(name)
            row = out.setdefault(name, {})
            for key, amount in res.items:
                if key != PODS:
                    row[key] = row.get(key, 0.0) + amount * count
            name = parents.get(name)
    return out


def _added(bucket: Bucket | None, start: float, span: float, held: Mapping[str, float],
           offered: Mapping[str, float]) -> Bucket:
    old_held = dict(bucket.held) if bucket is not None else {}
    old_offered = dict(bucket.offered) if bucket is not None else {}
    for name, rate in held.items():
        old_held[name] = old_held.get(name, 0.0) + rate * span
    for name, rate in offered.items():
        old_offered[name] = old_offered.get(name, 0.0) + rate * span
    return Bucket(start, (bucket.seconds if bucket is not None else 0.0) + span,
                  tuple(sorted(old_held.items())), tuple(sorted(old_offered.items())))
