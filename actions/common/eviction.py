"""Making room by eviction: which jobs may evict at all (shared by preempt
and reclaim), and preempt's node-by-node room making.

A preemptor's tasks are pipelined (never bound in the same session), so a
gang that needs evictions starts whole in a later session, once its victims
are gone. Victims go gang-wise and cheapest first; on a node where room cannot
be made, every eviction there is rolled back. (Reclaim searches its victims
task by task instead: actions/common/victims.py and actions/reclaim/search.py.)
"""
from __future__ import annotations

import functools
import itertools
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from actions.common.domainchoice import DomainChoice
from actions.common.sparing import Place, spare
from actions.common.topology import bound_domain
from kaisched.api.conflicts import stands_in_way
from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.queue import QueueInfo
from kaisched.api.resource import GPU, PODS
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES as EVICTABLE
from kaisched.api.types import Disruption, JobKey, NodeName, PodKey, QueueName, TaskStatus
from kaisched.framework import Session, Statement
from kaisched.framework.effects import Cause, Preemptor
from kaisched.framework.statement import EvictOp

VERBS = {Cause.PREEMPT: "preempted", Cause.RECLAIM: "reclaimed"}
VERB_BASE = {Cause.PREEMPT: "preempt", Cause.RECLAIM: "reclaim"}

Check = Callable[[TaskInfo], str | None]
# The candidates the plugins let a preemptor evict (Session.preemptable).
Allowed = Callable[[TaskInfo, Sequence[TaskInfo]], list[TaskInfo]]


def evictable_tasks(ssn: Session, queue: QueueName, below: int | None = None) -> list[TaskInfo]:
    """The tasks of the queue's jobs (of a priority below `below`, if given)
    on a node that an eviction could remove, in a stable order. Found through
    the ledger's index of jobs with such tasks, not by walking every task."""
    jobs, nodes = ssn.cluster.jobs, ssn.cluster.nodes
    return [t for key in ssn.cluster.ledger().evictable_jobs(queue, below)
            for t in jobs[key].tasks.values() if t.status in EVICTABLE and t.node_name in nodes]


def preempt_candidates(ssn: Session, waiting: Sequence[tuple[JobInfo, list[TaskInfo]]]
                       ) -> tuple[dict[QueueName, list[TaskInfo]], set[QueueName]]:
    """The tasks each queue with jobs waiting could lose to them, and the
    queues with any task eviction could remove at all. Jobs at or above the
    priority bound of every preemptor of a queue are left out (preemptable()
    would refuse them)."""
    bounds: dict[QueueName, int | None] = {}
    for job, tasks in waiting:
        for task in tasks:
            below = ssn.preempt_below(task)
            if job.queue in bounds:
                known = bounds[job.queue]
                below = None if below is None or known is None else max(below, known)
            bounds[job.queue] = below
    by_queue = {queue: evictable_tasks(ssn, queue, below) for queue, below in bounds.items()}
    some = {queue for queue, tasks in by_queue.items() if tasks or _any_evictable(ssn, queue)}
    return by_queue, some


def _any_evictable(ssn: Session, queue: QueueName) -> bool:
    jobs, nodes = ssn.cluster.jobs, ssn.cluster.nodes
    return any(t.status in EVICTABLE and t.node_name in nodes
               for key in ssn.cluster.ledger().evictable_jobs(queue)
               for t in jobs[key].tasks.values())


def starving_jobs(ssn: Session) -> list[tuple[JobInfo, list[TaskInfo]]]:
    """Jobs that are not even pipelined-ready, with their pending tasks in task
    order; queues fairest first, then jobs in job order."""
    queues = ssn.cluster.queues
    jobs = [j for j in ssn.cluster.active_jobs() if j.count_of(TaskStatus.PENDING) and j.queue in queues]
    waiting = zip(jobs, ssn.ask_each(jobs, functools.partial(starving, ssn)), strict=True)
    return _in_order(ssn, [(j, tasks) for j, tasks in waiting if tasks])


def elastic_jobs(ssn: Session) -> list[tuple[JobInfo, list[TaskInfo]]]:
    """Running jobs with pending tasks beyond their minimum, in the order of
    starving_jobs: their extras may take other jobs' surplus, never a gang."""
    queues = ssn.cluster.queues
    jobs = [j for j in ssn.cluster.active_jobs() if j.count_of(TaskStatus.PENDING) and j.queue in queues]
    waiting = zip(jobs, ssn.ask_each(jobs, functools.partial(_extras, ssn)), strict=True)
    return _in_order(ssn, [(j, extras) for j, extras in waiting if extras])


def _extras(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """The pending tasks of a running job that may evict for them, in order."""
    if not ssn.job_ready(job) or refused(ssn, job) or delayed(ssn, job):
        return []
    extras = ssn.pending(job)
    return ssn.ordered_tasks(job, extras) if extras and not never_preempts(extras) else []


def _in_order(ssn: Session, waiting: list[tuple[JobInfo, list[TaskInfo]]]
              ) -> list[tuple[JobInfo, list[TaskInfo]]]:
    """Queues in queue order (fairest first), jobs in job order inside each
    (a job whose key raised is left out: it lost its turn)."""
    queues = ssn.cluster.queues
    keys = ssn.ask_each([j for j, _ in waiting], lambda j: _order_key(ssn, queues[j.queue], j))
    keyed = [(key, jt) for key, jt in zip(keys, waiting, strict=True) if key is not None]
    keyed.sort(key=lambda kjt: kjt[0])
    return [jt for _, jt in keyed]


def _order_key(ssn: Session, queue: QueueInfo, job: JobInfo) -> tuple[Any, ...]:
    return (ssn.queue_order_key(queue), ssn.job_order_key(job))


def starving(ssn: Session, job: JobInfo) -> list[TaskInfo]:
    """The pending tasks of a valid job that is not even pipelined-ready, in
    task order; empty when the job is not starving, or when what keeps it
    waiting is no lack of room."""
    pending = ssn.pending(job)
    if not pending or ssn.job_pipelined(job) or refused(ssn, job) or never_preempts(pending) \
            or delayed(ssn, job):
        return []
    return ssn.ordered_tasks(job, pending)


def delayed(ssn: Session, job: JobInfo) -> bool:
    """The job's preemption delay runs: it evicts nobody yet, and its
    condition says from when it may (it stays Unschedulable, so a cluster
    autoscaler can add room meanwhile)."""
    reason = ssn.may_evict_for(job)
    if reason:
        ssn.note_unschedulable(job, reason)
    return bool(reason)


def never_preempts(tasks: list[TaskInfo]) -> bool:
    """A pod that opted out of preempting (preemptionPolicy Never) waits for
    room: its job evicts no one, though its priority still orders the queue."""
    return any(t.never_preempts for t in tasks)


def refused(ssn: Session, job: JobInfo) -> str | None:
    """Why the job waits for something no eviction can give, if it does:
    an invalid declaration or a missing queue, not admitted by enqueue, its
    minResources pre-check, an incomplete or invalid gang group, a task whose
    placement rules no node meets (resources aside). Such a job never evicts
    and holds nothing."""
    reason = ssn.job_invalid(job)
    if reason:
        return reason
    if ssn.awaits_grouping(job):
        return "waiting for the PodGrouper"
    if not ssn.gate.admits(job):
        return "not admitted by enqueue"
    if not ssn.job_ready(job) and not ssn.gate.closed:
        reason = ssn.enqueueable(job)
        if reason:
            return reason
    for key in job.spec.gang_group:
        member = ssn.cluster.jobs.get(key)
        if member is None:
            return f"gang group member {key} has no pods"
        reason = ssn.job_invalid(member)
        if reason:
            return f"gang group member {key}: {reason}"
    seen = set()
    for task in ssn.pending(job):
        like = ssn.class_key(task)
        if like not in seen:        # alike tasks pass the same filters
            seen.add(like)
            if not ssn.room_mask(task).any():     # devices evictable pods hold count as free
                return f"pod {task.key}: no node meets its placement rules"
    return None


def note_kept(ssn: Session, job: JobInfo, kind: Cause, others: Iterable[JobInfo]) -> None:
    """The job evicted nobody: say which job it could have evicted is kept
    from it -- protected by its min-runtime (until when: the one free
    soonest), else one of its pods by a PodDisruptionBudget."""
    others = list(others)
    if ssn.protects:
        found = sorted(((p.until, other.key, p) for other in others
                        if (p := ssn.protected_until(other, kind, job)) is not None),
                       key=lambda x: (x[0], x[1]))
        if found:
            _, key, first = found[0]
            more = f" (and {len(found) - 1} more job(s))" if len(found) > 1 else ""
            ssn.note_unschedulable(job, f"may not {VERB_BASE[kind]} {key}: "
                                        f"{first.describe(ssn.now)}{more}")
            return
    if ssn.disruptions.budgets:
        kept = [(t.key, budget) for other in others for t in sorted(other.tasks.values(), key=lambda t: t.key)
                if t.status in EVICTABLE and (budget := ssn.disruptions.refusing((t,))) is not None]
        if kept:
            pod, budget = kept[0]
            more = f" (and {len(kept) - 1} more pod(s))" if len(kept) > 1 else ""
            ssn.note_unschedulable(job, f"may not {VERB_BASE[kind]} {pod}: PodDisruptionBudget "
                                        f"{budget} allows no more disruptions{more}")


def still_evictable(ssn: Session, tasks: list[TaskInfo]) -> list[TaskInfo]:
    """The tasks as they are now, without those evicted since they were listed."""
    jobs = ssn.cluster.jobs
    current = (jobs[t.job].tasks.get(t.key) for t in tasks)
    return [t for t in current if t is not None and t.status in EVICTABLE]


def victim_order(ssn: Session, evictable: list[TaskInfo]) -> Callable[[TaskInfo], tuple[Any, ...]]:
    """Surplus tasks (those above their job's minimum) before whole gangs,
    spread over jobs: the newest surplus task of every job before the second
    of any (a group the Workload API disrupts only whole has none). Then
    lowest priority first, most recently started, fewest pods.
    An action computes it once, before its first eviction, over the evictable
    tasks of every job whose tasks it may evict (a job's ranks read only its own)."""
    jobs = ssn.cluster.jobs
    by_job: dict[JobKey, list[TaskInfo]] = {}
    for task in evictable:
        by_job.setdefault(task.job, []).append(task)
    rank: dict[PodKey, int] = {}
    for job_key, running in by_job.items():
        info = jobs[job_key]
        # A group disrupted only whole has no surplus: its cost is all of it.
        if info.ready_count() - info.min_member > 0 and info.spec.disruption is not Disruption.ALL:
            running.sort(key=lambda t: (-t.creation, t.key))
            for i, task in enumerate(surplus_tasks(info, running)):
                rank[task.key] = i

    def key(t: TaskInfo) -> tuple[Any, ...]:
        r = rank.get(t.key)
        job = jobs[t.job]
        return (r is None, job.priority, r or 0, -t.creation, len(job.tasks), t.key)
    return key


def surplus_tasks(job: JobInfo, running: list[TaskInfo]) -> list[TaskInfo]:
    """Of running (newest first), the tasks that could go one after another,
    each alone, with the job keeping its minimum and every subgroup its own."""
    if not job.spec.subgroups:
        return running[:max(job.ready_count() - job.min_member, 0)]
    out: list[TaskInfo] = []
    for task in running:
        if job.eviction_unit(task, out) == [task]:
            out.append(task)
    return out


def is_surplus(ssn: Session, victim: TaskInfo, group: list[TaskInfo]) -> bool:
    """The victim's eviction group leaves its job running at its minimum (and,
    by the gang plugin's eviction group, every subgroup at its own): a single
    surplus task, or a subgroup the tree can do without. A gang of one is no
    surplus."""
    job = ssn.cluster.jobs[victim.job]
    if not any(t.key == victim.key for t in group) or job.ready_count() <= job.min_member:
        return False
    unit = job.eviction_unit(victim)
    return unit is not None and {t.key for t in unit} == {t.key for t in group}


class RoomFinder:
    """Where a preemptor could get room, estimated over all nodes at once.

    room = future idle + what the candidate victims hold, less what has been
    evicted since (it is in future idle already, as releasing room).

    What the victims hold is summed node by node when first needed: a task's
    nodes() needs only the nodes its own rules let it onto, so a gang kept to
    one rack does not sum the victims of the whole cluster (room() still sums
    every node). Nodes holding a share of a GPU are summed at once: a share's
    part of its device is read as it is when the finder is made.
    """

    def __init__(self, ssn: Session, domains: DomainChoice, candidates: list[TaskInfo],
                 releasing_at_start: np.ndarray,
                 order: Callable[[TaskInfo], tuple[Any, ...]] | None = None) -> None:
        table = ssn.cluster.table
        self.ssn = ssn
        self.domains = domains
        self.evictable = np.zeros_like(table.alloc)
        self.surplus = np.zeros_like(table.alloc)      # what surplus victims alone hold
        self.candidates = candidates
        self.order = order
        self.by_node: dict[NodeName, list[TaskInfo]] = {}
        for task in candidates:
            node = task.node_name
            assert node is not None     # candidates are evictable: on a node
            self.by_node.setdefault(node, []).append(task)
        self.first: dict[int, tuple[Any, ...]] = {}     # per row, its first gang victim's key
        self.summed = np.zeros(len(table), dtype=bool)  # rows whose victims are in the sums
        self.all_summed = False
        self._ranks: np.ndarray | None = None          # _first_victims' answer per row
        self._sum(np.array([table.index[t.node_name] for t in candidates   # type: ignore[index]
                            if t.gpu is not None], dtype=np.intp))
        self.releasing_at_start = releasing_at_start

    def _sum(self, rows: np.ndarray) -> None:
        """Add the victims of these rows (those not summed yet) to the sums."""
        rows = np.unique(rows[~self.summed[rows]])
        if not len(rows):
            return
        self.summed[rows] = True
        self._ranks = None
        table, order = self.ssn.cluster.table, self.order
        names, held = table.names, self.ssn.cluster.freed_by
        for row in rows.tolist():
            for task in self.by_node.get(names[row], ()):
                vec = held(task)
                self.evictable[row] += vec
                key = order(task) if order is not None else None
                if key is not None and not key[0]:
                    self.surplus[row] += vec
                elif key is not None and (row not in self.first or key < self.first[row]):
                    self.first[row] = key

    def room(self) -> np.ndarray:
        if not self.all_summed:
            index = self.ssn.cluster.table.index
            self._sum(np.array([index[node] for node in self.by_node], dtype=np.intp))
            self.all_summed = True
        return self._room()

    def _room(self) -> np.ndarray:
        """room(), right only on the rows summed."""
        table = self.ssn.cluster.table
        return table.future + self.evictable - (table.releasing - self.releasing_at_start)

    def _first_victims(self, rows: np.ndarray) -> np.ndarray:
        """Per row: the rank, in the victim order, of the first victim there
        that is no surplus -- of nodes that need as much eviction, the one
        whose gang comes first (lowest priority, most recently started) is
        tried first, so the order holds across nodes, not only on each.
        Ranked among the rows summed so far (the rows asked about are among
        them; their order is the same among all): the order is the action's,
        fixed before its first eviction; rows with no such victim come last."""
        if self._ranks is None:
            place = {k: i for i, k in enumerate(sorted(set(self.first.values())))}
            self._ranks = np.full(len(self.ssn.cluster.table), float(len(place)))
            for row, key in self.first.items():
                self._ranks[row] = place[key]
        return self._ranks[rows]

    def nodes(self, task: TaskInfo) -> Iterator[NodeName]:
        """Nodes where room could be made: first those where other jobs'
        surplus tasks are enough (no gang need go), then by least eviction.
        Named as tried: the first usually does."""
        if not self.by_node:
            return iter(())     # no candidate victims anywhere
        table = self.ssn.cluster.table
        vec = table.vector(task.resreq)
        allowed = self.ssn.room_mask(task)
        self._sum(np.flatnonzero(allowed))
        mask = allowed & table.fits(vec, self._room())
        domain = bound_domain(self.ssn, self.domains, self.ssn.cluster.jobs[task.job], self.room, task)
        if domain is not None:
            mask &= domain          # a topology-bound gang: room inside its domain only
        rows = np.flatnonzero(mask)
        # Every row, as on a full cluster where room can be made anywhere: the
        # arrays as they are, not copies of every row of them.
        every = len(rows) == len(table)
        alloc, future, surplus = (table.alloc, table.future, self.surplus) if every else (
            table.alloc[rows], table.future[rows], self.surplus[rows])
        with np.errstate(divide="ignore", invalid="ignore"):
            missing = np.where(alloc > 0, np.clip(vec - future, 0, None) / alloc, 0)
        released = table.releasing - self.releasing_at_start
        gang_needed = ~table.fits(vec, future + surplus - (released if every else released[rows]))
        first = self._first_victims(rows)
        order = np.lexsort((rows, first, missing.sum(axis=1), gang_needed))
        names = table.names
        return (names[row] for row in rows[order])


def make_room(ssn: Session, stmt: Statement, task: TaskInfo, node: NodeName, allowed: Allowed,
              victims: list[TaskInfo], cause: Cause, by: Preemptor,
              gangs: bool = True, others: Callable[[], list[TaskInfo]] | None = None) -> bool:
    """Evict victims on node until task fits; all or nothing.

    First, where a required rule of the task (anti-affinity, hard spread, an
    existing pod's anti-affinity) is broken on the node by pods it may evict
    (others: every candidate, in victim order, wherever it runs), those go:
    they must go anyway, and the room they free counts. Then, for room,
    single surplus tasks go first; a candidate whose eviction would take its
    job or a subgroup below the minimum is passed over for the next one, and
    only when surplus is not enough do whole gangs go (never, if not gangs).
    """
    table = ssn.cluster.table
    row, vec = table.index[node], table.vector(task.resreq)
    rules = ssn.cluster.rules_in_play().any_rule
    mark = stmt.checkpoint()
    if rules and others is not None and not ssn.pod_fits(task, node):
        clear_rules(ssn, stmt, task, node, allowed, others(), cause, by, gangs)
    # Devices (ResourceClaims, a share of a GPU) the task needs beyond resources.
    wants_devices = bool(task.claims) or task.gpu is not None
    if task.gpu is not None:
        victims = fewest_for_share(ssn, task, node, victims)
    for whole in (False, True) if gangs else (False,):
        for victim in victims:
            short = vec > table.future[row] + EPSILON
            # ... still held by pods here.
            devices = wants_devices and not (ssn.pod_fits(task, node)
                                             and ssn.devices_fit(task, node))
            if not short.any() and not devices:
                break
            current = ssn.cluster.jobs[victim.job].tasks.get(victim.key)
            if current is None or current.status not in EVICTABLE:
                continue        # gone already, with an earlier victim's gang
            if not (ssn.cluster.freed_by(current)[short] > 0).any() \
                    and not (devices and _holds_devices(task, current)):
                continue        # frees nothing the task lacks: evicting it is pure loss
            _evict_gang(ssn, stmt, task, current, allowed, cause, by, whole)
    if table.fits(vec, table.future[row:row + 1])[0] \
            and (not (wants_devices or rules) or ssn.pod_fits(task, node)) \
            and (not wants_devices or ssn.devices_fit(task, node)):
        return True
    stmt.rollback(mark)
    return False


def _evict_gang(ssn: Session, stmt: Statement, task: TaskInfo, victim: TaskInfo, allowed: Allowed,
                cause: Cause, by: Preemptor, whole: bool | None) -> bool:
    """Evict the victim with everything that must go with it, if all of it may
    go; whole: only a single surplus task (False), only a whole gang (True),
    either (None). True if evicted."""
    group = ssn.eviction_group(victim)
    if whole is not None and is_surplus(ssn, victim, group) == whole:
        return False        # surplus first; a gang only once surplus is not enough
    if any(t.status not in EVICTABLE for t in group) \
            or len(allowed(task, group)) < len(group) \
            or ssn.disruptions.refusing(group) is not None:
        return False        # part of its gang cannot go: the gang stays whole
    for member in group:
        stmt.evict(member, cause, by)
    return True


def clear_rules(ssn: Session, stmt: Statement, task: TaskInfo, node: NodeName, allowed: Allowed,
                victims: list[TaskInfo], cause: Cause, by: Preemptor, gangs: bool) -> None:
    """Evict the victims that stand in the way of the task's required rules
    on node (in the same domain of the rule's key), gang-wise, until the
    rules let the task take the node."""
    cluster = ssn.cluster
    row = cluster.table.index[node]

    def same_domain_of(victim: TaskInfo) -> Callable[[str], bool]:
        other = cluster.table.index[victim.node_name]   # type: ignore[index]  # victims are on a node
        return lambda key: other == row or cluster.domains(key).ids[other] == \
            cluster.domains(key).ids[row] >= 0
    for victim in still_evictable(ssn, victims):
        if ssn.pod_fits(task, node):
            return
        if stands_in_way(task, victim, same_domain_of(victim), cluster.namespace_labels):
            _evict_gang(ssn, stmt, task, victim, allowed, cause, by, None if gangs else False)


def free_quota(ssn: Session, stmt: Statement, task: TaskInfo, allowed: Allowed,
               victims: list[TaskInfo], cause: Cause, by: Preemptor, check: Check,
               gangs: bool = True, there: TaskInfo | None = None) -> bool:
    """Evict victims of the task's own queue (wherever they run) until its
    queue has room for it under its limits: the room they free counts against
    the limit as well as on their nodes. Surplus tasks before whole gangs, in
    victim order; only victims holding what the task asks for. All or
    nothing: True once the queue takes the task. there: the task as it is
    charged on the node it goes to (ClusterInfo.charged_on), if not as it is."""
    # As the queue counts them: a share of a GPU is GPU asked for, and held.
    asked = {n for n, v in ssn.cluster.charge(task).items if v > 0 and n != PODS}
    charged = task if there is None else there
    mark = stmt.checkpoint()
    for whole in (False, True) if gangs else (False,):
        for victim in still_evictable(ssn, victims):
            if not check(charged):
                return True
            if any(ssn.cluster.charge(victim).get(n) > 0 for n in asked):
                _evict_gang(ssn, stmt, task, victim, allowed, cause, by, whole)
    if not check(charged):
        return True
    stmt.rollback(mark)
    return False


def fewest_for_share(ssn: Session, task: TaskInfo, node: NodeName,
                     victims: list[TaskInfo]) -> list[TaskInfo]:
    """For a share of one GPU: the victims of the node's shared GPU that frees
    room for it with the fewest of them (each GPU's taken in victim order)
    first, then the rest in their order: room is made on one GPU, not a
    little on each."""
    share = task.gpu
    gpus = ssn.cluster.gpus
    found = gpus.gpus(node)
    units = share.units(found.memory) if share is not None and found is not None else None
    if units is None or share is None or share.devices != 1:
        return victims
    best: list[TaskInfo] | None = None
    for device in gpus.on(node).values():
        short = units - device.free_later
        picked: list[TaskInfo] = []
        for victim in victims:
            if short <= 0:
                break
            if victim.key in device.live:
                picked.append(victim)
                short -= device.live[victim.key]
        if short <= 0 and picked and (best is None or len(picked) < len(best)):
            best = picked
    if best is None:
        return victims
    first = {v.key for v in best}
    return best + [v for v in victims if v.key not in first]


def _holds_devices(task: TaskInfo, victim: TaskInfo) -> bool:
    """The victim holds devices of the kind the task needs: claims for
    claims; a GPU, shared or whole, for a share of one."""
    if task.claims and victim.claims:
        return True
    return task.gpu is not None and (victim.gpu is not None or victim.resreq.get(GPU) > 0)


def place_by_eviction(ssn: Session, domains: DomainChoice, job: JobInfo, tasks: list[TaskInfo],
                      allowed: Allowed,
                      finder: Callable[[TaskInfo], RoomFinder], cause: Cause,
                      check: Check, order: Callable[[TaskInfo], tuple[Any, ...]],
                      gangs: bool = True) -> bool:
    """Pipeline the job's tasks, evicting where needed, until it is
    pipelined-ready; commit then, else undo everything. True if committed.

    Each task goes where the fewest pods must go for it (_room_for); once the
    job is placed, every victim it can do without is spared (sparing.py).
    A job already pipelined-ready (an elastic job's extras) places one task
    per call, and with gangs=False takes only other jobs' surplus tasks.
    order is the action's victim order, fixed before its first eviction.
    A task its queue has no room for under its limits frees that room too,
    from the victims it may evict (check: the queue's answer)."""
    stmt = ssn.statement()
    for task in tasks:
        mark = stmt.checkpoint()
        by = Preemptor(task.key, job.key, job.priority, job.queue)
        candidates = _candidates(ssn, task, allowed, finder, order)
        node = _room_for(ssn, stmt, domains, job, task, allowed, finder, cause, by, order, gangs,
                         candidates, check)
        if node is None:
            stmt.rollback(mark)
            break
        stmt.pipeline(task, node)
        if ssn.job_pipelined(job):
            break
    evicted = sum(1 for op in stmt.ops if isinstance(op, EvictOp))
    if ssn.job_pipelined(job) and evicted:
        evicted -= spare(ssn, stmt, order, _placer(ssn, domains, job, finder))
        pipelined = len(stmt.ops) - evicted
        stmt.commit()
        if gangs:
            ssn.record_unschedulable(job, (
                f"{pipelined} task(s) pipelined, minMember {job.min_member}; waiting for "
                f"{evicted} {VERBS[cause]} pod(s) to terminate"))
        return True
    stmt.discard()
    return False


# Nodes looked at beyond the first where room can be made, for one with fewer
# victims (none is looked at once a node needs a single pod to go).
LOOK_FURTHER = 16


def _room_for(ssn: Session, stmt: Statement, domains: DomainChoice, job: JobInfo, task: TaskInfo,
              allowed: Allowed, finder: Callable[[TaskInfo], RoomFinder], cause: Cause, by: Preemptor,
              order: Callable[[TaskInfo], tuple[Any, ...]], gangs: bool,
              candidates: Callable[[], list[TaskInfo]], check: Check) -> NodeName | None:
    """A node for the task, with what it lacks there evicted: a node with room
    now (or once releasing pods are gone) that its queue takes it on needs no
    one to go. Else the node where the fewest pods must go to free all it
    lacks -- room on the node, the pods its required rules keep it from, and
    its queue's room under its limits, from the pods on that node first.
    Ties go to the order the nodes are tried in (the node with room first,
    then as the finder names them: preempt's victim order across nodes).
    None when there is no such node."""
    choice = ssn.select_node(task, within=bound_domain(
        ssn, domains, job, _room_of(finder, task), task))
    if choice is not None and not check(ssn.cluster.charged_on(task, choice.node)):
        return choice.node
    rooms = finder(task)
    mark = stmt.checkpoint()

    def evict_for(node: NodeName) -> int | None:
        here = still_evictable(ssn, rooms.by_node.get(node, []))
        victims = sorted(allowed(task, here), key=order)
        if not make_room(ssn, stmt, task, node, allowed, victims, cause, by, gangs, candidates):
            return None
        there = ssn.cluster.charged_on(task, node)
        if check(there):
            rest = candidates()
            first = [v for v in rest if v.node_name == node] + [v for v in rest if v.node_name != node]
            if not free_quota(ssn, stmt, task, allowed, first, cause, by, check, gangs, there):
                return None
        return len(stmt.ops) - mark      # all evictions: make_room and free_quota only evict

    best: tuple[int, NodeName] | None = None
    looked = 0
    nodes = rooms.nodes(task)
    if choice is not None:      # it has room, but not its queue: tried first, and once
        first = choice.node
        nodes = itertools.chain([first], (n for n in nodes if n != first))
    for node in nodes:
        cost = evict_for(node)
        if cost is not None and cost <= 1:
            return node         # none could need fewer: kept as evicted
        stmt.rollback(mark)
        if cost is not None and (best is None or cost < best[0]):
            best = (cost, node)
        if best is not None:
            looked += 1
            if looked > LOOK_FURTHER:
                break
    if best is None:
        return None
    cost = evict_for(best[1])
    assert cost == best[0], "the same victims are found again"
    return best[1]


def _placer(ssn: Session, domains: DomainChoice, job: JobInfo,
            finder: Callable[[TaskInfo], RoomFinder]) -> Place:
    """Place tasks as they go over victims: the best node, pipelined, inside
    the job's domain and where its queue takes it."""
    def place(stmt: Statement, tasks: list[TaskInfo]) -> bool:
        for task in tasks:
            within = bound_domain(ssn, domains, job, _room_of(finder, task), task)
            refusal, rows = ssn.allocatable_on(job, task)
            if refusal:
                return False
            if rows is not None:
                within = rows if within is None else within & rows
            choice = ssn.select_node(task, within=within)
            if choice is None:
                return False
            stmt.pipeline(task, choice.node)
        return True
    return place


def _candidates(ssn: Session, task: TaskInfo, allowed: Allowed, finder: Callable[[TaskInfo], RoomFinder],
                order: Callable[[TaskInfo], tuple[Any, ...]]) -> Callable[[], list[TaskInfo]]:
    """Every victim the task may take, wherever it runs, in victim order,
    worked out only when asked for."""
    return lambda: sorted(allowed(task, still_evictable(ssn, finder(task).candidates)),
                          key=order)


def _room_of(finder: Callable[[TaskInfo], RoomFinder], task: TaskInfo) -> Callable[[], np.ndarray]:
    """The task's room, computed only when asked for."""
    return lambda: finder(task).room()


def place_extras_by_eviction(ssn: Session, domains: DomainChoice, job: JobInfo, tasks: list[TaskInfo],
                             allowed: Allowed,
                             finder: Callable[[TaskInfo], RoomFinder], check: Check,
                             cause: Cause, order: Callable[[TaskInfo], tuple[Any, ...]]) -> None:
    """An elastic job's extras, one statement each, on other jobs' surplus.
    The victim order is the action's, fixed before its first eviction, so
    that the surplus taken is spread over jobs."""
    for task in tasks:
        if not place_by_eviction(ssn, domains, job, [task], allowed, finder, cause, check, order,
                                 gangs=False):
            return
