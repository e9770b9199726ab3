"""The explanation as a whole: one cycle of the production Scheduler on a copy of
the cluster, and what it decided and wrote of NAME, as lines for a person and as fields
for a tool (read from what the session recorded, never from the text)."""
from __future__ import annotations

from typing import Any, Iterable

import attrs

from kaisched.api.clock import ManualClock
from kaisched.api.resource import PODS, Resource, format_resource
from kaisched.api.types import JobKey, Reason, TaskStatus
from kaisched.cluster.kinds import PODGROUP, UPSTREAM_PODGROUPS
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import InputError
from kaisched.framework import Registry, SchedulerConfig
from kaisched.framework.effects import Bind
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.sim.claims import make_claims
from kaisched.tools.explain.fields import (
    gang_fields,
    pod_fields,
    queue_fields,
    reservation_fields,
    subgroup_state,
)
from kaisched.tools.explain.gang import gang_lines
from kaisched.tools.explain.lines import node_lines, protection_lines, queue_lines
from kaisched.tools.explain.names import resolve
from kaisched.tools.replay import load_cluster
from podgrouper.controller import PodGrouper

# The version of the fields `explain -o json|yaml` prints (docs/explain-json.md); a field
# renamed or removed, or its meaning changed, is a new version.
SCHEMA = "kaisched.io/explain/v1"


@attrs.frozen
class Explained:
    """One explanation, as a person reads it (lines) and as a tool does (fields)."""
    lines: list[str]
    fields: dict[str, Any]


def explain(objects: Iterable[dict[str, Any]], name: str, config: SchedulerConfig,
            registry: Registry) -> list[str]:
    """Why NAME (a PodGroup, a pod or a workload) waits, as text lines."""
    return explain_report(objects, name, config, registry).lines


def explain_data(objects: Iterable[dict[str, Any]], name: str, config: SchedulerConfig,
                 registry: Registry) -> dict[str, Any]:
    """Why NAME waits, in fields, for tools: what `explain -o json` prints."""
    return explain_report(objects, name, config, registry).fields


def explain_report(objects: Iterable[dict[str, Any]], name: str, config: SchedulerConfig,
                   registry: Registry) -> Explained:
    """Why NAME waits, as one cycle of the production Scheduler on a copy of the cluster
    decided it: the text, and the same decision in fields read from what the session
    recorded (its filters' answers, the gang's counts, the Queue's status) -- never
    from the text."""
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
    # A gang with no object to carry a condition (a Workload's, KAI's): the session's own word.
    why = job.problem or _unscheduled(cluster, key) or ssn.unschedulable.get(job.key)
    waits = bool(why and not placed and not job.problem)
    together: dict[str, Any] = {}
    gang = gang_lines(ssn, job, together) if waits else []
    protected = protection_lines(ssn, job) if waits else []
    pods = []
    for task in sorted(job.tasks.values(), key=ssn.task_order_key):
        state = ("would bind to " + placed[task.key] if task.key in placed
                 else task.status.value + (f" on {task.node_name}" if task.node_name else ""))
        nodes = node_lines(ssn, task, "fits on its own" if gang else "fits") \
            if task.status is TaskStatus.PENDING and task.key not in result.reservations \
            and not job.problem else []
        if job.problem and task.status is TaskStatus.PENDING:
            # An invalid gang is refused whole before any node is asked: no node "fits".
            state += f", refused ({Reason.INVALID.value}: see above); no node is tried"
        requests = format_resource(task.resreq - Resource.of({PODS: 1}))
        if task.gpu is not None:
            requests += f", {task.gpu.describe()}"
        pods.append({"pod": task.key, "state": state, "requests": requests,
                     "nodes": _dedent(nodes, 4)})
    prose = {"name": name, "podGroup": key, "minMember": job.min_member, "pods": len(job.tasks),
             "queue": job.queue, "priority": job.priority, "mode": job.spec.mode.value,
             "waiting": why or None, "invalid": job.problem, "wouldBind": len(placed),
             "placedAlready": job.ready_count(),
             "subgroups": subgroup_state(job) if why else None,
             "queueStatus": _dedent(queue_lines(cluster, ssn, job.queue), 2),
             "protected": _dedent(protected, 2), "gang": _dedent(gang, 2), "tasks": pods}
    pipelined = {pod: node for pod, node in result.reservations.items() if pod in job.tasks}
    gang_data = gang_fields(ssn, job, why, placed, pipelined, together if waits else None)
    reservation = result.reserved.get(job.key)
    gang_data.update(reservation_fields(reservation))
    fields = {
        "schema": SCHEMA, "name": name, "podGroup": key, "queue": job.queue,
        "priority": job.priority, "mode": job.spec.mode.value,
        "gang": gang_data,
        "queueStatus": queue_fields(cluster, ssn, job),
        "pods": [pod_fields(ssn, task, placed, pipelined, bool(job.problem))
                 for task in sorted(job.tasks.values(), key=ssn.task_order_key)],
    }
    return Explained(text_lines(prose), fields)


def text_lines(data: dict[str, Any]) -> list[str]:
    """The text of `kaisched explain`."""
    key = data["podGroup"]
    lines = [f"PodGroup {key}: minMember {data['minMember']}, {data['pods']} pod(s), "
             f"queue {data['queue']}, priority {data['priority']}, mode {data['mode']}"]
    if data["name"] != key:
        lines[0] += f" (the PodGroup of {data['name']})"
    if data["invalid"]:
        lines.append(f"  refused ({Reason.INVALID.value}): {data['invalid']}")
    elif data["waiting"]:
        lines.append(f"  waiting: {data['waiting']}")
    elif data["wouldBind"]:
        lines.append(f"  schedulable now: {data['wouldBind']} pod(s) would bind")
    else:
        lines.append(f"  {data['placedAlready']} pod(s) placed already; nothing waits")
    if data.get("subgroups"):
        lines.append(f"  subgroups: {data['subgroups']}")
    lines.extend(f"  {line}" for line in data["queueStatus"])
    lines.extend(f"  {line}" for line in data["protected"])
    lines.extend(f"  {line}" for line in data["gang"])
    for pod in data["tasks"]:
        lines.append(f"  pod {pod['pod']}: {pod['state']}; requests {pod['requests']}")
        lines.extend(f"    {line}" for line in pod["nodes"])
    return lines


def _dedent(lines: list[str], by: int) -> list[str]:
    assert all(line.startswith(" " * by) for line in lines)
    return [line[by:] for line in lines]


def _unscheduled(cluster: MemoryCluster, key: str) -> str | None:
    """The reason the cycle wrote on the PodGroup (kaisched's, or an upstream
    one's condition), as `kubectl describe` shows it."""
    ns, name = key.split("/", 1)
    pg = next((g for g in (cluster.get(k, ns, name) for k in (PODGROUP, *UPSTREAM_PODGROUPS)) if g),
              {})
    conditions = (pg.get("status") or {}).get("conditions") or []
    cond = next((c for c in conditions
                 if c.get("type") in ("Scheduled", "PodGroupScheduled", "PodGroupInitiallyScheduled")),
                None)
    if cond is None or cond.get("status") != "False":
        return None
    return str(cond.get("message") or cond.get("reason"))
