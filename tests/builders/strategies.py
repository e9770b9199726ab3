"""Hypothesis strategies shared by the property tests, and the sessions they run.

- scenarios(): a small cluster of nodes, queues (perhaps a tree, with limits) and gangs,
  some pods running already where they fit; one cycle of allocate + backfill is run over it.
- contended(): nodes filled with running gangs of two queues (or a small tree) and pending
  gangs wanting room, at several priorities, so that preemption and reclaim are common;
  some pods on their way out, some pods gated, perhaps a gang refused for a reason no
  eviction can fix (DOOMS).
- sessions(): the production loop on the memory backend, SESSIONS sessions long; between
  sessions bound pods start and pods being deleted go.
- counts, json_values: replica counts right or wrong, and any JSON, for objects of any shape.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterator

import attrs
from hypothesis import strategies as st

from kaisched.api.clock import ManualClock
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import SchedulerConfig, default_config
from kaisched.runtime.binder import Binder
from kaisched.runtime.cycle import CycleResult
from kaisched.runtime.scheduler import Scheduler
from kaisched.tools.replay import load_cluster
from tests.builders.objects import build_node, build_pod, build_podgroup, build_queue

# -- small clusters, one cycle (scenarios) -------------------------------------------------

GPU = "nvidia.com/gpu"
CPU_STEPS = [0, 250, 500, 1000, 1500, 2000, 3000, 4000]       # millicores


@attrs.frozen
class Pod:
    name: str
    job: str
    cpu: int            # millicores
    gpu: int
    priority: int
    node: str | None    # running there already


@attrs.frozen
class Scenario:
    nodes: dict[str, dict[str, float]]          # name -> allocatable (cpu in millicores)
    queues: dict[str, tuple[str | None, dict[str, float]]]   # name -> (parent, limits)
    jobs: dict[str, tuple[int, str]]            # name -> (minMember, queue)
    pods: list[Pod]

    def objects(self) -> list[dict[str, Any]]:
        out = [build_node(n, cpu=f"{a['cpu']:g}m", gpu=a[GPU]) for n, a in self.nodes.items()]
        for name, (parent, limits) in self.queues.items():
            resources = {"cpu": {"limit": f"{limits['cpu']:g}m"}} if "cpu" in limits else {}
            if GPU in limits:
                resources[GPU] = {"limit": limits[GPU]}
            out.append(build_queue(name, parent=parent, resources=resources))
        for name, (min_member, queue) in self.jobs.items():
            out.append(build_podgroup(name, min_member=min_member, queue=queue))
        for pod in self.pods:
            queue = self.jobs[pod.job][1]
            out.append(build_pod(pod.name, cpu=f"{pod.cpu}m" if pod.cpu else 0, gpu=pod.gpu,
                                 group=pod.job, queue=queue, node=pod.node,
                                 priority=pod.priority))
        return out

    def ancestors(self, queue: str) -> list[str]:
        chain = [queue]
        while self.queues.get(chain[-1], (None, {}))[0]:
            chain.append(self.queues[chain[-1]][0])  # type: ignore[arg-type]
        return chain


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    nodes = {f"n{i}": {"cpu": draw(st.integers(1, 8)) * 1000.0,
                       GPU: float(draw(st.sampled_from([0, 0, 1, 2, 4, 8])))}
             for i in range(draw(st.integers(1, 6)))}
    queues: dict[str, tuple[str | None, dict[str, float]]] = {}
    for i in range(draw(st.integers(0, 2))):
        parent = "q0" if i == 1 and draw(st.booleans()) else None
        limits: dict[str, float] = {}
        if draw(st.booleans()):
            limits["cpu"] = draw(st.integers(0, 16)) * 1000.0
        if draw(st.booleans()):
            limits[GPU] = float(draw(st.integers(0, 8)))
        queues[f"q{i}"] = (parent, limits)
    leaves = ["default", *queues]
    jobs: dict[str, tuple[int, str]] = {}
    pods: list[Pod] = []
    free = {n: dict(a) for n, a in nodes.items()}
    used: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    scenario = Scenario(nodes, queues, jobs, pods)
    for j in range(draw(st.integers(1, 8))):
        job = f"job{j}"
        jobs[job] = (draw(st.integers(1, 4)), draw(st.sampled_from(leaves)))
        for p in range(draw(st.integers(1, 5))):
            cpu = draw(st.sampled_from(CPU_STEPS))
            gpu = draw(st.sampled_from([0, 0, 0, 1, 2]))
            node = draw(st.sampled_from([None, None, *nodes]))
            if node is not None:   # already running: only where it fits, node and queue
                chain = scenario.ancestors(jobs[job][1])
                fits_node = free[node]["cpu"] >= cpu and free[node][GPU] >= gpu
                fits_queues = all(used[q]["cpu"] + cpu <= queues[q][1].get("cpu", 1e18)
                                  and used[q][GPU] + gpu <= queues[q][1].get(GPU, 1e18)
                                  for q in chain if q in queues)
                if fits_node and fits_queues:
                    free[node]["cpu"] -= cpu
                    free[node][GPU] -= gpu
                    for q in chain:
                        used[q]["cpu"] += cpu
                        used[q][GPU] += gpu
                else:
                    node = None
            pods.append(Pod(f"{job}-p{p}", job, cpu, gpu, draw(st.integers(0, 2)), node))
    return scenario


# -- a cluster where room is contended (contended) --------------------------------------

SESSIONS = 3                    # sessions a property test runs (sessions())
# How a job may be refused for a reason no eviction can fix (Job.doom).
DOOMS = ("min-resources", "gated", "gang-group", "selector", "never")


@attrs.frozen
class Job:
    name: str
    queue: str
    min_member: int
    priority: int
    gpu: int                        # per pod
    pods: tuple[str | None, ...]    # per pod: the node it runs on, or None (pending)
    doom: str | None = None         # how it is refused for a reason eviction cannot fix
    gated: int = 0                  # its last pods carry a scheduling gate
    releasing: int = 0              # its last running pods are being deleted (Releasing)


@attrs.frozen
class Contended:
    nodes: dict[str, int]           # name -> GPUs (cpu: 16 each)
    queues: dict[str, tuple[str | None, float | None, float | None]]  # (parent, quota, limit)
    jobs: tuple[Job, ...]
    linger: int = 0                 # sessions a pod being deleted stays (evictions in flight)

    def objects(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": "non-preempting"}, "value": 5, "preemptionPolicy": "Never"}]
        out += [build_node(n, cpu=16, gpu=g) for n, g in self.nodes.items()]
        for name, (parent, quota, limit) in self.queues.items():
            res: dict[str, Any] = {}
            if quota is not None:
                res["quota"] = f"{quota:g}"
            if limit is not None:
                res["limit"] = f"{limit:g}"
            out.append(build_queue(name, parent=parent, resources={GPU: res} if res else None))
        for job in self.jobs:
            spec: dict[str, Any] = {}
            if job.doom == "min-resources":
                spec["minResources"] = {GPU: str(sum(self.nodes.values()) + 1)}
            if job.doom == "gang-group":
                spec["gangGroup"] = [f"default/{job.name}", "default/nobody"]
            out.append(build_podgroup(job.name, min_member=job.min_member, queue=job.queue, **spec))
            for i, node in enumerate(job.pods):
                pod = build_pod(f"{job.name}-{i}", cpu=1, gpu=job.gpu, group=job.name,
                                queue=job.queue, node=node,
                                priority=None if job.doom == "never" else job.priority,
                                node_selector={"zone": "nowhere"} if job.doom == "selector" else None)
                if (job.doom == "gated" and i) or i >= len(job.pods) - job.gated:
                    pod["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
                if job.doom == "never":
                    pod["spec"]["priorityClassName"] = "non-preempting"
                if node is not None and i >= len(job.pods) - job.releasing:
                    pod["metadata"]["deletionTimestamp"] = "2025-12-31T23:59:59Z"
                out.append(pod)
        return out

    def gated_pods(self) -> set[str]:
        return {f"default/{j.name}-{i}" for j in self.jobs
                for i in range(1 if j.doom == "gated" else len(j.pods) - j.gated, len(j.pods))}


@st.composite
def contended(draw: st.DrawFn) -> Contended:
    nodes = {f"n{i}": draw(st.sampled_from([2, 4, 4, 8])) for i in range(draw(st.integers(1, 4)))}
    queues: dict[str, tuple[str | None, float | None, float | None]] = {}
    nested = draw(st.booleans())
    for name in ("qa", "qb"):
        quota = draw(st.sampled_from([None, 0.0, 1.0, 2.0, 4.0]))
        limit = draw(st.sampled_from([None, None, None, 8.0]))
        queues[name] = ("top" if nested and name == "qb" else None, quota, limit)
    if nested:
        queues["top"] = (None, None, None)
        queues["qc"] = ("top", draw(st.sampled_from([None, 1.0])), None)
    leaves = [q for q in queues if q != "top"]
    free = dict(nodes)
    jobs: list[Job] = []
    for j in range(draw(st.integers(1, 6))):            # running, filling the nodes
        queue = draw(st.sampled_from(leaves))
        gpu = draw(st.sampled_from([1, 1, 2]))
        size = draw(st.integers(1, 4))
        spots = []
        for _ in range(size):
            node = next((n for n in draw(st.permutations(sorted(nodes))) if free[n] >= gpu), None)
            if node is None:
                break
            free[node] -= gpu
            spots.append(node)
        if spots:
            # Some pods of it may be on their way out (deleted by someone, or
            # evicted last cycle): their room is releasing, so gangs get pipelined.
            releasing = draw(st.sampled_from([0, 0, 0, 1, len(spots)]))
            jobs.append(Job(f"run{j}", queue, draw(st.integers(1, len(spots))),
                            draw(st.integers(0, 1)), gpu, tuple(spots), releasing=releasing))
    for j in range(draw(st.integers(1, 4))):            # pending, wanting room
        size = draw(st.integers(1, 3))
        min_member = draw(st.integers(1, size))
        # Gated pods beyond the minimum: the gang may start without them, never with them.
        gated = draw(st.integers(0, size - min_member))
        jobs.append(Job(f"want{j}", draw(st.sampled_from(leaves)), min_member,
                        draw(st.integers(0, 2)), draw(st.sampled_from([1, 1, 2])), (None,) * size,
                        gated=gated))
    if draw(st.booleans()):                             # refused for a non-room reason
        doom = draw(st.sampled_from(DOOMS))
        size = 2 if doom in ("gated", "min-resources") else draw(st.integers(1, 2))
        jobs.append(Job("doomed", draw(st.sampled_from(leaves)), size, 2, 1, (None,) * size, doom))
    return Contended(nodes, queues, tuple(jobs), linger=draw(st.sampled_from([0, 0, 1])))


# -- sessions --------------------------------------------------------------------------------

def sessions(objects: list[dict[str, Any]], config: SchedulerConfig | None, linger: int = 0
             ) -> Iterator[tuple[CycleResult, MemoryCluster]]:
    """Each session's result and the cluster after it; between sessions bound
    pods start and pods being deleted are gone once they have been so for
    linger sessions more (a slow termination: the eviction still in flight
    when the next session opens)."""
    registry = register_builtins()
    config = config or default_config(registry)
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    deleting: dict[str, int] = {}       # pod -> sessions it has been on its way out
    for number in range(SESSIONS):
        if number:
            for pod in cluster.list(POD):
                meta, spec = pod["metadata"], pod.get("spec") or {}
                if meta.get("deletionTimestamp"):
                    key = f"{meta['namespace']}/{meta['name']}"
                    deleting[key] = deleting.get(key, 0) + 1
                    if deleting[key] > linger:
                        cluster.delete(POD, meta["namespace"], meta["name"])
                elif spec.get("nodeName") and (pod.get("status") or {}).get("phase") == "Pending":
                    cluster.replace({**pod, "status": {**pod["status"], "phase": "Running"}})
            clock.advance(config.schedule_period)
        yield scheduler.run_once(), cluster


# -- objects of any shape --------------------------------------------------------------------

# Any JSON value, small: what a field of the wrong shape may hold.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 12) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
# A replica count as it may be written, right or wrong.
counts = st.none() | st.integers(-2, 6) | st.sampled_from(["2", 1.5, True, [], {}])
