"""Back within seconds after an outage.

The scheduler, with the production Lease timings (15 s lease, 10 s renew
deadline, 2 s retry) and watch backoff, talks to the emulator through a TCP
proxy the test can take down: while it is down every connection is refused and
every open one is cut, as when an API server restarts. After 20 s down, the
Lease must be written again and the waiting gang bound before the shortest
backoff the outage grew (the watches', 8 s) could have run out: later than that
means a backoff carried over. The yardstick is the scheduler's own delay, not a
budget for this machine (recovery takes a retry period, 2 s, when nothing
carried over); the figures are printed.
"""
from __future__ import annotations

import socket
import threading
import time

import kmock

from kaisched.api.clock import WallClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import LEASE, POD
from kaisched.cluster.kube import KubeCluster
from kaisched.framework import parse_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler, serve
from kaisched.service.leader import LeaderElector
from tests.builders.proxy import relay
from tests.builders.wire import PATIENCE, PODS, Emulator, api_client, build_node, build_pod, build_podgroup

CONFIG = ("schedulePeriod: 1s\nactions: [allocate]\n"
          "tiers: [{plugins: [{name: priority}, {name: gang}, {name: predicates}]}]\n")
DOWN = 20.0


class Proxy:
    """A TCP forwarder on 127.0.0.1 that can refuse and cut connections."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self.up()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            for how in (socket.SHUT_RDWR,):
                try:
                    conn.shutdown(how)
                except OSError:
                    pass
            conn.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return                              # closed: down
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=relay, args=(a, b), daemon=True).start()


def test_scheduling_resumes_within_seconds_of_a_20s_outage(
        apiserver: Emulator, cluster: KubeCluster) -> None:
    upstream = int(apiserver.url.rsplit(":", 1)[1])
    proxy = Proxy(upstream)
    # The production client's options: watch backoff up to 8 s, 30 s requests.
    client = KubeCluster(api_client=api_client(f"http://127.0.0.1:{proxy.port}"),
                         watch_timeout=60)
    registry = register_builtins()
    clock = WallClock()
    scheduler = Scheduler(client, parse_config(CONFIG, registry), registry, clock,
                          Binder(client, clock.now, workers=2))
    elector = LeaderElector(client.with_timeout(5.0), clock, "replica-1", namespace="default")
    cluster.create(build_node("n1", cpu="8"))
    cluster.create(build_podgroup("before", min_member=2))
    for i in range(2):
        cluster.create(build_pod(f"before-{i}", group="before"))
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(scheduler, stop, elector), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + PATIENCE
        while not all(cluster.get(POD, "default", f"before-{i}")["spec"].get("nodeName")
                      for i in range(2)):
            assert time.monotonic() < deadline, "the first gang was not bound"
            time.sleep(0.1)
        # A gang arrives; its binds are held in the emulator, then the API goes away.
        apiserver.hold("binding")
        cluster.create(build_podgroup("after", min_member=2))
        for i in range(2):
            cluster.create(build_pod(f"after-{i}", group="after"))
        deadline = time.monotonic() + PATIENCE
        while apiserver.count(kmock.resource(PODS), kmock.subresource("binding")) < 3:
            assert time.monotonic() < deadline, "no bind of the second gang was sent"
            time.sleep(0.05)
        proxy.down()
        apiserver.release("binding")            # what was in flight lands, or not
        time.sleep(DOWN)
        renewed_before = (cluster.get(LEASE, "default", "kaisched") or {}).get(
            "spec", {}).get("renewTime")
        proxy.up()
        answered = time.monotonic()
        lease_back = bound = None
        while lease_back is None or bound is None:
            now = time.monotonic() - answered
            assert now < PATIENCE, f"not back: lease after {lease_back}, gang after {bound}"
            if lease_back is None and (cluster.get(LEASE, "default", "kaisched") or {}).get(
                    "spec", {}).get("renewTime") != renewed_before:
                lease_back = now
            if bound is None and all(cluster.get(POD, "default", f"after-{i}")["spec"]
                                     .get("nodeName") for i in range(2)):
                bound = now
            time.sleep(0.05)
        print(f"outage {DOWN:.0f}s: Lease written again {lease_back:.1f}s and the gang bound {bound:.1f}s after the API answered")
        # A backoff carried over would have held the Lease and the watches (whose
        # events the binds wait for) until it ran out.
        grown = client.watch_options["max_backoff"]
        assert lease_back < grown, f"the Lease was written again {lease_back:.1f}s late"
        # Bound may mean it landed during the cut; then it was bound before the outage.
        assert bound < grown, f"scheduling resumed {bound:.1f}s after the API answered"
        assert elector.is_leading()
    finally:
        stop.set()
        thread.join(PATIENCE)
        proxy.down()
        client.close()
    assert not thread.is_alive()
