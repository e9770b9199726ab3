"""JobInfo: one gang (a PodGroup, declared or implicit) and its tasks."""
from __future__ import annotations

from typing import Iterable, Iterator

import attrs

from kaisched.api.resource import Resource, sum_resources
from kaisched.api.task import TaskInfo
from kaisched.api.types import (
    READY_STATUSES,
    GangMode,
    JobKey,
    PodGroupPhase,
    PodKey,
    QueueName,
    Reason,
    TaskStatus,
)


@attrs.frozen(slots=True)
class TopologyRule:
    """Where a gang (or a subgroup) must or would like to sit whole: inside one
    domain of a node label (a rack, a block, a zone, an NVLink clique)."""

    required: str | None = None     # no domain of this level fits: the gang waits
    preferred: str | None = None    # the tightest fitting domain, widening level by level

    def __bool__(self) -> bool:
        return bool(self.required or self.preferred)


NO_TOPOLOGY = TopologyRule()


@attrs.frozen(slots=True)
class SubGroup:
    name: str
    min_member: int
    topology: TopologyRule = NO_TOPOLOGY


@attrs.frozen(slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


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
    observed_generation: int = 0        # the spec generation a Timeout verdict is about

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


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
    preemptible: bool = True
    stale_grace: float | None = None
    wait_time: float | None = None  # NonStrict: how long placements may be held
    starvation_threshold: float | None = None   # override of the config's starvationThreshold
    declared: bool = False          # a PodGroup object exists for it
    topology: TopologyRule = NO_TOPOLOGY
    generation: int = 0


@attrs.define(eq=False, slots=True)
class JobInfo:
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

    @property
    def namespace(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[1]

    @property
    def queue(self) -> QueueName:
        return self.spec.queue

    @property
    def min_member(self) -> int:
        return self.spec.min_member

    def add_task(self, task: TaskInfo) -> None:
        old = self.tasks.get(task.key)
        counts, totals = self._counts, self._totals
        if old is not None:
            counts[(old.subgroup, old.status)] -= 1
            totals[old.status] -= 1
        self.tasks[task.key] = task
        key = (task.subgroup, task.status)
        counts[key] = counts.get(key, 0) + 1
        totals[task.status] = totals.get(task.status, 0) + 1

    update_task = add_task

    def remove_task(self, key: PodKey) -> None:
        old = self.tasks.pop(key, None)
        if old is not None:
            self._counts[(old.subgroup, old.status)] -= 1
            self._totals[old.status] -= 1

    def count(self, statuses: Iterable[TaskStatus], subgroup: str | None | object = ...) -> int:
        if subgroup is ...:
            get = self._totals.get
            return sum(get(s, 0) for s in statuses)
        wanted = set(statuses)
        return sum(n for (sg, st), n in self._counts.items() if st in wanted and sg == subgroup)

    def count_of(self, status: TaskStatus) -> int:
        return self._totals.get(status, 0)

    def totals(self) -> dict[TaskStatus, int]:
        """Tasks by status (read only; a status with none may be absent)."""
        return self._totals

    def ready_count(self, subgroup: str | None | object = ...) -> int:
        return self.count(READY_STATUSES, subgroup)

    def minimum_met(self, statuses: Iterable[TaskStatus] = READY_STATUSES) -> bool:
        """minMember and every subgroup minimum are met by tasks in statuses."""
        if len(self.tasks) < self.min_member or self.count(statuses) < self.min_member:
            return False
        return all(self.count(statuses, sg.name) >= sg.min_member for sg in self.spec.subgroups)

    def timed_out(self) -> bool:
        """Failed on Timeout for the spec as it is: not retried until it changes."""
        cond = self.status.condition("Scheduled")
        return (self.status.phase is PodGroupPhase.FAILED and cond is not None
                and cond.reason == Reason.TIMEOUT.value
                and self.status.observed_generation == self.spec.generation)

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
                       self.problem, dict(self.tasks), dict(self._counts), dict(self._totals))
