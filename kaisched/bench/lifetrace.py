"""The trace of `kaisched bench cluster-life`: one day of a GPU cluster's life, compressed,
and the manifests each of its jobs is made of.

A seeded mix, scaled to the cluster's nodes: gang training jobs (StatefulSets of 2-16 pods x
1-8 GPUs, their gang size in the `kaisched.io/min-member` annotation, so that their controller
makes an evicted pod again as a training operator would), short single-pod batch/v1 Jobs, a few
elastic StatefulSets (more pods than their minimum), fractional-GPU inference Deployments behind
a PodDisruptionBudget, and one big gang that needs most of the cluster. Three teams' queues,
two priorities. The same trace is run under either scheduler: only the schedulerName differs,
and where the scheduler shares no GPU (kube-scheduler) an inference pod asks a whole one.
"""
from __future__ import annotations

import math
import random
from typing import Any

import attrs

Obj = dict[str, Any]

GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 8
TEAMS = ("team-a", "team-b", "team-c")
LOW, HIGH = "cl-life-low", "cl-life-high"
PRIORITIES = {LOW: 50, HIGH: 90}
JOB_LABEL = "kaisched.io/bench-job"         # every pod of a trace job carries its job's name
HOLLOW = "k8s-up/hollow"                    # the hollow nodes' label (k8s-up.sh)
MIN_MEMBER = "kaisched.io/min-member"
GRACE_SECONDS = 5                           # a short grace period: terminations are quick


@attrs.frozen
class TraceJob:
    """One job of the trace: what it asks, when it arrives and how long it runs once started
    (seconds from the run's start)."""
    name: str
    kind: str               # gang | batch | elastic | inference | big
    queue: str
    priority: str
    pods: int
    gpus: int               # whole GPUs a pod asks (inference: 0, it asks a fraction)
    min_member: int
    arrive: float
    run: float
    fraction: float = 0.0

    @property
    def whole_gpu(self) -> bool:
        return self.fraction == 0.0

    @property
    def gang(self) -> bool:
        return self.min_member > 1


@attrs.frozen
class Trace:
    seed: int
    nodes: int
    horizon: float
    jobs: tuple[TraceJob, ...]

    @property
    def gpus(self) -> int:
        return self.nodes * GPUS_PER_NODE


def make_trace(seed: int, nodes: int, horizon: float) -> Trace:
    """The seeded trace for a cluster of nodes (two of which fail during the run: the big gang
    fits on the rest). Gang demand matches the GPUs over the arrival window, so jobs queue
    at its peaks and all can finish by the horizon."""
    rng = random.Random(seed)
    capacity = nodes * GPUS_PER_NODE
    jobs: list[TraceJob] = []
    for i in range(max(1, nodes // 4)):
        jobs.append(TraceJob(f"infer-{i}", "inference", TEAMS[i % 3], HIGH, 2, 0, 1,
                             round(rng.uniform(0, 0.1) * horizon, 1), round(0.4 * horizon, 1),
                             fraction=0.5))
    for i in range(max(2, nodes // 2)):
        jobs.append(TraceJob(f"batch-{i}", "batch", rng.choice(TEAMS), LOW, 1, 1, 1,
                             round(rng.uniform(0, 0.6) * horizon, 1),
                             round(rng.uniform(0.05, 0.1) * horizon, 1)))
    for i in range(2):
        jobs.append(TraceJob(f"elastic-{i}", "elastic", TEAMS[(i + 1) % 3], LOW, 4, 2, 2,
                             round(rng.uniform(0.05, 0.5) * horizon, 1),
                             round(rng.uniform(0.15, 0.25) * horizon, 1)))
    big_pods = big_gang_pods(nodes)
    jobs.append(TraceJob("big-0", "big", TEAMS[0], HIGH, big_pods, GPUS_PER_NODE, big_pods,
                         round(0.4 * horizon, 1), round(0.15 * horizon, 1)))
    window, demand, i = 0.6 * horizon, 0.0, 0
    while demand < capacity * window and i < 400:
        gpus = rng.choice((1, 2, 4, 8))
        sizes = [n for n in (2, 4, 8, 16) if n * gpus <= capacity // 2] or [2]
        pods = rng.choice(sizes)
        run = round(rng.uniform(0.1, 0.25) * horizon, 1)
        jobs.append(TraceJob(f"train-{i}", "gang", rng.choice(TEAMS),
                             HIGH if rng.random() < 0.3 else LOW, pods, gpus, pods,
                             round(rng.uniform(0, 0.6) * horizon, 1), run))
        demand += pods * gpus * run
        i += 1
    jobs.sort(key=lambda j: (j.arrive, j.name))
    return Trace(seed, nodes, horizon, tuple(jobs))


# -- manifests ------------------------------------------------------------------------------

def pod_template(job: TraceJob, scheduler: str, sharing: bool) -> Obj:
    """The pods of a job: a pause container asking little cpu and memory (a hollow node has
    1 cpu) and its GPUs; a fraction where the scheduler shares GPUs, else a whole one."""
    requests: dict[str, str] = {"cpu": "10m", "memory": "16Mi"}
    limits: dict[str, str] = {}
    annotations: dict[str, str] = {}
    gpus = job.gpus if job.whole_gpu or not sharing else 0
    if not job.whole_gpu and not sharing:
        gpus = 1
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    if not job.whole_gpu and sharing:
        annotations["gpu-fraction"] = str(job.fraction)
    labels = {JOB_LABEL: job.name, "kaisched.io/queue": job.queue}
    return {"metadata": {"labels": labels, **({"annotations": annotations} if annotations else {})},
            "spec": {"schedulerName": scheduler, "priorityClassName": job.priority,
                     "terminationGracePeriodSeconds": GRACE_SECONDS,
                     "nodeSelector": {HOLLOW: "true"},
                     "restartPolicy": "Never" if job.kind == "batch" else "Always",
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": requests,
                                                   **({"limits": limits} if limits else {})}}]}}


def manifests(job: TraceJob, namespace: str, scheduler: str, sharing: bool,
              name: str | None = None) -> list[Obj]:
    """The objects the job is made of, in creation order (a PDB before its Deployment).
    name: the owner's name (a batch Job made again after an eviction gets a new one)."""
    name = name or job.name
    template = pod_template(job, scheduler, sharing)
    meta: Obj = {"name": name, "namespace": namespace, "labels": {JOB_LABEL: job.name}}
    selector = {"matchLabels": {JOB_LABEL: job.name}}
    if job.kind == "batch":
        return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                 "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                          "template": template}}]
    if job.kind == "inference":
        return [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta,
                 "spec": {"minAvailable": job.pods - 1, "selector": selector}},
                {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                 "spec": {"replicas": job.pods, "selector": selector, "template": template}}]
    meta["annotations"] = {MIN_MEMBER: str(job.min_member)}
    # Parallel: an OrderedReady StatefulSet makes pod i+1 only once pod i runs, which no
    # gang scheduler can place whole.
    return [{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
             "spec": {"replicas": job.pods, "serviceName": name, "selector": selector,
                      "podManagementPolicy": "Parallel", "template": template}}]


def queues(nodes: int) -> list[Obj]:
    """The three teams' queues. The first team, whose is the big gang, has the GPUs of the
    big gang as its quota (a gang beyond its queue's share would start only when the
    others want nothing); the other two split the rest. Beyond quota, what is free is
    shared by weight."""
    big = big_gang_pods(nodes) * GPUS_PER_NODE
    rest = max(0, nodes * GPUS_PER_NODE - big) // (len(TEAMS) - 1)
    return [{"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
             "metadata": {"name": team},
             "spec": {"resources": {GPU: {"quota": big if team == TEAMS[0] else rest}}}}
            for team in TEAMS]


def big_gang_pods(nodes: int) -> int:
    """Most of the cluster (60% of its nodes), not all of it: two nodes fail."""
    return max(2, math.ceil(nodes * 0.6))


def priority_classes() -> list[Obj]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": value,
             "description": "kaisched bench cluster-life"} for name, value in PRIORITIES.items()]
