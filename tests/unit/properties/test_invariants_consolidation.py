"""Consolidation's promises over random fragmented clusters, three sessions
each (between them bound pods start, evicted pods are gone and their
ReplicaSet makes them again, pending). After EVERY session:
- no consolidation commits with a moved job left unplaced: every pod it
  evicts has its successor held on a node, every job it moves has all of
  its moved pods held so, and the job it moved them for is pipelined-ready;
- it never moves a pod of a job that is not preemptible, a bare pod, a job
  moved within its cooldown, a job inside its min-runtime, nor a pod a
  PodDisruptionBudget protects, and moves at most maxPods pods;
- no node is over-committed, counting what pods being deleted still hold
  and the room held for moved pods (the session's node table), and no
  shared GPU holds more than its whole (pods sharing GPUs move too);
- the cache's model, handed back after the session, equals one rebuilt from
  the cluster (a moved pod's successor leaves nothing behind);
- the same input gives the same decisions.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterator

import attrs
from hypothesis import event, given, settings
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.api.node import EPSILON
from kaisched.api.types import READY_STATUSES, TaskStatus
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import SchedulerConfig, default_config
from kaisched.framework.config import ConsolidationConfig, PluginOption
from kaisched.framework.effects import Cause, Evict
from kaisched.runtime.binder import Binder
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.scheduler import Scheduler
from kaisched.tools.replay import load_cluster
from tests.builders.objects import build_node, build_pod, build_podgroup

SESSIONS = 3
GPU = "nvidia.com/gpu"
GPU_GROUP = "runai-gpu-group"
MOVED_RECENTLY = "2025-12-31T23:58:00Z"     # 2 minutes before the clock starts: within the cooldown
STARTED_RECENTLY = "2025-12-31T23:58:00Z"   # within the min-runtime of 10m
STARTED_LONG_AGO = "2025-12-31T22:00:00Z"


@attrs.frozen
class Job:
    name: str
    min_member: int
    gpu: int                            # per pod
    pods: tuple[str | None, ...]        # per pod: its node, or None (pending)
    preemptible: bool = True
    bare: bool = False                  # no controller makes its pods again
    recent: bool = False                # moved within its cooldown
    budget: bool = False                # a PodDisruptionBudget allows none of its pods to go
    young: bool = False                 # started within its min-runtime
    share: float | None = None          # a pod sharing a GPU: its gpu-fraction (gpu is 0)
    device: str | None = None           # the shared GPU its running pod holds


@attrs.frozen
class Fragmented:
    nodes: dict[str, int]               # name -> GPUs
    jobs: tuple[Job, ...]
    max_pods: int
    every_action: bool

    def objects(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [build_node(n, cpu=64, gpu=g) for n, g in self.nodes.items()]
        for job in self.jobs:
            status = {"lastMovedTime": MOVED_RECENTLY} if job.recent else None
            group = build_podgroup(job.name, min_member=job.min_member,
                                   **({} if job.preemptible else {"preemptible": False}))
            if status:
                group["status"] = status
            out.append(group)
            owner = None if job.bare else {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                           "name": job.name, "uid": f"{job.name}-uid",
                                           "controller": True}
            for i, node in enumerate(job.pods):
                labels = {"job": job.name}
                if job.device is not None and node is not None:
                    labels[GPU_GROUP] = job.device
                pod = build_pod(f"{job.name}-{i}", cpu=1, gpu=job.gpu, group=job.name,
                                node=node, owner=owner, labels=labels,
                                annotations={"gpu-fraction": str(job.share)} if job.share else None)
                if node is not None:
                    pod["status"]["startTime"] = STARTED_RECENTLY if job.young else STARTED_LONG_AGO
                out.append(pod)
            if job.budget:
                out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                            "metadata": {"name": job.name, "namespace": "default"},
                            "spec": {"maxUnavailable": 0,
                                     "selector": {"matchLabels": {"job": job.name}}}})
        return out

    def config(self) -> SchedulerConfig:
        base = default_config(register_builtins())
        actions = (("allocate", "consolidation", *base.actions[1:]) if self.every_action
                   else ("allocate", "consolidation"))
        tiers = (*base.tiers[:-1], (*base.tiers[-1], PluginOption(
            "minruntime", {"defaultPreemptMinRuntime": "10m"})))
        return attrs.evolve(base, actions=actions, tiers=tiers,
                            consolidation=ConsolidationConfig(self.max_pods, 600.0))

    def protected(self) -> set[str]:
        """Jobs consolidation must never move."""
        return {f"default/{j.name}" for j in self.jobs
                if not j.preemptible or j.bare or j.recent or j.budget or j.young}


@st.composite
def fragmented(draw: st.DrawFn) -> Fragmented:
    """Nodes partly filled with small running pods, leaving a few GPUs free
    on each, and pending gangs of pods bigger than any node's free room, so
    that free room is there in all but in pieces."""
    nodes = {f"n{i}": draw(st.sampled_from([4, 8])) for i in range(draw(st.integers(2, 5)))}
    running: list[tuple[int, str]] = []           # (GPUs, node) per running pod
    free = {}
    sharers: list[tuple[float, str, str]] = []   # (fraction, node, GPU group) per sharing pod
    for name, gpus in nodes.items():
        free[name] = draw(st.integers(1, gpus // 2))
        used = gpus - free[name]
        for d in range(draw(st.integers(0, min(2, used)))):     # GPUs shared by small pods
            used -= 1
            parts = draw(st.sampled_from([(0.25,), (0.5,), (0.25, 0.25), (0.5, 0.25), (0.5, 0.5)]))
            sharers.extend((part, name, f"{name}-g{d}") for part in parts)
        while used:
            size = min(draw(st.sampled_from([1, 1, 2, 3])), used)
            running.append((size, name))
            used -= size
    jobs: list[Job] = []
    spots = draw(st.permutations(running))
    while spots:                    # a job: pods of one size, one or two of them
        gpu, node = spots.pop()
        mates = [node]
        twin = next((i for i, (g, _) in enumerate(spots) if g == gpu), None)
        if twin is not None and draw(st.booleans()):
            mates.append(spots.pop(twin)[1])
        kind = draw(st.sampled_from(["plain"] * 6 + ["fixed", "bare", "recent", "budget", "young"]))
        jobs.append(Job(f"run{len(jobs)}", draw(st.integers(1, len(mates))), gpu, tuple(mates),
                        preemptible=kind != "fixed", bare=kind == "bare",
                        recent=kind == "recent", budget=kind == "budget", young=kind == "young"))
    for part, node, device in sharers:
        kind = draw(st.sampled_from(["plain"] * 6 + ["fixed", "bare", "recent", "budget", "young"]))
        jobs.append(Job(f"run{len(jobs)}", 1, 0, (node,), preemptible=kind != "fixed",
                        bare=kind == "bare", recent=kind == "recent", budget=kind == "budget",
                        young=kind == "young", share=part, device=device))
    biggest, roomiest = max(nodes.values()), max(free.values())
    for j in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1, 2))
        jobs.append(Job(f"want{j}", draw(st.integers(1, size)),
                        draw(st.integers(min(roomiest + 1, biggest), biggest)), (None,) * size))
    if sharers and draw(st.booleans()):        # a share that may fit on no GPU as they stand
        # (a whole GPU freed for it, or part of a shared one)
        jobs.append(Job("want-share", 1, 0, (None,), share=draw(st.sampled_from([0.25, 0.5, 0.75]))))
    return Fragmented(nodes, tuple(jobs), draw(st.sampled_from([1, 2, 4, 32])), draw(st.booleans()))


def sessions(scenario: Fragmented) -> Iterator[tuple[CycleResult, MemoryCluster, Scheduler]]:
    """Each session's result and the cluster after it; between sessions bound
    pods start, and pods being deleted are gone and made again by their
    ReplicaSet (bare ones are not)."""
    registry = register_builtins()
    config = scenario.config()
    clock = ManualClock()
    cluster = load_cluster(scenario.objects(), clock)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    for number in range(SESSIONS):
        if number:
            for pod in cluster.list(POD):
                meta, spec = pod["metadata"], pod.get("spec") or {}
                if meta.get("deletionTimestamp"):
                    cluster.delete(POD, meta["namespace"], meta["name"])
                    if meta.get("ownerReferences"):
                        again = {k: v for k, v in meta.items()
                                 if k in ("name", "namespace", "annotations", "ownerReferences")}
                        # its template's labels: no shared GPU named
                        again["labels"] = {k: v for k, v in (meta.get("labels") or {}).items()
                                           if k != GPU_GROUP}
                        cluster.create({"apiVersion": "v1", "kind": "Pod", "metadata": again,
                                        "spec": {k: v for k, v in spec.items() if k != "nodeName"},
                                        "status": {"phase": "Pending"}})
                elif spec.get("nodeName") and (pod.get("status") or {}).get("phase") == "Pending":
                    cluster.replace({**pod, "status": {**pod["status"], "phase": "Running"}})
            clock.advance(config.schedule_period)
        yield scheduler.run_once(), cluster, scheduler


def check(scenario: Fragmented) -> list[tuple[Any, ...]]:
    protected = scenario.protected()
    decisions = []
    moved_any = False
    shares = {f"default/{j.name}" for j in scenario.jobs if j.share}
    moved_shares: set[str] = set()
    for result, cluster, scheduler in sessions(scenario):
        moves = [e for e in result.effects
                 if isinstance(e, Evict) and e.cause is Cause.CONSOLIDATION]
        decisions.append((dict(result.placed), sorted(e.pod for e in result.effects
                                                      if isinstance(e, Evict)),
                          dict(result.reservations)))
        assert len(moves) <= scenario.max_pods, (len(moves), scenario.max_pods)
        session_jobs = result.cluster.jobs
        by_job: dict[str, list[Evict]] = defaultdict(list)
        for e in moves:
            moved_any = True
            if e.job in shares:
                moved_shares.add(e.job)
            assert e.job not in protected, ("protected job moved", e)
            assert e.by is not None and e.moved_to is not None, e
            # the successor is held where the eviction says
            assert result.reservations.get(e.pod) == e.moved_to, (e, result.reservations)
            by_job[e.job].append(e)
        for job, evicts in by_job.items():
            assert all(e.pod in result.reservations for e in evicts), job
        for beneficiary in {e.by.job for e in moves if e.by is not None}:
            info = session_jobs[beneficiary]
            assert info.minimum_met(READY_STATUSES | {TaskStatus.PIPELINED}), \
                (beneficiary, info.totals())
        for devices in result.cluster.gpus.devices.values():
            for device in devices.values():
                assert device.taken_later <= device.units, (device.node, device.group,
                                                            device.holders())
        table = result.cluster.table
        over = table.future < -EPSILON
        assert not over.any(), [(table.names[r], table.future[r].tolist())
                                for r in sorted(set(over.nonzero()[0]))]
        # and as the cluster has it: pods staying, and the room held for pods
        # to come (moved ones, pipelined ones), within each node
        # (a shared GPU's reservation pod counts while a pod that stays shares
        # its GPU; once every sharer is going, so is it, as the scheduler counts it)
        gpus = {p["metadata"]["name"]: _gpus(p) for p in cluster.list(POD)}
        staying = [p for p in cluster.list(POD)
                   if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]
        shared = {(p["spec"]["nodeName"], p["metadata"]["labels"][GPU_GROUP]) for p in staying
                  if p["metadata"]["namespace"] == "default"
                  and GPU_GROUP in (p["metadata"].get("labels") or {})}
        held: dict[str, float] = defaultdict(float)
        for p in staying:
            meta = p["metadata"]
            if meta["namespace"] == "default" or (p["spec"]["nodeName"], (meta.get("labels") or {})
                                                  .get(GPU_GROUP)) in shared:
                held[p["spec"]["nodeName"]] += gpus[meta["name"]]
        for key, node in result.reservations.items():
            held[node] += gpus[key.split("/", 1)[1]]
        for node, amount in held.items():
            assert amount <= scenario.nodes[node], (node, amount, result.reservations)
        assert scheduler.cache.check(scheduler.clock.now()) == []
    event(f"moved: {moved_any}")
    event(f"moved a share: {bool(moved_shares)}")
    return decisions


def _gpus(pod: dict[str, Any]) -> float:
    return float(pod["spec"]["containers"][0].get("resources", {}).get("requests", {}).get(GPU, 0))


@settings(max_examples=200, deadline=None)
@given(fragmented())
def test_no_consolidation_commits_with_a_moved_job_unplaced(scenario: Fragmented) -> None:
    decisions = check(scenario)
    assert check(scenario) == decisions
