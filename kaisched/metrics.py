"""Prometheus metrics and the /metrics and /healthz endpoints of `kaisched run`."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import generate_latest

from kaisched.framework.effects import Bind, Evict

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
        self.bind_failures = Counter("kaisched_bind_failures", "Effects the API refused.",
                                     registry=r)
        self.evictions = Counter("kaisched_evictions", "Pods evicted.", ["reason"], registry=r)
        self.pipelined = Gauge("kaisched_pipelined_pods",
                               "Pods waiting for room being released, last cycle.", registry=r)
        self.leader = Gauge("kaisched_is_leader", "1 while this replica schedules.", registry=r)
        self.cycle_errors = Counter("kaisched_cycle_errors",
                                    "Cycles that could not reach the API.", registry=r)

    def observe(self, result: object) -> None:
        """Record one CycleResult."""
        self.snapshot_seconds.observe(result.snapshot_seconds)   # type: ignore[attr-defined]
        self.session_seconds.observe(result.session_seconds)     # type: ignore[attr-defined]
        for effect in result.report.applied:                     # type: ignore[attr-defined]
            if isinstance(effect, Bind):
                self.binds.inc()
            elif isinstance(effect, Evict):
                self.evictions.labels(effect.reason).inc()
        self.bind_failures.inc(len(result.report.failed))        # type: ignore[attr-defined]
        self.pipelined.set(len(result.reservations))             # type: ignore[attr-defined]

    def serve(self, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:
        """/metrics and /healthz in a daemon thread. /healthz answers on a standby
        too: it is alive, only not leading."""
        registry = self.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                if self.path == "/metrics":
                    body, kind = generate_latest(registry), CONTENT_TYPE_LATEST
                elif self.path == "/healthz":
                    body, kind = b"ok\n", "text/plain"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None     # probes every few seconds are not news

        server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        return server
