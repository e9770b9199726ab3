"""`kaisched bench failover-50k`: a standby takes over a 50,000-node cluster.

The cluster is scale-10k's mix five times over (50,000 nodes, 1,500,000
pods), on the memory backend. A leader schedules it: its first cycle, then
steady cycles with churn between them. A standby follows the same cluster
all along, as `kaisched run` does when it does not hold the Lease (each
period: apply what the watches saw, and get ready to lead). Then the leader
dies; while its Lease runs out new gangs arrive and the standby keeps
following; then the standby gains the Lease.

`failover_seconds` is from leadership gained to the first committed
decision (the first bind the new leader hands to its binder), and beside it
where the time went: the sync of what the watches brought since the last
period, the snapshot, the session up to that first decision, and the
first bind's landing. The whole first cycle is reported too.

Memory: both schedulers live in one process beside the in-process API
server, so the process's peak is not what one replica needs. Each
scheduler's share is measured as the growth of the resident set while it
was built; `replica_memory_mib` is the larger share plus what the
interpreter and the libraries take before any object exists -- what one
`kaisched run` process holds (its watches' objects are parsed a page at a
time, not kept).
"""
from __future__ import annotations

import gc
import os
import resource
import threading
import time
from typing import Any

from kaisched.bench import scale10k as bench_scale
from kaisched.bench.profiling import profiled
from kaisched.builtins.catalog import register_builtins
from kaisched.framework import default_config
from kaisched.framework.effects import Bind, Effect
from kaisched.runtime.binder import Binder
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.scheduler import Scheduler

SIZE = 5                # scale-10k times five: 50,000 nodes
STEADY_CYCLES = 2       # the leader's cycles after its first, churn before each
# The binder's threads. Not `kaisched run`'s 128: a bind to the memory backend
# is all CPU, no wait on a server, so more threads only take turns with the
# session for the interpreter (cold-50k's first cycle took 101 s with 128, 46 s with 8).
BINDERS = 8
MIB = 1024 * 1024


def resident_mib() -> float:
    """The resident set now (not the peak), in MiB."""
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / MIB


class FirstBind:
    """A BindObserver that notes when the first bind was decided and landed."""

    def __init__(self) -> None:
        self.decided: float | None = None
        self.landed: float | None = None
        self.binds = 0
        self._lock = threading.Lock()

    def applied(self, effect: Effect, seconds: float = 0.0) -> None:
        if not isinstance(effect, Bind):
            return
        now = time.perf_counter()
        with self._lock:
            self.binds += 1
            if self.landed is None:
                self.landed, self.decided = now, now - seconds

    def failed(self, effect: Effect, error: str) -> None:
        return None         # a failed bind is no decision landed; the run counts binds


def first_cycle(scheduler: Scheduler, profile: int, figures: dict[str, Any],
                head_start: bool = False) -> tuple[float, CycleResult, float]:
    """The scheduler's sync and first cycle (profiled into figures if asked),
    after its head start if asked (as a leader's first cycle takes it), then
    its binder and watches stopped: when the sync ended, the cycle's result,
    when the cycle ended."""
    with profiled(profile, figures):
        taken = scheduler.head_start() if head_start else None
        if taken is not None:
            figures.update({"head_start_snapshot_seconds": round(taken.snapshot_seconds, 3),
                            "head_start_session_seconds": round(taken.session_seconds, 3),
                            "head_start_binds": len(taken.binds)})
        scheduler.sync()
        synced = time.perf_counter()
        result = scheduler.run_once()
    ended = time.perf_counter()
    scheduler.binder.stop()
    scheduler.close()
    return synced, result, ended


def where_it_went(since: float, synced: float, ended: float, result: CycleResult,
                  decided: float | None) -> dict[str, Any]:
    """From since (the scheduler started leading) to its first decision: the
    sync, the snapshot and the session up to it; and the whole first cycle."""
    return {
        "sync_seconds": round(synced - since, 3),
        "snapshot_seconds": round(result.snapshot_seconds, 3),
        "first_decision_in_session_seconds": round(
            decided - synced - result.snapshot_seconds, 3) if decided is not None else None,
        "first_cycle_seconds": round(ended - since, 3),
        "session_seconds": round(result.session_seconds, 3),
        "placed": len(result.placed),
    }


def run_failover(scale: float = 1.0, profile: int = 0) -> dict[str, Any]:
    baseline = resident_mib()
    clock, cluster, node_count, pods = bench_scale.filled(SIZE * scale)
    registry = register_builtins()
    config = default_config(registry)
    before = resident_mib()
    leader = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    started = time.perf_counter()
    leader.run_once()
    cold_start = time.perf_counter() - started
    leader_mib = resident_mib() - before

    before = resident_mib()
    observer = FirstBind()
    standby = Scheduler(cluster, config, registry, clock,
                        Binder(cluster, clock.now, workers=BINDERS, observer=observer))
    started = time.perf_counter()
    standby.follow()
    first_follow = time.perf_counter() - started
    standby_mib = resident_mib() - before
    follows, cycles = [], []
    for step in range(1, STEADY_CYCLES + 1):
        bench_scale.churn_step(cluster, SIZE * scale, step)
        clock.advance(config.schedule_period)
        started = time.perf_counter()
        leader.run_once()
        cycles.append(time.perf_counter() - started)
        started = time.perf_counter()
        standby.follow()
        follows.append(time.perf_counter() - started)
    leader.close()          # the leader dies
    del leader
    gc.collect()
    # While its Lease runs out, new gangs arrive; the standby keeps following.
    bench_scale.churn_step(cluster, SIZE * scale, STEADY_CYCLES + 1)
    clock.advance(config.schedule_period)
    started = time.perf_counter()
    standby.follow()
    follows.append(time.perf_counter() - started)
    clock.advance(config.schedule_period)

    figures: dict[str, Any] = {}
    gained = time.perf_counter()        # leadership gained: the loop's next pass leads
    synced, result, ended = first_cycle(standby, profile, figures)
    decided, landed = observer.decided, observer.landed
    figures.update({
        "scenario": "failover-50k", "nodes": node_count, "pods": pods,
        "failover_seconds": round(decided - gained, 3) if decided is not None else None,
        **where_it_went(gained, synced, ended, result, decided),
        "first_bind_landed_seconds": round(landed - gained, 3) if landed is not None else None,
        "follow_seconds": {"first": round(first_follow, 3),
                           "steady": [round(s, 3) for s in follows]},
        "leader_steady_cycle_seconds": [round(c, 3) for c in cycles],
        "cold_start_seconds": round(cold_start, 3),
        "leader_memory_mib": round(leader_mib, 1),
        "standby_memory_mib": round(standby_mib, 1),
        "replica_memory_mib": round(baseline + max(leader_mib, standby_mib), 1),
        "peak_memory_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    })
    if "profile" in figures:
        figures["profile"] = figures.pop("profile")
    return figures
