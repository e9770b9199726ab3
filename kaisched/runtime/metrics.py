"""The Prometheus metrics of `kaisched run`, served with its probes."""
from __future__ import annotations

import contextlib
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client import Counter as _Counter
from prometheus_client import Gauge as _Gauge
from prometheus_client import Histogram as _Histogram

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.job import JobInfo
from kaisched.api.provisioning import CapacityState
from kaisched.api.queue import QueueStatus
from kaisched.api.resource import CPU, PODS
from kaisched.api.types import GangRules, JobKey, PodKey, TaskStatus
from kaisched.framework.effects import AskCapacity, Bind, Evict, SetPodGroupStatus, SetQueueStatus
from kaisched.service.health import Health
from kaisched.service.health import serve as serve_endpoints

if TYPE_CHECKING:
    from kaisched.runtime.cycle import CycleResult

_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30)
# A gang may wait seconds or days for room.
_JOB_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600)


class _Series:
    """A metric family whose every series carries the shard's pool first (or,
    with no pool, the family itself): used as the family is, labels and all."""

    def __init__(self, family: Any, pool: str | None) -> None:
        self._family = family
        self._first = (pool,) if pool is not None else ()

    def labels(self, *values: str) -> Any:
        return self._family.labels(*self._first, *values)

    def remove(self, *values: str) -> None:
        self._family.remove(*self._first, *values)

    def clear(self) -> None:
        self._family.clear()

    def _one(self) -> Any:
        return self._family.labels(*self._first) if self._first else self._family

    def inc(self, amount: float = 1.0) -> None:
        self._one().inc(amount)

    def set(self, value: float) -> None:
        self._one().set(value)

    def observe(self, value: float) -> None:
        self._one().observe(value)


class _Families:
    """Makes the families of one registry, with the label `pool` first where
    there is a pool."""

    def __init__(self, registry: CollectorRegistry, pool: str | None) -> None:
        self.registry = registry
        self.pool = pool

    def _make(self, cls: Any, name: str, text: str, labels: Sequence[str] = (),
              **options: Any) -> _Series:
        names = (("pool",) if self.pool is not None else ()) + tuple(labels)
        return _Series(cls(name, text, names, registry=self.registry, **options), self.pool)

    def counter(self, name: str, text: str, labels: Sequence[str] = ()) -> _Series:
        return self._make(_Counter, name, text, labels)

    def gauge(self, name: str, text: str, labels: Sequence[str] = ()) -> _Series:
        return self._make(_Gauge, name, text, labels)

    def histogram(self, name: str, text: str, labels: Sequence[str] = (),
                  buckets: Sequence[float] = _BUCKETS) -> _Series:
        return self._make(_Histogram, name, text, labels, buckets=buckets)


class Metrics:
    """pool: the node pool of a shard; every series then carries it as the
    label `pool`, so that the shards of one cluster add up on one dashboard."""

    def __init__(self, pool: str | None = None) -> None:
        self.registry = CollectorRegistry()
        self.pool = pool
        r = _Families(self.registry, pool)
        self.snapshot_seconds = r.histogram("kaisched_snapshot_seconds",
                                            "Time to build a cycle's snapshot.")
        self.session_seconds = r.histogram("kaisched_session_seconds",
                                           "Time to decide a cycle (actions and plugins).")
        self.binds = r.counter("kaisched_binds", "Pods bound.")
        self.bind_seconds = r.histogram("kaisched_bind_seconds",
                                        "From the session's decision to the API accepting the "
                                        "binding (queueing, the request, its retries).")
        self.bind_failures = r.counter("kaisched_bind_failures",
                                       "Binds the API refused, or that ran out of retries.")
        self.write_failures = r.counter("kaisched_write_failures",
                                        "Evictions, status, condition and Event writes that "
                                        "failed.", ["effect"])
        self.evictions = r.counter("kaisched_evictions",
                                   "Pods evicted, by the queue of their job and why: preempt "
                                   "(same queue), reclaim (for another queue), stale-gang, "
                                   "consolidation (moved to another node).",
                                   ["queue", "cause"])
        self.job_seconds = r.histogram("kaisched_job_scheduling_seconds",
                                       "From a PodGroup's creation to its minimum of pods bound "
                                       "(a gang of the upstream Workload API: from when its pods "
                                       "first made up its minimum).",
                                       ["queue"], buckets=_JOB_BUCKETS)
        self.pending_gangs = r.gauge("kaisched_pending_gangs",
                                     "Gangs left pending by the last cycle, by queue and by the "
                                     "class of what blocks them (resources, quota, gates, "
                                     "volumes, placement, invalid).", ["queue", "reason"])
        self.delayed = r.gauge("kaisched_preemption_delayed_gangs",
                               "Gangs the last cycle held back from evicting others (preempt, "
                               "reclaim) because their preemption delay runs, by queue.",
                               ["queue"])
        self.reservations = r.gauge("kaisched_reservations",
                                    "Gangs the starvation guard holds room for, after the last "
                                    "cycle, by queue (one at most: its head).", ["queue"])
        self.reservation_start = r.gauge(
            "kaisched_reservation_start_timestamp_seconds",
            "When a reservation's room is sure to be free, by the enforced limits of the pods "
            "on it (unix time), by queue; absent while it is not known.", ["queue"])
        self.reservation_likely_start = r.gauge(
            "kaisched_reservation_likely_start_timestamp_seconds",
            "When a reservation's room is likely free, by the estimated run times of the pods "
            "on it where sooner than their limits (unix time), by queue; absent while not known.",
            ["queue"])
        self.pipelined = r.gauge("kaisched_pipelined_pods",
                                 "Pods waiting for room being released, last cycle.")
        self.leader = r.gauge("kaisched_is_leader", "1 while this replica schedules.")
        self.cycle_errors = r.counter("kaisched_cycle_errors",
                                      "Cycles that could not reach the API.")
        self.job_errors = r.counter("kaisched_job_errors",
                                    "Jobs whose decision raised (a scheduler error): each lost "
                                    "its turn that cycle, with reason SchedulerError; every other "
                                    "job was scheduled. By the action deciding it (also an "
                                    "action's own step over many jobs that raised: the rest of "
                                    "that action was skipped).", ["action"])
        self.provisioning = r.counter("kaisched_provisioning_requests",
                                      "ProvisioningRequests for gangs' capacity, by class and "
                                      "outcome: asked (made), then the autoscaler's answer "
                                      "(provisioned, failed, booking_expired, capacity_revoked).",
                                      ["class", "outcome"])
        self.provisioned_seconds = r.histogram("kaisched_provisioning_seconds",
                                               "From a ProvisioningRequest's creation to its "
                                               "Provisioned answer.", ["class"],
                                               buckets=_JOB_BUCKETS)
        self._answers: dict[str, CapacityState] = {}     # each request's answer, as last seen
        # The numbers of each Queue's status, per resource (cpu in cores, memory in bytes).
        self.queue_amounts = {
            field: r.gauge(f"kaisched_queue_{field}", text, ["queue", "resource"])
            for field, text in (("allocated", "What the queue's pods hold."),
                                ("fair_share", "The queue's fair share, last cycle."),
                                ("quota", "The queue's quota."),
                                ("limit", "The queue's limit, where it has one."))}
        self._usage_seen: set[tuple[str, str]] = set()
        self._capacity_seen: set[tuple[str]] = set()
        self.queue_jobs = r.gauge("kaisched_queue_jobs", "The queue's jobs by state.",
                                  ["queue", "state"])
        # Fair share with memory reads these two back from Prometheus (clientType: prometheus).
        self.queue_usage = r.gauge("kaisched_queue_usage",
                                   "The queue's usage over the usage window: what it held over "
                                   "what the cluster offered, recent time weighted more (0 to 1; "
                                   "only with usageDBConfig).", ["queue", "resource"])
        self.capacity = r.gauge("kaisched_cluster_capacity",
                                "What the cluster's usable nodes offer, the cake fair shares are "
                                "cut from (cpu in cores, memory in bytes).", ["resource"])

    def observe(self, result: CycleResult, now: float | None = None) -> None:
        """Record one cycle: its timings, the gangs whose minimum it bound (now is
        the scheduler's clock), the gangs it left pending and the evictions it
        made. Binds are counted as they happen."""
        self.snapshot_seconds.observe(result.snapshot_seconds)
        self.session_seconds.observe(result.session_seconds)
        self.pipelined.set(len(result.reservations))
        jobs = result.cluster.jobs if result.cluster is not None else {}
        bound: dict[JobKey, set[PodKey]] = {}
        for effect in result.effects:
            if isinstance(effect, SetQueueStatus):
                self.observe_queue(effect.queue, effect.status, effect.previous)
            elif isinstance(effect, SetPodGroupStatus) and now is not None and not effect.api_version:
                job = jobs.get(effect.job)
                # The status that first counts the minimum as scheduled: the gang is bound.
                if job is not None and job.creation and \
                        job.status.scheduled < job.min_member <= effect.status.scheduled:
                    self.job_seconds.labels(job.queue).observe(max(0.0, now - job.creation))
            elif isinstance(effect, Bind):
                bound.setdefault(effect.job, set()).add(effect.pod)
        if now is not None:
            # An upstream group's status has no counts: its pods bound this cycle say it.
            for key, pods in bound.items():
                job = jobs.get(key)
                if job is not None and job.spec.rules is GangRules.WORKLOAD and job.creation \
                        and _binds_minimum(job, pods):
                    self.job_seconds.labels(job.queue).observe(max(0.0, now - job.creation))
        for error in result.errors:
            self.job_errors.labels(error.action).inc()
        for effect in result.report.applied:
            if isinstance(effect, AskCapacity):
                self.provisioning.labels(effect.class_name, "asked").inc()
            if isinstance(effect, Evict):
                job = jobs.get(effect.job)
                self.evictions.labels(job.queue if job is not None else "",
                                      effect.cause.value).inc()
        if result.abandoned or result.cluster is None:
            return
        self._observe_cluster(result.cluster)
        pending: dict[tuple[str, str], int] = {}
        for key, blocker in result.blockers.items():
            job = jobs.get(key)
            if job is not None:
                label = (job.queue, blocker.value)
                pending[label] = pending.get(label, 0) + 1
        self.pending_gangs.clear()          # a class no gang is blocked by any more is 0
        for (queue, reason), count in pending.items():
            self.pending_gangs.labels(queue, reason).set(count)
        delayed: dict[str, int] = {}
        for key in result.delayed:
            job = jobs.get(key)
            if job is not None:
                delayed[job.queue] = delayed.get(job.queue, 0) + 1
        self.delayed.clear()
        for queue, count in delayed.items():
            self.delayed.labels(queue).set(count)
        self.reservations.clear()
        self.reservation_start.clear()
        self.reservation_likely_start.clear()
        for key, reservation in result.reserved.items():
            job = jobs.get(key)
            if job is not None:
                self.reservations.labels(job.queue).inc()
                if reservation.start is not None:
                    self.reservation_start.labels(job.queue).set(reservation.start)
                if reservation.likely is not None:
                    self.reservation_likely_start.labels(job.queue).set(reservation.likely)

    def _observe_answers(self, cluster: ClusterInfo) -> None:
        """Each autoscaler answer once, as the cache first sees it."""
        answers: dict[str, CapacityState] = {}
        for request in cluster.capacity_requests.values():
            answers[request.key] = request.state
            if request.state in (CapacityState.WAITING, CapacityState.ACCEPTED) \
                    or self._answers.get(request.key) is request.state:
                continue
            self.provisioning.labels(request.class_name, _OUTCOME[request.state]).inc()
            if request.state is CapacityState.PROVISIONED:
                self.provisioned_seconds.labels(request.class_name).observe(
                    max(0.0, request.since - request.creation))
        self._answers = answers

    def _observe_cluster(self, cluster: ClusterInfo) -> None:
        """What the cluster offers, and each queue's usage, as this cycle saw them."""
        self._observe_answers(cluster)
        offered = {n: v for n, v in cluster.total_allocatable().items if n != PODS}
        for (name,) in self._capacity_seen - {(n,) for n in offered}:
            with contextlib.suppress(KeyError):
                self.capacity.remove(name)
        for name, value in offered.items():
            self.capacity.labels(name).set(value / 1000 if name == CPU else value)
        self._capacity_seen = {(n,) for n in offered}
        if cluster.usage is None:
            return
        seen: set[tuple[str, str]] = set()
        for queue, values in cluster.usage.items():
            for name, value in values.items():
                self.queue_usage.labels(queue, name).set(value)
                seen.add((queue, name))
        for gone_queue, gone_name in self._usage_seen - seen:
            with contextlib.suppress(KeyError):
                self.queue_usage.remove(gone_queue, gone_name)
        self._usage_seen = seen

    def forget_queues(self) -> None:
        """This replica stopped leading: the cluster's figures are the new leader's to give."""
        for gauge in (*self.queue_amounts.values(), self.queue_jobs, self.queue_usage,
                      self.capacity):
            gauge.clear()
        self._usage_seen, self._capacity_seen = set(), set()

    # The binder tells of each outcome as it happens (kaisched.runtime.binder.BindObserver).
    def applied(self, effect: object, seconds: float = 0.0) -> None:
        if isinstance(effect, Bind):
            self.binds.inc()
            self.bind_seconds.observe(seconds)

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
        """/metrics, /healthz and /readyz in a daemon thread (kaisched.service.health)."""
        return serve_endpoints(self.registry, health, port, host)


_OUTCOME = {CapacityState.PROVISIONED: "provisioned", CapacityState.FAILED: "failed",
            CapacityState.BOOKING_EXPIRED: "booking_expired",
            CapacityState.CAPACITY_REVOKED: "capacity_revoked"}


def _binds_minimum(job: JobInfo, bound: set[PodKey]) -> bool:
    """This cycle's binds (bound) take the job from below its minimum to it:
    the pods it held before them (as its rules count them) were fewer."""
    held = sum(1 for t in job.tasks.values() if t.key not in bound
               and t.status in job.ready_statuses and t.status is not TaskStatus.ALLOCATED)
    return held < job.min_member <= held + len(bound)
