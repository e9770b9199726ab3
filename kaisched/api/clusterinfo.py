"""ClusterInfo: everything one session decides over."""
from __future__ import annotations

from typing import Collection, Iterable, Mapping

import attrs
import numpy as np

from kaisched.api.budgets import DisruptionBudget
from kaisched.api.constraints import NO_RULES, PodRules
from kaisched.api.domains import Domains
from kaisched.api.drainventory import Devices
from kaisched.api.gpuask import MEMORY_ASK, GpuShare, gpu_memory_label
from kaisched.api.gpudevices import HOLD_KINDS, ONE_GPU, Change, SharedGpus, apply_holds
from kaisched.api.job import JobInfo
from kaisched.api.ledger import Ledger
from kaisched.api.node import NodeInfo, NodeSpec, NodeTable, resource_dims
from kaisched.api.nodeshapes import NodeShapes
from kaisched.api.provisioning import CapacityRequest
from kaisched.api.queue import QueueInfo, build_queue_tree
from kaisched.api.queuetree import QueueTree
from kaisched.api.resource import GPU, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import (
    OCCUPYING_STATUSES,
    JobKey,
    Keyed,
    NodeName,
    PodKey,
    QueueName,
    TaskStatus,
)
from kaisched.api.volumes import NO_STORAGE, Storage


@attrs.frozen(slots=True)
class ForeignPod(Keyed):
    """A pod of another scheduler: room on its node, and what the placement
    rules of other pods read (labels, its own anti-affinity, host ports)."""

    node_name: NodeName
    resreq: Resource
    releasing: bool = False
    key: PodKey = PodKey("")
    labels: tuple[tuple[str, str], ...] = ()
    rules: PodRules = NO_RULES
    # A reservation pod holding a shared GPU: its group (its GPU is counted as
    # the device's, not in resreq), and whether KAI made it.
    reserves: str | None = None
    kai: bool = False
    gpu: GpuShare | None = None     # the share of GPUs it holds (KAI's, another shard's)
    uid: str = ""

    @property
    def status(self) -> TaskStatus:
        """As a task on its node would be (what shared GPUs count it by)."""
        return TaskStatus.RELEASING if self.releasing else TaskStatus.RUNNING


@attrs.frozen(slots=True)
class RulesInPlay:
    """Which pod labels any placement rule of the cluster reads: pods that agree
    on these (and on their namespace) answer every rule alike."""

    label_keys: frozenset[str] = frozenset()
    any_rule: bool = False        # some pod has inter-pod affinity or spread constraints
    host_ports: bool = False      # some pod asks for a host port

    @classmethod
    def of(cls, rules: Iterable[PodRules]) -> RulesInPlay:
        seen: set[int] = set()
        keys: set[str] = set()
        any_rule = ports = False
        for found in rules:
            if not found or id(found) in seen:
                continue
            seen.add(id(found))
            ports = ports or bool(found.host_ports)
            for matcher in found.matchers():
                any_rule = True
                if matcher.selector is not None:
                    keys |= matcher.selector.keys()
        return cls(frozenset(keys), any_rule, ports)


@attrs.define(eq=False, repr=False)
class ClusterInfo:
    nodes: dict[NodeName, NodeInfo]
    table: NodeTable
    jobs: dict[JobKey, JobInfo]
    queues: dict[QueueName, QueueInfo]
    tree: QueueTree
    priority_classes: dict[str, int] = attrs.field(factory=dict)
    now: float = 0.0
    foreign: tuple[ForeignPod, ...] = ()
    namespace_labels: Mapping[str, Mapping[str, str]] = attrs.field(factory=dict)
    _rules: RulesInPlay | None = None
    _domains: dict[str, Domains] = attrs.field(factory=dict)   # node labels: shared by clones
    # The moves a session made on the cache's own model (None: nobody to hand it back to).
    journal: list[tuple[TaskInfo, TaskInfo]] | None = None
    # Jobs a cycle must look at (None: every job; the cache knows better).
    active: set[JobKey] | None = None
    moved: set[JobKey] = attrs.field(factory=set)     # jobs whose tasks moved since lent
    _ledger: Ledger | None = None
    storage: Storage = NO_STORAGE     # claims, volumes, classes, and who uses each claim
    _active_list: tuple[tuple[int, ...], list[JobInfo]] = ((), [])
    # Dynamic Resource Allocation: devices, classes, claims (empty: none in play).
    devices: Devices = attrs.field(factory=Devices)
    _claimants: bool | None = None      # some task names a ResourceClaim
    # KAI Topology objects: each one's node labels, outermost level first.
    topologies: tuple[tuple[str, ...], ...] = ()
    # Shared GPUs: each node's devices that fractional pods share (empty: none).
    gpus: SharedGpus = attrs.field(default=None)
    _sharers: bool | None = None        # some task asks for part of a GPU
    _least_gpu_memory: float | None = None
    _gpu_memory_rows: dict[int, np.ndarray] | None = None     # see gpu_memory_rows
    # charge() per (requests, share charged), with the least GPU memory it was
    # worked out with: asked per placement, the same for alike sharers.
    _charges: dict[tuple[Resource, Resource], tuple[float, Resource]] = attrs.field(factory=dict)
    _shapes: NodeShapes | None = None   # what the static filters read, grouped (kept by the cache)
    # Each queue's normalised usage over its window, per resource (fair share
    # with memory, kaisched.api.decayedusage); None: not configured, fair shares as ever.
    usage: Mapping[QueueName, Mapping[str, float]] | None = None
    # PodDisruptionBudgets: what evicting a pod they select may not break.
    budgets: tuple[DisruptionBudget, ...] = ()
    # The capacity asked of a cluster autoscaler for each gang (ProvisioningRequests).
    capacity_requests: Mapping[JobKey, CapacityRequest] = attrs.field(factory=dict)

    # kaisched PodGroups still Pending that no pod names yet (jobs with no tasks):
    # enqueued all the same, so a controller that makes its pods only once its
    # PodGroup is Inqueue (Volcano's) goes on.
    waiting_groups: tuple[JobInfo, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.gpus is None:
            self.gpus = SharedGpus(self.nodes)

    def __repr__(self) -> str:
        # A summary: the whole graph (every node, job and task, the numpy tables) ran
        # to tens of megabytes, and a failing test's report printed it.
        return (f"<ClusterInfo: {len(self.nodes)} nodes, {len(self.jobs)} jobs, "
                f"{len(self.queues)} queues>")

    @classmethod
    def assemble(cls, nodes: Iterable[NodeSpec], jobs: Iterable[JobInfo],
                 queues: Iterable[QueueInfo], priority_classes: dict[str, int] | None = None,
                 foreign: Iterable[ForeignPod] = (), now: float = 0.0,
                 namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
                 rules: RulesInPlay | None = None) -> ClusterInfo:
        """Lay out the node table and account every pod that occupies a node.

        A task whose node is unknown keeps its status but takes no room.
        """
        specs = sorted(nodes, key=lambda s: s.name)
        jobs = list(jobs)
        names: set[str] = set()
        for spec in specs:
            names.update(spec.allocatable.names())
        foreign = tuple(foreign)
        requests = {task.resreq for job in jobs for task in job.tasks.values()}  # few distinct
        requests.update(pod.resreq for pod in foreign)
        for res in requests:
            names.update(res.names())
        table = NodeTable(specs, resource_dims(sorted(names)))
        node_infos = {s.name: NodeInfo(s, i, table) for i, s in enumerate(specs)}
        for pod in foreign:
            idx = table.index.get(pod.node_name)
            if idx is not None:
                vec = table.vector(pod.resreq)
                table.add_used(idx, vec)
                if pod.releasing:
                    table.add_releasing(idx, vec)
        # Account every placed task at once: one scatter-add, not a row update each;
        # each task's row of requests picked by number from the few distinct ones.
        rows, asks, releasing = [], [], []
        distinct: dict[Resource, int] = {}
        sharers = []
        for job in jobs:
            for task in job.tasks.values():
                if task.gpu is not None:
                    sharers.append(task)
                if task.node_name and task.status in OCCUPYING_STATUSES:
                    node = node_infos.get(task.node_name)
                    if node is not None:
                        node.tasks[task.key] = task
                        rows.append(node.index)
                        asks.append(distinct.setdefault(task.resreq, len(distinct)))
                        releasing.append(task.status is TaskStatus.RELEASING)
        if rows:
            vectors = np.array([table.vector(res) for res in distinct])
            table.add_many(np.array(rows), vectors[np.array(asks)], np.array(releasing))
        gpus = SharedGpus(node_infos)
        for pod in foreign:
            if pod.reserves is not None:
                apply_holds(table, gpus.reserve(pod.node_name, pod.reserves, pod.key, pod.kai, True))
            elif pod.gpu is not None:
                apply_holds(table, gpus.move(None, pod))
        for task in sharers:
            apply_holds(table, gpus.move(None, task))
        queue_map, tree = build_queue_tree(queues)
        return cls(node_infos, table, {j.key: j for j in jobs}, queue_map, tree,
                   dict(priority_classes or {}), now, foreign, dict(namespace_labels or {}),
                   rules, gpus=gpus, sharers=bool(sharers))

    def clone(self) -> ClusterInfo:
        """A copy a session may change: tasks and specs are shared (frozen),
        accounting and indexes are copied. Never a deepcopy."""
        table = self.table.copy()
        nodes = {n: NodeInfo(info.spec, info.index, table, dict(info.tasks))
                 for n, info in self.nodes.items()}
        jobs = {k: j.clone() for k, j in self.jobs.items()}
        # No device in play: a fresh inventory, and claimants looked for if asked.
        devices, claimants = (self.devices.copy(), self._claimants) if self.devices \
            else (Devices(), None)
        other = ClusterInfo(nodes, table, jobs, self.queues, self.tree,
                            self.priority_classes, self.now, self.foreign, self.namespace_labels,
                            self._rules, self._domains, topologies=self.topologies,
                            gpus=self.gpus.copy(nodes), sharers=self._sharers,
                            usage=self.usage, budgets=self.budgets,
                            capacity_requests=self.capacity_requests,
                            waiting_groups=self.waiting_groups, devices=devices,
                            claimants=claimants)
        other.storage = self.storage
        return other

    def claimants(self) -> bool:
        """Some task names a ResourceClaim (the cache counts them as pods come
        and go; else looked for once)."""
        if self._claimants is None:
            self._claimants = any(t.claims for job in self.jobs.values() for t in job.tasks.values())
        return self._claimants

    def sharers(self) -> bool:
        """Some task asks for part of a GPU (the cache counts them as pods come
        and go; else looked for once)."""
        if self._sharers is None:
            self._sharers = any(t.gpu is not None for job in self.jobs.values()
                                for t in job.tasks.values())
        return self._sharers

    def sharing(self) -> bool:
        """GPUs are shared, or asked to be: the sharing rules have work to do."""
        return bool(self.gpus) or self.sharers()

    def charge(self, task: TaskInfo) -> Resource:
        """What the task's queue is charged (TaskInfo.charge), a pending
        gpu-memory pod's GPUs as its part of the smallest labelled GPU (what it
        may be charged at most, once it lands): what the checks of a job as a
        whole count; the check as it is placed counts its part of the node's
        GPU (charged_on)."""
        gpu = task.gpu
        if gpu is None:
            return task.resreq
        key, least = (task.resreq, gpu.charge), self.least_gpu_memory()
        found = self._charges.get(key)
        if found is None or found[0] != least:
            found = self._charges[key] = (least, self.resolved(task.charge))
        return found[1]

    def resolved(self, amount: Resource) -> Resource:
        """An amount with the MiB pending gpu-memory pods ask counted as GPUs."""
        mib = amount.get(MEMORY_ASK)
        if not mib:
            return amount
        least = self.least_gpu_memory()
        gpus = Resource.of({GPU: mib / least}) if least else Resource()
        return amount - Resource.of({MEMORY_ASK: mib}) + gpus

    def least_gpu_memory(self) -> float:
        """The memory of the smallest GPU a node's label tells (0: none does)."""
        if self._least_gpu_memory is None:
            found = [m for m in (gpu_memory_label(n.spec.labels) for n in self.nodes.values()) if m]
            self._least_gpu_memory = float(min(found)) if found else 0.0
        return self._least_gpu_memory

    def gpu_memory_rows(self) -> dict[int, np.ndarray]:
        """The nodes by the memory of their GPUs, as their labels tell it: for
        each memory, a mask over the table's rows (nodes that tell none are in
        no mask)."""
        if self._gpu_memory_rows is None:
            memories = np.array([gpu_memory_label(self.nodes[n].spec.labels) or 0
                                 for n in self.table.names], dtype=np.int64)
            self._gpu_memory_rows = {int(m): memories == m for m in np.unique(memories) if m}
        return self._gpu_memory_rows

    def charged_on(self, task: TaskInfo, node: NodeName) -> TaskInfo:
        """The task as its queue would be charged for it on the node: a
        pending gpu-memory share as its part of that node's GPU, not of the
        smallest (see charge); any other task as it is."""
        share = task.gpu
        if share is None or share.memory is None or share.portion is not None:
            return task
        gpus = self.gpus.gpus(node)
        return task.evolve(gpu=share.at(gpus.memory if gpus is not None else None))
    def node_shapes(self) -> NodeShapes:
        """Readiness, and the nodes grouped by labels and taints, in table order
        (made once, then kept up to date by respec; see kaisched.api.nodeshapes)."""
        if self._shapes is None:
            self._shapes = NodeShapes([n.spec for n in self.nodes.values()])
        return self._shapes

    def domains(self, key: str) -> Domains:
        """The nodes grouped by the label key, in table order."""
        found = self._domains.get(key)
        if found is None:
            found = self._domains[key] = Domains(key, [n.spec for n in self.nodes.values()])
        return found

    def rules_in_play(self) -> RulesInPlay:
        """What the pods' rules read (computed once, unless the cache, which
        knows its distinct placements, passed it in)."""
        if self._rules is None:
            self._rules = RulesInPlay.of(
                [*(t.placement.rules for job in self.jobs.values() for t in job.tasks.values()),
                 *(p.rules for p in self.foreign)])
        return self._rules

    def ledger(self) -> Ledger:
        """Sums over every job as it was before any move (see kaisched.api.ledger)."""
        if self._ledger is None:
            self._ledger = Ledger.of(self.jobs.values())
        return self._ledger

    def set_active(self, keys: set[JobKey]) -> None:
        self.active, self._active_list = keys, ((), [])

    # -- what the cache, which keeps this model up to date, tells it --------------------
    def lend(self, rules: RulesInPlay, ledger: Ledger) -> None:
        """The model is lent to a session: what the pods' rules read and the sums
        over the jobs, as the cache keeps them, and an empty journal of moves."""
        self._rules, self._ledger = rules, ledger
        self.moved = set()
        self.journal = []

    def set_claimants(self, some: bool) -> None:
        """Whether some task names a ResourceClaim, as the cache counted it."""
        self._claimants = some

    def set_sharers(self, some: bool) -> None:
        """Whether some task asks for part of a GPU, as the cache counted it."""
        self._sharers = some

    def respec(self, node: NodeInfo, spec: NodeSpec) -> None:
        """A node says something else now (its row stays): when its labels
        changed, the domains of every level are grouped anew (and the least
        GPU memory a label tells is looked for again)."""
        if node.spec.labels != spec.labels:
            self._domains.clear()
            self._least_gpu_memory = self._gpu_memory_rows = None
        if self._shapes is not None:
            self._shapes.update(node.index, spec)
        node.spec = spec

    def relay(self, nodes: dict[NodeName, NodeInfo], table: NodeTable, gpus: SharedGpus) -> None:
        """The nodes laid out again (added, removed, or a new resource column)."""
        self.nodes, self.table, self.gpus = nodes, table, gpus
        self._domains = {}
        self._shapes = None
        self._least_gpu_memory = self._gpu_memory_rows = None

    def share_moved(self, old: TaskInfo | None, new: TaskInfo | None) -> list[Change]:
        """A sharer the cache saw change: its devices follow (what their GPUs
        change in the table is the caller's to count)."""
        return self.gpus.move(old, new)

    def active_jobs(self) -> list[JobInfo]:
        """The jobs a cycle looks at, by key: those unsettled (something waits,
        a minimum does not hold, a problem), those changed since the last
        cycle, and those whose tasks moved in this one. Every job, when the
        cluster was not kept by the cache (nothing tells which changed)."""
        # Asked by most actions; what it answers changes only as tasks move
        # (moved only grows) or when the cache sets the active jobs anew.
        version = (len(self.moved), len(self.jobs))
        if self._active_list[0] != version:
            jobs = self.jobs
            keys = jobs.keys() if self.active is None else (self.active | self.moved) & jobs.keys()
            self._active_list = (version, [jobs[k] for k in sorted(keys)])
        return list(self._active_list[1])

    def usable_nodes(self) -> np.ndarray:
        """Mask of nodes that are Ready and not cordoned, in table order."""
        return self.node_shapes().usable()

    def total_allocatable(self) -> Resource:
        """What usable nodes offer: the cake fair shares are cut from."""
        mask = self.usable_nodes()
        return self.table.resource(self.table.alloc[mask].sum(axis=0)) if mask.any() else Resource()

    # Accounting moves: the session's statement calls these and their inverses.
    def assign(self, task: TaskInfo, status: TaskStatus, node_name: NodeName,
               gpu_groups: tuple[str, ...] | None = None) -> TaskInfo:
        """Put a pending task on a node as Allocated or Pipelined. A sharer
        takes the devices given, or the node's best for it (gpudevices.py)."""
        if task.gpu is None:
            new = task.placed_as(status, node_name, None)
        else:
            row = self.table.index[node_name]
            idle, later = self.whole_gpus(row)
            share = self.gpus.place(task, node_name, idle, later, gpu_groups,
                                    pipelined=status is TaskStatus.PIPELINED)
            new = task.placed_as(status, node_name, share)
        self.replace(task, new)
        return new

    def freed_by(self, task: TaskInfo) -> np.ndarray:
        """What evicting the task gives back to its node, as a table row: its
        requests, and for a sharer its part of each device's whole GPU (all of
        it once every sharer of the device goes), as evictions plan it."""
        vec = self.table.vector(task.resreq)
        if task.gpu is None or task.node_name is None:
            return vec
        devices = self.gpus.on(task.node_name)
        part = sum(1.0 / max(d.sharers, 1) for g in task.gpu.groups
                   if (d := devices.get(g)) is not None and task.key in d.tasks)
        gpu = self.table.known_vector(ONE_GPU)
        return vec + gpu * part if part and gpu is not None else vec

    def whole_gpus(self, row: int) -> tuple[float, float]:
        """Whole GPUs free on the node at row: now, and once pods going away are gone."""
        col = self.table.dim_index.get(GPU)
        if col is None:
            return 0.0, 0.0
        return (self.table.amount(col, self.table.idle[row, col]),
                self.table.amount(col, self.table.future[row, col]))

    def unassign(self, task: TaskInfo, previous: TaskInfo) -> None:
        """Undo assign: the node gives the room back, the task returns to previous."""
        self.replace(task, previous)

    def release(self, task: TaskInfo) -> TaskInfo:
        """Mark a placed task as Releasing (evicted): its room comes back later."""
        new = task.evolve(status=TaskStatus.RELEASING)
        self.replace(task, new)
        return new

    def unrelease(self, task: TaskInfo, previous: TaskInfo) -> None:
        self.replace(task, previous)

    def replace(self, old: TaskInfo, new: TaskInfo) -> None:
        """The one accounting move: old leaves its node (if it held room there),
        new takes room on its own, and the job holds new. Journaled when the
        cluster is the cache's own, lent to a session, so that rewind() can
        hand the cache its model back as it was."""
        if self._ledger is None:
            self.ledger()         # the sums are of the jobs before any move
        self._leave(old)
        self._take(new)
        if old.gpu is not None or new.gpu is not None:
            apply_holds(self.table, self.gpus.move(old, new))
        if new.successor_of is None:     # a successor holds room; its job counts the pod it stands for
            self.jobs[new.job].update_task(new)
            self.moved.add(new.job)     # (its job may be gone: its pods made again later)
        if self.journal is not None:
            self.journal.append((old, new))

    def rewind(self, keep: Collection[PodKey] = ()) -> None:
        """Undo every journaled move, newest first, but the moves of the tasks in
        keep (binds sent: they stay as the session left them). The rows'
        amounts are summed back in one go (whole numbers: the order of the
        sums does not matter)."""
        if not self.journal:
            return
        deltas = _Deltas(self.table)
        for old, new in reversed(self.journal):
            if keep and new.key in keep:
                continue
            if old.gpu is not None or new.gpu is not None:
                for change in self.gpus.move(new, old):
                    deltas.hold(change)
            node = self._node_of(new)
            if node is not None:
                deltas.add(node.index, new, -1.0)
                node.tasks.pop(new.key, None)
            node = self._node_of(old)
            if node is not None:
                deltas.add(node.index, old, 1.0)
                node.tasks[old.key] = old
            if old.successor_of is None:
                self.jobs[old.job].update_task(old)
                self.moved.add(old.job)
        deltas.apply()
        self.journal = []

    def settle(self, old: TaskInfo, new: TaskInfo) -> None:
        """A task's status changes where it is, holding the same room (a bind
        sent becomes Binding): no row changes, nothing is journaled."""
        node = self._node_of(new)
        if node is not None:
            node.tasks[new.key] = new
        self.jobs[new.job].update_task(new)

    def _node_of(self, task: TaskInfo) -> NodeInfo | None:
        """The node the task holds room on, if any."""
        if not task.node_name or not (task.status in OCCUPYING_STATUSES
                                      or task.status is TaskStatus.PIPELINED):
            return None
        return self.nodes.get(task.node_name)

    def _take(self, task: TaskInfo) -> None:
        node = self._node_of(task)
        if node is not None:
            _occupy(node, task)

    def _leave(self, task: TaskInfo) -> None:
        node = self._node_of(task)
        if node is not None:
            _vacate(node, task)


class _Deltas:
    """Room taken and given back on many rows, summed into the table at once."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.rows: dict[str, list[int]] = {"used": [], "releasing": [], "pipelined": []}
        self.vecs: dict[str, list[np.ndarray]] = {"used": [], "releasing": [], "pipelined": []}

    def add(self, row: int, task: TaskInfo, sign: float) -> None:
        vec = self.table.vector(task.resreq) * sign
        kinds = ("pipelined",) if task.status is TaskStatus.PIPELINED else \
            ("used", "releasing") if task.status is TaskStatus.RELEASING else ("used",)
        for kind in kinds:
            self.rows[kind].append(row)
            self.vecs[kind].append(vec)

    def hold(self, change: Change) -> None:
        """A shared device's GPU changed how it is held (see apply_holds)."""
        node, was, now = change
        row = self.table.index.get(node)
        vec = self.table.known_vector(ONE_GPU)
        if row is None or vec is None:
            return
        for hold, sign in ((was, -1.0), (now, 1.0)):
            for kind in HOLD_KINDS.get(hold, ()):
                self.rows[kind].append(row)
                self.vecs[kind].append(vec * sign)

    def apply(self) -> None:
        sums = {}
        for kind, rows in self.rows.items():
            total = np.zeros_like(self.table.used)
            if rows:
                np.add.at(total, np.array(rows), np.array(self.vecs[kind]))
            sums[kind] = total
        self.table.add_sums(sums["used"], sums["releasing"], sums["pipelined"],
                            np.unique(np.array([r for rows in self.rows.values() for r in rows],
                                               dtype=np.intp)))


def _occupy(node: NodeInfo, task: TaskInfo) -> None:
    vec = node.table.vector(task.resreq)
    if task.status is TaskStatus.PIPELINED:
        node.table.add_pipelined(node.index, vec)
    else:
        node.table.add_used(node.index, vec)
        if task.status is TaskStatus.RELEASING:
            node.table.add_releasing(node.index, vec)
    node.tasks[task.key] = task


def _vacate(node: NodeInfo, task: TaskInfo) -> None:
    vec = node.table.vector(task.resreq)
    if task.status is TaskStatus.PIPELINED:
        node.table.add_pipelined(node.index, vec, -1.0)
    else:
        node.table.add_used(node.index, vec, -1.0)
        if task.status is TaskStatus.RELEASING:
            node.table.add_releasing(node.index, vec, -1.0)
    node.tasks.pop(task.key, None)
