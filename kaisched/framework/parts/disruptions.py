"""What the PodDisruptionBudgets let this session evict.

Every eviction goes through the Eviction API, and the API server refuses
one a budget forbids. A plan counting on such an eviction would leave its
victims running, and a gang that was to go whole would lose only some of
its pods. So preempt, reclaim and consolidation alike ask here before they
take a victim, and count what the session already evicted.

A budget's allowance is counted as its controller counts it, over the pods
as they stood when the session opened (see kaisched.api.budgets), and
capped by the status its controller wrote.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from kaisched.api.budgets import DisruptionBudget
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import PodKey, TaskStatus

_FINISHED = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


class Disruptions:
    """Per budget, the disruptions it allows this session; told of each
    eviction (and of its undoing) by the session."""

    def __init__(self, cluster: ClusterInfo) -> None:
        self._cluster = cluster
        self.budgets: tuple[DisruptionBudget, ...] = tuple(cluster.budgets)
        self._allowed: dict[str, int] | None = None       # worked out when first asked
        self._evicted: dict[PodKey, TaskInfo] = {}          # this session's, as they were

    def evicted(self, previous: TaskInfo) -> None:
        """The task, as it was, is being evicted."""
        if self.budgets:
            self._evicted[previous.key] = previous

    def restored(self, previous: TaskInfo) -> None:
        """Its eviction was undone."""
        self._evicted.pop(previous.key, None)

    @property
    def allowed(self) -> dict[str, int]:
        """Per budget, the disruptions it allowed as the session opened."""
        if self._allowed is None:
            pods = self._pods({b.namespace for b in self.budgets})
            self._allowed = {b.key: _count(b, pods.get(b.namespace, ())) for b in self.budgets}
        return self._allowed

    def refusing(self, pods: Sequence[TaskInfo], beside: Iterable[TaskInfo] = ()) -> str | None:
        """None when evicting pods, beside those given and those this session
        evicted already, keeps every budget; else the budget that forbids it."""
        if not self.budgets:
            return None
        others = {t.key: t for t in beside}
        others.update(self._evicted)
        for p in pods:
            others.pop(p.key, None)
        for budget in self.budgets:
            mine = sum(1 for p in pods if _selected(budget, p))
            if mine and mine + sum(1 for p in others.values() if _selected(budget, p)) \
                    > self.allowed[budget.key]:
                return budget.key
        return None

    def _pods(self, namespaces: set[str]) -> dict[str, list[tuple[dict[str, str], TaskStatus]]]:
        """Every pod of those namespaces the session knows, as it stood when
        the session opened: ours by status (a moved pod's successor is the
        same pod again), other schedulers' as running unless going away."""
        cluster, evicted = self._cluster, self._evicted
        out: dict[str, list[tuple[dict[str, str], TaskStatus]]] = {}
        for job in cluster.jobs.values():
            if job.namespace in namespaces:
                mine = out.setdefault(job.namespace, [])
                mine.extend((dict(t.labels), evicted.get(t.key, t).status)
                            for t in job.tasks.values() if t.successor_of is None)
        for pod in cluster.foreign:
            if pod.namespace in namespaces:
                out.setdefault(pod.namespace, []).append(
                    (dict(pod.labels), TaskStatus.RELEASING if pod.releasing else TaskStatus.RUNNING))
        return out


def _count(budget: DisruptionBudget, pods: Iterable[tuple[dict[str, str], TaskStatus]]) -> int:
    healthy = expected = 0
    for labels, status in pods:
        if status in _FINISHED or not budget.selects(budget.namespace, labels):
            continue
        expected += 1
        healthy += status is TaskStatus.RUNNING
    return budget.allowed(healthy, expected)


def _selected(budget: DisruptionBudget, task: TaskInfo) -> bool:
    return budget.selects(task.namespace, dict(task.labels))
