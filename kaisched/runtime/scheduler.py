"""The loop: snapshot -> session -> actions -> effects -> binder.

Decisions stay pure: the session only appends effects to a list. On the I/O
side that list is an Outbox, which hands each effect to a live binder as it
is appended, so a gang's binds go out as soon as its statement commits, not
when the session ends. Between actions the cycle checks that it may go on
(this replica still leads, no stop was asked for); one that may not is
abandoned, and its status writes are never sent.
"""
from __future__ import annotations

import gc
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable

from kaisched.api.clock import Clock
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.types import JobKey, PodKey
from kaisched.cache import Cache
from kaisched.cluster import collector
from kaisched.cluster.client import ClusterClient, WatchEvent
from kaisched.cluster.kinds import POD
from kaisched.errors import ApiError, UnreachableError
from kaisched.framework import Registry, SchedulerConfig, Session
from kaisched.framework.bookings import apply_bookings
from kaisched.framework.effects import (
    Bind,
    CarriedGang,
    CarriedMove,
    Effect,
    Evict,
    RecordEvent,
    SetPodCondition,
    SetPodGroupStatus,
)
from kaisched.framework.holds import apply_holds, release_deadlocks
from kaisched.framework.moves import apply_moves
from kaisched.framework.reservation import Reservation
from kaisched.runtime import headstart
from kaisched.runtime.binder import Binder, BindReport
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.defaults import HEAD_START_PODS
from kaisched.runtime.errorlog import ErrorLog
from kaisched.runtime.headstart import HeadStart
from kaisched.runtime.usagebooks import UsageBook, usage_book
from kaisched.service import loop

if TYPE_CHECKING:
    from kaisched.runtime.metrics import Metrics
    from kaisched.service.health import Health
    from kaisched.service.leader import LeaderElector

log = logging.getLogger(__name__)


# Watch events in one sync after which the cache is frozen out of the collector.
FREEZE_AFTER = 5000
# Watch events in one sync after which the young objects they made are collected at once.
COLLECT_AFTER = 1000
# How long a cycle waits for the watch to show the pods the last one bound.
ECHO_WAIT = 2.0
# A pod assumed bound this long with no echo, and no bind of it under way, is
# read again: no optimisation may wait on a bind forever.
ECHO_TTL = 30.0


class Outbox(list[Effect]):
    """A session's effect list that hands each effect to the binder as it is
    appended: the session stays a pure producer of values."""

    def __init__(self, send: Callable[[Effect], None]) -> None:
        super().__init__()
        self.send = send

    def append(self, effect: Effect) -> None:
        super().append(effect)
        self.send(effect)


def _always() -> bool:
    return True


class Scheduler:
    def __init__(self, client: ClusterClient, config: SchedulerConfig, registry: Registry,
                 clock: Clock, binder: Binder | None = None) -> None:
        self.client = client
        self.config = config
        self.registry = registry
        self.clock = clock
        self.cache = Cache(config.scheduler_name, config.node_pool)
        self.binder = binder or Binder(client, clock.now)
        self.actions = registry.build_actions(config)
        self.holds: dict[JobKey, CarriedGang] = {}    # NonStrict holds carried between sessions
        # The starvation guard's reservations, as the last session ended: told
        # to the next, which says what moved a start later.
        self.reserved: dict[JobKey, Reservation] = {}
        self.moves: dict[JobKey, CarriedMove] = {}     # room consolidation made, carried likewise
        # Tools that explain a cycle (kaisched explain) keep its session to read
        # what it saw; the production loop lets each one go with its cycle.
        self.keep_session = False
        self.last_session: Session | None = None
        self.error_log = ErrorLog()         # tracebacks of jobs whose decision raised
        self.synced = False                     # the first sync listed everything
        self._settle = False    # a big list was frozen: what the next cycle lays out is too
        # First lists of at least this many pods get a head start (runtime.headstart).
        self.head_start_pods = HEAD_START_PODS
        self.head_started: HeadStart | None = None      # the head start, if one was taken
        self.warmed_at: float | None = None     # when a standby last prepared (follow)
        # Fair share with memory: each queue's usage, kept by this scheduler or
        # asked of Prometheus (None: not configured).
        self.usage: UsageBook | None = usage_book(
            config.usage_db, config.node_pool.value if config.node_pool is not None else None)

    def prepare(self) -> None:
        """Before it is known whether this replica leads: list everything, and
        convert it unless a leader would take a head start over it first (a
        standby converts it as it follows)."""
        with collector.paused():        # the first lists make many objects, none cyclic
            if not self._head_start_due():
                self.sync()

    def head_start(self) -> HeadStart | None:
        """Before the first sync of a big cluster: the first action's binds
        over its first lists with running gangs counted (runtime.headstart)."""
        started = time.perf_counter()
        with collector.paused():
            due = self._head_start_due()
        if due:
            self.head_started = headstart.take(self.cache, self.clock.now(), self.actions[0],
                                               self._session, self.binder.submit, started)
        return self.head_started

    def _head_start_due(self) -> bool:
        # Not for one node pool of several (the counting takes no pod's pool) nor
        # with fair share with memory (its book reads every job's tasks).
        return (not self.synced and self.head_start_pods > 0 and self.usage is None
                and self.config.node_pool is None and bool(self.actions)
                and headstart.due(self.cache, self.client, self.head_start_pods))

    def _session(self, cluster: ClusterInfo, effects: list[Effect] | None) -> Session:
        """A cycle's session over the snapshot, opened with what the last one
        carried (NonStrict holds, moves, bookings, reservations), its effects
        handed to effects."""
        ssn = Session(cluster, self.config, self.registry.build_plugins(self.config), effects)
        ssn.action = "session open"       # what a job's error while its room is put back says
        apply_holds(ssn, self.holds)       # last session's NonStrict holds, before any action
        apply_moves(ssn, self.moves)       # and the room consolidation made
        apply_bookings(ssn)                # and capacity provisioned for gangs
        ssn.starving.before = self.reserved
        return ssn

    def sync(self) -> int:
        """Apply what the watches saw; the first call lists everything."""
        with collector.paused():
            count = self.cache.sync(self.client)
            # Dealt with here, with the collector still paused: else its first
            # automatic pass, as it resumes, walks all that the events made.
            if count >= FREEZE_AFTER and count * 4 >= len(self.cache.pods):
                # The cache lives long and holds no cycles: move what a big list
                # (or relist) brought out of the collector's sight, or every full
                # collection rescans all of it. Not collected first: a list makes
                # a few dozen cyclic objects whatever its size (77 for 150,000
                # pods as for 300,000), while a collection would walk every
                # object it made (4-5 s at 1,500,000 pods).
                gc.freeze()
                self._settle = True
            elif count >= COLLECT_AFTER:
                # Steady churn is left to the collector, but what many events
                # made is promoted now, between cycles, rather than walked by the
                # first collection after the next session, on its critical path.
                gc.collect(1)
        self.synced = True
        return count

    def follow(self) -> int:
        """A standby's period: apply what the watches saw, as the leader does;
        take a snapshot, so that the node table, the queue tree and the rest
        are built before a takeover needs them; and let the plugins say what
        a session would write of the jobs that changed, with no action run.
        A job of which nothing would be said is settled as the leader left it
        (its PodGroup status says what a session would write): the first
        session after a takeover need not look at it again, unless it changes.
        What would be said is never written: only the leader writes."""
        count = self.sync()
        with collector.paused():
            now = self.clock.now()
            cluster = self.cache.snapshot(now)
            if self.usage is not None:
                # The book follows the leader's records as they land, and the
                # plugins say what the leader's session would (fair shares with memory).
                cluster.usage = self.usage.observe(cluster, now)
            said = Session(cluster, self.config, self.registry.build_plugins(self.config)).close()
        self.cache.reported(self._spoken_of(said))
        del cluster, said
        self._settle_layout()
        self.warmed_at = time.monotonic()
        return count

    def close(self) -> None:
        """Stop following the cluster (the binder is stopped apart)."""
        self.cache.close()

    def run_once(self, proceed: Callable[[], bool] = _always) -> CycleResult:
        """One cycle. proceed() is asked between actions: False abandons the
        rest (effects already handed over are the binder's to finish or drop)."""
        result = self._cycle(proceed)
        self._settle_layout()
        return result

    def _settle_layout(self) -> None:
        """After the first cycle (or a standby's first period) over a big list:
        what it laid out lives as long as the cache (the node table's rows, the
        jobs' numbers, the tasks), made after the list was frozen. Left in the
        collector's sight, every full collection would walk it and all it points
        to (0.6 s a pass at 50,000 nodes, again and again). Collected once, the
        session gone (so no cyclic garbage is frozen), then frozen too."""
        if self._settle:
            self._settle = False
            gc.collect()
            gc.freeze()

    def _cycle(self, proceed: Callable[[], bool]) -> CycleResult:
        started, started_cpu = time.perf_counter(), time.process_time()
        self._catch_up(proceed)
        for warning in self.cache.take_warnings():
            self.binder.submit(warning)
        with collector.paused():
            now = self.clock.now()
            cluster = self.cache.snapshot(now)
            if self.usage is not None:
                cluster.usage = self.usage.observe(cluster, now)
            snapshotted, snapshotted_cpu = time.perf_counter(), time.process_time()
            outbox = Outbox(self.binder.submit) if self.binder.live else None
            ssn = self._session(cluster, outbox)
            abandoned = False
            for action in self.actions:
                if not proceed():
                    abandoned = True
                    break
                ssn.run(action.name, action.execute)
            if self.keep_session:
                self.last_session = ssn
            if abandoned or not proceed():
                effects, abandoned = list(ssn.effects), True
            else:
                release_deadlocks(ssn)
                effects = ssn.close()
                self.holds = ssn.holds.to_carry()
                self.moves = ssn.moves.to_carry()
                self.reserved = dict(ssn.starving.reservations)
                if self.usage is not None:
                    for write in self.usage.writes(now):
                        effects.append(write)       # an Outbox hands each to the binder
            decided, decided_cpu = time.perf_counter(), time.process_time()
            self.error_log.report(ssn.failures.errors, now)
            if not abandoned:
                # The statuses written to kaisched's own PodGroup kinds (an upstream
                # one's is a condition merged into what is there): their echoes are known.
                self.cache.reported(self._spoken_of(effects), {
                    e.job: e.status for e in effects
                    if isinstance(e, SetPodGroupStatus) and not e.api_version})
                self.cache.assume((e for e in effects if isinstance(e, Bind)), now)
            # Still paused while the binds go out: the session's objects live
            # until then, young, and each full collection would walk them all
            # again, holding the interpreter lock from the binder threads (a
            # quarter of a second over 5,000 binds). Binds, their answers and
            # their echoes make no cycles.
            if self.binder.live:
                self.binder.wait(cancel=lambda: not proceed())
                report = self.binder.take_report()
            else:
                report = self.binder.apply(effects) if not abandoned else BindReport()
        blockers = {k: b for k, b in ssn.blockers.items() if k in ssn.unschedulable}
        self.warmed_at = time.monotonic()       # what a snapshot needs was just built
        return CycleResult(list(effects), dict(ssn.placed), dict(ssn.reservations), report,
                           snapshotted - started, decided - snapshotted, abandoned, cluster,
                           blockers, dict(ssn.preemption_delay.delayed),
                           dict(ssn.protections.protected),
                           snapshotted_cpu - started_cpu, decided_cpu - snapshotted_cpu,
                           tuple(ssn.failures.errors), dict(ssn.starving.reservations),
                           _held_idle(ssn))

    def _spoken_of(self, effects: list[Effect]) -> set[JobKey]:
        """The jobs the effects bind, evict or write something of."""
        jobs: set[JobKey] = set()
        for effect in effects:
            if isinstance(effect, (Bind, Evict, SetPodGroupStatus)):
                jobs.add(effect.job)
            elif isinstance(effect, RecordEvent) and effect.kind == "PodGroup":
                jobs.add(JobKey(effect.key))
            elif isinstance(effect, (SetPodCondition, RecordEvent)):
                job = self.cache.job_of(PodKey(effect.pod if isinstance(effect, SetPodCondition)
                                               else effect.key))
                if job is not None:
                    jobs.add(job)
        return jobs

    def step_down(self) -> None:
        """This replica stopped leading: drop what it meant to do."""
        self.binder.abandon("this replica no longer holds the lease")
        self.holds = {}         # the next leader decides its own holds
        self.moves = {}
        self.reserved = {}
        self.cache.forget_binds()       # those dropped are not coming; the rest will echo

    def _catch_up(self, proceed: Callable[[], bool]) -> None:
        """The cache as fresh as it can be: the pods whose binds were dropped
        unsent are as last heard, those whose binds failed are read again (a 409
        means someone bound it), and the pods the last cycle bound are waited
        for, briefly, so they are not placed a second time."""
        self.sync()
        unsent = self.binder.take_unsent()
        if unsent:
            self.cache.forget_binds(unsent)     # never sent: pending, as the cache heard them
        self._read_again(self.binder.take_resync())
        bound = self.binder.take_bound()
        deadline = time.monotonic() + ECHO_WAIT
        while bound and proceed():
            bound = {k: n for k, n in bound.items()
                     if k in self.cache.pods and self.cache.pods[k].node_name != n}
            if not bound or time.monotonic() > deadline:
                break
            time.sleep(0.01)
            self.sync()
        self._await_claims(proceed)
        if self.binder.idle:
            stale = self.cache.unconfirmed(self.clock.now() - ECHO_TTL)
            if stale:
                log.warning("no echo of %d binds after %.0fs and none under way (%s%s): "
                            "their pods are read again", len(stale), ECHO_TTL,
                            ", ".join(stale[:3]), ", ..." if len(stale) > 3 else "")
                self._read_again(stale)

    def _read_again(self, keys: Iterable[PodKey]) -> None:
        """Pods whose bind did not land, or may not have: not bound by us, so
        as last heard until read; then as the API server has them."""
        for key in keys:
            self.cache.forget_binds([key])
            ns, name = key.split("/", 1)
            try:
                pod = self.client.get(POD, ns, name)
            except ApiError as exc:
                log.debug("resync of %s failed: %s", key, exc)
                continue
            gone = {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": ns, "name": name}}
            self.cache.apply(WatchEvent("MODIFIED", POD, pod) if pod is not None
                             else WatchEvent("DELETED", POD, gone))

    def _await_claims(self, proceed: Callable[[], bool]) -> None:
        """The ResourceClaims the last cycle wrote are waited for, briefly, as
        bound pods are: their devices must not look free to this one."""
        written = self.binder.take_claims()
        deadline = time.monotonic() + ECHO_WAIT
        while written and proceed():
            written = {k: e for k, e in written.items()
                       if not self.cache.devices.shows(k, e.allocation, e.reserved_for)}
            if not written or time.monotonic() > deadline:
                break
            time.sleep(0.01)
            self.sync()


def serve(scheduler: Scheduler, stop: threading.Event, elector: LeaderElector | None = None,
          metrics: Metrics | None = None, cycles: int | None = None,
          stop_timeout: float = 5.0, health: Health | None = None) -> int:
    """The production loop (service.loop): lead (or stand by with a warm cache)
    and schedule every schedulePeriod. A cycle runs only while this replica
    leads and every watch is connected (an API outage pauses scheduling;
    nothing is lost). On stop, gangs whose binds began are finished, the rest
    is left, and the Lease is released. Returns the number of periods run."""
    binder = scheduler.binder
    if metrics is not None:
        binder.observer = metrics
    if binder.leading is None and elector is not None:
        binder.leading = elector.is_leading
    if binder.halted is None:
        binder.halted = stop.is_set
    try:
        return loop.serve(Scheduling(scheduler, stop, metrics, stop_timeout), stop,
                          scheduler.config.schedule_period, SkippedCycles(),
                          elector=elector, health=health, cycles=cycles)
    finally:
        if metrics is not None:
            metrics.leader.set(0)


class Scheduling(loop.Duty):
    """The scheduler's duty in the loop: a leader's pass is a cycle, a
    standby's keeps the cache and what a snapshot needs warm (follow)."""

    def __init__(self, scheduler: Scheduler, stop: threading.Event, metrics: Metrics | None,
                 stop_timeout: float = 5.0) -> None:
        self.scheduler = scheduler
        self.stop = stop
        self.metrics = metrics
        self.stop_timeout = stop_timeout
        self._watching = True
        self._led_since: float | None = None    # leading, and no cycle has ended since

    def prepare(self) -> None:
        self.scheduler.prepare()

    def turned(self, turn: loop.Turn) -> None:
        """A lead lost drops what the old term meant to do; a lead taken starts
        the clock of what the takeover costs."""
        scheduler, metrics = self.scheduler, self.metrics
        if turn.lost:
            scheduler.step_down()
            if metrics is not None:
                metrics.forget_queues()     # only the leader's figures are the cluster's
        if turn.taken:
            self._led_since = time.monotonic()
        if metrics is not None:
            metrics.leader.set(1 if turn.leads else 0)
            if turn.taken:
                # Cycles report only the queues whose status changed: a new
                # leader starts from what the Queue objects say.
                for queue in scheduler.cache.queues.values():
                    if queue.status is not None and scheduler.cache.owns_queue(queue.name):
                        metrics.observe_queue(queue.name, queue.status, None)

    def lead(self, proceed: Callable[[], bool]) -> None:
        scheduler = self.scheduler
        if not scheduler.synced:
            with collector.paused():    # the first lists, read by a head start, then converted
                scheduler.head_start()
                scheduler.sync()
        else:
            scheduler.sync()
        if not self._watches(scheduler.client.watching()):
            return
        result = scheduler.run_once(proceed)
        if self.metrics is not None:
            self.metrics.observe(result, scheduler.clock.now())
        self._cycled(result)
        if result.abandoned and not self.stop.is_set():
            scheduler.step_down()

    def follow(self) -> None:
        self.scheduler.follow()     # a standby keeps up, to take over fast

    def passed(self, turn: loop.Turn, failure: ApiError | None) -> None:
        if failure is not None and self.metrics is not None:
            self.metrics.cycle_errors.inc()

    def keep_up(self) -> None:
        """The echoes of the binds, what finished and arrived, applied as they come."""
        self.scheduler.sync()

    def finish(self) -> None:
        self.scheduler.binder.stop(self.stop_timeout)

    def _cycled(self, result: CycleResult) -> None:
        """Say how the first cycle of a new leader went: what a takeover cost."""
        if self._led_since is None or result.abandoned:
            return
        log.info("leading: the first cycle ended %.2fs after taking the lead (snapshot %.2fs, "
                 "session %.2fs); %d pods placed%s", time.monotonic() - self._led_since,
                 result.snapshot_seconds, result.session_seconds, len(result.placed),
                 f", {len(started.binds)} by its head start"
                 if (started := self.scheduler.head_started) is not None else "")
        self._led_since = None

    def _watches(self, up: bool) -> bool:
        if up != self._watching:
            if up:
                log.info("every watch is connected again: scheduling resumes")
            else:
                log.warning("a watch is down: no cycle runs until it has relisted")
            self._watching = up
        return up


class SkippedCycles:
    """A failing cycle is skipped and said once for each reason (an unreachable
    server is said once by the client); the next one runs at the next period."""

    def __init__(self) -> None:
        self._failing = ""

    @property
    def failing(self) -> bool:
        return bool(self._failing)

    def failed(self, exc: ApiError) -> float:
        text = exc.__class__.__name__ if isinstance(exc, UnreachableError) else str(exc)
        if text != self._failing:
            log.warning("cycle skipped: %s", exc)
        self._failing = text
        return 0.0      # no backoff: the loop waits out the period

    def succeeded(self) -> None:
        if self._failing:
            log.info("cycles run again")
        self._failing = ""


def _held_idle(ssn: Session) -> dict[str, float]:
    """What of the reservations' room nothing used at the session's end, per
    resource, in the units a Resource keeps (GPUs whole, cpu in millicores)."""
    if not ssn.starving.reservations:
        return {}
    table = ssn.cluster.table
    idle = ssn.starving.idle_held(table.idle)
    return {name: float(idle[i]) / table.scale[i] for i, name in enumerate(table.dims) if idle[i]}

