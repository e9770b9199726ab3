"""Where each queue's usage comes from, cycle by cycle: the leader's own
book (built in) or a Prometheus server. Either hands the snapshot each
queue's normalised usage before the session opens (the proportion plugin
reads it there and does no I/O), and gives the Queue status writes
(SetQueueUsage, at most once a minute per queue) after it closes.

Built in, the book adds what each queue holds into the buckets of
kaisched.api.decayedusage and keeps them in the Queue's status, so a restart or a
new leader goes on from there. A status.usage the book did not write (a
`kubectl patch` that clears it, another leader's) is taken as it is: that is
how a queue's usage is reset.

From Prometheus, the usage is asked for once a minute in a thread of its
own, over the metrics kaisched exports (kaisched_queue_allocated and
kaisched_cluster_capacity); while the server cannot answer, the last known
usage stands -- after a restart, the one the Queue status kept -- and one
line says so.
"""
from __future__ import annotations

import logging
import math
import threading
from typing import TYPE_CHECKING, Protocol

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.decayedusage import (
    BUCKETS,
    Usage,
    UsageDBConfig,
    UsageParams,
    UsageSource,
    add_interval,
    holdings,
    normalised,
    offered,
    record,
)
from kaisched.api.queue import ROOT, Bucket, UsageRecord
from kaisched.api.types import QueueName
from kaisched.cache.convert import usage_record, usage_status_dict
from kaisched.errors import UsageDBError
from kaisched.framework.effects import SetQueueUsage

if TYPE_CHECKING:
    from kaisched.cluster.prometheus import PrometheusClient

log = logging.getLogger(__name__)

WRITE_EVERY = 60.0          # seconds between two writes of one queue's status.usage
REFRESH = 10.0              # seconds at most between two workings-out of every queue's usage
FETCH_EVERY = 60.0          # seconds between two questions to Prometheus
_OURS = 4                   # records of ours an echo may still bring back


class UsageBook(Protocol):
    def observe(self, cluster: ClusterInfo, now: float) -> Usage: ...

    def writes(self, now: float) -> list[SetQueueUsage]: ...

    def next_change(self, now: float) -> float | None: ...


def usage_book(config: UsageDBConfig | None, pool: str | None = None) -> UsageBook | None:
    """pool: a shard's node pool, whose own series alone Prometheus is asked for."""
    if config is None:
        return None
    if config.client_type is UsageSource.PROMETHEUS:
        assert config.connection_string is not None     # the config refuses it otherwise
        # Loaded only here: urllib3 under it is no part of a start without Prometheus.
        from kaisched.cluster.prometheus import PrometheusClient

        return PrometheusBook(config.params, PrometheusClient(config.connection_string),
                              pool=pool)
    return BuiltinBook(config.params)


class _Statuses:
    """status.usage as each Queue shows it, and the writes that keep it: a
    record the book did not write itself is news (a reset, another leader's)."""

    def __init__(self) -> None:
        self.seen: dict[QueueName, UsageRecord | None] = {}
        self.ours: dict[QueueName, list[UsageRecord]] = {}
        self.written: dict[QueueName, float] = {}
        self.current: dict[QueueName, UsageRecord] = {}     # to write, per queue
        # Another node pool's queues (a shard): their scheduler writes their
        # usage; this one only reads it.
        self.foreign: set[QueueName] = set()

    def news(self, cluster: ClusterInfo) -> dict[QueueName, UsageRecord | None]:
        """The queues whose status.usage changed to a record not of ours."""
        out: dict[QueueName, UsageRecord | None] = {}
        self.foreign = {QueueName(n) for n, q in cluster.queues.items() if not q.owned}
        for name, queue in cluster.queues.items():
            if not queue.declared:
                continue
            shown = queue.usage
            if name in self.seen and (shown is self.seen[name] or shown == self.seen[name]):
                continue
            self.seen[name] = shown
            if shown is None or shown not in self.ours.get(name, ()):
                out[name] = shown
                self.written.pop(name, None)    # say what we make of it soon
        for name in set(self.seen) - cluster.queues.keys():
            for table in (self.seen, self.ours, self.written, self.current):
                table.pop(name, None)
        return out

    def due(self, now: float) -> list[QueueName]:
        """The queues whose status.usage may be written now (once a minute each)."""
        return [name for name in sorted(self.current) if name not in self.foreign
                and now - self.written.get(name, -math.inf) >= WRITE_EVERY]

    def writes(self, now: float) -> list[SetQueueUsage]:
        out = []
        for name in self.due(now):
            new = self.current[name]
            ours = self.ours.get(name, [])
            if ours and new == ours[-1]:
                continue
            out.append(SetQueueUsage(name, new, self.seen.get(name)))
            # As the object will show it (whole seconds, cpu in cores), to know its echo.
            shown = usage_record(usage_status_dict(new, None))
            self.ours[name] = [*ours, shown or new][-_OURS:]
            self.written[name] = now
        return out


class BuiltinBook:
    """The leader's own account of what each queue held (see the module).

    A queue's holdings are accounted when they change (what it held since,
    at the old rate: a constant rate may wait), and every queue's at least
    every REFRESH seconds and before its status is written; its usage is
    worked out again then. So a cycle costs a comparison per queue, and work
    only for the queues whose pods came or went."""

    def __init__(self, params: UsageParams) -> None:
        self.params = params
        self.buckets: dict[QueueName, tuple[Bucket, ...]] = {}
        self.since: dict[QueueName, float] = {}      # accounted up to
        self.rates: dict[QueueName, dict[str, float]] = {}   # held since then, per second
        self.offered: dict[str, float] = {}
        self.usage: dict[QueueName, dict[str, float]] = {}
        self.refreshed = -math.inf
        self.statuses = _Statuses()

    def observe(self, cluster: ClusterInfo, now: float) -> Usage:
        stale: set[QueueName] = set()
        for name, shown in self.statuses.news(cluster).items():
            self.buckets[name] = shown.buckets if shown is not None else ()
            # A reset starts afresh now; another leader's record goes on from its last moment.
            self.since[name] = shown.updated if shown is not None and shown.buckets else now
            stale.add(name)
        parents = {n: q.parent or ROOT for n, q in cluster.queues.items()}
        held = holdings(((q, r, c) for (q, r, _), c in cluster.ledger().holding.items()), parents)
        offers = offered(cluster.total_allocatable())
        everything = offers != self.offered or now - self.refreshed >= min(REFRESH, self.params.bucket)
        # What was offered since the last cycle: what is offered now, the first time.
        self.offered = self.offered or offers
        for name, queue in cluster.queues.items():
            if not queue.declared or not queue.owned:   # another shard's: read from its status
                continue
            rate = held.get(name, {})
            if everything or name in stale or name not in self.since or rate != self.rates.get(name):
                self._settle(name, now, rate)
                stale.add(name)
        self.offered = offers
        if everything:
            self.refreshed = now
        for name in stale:
            self._refresh(name, now)
        for name in set(self.buckets) - cluster.queues.keys():
            for table in (self.buckets, self.since, self.rates, self.usage):
                table.pop(name, None)
        return self.usage

    def writes(self, now: float) -> list[SetQueueUsage]:
        for name in self.statuses.due(now):
            if self.since.get(name, now) < now:
                self._settle(name, now, self.rates.get(name, {}))
                self._refresh(name, now)
        return self.statuses.writes(now)

    def next_change(self, now: float) -> float | None:
        """The next bucket boundary: usage moves as time passes, so a
        simulation that skips quiet moments must stop there."""
        size = self.params.bucket
        return (math.floor(now / size) + 1) * size

    def _settle(self, name: QueueName, now: float, rate: dict[str, float]) -> None:
        """Account what the queue held since it was last accounted, at the rate
        it held then (the new one, the first time), and take the new rate."""
        since = self.since.get(name, now)
        if now > since:
            self.buckets[name] = add_interval(self.buckets.get(name, ()), self.params, since,
                                              now, self.rates.get(name, rate), self.offered)
        self.since[name], self.rates[name] = now, rate

    def _refresh(self, name: QueueName, now: float) -> None:
        current = record(self.buckets.get(name, ()), self.params, now)
        self.statuses.current[name] = current
        self.usage[name] = dict(current.normalized)


class PrometheusBook:
    """Usage asked of a Prometheus server (see the module)."""

    def __init__(self, params: UsageParams, client: PrometheusClient,
                 every: float = FETCH_EVERY, pool: str | None = None) -> None:
        self.params = params
        self.client = client
        self.every = every
        self.pool = pool
        self.known: dict[QueueName, dict[str, float]] = {}
        self.fetched: float | None = None          # when the last question was asked
        self.failing = False
        self.statuses = _Statuses()
        self._lock = threading.Lock()
        self._busy = False

    def observe(self, cluster: ClusterInfo, now: float) -> Usage:
        with self._lock:
            for name, shown in self.statuses.news(cluster).items():
                if shown is not None and name not in self.known:
                    self.known[name] = dict(shown.normalized)   # the last known, until asked
            due = not self._busy and (self.fetched is None or now - self.fetched >= self.every)
            if due:
                self._busy, self.fetched = True, now
            for name, queue in cluster.queues.items():
                if queue.declared and name in self.known:
                    self.statuses.current[name] = UsageRecord(
                        (), tuple(sorted(self.known[name].items())), now)
            usage = {name: dict(values) for name, values in self.known.items()}
        if due:
            threading.Thread(target=self.refresh, args=(now,), daemon=True,
                             name="kaisched-usage").start()
        return usage

    def refresh(self, now: float) -> None:
        """Ask Prometheus now; on failure keep what is known, and say so once."""
        try:
            usage = fetch_usage(self.client, self.params, now, self.pool)
        except UsageDBError as exc:
            with self._lock:
                self._busy = False
                if not self.failing:
                    log.warning("queue usage: %s; the last known usage stands", exc)
                self.failing = True
            return
        with self._lock:
            self._busy = False
            if self.failing:
                log.info("queue usage: Prometheus answers again")
            self.failing = False
            self.known = usage

    def writes(self, now: float) -> list[SetQueueUsage]:
        with self._lock:
            return self.statuses.writes(now)

    def next_change(self, now: float) -> float | None:
        return None


# The metrics asked for: each queue's figures, and what the cluster offered
# (max over the series of several replicas: only the leader exports them). A
# shard asks for its own pool's series: what its nodes offered, not the
# largest pool's.
HELD = "max by (queue, resource) (avg_over_time(kaisched_queue_allocated{selector}[{range}]))"
OFFERED = "max by (resource) (avg_over_time(kaisched_cluster_capacity{selector}[{range}]))"


def _selector(pool: str | None) -> str:
    if pool is None:
        return ""
    escaped = pool.replace("\\", "\\\\").replace('"', '\\"')
    return f'{{pool="{escaped}"}}'


def fetch_usage(client: PrometheusClient, params: UsageParams, now: float,
                pool: str | None = None) -> dict[QueueName, dict[str, float]]:
    """Each queue's normalised usage from Prometheus: bucket by bucket on the
    grid of the built-in book (the window over BUCKETS), the average of each
    series over a bucket times its length, then normalised alike; pool: only
    the series a shard of that node pool exported."""
    selector = _selector(pool)
    size = params.bucket
    last_end = math.floor(now / size) * size
    first_end = max(last_end - (BUCKETS - 1) * size, params.window_start(now) + size)
    held: dict[tuple[QueueName, str], list[tuple[float, float, float]]] = {}
    offers: dict[str, list[tuple[float, float, float]]] = {}

    def add(labels: dict[str, str], at: float, seconds: float, value: float) -> None:
        entry = (at - seconds, seconds, value * seconds)
        if "queue" in labels:
            held.setdefault((QueueName(labels["queue"]), labels.get("resource", "")), []).append(entry)
        else:
            offers.setdefault(labels.get("resource", ""), []).append(entry)

    for template in (HELD, OFFERED):
        if first_end <= last_end:
            expr = template.format(selector=selector, range=_duration(size))
            for labels, samples in client.query_range(expr, first_end, last_end, size):
                for at, value in samples:
                    add(labels, at, size, value)
        partial = now - last_end
        if partial >= 1.0:
            for labels, value in client.query(template.format(selector=selector,
                                                                range=_duration(partial)), now):
                add(labels, now, partial, value)
    if not offers:
        raise UsageDBError("kaisched_cluster_capacity has no samples in the window: "
                           "is Prometheus scraping kaisched's /metrics?")
    out: dict[QueueName, dict[str, float]] = {}
    for queue in sorted({q for q, _ in held}):
        buckets: dict[float, tuple[float, dict[str, float], dict[str, float]]] = {}
        for res, rows in offers.items():
            for start, seconds, amount in rows:
                buckets.setdefault(start, (seconds, {}, {}))[2][res] = amount
        for (name, res), rows in held.items():
            if name == queue:
                for start, seconds, amount in rows:
                    buckets.setdefault(start, (seconds, {}, {}))[1][res] = amount
        out[queue] = normalised(
            (Bucket(start, seconds, tuple(sorted(h.items())), tuple(sorted(o.items())))
             for start, (seconds, h, o) in sorted(buckets.items())), params, now)
    return out


def _duration(seconds: float) -> str:
    """A PromQL range: whole milliseconds."""
    return f"{max(1, round(seconds * 1000))}ms"
