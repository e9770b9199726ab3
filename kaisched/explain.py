"""kaisched explain: why a PodGroup is pending, per task and per node, with
its queue's quota, fair share and usage and the gang's shortfall.

It replays one session over the snapshot (nothing is applied) and reads the
session's state after the actions, which is what the scheduler saw.
"""
from __future__ import annotations

from typing import Any, Iterable

from kaisched.api.clock import ManualClock
from kaisched.api.resource import PODS, Resource, format_amount, format_resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, TaskStatus
from kaisched.cache import Cache
from kaisched.errors import InputError
from kaisched.framework import Registry, SchedulerConfig, Session
from kaisched.replay import load_cluster
from podgrouper.controller import PodGrouper

MAX_NODES = 20      # per task; beyond that, nodes are counted by reason


def explain(objects: Iterable[dict[str, Any]], key: str, config: SchedulerConfig,
            registry: Registry) -> list[str]:
    clock = ManualClock()
    cluster = load_cluster(objects, clock)
    PodGrouper(cluster, clock, scheduler_name=config.scheduler_name).sync()
    cache = Cache(config.scheduler_name)
    cache.sync(cluster)
    ssn = Session(cache.snapshot(clock.now()), config, config.build_plugins(registry))
    job = ssn.cluster.jobs.get(JobKey(key))
    if job is None:
        raise InputError(f"no PodGroup (or pod) {key} with pods scheduled by {config.scheduler_name}")
    for action in config.build_actions(registry):
        action.execute(ssn)
    lines = [f"PodGroup {key}: minMember {job.min_member}, {len(job.tasks)} pod(s), "
             f"queue {job.queue}, priority {job.priority}, mode {job.spec.mode.value}"]
    placed = [t for t in job.tasks.values() if t.key in ssn.placed]
    why = job.problem or ssn.unschedulable.get(job.key)
    if why:
        lines.append(f"  waiting: {why}")
    elif placed:
        lines.append(f"  schedulable now: {len(placed)} pod(s) would bind")
    else:
        lines.append(f"  {job.ready_count()} pod(s) placed already; nothing waits")
    lines.extend(_queue_lines(ssn, job.queue))
    for task in sorted(job.tasks.values(), key=ssn.task_order_key):
        state = ("would bind to " + ssn.placed[task.key] if task.key in ssn.placed
                 else task.status.value + (f" on {task.node_name}" if task.node_name else ""))
        lines.append(f"  pod {task.key}: {state}; requests "
                     f"{format_resource(task.resreq - Resource.of({PODS: 1}))}")
        if task.status is TaskStatus.PENDING and task.key not in ssn.reservations:
            lines.extend(_node_lines(ssn, task))
    return lines


def _queue_lines(ssn: Session, queue: str) -> list[str]:
    info = ssn.cluster.queues.get(queue)  # type: ignore[call-overload]
    if info is None:
        return [f"  queue {queue}: does not exist"]
    limits = ", ".join(f"{k}={format_amount(k, v)}" for k, v in info.limits) or "none"
    lines = [f"  queue {queue}: quota {format_resource(info.quota)}; limits {limits}"]
    proportion = next((p for p in ssn.plugins if p.name == "proportion"), None)
    if proportion is not None:
        fair = Resource.of(proportion.deserved.get(queue, {}))   # type: ignore[attr-defined]
        used = Resource.of(proportion.allocated[queue])          # type: ignore[attr-defined]
        lines.append(f"    fair share {format_resource(fair)}; in use (incl. this session) "
                     f"{format_resource(used - Resource.of({PODS: used.get(PODS)}))}")
    return lines


def _node_lines(ssn: Session, task: TaskInfo) -> list[str]:
    reasons: dict[str, list[str]] = {}
    for name in ssn.cluster.nodes:
        reason = ssn.explain_node(task, name) or "fits"
        reasons.setdefault(reason, []).append(name)
    if len(ssn.cluster.nodes) <= MAX_NODES:
        return [f"    {name}: {reason}" for reason, names in reasons.items() for name in names]
    return [f"    {len(names)} node(s): {reason} (e.g. {', '.join(names[:3])})"
            for reason, names in sorted(reasons.items(), key=lambda kv: -len(kv[1]))]
