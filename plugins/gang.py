"""gang: a job is placed only when at least minMember of its tasks (and each
subgroup's minimum) can be; not-ready jobs go first; a gang at or below its
minimum is evicted whole, unless its declaration says otherwise (the upstream
Workload API's disruption modes: pod by pod, or only all together). What
counts toward the minimum is the job's to say (under the upstream rules a
completed pod does not). The podgroupstatus plugin tells why a gang waits."""
from __future__ import annotations

from kaisched.api.job import JobInfo
from kaisched.api.resource import Resource, format_amount
from kaisched.api.subgroups import ROOT
from kaisched.api.task import TaskInfo
from kaisched.api.types import (
    EVICTABLE_STATUSES,
    LIVE_READY_STATUSES,
    READY_STATUSES,
    Blocker,
    Disruption,
    GangRules,
    TaskStatus,
)
from kaisched.framework import Hook, PluginBase, Session

_WAITING = (TaskStatus.PENDING, TaskStatus.PIPELINED)
_PLACED = EVICTABLE_STATUSES | {TaskStatus.ALLOCATED, TaskStatus.PIPELINED}
_HOLDING = READY_STATUSES - {TaskStatus.SUCCEEDED}
# What exists toward the minimum (job.ready_statuses and the waiting), under
# each gang rules: made once, not per job asked.
_ALIVE = READY_STATUSES | set(_WAITING)
_LIVE_ALIVE = LIVE_READY_STATUSES | set(_WAITING)


class GangPlugin(PluginBase):
    name = "gang"

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.jobs = ssn.cluster.jobs
        self.table = ssn.cluster.table
        self.usable = ssn.cluster.usable_nodes()
        ssn.register(Hook.JOB_VALID, job_invalid_reason)
        # The free cluster is short: room, which new nodes would give.
        ssn.register(Hook.ENQUEUEABLE, self.min_resources_fit, blocker=Blocker.RESOURCES)
        # Asked several times a placement: read off the counts the job keeps.
        ssn.register(Hook.JOB_READY, JobInfo.ready_met)
        ssn.register(Hook.JOB_PIPELINED, JobInfo.pipelined_met)
        ssn.register(Hook.JOB_ORDER, lambda job: 1 if job.ready_met() else 0)
        ssn.register(Hook.EVICTION_GROUP, self.eviction_group)

    def min_resources_fit(self, job: JobInfo) -> str | None:
        """Coscheduling's pre-check: the gang's minResources must fit what the
        cluster has free, or trying to place it only churns. What the gang's
        own pods hold counts as free for it: a partly running gang can refill
        a lost member."""
        need = job.spec.min_resources
        if need is None:
            return None
        free = self.table.resource(self.table.future[self.usable].sum(axis=0)) + own_use(job)
        held = self.ssn.gate.inqueue_request(job)        # admitted gangs not started yet
        short = need.exceeding(free - held)
        if not short:
            return None
        name = short[0]
        amount = format_amount(name, need.get(name))
        total = self.table.resource(self.table.alloc[self.usable].sum(axis=0)).get(name)
        if need.get(name) > total:
            return (f"minResources {name} {amount} exceeds the whole cluster "
                    f"({format_amount(name, total)} {name} on schedulable nodes)")
        spare = f"{format_amount(name, max(free.get(name), 0.0))} free"
        if held.get(name) > 0:
            spare += f", {format_amount(name, held.get(name))} of it held for admitted gangs"
        return f"minResources {name} {amount} does not fit the free cluster ({spare})"

    def eviction_group(self, victim: TaskInfo) -> list[TaskInfo]:
        """Above its minimum a gang loses single tasks, or a whole subgroup
        its tree can do without; at or below it, a partial gang is useless,
        so all of it goes (no subgroup is ever left below its own minimum).
        A declared disruption mode overrides: any pod alone, or only all of it."""
        job = self.jobs[victim.job]
        if job.spec.disruption is Disruption.SINGLE:
            return [victim]
        if job.spec.disruption is not Disruption.ALL:
            unit = job.eviction_unit(victim)
            if unit is not None:
                return unit
        # All of it, including tasks placed this session: those cannot be
        # evicted, which keeps the gang from being broken up at all.
        return [t for t in job.tasks.values() if t.status in _PLACED]


def own_use(job: JobInfo) -> Resource:
    """What the job's pods on nodes hold (its running part)."""
    return job.request(_HOLDING)


def job_invalid_reason(job: JobInfo) -> str | None:
    if job.problem:
        return job.problem
    if job.timed_out():
        return "timed out; change the PodGroup spec to retry"
    alive = _ALIVE if job.spec.rules is GangRules.KAISCHED else _LIVE_ALIVE
    gated = [t for t in job.tasks.values() if t.gates and t.status is TaskStatus.PENDING]
    have = job.count(alive) - len(gated)
    if have < job.min_member:
        if gated:
            return _gated(job.min_member, have, gated)
        return f"minMember is {job.min_member} but only {have} pod(s) exist"
    if job.spec.subgroups:
        return _tree_invalid(job, gated)
    return None


def _tree_invalid(job: JobInfo, gated: list[TaskInfo]) -> str | None:
    """Pods that name an inner subgroup, or too few pods (ungated) in the
    subgroups for the tree to be met, say which subtree is short."""
    tree = job.tree
    inner = sorted({str(t.subgroup) for t in job.tasks.values()
                    if t.subgroup is not None and t.subgroup in tree.children})
    if inner:
        return (f"pods name subgroup(s) {', '.join(inner)}, which hold subgroups; a pod belongs "
                "to a subgroup with none under it")
    alive = job.alive_counts()
    if tree.met(alive):
        return None
    if not tree.choices and all(tree.parent[n] == ROOT for n in tree.parent):
        for sg in job.spec.subgroups:       # one level, every subgroup needed
            mine = [t for t in gated if t.subgroup == sg.name]
            have = alive.get(sg.name, 0)
            if have < sg.min_member:
                if mine:
                    return f"subgroup {sg.name}: " + _gated(sg.min_member, have, mine)
                return f"subgroup {sg.name} needs {sg.min_member} pod(s), only {have} exist"
    why = "too few pods for the subgroup tree: " + tree.shortfall(alive)
    if gated:
        names = sorted({g for t in gated for g in t.gates})
        why += f"; {len(gated)} pod(s) wait for scheduling gates ({', '.join(names)})"
    return why


def _gated(minimum: int, have: int, gated: list[TaskInfo]) -> str:
    """A gang short of its minimum because pods are gated: which gates, on how many."""
    names = sorted({g for t in gated for g in t.gates})
    return (f"{len(gated)} pod(s) wait for scheduling gates ({', '.join(names)}); "
            f"the {have} ungated cannot meet minMember {minimum}")
