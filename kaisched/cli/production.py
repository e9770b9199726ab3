"""`kaisched run`: the scheduler against a cluster, one replica of it (leader election,
/metrics, /healthz and /readyz), refused at start when the cluster does not fit its memory."""
from __future__ import annotations

import gc
import logging
import re
import signal
import threading
from typing import TYPE_CHECKING

import click

from kaisched.console import kubeconfig_option, replica_options
from kaisched.errors import InputError
from kaisched.runtime.defaults import BINDERS, BURST, HEAD_START_PODS, QPS

# How long the command waits for the first lists to be asked for before
# loading the scheduler's modules (see run).
ASKED_WITHIN = 1.0

if TYPE_CHECKING:
    from kaisched.cluster.kube import KubeCluster
    from kaisched.service.leader import LeaseOptions


def _memory_limit(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """--memory-limit checked with the command line, before any cluster is asked."""
    from kaisched.service import memorylimit

    if value is not None:
        try:
            memorylimit.parse_limit(value)
        except InputError as exc:
            raise click.BadParameter(str(exc).removeprefix("--memory-limit"
                                                           ).removeprefix(":").strip()) from None
    return value


@click.command()
@kubeconfig_option
@click.option("--config", "config_path", metavar="FILE",
              help="Scheduler config YAML (default: built-in, the same as config/scheduler.yaml).")
@replica_options(metrics_port=8080, lease_name=None,
                 lease_name_help="The Lease its replicas elect a leader on (default: kaisched; "
                                 "with a nodePool in the config, kaisched-<pool>: one per shard).")
@click.option("--binders", type=click.IntRange(1, 256), default=BINDERS, show_default=True,
              metavar="N",
              help="Requests in flight at once (binds first, then status and Events).")
@click.option("--api-qps", type=click.FloatRange(min=0), default=QPS, show_default=True,
              metavar="N",
              help="Writes a second, binds and status alike, on average (0: no limit).")
@click.option("--api-burst", type=click.IntRange(min=1), default=BURST, show_default=True,
              metavar="N",
              help="Writes at once above --api-qps.")
@click.option("--cycles", type=click.IntRange(min=1), metavar="N",
              help="Stop after this many cycles (default: run until SIGTERM).")
@click.option("--head-start-pods", type=click.IntRange(min=0), default=HEAD_START_PODS,
              show_default=True, metavar="N",
              help="A first leader whose first lists hold N pods or more binds its first gangs "
                   "before converting every running pod (0: never).")
@click.option("--memory-limit", metavar="SIZE", callback=_memory_limit,
              help="Check the cluster at start against this much memory (6Gi; 0: no check) "
                   "instead of the container's limit.")
def run(kubeconfig: str | None, config_path: str | None, metrics_port: int,
        lease: LeaseOptions, binders: int, api_qps: float, api_burst: int, cycles: int | None,
        head_start_pods: int, memory_limit: str | None) -> None:
    """The scheduler against a cluster: leader election, /metrics, /healthz."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The client, the memory check and the first lists go on a thread, and the
    # scheduler's own modules (a quarter of a second: the plugins, numpy)
    # load and its config is checked while the lists wait on the API server.
    # A bad config is still said first.
    from kaisched.cluster import collector
    from kaisched.cluster.background import in_background

    # The cyclic collector, left running, would walk what the imports make
    # (modules, classes: a tenth of their time) again and again as they grow.
    with collector.paused():
        asked = threading.Event()
        connecting = in_background(lambda: _connecting(kubeconfig, binders, memory_limit, asked),
                                   "connecting")
        # Not before the lists are asked for (a few hundredths of a second: the
        # client reads a plain kubeconfig itself): the imports below would take
        # turns with it at the interpreter lock and put the asking off. Nor
        # longer than a second: a server that does not answer the memory check,
        # or a kubeconfig that needs the `kubernetes` client's loader, puts off
        # no config error.
        asked.wait(ASKED_WITHIN)

        from kaisched.api.clock import WallClock
        from kaisched.builtins.catalog import register_builtins
        from kaisched.cli import inputs
        from kaisched.runtime.binder import Binder
        from kaisched.runtime.metrics import Metrics
        from kaisched.runtime.scheduler import Scheduler, serve
        from kaisched.runtime.throttle import WriteThrottle
        from kaisched.service.health import Health

        registry = register_builtins()
        config = inputs.scheduler_config(config_path, registry, None)
        client = connecting.result()    # or raises what stopped it (a kubeconfig, memory)
        # What they made lives as long as the process: out of the collector's
        # sight before it resumes, or its first pass walks all of it (50 ms,
        # before the first sync), for the few dozen cyclic leftovers it frees.
        gc.freeze()
    clock = WallClock()
    pool = config.node_pool
    elector = lease.elector(client.with_timeout(5.0), clock,
                            shard_lease(pool.value if pool is not None else None))
    binder = Binder(client, clock.now, workers=binders, qps=api_qps, burst=api_burst,
                    throttle=WriteThrottle(),
                    leading=elector.is_leading if elector is not None else None)
    scheduler = Scheduler(client, config, registry, clock, binder)
    scheduler.head_start_pods = head_start_pods
    metrics = Metrics(pool.value if pool is not None else None)
    health = Health(config.schedule_period,
                    leading=elector.is_leading if elector is not None else lambda: True,
                    synced=lambda: scheduler.synced, watching=client.watching,
                    warmed_at=lambda: scheduler.warmed_at)
    server = metrics.serve(metrics_port, health=health) if metrics_port else None
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if elector is None:
        logging.getLogger("kaisched").info("leader election is off (--no-leader-elect): "
                                           "this replica schedules alone")
    if pool is not None:
        logging.getLogger("kaisched").info(
            "one shard of the cluster: the nodes labelled %s=%s%s, and the pods and queues "
            "naming that pool%s", pool.label, pool.value,
            " or none" if pool.default else "", " or none" if pool.default else "")
    try:
        serve(scheduler, stop, elector, metrics, cycles, health=health)
    finally:
        client.close()
        if server is not None:
            server.shutdown()


def _connecting(kubeconfig: str | None, workers: int, memory_limit: str | None,
                asked: threading.Event) -> KubeCluster:
    """A client of the cluster, its memory checked and the first lists started
    (the cache takes them when it subscribes); asked is set once they are, or
    once that failed."""
    try:
        from kaisched.cluster.kinds import SCHEDULING_KINDS
        from kaisched.cluster.kube import KubeCluster

        client = KubeCluster(kubeconfig, workers=workers)
        _check_memory(client, memory_limit)
        client.prefetch(SCHEDULING_KINDS)
        return client
    finally:
        asked.set()


def _check_memory(client: KubeCluster, flag: str | None) -> None:
    """Refuse, in one line, a cluster too big for the memory given, before
    the first lists fill it (the counts come from lists of one object)."""
    from kaisched.cluster.kinds import NODE, POD
    from kaisched.service import memorylimit

    if flag is not None:
        limit: int | None = memorylimit.parse_limit(flag)
        source = f"--memory-limit {flag}"
    else:
        limit, source = memorylimit.cgroup_limit(), "the container's limit (cgroup)"
    if not limit:
        return
    nodes, pods = client.count(NODE), client.count(POD)
    if nodes is None or pods is None:
        logging.getLogger("kaisched").info(
            "the API server did not say how many nodes and pods there are: memory not checked")
        return
    found = memorylimit.shortfall(nodes, pods, limit, source)
    if found is not None:
        raise click.ClickException(found)


def shard_lease(pool: str | None) -> str:
    """The Lease of a shard's replicas: kaisched, or kaisched-<pool> (a pool's
    value made a valid object name)."""
    if pool is None:
        return "kaisched"
    name = re.sub(r"[^a-z0-9.-]+", "-", pool.lower()).strip("-.")
    return f"kaisched-{name}"[:253]
