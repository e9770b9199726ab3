"""The Prometheus metrics of `podgrouper run`, served with its probes."""
from __future__ import annotations

from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kaisched.service.health import Health
from kaisched.service.health import serve as serve_endpoints

_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)


class GrouperMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.sync_seconds = Histogram("podgrouper_sync_seconds",
                                      "Time of one sync (the leader's passes).",
                                      buckets=_BUCKETS, registry=r)
        self.writes = Counter("podgrouper_writes",
                              "PodGroups created or patched, pods annotated, Events recorded.",
                              registry=r)
        self.sync_errors = Counter("podgrouper_sync_errors",
                                   "Syncs that could not reach the API.", registry=r)
        self.pending = Gauge("podgrouper_pending_pods",
                             "Pods left without a PodGroup after the last sync (retried).",
                             registry=r)
        self.leader = Gauge("podgrouper_is_leader", "1 while this replica groups pods.",
                            registry=r)

    def synced(self, writes: int, seconds: float, pending: int) -> None:
        self.sync_seconds.observe(seconds)
        self.writes.inc(writes)
        self.pending.set(pending)

    def serve(self, port: int, host: str = "0.0.0.0",
              health: Health | None = None) -> ThreadingHTTPServer:
        return serve_endpoints(self.registry, health, port, host)
