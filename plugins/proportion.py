"""proportion: hierarchical fair share per resource, queue order by dominant
share, queue limits, and who may reclaim from whom (plugins/reclaimrules.py).

Fair share is cut level by level: each child first gets min(quota, demand);
what is left of the parent's share goes to children with unmet demand in
proportion to overQuotaWeight, capped by demand and limit (water-filling).

With fair share with memory configured (usageDBConfig), the snapshot carries
each queue's normalised usage and what is left after quotas is split as KAI
splits it (plugins/usagedivision.py): higher priority first, then by weights
lowered for queues that used much, as strongly as the argument kValue says;
and among otherwise equal queues the one that used less goes first.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping

from kaisched.api.claimquota import claim_charge, quota_totals
from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.job import JobInfo
from kaisched.api.ledger import HOLDING
from kaisched.api.queue import ROOT, QueueInfo
from kaisched.api.queue_status import job_states, queue_statuses
from kaisched.api.queuetree import QueueTree
from kaisched.api.resource import PODS, Resource, format_amount
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, Blocker, PodKey, QueueName, TaskStatus
from kaisched.errors import ConfigError
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import SetQueueStatus
from kaisched.framework.registry import plugin_arguments
from plugins.reclaimrules import ReclaimRules
from plugins.usagedivision import divide_with_usage

_EPS = 1e-9
DEFAULT_K_VALUE = 1.0


def water_fill(capacity: float, quotas: list[float], caps: list[float],
               weights: list[float]) -> list[float]:
    """Shares of capacity: quota first (up to cap), the rest by weight up to cap."""
    share = [min(q, c) for q, c in zip(quotas, caps, strict=True)]
    remaining = capacity - sum(share)
    active = [i for i, c in enumerate(caps) if share[i] < c - _EPS and weights[i] > 0]
    while remaining > _EPS and active:
        wsum = sum(weights[i] for i in active)
        step = min(remaining / wsum, min((caps[i] - share[i]) / weights[i] for i in active))
        for i in active:
            share[i] += step * weights[i]
        remaining -= step * wsum
        active = [i for i in active if share[i] < caps[i] - _EPS]
    return share


class ProportionPlugin(PluginBase):
    name = "proportion"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        arguments = plugin_arguments(arguments, "kValue")
        k_value = arguments.get("kValue", DEFAULT_K_VALUE)
        if isinstance(k_value, str):        # KAI's arguments are strings ("1.5")
            try:
                k_value = float(k_value)
            except ValueError:
                pass
        if isinstance(k_value, bool) or not isinstance(k_value, (int, float)) or k_value < 0:
            raise ConfigError(f"kValue: expected a number >= 0, not {k_value!r}")
        self.k_value = float(k_value)

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        self.usage = cluster.usage      # None: fair share without memory, as ever
        self.queues = cluster.queues
        self.tree: QueueTree = cluster.tree
        # A queue and its ancestors, bottom up: whose usage and limits a task
        # touches, and where two queues' branches meet.
        self._parent = {q: next(iter(self.tree.predecessors(q)), ROOT) for q in self.queues}
        self._chain = {q: self._path_up(q) for q in self.queues}
        self.allocated: dict[QueueName, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.pinned: dict[QueueName, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        demand: dict[QueueName, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        # Tasks counted by (queue, request), kept by the cache as jobs change:
        # a big cluster has few distinct ones.
        ledger = cluster.ledger()
        # What tasks are charged (a share of a GPU counts as that share; a
        # pending gpu-memory pod's MiB as its part of the smallest GPU).
        resolved = cluster.resolved
        self._charge = cluster.charge
        for (queue, res, pinned), count in ledger.holding.items():
            res = resolved(res)
            self._add(self.allocated, queue, res, count)
            self._add(demand, queue, res, count)
            if pinned:
                self._add(self.pinned, queue, res, count)
        for (queue, res), count in ledger.wanted.items():
            self._add(demand, queue, resolved(res), count)
        self._jobs = cluster.jobs
        # Devices of ResourceClaims count against the queue too (what each
        # task's accounting added, to take back the same).
        self.charged: dict[PodKey, Resource] = {}
        total = cluster.total_allocatable()
        if cluster.devices and cluster.claimants():
            self._claimed(cluster, demand)
            total = total + quota_totals(cluster.devices)
        self.deserved = self._fair_shares(total, demand)
        ssn.register(Hook.QUEUE_HEAD_ORDER, self.head_order)
        ssn.register(Hook.QUEUE_ORDER, self.at_quota)     # below quota first
        ssn.register(Hook.QUEUE_ORDER, self.share)
        ssn.register(Hook.QUEUE_ORDER, lambda queue: -queue.priority)   # ties: higher first
        if self.usage is not None:
            ssn.register(Hook.QUEUE_ORDER, self.used)     # still equal: who used less first
        self._invalid: dict[QueueName, str | None] = {}
        ssn.register(Hook.JOB_VALID, self._job_invalid)
        ssn.register(Hook.ALLOCATABLE, self._allocatable)
        ssn.register(Hook.ENQUEUEABLE, self._min_resources_room, blocker=Blocker.QUOTA)
        ssn.register(Hook.LIMIT_ROOM, self._limit_room)
        ssn.register(Hook.SHARE_ROOM, self._share_room)
        ssn.register(Hook.OVERUSED, self._overused)
        rules = ReclaimRules(self.queues, self._parent, self._chain, lambda q: self.allocated[q],
                             lambda q: self.pinned[q], self.deserved)
        ssn.register(Hook.RECLAIM_GATE, lambda job, need: rules.gate(
            job.queue, need, job.spec.preemptible) if job.queue in self._chain
            else self._job_invalid(job))
        ssn.register(Hook.RECLAIM_FAIR, lambda job, need, chunks: rules.fair_reclaim(
            job.queue, need, job.spec.preemptible, chunks))
        ssn.register(Hook.VICTIM_QUEUE_ORDER, rules.victim_key)
        ssn.register(Hook.ON_ALLOCATE, lambda task: self._account_task(task, 1.0))
        ssn.register(Hook.ON_DEALLOCATE, lambda task: self._account_task(task, -1.0))
        self.table = cluster.table
        self._ssn = ssn

    def _claimed(self, cluster: ClusterInfo, demand: dict[QueueName, dict[str, float]]) -> None:
        """The devices claims hold for their queues' pods (and those pending
        pods ask for), in use and demand."""
        for job in cluster.jobs.values():
            for task in job.tasks.values():
                if not task.claims:
                    continue
                holding = task.status in HOLDING
                if not holding and (task.status is not TaskStatus.PENDING or job.problem):
                    continue
                charge = claim_charge(task, cluster.devices)
                self._add(demand, job.queue, charge, 1.0)
                if holding:
                    self.charged[task.key] = charge
                    self._add(self.allocated, job.queue, charge, 1.0)
                    if not job.spec.preemptible:
                        self._add(self.pinned, job.queue, charge, 1.0)

    def on_session_close(self, ssn: Session) -> None:
        """Write each Queue's status (use, fair share, quota, limit, jobs) where it changed."""
        statuses = queue_statuses(self.queues, self.tree, job_states(ssn.cluster),
                                  self.deserved, self.allocated)
        for name, status in sorted(statuses.items()):
            queue = self.queues[name]
            if queue.declared and queue.owned and status != queue.status:
                ssn.report(SetQueueStatus(name, status, queue.status))

    # -- fair share ------------------------------------------------------------------
    def _fair_shares(self, total: Resource, demand: dict[QueueName, dict[str, float]]
                     ) -> dict[QueueName, dict[str, float]]:
        names = {n for n in total.names() if n != PODS}
        for q in self.queues.values():
            names.update(n for n in q.quota.names() if n != PODS)
        deserved: dict[QueueName, dict[str, float]] = {ROOT: {n: total.get(n) for n in names}}
        for parent in self.tree.top_down():
            children = sorted(self.tree.successors(parent))
            if not children:
                continue
            shares: dict[QueueName, dict[str, float]] = {c: {} for c in children}
            for name in names:
                infos = [self.queues[c] for c in children]
                caps = []
                for q in infos:
                    cap = demand[q.name][name]
                    limit = q.limit(name)
                    caps.append(min(cap, limit) if limit is not None else cap)
                quotas, weights = [q.quota.get(name) for q in infos], [q.weight(name) for q in infos]
                if self.usage is None:
                    got = water_fill(deserved[parent].get(name, 0.0), quotas, caps, weights)
                else:
                    got = divide_with_usage(
                        deserved[parent].get(name, 0.0), quotas, caps, weights,
                        [q.priority for q in infos],
                        [self.usage.get(q.name, {}).get(name, 0.0) for q in infos], self.k_value)
                for c, value in zip(children, got, strict=True):
                    shares[c][name] = value
            deserved.update(shares)
        return deserved

    def at_quota(self, queue: QueueInfo) -> bool:
        """False while the queue uses less than its quota of every resource it
        has one for: what it is guaranteed comes before anyone's fair share of
        the rest, or the room would be handed out only to be reclaimed."""
        quotas = [(name, amount) for name, amount in queue.quota.items
                  if name != PODS and amount > 0]
        used = self.allocated[queue.name]
        return not quotas or any(used[name] >= amount - _EPS for name, amount in quotas)

    def head_order(self, queue: QueueInfo, need: Resource) -> tuple[bool, bool]:
        """A queue whose use plus its head job's need stays within its quota
        first (only resources it has a quota for count; none: over), then one
        that stays within its fair share: a job that would take its queue
        over either waits behind one that would not, so the room is not
        handed out only to be reclaimed."""
        used, fair = self.allocated[queue.name], self.deserved.get(queue.name, {})
        asked = [(n, v) for n, v in need.items if n != PODS and v > 0]
        quotas = [(n, v) for n, v in asked if queue.quota.get(n) > 0]
        over_quota = not quotas or any(used[n] + v > queue.quota.get(n) + _EPS for n, v in quotas)
        over_share = any(used[n] + v > fair.get(n, 0.0) + _EPS for n, v in asked)
        return over_quota, over_share

    def used(self, queue: QueueInfo) -> float:
        """The queue's largest normalised usage over the window."""
        return max((self.usage or {}).get(queue.name, {}).values(), default=0.0)

    def share(self, queue: QueueInfo) -> float:
        """Dominant share: the largest fraction of its fair share a queue uses."""
        worst = 0.0
        fair = self.deserved.get(queue.name, {})
        for name, used in self.allocated[queue.name].items():
            if used <= _EPS or name == PODS:     # pod slots have no fair share
                continue
            cap = fair.get(name, 0.0)
            worst = max(worst, used / cap if cap > _EPS else float("inf"))
        return worst

    # -- room ----------------------------------------------------------------------------
    def _job_invalid(self, job: JobInfo) -> str | None:
        # Per queue, once a session (its queues do not change in one): asked
        # of every job allocate considers.
        name = job.queue
        if name in self._invalid:
            return self._invalid[name]
        found = self._invalid[name] = self._queue_invalid(job)
        return found

    def _queue_invalid(self, job: JobInfo) -> str | None:
        queue = self.queues.get(job.queue)
        if queue is None:
            return f"queue {job.queue!r} does not exist"
        if queue.problem:
            return f"queue {job.queue!r} is unusable: {queue.problem}"
        if self.tree.out_degree(job.queue):
            return f"queue {job.queue!r} is not a leaf queue; jobs go to its children"
        return None

    def _allocatable(self, job: JobInfo, task: TaskInfo) -> str | None:
        own = job.queue         # read once: asked per placement
        chain = self._chain.get(own)
        if chain is None:
            return self._job_invalid(job)       # a queue that does not exist takes nothing
        request = self._ssn.quota_request(task)
        pinned_job = not job.spec.preemptible
        for name in chain:
            queue = self.queues[name]
            used = self.allocated[name]
            for res, amount in request.items:
                limit = queue.limit(res)
                if limit is not None and used[res] + amount > limit + _EPS:
                    return (f"queue {name} at limit for {res} "
                            f"({format_amount(res, used[res])}/{format_amount(res, limit)})")
                if pinned_job and res != PODS and (name == own or queue.quota.get(res) > 0):
                    quota = queue.quota.get(res)
                    pinned = self.pinned[name][res]
                    if pinned + amount > quota + _EPS:
                        return (f"queue {name} at quota for {res} for non-preemptible jobs "
                                f"({format_amount(res, pinned)}/{format_amount(res, quota)})")
        return None

    def _min_resources_room(self, job: JobInfo) -> str | None:
        """A gang whose minResources exceed its queue's remaining room under
        its limits cannot start: say so instead of trying."""
        need = job.spec.min_resources
        if need is None or job.queue not in self._chain:
            return None
        own = self._ssn.cluster.resolved(job.charge(READY_STATUSES - {TaskStatus.SUCCEEDED}))
        for name in self._chain[job.queue]:
            used = self.allocated[name]
            waiting = self._ssn.gate.inqueue_request(job, self._subtree(name))
            for res, amount in need.items:
                limit = self.queues[name].limit(res)
                taken = used[res] + waiting.get(res) - own.get(res)
                if limit is not None and taken + amount > limit + _EPS:
                    return (f"minResources {res} {format_amount(res, amount)} exceeds the room "
                            f"left in queue {name} ({format_amount(res, taken)}/"
                            f"{format_amount(res, limit)} used or admitted)")
        return None

    def _limit_room(self, job: JobInfo, need: Resource) -> str | None:
        """The queue chain's limits (not its quota) leave room for need."""
        for name in self._chain.get(job.queue, ()):
            used = self.allocated[name]
            for res, amount in need.items:
                limit = self.queues[name].limit(res)
                if limit is not None and used[res] + amount > limit + _EPS:
                    return (f"queue {name} at limit for {res} "
                            f"({format_amount(res, used[res])}/{format_amount(res, limit)}, "
                            f"{format_amount(res, amount)} more wanted)")
        return None

    def _share_room(self, job: JobInfo, need: Resource) -> str | None:
        """need alone is within the fair share of the job's queue."""
        fair = self.deserved.get(job.queue, {})
        for res, amount in need.items:
            if res in fair and amount > fair[res] + _EPS:     # shares are of what queues count
                return (f"it asks {format_amount(res, amount)} {res}, more than the fair share "
                        f"of queue {job.queue} ({format_amount(res, fair[res])})")
        return None

    def _subtree(self, queue: QueueName) -> list[QueueName]:
        return [queue, *sorted(self.tree.descendants(queue))]

    def _path_up(self, queue: QueueName) -> list[QueueName]:
        """The queue, its parent, and so on up to a top-level queue."""
        path = [queue]
        while self._parent[path[-1]] != ROOT:
            path.append(self._parent[path[-1]])
        return path

    def _overused(self, job: JobInfo, task: TaskInfo) -> str | None:
        """A queue may reclaim only up to its own fair share."""
        fair, used = self.deserved.get(job.queue, {}), self.allocated[job.queue]
        for name, amount in self._ssn.quota_request(task).items:
            if name != PODS and used[name] + amount > fair.get(name, 0.0) + _EPS:
                return (f"queue {job.queue} would go over its fair share of {name} "
                        f"({format_amount(name, used[name] + amount)}/"
                        f"{format_amount(name, fair.get(name, 0.0))})")
        return None

    def _account_task(self, task: TaskInfo, sign: float) -> None:
        """A task placed (sign 1) or undone (-1): its queue and those above
        it hold its charge, and a non-preemptible job's pin it too."""
        job = self._jobs[task.job]
        queue = job.queue
        request = self._charge(task)        # a share of a GPU as that part of one
        if task.claims:         # its devices: as counted when it took them, given back alike
            charge = self.charged.pop(task.key, None) if sign < 0 else None
            if charge is None:
                charge = claim_charge(task, self._ssn.cluster.devices)
            if sign > 0:
                self.charged[task.key] = charge
            request = request + charge
        self._add(self.allocated, queue, request, sign)
        if not job.spec.preemptible:
            self._add(self.pinned, queue, request, sign)

    def _add(self, table: dict[QueueName, dict[str, float]], queue: QueueName, res: Resource, times: float) -> None:
        """Add res, times over, to the queue and every queue above it."""
        for name in self._chain.get(queue, (queue,)):
            row = table[name]
            for key, amount in res.items:
                row[key] += amount * times
