"""What a scenario holds once checked: node pools, queues, priority classes
and jobs, as frozen values the simulation, the operators and the report read."""
from __future__ import annotations

import enum
from typing import Any

import attrs

from kaisched.api import workloadkinds as K
from kaisched.cluster.kinds import PODGROUP
from kaisched.sim.fields import amount

# Room left in a 63-character pod name for the suffixes the operators add.
MAX_JOB_NAME = 40


class JobKind(str, enum.Enum):
    """The kinds a scenario's jobs may be: each simulated kind of the table of
    workload kinds, and a plain gang."""

    PYTORCH = K.PYTORCH_JOB.kind
    TF = K.TF_JOB.kind
    MPI = K.MPI_JOB.kind
    JOBSET = K.JOBSET.kind
    RAY = K.RAY_JOB.kind
    JOB = K.JOB.kind
    GANG = PODGROUP.kind       # a plain gang: a PodGroup and bare pods that name it
    XGBOOST = K.XGBOOST_JOB.kind
    JAX = K.JAX_JOB.kind
    TRAINJOB = K.TRAIN_JOB.kind    # Kubeflow Trainer v2, through its JobSet
    LWS = K.LEADER_WORKER_SET.kind     # leader replicas = groups; workers spread evenly over them
    RAYSERVICE = K.RAY_SERVICE.kind


_SIMULATED = {w.kind: w for w in K.KINDS if w.simulated}
# The table's entry of each kind but the plain gang, which no operator makes.
WORKLOADS: dict[JobKind, K.WorkloadKind] = {
    kind: _SIMULATED[kind.value] for kind in JobKind if kind.value in _SIMULATED}
# Role names each kind accepts; None: any DNS label (a Ray cluster's "head" among them).
ROLES: dict[JobKind, tuple[str, ...] | None] = {
    kind: None if kind not in WORKLOADS or WORKLOADS[kind].open_roles else WORKLOADS[kind].roles
    for kind in JobKind}
ELASTIC_KINDS = (JobKind.PYTORCH, JobKind.RAY)
# The roles an elastic job keeps whole: its minimum is these and elastic.minReplicas workers.
ELASTIC_LEADS = frozenset(r for k in ELASTIC_KINDS for r in WORKLOADS[k].leading)
# gangApi: the API a PodGroup job declares its gang in (the first is the default):
# kaisched's, the upstream Workload API of each Kubernetes version (simulate
# with that version's --kube-version: others refuse it), or KAI's.
GANG_APIS = ("scheduling.kaisched.io/v1alpha1", "scheduling.k8s.io/v1alpha1",
             "scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1", "scheduling.run.ai/v2alpha2")
# startupPolicy: the start orders each kind's operator knows (the first is its default).
STARTUP_POLICIES: dict[JobKind, tuple[str, ...]] = {
    kind: w.start.orders for kind, w in WORKLOADS.items() if w.start is not None}


@attrs.frozen
class VolumeSpec:
    """A volume each pod of a role gets a claim of its own for (an ephemeral
    volume: the claim `<pod>-<name>` is made with the pod)."""
    name: str
    storage_class: str
    size: str


@attrs.frozen
class StorageClassSpec:
    """A StorageClass and how the simulated provisioner behaves for it."""
    name: str
    provisioner: str
    binding_mode: str = "WaitForFirstConsumer"
    allowed_topologies: tuple[tuple[str, tuple[str, ...]], ...] = ()   # label -> values
    provisioning_delay: float = 0.0
    failure: str | None = None          # every provisioning attempt fails, saying this


@attrs.frozen
class DeviceSpec:
    """Devices one DRA driver publishes on each node of a pool (a ResourceSlice
    per node): count alike devices, with these attributes and capacities."""
    driver: str
    count: int
    attributes: tuple[tuple[str, Any], ...] = ()       # name -> string, int or bool
    capacity: tuple[tuple[str, str], ...] = ()         # name -> quantity


@attrs.frozen
class ClaimSpec:
    """A ResourceClaim each pod of a role gets from a template of its own:
    count devices of the driver's DeviceClass, passing the CEL selector."""
    name: str
    driver: str
    count: int = 1
    selector: str | None = None


@attrs.frozen
class RoleSpec:
    name: str
    replicas: int
    requests: tuple[tuple[str, str], ...]      # resource name -> quantity, canonical names
    volumes: tuple[VolumeSpec, ...] = ()
    claims: tuple[ClaimSpec, ...] = ()
    # Part of a GPU, as KAI's annotations ask for it: gpu-fraction or gpu-memory,
    # and gpu-fraction-num-devices (the annotations' names and values).
    gpu_share: tuple[tuple[str, str], ...] = ()

    def amount(self, resource: str) -> float:
        return sum(amount(resource, q) for n, q in self.requests if n == resource)

    @property
    def shared_gpus(self) -> float:
        """GPUs the share asks of each pod, a gpu-memory share as MiB (its part of a GPU
        is known only where it lands); 0 without a share."""
        share = dict(self.gpu_share)
        devices = int(share.get("gpu-fraction-num-devices", "1"))
        return float(share.get("gpu-fraction", "0")) * devices


@attrs.frozen
class JobSpec:
    name: str
    kind: JobKind
    queue: str
    namespace: str
    arrival: float                 # seconds after the start
    duration: float                # how long its pods run once started
    roles: tuple[RoleSpec, ...]
    priority_class: str | None = None
    min_available: int | None = None
    elastic_min: int | None = None     # PyTorch elasticPolicy / Ray worker minReplicas
    startup_policy: str | None = None  # JobSet / MPIJob / LeaderWorkerSet start order
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[tuple[tuple[str, str], ...], ...] = ()
    where: str = ""                    # how error messages name it: "jobs[2] (bert)"
    gang_api: str = GANG_APIS[0]       # PodGroup jobs: the API their gang is declared in
    # Seconds each pod may run, counted from its start: its activeDeadlineSeconds,
    # which the kubelet enforces (None: no limit). May be less than duration.
    runtime_limit: float | None = None

    @property
    def pods(self) -> int:
        return sum(r.replicas for r in self.roles)

    def total(self, resource: str) -> float:
        return sum(r.replicas * r.amount(resource) for r in self.roles)

    def minimum(self, resource: str) -> float:
        """What the gang's minimum asks for: whole roles in order, trimmed to
        minAvailable as the PodGrouper trims subgroups (leading roles first).
        A LeaderWorkerSet's gang is one group: a leader and its workers."""
        if self.kind is JobKind.LWS:
            groups = self.roles[0].replicas
            return sum(r.amount(resource) * r.replicas / groups for r in self.roles)
        left = self.gang_min()
        total = 0.0
        for role in self.roles:
            take = min(role.replicas, left)
            total += take * role.amount(resource)
            left -= take
        return total

    def gang_min(self) -> int:
        if self.min_available is not None:
            return min(self.min_available, self.pods)
        if self.kind is JobKind.JOB:
            return 1
        if self.kind is JobKind.LWS:
            return self.pods // self.roles[0].replicas
        if self.elastic_min is not None:
            leaders = sum(r.replicas for r in self.roles if r.name in ELASTIC_LEADS)
            return leaders + self.elastic_min
        return self.pods


@attrs.frozen
class NodePool:
    name: str
    count: int
    capacity: tuple[tuple[str, str], ...]
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[tuple[str, str, str], ...] = ()      # key, value, effect
    devices: tuple[DeviceSpec, ...] = ()


@attrs.frozen
class NodeGroup:
    """Nodes an autoscaler adds and removes: pool is the template (its count
    the group's max), of which min are there from the start."""
    pool: NodePool
    min: int
    max: int
    provisioning_delay: float       # seconds from a scale-up to the nodes' coming up
    cost_per_hour: float = 0.0      # per node

    @property
    def name(self) -> str:
        return self.pool.name


@attrs.frozen
class QueueSpec:
    name: str
    parent: str | None = None
    priority: int = 100
    resources: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()

    def limit(self, resource: str) -> float | None:
        for name, fields in self.resources:
            if name == resource:
                for key, value in fields:
                    if key == "limit":
                        return amount(name, value)
        return None

    def quota(self, resource: str) -> float:
        for name, fields in self.resources:
            if name == resource:
                for key, value in fields:
                    if key == "quota":
                        return amount(name, value)
        return 0.0


@attrs.frozen
class Scenario:
    name: str
    description: str
    node_pools: tuple[NodePool, ...]            # the nodes the scenario adds
    queues: tuple[QueueSpec, ...]
    priority_classes: tuple[tuple[str, int], ...]
    jobs: tuple[JobSpec, ...]
    until: float | None = None
    seed: int | None = None
    source: str = "scenario"
    storage_classes: tuple[StorageClassSpec, ...] = ()
    base_pools: tuple[NodePool, ...] = ()       # the nodes of the snapshot it starts from
    remaining: Remaining | None = None          # runtimes left to the snapshot's jobs
    node_groups: tuple[NodeGroup, ...] = ()     # what a simulated autoscaler may add
    scale_down_after: float = 600.0             # an unneeded group node goes after this long

    @property
    def pools(self) -> tuple[NodePool, ...]:
        """Every node, the snapshot's and the scenario's own."""
        return self.base_pools + self.node_pools

    @property
    def reachable_pools(self) -> tuple[NodePool, ...]:
        """Every node there may be: the pools, and each node group at its max."""
        return self.pools + tuple(g.pool for g in self.node_groups)

    def capacity(self, resource: str) -> float:
        """What every node there may be offers, node groups at their max."""
        return sum(p.count * sum(amount(resource, q) for n, q in p.capacity if n == resource)
                   for p in self.reachable_pools)

    def queue(self, name: str) -> QueueSpec | None:
        return next((q for q in self.queues if q.name == name), None)


@attrs.frozen
class Remaining:
    """A log-normal distribution of run times, in seconds, clipped to [low, high]."""
    median: float
    sigma: float
    low: float
    high: float


@attrs.frozen
class Base:
    """The cluster a scenario starts from (a snapshot), as the scenario's
    checks see it: its nodes summarised as pools, its queues and classes."""
    name: str
    pools: tuple[NodePool, ...]
    queues: tuple[QueueSpec, ...]
    priority_classes: tuple[tuple[str, int], ...]
    jobs: frozenset[tuple[str, str]] = frozenset()      # namespace, name of its jobs
