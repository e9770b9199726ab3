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

The model keeps the task and job tables; put_pod sorts each pod out and hands
what is not a task's own to side books, each holding one concern: binds sent
and not echoed (assumed.py), other schedulers' pods in a Workload API gang
(strangers.py), those holding room (foreign.py), tasks sharing a GPU
(sharers.py), the placements tasks hold, interned (placements.py), and the
room noted for the node table until the next snapshot (roomnotes.py).
"""
from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Iterable, Mapping

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.gpuask import gpu_memory_label
from kaisched.api.job import JobInfo, PodGroupStatus
from kaisched.api.ledger import Ledger
from kaisched.api.node import NodeSpec
from kaisched.api.queue import QueueInfo, build_queue_tree
from kaisched.api.resource import GPU
from kaisched.api.task import TaskInfo
from kaisched.api.types import OCCUPYING_STATUSES, JobKey, NodeName, PodKey, TaskStatus
from kaisched.cache.assumed import Assumed
from kaisched.cache.convert import PodFacts
from kaisched.cache.foreign import Foreign
from kaisched.cache.jobs import Groups, Priorities, describe, group_key, make_task
from kaisched.cache.placements import Placements
from kaisched.cache.roomnotes import RoomNotes
from kaisched.cache.sharers import Sharers
from kaisched.cache.strangers import Strangers

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
        # pool (the cache's nodes) wait apart until their node joins it (Foreign).
        self.pools = pools
        self._reown = False                               # a queue's pool changed: look at every pod
        self.cluster = ClusterInfo.assemble((), (), ())
        self.tasks: dict[PodKey, TaskInfo] = {}
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
        self._queues_changed = True
        self._lent = False                                # to a session, not taken back yet
        self.claimants = 0                                # tasks naming a ResourceClaim
        # The side books, one concern each (see the module's doc).
        self.room = RoomNotes(self.cluster)
        self.assumed = Assumed()
        self.strangers = Strangers(scheduler_name)
        self.foreign = Foreign(self.cluster, self.room, pools is not None,
                               nodes if nodes is not None else {})
        self.sharers = Sharers(self.cluster, self.room)
        self.placements = Placements()

    # -- events ---------------------------------------------------------------------------

    def reclaim(self) -> None:
        """Take the model back from the session it was lent to: its moves are
        undone, but for the binds it sent (see keep), which stay."""
        if not self._lent:
            return          # taken back already (most events come with no session between)
        self._lent = False
        journal = self.cluster.journal
        kept = self.assumed.kept(journal or (), self.tasks)
        if journal:
            self.cluster.rewind(kept)
            for key, task in kept.items():
                # Allocated as the session left it; at the next catch-up as its
                # echo will show it, unless the echo came first (it mostly does).
                self.tasks[key] = task
                self.moved.add(task.job)        # its counts changed, not what it declares
                self.revisit(task.job)
        self.cluster.devices.rewind()

    def keep(self, binds: Mapping[PodKey, NodeName]) -> None:
        """The session lent last sent these binds: when the model is taken back
        their moves are not undone (only to be made again by their echoes).
        Until a version of the pod with a node arrives, or forget() says the
        bind was not made, the pod is what its echo will say: Bound there, its
        PodScheduled condition true (see jobs.as_bound); so the echo changes nothing."""
        self.assumed.keep(binds)

    def forget(self, key: PodKey, facts: PodFacts | None) -> None:
        """The pod's bind was refused or never made: it is what facts say."""
        self.reclaim()
        if self.assumed.forget(key):
            self.put_pod(key, facts, facts)

    def mine(self, facts: PodFacts) -> bool:
        """Whether this scheduler (this shard) schedules the pod."""
        return facts.scheduler_name == self.scheduler_name and (
            self.pools is None or self.pools.takes_pod(facts))

    def put_pod(self, key: PodKey, facts: PodFacts | None, before: PodFacts | None = None,
                echo: bool = False) -> None:
        """The pod changed (facts; before: what it was) or went away (None).
        echo: it changed only where the scheduler's own writes change pods
        (status, node, conditions), its declarations as they were."""
        facts = self.assumed.seen(key, facts, self.mine)
        for job in self.strangers.note(key, facts):
            self._changed(job)
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
            self._take_out(key, old, facts, mine, alike)
        else:
            self.foreign.drop(key)
        if facts is None or facts.status is None:
            return
        if mine:
            self._put_in(key, facts, old, alike)
        else:
            self.foreign.put(key, facts)

    def _take_out(self, key: PodKey, old: TaskInfo, facts: PodFacts | None, mine: bool,
                  alike: bool) -> None:
        """The task the pod was leaves its node and its job (facts, mine,
        alike: what the pod is now, see put_pod)."""
        if old.node_name and old.status in OCCUPYING_STATUSES:
            if not _same_room(old, facts, mine):     # else no change
                self.room.note(old.node_name, old.resreq, old.status is TaskStatus.RELEASING, -1.0)
            node = self.cluster.nodes.get(old.node_name)
            if node is not None:
                node.tasks.pop(key, None)
        if old.gpu is not None:
            self.sharers.left(key, old)
        self.cluster.jobs[old.job].remove_task(key)
        self.claimants -= bool(old.claims)
        self.placements.drop(old.placement)
        if not alike:
            self._changed(old.job)

    def _put_in(self, key: PodKey, facts: PodFacts, old: TaskInfo | None, alike: bool) -> None:
        """The pod, one of this scheduler's, as a task of its job (and on its
        node when it holds room there)."""
        cluster = self.cluster
        placement = self.placements.keep(facts.placement)
        task = self.tasks[key] = make_task(facts, self.priorities, placement, self.groups,
                                           self._gpu_memory)
        self.claimants += bool(task.claims)
        if task.gpu is not None:
            self.sharers.came(key, task)
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
            if old is None or not _same_room(old, facts, True):
                self.room.note(task.node_name, task.resreq, task.status is TaskStatus.RELEASING, 1.0)
            node = cluster.nodes.get(task.node_name)
            if node is not None:
                node.tasks[key] = task
        elif any(name not in cluster.table.dim_index for name in task.resreq.names()):
            self.room.relayout = True       # a resource no column holds yet
        if task.gpu is not None:
            self.sharers.placed(task)

    def _gpu_memory(self, node: NodeName) -> int | None:
        info = self.cluster.nodes.get(node)
        return gpu_memory_label(info.spec.labels) if info is not None else None

    def _moved_in_place(self, key: PodKey, old: TaskInfo, facts: PodFacts) -> None:
        """A task's echo: its status, node, condition and start as facts say, all else
        as it was (its job, placement, priority: nothing to count again)."""
        task = self.tasks[key] = old.evolve(**dict(zip(_ECHOED_NAMES, _ECHOED(facts), strict=True)))
        nodes = self.cluster.nodes
        was = old.node_name if old.status in OCCUPYING_STATUSES else None
        now = task.node_name if task.status in OCCUPYING_STATUSES else None
        if (was or now) and not _same_room(old, facts, True):
            if was:
                self.room.note(was, old.resreq, old.status is TaskStatus.RELEASING, -1.0)
            if now:
                self.room.note(now, task.resreq, task.status is TaskStatus.RELEASING, 1.0)
        if was and was in nodes:
            nodes[was].tasks.pop(key, None)
        if now and now in nodes:
            nodes[now].tasks[key] = task
        self.cluster.jobs[task.job].update_task(task)
        self.moved.add(task.job)            # its counts changed, not what it declares
        self.revisit(task.job)

    def put_node(self, name: str, spec: NodeSpec | None) -> None:
        node = self.cluster.nodes.get(NodeName(name))
        if spec is None or node is None or self.room.relayout:
            self.room.relayout = True
            return
        table = self.cluster.table
        if any(n not in table.dim_index for n in spec.allocatable.names()):
            self.room.relayout = True
            return
        gpus = self.cluster.gpus
        if (gpus.on(node.name) or self.sharers.unresolved) and (
                gpu_memory_label(node.spec.labels) != gpu_memory_label(spec.labels)
                or node.spec.allocatable.get(GPU) != spec.allocatable.get(GPU)):
            # Its shared devices are measured anew, and its sharers' charges.
            self.room.relayout = True
            self.sharers.remeasured(node)
            return
        self.cluster.respec(node, spec)
        table.set_alloc(node.index, table.row_of(spec.allocatable))

    # -- shards: nodes joining and leaving the pool, pods changing hands --------------------

    def node_joined(self, name: str) -> None:
        """A node came into the pool (see Foreign.node_joined)."""
        self.foreign.node_joined(name)

    def node_left(self, name: str) -> None:
        """A node left the pool (see Foreign.node_left)."""
        self.foreign.node_left(name)

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
        if key in self.changed:
            # Already to be described anew at the next catch-up, and no session
            # has seen it since (a snapshot catches up first): nothing to add.
            return
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
        for pod, task in self.assumed.settling().items():
            if self.tasks.get(pod) is task:         # no echo yet: as it will show it
                bound = self.tasks[pod] = task.evolve(status=TaskStatus.BOUND, unschedulable=None,
                                                      unschedulable_reason=None)
                self.cluster.settle(task, bound)
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
                describe(job, [pods[k] for k in job.tasks], self.groups, self.priorities,
                         self.strangers.of(key))
            else:
                self._forget(key)
            ledger.put(key, job)
        self.changed, self.moved = set(), set()
        self.room.sum_into_table()

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
        self.foreign.publish()
        if self.room.relayout or self._queues_changed:
            self._layout(nodes, queues)
        if self.sharers.unresolved:
            self._resolve(pods, nodes)
            self.catch_up(pods)
        # A job that changed, or was spoken of, is looked at once more: what
        # was said of it may need saying again (or differently).
        cluster.set_active(self.ledger.unsettled | self.unreported.keys())
        self._lent_seq = self._seq
        cluster.priority_classes = dict(self.priorities.values)
        cluster.namespace_labels = namespaces
        cluster.now = now
        cluster.lend(self.placements.rules_in_play(cluster.foreign), self.ledger)
        self._lent = True
        return cluster

    def _resolve(self, pods: Mapping[PodKey, PodFacts], nodes: Mapping[str, NodeSpec]) -> None:
        """Placed gpu-memory pods read before their node was known (or whose
        node's GPUs changed): made again, so their charge is of their GPU."""
        for key, facts in self.sharers.resolvable(pods, nodes):
            self.put_pod(key, facts, facts)

    def _layout(self, nodes: Mapping[str, NodeSpec], queues: Mapping[str, QueueInfo]) -> None:
        old = self.cluster
        if self.room.relayout:
            fresh = ClusterInfo.assemble(nodes.values(), old.jobs.values(), queues.values(),
                                         foreign=old.foreign)
            old.relay(fresh.nodes, fresh.table, fresh.gpus)
            old.queues, old.tree = fresh.queues, fresh.tree
        else:
            old.queues, old.tree = build_queue_tree(queues.values())
        self.room.relayout = self._queues_changed = False


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
