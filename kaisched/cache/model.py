"""The model the cache keeps up to date as watch events arrive: one ClusterInfo,
changed in place per event, never rebuilt per cycle.

A changed pod moves one task (its job's counts and, when it holds room, one
node row); a changed node rewrites one row. What a job declares (its PodGroup,
priority, age, problem) is worked out again only for the jobs an event
touched, once per sync or snapshot. Rare, wide changes -- a node added or
removed, a resource no column holds -- lay the table out again; a
PriorityClass makes again the tasks whose priority it changes.

A session works on the model itself: every move it makes goes through
ClusterInfo.replace, which journals it, and the model rewinds the journal
before the next event or snapshot. So a session sees a copy-on-write view
that costs nothing to make, and the cache never sees what a session did.
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Iterable, Mapping

import numpy as np

from kaisched.api.clusterinfo import ClusterInfo, ForeignPod, RulesInPlay
from kaisched.api.constraints import Placement
from kaisched.api.gpuask import gpu_memory_label
from kaisched.api.gpudevices import ONE_GPU, Change, WholeGpu
from kaisched.api.job import JobInfo, PodGroupStatus
from kaisched.api.ledger import Ledger
from kaisched.api.node import NodeSpec
from kaisched.api.queue import QueueInfo, build_queue_tree
from kaisched.api.resource import GPU, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import OCCUPYING_STATUSES, JobKey, NodeName, PodKey, TaskStatus
from kaisched.cache.convert import PodFacts
from kaisched.cache.jobs import (
    WORKLOAD_SOURCES,
    Groups,
    Priorities,
    as_bound,
    describe,
    foreign_pod,
    group_key,
    make_task,
    unresolved,
)

# Pods that no longer count in a gang: another scheduler's are not strangers to it then.
_DONE = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)

if TYPE_CHECKING:
    from kaisched.cache.pools import PoolView


# What an echo of a pod changes (see convert.echoed), the same on a task.
_ECHOED_NAMES = ("status", "node_name", "unschedulable", "unschedulable_reason", "started")
_ECHOED = operator.attrgetter(*_ECHOED_NAMES)


class Model:
    def __init__(self, scheduler_name: str, groups: Groups, pools: PoolView | None = None,
                 nodes: Mapping[str, NodeSpec] | None = None) -> None:
        self.scheduler_name = scheduler_name
        self.groups = groups
        # One shard of several (None: the whole cluster): its pods are tasks,
        # every other pod is another scheduler's; those on nodes outside the
        # pool (the cache's nodes) wait apart until their node joins it.
        self.pools = pools
        self._pool_nodes: Mapping[str, NodeSpec] = nodes if nodes is not None else {}
        self.elsewhere: dict[PodKey, ForeignPod] = {}
        self._elsewhere_on: dict[NodeName, set[PodKey]] = {}
        self._reown = False                               # a queue's pool changed: look at every pod
        self.cluster = ClusterInfo.assemble((), (), ())
        self.tasks: dict[PodKey, TaskInfo] = {}
        self.foreign: dict[PodKey, ForeignPod] = {}
        self.priorities = Priorities()
        self.by_group: dict[JobKey, set[JobKey]] = {}    # PodGroup -> jobs apart from it (replicas)
        self._group_of: dict[JobKey, JobKey] = {}         # and back
        self.changed: set[JobKey] = set()                 # jobs events reached since the last snapshot
        self.moved: set[JobKey] = set()                   # of those, jobs whose tasks only moved
        # Jobs a session must look at though settled: changed since a session
        # last reported on them, or spoken of by it (numbered, so that a report
        # clears only what its session saw).
        self.unreported: dict[JobKey, int] = {}
        # The PodGroup statuses the last reported session wrote, with the number
        # its report gave the job: the echo of exactly that status, nothing else
        # of the job having changed since, is what the session already looked at
        # (its status worked out again from it would be the same, said again nothing).
        self.written: dict[JobKey, tuple[PodGroupStatus, int]] = {}
        self._restatus: dict[JobKey, PodGroupStatus] = {}
        self._seq = 0
        self._lent_seq = 0
        self.ledger = Ledger()
        self._relayout = True                             # the table is laid out again at snapshot
        self._rows: list[int] = []                        # room taken (or given back) since,
        self._vecs: list[np.ndarray] = []                 # summed into the table at snapshot
        self._signs: list[float] = []
        self._releasing: list[bool] = []
        self._queues_changed = True
        self._foreign_changed = True
        # Equal placements made one object: the session's per-class caches
        # then find theirs by identity, not by comparing pod rules field by field.
        # Counted by the tasks holding each, so its keys are every distinct
        # placement in use: what the pods' rules read is found without walking
        # every task (and worked out again only when that set changes).
        self._placements: dict[Placement, tuple[Placement, int]] = {}
        self._rules: RulesInPlay | None = None
        self.claimants = 0                                # tasks naming a ResourceClaim
        self.sharers = 0                                  # tasks asking for part of a GPU
        # Placed gpu-memory pods whose node's GPU memory was not known when
        # they were read: made again once it is (their queue's charge needs it).
        self.unresolved: set[PodKey] = set()
        # Binds sent whose echo has not arrived: the pod shows as Bound on
        # that node meanwhile (as the session that bound it left it).
        self.assumed: dict[PodKey, NodeName] = {}
        self._keeping: dict[PodKey, NodeName] = {}        # binds of the session lent out
        self._lent = False                                # to a session, not taken back yet
        self._settling: dict[PodKey, TaskInfo] = {}       # binds kept, still as allocated
        # Other schedulers' pods in a gang of the upstream Workload API (whose
        # pods must all name one scheduler): job -> pod -> its schedulerName.
        self.strangers: dict[JobKey, dict[PodKey, str]] = {}
        self._stranger_of: dict[PodKey, JobKey] = {}

    # -- events ---------------------------------------------------------------------------

    def reclaim(self) -> None:
        """Take the model back from the session it was lent to: its moves are
        undone, but for the binds it sent (see keep), which stay."""
        if not self._lent:
            return          # taken back already (most events come with no session between)
        self._lent = False
        keeping, self._keeping = self._keeping, {}
        if self.cluster.journal:
            kept = self._kept(keeping) if keeping else {}
            self.cluster.rewind(kept)
            for key, task in kept.items():
                # Allocated as the session left it; at the next catch-up as its
                # echo will show it, unless the echo came first (it mostly does).
                self.tasks[key] = self._settling[key] = task
                self.assumed[key] = keeping[key]
                self.moved.add(task.job)        # its counts changed, not what it declares
                self.revisit(task.job)
        self.cluster.devices.rewind()

    def keep(self, binds: Mapping[PodKey, NodeName]) -> None:
        """The session lent last sent these binds: when the model is taken back
        their moves are not undone (only to be made again by their echoes).
        Until a version of the pod with a node arrives, or forget() says the
        bind was not made, the pod is what its echo will say: Bound there, its
        PodScheduled condition true (see as_bound); so the echo changes nothing."""
        self._keeping.update(binds)

    def forget(self, key: PodKey, facts: PodFacts | None) -> None:
        """The pod's bind was refused or never made: it is what facts say."""
        self.reclaim()
        if self.assumed.pop(key, None) is not None:
            self.put_pod(key, facts, facts)

    def _kept(self, keeping: Mapping[PodKey, NodeName]) -> dict[PodKey, TaskInfo]:
        """Of the binds sent, the tasks the session left allocated on the node
        bound to, from pending before it (no volumes, devices or shares of a
        GPU of theirs moved with them: those binds go the long way, undone and
        echoed)."""
        finals: dict[PodKey, TaskInfo] = {}
        for _, new in self.cluster.journal or ():
            if new.key in keeping:
                finals[new.key] = new
        out = {}
        for key, task in finals.items():
            before = self.tasks.get(key)
            if (task.status is TaskStatus.ALLOCATED and task.node_name == keeping[key]
                    and before is not None and before.status is TaskStatus.PENDING
                    and not task.claims and not task.pvcs and task.gpu is None):
                out[key] = task
        return out

    def mine(self, facts: PodFacts) -> bool:
        """Whether this scheduler (this shard) schedules the pod."""
        return facts.scheduler_name == self.scheduler_name and (
            self.pools is None or self.pools.takes_pod(facts))

    def put_pod(self, key: PodKey, facts: PodFacts | None, before: PodFacts | None = None,
                echo: bool = False) -> None:
        """The pod changed (facts; before: what it was) or went away (None).
        echo: it changed only where the scheduler's own writes change pods
        (status, node, conditions), its declarations as they were."""
        cluster = self.cluster
        bound_to = self.assumed.get(key)
        if bound_to is not None:
            if facts is not None and facts.status is TaskStatus.PENDING and facts.node_name is None \
                    and self.mine(facts):
                facts = as_bound(facts, bound_to)
            else:
                del self.assumed[key]       # bound (here or elsewhere), or gone: its echo
        self._note_stranger(key, facts)
        old = self.tasks.pop(key, None)
        mine = facts is not None and facts.status is not None and self.mine(facts)
        # A sharer's echo goes the long way: its devices follow its status.
        if echo and old is not None and old.gpu is None and mine and facts is not None:
            if _ECHOED(old) == _ECHOED(facts):
                self.tasks[key] = old       # the echo of a bind kept: as the model has it
                self.revisit(old.job)
            else:
                self._moved_in_place(key, old, facts)
            return
        # It stays a task of the same job, declaring what it did: only counts change.
        alike = old is not None and mine and _declares_alike(before, facts)
        if old is not None:
            if old.node_name and old.status in OCCUPYING_STATUSES:
                if not _same_room(old, facts, mine):     # else no change
                    self._room(old.node_name, old.resreq, old.status is TaskStatus.RELEASING, -1.0)
                node = cluster.nodes.get(old.node_name)
                if node is not None:
                    node.tasks.pop(key, None)
            if old.gpu is not None:
                self.sharers -= 1
                self.unresolved.discard(key)
                self._holds(cluster.share_moved(old, None))
            job = cluster.jobs[old.job]
            job.remove_task(key)
            self.claimants -= bool(old.claims)
            self._drop_placement(old.placement)
            if not alike:
                self._changed(old.job)
        else:
            gone = self.foreign.pop(key, None)
            if gone is not None:
                self._foreign_changed = True
                self._room(gone.node_name, gone.resreq, gone.releasing, -1.0)
                if gone.reserves is not None:
                    self._holds(cluster.gpus.reserve(gone.node_name, gone.reserves, key,
                                                     gone.kai, False))
                elif gone.gpu is not None:
                    self._holds(cluster.gpus.move(gone, None))
            elif self.elsewhere:
                self._drop_elsewhere(key)
        if facts is None or facts.status is None:
            return
        if not mine:
            pod = foreign_pod(facts)
            if pod is None:
                return
            if self.pools is not None and pod.node_name not in self._pool_nodes:
                self.elsewhere[key] = pod
                self._elsewhere_on.setdefault(pod.node_name, set()).add(key)
                return
            self.foreign[key] = pod
            self._foreign_changed = True
            self._room(pod.node_name, pod.resreq, pod.releasing, 1.0)
            if pod.reserves is not None:
                self._holds(cluster.gpus.reserve(pod.node_name, pod.reserves, key, pod.kai, True))
            elif pod.gpu is not None:       # another scheduler's sharer holds its share too
                self._holds(cluster.gpus.move(None, pod))
            return
        placement = self._keep_placement(facts.placement)
        task = self.tasks[key] = make_task(facts, self.priorities, placement, self.groups,
                                           self._gpu_memory)
        self.claimants += bool(task.claims)
        if task.gpu is not None:
            self.sharers += 1
            if unresolved(task) and task.node_name not in cluster.nodes:
                self.unresolved.add(key)
        found = cluster.jobs.get(task.job)
        if found is None:
            job = cluster.jobs[task.job] = JobInfo(task.job, self.groups.single(None))
        else:
            job = found
        job.add_task(task)
        if not alike:
            self._changed(task.job)
        else:
            self.moved.add(task.job)        # its counts changed, not what it declares
            self.revisit(task.job)
        gk = group_key(facts)
        if gk != task.job:
            self.by_group.setdefault(gk, set()).add(task.job)
            self._group_of[task.job] = gk
        if task.node_name and task.status in OCCUPYING_STATUSES:
            if old is None or not _same_room(old, facts, mine):
                self._room(task.node_name, task.resreq, task.status is TaskStatus.RELEASING, 1.0)
            node = cluster.nodes.get(task.node_name)
            if node is not None:
                node.tasks[key] = task
        elif any(name not in cluster.table.dim_index for name in task.resreq.names()):
            self._relayout = True           # a resource no column holds yet
        if task.gpu is not None:
            self._holds(cluster.share_moved(None, task))

    def _gpu_memory(self, node: NodeName) -> int | None:
        info = self.cluster.nodes.get(node)
        return gpu_memory_label(info.spec.labels) if info is not None else None

    def _holds(self, changes: list[Change]) -> None:
        """Shared devices whose GPU is held otherwise now: the table counts
        each once, as a pod holding one GPU (none is pipelined outside a session)."""
        for node, was, now in changes:
            for hold, sign in ((was, -1.0), (now, 1.0)):
                if hold is not None and hold is not WholeGpu.PIPELINED:
                    self._room(node, ONE_GPU, hold is WholeGpu.RELEASING, sign)

    def _moved_in_place(self, key: PodKey, old: TaskInfo, facts: PodFacts) -> None:
        """A task's echo: its status, node, condition and start as facts say, all else
        as it was (its job, placement, priority: nothing to count again)."""
        task = self.tasks[key] = old.evolve(**dict(zip(_ECHOED_NAMES, _ECHOED(facts), strict=True)))
        nodes = self.cluster.nodes
        was = old.node_name if old.status in OCCUPYING_STATUSES else None
        now = task.node_name if task.status in OCCUPYING_STATUSES else None
        if (was or now) and not _same_room(old, facts, True):
            if was:
                self._room(was, old.resreq, old.status is TaskStatus.RELEASING, -1.0)
            if now:
                self._room(now, task.resreq, task.status is TaskStatus.RELEASING, 1.0)
        if was and was in nodes:
            nodes[was].tasks.pop(key, None)
        if now and now in nodes:
            nodes[now].tasks[key] = task
        self.cluster.jobs[task.job].update_task(task)
        self.moved.add(task.job)            # its counts changed, not what it declares
        self.revisit(task.job)

    def _note_stranger(self, key: PodKey, facts: PodFacts | None) -> None:
        """Keep track of another scheduler's pod that names a gang of the
        Workload API: the gang's declaration reads it (a mixed group waits)."""
        was = self._stranger_of.get(key)
        now = None
        if facts is not None and facts.scheduler_name != self.scheduler_name \
                and facts.gang.source in WORKLOAD_SOURCES \
                and facts.status is not None and facts.status not in _DONE:
            now = facts.job
        if was == now and (now is None or facts is None
                           or self.strangers[now][key] == facts.scheduler_name):
            return
        if was is not None:
            del self._stranger_of[key]
            members = self.strangers[was]
            del members[key]
            if not members:
                del self.strangers[was]
            self._changed(was)
        if now is not None and facts is not None:
            self._stranger_of[key] = now
            self.strangers.setdefault(now, {})[key] = facts.scheduler_name
            self._changed(now)

    def _room(self, node: NodeName, request: Resource, releasing: bool, sign: float) -> None:
        """A pod takes (sign 1) or gives back (-1) room on its node. Summed
        into the table in one go at the snapshot: a row update a pod costs
        more than the pod's whole conversion."""
        if self._relayout:
            return
        table = self.cluster.table
        row = table.index.get(node)
        if row is None:
            return              # no such node (yet): a layout counts it if one comes
        vec = table.known_vector(request)
        if vec is None:
            self._relayout = True           # a resource no column holds yet
            return
        self._rows.append(row)
        self._vecs.append(vec)
        self._signs.append(sign)
        self._releasing.append(releasing)

    def put_node(self, name: str, spec: NodeSpec | None) -> None:
        node = self.cluster.nodes.get(NodeName(name))
        if spec is None or node is None or self._relayout:
            self._relayout = True
            return
        table = self.cluster.table
        if any(n not in table.dim_index for n in spec.allocatable.names()):
            self._relayout = True
            return
        gpus = self.cluster.gpus
        if (gpus.on(node.name) or self.unresolved) and (
                gpu_memory_label(node.spec.labels) != gpu_memory_label(spec.labels)
                or node.spec.allocatable.get(GPU) != spec.allocatable.get(GPU)):
            # Its shared devices are measured anew, and its sharers' charges.
            self._relayout = True
            self.unresolved.update(k for k, t in node.tasks.items() if t.gpu is not None)
            return
        self.cluster.respec(node, spec)
        table.set_alloc(node.index, table.row_of(spec.allocatable))

    # -- shards: nodes joining and leaving the pool, pods changing hands --------------------

    def node_joined(self, name: str) -> None:
        """A node came into the pool: the other pods on it take room here now
        (the layout it causes counts them)."""
        for key in self._elsewhere_on.pop(NodeName(name), ()):
            self.foreign[key] = self.elsewhere.pop(key)
            self._foreign_changed = True

    def node_left(self, name: str) -> None:
        """A node left the pool: the other pods on it matter here no more."""
        for key in [k for k, pod in self.foreign.items() if pod.node_name == name]:
            pod = self.foreign.pop(key)
            self.elsewhere[key] = pod
            self._elsewhere_on.setdefault(pod.node_name, set()).add(key)
            self._foreign_changed = True

    def _drop_elsewhere(self, key: PodKey) -> None:
        pod = self.elsewhere.pop(key, None)
        if pod is not None:
            keys = self._elsewhere_on[pod.node_name]
            keys.discard(key)
            if not keys:
                del self._elsewhere_on[pod.node_name]

    def reown(self, pods: Mapping[PodKey, PodFacts], keys: Iterable[PodKey]) -> None:
        """These pods may have changed hands (their PodGroup names another pool)."""
        for key in list(keys):
            facts = pods.get(key)
            if facts is not None:
                self.put_pod(key, facts, facts)

    def reown_all(self) -> None:
        """A queue's pool changed: every pod is looked at again at the next catch-up."""
        self._reown = True

    def _reown_changed(self, pods: Mapping[PodKey, PodFacts]) -> None:
        self._reown = False
        for key, facts in pods.items():
            if facts.status is not None and facts.scheduler_name == self.scheduler_name \
                    and self.mine(facts) != (key in self.tasks):
                self.put_pod(key, facts, facts)

    def put_group(self, key: JobKey, pods: Mapping[PodKey, PodFacts]) -> None:
        """A PodGroup changed: the jobs that read it declare anew, and its
        pods that name claims are made again (the claims it shares may have
        changed, or been made)."""
        self._changed(key)
        for job in self.by_group.get(key, ()):
            self._changed(job)
        found = self.cluster.jobs.get(key)
        for pod in list(found.tasks) if found is not None else ():
            facts = pods.get(pod)
            if facts is not None and facts.claim_refs:
                self.put_pod(pod, facts, facts)

    def put_queues(self) -> None:
        self._queues_changed = True

    def set_priorities(self, priorities: Priorities, pods: Mapping[PodKey, PodFacts]) -> None:
        """Every task's priority may change with a PriorityClass: made again."""
        if priorities == self.priorities:
            return
        self.priorities = priorities
        for key, task in list(self.tasks.items()):
            facts = pods.get(key)
            if facts is None or priorities.of_pod(facts) != task.priority \
                    or priorities.never_preempts(facts) != task.never_preempts:
                self.put_pod(key, facts)
        for job_key, job in self.cluster.jobs.items():
            if job.spec.priority_class:
                self._changed(job_key)      # its priority is its class's

    def _changed(self, key: JobKey) -> None:
        self.changed.add(key)
        self.revisit(key)
        self._restatus.pop(key, None)       # described anew from its PodGroup

    def revisit(self, key: JobKey) -> None:
        self._seq += 1
        self.unreported[key] = self._seq

    def reported(self) -> None:
        """The session lent last closed: it has looked at every job lent as unreported."""
        seen = self._lent_seq
        self.unreported = {k: n for k, n in self.unreported.items() if n > seen}
        self.written = {}

    def wrote(self, statuses: Mapping[JobKey, PodGroupStatus]) -> None:
        """The statuses the session just reported on wrote (after revisit() of their jobs)."""
        self.written = {k: (status, self.unreported[k]) for k, status in statuses.items()
                        if k in self.unreported}

    def echoed(self, key: JobKey, was: PodGroupStatus, status: PodGroupStatus) -> bool:
        """A PodGroup changed only in its status (was: before): True when that
        status is the one the last session wrote for the job, which read the
        status it had, and nothing else reached the job since. Its status is
        then taken in at the next catch-up, and the job needs no new look
        (unless something else reaches it meanwhile)."""
        said = self.written.get(key)
        job = self.cluster.jobs.get(key)
        if said is None or said[0] != status or self.unreported.get(key) != said[1] \
                or key in self.by_group or key in self.changed or job is None \
                or job.status != was:
            return False
        del self.written[key]
        del self.unreported[key]
        self._restatus[key] = status
        return True

    # -- catching up, and the snapshot -------------------------------------------------------

    def catch_up(self, pods: Mapping[PodKey, PodFacts]) -> None:
        """Finish what events left for later that grows with them: the jobs'
        declarations and sums, the room noted per node. After every sync, so
        that a standby replica, which takes no snapshot, holds only the model."""
        if self._reown:
            self._reown_changed(pods)
        jobs = self.cluster.jobs
        ledger = self.ledger
        for pod, task in self._settling.items():
            if self.tasks.get(pod) is task:         # no echo yet: as it will show it
                bound = self.tasks[pod] = task.evolve(status=TaskStatus.BOUND, unschedulable=None,
                                                      unschedulable_reason=None)
                self.cluster.settle(task, bound)
        self._settling = {}
        for key, status in self._restatus.items():
            found = jobs.get(key)
            if found is not None:
                found.status = status
        self._restatus = {}
        for key in self.moved - self.changed:
            ledger.put(key, jobs[key])      # still there: a task of it moved
        for key in self.changed:
            job = jobs.get(key)
            if job is not None and not job.tasks:
                del jobs[key]
                job = None
            if job is not None:
                describe(job, (pods[k] for k in job.tasks), self.groups, self.priorities,
                         self.strangers.get(key))
            else:
                self._forget(key)
            ledger.put(key, job)
        self.changed, self.moved = set(), set()
        if self._rows and not self._relayout:
            self.cluster.table.add_many(np.array(self._rows),
                                        np.array(self._vecs) * np.array(self._signs)[:, None],
                                        np.array(self._releasing))
        self._rows, self._vecs, self._signs, self._releasing = [], [], [], []

    def _forget(self, key: JobKey) -> None:
        """A job gone: nothing to report of it, no PodGroup to read for it."""
        self.unreported.pop(key, None)
        group = self._group_of.pop(key, None)
        if group is not None:
            members = self.by_group.get(group, set())
            members.discard(key)
            if not members:
                self.by_group.pop(group, None)

    def refresh(self, pods: Mapping[PodKey, PodFacts], nodes: Mapping[str, NodeSpec],
                queues: Mapping[str, QueueInfo], namespaces: Mapping[str, Mapping[str, str]],
                now: float) -> ClusterInfo:
        """Bring what events left for later up to date, and lend the model out."""
        self.catch_up(pods)
        cluster = self.cluster
        if self._foreign_changed:
            cluster.foreign = tuple(self.foreign[k] for k in sorted(self.foreign))
            self._foreign_changed = False
        if self._relayout or self._queues_changed:
            self._layout(nodes, queues)
        if self.unresolved:
            self._resolve(pods, nodes)
            self.catch_up(pods)
        # A job that changed, or was spoken of, is looked at once more: what
        # was said of it may need saying again (or differently).
        cluster.set_active(self.ledger.unsettled | self.unreported.keys())
        self._lent_seq = self._seq
        cluster.priority_classes = dict(self.priorities.values)
        cluster.namespace_labels = namespaces
        cluster.now = now
        cluster.lend(self._rules_in_play(), self.ledger)
        self._lent = True
        return cluster

    def _resolve(self, pods: Mapping[PodKey, PodFacts], nodes: Mapping[str, NodeSpec]) -> None:
        """Placed gpu-memory pods read before their node was known (or whose
        node's GPUs changed): made again, so their charge is of their GPU."""
        for key in sorted(self.unresolved):
            facts = pods.get(key)
            if facts is None or facts.node_name is None or facts.node_name not in nodes:
                continue
            self.unresolved.discard(key)
            self.put_pod(key, facts, facts)

    def _layout(self, nodes: Mapping[str, NodeSpec], queues: Mapping[str, QueueInfo]) -> None:
        old = self.cluster
        if self._relayout:
            fresh = ClusterInfo.assemble(nodes.values(), old.jobs.values(), queues.values(),
                                         foreign=old.foreign)
            old.relay(fresh.nodes, fresh.table, fresh.gpus)
            old.queues, old.tree = fresh.queues, fresh.tree
        else:
            old.queues, old.tree = build_queue_tree(queues.values())
        self._relayout = self._queues_changed = False

    def _keep_placement(self, placement: Placement) -> Placement:
        shared, count = self._placements.get(placement, (placement, 0))
        self._placements[placement] = (shared, count + 1)
        if not count:
            self._rules = None
        return shared

    def _drop_placement(self, placement: Placement) -> None:
        shared, count = self._placements[placement]
        if count > 1:
            self._placements[placement] = (shared, count - 1)
        else:
            del self._placements[placement]
            self._rules = None

    def _rules_in_play(self) -> RulesInPlay:
        if self._rules is None:
            self._rules = RulesInPlay.of(p.rules for p in self._placements)
        foreign = self.cluster.foreign
        if not any(p.rules for p in foreign):
            return self._rules
        return RulesInPlay.of([*(p.rules for p in self._placements), *(p.rules for p in foreign)])


def _same_room(old: TaskInfo, facts: PodFacts | None, mine: bool) -> bool:
    """The pod's new version (mine: still a task of this scheduler) holds the
    room the old task held, where it held it (a bind's echo of a pod kept on
    its node): nothing to take or give back."""
    return (facts is not None and mine
            and old.status in OCCUPYING_STATUSES       # a finished pod held none
            and facts.node_name == old.node_name and facts.status in OCCUPYING_STATUSES
            and facts.resreq == old.resreq
            and (facts.status is TaskStatus.RELEASING) == (old.status is TaskStatus.RELEASING))


def _declares_alike(before: PodFacts | None, after: PodFacts | None) -> bool:
    """The pod changed nothing its job reads for its declaration, age,
    priority or problem -- as when it was bound or started running -- so the
    job need not read them again: only its counts and sums change."""
    if before is None or after is None:
        return False
    return (before.job == after.job and before.gang == after.gang
            and before.queue_label == after.queue_label
            and before.annotations == after.annotations and before.problem == after.problem
            and before.creation == after.creation and before.priority == after.priority
            and before.priority_class == after.priority_class
            and before.claim_refs == after.claim_refs)
