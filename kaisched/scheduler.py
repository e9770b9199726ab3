"""The loop: snapshot -> session -> actions -> effects -> binder."""
from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from typing import TYPE_CHECKING, Iterator

import attrs

from kaisched.api.clock import Clock
from kaisched.api.types import JobKey, NodeName, PodKey
from kaisched.binder import Binder, BindReport
from kaisched.cache import Cache
from kaisched.cluster.client import ClusterClient
from kaisched.framework import Registry, SchedulerConfig, Session
from kaisched.framework.effects import Effect
from kaisched.errors import ApiError
from kaisched.framework.holds import Hold

if TYPE_CHECKING:
    from kaisched.leader import LeaderElector
    from kaisched.metrics import Metrics

log = logging.getLogger(__name__)


# Watch events in one sync after which the cache is frozen out of the collector.
FREEZE_AFTER = 5000


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """A cycle makes up to millions of small acyclic objects (freed by reference
    counting); the cyclic collector would only rescan them as they are built."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@attrs.frozen
class CycleResult:
    effects: list[Effect]
    placed: dict[PodKey, NodeName]
    reservations: dict[PodKey, NodeName]
    report: BindReport
    snapshot_seconds: float
    session_seconds: float


class Scheduler:
    def __init__(self, client: ClusterClient, config: SchedulerConfig, registry: Registry,
                 clock: Clock, binder: Binder | None = None) -> None:
        self.client = client
        self.config = config
        self.registry = registry
        self.clock = clock
        self.cache = Cache(config.scheduler_name)
        self.binder = binder or Binder(client, clock.now)
        self.actions = config.build_actions(registry)
        self.holds: dict[JobKey, Hold] = {}    # NonStrict holds carried between sessions

    def run_once(self) -> CycleResult:
        started = time.perf_counter()
        if self.cache.sync(self.client) >= FREEZE_AFTER:
            # The cache lives long and holds no cycles: move it out of the
            # collector's sight, or every full collection rescans all of it.
            gc.collect()
            gc.freeze()
        with _cyclic_gc_paused():
            cluster = self.cache.snapshot(self.clock.now())
            snapshotted = time.perf_counter()
            ssn = Session(cluster, self.config, self.config.build_plugins(self.registry),
                          self.holds)
            for action in self.actions:
                action.execute(ssn)
            effects = ssn.close()
            self.holds = ssn.holds
        decided = time.perf_counter()
        report = self.binder.apply(effects)
        return CycleResult(effects, dict(ssn.placed), dict(ssn.reservations), report,
                           snapshotted - started, decided - snapshotted)


def serve(scheduler: Scheduler, stop: threading.Event, elector: LeaderElector | None = None,
          metrics: Metrics | None = None, cycles: int | None = None) -> int:
    """The production loop: every schedulePeriod, lead (or stand by with a warm
    cache) and schedule. An API that cannot be reached skips the cycle and keeps
    the cache; nothing is lost. Returns the number of cycles run."""
    period = scheduler.config.schedule_period
    done = 0
    while not stop.is_set() and (cycles is None or done < cycles):
        started = time.monotonic()
        leading = elector.lead() if elector is not None else True
        if metrics is not None:
            metrics.leader.set(1 if leading else 0)
        try:
            if leading:
                result = scheduler.run_once()
                if metrics is not None:
                    metrics.observe(result)
            else:
                scheduler.cache.sync(scheduler.client)     # a standby keeps up, to take over fast
        except ApiError as exc:
            log.warning("cycle skipped, the API cannot be reached: %s", exc)
            if metrics is not None:
                metrics.cycle_errors.inc()
        done += 1
        stop.wait(max(0.0, period - (time.monotonic() - started)))
    if elector is not None:
        elector.release()
    return done
