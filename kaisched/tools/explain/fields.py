"""The fields of `explain -o json|yaml` (docs/explain-json.md): the gang, the queue
and each pod in numbers, read from what the session recorded."""
from __future__ import annotations

from typing import Any

from kaisched.api.clock import to_rfc3339
from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.resource import CPU, PODS, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, NodeName, TaskStatus
from kaisched.cache.convert.queues import queue_status
from kaisched.cluster.kinds import QUEUE
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Session
from kaisched.framework.hooks import Hook
from kaisched.framework.reservation import Reservation

MAX_NODES = 20      # per task; beyond that, nodes are counted by reason


def number(resource: str, value: float) -> float:
    """An amount for tools: cpu in cores, memory and storage in bytes, the rest in units."""
    amount = value / 1000 if resource == CPU else value
    return round(amount, 6) if amount != int(amount) else int(amount)


def amounts(res: Resource) -> dict[str, float]:
    return {name: number(name, res.get(name)) for name in sorted(res.names()) if name != PODS}


def reservation_fields(reservation: Reservation | None) -> dict[str, Any]:
    """The starvation guard's reservation for the gang, if it holds one: when
    its room is sure to be free, likely free, and what moved its start later."""
    def at(when: float | None) -> str | None:
        return to_rfc3339(when) if when is not None else None
    r = reservation
    return {"reserved": r is not None,
            "reservationStart": at(r.start) if r else None,
            "reservationLikelyStart": at(r.likely) if r else None,
            "reservationNodes": list(r.nodes) if r else None,
            "reservationMoved": {"from": at(r.was), "because": r.moved}
            if r is not None and r.moved is not None else None}


def gang_fields(ssn: Session, job: JobInfo, why: str | None, placed: dict[Any, NodeName],
                 pipelined: dict[Any, NodeName], together: dict[str, Any] | None
                 ) -> dict[str, Any]:
    """The gang in numbers: its minimum, what is placed, and per reason a pod fits no node
    (the session's filters: the class of the reason, the filter, how many nodes it refuses,
    and for a resource the need per pod and the most one node has free)."""
    blocker = ssn.blockers.get(job.key)
    reasons: dict[tuple[Any, ...], dict[str, Any]] = {}
    notes: list[str] = []
    for task in job.tasks.values():
        if task.status is not TaskStatus.PENDING or task.key in placed or task.key in pipelined:
            continue
        for cause in ssn.explanation.causes(task):
            found = {"code": cause.code.value, "filter": cause.filter,
                     "node_count": cause.node_count, "resource": cause.resource,
                     "need": None if cause.need is None or cause.resource is None
                     else number(cause.resource, cause.need),
                     "best_free": None if cause.best_free is None or cause.resource is None
                     else number(cause.resource, cause.best_free)}
            entry = reasons.setdefault(tuple(found.values()), {**found, "pods": 0})
            entry["pods"] += 1
        notes.extend(n for n in ssn.selection.hooks.reasons(Hook.EXPLAIN, task) if n not in notes)
    return {"minMember": job.min_member, "pods": len(job.tasks), "placed": job.ready_count(),
            "wouldBind": len(placed), "pipelined": len(pipelined),
            "waiting": bool(why and not placed and not job.problem),
            "invalid": bool(job.problem),
            "blocker": blocker.value if blocker is not None and why else None,
            "message": why or None, "subgroups": subgroup_state(job) if why else None,
            "reasons": list(reasons.values()), "notes": notes,
            "together": together or None}


def queue_fields(cluster: MemoryCluster, ssn: Session, job: JobInfo) -> dict[str, Any]:
    """The queue's quota, limits, fair share and use (the status the cycle wrote on the
    Queue), and what is missing for the pods of the gang's minimum still waiting: the
    amount by which they would take the queue past its fair share, and past its limits."""
    info = ssn.cluster.queues.get(job.queue)
    if info is None:
        return {"name": job.queue, "exists": False}
    status = queue_status((cluster.get(QUEUE, "", job.queue) or {}).get("status"))
    fair = Resource.of(dict(status.fair_share)) if status is not None else None
    used = Resource.of(dict(status.allocated)) if status is not None else None
    waiting = ssn.minimum_tasks(job, [t for t in job.tasks.values()
                                      if t.status is TaskStatus.PENDING]) \
        if not job.minimum_met(READY_STATUSES) else []
    need = Resource.of({})
    for task in waiting:
        need = need + task.resreq
    after = (used or Resource.of({})) + need
    limits = Resource.of(dict(info.limits))
    beyond_fair = {name: number(name, after.get(name) - fair.get(name)) for name in need.names()
                   if name != PODS and fair is not None and need.get(name) > 0
                   and after.get(name) > fair.get(name) + EPSILON}
    beyond_limit = {name: number(name, after.get(name) - limits.get(name))
                    for name in limits.names() if need.get(name) > 0
                    and after.get(name) > limits.get(name) + EPSILON}
    usage = {name: round(value, 6) for name, value in info.usage.normalized} \
        if info.usage is not None and info.usage.normalized else None
    return {"name": job.queue, "exists": True, "quota": amounts(info.quota),
            "limits": amounts(limits), "fairShare": amounts(fair) if fair is not None else None,
            "inUse": amounts(used) if used is not None else None, "usageOverWindow": usage,
            "waitingNeeds": amounts(need),
            "missing": {"overFairShare": beyond_fair, "overLimits": beyond_limit}}


def pod_fields(ssn: Session, task: TaskInfo, placed: dict[Any, NodeName],
                pipelined: dict[Any, NodeName], refused: bool) -> dict[str, Any]:
    """A pod: its status and node, what this cycle did with it, what it requests, and for a
    pending one per node whether it fits or the first filter that refuses it, in numbers."""
    nodes = None
    if task.status is TaskStatus.PENDING and task.key not in pipelined and not refused:
        nodes = []
        for name in ssn.cluster.nodes:
            refusal = ssn.explanation.refusal(task, NodeName(name))
            nodes.append({"node": name, "fits": refusal is None,
                          "code": refusal.code.value if refusal else None,
                          "filter": refusal.filter if refusal else None,
                          "short": [{"resource": s.resource, "need": number(s.resource, s.need),
                                     "free": number(s.resource, s.free)}
                                    for s in (refusal.short if refusal else ())]})
    return {"pod": task.key, "status": task.status.value, "node": task.node_name or None,
            "refused": refused and task.status is TaskStatus.PENDING,
            "wouldBindTo": placed.get(task.key), "pipelinedTo": pipelined.get(task.key),
            "requests": amounts(task.resreq),
            "gpuShare": task.gpu.describe() if task.gpu is not None else None,
            "nodes": nodes if nodes is None or len(nodes) <= MAX_NODES else None,
            "nodeSummary": _summary(nodes) if nodes is not None else None}


def _summary(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes counted by answer (fits, or the filter that refuses, and the resources short):
    what a tool reads on a cluster too big to list node by node."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for node in nodes:
        short = tuple(s["resource"] for s in node.get("short") or ())
        key = (node["fits"], node.get("code"), node.get("filter"), short)
        entry = groups.setdefault(key, {"fits": node["fits"], "code": node.get("code"),
                                        "filter": node.get("filter"), "short": list(short),
                                        "count": 0, "examples": []})
        entry["count"] += 1
        if len(entry["examples"]) < 3:
            entry["examples"].append(node["node"])
    return sorted(groups.values(), key=lambda g: -g["count"])


def subgroup_state(job: JobInfo) -> str | None:
    """Which subtree of the gang's subgroups is short, in numbers: pods
    placed or running of each subgroup's minimum, and how many exist."""
    if not job.spec.subgroups:
        return None
    have = job.leaf_counts(READY_STATUSES)
    if job.tree.met(have):
        return None
    return job.tree.shortfall(have, job.alive_counts())
