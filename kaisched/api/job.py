"""JobInfo: one gang (a PodGroup, declared or implicit) and its tasks."""
from __future__ import annotations

from typing import Iterable, Iterator

import attrs

from kaisched.api.dradevices import Consumer, GroupClaim
from kaisched.api.resource import Resource, sum_resources
from kaisched.api.subgroups import NO_TOPOLOGY as NO_TOPOLOGY
from kaisched.api.subgroups import SubGroup as SubGroup
from kaisched.api.subgroups import SubGroupTree, tree_of
from kaisched.api.subgroups import TopologyRule as TopologyRule
from kaisched.api.task import TaskInfo
from kaisched.api.types import (
    EVICTABLE_STATUSES,
    LIVE_READY_STATUSES,
    READY_STATUSES,
    Disruption,
    GangMode,
    GangRules,
    JobKey,
    Keyed,
    PodGroupPhase,
    PodKey,
    QueueName,
    Reason,
    TaskStatus,
)

_ALIVE = READY_STATUSES | {TaskStatus.PENDING, TaskStatus.PIPELINED}
_HOLDING = READY_STATUSES - {TaskStatus.SUCCEEDED}       # on a node
_PLACED = EVICTABLE_STATUSES | {TaskStatus.ALLOCATED, TaskStatus.PIPELINED}
# Pods that ran (or run) on a node: what a job's start is read from.
_STARTED = frozenset({TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED})


@attrs.frozen(slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None      # metav1.Condition's, where the object has it


@attrs.frozen(slots=True)
class PodGroupStatus:
    phase: PodGroupPhase = PodGroupPhase.PENDING
    conditions: tuple[Condition, ...] = ()
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    pending: int = 0
    last_schedule_time: str | None = None
    stale_since: str | None = None
    unschedulable_since: str | None = None
    last_moved_time: str | None = None  # when consolidation last moved it (its cooldown)
    # When the gang last became pending (created, or evicted), moved on each
    # time it evicts others: its preemption delay counts from here.
    pending_since: str | None = None
    observed_generation: int = 0        # the spec generation a Timeout verdict is about

    def condition(self, type_: str) -> Condition | None:
        for c in self.conditions:       # a loop: asked of every PodGroup, each session
            if c.type == type_:
                return c
        return None


@attrs.frozen(slots=True)
class StatusTarget:
    """Where the condition of a PodGroup of another API is written: its
    apiVersion (the status subresource of that version) and condition type."""

    api_version: str
    condition: str
    terminal: bool = False          # once True it is never written again (v1beta1's)


@attrs.frozen(slots=True)
class GangSpec:
    """What the PodGroup (or the pods' gang annotations) declare."""

    min_member: int = 1
    queue: QueueName = QueueName("")        # empty: the pods' queue label, else "default"
    priority_class: str | None = None
    min_resources: Resource | None = None
    schedule_timeout: float | None = None
    mode: GangMode = GangMode.STRICT
    gang_group: tuple[JobKey, ...] = ()
    subgroups: tuple[SubGroup, ...] = ()
    min_sub_group: int | None = None    # the PodGroup's own: top-level subgroups to meet (None: all)
    preemptible: bool = True
    stale_grace: float | None = None
    wait_time: float | None = None  # NonStrict: how long placements may be held
    starvation_threshold: float | None = None   # override of the config's starvationThreshold
    declared: bool = False          # a PodGroup object exists for it
    topology: TopologyRule = NO_TOPOLOGY
    generation: int = 0
    priority: int | None = None     # the group's own priority value: wins over its class's
    disruption: Disruption = Disruption.GANG
    rules: GangRules = GangRules.KAISCHED
    status_target: StatusTarget | None = None   # a PodGroup of another API whose condition is written
    preemptible_below: int | None = None        # KAI: unset preemptibility follows the priority
    last_start: float | None = None     # KAI's kai.scheduler/last-start-timestamp annotation
    preemption_delay: float | None = None   # override of the config's preemptionDelay
    expected_runtime: float | None = None   # its pods' estimated run time (never a limit)
    # An upstream PodGroup's spec.resourceClaims: claims its pods share, reserved
    # for the group itself (claim_holder) rather than for each pod.
    claims: tuple[GroupClaim, ...] = ()
    claim_holder: Consumer | None = None


@attrs.define(eq=False, slots=True)
class JobInfo(Keyed):
    key: JobKey
    spec: GangSpec
    priority: int = 0
    creation: float = 0.0
    status: PodGroupStatus = PodGroupStatus()
    problem: str | None = None      # why the declaration is unusable, for the user
    tasks: dict[PodKey, TaskInfo] = attrs.field(factory=dict)
    # Plain dicts, not Counters: a snapshot builds one JobInfo per gang.
    _counts: dict[tuple[str | None, TaskStatus], int] = attrs.field(factory=dict)
    _totals: dict[TaskStatus, int] = attrs.field(factory=dict)   # the common question
    # Tasks in READY_STATUSES, kept by add_task/remove_task (so by every
    # placement and its undo): a gang's readiness is asked several times a
    # placement, and is read off this count rather than summed over statuses.
    _ready: int = 0

    @property
    def queue(self) -> QueueName:
        return self.spec.queue

    @property
    def min_member(self) -> int:
        return self.spec.min_member

    @property
    def ready_statuses(self) -> frozenset[TaskStatus]:
        """What counts toward its minimum: under the upstream Workload API's
        rules a completed pod no longer does."""
        return READY_STATUSES if self.spec.rules is GangRules.KAISCHED else LIVE_READY_STATUSES

    def add_task(self, task: TaskInfo) -> None:
        old = self.tasks.get(task.key)
        counts, totals = self._counts, self._totals
        if old is not None:
            counts[(old.subgroup, old.status)] -= 1
            totals[old.status] -= 1
            if old.status in READY_STATUSES:
                self._ready -= 1
        self.tasks[task.key] = task
        key = (task.subgroup, task.status)
        counts[key] = counts.get(key, 0) + 1
        totals[task.status] = totals.get(task.status, 0) + 1
        if task.status in READY_STATUSES:
            self._ready += 1

    update_task = add_task

    def remove_task(self, key: PodKey) -> None:
        old = self.tasks.pop(key, None)
        if old is not None:
            self._counts[(old.subgroup, old.status)] -= 1
            self._totals[old.status] -= 1
            if old.status in READY_STATUSES:
                self._ready -= 1

    def count(self, statuses: Iterable[TaskStatus], subgroup: str | None | object = ...) -> int:
        if subgroup is ...:
            get, n = self._totals.get, 0
            if isinstance(statuses, (set, frozenset)):
                # A job's tasks are in few statuses: read those (asked per placement).
                for s, k in self._totals.items():
                    if s in statuses:
                        n += k
                return n
            # A loop, not sum() over a generator: asked tens of thousands of
            # times a session (every gang's readiness), over a handful of statuses.
            for s in statuses:
                n += get(s, 0)
            return n
        wanted = set(statuses)
        return sum(n for (sg, st), n in self._counts.items() if st in wanted and sg == subgroup)

    def count_of(self, status: TaskStatus) -> int:
        return self._totals.get(status, 0)

    def totals(self) -> dict[TaskStatus, int]:
        """Tasks by status (read only; a status with none may be absent)."""
        return self._totals

    def ready_count(self, subgroup: str | None | object = ...) -> int:
        return self.count(READY_STATUSES, subgroup)

    @property
    def tree(self) -> SubGroupTree:
        return tree_of(self.spec.subgroups, self.spec.min_sub_group)

    def leaf_counts(self, statuses: Iterable[TaskStatus]) -> dict[str, int]:
        """Tasks in statuses per subgroup they name (None: those naming none)."""
        wanted = statuses if isinstance(statuses, (set, frozenset)) else set(statuses)
        out: dict[str, int] = {}
        for (sg, st), n in self._counts.items():
            if n and sg is not None and st in wanted:
                out[sg] = out.get(sg, 0) + n
        return out

    def alive_counts(self) -> dict[str, int]:
        """Per subgroup, the tasks that exist to meet a minimum: placed,
        running, done, or waiting to be placed -- not those held by gates."""
        out = self.leaf_counts(_ALIVE)
        for task in self.tasks.values():
            if task.gates and task.status is TaskStatus.PENDING and task.subgroup is not None:
                out[task.subgroup] -= 1
        return out

    def minimum_met(self, statuses: Iterable[TaskStatus] = READY_STATUSES) -> bool:
        """minMember and the subgroup tree (every subgroup's minimum, or as
        many of a subgroup's children as it needs) are met by tasks in statuses."""
        need = self.spec.min_member
        if len(self.tasks) < need:
            return False
        # count() inlined: every gang's readiness is asked several times a session.
        get, have = self._totals.get, 0
        for status in statuses:
            have += get(status, 0)
        if have < need:
            return False
        if not self.spec.subgroups:
            return True
        return self.tree.met(self.leaf_counts(statuses))

    def ready_met(self) -> bool:
        """minimum_met(self.ready_statuses), read off the count kept."""
        return self._kept_met(pipelined=False)

    def pipelined_met(self) -> bool:
        """minimum_met(self.ready_statuses | {PIPELINED}), read off the counts kept."""
        return self._kept_met(pipelined=True)

    def _kept_met(self, pipelined: bool) -> bool:
        spec = self.spec
        have = self._ready
        if pipelined:
            have += self._totals.get(TaskStatus.PIPELINED, 0)
        if spec.rules is not GangRules.KAISCHED:        # a completed pod does not count
            have -= self._totals.get(TaskStatus.SUCCEEDED, 0)
        if have < spec.min_member:
            return False
        if not spec.subgroups:
            return True
        statuses = self.ready_statuses | {TaskStatus.PIPELINED} if pipelined else self.ready_statuses
        return self.tree.met(self.leaf_counts(statuses))

    def members_of(self, subgroup: str) -> list[TaskInfo]:
        """The tasks in a subgroup: its own pods, or those of the leaves under it."""
        if self.tree.is_leaf(subgroup):
            return [t for t in self.tasks.values() if t.subgroup == subgroup]
        leaves = set(self.tree.leaves_under(subgroup)) if subgroup in self.tree.parent else set()
        return [t for t in self.tasks.values() if t.subgroup in leaves]

    def subgroup_met(self, subgroup: str, statuses: Iterable[TaskStatus]) -> bool:
        return self.tree.met_nodes(self.leaf_counts(statuses)).get(subgroup, False)

    def eviction_unit(self, victim: TaskInfo, gone: Iterable[TaskInfo] = ()) -> list[TaskInfo] | None:
        """The fewest of the job's placed tasks that may go with victim while
        the job keeps its minimum and no subgroup is left below its own (with
        `gone` already taken): victim alone, else all of the subgroup it is
        in, else of one above it. None: only the whole gang may go."""
        taken = {t.key for t in gone}
        ready = self.ready_statuses
        if self.count(ready) - len(taken) - 1 < self.min_member:
            return None
        if not self.spec.subgroups:
            return [victim]
        tree = self.tree
        have = self.leaf_counts(ready)
        holding = self.leaf_counts(_HOLDING)
        for t in gone:
            if t.subgroup in have and t.status in ready:
                have[t.subgroup] -= 1
                holding[t.subgroup] -= t.status in _HOLDING
        if not tree.met(have):
            return None
        if victim.subgroup is None or not tree.is_leaf(victim.subgroup):
            return [victim]
        if tree.keeps(have, {victim.subgroup: 1}, holding):
            return [victim]
        for node in tree.units_for(victim.subgroup):
            leaves = set(tree.leaves_under(node))
            tasks = [t for t in self.tasks.values() if t.subgroup in leaves
                     and t.status in _PLACED and t.key not in taken]
            remove: dict[str, int] = {}
            for t in tasks:
                if t.status in ready:
                    remove[str(t.subgroup)] = remove.get(str(t.subgroup), 0) + 1
            if self.count(ready) - len(taken) - sum(remove.values()) >= self.min_member \
                    and tree.keeps(have, remove, holding):
                return tasks
        return None

    def timed_out(self) -> bool:
        """Failed on Timeout for the spec as it is: not retried until it changes."""
        if self.status.phase is not PodGroupPhase.FAILED:
            return False
        cond = self.status.condition("Scheduled")
        return (cond is not None
                and cond.reason == Reason.TIMEOUT.value
                and self.status.observed_generation == self.spec.generation)

    def started(self, now: float) -> float | None:
        """When the job last started: when its minimum last came to be on
        nodes (the minMember-th earliest start among its pods there; a pod
        bound but not started yet starts now), or KAI's annotation if later.
        None when it does not run."""
        starts = sorted(now if t.started is None else t.started
                        for t in self.tasks.values() if t.status in _STARTED)
        if not starts:
            return None
        from_pods = starts[min(self.min_member, len(starts)) - 1]
        if self.spec.last_start is not None:
            return max(from_pods, self.spec.last_start)
        return from_pods

    def tasks_with(self, *statuses: TaskStatus) -> Iterator[TaskInfo]:
        wanted = set(statuses)
        return (t for t in self.tasks.values() if t.status in wanted)

    def pending_tasks(self) -> list[TaskInfo]:
        return [t for t in self.tasks.values() if t.status is TaskStatus.PENDING]

    def request(self, statuses: Iterable[TaskStatus]) -> Resource:
        """What its tasks in these statuses take of nodes."""
        wanted = set(statuses)
        return sum_resources(t.resreq for t in self.tasks.values() if t.status in wanted)

    def charge(self, statuses: Iterable[TaskStatus]) -> Resource:
        """What its tasks in these statuses are charged to its queue (shares of GPUs too)."""
        wanted = set(statuses)
        return sum_resources(t.charge for t in self.tasks.values() if t.status in wanted)

    def clone(self) -> JobInfo:
        return JobInfo(self.key, self.spec, self.priority, self.creation, self.status,
                       self.problem, dict(self.tasks), dict(self._counts), dict(self._totals),
                       self._ready)
