"""What /healthz and /readyz say, and the HTTP server of /metrics, /healthz
and /readyz that `kaisched run` and `podgrouper run` share.

/healthz (liveness) fails when the leader's loop has not finished a period for
several periods: a loop stuck in a request or a deadlock is restarted by the
kubelet. A standby is healthy (its loop only keeps its cache warm), and so is
a loop that finishes its periods while the API is away: restarting it would
not bring the API back. /readyz (readiness) says whether the caches have
listed what exists, and whether every watch is connected; for the scheduler
it also tells a warm standby (its cache follows the cluster and what the next
snapshot needs is built, so a takeover adds only the last events) from a cold
one (still laying out what it listed, or its loop has stopped following): a
cold standby is not ready, so a rolling update waits for it before it stops
the leader.
"""
from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

STALL_PERIODS = 10          # periods without a finished loop before /healthz fails
MIN_STALL = 30.0            # ... and never fewer seconds than this (a long first list)


def _never() -> bool:
    return False


def _always() -> bool:
    return True


class Health:
    """period: the loop's period. leading: whether this replica leads now;
    synced: whether its caches listed everything; watching: whether every
    watch is connected; warmed_at: when a standby last got ready to take over
    (monotonic; None: not yet), for a component that has standbys to tell apart."""

    def __init__(self, period: float, leading: Callable[[], bool] = _always,
                 synced: Callable[[], bool] = _never, watching: Callable[[], bool] = _always,
                 stall_periods: int = STALL_PERIODS, min_stall: float = MIN_STALL,
                 monotonic: Callable[[], float] = time.monotonic,
                 warmed_at: Callable[[], float | None] | None = None) -> None:
        self.stall = max(stall_periods * period, min_stall)
        self.leading = leading
        self.synced = synced
        self.watching = watching
        self.monotonic = monotonic
        self.warmed_at = warmed_at
        self._beat = monotonic()

    def beat(self) -> None:
        """The loop finished one period (whatever it did in it)."""
        self._beat = self.monotonic()

    def alive(self) -> tuple[bool, str]:
        quiet = self.monotonic() - self._beat
        if quiet > self.stall and self.leading():
            return False, (f"the leader's loop has not finished a period for {quiet:.0f}s "
                           f"(limit {self.stall:.0f}s)")
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        if not self.synced():
            return False, "caches not synced yet"
        if not self.watching():
            return False, "a watch is down; it relists when the API answers"
        if self.warmed_at is None:
            return True, "ok"
        if self.leading():
            return True, "ok: leading"
        at = self.warmed_at()
        if at is None:
            return False, ("cold standby: its cache has listed the cluster; what a takeover "
                           "needs is still being built")
        quiet = self.monotonic() - at
        if quiet > self.stall:
            return False, (f"cold standby: its cache has not followed the cluster for "
                           f"{quiet:.0f}s (limit {self.stall:.0f}s)")
        return True, "ok: warm standby (its cache follows the cluster; a takeover adds only " \
                     "the last events)"


def serve(registry: CollectorRegistry, health: Health | None, port: int,
          host: str = "0.0.0.0") -> ThreadingHTTPServer:
    """/metrics, /healthz and /readyz on a daemon thread (without a Health both
    probes answer ok: the process serves)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server name
            path = self.path.split("?", 1)[0]
            status = 200
            if path == "/metrics":
                body, kind = generate_latest(registry), CONTENT_TYPE_LATEST
            elif path in ("/healthz", "/readyz"):
                probe = (health.alive if path == "/healthz" else health.ready) if health \
                    else (lambda: (True, "ok"))
                good, text = probe()
                status = 200 if good else 503
                body, kind = f"{text}\n".encode(), "text/plain"
            else:
                self.send_error(404)
                return
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return None     # probes every few seconds are not news

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
