"""Session: one scheduling cycle over a snapshot.

Plugins register callbacks when it opens; actions ask it questions and change
it only through Statements; when it closes, its decisions are a list of
effects. A session does no I/O.
"""
from __future__ import annotations

import contextlib
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterator,
    Protocol,
    Sequence,
    TypeVar,
    TypeVarTuple,
    overload,
)

import numpy as np

from kaisched.api.claimquota import claim_charge
from kaisched.api.clock import to_rfc3339
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.dradevices import Claim
from kaisched.api.gangplan import Unit, minimum_tasks, placement_units
from kaisched.api.job import JobInfo
from kaisched.api.queue import QueueInfo
from kaisched.api.resource import Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, JobKey, NodeName, PodKey, TaskStatus
from kaisched.framework.effects import Cause, Effect, Prebind
from kaisched.framework.explanation import Explanation
from kaisched.framework.failures import Failures, JobError, Opened
from kaisched.framework.hooks import (
    CheckKey,
    FilterKey,
    Hook,
    HookKey,
    HookRegistry,
    OneRow,
    PodFilter,
    PodFilterKey,
    PodRuleKey,
    Taken,
    TaskTest,
)
from kaisched.framework.parts import Disruptions, Gate, Holds, Moves, StarvingRoom
from kaisched.framework.preemptiondelay import PreemptionDelay
from kaisched.framework.protection import Protection, Protections
from kaisched.framework.selection import RESOURCE_FIT, Choice, NodeSelection
from kaisched.framework.statement import Statement

if TYPE_CHECKING:
    from kaisched.framework.config import SchedulerConfig


class Plugin(Protocol):
    """What a session asks of a plugin: to register its callbacks when it
    opens, and to say what it has to say when it closes."""

    name: str

    def on_session_open(self, ssn: Session) -> None: ...

    def on_session_close(self, ssn: Session) -> None: ...


# A callback's arguments and answer: register matches them against the
# key's callback type, so a lambda's parameters get the key's types too.
Ts = TypeVarTuple("Ts")
R = TypeVar("R")


class Session:
    def __init__(self, cluster: ClusterInfo, config: SchedulerConfig,
                 plugins: Sequence[Sequence[Plugin]],
                 effects: list[Effect] | None = None) -> None:
        self.cluster = cluster
        self.config = config
        self.now = cluster.now
        self.now_text = to_rfc3339(cluster.now)          # for every timestamp it writes
        # The plugins' callbacks: the framework's own. Actions ask the questions
        # below (tests/unit/test_hook_contract.py keeps them from the registry).
        self.hooks = HookRegistry()
        self.plugins = [p for tier in plugins for p in tier]
        # Where decisions go: a plain list, or the runtime's outbox that hands
        # each effect to the binder as it is made.
        self.effects: list[Effect] = [] if effects is None else effects
        # The action deciding now (run() names it), and the jobs whose
        # decision raised: each lost its turn (decide()).
        self.action = ""
        self.failures = Failures()
        self.placed: dict[PodKey, NodeName] = {}          # committed binds
        self.reservations: dict[PodKey, NodeName] = {}    # held for this session only
        self.unschedulable: dict[JobKey, str] = {}        # why a job was not placed
        self.blockers: dict[JobKey, Blocker] = {}         # ... and the class of what blocks it
        self.binding_waits: dict[JobKey, str] = {}        # placed gangs not bound yet, and why
        self.stale_since: dict[JobKey, str | None] = {}   # gang below minMember since when
        # What the session is built from, one concern each (kaisched.framework.parts),
        # changed only through their methods: the NonStrict holds; the enqueue
        # gate; what consolidation moved and the room it carries on; the
        # room held for starving gangs, which node selection reads; and what
        # the PodDisruptionBudgets let the session evict.
        self.holds: Holds[Statement] = Holds()
        self.gate = Gate()
        self.moves = Moves()
        self.starving = StarvingRoom(self._held_changed, cluster.table.alloc.shape)
        self.disruptions = Disruptions(cluster)
        self._current_plugin = ""
        self.preemption_delay = PreemptionDelay(config.preemption_delay, self.now, self.job_ready)
        for tier in plugins:
            self.hooks.begin_tier()
            for plugin in tier:
                self._current_plugin = plugin.name
                plugin.on_session_open(self)
        self._queue_key = self.hooks.order_key(Hook.QUEUE_ORDER)
        self._job_key = self.hooks.order_key(Hook.JOB_ORDER)
        self._task_key = self.hooks.order_key(Hook.TASK_ORDER)
        # Order keys actions sort by as they are (asked per pick: no wrapper).
        # A queue, given what its head job needs: where it goes among queues.
        self.queue_head_order_key = self.hooks.order_key(Hook.QUEUE_HEAD_ORDER)
        # A victim queue, what was taken from it so far, the reclaimer's need:
        # the queue with the least key gives first.
        self.victim_queue_order_key = self.hooks.order_key(Hook.VICTIM_QUEUE_ORDER)
        self._ends: dict[JobKey, float | None] = {}
        self.selection = NodeSelection(cluster, self.hooks, self.starving, self.job_ends_by)
        self.protections = Protections(self.hooks.callbacks(Hook.PROTECTION), cluster.jobs, self.now)
        self.explanation = Explanation(cluster, self.selection, config.reservation_backfill)
        self.prebinds = self.hooks.callbacks(Hook.PREBIND)     # empty: allocations need none
        # Asked per placement (or several times a placement): the callbacks
        # held here, not looked up through the registry each time. Plugins
        # register only while the session opens, so the lists stay as they are.
        self._ready_fns = self.hooks.callbacks(Hook.JOB_READY)
        self._allocatable_fns = self.hooks.callbacks(Hook.ALLOCATABLE)
        self._on_allocate = self.hooks.callbacks(Hook.ON_ALLOCATE)
        self._on_deallocate = self.hooks.callbacks(Hook.ON_DEALLOCATE)

    def _held_changed(self) -> None:
        """Room held for a starving gang was taken or given back."""
        self.selection.held_changed()

    # -- registration (plugins, while the session opens) -------------------------
    @overload
    def register(self, key: PodFilterKey[Callable[[*Ts], R]], fn: Callable[[*Ts], R], label: str | None = None, *,
                 blocker: Blocker = Blocker.PLACEMENT, when: TaskTest | None = None,
                 aside: Callable[[*Ts], R] | None = None, evicting: Callable[[*Ts], R] | None = None
                 ) -> None: ...

    @overload
    def register(self, key: FilterKey[Callable[[*Ts], R]], fn: Callable[[*Ts], R], label: str | None = None, *,
                 blocker: Blocker = Blocker.PLACEMENT, one: OneRow | None = None,
                 aside: Callable[[*Ts], R] | None = None, evicting: Callable[[*Ts], R] | None = None
                 ) -> None: ...

    @overload
    def register(self, key: PodRuleKey[Callable[[*Ts], R]], fn: Callable[[*Ts], R], label: str | None = None, *,
                 when: TaskTest | None = None) -> None: ...

    @overload
    def register(self, key: CheckKey[Callable[[*Ts], R]], fn: Callable[[*Ts], R], label: str | None = None, *,
                 blocker: Blocker) -> None: ...

    @overload
    def register(self, key: HookKey[Callable[[*Ts], R]], fn: Callable[[*Ts], R], label: str | None = None, *,
                 one: OneRow | None = None) -> None: ...

    def register(self, key: HookKey[Callable[[*Ts], R]], fn: Callable[[*Ts], R], label: str | None = None, *,
                 blocker: Blocker = Blocker.PLACEMENT, when: TaskTest | None = None,
                 one: OneRow | None = None, aside: Callable[[*Ts], R] | None = None,
                 evicting: Callable[[*Ts], R] | None = None) -> None:
        """Add fn, of the key's callback type, to the plugin's tier.
        label: the words explanations give for a filter (default: the plugin's name);
        blocker (filters, checks): what a gang the filter keeps off every node,
        or the check refuses, waits for;
        when (pod rules): the tasks the rule is about; for any other task fn
        answers None, and is not asked;
        one (PREDICATE, IDLE, NODE_ORDER): fn's answer for one row, equal to
        fn's bit for bit, asked when a class refreshes only a few rows;
        aside (filters): fn's answer with resources aside, whether the node
        could ever take the task, which static_mask asks instead of fn;
        evicting (filters): fn's answer while an eviction is planned, where
        what evictable pods hold counts as freed, which room_mask asks
        instead (else aside, else fn)."""
        self.hooks.register(key, fn, label or self._current_plugin, blocker, when, one, aside, evicting)

    def close(self) -> list[Effect]:
        for plugin in reversed(self.plugins):
            self.action = plugin.name       # what a job's guarded report there says
            plugin.on_session_close(self)
        return self.effects

    # -- questions actions ask -----------------------------------------------------
    def queue_order_key(self, queue: QueueInfo) -> tuple[Any, ...]:
        return (self._queue_key(queue), queue.name)

    def job_order_key(self, job: JobInfo) -> tuple[Any, ...]:
        return (self._job_key(job), job.creation, job.key)

    def task_order_key(self, task: TaskInfo) -> tuple[Any, ...]:
        job = self.cluster.jobs[task.job]
        rank = next((i for i, sg in enumerate(job.spec.subgroups) if sg.name == task.subgroup),
                    len(job.spec.subgroups))
        return (rank, self._task_key(task), task.key)

    def job_ends_by(self, key: JobKey) -> float | None:
        """When the job's pods still to be placed are sure to have ended if
        placed now: the latest of their enforced limits (activeDeadlineSeconds
        and grace); None when one has none, or reservation backfill is off
        (then nothing held is lent to it)."""
        if key in self._ends:
            return self._ends[key]
        job = self.cluster.jobs.get(key)
        ends: float | None = None
        if self.config.reservation_backfill and job is not None:
            pending = [t.ends_by(self.now) for t in job.tasks.values()
                       if t.status is TaskStatus.PENDING]
            if pending and all(e is not None for e in pending):
                ends = max(e for e in pending if e is not None)
        self._ends[key] = ends
        return ends

    def pending(self, job: JobInfo) -> list[TaskInfo]:
        """The job's tasks still to place: Pending, not gated, and not reserved this session."""
        if not job.count_of(TaskStatus.PENDING):       # the count the job keeps: none to look at
            return []
        return [t for t in job.tasks.values()
                if t.status is TaskStatus.PENDING and not t.gates and t.key not in self.reservations]

    def placement_units(self, job: JobInfo, tasks: Sequence[TaskInfo]) -> list[Unit]:
        """The tasks in the units a gang is placed in: what its subgroup tree
        still needs to reach its minimum first (a subgroup a choice takes as
        one whole unit; subgroups in declared order), then the children no
        choice took, whole, then the extras one by one -- so no subgroup's
        extras take the room another's minimum needs, and none is left half
        placed (kaisched/api/gangplan.py)."""
        return placement_units(job, self._in_task_order(tasks))

    def _in_task_order(self, tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
        # One task (a single-pod job, most placements) has no order to ask for.
        return sorted(tasks, key=self.task_order_key) if len(tasks) > 1 else list(tasks)

    def ordered_tasks(self, job: JobInfo, tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
        """The tasks of placement_units, in the order they are placed."""
        if not job.spec.subgroups:
            return sorted(tasks, key=self.task_order_key)
        return [t for unit in self.placement_units(job, tasks) for t in unit.tasks]

    def minimum_tasks(self, job: JobInfo, tasks: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Of tasks, those that take the job to its minimum (one unit once it is there)."""
        return minimum_tasks(job, self._in_task_order(tasks))

    def job_invalid(self, job: JobInfo) -> str | None:
        return self.hooks.first_reason(Hook.JOB_VALID, job)

    def awaits_grouping(self, job: JobInfo) -> bool:
        """A pod a controller made moments ago, with no gang declared, waits
        quietly for the PodGrouper (config podGrouperWait): placed alone
        first, it would start a gang one pod early -- a StatefulSet's pod
        made again after an eviction, bound before its siblings."""
        wait = self.config.pod_grouper_wait
        if not wait or job.spec.declared or len(job.tasks) != 1:
            return False
        task = next(iter(job.tasks.values()))
        return str(task.key) == str(job.key) and task.controlled \
            and task.status is TaskStatus.PENDING \
            and bool(task.creation) and self.now - task.creation < wait     # 0: made when unknown

    def enqueueable(self, job: JobInfo) -> str | None:
        """None when a not-ready job may try to start now (minResources fits)."""
        refusal = self.enqueue_refusal(job)
        return refusal[0] if refusal else None

    def enqueue_refusal(self, job: JobInfo) -> tuple[str, Blocker] | None:
        """Why a not-ready job may not try to start now, and what it waits
        for (what the refusing plugin registered): its queue's room (quota),
        or the cluster's (resources)."""
        return self.hooks.first_objection(Hook.ENQUEUEABLE, job)

    def job_ready(self, job: JobInfo) -> bool:
        # all_true inlined: asked several times a placement.
        for fn in self._ready_fns:
            if not fn(job):
                return False
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return self.hooks.all_true(Hook.JOB_PIPELINED, job)

    def quota_request(self, task: TaskInfo) -> Resource:
        """What the task counts against its queue: its requests (a share of a
        GPU as that part of one, see ClusterInfo.charge), and the devices its
        ResourceClaims hold or ask for (kaisched.api.claimquota)."""
        request = self.cluster.charge(task)
        if not task.claims:
            return request
        return request + claim_charge(task, self.cluster.devices)

    def allocatable(self, job: JobInfo, task: TaskInfo) -> str | None:
        """None when the job's queue has room for the task, else why not."""
        for fn in self._allocatable_fns:       # first_reason inlined: asked per placement
            reason = fn(job, task)
            if reason:
                return reason
        return None

    def allocatable_on(self, job: JobInfo, task: TaskInfo) -> tuple[str | None, np.ndarray | None]:
        """The queue's answer node by node, as KAI's
        IsTaskAllocationOnNodeOverCapacity gives it: (None, None) when the
        job's queue has room for the task wherever it goes; (None, rows) when
        only on those nodes (a gpu-memory share is charged its part of the
        GPU it lands on: less on a bigger GPU); (why, None) when on none."""
        refusal = self.allocatable(job, task)
        share = task.gpu
        if refusal is None or share is None or share.memory is None or share.portion is not None:
            return refusal, None
        # Refused at its part of the smallest GPU: asked again per GPU memory.
        rows = None
        for memory, mask in self.cluster.gpu_memory_rows().items():
            if self.allocatable(job, task.evolve(gpu=share.at(memory))) is None:
                rows = mask if rows is None else rows | mask
        return (refusal, None) if rows is None else (None, rows)

    def overused(self, job: JobInfo, task: TaskInfo) -> str | None:
        """None when the job's queue may still take the task by reclaiming."""
        return self.hooks.first_reason(Hook.OVERUSED, job, task)

    def reclaim_blocked(self, job: JobInfo, need: Resource) -> str | None:
        """None when the job may reclaim what it needs from other queues, else why not."""
        return self.hooks.first_reason(Hook.RECLAIM_GATE, job, need)

    def limit_refusal(self, job: JobInfo, need: Resource) -> str | None:
        """None when the limits of the job's queue and its ancestors leave room
        for need (quota does not count), else why not."""
        return self.hooks.first_reason(Hook.LIMIT_ROOM, job, need)

    def beyond_share(self, job: JobInfo, need: Resource) -> str | None:
        """None when need, alone, fits in the fair share of the job's queue
        (the other queues' demand counted), else why not."""
        return self.hooks.first_reason(Hook.SHARE_ROOM, job, need)

    def reclaim_unfair(self, job: JobInfo, need: Resource, taken: Taken) -> str | None:
        """None when taking these (each victim's queue and what it gives) for
        the job's need is fair to every queue, else why not."""
        return self.hooks.first_reason(Hook.RECLAIM_FAIR, job, need, taken)

    # The conformance rule comes first and is not a plugin: kube-system and
    # critical pods, jobs that are not preemptible, and pods a
    # PodDisruptionBudget keeps (the Eviction API would refuse them) are never
    # victims; a group of victims is checked whole where it goes. Then
    # protection (min-runtime): a protected job gives only its pods beyond its
    # minimum, whatever tier the plugin that protects it is in. The candidates
    # are what would go together: a job's surplus is counted against all of them.
    def preemptable(self, preemptor: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Candidates the plugins agree may be evicted for preemptor, in its queue."""
        allowed = self._unprotected(Cause.PREEMPT, preemptor, candidates)
        return self.hooks.victims(Hook.PREEMPTABLE, preemptor, allowed) if allowed else []

    def preempt_below(self, preemptor: TaskInfo) -> int | None:
        """The priority every victim's job of preemptor is below (None: no
        bound): jobs of that priority or higher, preemptable() would refuse."""
        return self.hooks.victims_below(Hook.PREEMPTABLE, Hook.PREEMPT_BELOW, preemptor)

    def reclaimable(self, reclaimer: TaskInfo, candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        """Candidates the plugins agree may be evicted for reclaimer, from other queues."""
        allowed = self._unprotected(Cause.RECLAIM, reclaimer, candidates)
        return self.hooks.victims(Hook.RECLAIMABLE, reclaimer, allowed) if allowed else []

    def _unprotected(self, kind: Cause, preemptor: TaskInfo,
                     candidates: Sequence[TaskInfo]) -> list[TaskInfo]:
        budgets = self.disruptions
        allowed = [c for c in candidates
                   if not c.critical and self.cluster.jobs[c.job].spec.preemptible
                   and budgets.refusing((c,)) is None]
        return self.protections.unprotected(kind, self.cluster.jobs[preemptor.job], allowed)

    # -- what holds evictions back (framework/protection.py, preemptiondelay.py) ------
    @property
    def protects(self) -> bool:
        """Some plugin protects running jobs (min-runtime)."""
        return bool(self.protections)

    def protected_until(self, job: JobInfo, kind: Cause, by: JobInfo | None = None) -> Protection | None:
        """Why the running job may not be a victim of this kind of eviction
        now (for the job by: a reclaim's min-runtime may depend on its queue),
        and until when; None when it may be. A move (consolidation) asks for
        both kinds. Answered as the job was when the session opened."""
        return self.protections.of(job, kind, by)

    def may_evict_for(self, job: JobInfo) -> str | None:
        """None when the job may evict others now (preempt, reclaim, or a move
        that makes room for it); else when it may: its preemption delay runs."""
        return self.preemption_delay.holds_back(job)

    def pending_since(self, job: JobInfo) -> float:
        """When the job last became pending; its preemption delay counts from here."""
        return self.preemption_delay.pending_since(job)

    def evicted_for(self, job: JobKey) -> None:
        """The job evicted others (a statement committed): its delay counts again from now."""
        self.preemption_delay.rearm(job)

    def eviction_group(self, victim: TaskInfo) -> list[TaskInfo]:
        """The victim and every task that must be evicted with it (its gang)."""
        group = self.hooks.union(Hook.EVICTION_GROUP, victim)
        return group if any(t.key == victim.key for t in group) else [victim, *group]

    def class_key(self, task: TaskInfo) -> tuple[Any, ...]:
        """The task's equivalence class: tasks of one class get the same answers."""
        return self.selection.class_key(task)

    def static_mask(self, task: TaskInfo) -> np.ndarray:
        """Nodes passing every filter but resources: where room could be made
        (a share of a GPU counts as a resource: only whether the node's GPUs
        could ever hold it is asked)."""
        return self.selection.static_mask(task)

    def node_mask(self, task: TaskInfo) -> np.ndarray:
        """Nodes whose own facts (readiness, labels, taints) let the task in,
        resources aside: where evicting pods could help it at all."""
        return self.selection.node_mask(task)

    def room_mask(self, task: TaskInfo) -> np.ndarray:
        """static_mask, where what evictable pods hold beyond resources (their
        devices) counts as freed: the nodes eviction could make room on."""
        return self.selection.static_mask(task, evicting=True)

    def pod_fits(self, task: TaskInfo, node: NodeName) -> bool:
        """Every filter over the pods and devices around the node lets the
        task take it (once what is releasing there is gone)."""
        return self._passes(Hook.POD_PREDICATE, task, node)

    def free_beyond_resources(self, task: TaskInfo, node: NodeName) -> bool:
        """What the task needs beyond resources on the node (devices) is free
        now, not only once pods going away are gone."""
        row = np.array([self.cluster.table.index[node]])
        return self._passes(Hook.POD_IDLE, task, node) and all(
            fn(task, row)[0] for fn in self.hooks.callbacks(Hook.IDLE))

    def devices_fit(self, task: TaskInfo, node: NodeName) -> bool:
        """What the task needs beyond the node table's resources (devices: its
        ResourceClaims, its share of a GPU) can be had on the node, once what
        is releasing there is gone: every filter a plugin registered as
        blocked by resources passes there."""
        row = np.array([self.cluster.table.index[node]])
        return all(found.fn(task, row)[0] for found in self.selection.filters()
                   if found.blocker is Blocker.RESOURCES and found.label != RESOURCE_FIT)

    def _passes(self, key: HookKey[PodFilter], task: TaskInfo, node: NodeName) -> bool:
        row = np.array([self.cluster.table.index[node]])
        for fn in self.hooks.callbacks(key):
            found = fn(task, row)
            if found is not None and not found[0]:
                return False
        return True

    def select_node(self, task: TaskInfo, idle_only: bool = False,
                    within: np.ndarray | None = None) -> Choice | None:
        """The best node for the task (see NodeSelection.select)."""
        return self.selection.select(task, idle_only, within)

    def record_unschedulable(self, job: JobInfo, message: str,
                             blocker: Blocker | None = None) -> None:
        """Why the job was not placed, and the class of what blocks it (kept from
        an earlier record when not given; resources when never given). A job
        whose decision raised keeps saying so."""
        if job.key in self.failures.failed:
            return
        self.unschedulable[job.key] = message
        if blocker is not None:
            self.blockers[job.key] = blocker
        else:
            self.blockers.setdefault(job.key, Blocker.RESOURCES)

    def note_unschedulable(self, job: JobInfo, note: str) -> None:
        """Add to why the job was not placed (what an eviction it could not
        make was held back by), keeping the class of what blocks it."""
        said = self.unschedulable.get(job.key)
        if said is not None and note not in said and job.key not in self.failures.failed:
            self.unschedulable[job.key] = f"{said}; {note}"

    def blocker_of(self, task: TaskInfo) -> Blocker:
        """What keeps the task off every node: resources when some node passes
        every other filter but lacks room; else the class of the first filter
        that leaves no node (placement rules, unless its plugin registered it
        with another)."""
        alive = np.ones(len(self.cluster.table), dtype=bool)
        for found in self.selection.filters():
            if found.label == RESOURCE_FIT:
                continue
            alive &= found.fn(task, self.selection.all_rows)
            if not alive.any():
                return found.blocker
        return Blocker.RESOURCES

    def explain_task(self, task: TaskInfo) -> str:
        """Why no node takes the task, by filter, in numbers."""
        return self.explanation.task(task)

    def explain_node(self, task: TaskInfo, node: NodeName) -> str | None:
        """Why this node does not take the task, or None if it fits."""
        return self.explanation.node(task, node)

    # -- one job's decision, guarded --------------------------------------------------
    def decide(self, job: JobInfo, fn: Callable[[*Ts], R], *args: *Ts) -> R | None:
        """fn(*args), the decision of one job (or a question about it alone).
        An exception costs the job its turn, never the cycle: the statements
        opened meanwhile are discarded, and a NonStrict hold it had; the job
        says SchedulerError with the exception's message; the error is kept
        for the cycle's result (counted, its traceback logged); and None is
        returned, as it is for a job that already failed this session, which
        is not asked again. (Asked per job of every action: kept lean.)"""
        failed = self.failures.failed
        if failed and job.key in failed:
            return None
        holds = self.holds.held
        held = holds.get(job.key) if holds else None    # a decision may take it
        opened = self.failures.opened_stack
        opened.append([])
        try:
            found = fn(*args)
        except Exception as exc:       # a bug, or an object no check foresaw
            self._undo(job, opened.pop(), held, exc)
            return None
        opened.pop()
        return found

    def ask_each(self, jobs: Sequence[JobInfo], fn: Callable[[JobInfo], R]) -> list[R | None]:
        """fn(job) of each job, in order: a question about each job alone,
        which asked twice answers the same and changes nothing more (what it
        records of a job, it records alike). Asked under one guard for all of
        them -- a guard per job costs more than most answers -- and only when
        one raises, again job by job under decide(), so that job alone loses
        its turn. A job that failed this session answers None."""
        failed = self.failures.failed
        try:
            return [None if failed and job.key in failed else fn(job) for job in jobs]
        except Exception:
            return [self.decide(job, fn, job) for job in jobs]

    def report_each(self, jobs: Sequence[JobInfo], fn: Callable[[Session, JobInfo], None]) -> None:
        """fn(self, job) of each job, in order, where all fn changes is what it
        reports (what a plugin says of each job as the session closes): under
        one guard for all, its effects handed over together at the end; when
        one raises, none of them, and each job asked again under its own
        guard (guard(): said of even a job that failed this session)."""
        try:
            with self.together():
                for job in jobs:
                    fn(self, job)
        except Exception:
            for job in jobs:
                self.guard(job, fn, self, job)

    def report(self, effect: Effect) -> None:
        """What a plugin says as the session closes (a status, an event, a
        device given back or kept): written as it is, no statement's."""
        self.effects.append(effect)

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """The effects emitted inside are handed over together as it ends,
        in order, or, if it raises, never."""
        out, self.effects = self.effects, []
        try:
            yield
        except BaseException:
            self.effects = out
            raise
        made, self.effects = self.effects, out
        for effect in made:
            out.append(effect)          # (an outbox hands each to the binder)

    def guard(self, job: JobInfo, fn: Callable[[*Ts], R], *args: *Ts) -> R | None:
        """decide(), asked even of a job that failed this session (what is
        said of it when the session closes)."""
        failed = self.failures.failed
        if job.key not in failed:
            return self.decide(job, fn, *args)
        failed.discard(job.key)     # asked once more, as if it had not failed
        try:
            return self.decide(job, fn, *args)
        finally:
            failed.add(job.key)

    def _undo(self, job: JobInfo, opened: list[Opened], held: Statement | None,
              exc: Exception) -> None:
        """A decision raised: discard what it opened (last first) and the
        NonStrict hold the job had when it began, and say so."""
        for stmt in reversed(opened):
            stmt.discard()
        self.holds.give_up(job.key, held)
        error = JobError.of(job.key, self.action, exc)
        self.fail(job, error)
        # The gangs of its gang group are decided with it: they lose the turn too.
        for key in job.spec.gang_group:
            member = self.cluster.jobs.get(key)
            if member is not None and key not in self.failures.failed:
                self.fail(member, error, counted=False)

    def run(self, action: str, execute: Callable[[Session], None]) -> None:
        """Run an action (its name, its execute). An exception outside any
        one job's decision (a step over many jobs: victims in order, say)
        costs the rest of that action this cycle, never the cycle: the
        statements it opened are discarded, the error is kept (counted and
        logged as a job's is, under no job), and the next action runs."""
        self.action = action
        opened = self.failures.opened_stack
        opened.append([])
        try:
            execute(self)
        except Exception as exc:
            for stmt in reversed(opened.pop()):
                stmt.discard()
            self.failures.errors.append(JobError.of(JobKey(""), action, exc))
            return
        opened.pop()

    def fail(self, job: JobInfo, error: JobError, counted: bool = True) -> None:
        """The job's decision raised (or, not counted, that of a gang decided
        with it): it says so, and is not decided again this session."""
        self.starving.release(job.key)
        self.record_unschedulable(job, f"scheduler error in {error.action or 'the session'}: "
                                  f"{error.message}", Blocker.ERROR)
        if counted:
            self.failures.add(error)
        else:
            self.failures.failed.add(job.key)

    # -- changes (only Statement operations call these) ----------------------------
    def statement(self) -> Statement:
        stmt = Statement(self)
        stack = self.failures.opened_stack     # the job being decided, if any, opened it
        if stack:
            stack[-1].append(stmt)
        return stmt

    def emit(self, effect: Effect) -> None:
        """A statement's operation made the effect (a bind, an eviction)."""
        self.effects.append(effect)

    def prebind(self, placed: TaskInfo) -> list[Prebind]:
        """What the plugins need done before a task just allocated is bound (none for most)."""
        fns = self.prebinds
        if len(fns) == 1:       # one plugin's answer is every answer (read, never kept apart)
            return fns[0](placed)
        return [p for fn in fns for p in fn(placed)]

    def wait_for_binding(self, job: JobKey, reason: str) -> None:
        """The gang is placed but must not be bound yet (its volumes are being
        provisioned): its room is held this session and it says why."""
        if job not in self.binding_waits:       # the first reason speaks for the gang
            self.binding_waits[job] = reason
            self.unschedulable[job] = reason

    def assign(self, task: TaskInfo, status: TaskStatus, node: NodeName,
               gpu_groups: tuple[str, ...] | None = None) -> TaskInfo:
        placed = self.cluster.assign(task, status, node, gpu_groups)
        for fn in self._on_allocate:        # notify inlined: asked per placement
            fn(placed)
        return placed

    def claim_moves(self, placed: TaskInfo) -> list[tuple[Claim, Claim]]:
        """Allocate and reserve the placed task's ResourceClaims on its node
        (the plugins decide how); the moves are made here, undone by the
        statement."""
        moves = self.hooks.every(Hook.CLAIMS, placed)
        for old, new in moves:
            self.cluster.devices.put(old, new)
        return moves

    def unassign(self, placed: TaskInfo, previous: TaskInfo) -> None:
        self.cluster.unassign(placed, previous)
        for fn in self._on_deallocate:
            fn(placed)

    def release(self, task: TaskInfo) -> TaskInfo:
        released = self.cluster.release(task)
        self.disruptions.evicted(task)
        self.hooks.notify(Hook.ON_DEALLOCATE, task)     # its queue share is given back
        return released

    def unrelease(self, released: TaskInfo, previous: TaskInfo) -> None:
        self.cluster.unrelease(released, previous)
        self.disruptions.restored(previous)
        self.hooks.notify(Hook.ON_ALLOCATE, previous)
