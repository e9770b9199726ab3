"""What `kaisched bench cluster-life` measures, from what the pods show each tick.

A tick is one list of the run's pods. From them, per trace job: how many pods are bound
(a node, no deletionTimestamp: a Terminating pod counts as not bound), how many Running, and
the GPUs they hold. The meter keeps:

- each job's wait: from its creation to the first tick with minMember of its pods Running;
- stretches of a gang with 0 < bound < minMember: longer than 10 s, summed as
  `partial_gang_seconds`, or as `recovering_gang_seconds` once the gang lost a bound pod (to
  a fault or an eviction) until it is whole again or gone;
- pods Terminating longer than their grace period + 30 s (on a failed node, counted from
  when the operator tainted it out of service: before that nothing can end them);
- pods lost: pods a live job lacks for longer than 60 s (a controller that did not make
  them again);
- GPU utilisation: GPUs held by the pods of started whole-GPU jobs, over the cluster's GPUs;
- how soon a gang that lost some of its pods is whole again once they are made again;
- series for the plot: GPUs held by partly placed gangs, jobs finished.
"""
from __future__ import annotations

import datetime
import math
import statistics
from typing import Any

import attrs

from kaisched.bench.lifetrace import GPU, JOB_LABEL, Trace, TraceJob

Obj = dict[str, Any]
STRETCH_SECONDS = 10.0      # shorter partial stretches are binds in flight, not a held gang
STUCK_SECONDS = 30.0        # beyond its grace period, a Terminating pod is stuck
LOST_SECONDS = 60.0         # a controller makes a pod again well within this


def timestamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@attrs.define
class JobState:
    """One trace job as the meter follows it."""
    job: TraceJob
    created: float | None = None
    started: float | None = None
    ended: float | None = None          # the driver deleted it (finished, or cut at the horizon)
    finished: bool = False
    bound: int = 0
    lost_bound: bool = False            # lost a bound pod since it was last whole or empty
    stretch: str = ""                   # "" | partial | recovering
    stretch_since: float = 0.0
    short_since: float | None = None    # since when it lacks pods its owner should have made
    short_most: int = 0

    @property
    def live(self) -> bool:
        return self.created is not None and self.ended is None


class Meter:
    def __init__(self, trace: Trace, start: float) -> None:
        self.trace = trace
        self.start = start
        self.jobs = {j.name: JobState(j) for j in trace.jobs}
        self.seconds = {"partial": 0.0, "recovering": 0.0}
        self.stuck: set[str] = set()
        self.lost = 0
        # A failed node -> when it was tainted out-of-service (inf until then: nothing can
        # end a pod there before an operator acts, so none of its pods is stuck yet).
        self.out_of_service: dict[str, float] = {}
        self.gpu_samples: list[float] = []
        self.held_samples: list[float] = []
        self.series: list[tuple[float, float, int]] = []    # (t, GPUs of partial gangs, finished)
        # a gang whole again after it lost some of its pods: seconds from its newest pod's
        # creation (the controller made it again) to the tick that saw it whole
        self.replaced: list[float] = []

    # -- what the driver tells it ---------------------------------------------------------
    def node_failed(self, node: str) -> None:
        """The node's kubelet was stopped; it is not tainted yet."""
        self.out_of_service[node] = math.inf

    def node_tainted(self, node: str, when: float) -> None:
        """The failed node was tainted out-of-service: its pods go from now."""
        self.out_of_service[node] = when

    def created(self, name: str, now: float) -> None:
        state = self.jobs[name]
        if state.created is None:
            state.created = now

    def ended(self, name: str, now: float, finished: bool) -> None:
        state = self.jobs[name]
        self._close(state, now)
        state.ended, state.finished = now, finished

    # -- a tick ---------------------------------------------------------------------------
    def tick(self, pods: list[Obj], now: float, expected: dict[str, int]) -> None:
        """pods: the run's pods now; expected: live job -> pods its owner should have."""
        by_job: dict[str, list[Obj]] = {}
        for pod in pods:
            name = ((pod.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)
            if name in self.jobs:
                by_job.setdefault(name, []).append(pod)
            self._terminating(pod, now)
        partial_gpus, used = 0.0, 0.0
        for name, state in self.jobs.items():
            if not state.live:
                continue
            mine = by_job.get(name, [])
            bound = [p for p in mine if _bound(p)]
            running = [p for p in bound if (p.get("status") or {}).get("phase") == "Running"]
            job = state.job
            if state.started is None and len(running) >= job.min_member:
                state.started = max(now, state.created or now)
            if state.lost_bound and len(bound) >= job.min_member:
                self.replaced.append(now - max(_created(p) for p in bound))
            self._gang(state, len(bound), now)
            gpus = sum(_gpus(p) for p in bound)
            if job.gang and 0 < len(bound) < job.min_member:
                partial_gpus += gpus
            if job.whole_gpu and state.started is not None:
                used += gpus
            self._short(state, len(mine), expected.get(name), now)
        if now - self.start <= self.trace.horizon:
            self.gpu_samples.append(used / self.trace.gpus)
        self.held_samples.append(partial_gpus)
        self.series.append((round(now - self.start, 1), partial_gpus,
                            sum(1 for s in self.jobs.values() if s.finished)))

    def _gang(self, state: JobState, bound: int, now: float) -> None:
        job = state.job
        if bound < state.bound and state.bound > 0:
            state.lost_bound = True
        state.bound = bound
        if not job.gang or bound == 0 or bound >= job.min_member:
            self._close(state, now)
            state.lost_bound = False
            return
        kind = "recovering" if state.lost_bound else "partial"
        if state.stretch != kind:
            self._close(state, now)
            state.stretch, state.stretch_since = kind, now

    def _close(self, state: JobState, now: float) -> None:
        if state.stretch and now - state.stretch_since > STRETCH_SECONDS:
            self.seconds[state.stretch] += now - state.stretch_since
        state.stretch = ""

    def _short(self, state: JobState, present: int, expected: int | None, now: float) -> None:
        short = max(0, (expected or 0) - present)
        if not short:
            state.short_since = None
            return
        if state.short_since is None:
            state.short_since = now
        if now - state.short_since > LOST_SECONDS and short > state.short_most:
            self.lost += short - state.short_most
            state.short_most = short

    def _terminating(self, pod: Obj, now: float) -> None:
        meta = pod.get("metadata") or {}
        deleted = meta.get("deletionTimestamp")
        if not deleted:
            return
        since = timestamp(deleted)
        node = (pod.get("spec") or {}).get("nodeName")
        if node in self.out_of_service:
            since = max(since, self.out_of_service[node])
        if now - since > STUCK_SECONDS:
            self.stuck.add(str(meta.get("uid")))

    # -- the figures ----------------------------------------------------------------------
    def close(self, now: float) -> None:
        for state in self.jobs.values():
            self._close(state, now)

    def figures(self, evictions: dict[str, int]) -> dict[str, Any]:
        waits = {name: s.started - s.created for name, s in self.jobs.items()
                 if s.started is not None and s.created is not None}
        by_queue: dict[str, dict[str, float | None]] = {}
        for queue in sorted({s.job.queue for s in self.jobs.values()}):
            mine = [w for n, w in waits.items() if self.jobs[n].job.queue == queue]
            by_queue[queue] = {"wait_p50_s": _quantile(mine, 0.5),
                               "wait_p95_s": _quantile(mine, 0.95)}
        unfinished = sorted(n for n, s in self.jobs.items() if not s.finished)
        return {
            "jobs": len(self.jobs),
            "finished": sum(1 for s in self.jobs.values() if s.finished),
            "started": len(waits),
            "unfinished": unfinished,
            "partial_gang_seconds": round(self.seconds["partial"], 1),
            "recovering_gang_seconds": round(self.seconds["recovering"], 1),
            "stuck_terminating": len(self.stuck),
            "lost_pods": self.lost,
            "gpu_utilisation": round(statistics.fmean(self.gpu_samples), 3)
            if self.gpu_samples else 0.0,
            "peak_partial_gang_gpus": max(self.held_samples, default=0.0),
            "wait_p50_s": _quantile(list(waits.values()), 0.5),
            "wait_p95_s": _quantile(list(waits.values()), 0.95),
            "wait_by_queue": by_queue,
            "evictions": evictions,
            "rewhole_after_recreation_s": {
                "gangs": len(self.replaced), "p50": _quantile(self.replaced, 0.5),
                "max": round(max(self.replaced), 1) if self.replaced else None},
        }


def _bound(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName")) and not (
        pod.get("metadata") or {}).get("deletionTimestamp") and (
        pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _created(pod: Obj) -> float:
    return timestamp(str((pod.get("metadata") or {}).get("creationTimestamp") or "1970-01-01T00:00:00Z"))


def _gpus(pod: Obj) -> float:
    """Whole GPUs a pod holds (a fraction's share, from its annotation)."""
    total = 0.0
    for container in (pod.get("spec") or {}).get("containers") or ():
        asked = ((container.get("resources") or {}).get("requests") or {}).get(GPU)
        total += float(asked or 0)
    fraction = ((pod.get("metadata") or {}).get("annotations") or {}).get("gpu-fraction")
    return total + (float(fraction) if fraction else 0.0)


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def classify(events: list[Obj]) -> dict[str, int]:
    """Evictions by cause, from the run's Events (one per pod and cause): kaisched's
    Preempted (preempt, reclaim) and Evicted (consolidation, stale gang), kube-scheduler's
    Preempted, the taint eviction of a failed node's pods."""
    seen: set[tuple[str, ...]] = set()
    counts: dict[str, int] = {}
    for event in events:
        reason, message = event.get("reason") or "", event.get("message") or ""
        involved = event.get("involvedObject") or {}
        # a pod's uid where the Event names it (kaisched's name the pod only: a StatefulSet's
        # pod made again has the same name, so its Event's time tells the two apart)
        uid = str(involved.get("uid") or "") or "/".join(
            str(x) for x in (involved.get("name"), event.get("firstTimestamp")
                             or event.get("eventTime") or (event.get("metadata") or {}).get("name")))
        if reason == "Preempted":
            cause = "reclaim" if message.startswith("reclaimed") else "preempt"
        elif reason == "Evicted" and "moved by consolidation" in message:
            cause = "consolidation"
        elif reason == "Evicted" and (event.get("source") or {}).get("component") != "kubelet":
            cause = "stale_gang"
        elif reason == "TaintManagerEviction" and message.startswith("Marking for deletion"):
            cause = "node_failure"
        else:
            continue
        if (uid, cause) not in seen:
            seen.add((uid, cause))
            counts[cause] = counts.get(cause, 0) + 1
    return dict(sorted(counts.items()))
