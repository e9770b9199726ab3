"""The simulation loop: a virtual clock drives the memory backend, the
emulated operators and kubelet, the real PodGrouper and the real scheduler
(inline binder, so every run is the same).

Every tick, on the schedulePeriod grid: the kubelet acts (pods start, finish,
leave), operators submit arrivals and make evicted pods again, the PodGrouper
syncs, one session runs, the invariants are checked and use is sampled.

Ticks where nothing can change are skipped. A session decides from the
cluster's objects, the NonStrict holds it carries and the time, and from the
time only through timers. After a *quiet* session — it bound and evicted
nothing (PodGroup and Queue status writes, pod conditions and events change
nothing a later session decides on), holds nothing (NonStrict holds, room held for moved
pods), the PodGrouper wrote nothing, and no pod
is waiting to start or is on its way out (evictions in flight) — the next
sessions would decide exactly the same until something happens. So the clock
jumps to the next grid tick at or after the next event: an arrival, a
container exit, a PodGroup timer (stale-gang grace, scheduleTimeoutSeconds,
the starvation threshold), or, while gangs wait, the end of a preemption delay
or of a min-runtime the session met (the cycle's result says when). Room pipelined for a gang is decided again, the
same, by every session until then, so it is no reason to run one. Any other
session is followed by one a period later. The results equal those of a
session every period (tests/sim checks it). The room consolidation holds
for pods it moved is carried like NonStrict holds, and a moved job's
cooldown is a PodGroup timer. With usage memory on
(usageDBConfig), time alone moves each queue's usage and so its fair share:
while jobs wait, a session also runs at each bucket boundary of the usage
window (its 48th part), so decisions follow usage at that grain; a config
that asks Prometheus for usage keeps it built in here (virtual time has none).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import attrs

from kaisched.api.clock import ManualClock, from_rfc3339
from kaisched.api.decayedusage import UsageSource
from kaisched.api.queue import QueueStatus, UsageRecord
from kaisched.api.resource import CPU, GPU
from kaisched.api.types import PodKey, job_key, pod_key
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import (
    NAMESPACE,
    POD,
    PODGROUP,
    PRIORITY_CLASS,
    QUEUE,
    SCHEDULING_KINDS,
    kind_for,
)
from kaisched.cluster.memory import MemoryCluster
from kaisched.cluster.snapshot import build_snapshot
from kaisched.framework import SchedulerConfig
from kaisched.framework.effects import (
    Bind,
    Effect,
    Evict,
    RecordEvent,
    SetPodCondition,
    SetPodGroupStatus,
    SetQueueStatus,
    SetQueueUsage,
)
from kaisched.runtime.binder import Binder
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.scheduler import Scheduler
from kaisched.sim.claims import make_claims
from kaisched.sim.controllers import Controllers, JobRun, JobState
from kaisched.sim.draspecs import claim_templates, device_classes
from kaisched.sim.fit import never_fits
from kaisched.sim.invariants import Invariants
from kaisched.sim.kubelet import Kubelet
from kaisched.sim.meter import Meter
from kaisched.sim.nodegroups import NodeGroups, pool_node, retry_times
from kaisched.sim.provisioner import StorageControllers, storage_class_object
from kaisched.sim.scenario import JobKind, Scenario
from kaisched.sim.start import Adopted, Start
from kaisched.sim.timeline import Eviction, Timeline
from podgrouper.controller import PodGrouper

# GPUs held for reservations that nothing used, sampled beside the cluster's use.
HELD_IDLE = "kaisched.io/held-idle-gpus"
# When a scenario sets no end: stop after this much virtual time.
DEFAULT_HORIZON = 7 * 24 * 3600.0
OWNER_RESYNC = 60.0

# Effects that change nothing a later session decides on (see above): a Queue's
# status is only compared with the next one, to write it when it changes.
_QUIET = (RecordEvent, SetPodCondition, SetPodGroupStatus, SetQueueStatus, SetQueueUsage)
# The condition that says whether a gang was placed, in each API that has one.
_SCHEDULED = ("Scheduled", "PodGroupScheduled", "PodGroupInitiallyScheduled")

Progress = Callable[[float, int, int], None]      # elapsed, jobs finished, jobs to finish


@attrs.frozen
class SimResult:
    scenario: Scenario
    config: SchedulerConfig
    runs: tuple[JobRun, ...]
    timeline: Timeline
    end: float                     # virtual seconds simulated
    sessions: int
    checks: int
    capacity: Mapping[str, float]
    stopped: str                   # why the run ended
    volume_waits: Mapping[str, float] = attrs.field(factory=dict)   # claim -> seconds to bind
    autoscaler: Mapping[str, Any] | None = None     # the simulated autoscaler's figures


class QueueShares:
    """The fair shares the scheduler reported, read from the Queue statuses
    its sessions write (SetQueueStatus, sent only when a status changes), so
    the report shows the scheduler's own numbers."""

    def __init__(self) -> None:
        self.statuses: dict[str, QueueStatus] = {}
        self.usages: dict[str, UsageRecord] = {}       # status.usage, with usage memory on

    def update(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, SetQueueStatus):
                self.statuses[effect.queue] = effect.status
            elif isinstance(effect, SetQueueUsage):
                self.usages[effect.queue] = effect.usage

    def usage(self, resource: str) -> dict[str, float] | None:
        """Each queue's normalised usage of the resource, as its status last said."""
        if not self.usages:
            return None
        return {queue: dict(record.normalized).get(resource, 0.0)
                for queue, record in self.usages.items()}

    def fair(self, resource: str) -> dict[str, float] | None:
        if not self.statuses:
            return None
        return {queue: dict(status.fair_share).get(resource, 0.0)
                for queue, status in self.statuses.items()}


class Simulation:
    def __init__(self, scenario: Scenario, config: SchedulerConfig, *,
                 every_period: bool = False, progress: Progress | None = None,
                 start: Start | None = None, adopted: Sequence[Adopted] = ()) -> None:
        self.scenario = scenario
        if config.usage_db is not None and config.usage_db.client_type is not UsageSource.BUILTIN:
            # Virtual time has no Prometheus: the scheduler keeps the usage itself.
            config = attrs.evolve(config, usage_db=attrs.evolve(
                config.usage_db, client_type=UsageSource.BUILTIN, connection_string=None))
        self.config = config
        self.every_period = every_period
        self.progress = progress
        self.clock = ManualClock(start.now) if start is not None else ManualClock()
        self.start = self.clock.now()
        self.cluster = MemoryCluster(self.clock)
        self.adopted = list(adopted)
        if start is not None:
            self._load_start(start)
        self._load()
        registry = register_builtins()
        self.shares = QueueShares()
        self.meter = Meter(self.cluster)
        self.nodegroups = NodeGroups(self.cluster, self.meter, scenario.node_groups,
                                     scenario.scale_down_after)
        self.nodegroups.start()
        self.meter.update()
        self.kubelet = Kubelet(self.cluster)
        self.storage = StorageControllers(self.cluster)
        self.controllers = Controllers(self.cluster, config.scheduler_name,
                                       dict(scenario.priority_classes))
        # Operators here never scale a job, so owners are re-read as a live
        # PodGrouper would, once a minute, not on every sync.
        self.grouper = PodGrouper(self.cluster, self.clock, scheduler_name=config.scheduler_name,
                                  owner_resync=OWNER_RESYNC)
        self.scheduler = Scheduler(self.cluster, config, registry, self.clock,
                                   Binder(self.cluster, self.clock.now))
        self.invariants = Invariants(
            self.meter,
            {q.name: {r: lim for r, _ in q.resources if (lim := q.limit(r)) is not None}
             for q in scenario.queues},
            {q.name: q.parent for q in scenario.queues})
        self.resource = GPU if any(GPU in dict(p.capacity) for p in scenario.reachable_pools) \
            else CPU
        self.timeline = Timeline(self.resource, tuple(q.name for q in scenario.queues))
        self.runs = [JobRun(job) for job in scenario.jobs]
        for run in self.runs:
            run.never_fits = never_fits(run.spec, scenario)
        # The snapshot's jobs: arrived at the start, running or waiting there.
        self.adopted_runs = [JobRun(a.spec) for a in self.adopted]
        self.runs = self.adopted_runs + self.runs
        self._by_group: dict[str, str] = {}     # PodGroup key -> job, to name preemptors
        self._runs_by_group: dict[str, JobRun] = {}
        self._pg_watch = self.cluster.subscribe((PODGROUP,))
        self._pg_timers: dict[tuple[str, str], tuple[float, ...]] = {}
        parents = {q.name: q.parent for q in scenario.queues}
        self._ancestry: list[tuple[str, str]] = []   # (queue, each queue above it)
        for q in scenario.queues:
            seen, up = {q.name}, q.parent
            while up and up not in seen:
                self._ancestry.append((q.name, up))
                seen.add(up)
                up = parents.get(up)

    def run(self) -> SimResult:
        period = self.config.schedule_period
        horizon = self.scenario.until if self.scenario.until is not None else DEFAULT_HORIZON
        arrivals = self.runs[len(self.adopted_runs):]     # sorted by arrival, then name
        to_finish = sum(1 for r in self.runs if r.never_fits is None)
        finished = tick = sessions = 0
        stopped = ""
        self.clock.set(self.start)
        for run, adopted in zip(self.adopted_runs, self.adopted, strict=True):
            self.controllers.adopt(run, adopted.plan, adopted.pods, adopted.pod_group)
            self._by_group[job_key(run.spec.namespace, run.pod_group)] = \
                f"{run.spec.namespace}/{run.spec.name}"
            self._runs_by_group[job_key(run.spec.namespace, run.pod_group)] = run
            if adopted.running:
                run.started, run.first_bound = 0.0, sum(
                    1 for p in adopted.pods if (p.get("spec") or {}).get("nodeName"))
                run.min_member = adopted.spec.gang_min()
                run.history.append((0.0, "running"))
        self.kubelet.adopt(self.start)
        while True:
            now = self.start + tick * period
            elapsed = now - self.start
            self.clock.set(now)
            self.kubelet.tick(now)
            if self.nodegroups:
                self.meter.update()
                self.nodegroups.step(now)
            while arrivals and arrivals[0].spec.arrival <= elapsed:
                run = arrivals.pop(0)
                self.controllers.submit(run, elapsed)
                self._by_group[job_key(run.spec.namespace, run.pod_group)] = \
                    f"{run.spec.namespace}/{run.spec.name}"
                self._runs_by_group[job_key(run.spec.namespace, run.pod_group)] = run

            finished += sum(1 for r in self.controllers.tick(elapsed) if r.never_fits is None)
            self.storage.step(now)
            wrote = self.grouper.sync()
            make_claims(self.cluster)       # the resource-claim controller: claims from templates
            result = self.scheduler.run_once()
            sessions += 1
            bound, evicted = self._record(result, elapsed)
            self.shares.update(result.effects)
            self.invariants.check(elapsed, sessions, bound, evicted)
            used = dict(self.meter.total_used)
            if result.held_idle.get(GPU):
                used[HELD_IDLE] = result.held_idle[GPU]
            self._reservations(result)
            self.timeline.sample(elapsed, used, self._queue_use(),
                                 self.shares.fair(self.resource), self.shares.usage(self.resource),
                                 {r: self.meter.capacity(r) for r in (GPU, CPU)}
                                 if self.nodegroups else None)
            if self.nodegroups:
                self.nodegroups.sample(now)
            if self.progress is not None:
                self.progress(elapsed, finished, to_finish)
            if finished >= to_finish and not arrivals:
                stopped = "every job finished"
                break
            if elapsed >= horizon:
                stopped = f"the end of the scenario ({horizon:g}s) was reached"
                break
            step = self._next_step(now, period, result, wrote, arrivals, self.start + horizon)
            if step is None:
                stopped = "nothing left could change: the jobs still waiting can never start"
                break
            tick += step
        self._explain_waiting()
        return SimResult(self.scenario, self.config, tuple(self.runs), self.timeline, elapsed,
                         sessions, self.invariants.checks,
                         {r: self.meter.capacity(r) for r in (GPU, CPU)}, stopped,
                         dict(self.storage.waited),
                         self.nodegroups.figures(self.start, elapsed) if self.nodegroups else None)

    def snapshot(self) -> dict:
        """The virtual cluster as `kaisched snapshot-dump` would write it, now."""
        items = [obj for kind in SCHEDULING_KINDS for obj in self.cluster.list(kind)]
        return build_snapshot(items, self.config.to_dict(), taken=self.clock.now())

    # -- the world ---------------------------------------------------------------------------
    def _load_start(self, start: Start) -> None:
        """The snapshot's cluster as it was: nodes, namespaces, PodGroups, pods."""
        order = {"Namespace": 0, "Node": 1, "PodGroup": 2, "Pod": 3}
        for obj in sorted(start.objects, key=lambda o: order.get(str(o.get("kind")), 2)):
            self.cluster.create(obj)
        for adopted in self.adopted:
            for pod in adopted.pods:
                self.cluster.create(pod)

    def _load(self) -> None:
        create = self.cluster.create
        have = {o["metadata"]["name"] for o in self.cluster.list(NAMESPACE)}
        for name in sorted(({"default"} | {j.namespace for j in self.scenario.jobs}) - have):
            create({"apiVersion": "v1", "kind": NAMESPACE.kind, "metadata": {"name": name}})
        for storage_class in self.scenario.storage_classes:
            create(storage_class_object(storage_class))
        for obj in device_classes(self.scenario.node_pools, self.scenario.jobs):
            create(obj)
        for job in self.scenario.jobs:
            for obj in claim_templates(job):
                create(obj)
        for name, value in self.scenario.priority_classes:
            create({"apiVersion": PRIORITY_CLASS.api_version, "kind": PRIORITY_CLASS.kind,
                    "metadata": {"name": name}, "value": value})
        for q in self.scenario.queues:
            spec: dict = {"priority": q.priority,
                          "resources": {r: dict(f) for r, f in q.resources}}
            if q.parent:
                spec["parentQueue"] = q.parent
            create({"apiVersion": QUEUE.api_version, "kind": QUEUE.kind,
                    "metadata": {"name": q.name}, "spec": spec})
        for pool in self.scenario.node_pools:
            for i in range(pool.count):
                for obj in pool_node(pool, node_name(pool.name, i)):
                    create(obj)

    # -- what a session did ------------------------------------------------------------------
    def _record(self, result: CycleResult, elapsed: float) -> tuple[list[PodKey], list[PodKey]]:
        by_pod = self.controllers.by_pod
        bound: list[PodKey] = []
        evicted: list[PodKey] = []
        first: dict[JobRun, int] = {}      # pods bound by this session, per job
        lost: dict[JobRun, list[PodKey]] = {}   # pods evicted by this session, per job
        for effect in result.report.applied:
            if isinstance(effect, Bind):
                bound.append(effect.pod)
                found = by_pod.get(effect.pod)
                if found is not None:
                    first[found[0]] = first.get(found[0], 0) + 1
            elif isinstance(effect, Evict):
                evicted.append(effect.pod)
                run = self._evicted(effect, elapsed)
                if run is not None:
                    lost.setdefault(run, []).append(effect.pod)
        # What the evicted pods had run, read before the meter forgets them.
        thrown = {run: self._gpu_seconds(pods, elapsed) for run, pods in lost.items()}
        self.meter.update()
        for run, count in first.items():
            gang = self.meter.gangs.get(job_key(run.spec.namespace, run.pod_group))
            minimum = gang.min_member if gang is not None else 1
            if run.started is None:
                run.started, run.first_bound, run.min_member = elapsed, count, minimum
            elif count < minimum:
                continue        # pods of a running job made again: not a (re)start
            if not run.history or run.history[-1][1] != "running":
                run.history.append((elapsed, "running"))
            self.timeline.starts.append((elapsed, run.spec.queue, run.spec.name))
        for run in lost:
            run.evictions += 1
            minimum = run.min_member or 1
            if self._size(run)[0] < minimum:
                # Below its minimum: the job stops, and what its pods ran is lost.
                run.history.append((elapsed, "evicted"))
                run.gpu_hours_lost += thrown[run] / 3600.0
        for run in {*first, *lost}:
            pods, gpus = self._size(run)
            if not run.sizes or run.sizes[-1][1:] != (pods, gpus):
                run.sizes.append((elapsed, pods, gpus))
        return bound, evicted

    def _reservations(self, result: CycleResult) -> None:
        """Each job's first reservation start, in virtual seconds."""
        for key, reservation in result.reserved.items():
            run = self._runs_by_group.get(key)
            start = reservation.start
            if run is not None and start is not None and run.reserved_start is None:
                run.reserved_start = start - self.start

    def _queue_use(self) -> dict[str, dict[str, float]]:
        """Use per queue, a parent's the sum of its children's (as its status says)."""
        use = {q: dict(v) for q, v in self.meter.queue_used.items()}
        for queue, parent in self._ancestry:
            row = self.meter.queue_used.get(queue)
            if row:
                target = use.setdefault(parent, {})
                for name, amount in row.items():
                    target[name] = target.get(name, 0.0) + amount
        return use

    def _size(self, run: JobRun) -> tuple[int, float]:
        """Pods of the job bound and staying, and their GPUs."""
        pods, gpus = 0, 0.0
        for name in run.current.values():
            use = self.meter.pods.get(pod_key(run.spec.namespace, name)) if name else None
            if use is not None and use.counted:
                pods += 1
                gpus += dict(use.request).get(GPU, 0.0)
        return pods, gpus

    def _gpu_seconds(self, pods: list[PodKey], now: float) -> float:
        """GPU-seconds the pods ran since they started."""
        total = 0.0
        for key in pods:
            pod = self.cluster.get(POD, *key.split("/", 1))
            use = self.meter.pods.get(key)
            started = from_rfc3339(((pod or {}).get("status") or {}).get("startTime"))
            if use is not None and started is not None:
                total += dict(use.request).get(GPU, 0.0) * max(0.0, self.start + now - started)
        return total

    def _evicted(self, effect: Evict, elapsed: float) -> JobRun | None:
        found = self.controllers.by_pod.get(effect.pod)
        run = found[0] if found is not None else None
        if run is not None:
            run.pods_evicted += 1
        by = effect.by
        by_job = self._by_group.get(by.job, by.job) if by is not None else ""
        by_queue = by.queue if by is not None else ""
        cause = effect.cause.value
        self.timeline.evictions.append(Eviction(
            elapsed, effect.pod, f"{run.spec.namespace}/{run.spec.name}" if run else "",
            run.spec.queue if run else "", cause, by_job, by_queue))
        return run

    # -- when to run the next session ----------------------------------------------------------
    def _next_step(self, now: float, period: float, result: CycleResult, wrote: int,
                   arrivals: list[JobRun], end: float) -> int | None:
        """Ticks to the next session (never past the end of the scenario); None
        when nothing can ever change again."""
        busy = (wrote or self.scheduler.holds or self.scheduler.moves or self.kubelet.busy()
                or any(not isinstance(e, _QUIET) for e in result.effects))
        if busy or self.every_period:
            return 1
        events = [self.kubelet.next_event(), self.storage.next_event(now),
                  *retry_times(self.cluster, self.config.autoscaling)]
        if self.nodegroups:
            events.append(self.nodegroups.next_event(now))
        if self.scheduler.usage is not None and result.blockers:
            # Usage moves as time passes, fair shares with it: for the jobs that
            # wait, a session is due when it has moved a bucket on.
            events.append(self.scheduler.usage.next_change(now))
        if arrivals:
            events.append(self.start + arrivals[0].spec.arrival)
        events.extend(self._timers(now))
        if result.blockers:
            # A gang held back by its preemption delay may evict once it runs
            # out; a job protected by its min-runtime may be a victim once it does.
            events.extend(result.delayed.values())
            events.extend(result.protected.values())
        future = [e for e in events if e is not None]
        if not future:
            return None
        return max(1, math.ceil((min(min(future), end) - now) / period - 1e-9))

    def _timers(self, now: float) -> list[float]:
        """When a PodGroup's timer runs out: the moments time alone changes a decision.
        Kept per PodGroup from a watch, so a big cluster's thousands of gangs
        are read again only when they change."""
        for event in self._pg_watch.drain():
            meta = event.obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if event.type == "DELETED":
                self._pg_timers.pop(key, None)
            else:
                self._pg_timers[key] = self._timers_of(event.obj)
        return [t for times in self._pg_timers.values() for t in times if t > now]

    def _timers_of(self, pg: dict) -> tuple[float, ...]:
        grace_default = self.config.stale_gang_grace_period
        starvation = getattr(self.config, "starvation_threshold", None)
        spec, status = pg.get("spec") or {}, pg.get("status") or {}
        out = []
        stale = from_rfc3339(status.get("staleSince"))
        if stale is not None:
            grace = spec.get("staleGangGracePeriodSeconds", grace_default)
            out.append(stale + float(grace))
        waiting = from_rfc3339(status.get("unschedulableSince"))
        if waiting is not None and spec.get("scheduleTimeoutSeconds"):
            out.append(waiting + float(spec["scheduleTimeoutSeconds"]))
        threshold = spec.get("starvationThresholdSeconds", starvation)
        if isinstance(threshold, (int, float)) and threshold > 0 and waiting is not None:
            out.append(waiting + threshold)
        moved = from_rfc3339(status.get("lastMovedTime"))
        if moved is not None and "consolidation" in self.config.actions:
            out.append(moved + self.config.consolidation.cooldown)     # it may move again
        return tuple(out)

    def _explain_waiting(self) -> None:
        """Why each job that never started is still waiting, in the scheduler's words."""
        for run in self.runs:
            if run.state is not JobState.SUBMITTED or run.started is not None or run.failure:
                continue
            kind = kind_for(run.spec.gang_api, "PodGroup") if run.spec.kind is JobKind.GANG \
                else PODGROUP
            pg = self.cluster.get(kind, run.spec.namespace, run.pod_group)
            conditions = ((pg or {}).get("status") or {}).get("conditions") or []
            # kaisched's condition, or an upstream PodGroup's (KAI's and 1.35's gangs have none).
            scheduled = next((c for c in conditions if c.get("type") in _SCHEDULED), None)
            if scheduled and scheduled.get("status") == "False":
                run.failure = str(scheduled.get("message") or scheduled.get("reason"))



def node_name(pool: str, index: int) -> str:
    """The name of a scenario pool's node (what a --from-snapshot pool must not collide with)."""
    return f"{pool}-{index}"
