"""The Prometheus metrics of `kaisched run`, served with its probes."""
from __future__ import annotations

import contextlib
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kaisched.api.queue import QueueStatus
from kaisched.framework.effects import Bind, Evict, SetQueueStatus
from kaisched.runtime.health import Health
from kaisched.runtime.health import serve as serve_endpoints

_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.snapshot_seconds = Histogram("kaisched_snapshot_seconds",
                                          "Time to build a cycle's snapshot.", buckets=_BUCKETS,
                                          registry=r)
        self.session_seconds = Histogram("kaisched_session_seconds",
                                         "Time to decide a cycle (actions and plugins).",
                                         buckets=_BUCKETS, registry=r)
        self.binds = Counter("kaisched_binds", "Pods bound.", registry=r)
        self.bind_failures = Counter("kaisched_bind_failures",
                                     "Binds the API refused, or that ran out of retries.",
                                     registry=r)
        self.write_failures = Counter("kaisched_write_failures",
                                      "Evictions, status, condition and Event writes that failed.",
                                      ["effect"], registry=r)
        self.evictions = Counter("kaisched_evictions", "Pods evicted.", ["reason"], registry=r)
        self.pipelined = Gauge("kaisched_pipelined_pods",
                               "Pods waiting for room being released, last cycle.", registry=r)
        self.leader = Gauge("kaisched_is_leader", "1 while this replica schedules.", registry=r)
        self.cycle_errors = Counter("kaisched_cycle_errors",
                                    "Cycles that could not reach the API.", registry=r)
        # The numbers of each Queue's status, per resource (cpu in cores, memory in bytes).
        self.queue_amounts = {
            field: Gauge(f"kaisched_queue_{field}", text, ["queue", "resource"], registry=r)
            for field, text in (("allocated", "What the queue's pods hold."),
                                ("fair_share", "The queue's fair share, last cycle."),
                                ("quota", "The queue's quota."),
                                ("limit", "The queue's limit, where it has one."))}
        self.queue_jobs = Gauge("kaisched_queue_jobs", "The queue's jobs by state.",
                                ["queue", "state"], registry=r)

    def observe(self, result: object) -> None:
        """Record one CycleResult's timings (binds are counted as they happen)."""
        self.snapshot_seconds.observe(result.snapshot_seconds)   # type: ignore[attr-defined]
        self.session_seconds.observe(result.session_seconds)     # type: ignore[attr-defined]
        self.pipelined.set(len(result.reservations))             # type: ignore[attr-defined]
        for effect in result.effects:                            # type: ignore[attr-defined]
            if isinstance(effect, SetQueueStatus):
                self.observe_queue(effect.queue, effect.status, effect.previous)

    # The binder tells of each outcome as it happens (kaisched.runtime.binder.BindObserver).
    def applied(self, effect: object) -> None:
        if isinstance(effect, Bind):
            self.binds.inc()
        elif isinstance(effect, Evict):
            self.evictions.labels(effect.reason).inc()

    def failed(self, effect: object, error: str) -> None:
        if isinstance(effect, Bind):
            self.bind_failures.inc()
        else:
            self.write_failures.labels(effect.__class__.__name__).inc()

    def observe_queue(self, queue: str, status: QueueStatus, previous: QueueStatus | None) -> None:
        """A queue's new status (a cycle reports only changed ones): its figures,
        and resources it no longer has dropped."""
        for field, gauge in self.queue_amounts.items():
            new = dict(getattr(status, field))
            for name, _ in getattr(previous, field) if previous else ():
                if name not in new:
                    with contextlib.suppress(KeyError):
                        gauge.remove(queue, name)
            for name, value in new.items():
                gauge.labels(queue, name).set(value / 1000 if name == "cpu" else value)
        self.queue_jobs.labels(queue, "running").set(status.running_jobs)
        self.queue_jobs.labels(queue, "pending").set(status.pending_jobs)

    def serve(self, port: int, host: str = "0.0.0.0",
              health: Health | None = None) -> ThreadingHTTPServer:
        """/metrics, /healthz and /readyz in a daemon thread (kaisched.runtime.health)."""
        return serve_endpoints(self.registry, health, port, host)
