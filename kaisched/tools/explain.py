"""kaisched explain: why a PodGroup is pending, per task and per node, with
its queue's quota, fair share and usage and the gang's shortfall.

A gang that waits because it does not fit as a whole (each pod would fit on its
own) is explained as allocate tries it: per node, how many of the pods that must
go together it could hold and what runs out first; then the shortfall in total.

It runs one cycle of the production Scheduler on a copy of the cluster in
the memory backend (the real cluster is only read) and reports what that
cycle decided and wrote: the PodGroup's condition, the Queue's status, the
binds; per node it asks the cycle's own session, which is what it saw.
"""
from __future__ import annotations

import functools
from typing import Any, Iterable

import numpy as np

from kaisched.api import labels as L
from kaisched.api.clock import ManualClock
from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.resource import PODS, Resource, format_amount, format_resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, QueueName, TaskStatus
from kaisched.cache.convert.queues import queue_status
from kaisched.cluster.kinds import POD, PODGROUP, QUEUE
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import InputError
from kaisched.framework import Registry, SchedulerConfig, Session
from kaisched.framework.effects import Bind, Cause
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.sim.claims import make_claims
from kaisched.tools.replay import load_cluster
from podgrouper.controller import PodGrouper

MAX_NODES = 20      # per task; beyond that, nodes are counted by reason


def explain(objects: Iterable[dict[str, Any]], name: str, config: SchedulerConfig,
            registry: Registry) -> list[str]:
    """Why NAME (a PodGroup, a pod or a workload) waits, as one cycle of the
    production Scheduler on a copy of the cluster decided it."""
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    PodGrouper(cluster, clock, scheduler_name=config.scheduler_name).sync()
    make_claims(cluster)        # the resource-claim controller: claims from templates
    key = resolve(cluster, name, config.scheduler_name)
    scheduler = Scheduler(cluster, config, registry, clock, Binder(cluster, clock.now))
    scheduler.keep_session = True
    result = scheduler.run_once()
    ssn = scheduler.last_session
    assert ssn is not None      # kept above
    job = ssn.cluster.jobs.get(JobKey(key))
    if job is None:
        raise InputError(f"no PodGroup (or pod) {key} with pods scheduled by {config.scheduler_name}")
    placed = {e.pod: e.node for e in result.effects if isinstance(e, Bind) and e.job == job.key}
    lines = [f"PodGroup {key}: minMember {job.min_member}, {len(job.tasks)} pod(s), "
             f"queue {job.queue}, priority {job.priority}, mode {job.spec.mode.value}"]
    if name != key:
        lines[0] += f" (the PodGroup of {name})"
    why = job.problem or _unscheduled(cluster, key)
    if why:
        lines.append(f"  waiting: {why}")
    elif placed:
        lines.append(f"  schedulable now: {len(placed)} pod(s) would bind")
    else:
        lines.append(f"  {job.ready_count()} pod(s) placed already; nothing waits")
    lines.extend(_queue_lines(cluster, ssn, job.queue))
    if why and not placed and not job.problem:
        lines.extend(_protection_lines(ssn, job))
    gang = _gang_lines(ssn, job) if why and not placed and not job.problem else []
    lines.extend(gang)
    for task in sorted(job.tasks.values(), key=ssn.task_order_key):
        state = ("would bind to " + placed[task.key] if task.key in placed
                 else task.status.value + (f" on {task.node_name}" if task.node_name else ""))
        lines.append(f"  pod {task.key}: {state}; requests "
                     f"{format_resource(task.resreq - Resource.of({PODS: 1}))}")
        if task.status is TaskStatus.PENDING and task.key not in result.reservations:
            lines.extend(_node_lines(ssn, task, "fits on its own" if gang else "fits"))
    return lines


def resolve(cluster: MemoryCluster, name: str, scheduler_name: str) -> str:
    """The PodGroup NAME stands for: `ns/podgroup`, `ns/pod`, or a workload as
    `[ns/]kind/name` (`pytorchjob/bert`, the PodGroup made for that owner)."""
    parts = name.split("/")
    if len(parts) == 2 and cluster.get(PODGROUP, parts[0], parts[1]) is not None:
        return name
    if len(parts) == 2:
        pod = cluster.get(POD, parts[0], parts[1])
        if pod is not None:
            group = ((pod["metadata"].get("annotations") or {}).get(L.POD_GROUP_ANNOTATION))
            if not group:
                raise InputError(f"pod {name} belongs to no PodGroup (is it scheduled by "
                                 f"{scheduler_name}?)")
            return f"{parts[0]}/{group}"
    if len(parts) not in (2, 3):
        raise InputError(f"{name}: expected NAMESPACE/NAME (a PodGroup or a pod) or "
                         "[NAMESPACE/]KIND/NAME (a workload)")
    namespace = parts[0] if len(parts) == 3 else None
    kind, owner = parts[-2].lower(), parts[-1]
    found = sorted(f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"
                   for pg in cluster.list(PODGROUP)
                   if namespace in (None, pg["metadata"].get("namespace"))
                   and any(str(ref.get("kind", "")).lower() == kind and ref.get("name") == owner
                           for ref in pg["metadata"].get("ownerReferences") or ()))
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise InputError(f"{name}: a workload of that name in several namespaces "
                         f"({', '.join(found)}); say which as NAMESPACE/{parts[-2]}/{owner}")
    if len(parts) == 3:
        raise InputError(f"no PodGroup made for {parts[-2]} {owner} in namespace {namespace}")
    raise InputError(f"no PodGroup, pod or workload {name} (a workload is KIND/NAME, "
                     "e.g. pytorchjob/bert)")


def _unscheduled(cluster: MemoryCluster, key: str) -> str | None:
    """The reason the cycle wrote on the PodGroup, as `kubectl describe` shows it."""
    ns, name = key.split("/", 1)
    pg = cluster.get(PODGROUP, ns, name) or {}
    conditions = (pg.get("status") or {}).get("conditions") or []
    cond = next((c for c in conditions if c.get("type") == "Scheduled"), None)
    if cond is None or cond.get("status") != "False":
        return None
    return str(cond.get("message") or cond.get("reason"))


def _queue_lines(cluster: MemoryCluster, ssn: Session, queue: QueueName) -> list[str]:
    info = ssn.cluster.queues.get(queue)
    if info is None:
        return [f"  queue {queue}: does not exist"]
    limits = ", ".join(f"{k}={format_amount(k, v)}" for k, v in info.limits) or "none"
    lines = [f"  queue {queue}: quota {format_resource(info.quota)}; limits {limits}"]
    # The status the cycle wrote on the Queue: what the cluster shows of it too.
    status = queue_status((cluster.get(QUEUE, "", queue) or {}).get("status"))
    if status is not None:
        fair = Resource.of(dict(status.fair_share))
        used = Resource.of(dict(status.allocated))
        lines.append(f"    fair share {format_resource(fair)}; in use (incl. this session) "
                     f"{format_resource(used - Resource.of({PODS: used.get(PODS)}))}")
    return lines


def _protection_lines(ssn: Session, job: JobInfo, most: int = 5) -> list[str]:
    """Running jobs the waiting job could evict but for their min-runtime:
    lower-priority ones of its queue (preempt), those of other queues (reclaim)."""
    if not ssn.protects:
        return []
    found = []
    for other in ssn.cluster.jobs.values():
        if other.key == job.key or not other.spec.preemptible:
            continue
        if other.queue == job.queue:
            if other.priority >= job.priority:
                continue
            kind, where = Cause.PREEMPT, "preempt"
        else:
            kind, where = Cause.RECLAIM, f"reclaim from queue {other.queue}"
        protection = ssn.protected_until(other, kind, job)
        if protection is not None:
            found.append((protection.until, other.key,
                          f"    {other.key} ({where}): {protection.describe(ssn.now)}"))
    if not found:
        return []
    found.sort()
    lines = ["  running jobs it may not evict yet:", *(line for _, _, line in found[:most])]
    if len(found) > most:
        lines.append(f"    ... and {len(found) - most} more")
    return lines


def _node_lines(ssn: Session, task: TaskInfo, fits: str = "fits") -> list[str]:
    reasons: dict[str, list[str]] = {}
    for name in ssn.cluster.nodes:
        reason = ssn.explain_node(task, name) or fits
        reasons.setdefault(reason, []).append(name)
    if len(ssn.cluster.nodes) <= MAX_NODES:
        return [f"    {name}: {reason}" for reason, names in reasons.items() for name in names]
    return [f"    {len(names)} node(s): {reason} (e.g. {', '.join(names[:3])})"
            for reason, names in sorted(reasons.items(), key=lambda kv: -len(kv[1]))]


def _gang_lines(ssn: Session, job: JobInfo) -> list[str]:
    """The pods that must be placed together (the missing part of minMember,
    in the order allocate places them), how many of them each node could hold
    on its own and what runs out there first, and the shortfall in total."""
    table = ssn.cluster.table
    needed = job.min_member - job.ready_count()
    waiting = sorted((t for t in job.tasks.values() if t.status is TaskStatus.PENDING),
                     key=ssn.task_order_key)
    tasks = waiting[:max(needed, 0)]
    if not tasks or not len(table):
        return []
    vectors = [table.vector(t.resreq) for t in tasks]
    masks: dict[Any, np.ndarray] = {}
    for t in tasks:     # all filters but resources, once per kind of pod
        if (t.resreq, t.placement) not in masks:
            masks[(t.resreq, t.placement)] = ssn.static_mask(t)
    allowed = [masks[(t.resreq, t.placement)] for t in tasks]
    lines = [f"  the gang as the scheduler tried it: {len(tasks)} pod(s) to place together "
             f"(minMember {job.min_member}, {job.ready_count()} placed already)"]
    held_total, eligible = 0, []
    by_reason: dict[str, list[str]] = {}
    for row, name in enumerate(table.names):
        if not any(mask[row] for mask in allowed):
            reason = "could hold none: " + (ssn.explain_node(tasks[0], name) or "filtered out")
        else:
            eligible.append(row)
            held, reason = _node_holds(table, row, vectors, [m[row] for m in allowed])
            held_total += held
        by_reason.setdefault(reason, []).append(name)
    if len(table) <= MAX_NODES:
        lines += [f"    {name}: {reason}" for row, name in enumerate(table.names)
                  for reason, names in by_reason.items() if name in names]
    else:
        lines += [f"    {len(names)} node(s): {reason} (e.g. {', '.join(names[:3])})"
                  for reason, names in sorted(by_reason.items(), key=lambda kv: -len(kv[1]))]
    could = min(held_total, len(tasks))
    if could >= len(tasks):
        lines.append(f"  in total: the nodes could hold all {len(tasks)} pods; "
                     "room on the nodes is not what it waits for")
        return lines
    lines.append(f"  in total: the nodes could hold {could} of the {len(tasks)} pods: "
                 f"{len(tasks) - could} short")
    lines.extend(_shortfall(table, np.sum(vectors, axis=0), eligible))
    return lines


def _node_holds(table: Any, row: int, vectors: list[np.ndarray],
                allowed: list[bool]) -> tuple[int, str]:
    """How many of the pods (in order) fit this node alone, and what stops the next."""
    free = np.maximum(table.future[row], 0.0)
    room = free.copy()
    held = 0
    for vector, ok in zip(vectors, allowed, strict=True):
        if not ok:
            continue
        short = np.flatnonzero(vector > room + EPSILON)
        if len(short):
            def amount(d: int, value: float) -> str:
                return format_amount(table.dims[d], table.amount(d, value))
            out = "; ".join(
                f"{table.dims[d]} runs out first ({amount(d, free[d])} free, "
                f"{amount(d, vector[d])} per pod" + (f": {amount(d, room[d])} left)" if held else ")")
                for d in map(int, short))
            return held, f"could hold {held if held else 'none'} of them; {out}"
        room = room - vector
        held += 1
    return held, f"could hold all {held} of them"


def _shortfall(table: Any, need: np.ndarray, rows: list[int]) -> list[str]:
    """Per resource the gang needs more of than the nodes that could take it
    hold in all: "needs 4 nvidia.com/gpu on 2 nodes holding 1 each: 2 short"."""
    free = np.maximum(table.future[rows], 0.0) if rows else np.zeros((0, len(table.dims)))
    lines = []
    for d, name in enumerate(table.dims):
        total = float(free[:, d].sum())
        if need[d] <= total + EPSILON:
            continue
        amount = functools.partial(_amount, table, d, name)
        nodes = f"{len(rows)} node" + ("s" if len(rows) != 1 else "")
        if not rows:
            where = "no node that could take its pods"
        elif len(rows) == 1:
            where = f"1 node holding {amount(total)}"
        elif np.allclose(free[:, d], free[0, d]):
            where = f"{nodes} holding {amount(free[0, d])} each"
        else:
            where = f"{nodes} holding {amount(total)} in all (at most {amount(free[:, d].max())} on one)"
        lines.append(f"    needs {amount(need[d])} {name} on {where}: {amount(need[d] - total)} short")
    if not lines:
        lines.append("    enough room in total, but split: no node has room left for the next pod")
    return lines


def _amount(table: Any, dim: int, name: str, value: float) -> str:
    return format_amount(name, table.amount(dim, value))
