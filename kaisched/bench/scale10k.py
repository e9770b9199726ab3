"""The scale-10k bench scenario: the cluster a scheduler finds when it starts
against a busy 10,000-node API server.

10,000 nodes: 8,000 CPU nodes and 2,000 8-GPU nodes (tainted, as GPU pools
are, so only GPU pods land there), in racks of 40 over 4 zones. 300,000 pods:
290,000 running — one DaemonSet pod of the default scheduler per node, GPU
gangs packed onto the GPU nodes (1 GPU a pod; three quarters of the GPUs busy),
CPU gangs spread over the CPU nodes, each within its node's allocatable — and
10,000 pending in gangs of 1-64 (about a third of them GPU gangs). Every gang
has a PodGroup with minMember = its size, in one of 8 team queues, the teams'
use kept even. Sizes and shapes come from a seeded random.Random, so a scale
always gives the same objects.

The pending gangs fit, so the measured steady-state cycle places and evicts
nothing it should not: with seven eighths of the GPUs busy the GPU gangs that do not fit
make reclaim between the teams dominate every cycle, which would measure
reclaim, not the cache and the allocation of a steady cluster.

The objects are lean and share every sub-dict that several pods hold alike
(containers, status, annotations, labels, even the whole spec of same-shaped
pods on one node): the memory backend never mutates a stored object in place,
so sharing is safe and keeps the 300,000 pods well within the memory budget.
"""
from __future__ import annotations

import gc
import random
from typing import Any, Iterator

import attrs

from kaisched.api import labels as L
from kaisched.api.clock import ManualClock
from kaisched.api.constraints import HOSTNAME_KEY
from kaisched.cluster.kinds import POD, PODGROUP
from kaisched.cluster.memory import MemoryCluster

Obj = dict[str, Any]

SEED = 10_000
NODES = 10_000
RUNNING = 290_000
PENDING = 10_000
GPU_NODE_SHARE = 5              # one node in five is a GPU node
GPU_PODS_PER_NODE = 6           # running GPU pods per GPU node, on average (packed)
RACK_SIZE = 40
ZONES = 4
TEAMS = 8
GPU_GANG_CHANCE = 0.3           # of a pending gang
MAX_GANG = 64
# The steady-state step between the first and the measured cycle: whole
# running gangs finish (about this share of the running pods), as many pods
# arrive in new gangs.
CHURN_SHARE = 0.007

# evict-50k's cycle (eviction_step).
URGENT_CLASS, URGENT_PRIORITY = "urgent", 1000
NEW_QUEUE = "research"
EVICTION_GANG = 4

GPU = "nvidia.com/gpu"
ZONE = "topology.kubernetes.io/zone"
RACK = "topology.example.com/rack"
POOL = "node.example.com/pool"
PG_API = "scheduling.kaisched.io/v1alpha1"
CREATED_RUNNING = "2026-01-01T00:00:00Z"
CREATED_PENDING = "2026-01-01T06:00:00Z"


@attrs.frozen(slots=True)
class Shape:
    """A pod's requests: cpu in millicores, memory in MiB, GPUs."""

    cpu: int
    memory: int
    gpu: int = 0

    def containers(self) -> list[Obj]:
        requests = {"cpu": f"{self.cpu}m", "memory": f"{self.memory}Mi"}
        if self.gpu:
            requests[GPU] = str(self.gpu)
        return [{"name": "main", "image": "registry.example.com/train:1",
                 "resources": {"requests": requests}}]


# CPU gang shapes and how often each is drawn (small pods are the common case).
CPU_SHAPES: tuple[tuple[Shape, int], ...] = (
    (Shape(250, 512), 3), (Shape(500, 1024), 3), (Shape(1000, 4096), 3),
    (Shape(2000, 8192), 2), (Shape(4000, 16384), 1))
GPU_SHAPE = Shape(8000, 65536, 1)
DAEMON_SHAPE = Shape(100, 128)
CPU_NODE = Shape(64000, 262144)                  # 64 cpu, 256Gi
GPU_NODE = Shape(96000, 1048576, 8)              # 96 cpu, 1Ti, 8 GPUs
MAX_PODS = 110
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
GPU_TOLERATIONS = [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]
GPU_SELECTOR = {POOL: "gpu"}
DAEMON_CLASS = "system-node-critical"
DAEMON_PRIORITY = 2_000_001_000


def team(index: int) -> str:
    return f"team-{index}"


def gang_size(rng: random.Random) -> int:
    """1-64, log-uniform: as many gangs of 1-2 as of 32-64 (mean about 15 pods)."""
    return min(MAX_GANG, max(1, round(2 ** rng.uniform(0, 6))))


def sizes(rng: random.Random, total: int) -> Iterator[int]:
    """Gang sizes adding up to exactly total (the last one cut to fit)."""
    left = total
    while left > 0:
        size = min(gang_size(rng), left)
        left -= size
        yield size


def cpu_shape(rng: random.Random) -> Shape:
    shapes, weights = zip(*CPU_SHAPES, strict=True)
    return rng.choices(shapes, weights)[0]


class _Room:
    """What is still free on each node while running pods are laid out."""

    def __init__(self, count: int, shape: Shape) -> None:
        self.cpu = [shape.cpu] * count
        self.memory = [shape.memory] * count
        self.gpu = [shape.gpu] * count
        self.pods = [MAX_PODS] * count

    def take(self, i: int, shape: Shape) -> bool:
        if (self.cpu[i] < shape.cpu or self.memory[i] < shape.memory or self.gpu[i] < shape.gpu
                or self.pods[i] < 1):
            return False
        self.cpu[i] -= shape.cpu
        self.memory[i] -= shape.memory
        self.gpu[i] -= shape.gpu
        self.pods[i] -= 1
        return True


class _Builder:
    """Builds the lean objects, sharing what pods hold alike."""

    def __init__(self) -> None:
        self.running_status: Obj = {"phase": "Running"}
        self.pending_status: Obj = {"phase": "Pending"}
        self._containers: dict[Shape, list[Obj]] = {}
        self._specs: dict[tuple[Shape, str | None], Obj] = {}

    def containers(self, shape: Shape) -> list[Obj]:
        found = self._containers.get(shape)
        if found is None:
            found = self._containers[shape] = shape.containers()
        return found

    def spec(self, shape: Shape, node: str | None) -> Obj:
        """One spec for every pod of this shape on this node (or pending)."""
        found = self._specs.get((shape, node))
        if found is None:
            found = {"schedulerName": "kaisched", "containers": self.containers(shape)}
            if shape.gpu:
                found["tolerations"] = GPU_TOLERATIONS
                found["nodeSelector"] = GPU_SELECTOR
            if node is not None:
                found["nodeName"] = node
            self._specs[(shape, node)] = found
        return found

    def gang(self, name: str, namespace: str, size: int, running: bool) -> tuple[Obj, Obj]:
        """The gang's PodGroup and the metadata its pods share but for the name."""
        created = CREATED_RUNNING if running else CREATED_PENDING
        group: Obj = {"apiVersion": PG_API, "kind": "PodGroup",
                      "metadata": {"name": name, "namespace": namespace,
                                   "creationTimestamp": created},
                      "spec": {"minMember": size, "queue": namespace}}
        if running:
            # The status the previous leader wrote: a restarted scheduler finds
            # it and has nothing to write for a gang that still runs whole.
            group["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Scheduled", "status": "True", "reason": "Scheduled",
                                "message": f"{size}/{size} tasks scheduled",
                                "lastTransitionTime": CREATED_RUNNING}],
                "scheduled": size, "running": size, "succeeded": 0, "failed": 0, "pending": 0,
                "pendingSince": CREATED_RUNNING}
        shared = {"namespace": namespace, "labels": {"job-name": name},
                  "annotations": {L.POD_GROUP_ANNOTATION: name}, "creationTimestamp": created}
        return group, shared

    def pod(self, name: str, shared: Obj, spec: Obj, status: Obj) -> Obj:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **shared},
                "spec": spec, "status": status}


def nodes(count: int) -> list[Obj]:
    gpu_count = count // GPU_NODE_SHARE
    out = []
    for i in range(count):
        gpu = i >= count - gpu_count
        name = f"{'gpu' if gpu else 'cpu'}-{i:05d}"
        rack = i // RACK_SIZE
        shape = GPU_NODE if gpu else CPU_NODE
        labels = {HOSTNAME_KEY: name, ZONE: f"zone-{rack % ZONES}", RACK: f"rack-{rack:03d}",
                  POOL: "gpu" if gpu else "cpu", "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": "amd64",
                  "node.kubernetes.io/instance-type": "p4d.24xlarge" if gpu else "m6i.16xlarge"}
        allocatable = {"cpu": f"{shape.cpu // 1000}", "memory": f"{shape.memory // 1024}Gi",
                       "pods": str(MAX_PODS)}
        spec: Obj = {}
        if gpu:
            labels["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB"
            allocatable[GPU] = str(shape.gpu)
            spec["taints"] = [GPU_TAINT]
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels}, "spec": spec,
                    "status": {"allocatable": allocatable,
                               "conditions": [{"type": "Ready", "status": "True"}]}})
    return out


def scale_10k(scale: float) -> tuple[list[Obj], list[Obj]]:
    """Nodes, and the other objects: namespaces, queues, a priority class,
    PodGroups and pods (see the module's docstring)."""
    rng = random.Random(SEED)
    build = _Builder()
    node_objs = nodes(max(2, int(NODES * scale)))
    names = [n["metadata"]["name"] for n in node_objs]
    gpu_nodes = [i for i, n in enumerate(names) if n.startswith("gpu-")]
    cpu_nodes = [i for i, n in enumerate(names) if n.startswith("cpu-")]
    room = _Room(len(names), CPU_NODE)
    for i in gpu_nodes:
        room.cpu[i], room.memory[i], room.gpu[i] = GPU_NODE.cpu, GPU_NODE.memory, GPU_NODE.gpu

    objs: list[Obj] = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                        "metadata": {"name": DAEMON_CLASS}, "value": DAEMON_PRIORITY}]
    objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
    for t in range(TEAMS):
        objs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": team(t), "labels": {"team": team(t)}}})
        objs.append({"apiVersion": PG_API, "kind": "Queue", "metadata": {"name": team(t)},
                     "spec": {}})

    # One node-exporter pod per node, of the default scheduler: the foreign
    # pods every real cluster has, counted in the running total.
    daemon_meta = {"namespace": "kube-system", "labels": {"app": "node-exporter"},
                   "creationTimestamp": CREATED_RUNNING}
    for i, node_name in enumerate(names):
        room.take(i, DAEMON_SHAPE)
        objs.append(build.pod(f"node-exporter-{node_name}", daemon_meta,
                              {"schedulerName": "default-scheduler", "nodeName": node_name,
                               "priorityClassName": DAEMON_CLASS, "priority": DAEMON_PRIORITY,
                               "containers": build.containers(DAEMON_SHAPE)},
                              build.running_status))

    running = int(RUNNING * scale) - len(names)
    gpu_running = min(running, len(gpu_nodes) * GPU_PODS_PER_NODE)
    gangs = 0
    # Each running gang goes to the team using least of its kind of room so
    # far: the teams' use stays even, as a scheduler at its steady state keeps
    # it, so no team is over its fair share and the cycle reclaims nothing.
    gpu_use, cpu_use = [0] * TEAMS, [0] * TEAMS
    # GPU gangs packed: a node is filled before the next is used, as binpacking leaves them.
    cursor = 0
    for size in sizes(rng, gpu_running):
        least = gpu_use.index(min(gpu_use))
        gpu_use[least] += size
        name, namespace = f"run-{gangs:05d}", team(least)
        gangs += 1
        group, shared = build.gang(name, namespace, size, running=True)
        objs.append(group)
        for k in range(size):
            while not room.take(gpu_nodes[cursor], GPU_SHAPE):
                cursor += 1
            spec = build.spec(GPU_SHAPE, names[gpu_nodes[cursor]])
            objs.append(build.pod(f"{name}-{k}", shared, spec, build.running_status))
    # CPU gangs spread: pod after pod round the CPU nodes, skipping full ones.
    cursor = 0
    for size in sizes(rng, running - gpu_running):
        shape = cpu_shape(rng)
        least = cpu_use.index(min(cpu_use))
        cpu_use[least] += size * shape.cpu
        name, namespace = f"run-{gangs:05d}", team(least)
        gangs += 1
        group, shared = build.gang(name, namespace, size, running=True)
        objs.append(group)
        for k in range(size):
            for _ in range(len(cpu_nodes)):
                cursor = (cursor + 1) % len(cpu_nodes)
                if room.take(cpu_nodes[cursor], shape):
                    break
            else:
                raise ValueError(f"scale-10k: no CPU node left for pod {name}-{k}")
            spec = build.spec(shape, names[cpu_nodes[cursor]])
            objs.append(build.pod(f"{name}-{k}", shared, spec, build.running_status))

    objs.extend(pending_gangs(rng, build, "wait", int(PENDING * scale)))
    return node_objs, objs


def scale_50k(scale: float) -> tuple[list[Obj], list[Obj]]:
    """scale-10k's mix five times over: 50,000 nodes, 1,500,000 pods."""
    return scale_10k(5 * scale)


def evict_50k(scale: float) -> tuple[list[Obj], list[Obj]]:
    """scale-50k's cluster, where each team is guaranteed a sixteenth of the GPUs (about half what it runs)
    (its quota) and deserves no more (over-quota weight 0): the GPUs it runs
    beyond are borrowed, and a queue within its fair share may reclaim them.
    And the priority class of the gang that preempts (eviction_step)."""
    node_objs, objs = scale_50k(scale)
    quota = len(node_objs) // GPU_NODE_SHARE * GPU_NODE.gpu // 16
    for obj in objs:
        if obj["kind"] == "Queue":
            obj["spec"] = {"resources": {GPU: {"quota": quota, "overQuotaWeight": 0}}}
    objs.insert(0, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": URGENT_CLASS}, "value": URGENT_PRIORITY})
    return node_objs, objs


def eviction_step(cluster: MemoryCluster, node_count: int) -> None:
    """After evict-50k's steady cycle, two gangs of 4 one-GPU pods that only
    evictions can place, each kept to a GPU rack that is full: one of a new
    queue, within its fair share, that reclaims from the teams (over their
    quota: borrowing); one of team-0 at a higher priority that preempts its
    own team's pods."""
    build = _Builder()
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NEW_QUEUE}})
    cluster.create({"apiVersion": PG_API, "kind": "Queue", "metadata": {"name": NEW_QUEUE},
                    "spec": {}})
    first_gpu_rack = (node_count - node_count // GPU_NODE_SHARE) // RACK_SIZE
    for name, namespace, rack in (("reclaim-0", NEW_QUEUE, first_gpu_rack + 2),
                                  ("urgent-0", team(0), first_gpu_rack)):
        group, shared = build.gang(name, namespace, EVICTION_GANG, running=False)
        cluster.create(group)
        spec = {**build.spec(GPU_SHAPE, None),
                "nodeSelector": {**GPU_SELECTOR, RACK: f"rack-{rack:03d}"}}
        if name.startswith("urgent"):
            spec.update(priorityClassName=URGENT_CLASS, priority=URGENT_PRIORITY)
        for k in range(EVICTION_GANG):
            cluster.create(build.pod(f"{name}-{k}", shared, spec, build.pending_status))


def pending_gangs(rng: random.Random, build: _Builder, prefix: str, total: int) -> Iterator[Obj]:
    """PodGroups and pods of pending gangs of 1-64, total pods in all."""
    for g, size in enumerate(sizes(rng, total)):
        name, namespace = f"{prefix}-{g:05d}", team(rng.randrange(TEAMS))
        shape = GPU_SHAPE if rng.random() < GPU_GANG_CHANCE else cpu_shape(rng)
        group, shared = build.gang(name, namespace, size, running=False)
        yield group
        spec = build.spec(shape, None)
        for k in range(size):
            yield build.pod(f"{name}-{k}", shared, spec, build.pending_status)


def churn_step(cluster: MemoryCluster, scale: float, step: int = 1) -> None:
    """Between cycles: whole running gangs finish (pods and PodGroup gone, as
    with ttlSecondsAfterFinished: 0), as many pods arrive in new gangs. Each
    step (1, 2, ...) ends other gangs and names its new ones apart."""
    target = int(RUNNING * scale * CHURN_SHARE)
    finished = 0
    for n, group in enumerate(cluster.list(PODGROUP)):
        if finished >= target:
            break
        meta = group["metadata"]
        if not meta["name"].startswith("run-") or (n + step - 1) % 10:
            continue
        for k in range(group["spec"]["minMember"]):
            cluster.delete(POD, meta["namespace"], f"{meta['name']}-{k}")
        cluster.delete(PODGROUP, meta["namespace"], meta["name"])
        finished += group["spec"]["minMember"]
    prefix = "new" if step == 1 else f"new{step}"
    for obj in pending_gangs(random.Random(SEED + step), _Builder(), prefix, finished):
        cluster.create(obj)


def filled(size: float) -> tuple[ManualClock, MemoryCluster, int, int]:
    """A memory backend holding scale-10k's cluster size times over, as an API
    server a scheduler starts against (its objects listed once, as a running
    server holds them ordered): its clock, the backend, and how many
    nodes and pods it holds. The generated objects are let go (the backend
    has its own) and collected, so that they count against no peak."""
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    nodes, others = scale_10k(size)
    node_count, pods = len(nodes), sum(1 for o in others if o["kind"] == "Pod")
    for obj in nodes + others:
        cluster.create(obj)
    del nodes, others
    for kind in cluster.kinds():    # its cache ordered, as a running API server's watch cache
        cluster.list(kind)
    gc.collect()
    return clock, cluster, node_count, pods
