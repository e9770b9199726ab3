"""proportion: hierarchical fair share per resource, queue order by dominant
share, and queue limits.

Fair share is cut level by level: each child first gets min(quota, demand);
what is left of the parent's share goes to children with unmet demand in
proportion to overQuotaWeight, capped by demand and limit (water-filling).
"""
from __future__ import annotations

from collections import defaultdict

import networkx as nx
import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.queue import ROOT, QueueInfo
from kaisched.api.queue_status import job_states, queue_statuses
from kaisched.api.resource import PODS, Resource, format_amount, sum_resources
from kaisched.api.task import TaskInfo
from kaisched.api.types import QueueName
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import SetQueueStatus

_EPS = 1e-9


def water_fill(capacity: float, quotas: list[float], caps: list[float],
               weights: list[float]) -> list[float]:
    """Shares of capacity: quota first (up to cap), the rest by weight up to cap."""
    share = [min(q, c) for q, c in zip(quotas, caps)]
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

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        self.queues = cluster.queues
        self.tree: nx.DiGraph = cluster.tree
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
        for (queue, res, pinned), count in ledger.holding.items():
            self._add(self.allocated, queue, res, count)
            self._add(demand, queue, res, count)
            if pinned:
                self._add(self.pinned, queue, res, count)
        for (queue, res), count in ledger.wanted.items():
            self._add(demand, queue, res, count)
        total = cluster.total_allocatable()
        self.deserved = self._fair_shares(total, demand)
        ssn.register(Hook.QUEUE_ORDER, self.at_quota)     # below quota first
        ssn.register(Hook.QUEUE_ORDER, self.share)
        ssn.register(Hook.QUEUE_ORDER, lambda queue: -queue.priority)   # ties: higher first
        ssn.register(Hook.JOB_VALID, self._job_invalid)
        ssn.register(Hook.ALLOCATABLE, self._allocatable)
        ssn.register(Hook.ENQUEUEABLE, self._min_resources_room)
        ssn.register(Hook.RECLAIMABLE, self._reclaimable)
        ssn.register(Hook.OVERUSED, self._overused)
        ssn.register(Hook.ON_ALLOCATE, lambda task: self._account_task(task, 1.0))
        ssn.register(Hook.ON_DEALLOCATE, lambda task: self._account_task(task, -1.0))
        self._jobs = cluster.jobs
        self.table = cluster.table
        self._ssn = ssn

    def on_session_close(self, ssn: Session) -> None:
        """Write each Queue's status (use, fair share, quota, limit, jobs) where it changed."""
        statuses = queue_statuses(self.queues, self.tree, job_states(ssn.cluster),
                                  self.deserved, self.allocated)
        for name, status in sorted(statuses.items()):
            queue = self.queues[name]
            if queue.declared and status != queue.status:
                ssn.emit(SetQueueStatus(name, status, queue.status))

    # -- fair share ------------------------------------------------------------------
    def _fair_shares(self, total: Resource, demand: dict) -> dict[QueueName, dict[str, float]]:
        names = {n for n in total.names() if n != PODS}
        for q in self.queues.values():
            names.update(n for n in q.quota.names() if n != PODS)
        deserved: dict[QueueName, dict[str, float]] = {ROOT: {n: total.get(n) for n in names}}
        for parent in nx.topological_sort(self.tree):
            children = sorted(self.tree.successors(parent))
            if not children:
                continue
            shares = {c: {} for c in children}
            for name in names:
                infos = [self.queues[c] for c in children]
                caps = []
                for q in infos:
                    cap = demand[q.name][name]
                    limit = q.limit(name)
                    caps.append(min(cap, limit) if limit is not None else cap)
                got = water_fill(deserved[parent].get(name, 0.0),
                                 [q.quota.get(name) for q in infos], caps,
                                 [q.weight(name) for q in infos])
                for c, value in zip(children, got):
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
        queue = self.queues.get(job.queue)
        if queue is None:
            return f"queue {job.queue!r} does not exist"
        if queue.problem:
            return f"queue {job.queue!r} is unusable: {queue.problem}"
        if self.tree.out_degree(job.queue):
            return f"queue {job.queue!r} is not a leaf queue; jobs go to its children"
        return None

    def _allocatable(self, job: JobInfo, task: TaskInfo) -> str | None:
        if job.queue not in self._chain:
            return self._job_invalid(job)       # a queue that does not exist takes nothing
        for name in self._chain[job.queue]:
            queue = self.queues[name]
            used = self.allocated[name]
            for res, amount in task.resreq.items:
                limit = queue.limit(res)
                if limit is not None and used[res] + amount > limit + _EPS:
                    return (f"queue {name} at limit for {res} "
                            f"({format_amount(res, used[res])}/{format_amount(res, limit)})")
                capped = name == job.queue or queue.quota.get(res) > 0
                if not job.spec.preemptible and res != PODS and capped:
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
        for name in self._chain[job.queue]:
            used = self.allocated[name]
            waiting = self._ssn.inqueue_request(job, self._subtree(name))
            for res, amount in need.items:
                limit = self.queues[name].limit(res)
                taken = used[res] + waiting.get(res)
                if limit is not None and taken + amount > limit + _EPS:
                    return (f"minResources {res} {format_amount(res, amount)} exceeds the room "
                            f"left in queue {name} ({format_amount(res, taken)}/"
                            f"{format_amount(res, limit)} used or admitted)")
        return None

    def _reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Victims from other queues, taken in order while the rules hold.

        The queues are compared where their branches meet: the children of
        their lowest common parent on the reclaimer's and the victim's side.
        Only the resources the reclaimer lacks count, on the nodes of the
        victim's job (a gang goes whole: its CPU-only launcher goes with the
        GPU workers). The victim's side must be over its fair share in one of
        them before each eviction (an indivisible victim may take it below),
        and no queue on the victim's side is taken below its quota; the
        reclaimer's side must stay within its fair share once the reclaimer
        runs, so a later session never has cause to take the room back.
        """
        mine = self._jobs[reclaimer.job].queue
        contended = self._contended(reclaimer, candidates)
        taken: dict[QueueName, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        gangs: dict[str, bool] = {}         # a gang that goes whole is judged once
        out = []
        for victim in candidates:
            sides = self._sides(mine, self._jobs[victim.job].queue)
            freed = contended.get(victim.job)
            if sides is None or not freed:
                continue        # same branch (preempt's business), or frees nothing wanted
            group = self._ssn.eviction_group(victim)
            whole = len(group) > 1
            if whole and victim.job in gangs:
                if gangs[victim.job]:
                    out.append(victim)
                continue
            amount = sum_resources(t.resreq for t in group) if whole else victim.resreq
            victim_side = sides[1]
            ok = (self._within_fair_share(sides[0], reclaimer.resreq, freed)
                  and any(self._over_fair_share(victim_side, r, taken[victim_side]) for r in freed)
                  and all(self._keeps_quota(q, amount, taken[q], freed) for q in sides[2]))
            if whole:
                gangs[victim.job] = ok
            if not ok:
                continue
            for q in sides[2]:
                for res, value in amount.items:
                    taken[q][res] += value
            out.append(victim)
        return out

    def _contended(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> dict[str, list[str]]:
        """Per victim job, the resources the reclaimer lacks on the nodes of
        the job's candidates that those candidates hold."""
        table = self.table
        need = table.vector(reclaimer.resreq)
        out: dict[str, set[str]] = defaultdict(set)
        for victim in candidates:
            row = table.index.get(victim.node_name)  # type: ignore[arg-type]
            if row is None:
                continue
            short = np.flatnonzero(need > table.future[row] + _EPS)
            out[victim.job].update(table.dims[d] for d in short
                                   if table.dims[d] != PODS and victim.resreq.get(table.dims[d]) > 0)
        return {job: sorted(names) for job, names in out.items() if names}

    def _sides(self, mine: QueueName, theirs: QueueName
               ) -> tuple[QueueName, QueueName, list[QueueName]] | None:
        """Where the branches of two queues meet: the reclaimer's and the
        victim's ancestors under their lowest common parent, and the queues
        from the victim's up to its ancestor. None within one branch."""
        if mine == theirs or mine not in self._parent or theirs not in self._parent:
            return None
        up_mine = self._chain[mine]
        on_mine = set(up_mine)
        below: list[QueueName] = []
        for queue in self._chain[theirs]:
            if queue in on_mine:
                return None         # the victim's queue is above the reclaimer's
            below.append(queue)
            if self._parent[queue] in on_mine or self._parent[queue] == ROOT:
                break
        meet = self._parent[below[-1]]
        return next(q for q in up_mine if self._parent[q] == meet), below[-1], below

    def _subtree(self, queue: QueueName) -> list[QueueName]:
        return [queue, *nx.descendants(self.tree, queue)]

    def _path_up(self, queue: QueueName) -> list[QueueName]:
        """The queue, its parent, and so on up to a top-level queue."""
        path = [queue]
        while self._parent[path[-1]] != ROOT:
            path.append(self._parent[path[-1]])
        return path

    def _over_fair_share(self, queue: QueueName, res: str, taken: dict[str, float]) -> bool:
        used = self.allocated[queue][res] - taken[res]
        return used > self.deserved.get(queue, {}).get(res, 0.0) + _EPS

    def _keeps_quota(self, queue: QueueName, res: Resource, taken: dict[str, float],
                     contended: list[str]) -> bool:
        """After evicting res, the queue keeps at least its quota of the
        contended resources (or all it has, when it uses less)."""
        used, quota = self.allocated[queue], self.queues[queue].quota
        for name in contended:
            before = used[name] - taken[name]
            after = before - res.get(name)
            if after < min(quota.get(name), before) - _EPS:
                return False
        return True

    def _within_fair_share(self, queue: QueueName, res: Resource, contended: list[str]) -> bool:
        fair, used = self.deserved.get(queue, {}), self.allocated[queue]
        return all(used[n] + res.get(n) <= fair.get(n, 0.0) + _EPS for n in contended)

    def _overused(self, job: JobInfo, task: TaskInfo) -> str | None:
        """A queue may reclaim only up to its own fair share."""
        fair, used = self.deserved.get(job.queue, {}), self.allocated[job.queue]
        for name, amount in task.resreq.items:
            if name != PODS and used[name] + amount > fair.get(name, 0.0) + _EPS:
                return (f"queue {job.queue} would go over its fair share of {name} "
                        f"({format_amount(name, used[name] + amount)}/"
                        f"{format_amount(name, fair.get(name, 0.0))})")
        return None

    def _account_task(self, task: TaskInfo, sign: float) -> None:
        self._account(self._jobs[task.job].queue, task, sign)

    def _account(self, queue: QueueName, task: TaskInfo, sign: float) -> None:
        self._add(self.allocated, queue, task.resreq, sign)
        job = self._jobs.get(task.job)
        if job is not None and not job.spec.preemptible:
            self._add(self.pinned, queue, task.resreq, sign)

    def _add(self, table: dict, queue: QueueName, res: Resource, times: float) -> None:
        """Add res, times over, to the queue and every queue above it."""
        for name in self._chain.get(queue, (queue,)):
            row = table[name]
            for key, amount in res.items:
                row[key] += amount * times
