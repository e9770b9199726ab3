"""The performance scenarios, on the memory backend.

Each builds raw objects, loads them, and measures one scheduling cycle:
snapshot (watch events -> cache -> ClusterInfo) and session (actions).
"""
from __future__ import annotations

import resource
import time
from typing import Any, Callable

from kaisched.api.clock import ManualClock
from kaisched.bench import dra as bench_dra
from kaisched.bench import gpushare as bench_gpushare
from kaisched.bench import scale10k as bench_scale
from kaisched.bench import volumes as bench_volumes
from kaisched.bench.autoscale import autoscale_50k, autoscale_config, provision_step
from kaisched.bench.consolidation import consolidation_1k, consolidation_config
from kaisched.bench.objects import Obj, node, pod, podgroup
from kaisched.bench.profiling import profiled
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import SchedulerConfig, default_config
from kaisched.framework.effects import AskCapacity, Cause, Evict
from kaisched.runtime.binder import Binder
from kaisched.runtime.defaults import HEAD_START_PODS
from kaisched.runtime.scheduler import Scheduler


def basic(scale: float) -> tuple[list[Obj], list[Obj]]:
    nodes = [node(f"node-{i:05d}") for i in range(int(5000 * scale))]
    pods = [pod(f"job-{i:05d}", gpu=1 if i % 4 == 0 else 0) for i in range(int(10000 * scale))]
    return nodes, pods


def gang(scale: float) -> tuple[list[Obj], list[Obj]]:
    nodes = [node(f"node-{i:05d}") for i in range(int(5000 * scale))]
    objs: list[Obj] = []
    for g in range(int(1000 * scale)):
        objs.append(podgroup(f"gang-{g:04d}", 8))
        objs.extend(pod(f"gang-{g:04d}-{t}", cpu="2", gpu=1, group=f"gang-{g:04d}") for t in range(8))
    big = max(1, int(1000 * scale))
    for g in range(3):
        objs.append(podgroup(f"big-{g}", big))
        objs.extend(pod(f"big-{g}-{t:04d}", cpu="4", group=f"big-{g}") for t in range(big))
    return nodes, objs


def preempt(scale: float) -> tuple[list[Obj], list[Obj]]:
    """Every node full of low-priority pods; high-priority gangs arrive."""
    count = max(1, int(1000 * scale))
    nodes = [node(f"node-{i:05d}") for i in range(count)]
    objs: list[Obj] = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": "urgent"}, "value": 1000}]
    for i in range(count):
        objs.extend(pod(f"low-{i:05d}-{k}", cpu="4", memory="32Gi", gpu=1,
                        node_name=f"node-{i:05d}") for k in range(8))
    for g in range(max(1, int(100 * scale))):
        group = podgroup(f"urgent-{g:03d}", 8)
        objs.append(group)
        for t in range(8):
            p = pod(f"urgent-{g:03d}-{t}", cpu="4", memory="32Gi", gpu=1, group=f"urgent-{g:03d}")
            p["spec"]["priorityClassName"] = "urgent"
            p["spec"].pop("priority")
            objs.append(p)
    return nodes, objs


def reclaim(scale: float) -> tuple[list[Obj], list[Obj]]:
    """Every node full of one queue's single-pod jobs, started in an order
    unrelated to their nodes (the newest victims are spread out); another
    queue's gangs arrive and reclaim."""
    count = max(1, int(1000 * scale))
    nodes = [node(f"node-{i:05d}") for i in range(count)]
    objs: list[Obj] = [{"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
                        "metadata": {"name": name}, "spec": {}} for name in ("research", "prod")]
    for i in range(count):
        for k in range(8):
            p = pod(f"low-{i:05d}-{k}", cpu="4", memory="32Gi", gpu=1, node_name=f"node-{i:05d}")
            second = (i * 7919 + k * 104729) % 86400
            p["metadata"]["creationTimestamp"] = \
                f"2026-01-01T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"
            p["metadata"]["labels"] = {"kaisched.io/queue": "research"}
            objs.append(p)
    for g in range(max(1, int(10 * scale))):
        objs.append(podgroup(f"prod-{g:03d}", 8))
        for t in range(8):
            p = pod(f"prod-{g:03d}-{t}", cpu="4", memory="32Gi", gpu=1, group=f"prod-{g:03d}")
            p["metadata"]["labels"] = {"kaisched.io/queue": "prod"}
            objs.append(p)
    return nodes, objs


def churn(scale: float) -> tuple[list[Obj], list[Obj]]:
    """A busy cluster: 4,000 nodes, 140,000 pods, almost all running."""
    count = max(1, int(4000 * scale))
    nodes = [node(f"node-{i:05d}", cpu=64, memory="512Gi") for i in range(count)]
    pods = [pod(f"run-{i:06d}", cpu="1", memory="8Gi", node_name=f"node-{i % count:05d}")
            for i in range(int(135000 * scale))]
    pods += [pod(f"wait-{i:05d}", cpu="1", memory="8Gi") for i in range(int(5000 * scale))]
    return nodes, pods


RACK = "topology.example.com/rack"
ZONE = "topology.kubernetes.io/zone"


def affinity(scale: float) -> tuple[list[Obj], list[Obj]]:
    """Placement rules at scale: 5,000 nodes in 50 racks of 100 (5 zones);
    1,000 gangs of 8 whose mates keep apart (required hostname anti-affinity)
    and prefer one rack; 2,000 single pods spread over the zones (maxSkew 1)."""
    count = int(5000 * scale)
    nodes = []
    for i in range(count):
        n = node(f"node-{i:05d}")
        rack = i // 100
        n["metadata"]["labels"] = {"kubernetes.io/hostname": f"node-{i:05d}",
                                   RACK: f"rack-{rack:02d}", ZONE: f"zone-{rack % 5}"}
        nodes.append(n)
    objs: list[Obj] = []
    for g in range(int(1000 * scale)):
        name = f"gang-{g:04d}"
        group = podgroup(name, 8)
        group["spec"]["topology"] = {"preferred": RACK}
        objs.append(group)
        for t in range(8):
            p = pod(f"{name}-{t}", cpu="2", gpu=1, group=name)
            p["metadata"]["labels"] = {"gang": name}
            p["spec"]["affinity"] = {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname",
                     "labelSelector": {"matchLabels": {"gang": name}}}]}}
            objs.append(p)
    for i in range(int(2000 * scale)):
        p = pod(f"web-{i:04d}")
        p["metadata"]["labels"] = {"app": "web"}
        p["spec"]["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}]
        objs.append(p)
    return nodes, objs


def churn_step(cluster: MemoryCluster, scale: float) -> None:
    """Between cycles: some pods finish, as many new ones arrive."""
    for i in range(0, int(135000 * scale), 135):
        cluster.delete(POD, "bench", f"run-{i:06d}")
    for i in range(int(1000 * scale)):
        cluster.create(pod(f"new-{i:05d}", cpu="1", memory="8Gi"))


SCENARIOS: dict[str, Callable[[float], tuple[list[Obj], list[Obj]]]] = {
    "basic-5k": basic,
    "gang-5k": gang,
    "preempt-1k": preempt,
    "reclaim-1k": reclaim,
    "churn": churn,
    "affinity-5k": affinity,
    "scale-10k": bench_scale.scale_10k,
    "scale-50k": bench_scale.scale_50k,
    "evict-50k": bench_scale.evict_50k,
    "dra-1k": bench_dra.dra_1k,
    "gpu-share-5k": bench_gpushare.gpu_share_5k,
    "volumes-5k": bench_volumes.volumes,
    "consolidation-1k": consolidation_1k,
    "autoscale-50k": autoscale_50k,
}
# Scenarios measured under a config of their own (when --config gives none).
CONFIGS = {"consolidation-1k": consolidation_config, "autoscale-50k": autoscale_config}


def _pause(scheduler: Scheduler, clock: ManualClock, config: SchedulerConfig,
           figures: dict[str, Any]) -> None:
    """What `kaisched run` does while it waits for the next period: the events
    of the pause (the echoes of the last cycle's binds and writes, the churn)
    applied as they come. Timed apart: the cycle starts after."""
    clock.advance(config.schedule_period)
    applied = time.perf_counter()
    scheduler.sync()
    figures["events_seconds"] = round(time.perf_counter() - applied, 3)


def run(name: str, scale: float = 1.0, profile: int = 0,
        config: SchedulerConfig | None = None,
        head_start_pods: int = HEAD_START_PODS) -> dict[str, Any]:
    """The scenario's figures; profile > 0 adds the top entries (by own time)
    of a cProfile of the measured cycle, to see where it goes before optimising.
    head_start_pods: cold-50k's scheduler's (0: no head start)."""
    if name == "binds":         # over HTTP to kmock's emulator, not the memory backend
        from kaisched.bench.binds import run_binds
        return run_binds(scale)
    if name == "simulate":      # a whole generated workload through `kaisched simulate`
        from kaisched.bench.simulate import bench as run_simulate
        return run_simulate(scale)
    if name == "failover-50k":  # a standby that followed a 50,000-node cluster takes over
        from kaisched.bench.failover import run_failover
        return run_failover(scale, profile)
    if name == "list-10k":      # scale-10k's objects listed over HTTP from kmock's emulator
        from kaisched.bench.wirelist import run_wire_list
        return run_wire_list(scale)
    if name == "cold-50k":      # a scheduler starting cold over a 50,000-node cluster
        from kaisched.bench.coldstart import run_cold_start
        return run_cold_start(scale, profile, head_start_pods)
    if name == "what-if-10k":   # `kaisched simulate --from-snapshot` on the scale-10k cluster
        from kaisched.bench.simulate import bench_what_if
        return bench_what_if(scale)
    nodes, others = SCENARIOS[name](scale)
    node_count, pods = len(nodes), sum(1 for o in others if o["kind"] == "Pod")
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    for obj in nodes + others:
        cluster.create(obj)
    big = name in ("scale-10k", "scale-50k", "evict-50k")
    if big:
        # The backend holds its own copies now: the generated top-level dicts
        # would only count against the peak.
        nodes, others = [], []
    registry = register_builtins()
    config = config or (CONFIGS[name](registry) if name in CONFIGS else default_config(registry))
    started = time.perf_counter()       # a scheduler starting against a full API server
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    steady = name == "churn" or big
    figures: dict[str, Any] = {}
    with profiled(0 if steady else profile, figures):
        result = scheduler.run_once()
    first_cycle = time.perf_counter() - started
    if steady:                  # the steady state: measure the cycle after the first
        if name == "churn":
            churn_step(cluster, scale)
        else:
            bench_scale.churn_step(cluster, scale * (1 if name == "scale-10k" else 5))
        if name == "evict-50k":
            # The steady cycle after churn, then the gangs that only evictions
            # can place arrive: the cycle measured is the one that evicts.
            _pause(scheduler, clock, config, figures)
            scheduler.run_once()
            bench_scale.eviction_step(cluster, node_count)
        _pause(scheduler, clock, config, figures)
        with profiled(profile, figures):
            result = scheduler.run_once()
    placed = len(result.placed) + len(result.reservations)
    evicted = sum(1 for e in result.effects if isinstance(e, Evict))
    figures.update({
        "scenario": name, "nodes": node_count, "pods": pods, "placed": placed,
        "evicted": evicted,
        "session_seconds": round(result.session_seconds, 3),
        "pods_per_second": round(placed / result.session_seconds, 1) if result.session_seconds else 0.0,
        "snapshot_seconds": round(result.snapshot_seconds, 3),
        # The same two in CPU time: what a shared machine's load does not inflate.
        "cpu_seconds": round(result.snapshot_cpu_seconds + result.session_cpu_seconds, 3),
        "peak_memory_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    })
    if name == "evict-50k":     # which gang's victims: both kinds of eviction ran
        causes = [e.cause for e in result.effects if isinstance(e, Evict)]
        figures["reclaimed"] = causes.count(Cause.RECLAIM)
        figures["preempted"] = causes.count(Cause.PREEMPT)
    if big:
        figures["first_cycle_seconds"] = round(first_cycle, 3)
    if name == "autoscale-50k":     # what was asked, and the cycle that follows the requests up
        figures["asked"] = sum(1 for e in result.effects if isinstance(e, AskCapacity))
        _pause(scheduler, clock, config, figures)
        figures["follow_session_seconds"] = round(scheduler.run_once().session_seconds, 3)
        provision_step(cluster, clock.now())
        _pause(scheduler, clock, config, figures)
        booked = scheduler.run_once()
        figures["booked_session_seconds"] = round(booked.session_seconds, 3)
        figures["booked_placed"] = len(booked.placed) + len(booked.reservations)
    if "profile" in figures:
        figures["profile"] = figures.pop("profile")     # last: the figures first
    return figures
