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

import difflib
import functools
from typing import Any, Iterable

import attrs
import numpy as np

from kaisched.api import labels as L
from kaisched.api.clock import ManualClock
from kaisched.api.gpudevices import NodeGpus, WholeGpu
from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.resource import CPU, GPU, PODS, Resource, format_amount, format_resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, JobKey, NodeName, QueueName, Reason, TaskStatus
from kaisched.cache.convert import pod_facts
from kaisched.cache.convert.queues import queue_status
from kaisched.cluster.kinds import POD, PODGROUP, QUEUE, UPSTREAM_PODGROUPS
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import InputError
from kaisched.framework import Registry, SchedulerConfig, Session
from kaisched.framework.effects import Bind, Cause
from kaisched.framework.hooks import Hook
from kaisched.runtime.binder import Binder
from kaisched.runtime.scheduler import Scheduler
from kaisched.sim.claims import make_claims
from kaisched.tools.replay import load_cluster
from podgrouper.controller import PodGrouper

MAX_NODES = 20      # per task; beyond that, nodes are counted by reason
# Gangs a pod names in another API than kaisched's PodGroup annotation.
_OTHER_APIS = ("upstream", "workload", "kai", "x-k8s", "koord")


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
    gang = _gang_lines(ssn, job, together) if waits else []
    protected = _protection_lines(ssn, job) if waits else []
    pods = []
    for task in sorted(job.tasks.values(), key=ssn.task_order_key):
        state = ("would bind to " + placed[task.key] if task.key in placed
                 else task.status.value + (f" on {task.node_name}" if task.node_name else ""))
        nodes = _node_lines(ssn, task, "fits on its own" if gang else "fits") \
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
             "subgroups": _subgroup_state(job) if why else None,
             "queueStatus": _dedent(_queue_lines(cluster, ssn, job.queue), 2),
             "protected": _dedent(protected, 2), "gang": _dedent(gang, 2), "tasks": pods}
    pipelined = {pod: node for pod, node in result.reservations.items() if pod in job.tasks}
    fields = {
        "schema": SCHEMA, "name": name, "podGroup": key, "queue": job.queue,
        "priority": job.priority, "mode": job.spec.mode.value,
        "gang": _gang_fields(ssn, job, why, placed, pipelined, together if waits else None),
        "queueStatus": _queue_fields(cluster, ssn, job),
        "pods": [_pod_fields(ssn, task, placed, pipelined, bool(job.problem))
                 for task in sorted(job.tasks.values(), key=ssn.task_order_key)],
    }
    return Explained(text_lines(prose), fields)


def _number(resource: str, value: float) -> float:
    """An amount for tools: cpu in cores, memory and storage in bytes, the rest in units."""
    amount = value / 1000 if resource == CPU else value
    return round(amount, 6) if amount != int(amount) else int(amount)


def _amounts(res: Resource) -> dict[str, float]:
    return {name: _number(name, res.get(name)) for name in sorted(res.names()) if name != PODS}


def _gang_fields(ssn: Session, job: JobInfo, why: str | None, placed: dict[Any, NodeName],
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
                     else _number(cause.resource, cause.need),
                     "best_free": None if cause.best_free is None or cause.resource is None
                     else _number(cause.resource, cause.best_free)}
            entry = reasons.setdefault(tuple(found.values()), {**found, "pods": 0})
            entry["pods"] += 1
        notes.extend(n for n in ssn.selection.hooks.reasons(Hook.EXPLAIN, task) if n not in notes)
    return {"minMember": job.min_member, "pods": len(job.tasks), "placed": job.ready_count(),
            "wouldBind": len(placed), "pipelined": len(pipelined),
            "waiting": bool(why and not placed and not job.problem),
            "invalid": bool(job.problem),
            "blocker": blocker.value if blocker is not None and why else None,
            "message": why or None, "subgroups": _subgroup_state(job) if why else None,
            "reasons": list(reasons.values()), "notes": notes,
            "together": together or None}


def _queue_fields(cluster: MemoryCluster, ssn: Session, job: JobInfo) -> dict[str, Any]:
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
    beyond_fair = {name: _number(name, after.get(name) - fair.get(name)) for name in need.names()
                   if name != PODS and fair is not None and need.get(name) > 0
                   and after.get(name) > fair.get(name) + EPSILON}
    beyond_limit = {name: _number(name, after.get(name) - limits.get(name))
                    for name in limits.names() if need.get(name) > 0
                    and after.get(name) > limits.get(name) + EPSILON}
    usage = {name: round(value, 6) for name, value in info.usage.normalized} \
        if info.usage is not None and info.usage.normalized else None
    return {"name": job.queue, "exists": True, "quota": _amounts(info.quota),
            "limits": _amounts(limits), "fairShare": _amounts(fair) if fair is not None else None,
            "inUse": _amounts(used) if used is not None else None, "usageOverWindow": usage,
            "waitingNeeds": _amounts(need),
            "missing": {"overFairShare": beyond_fair, "overLimits": beyond_limit}}


def _pod_fields(ssn: Session, task: TaskInfo, placed: dict[Any, NodeName],
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
                          "short": [{"resource": s.resource, "need": _number(s.resource, s.need),
                                     "free": _number(s.resource, s.free)}
                                    for s in (refusal.short if refusal else ())]})
    return {"pod": task.key, "status": task.status.value, "node": task.node_name or None,
            "refused": refused and task.status is TaskStatus.PENDING,
            "wouldBindTo": placed.get(task.key), "pipelinedTo": pipelined.get(task.key),
            "requests": _amounts(task.resreq),
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


def resolve(cluster: MemoryCluster, name: str, scheduler_name: str) -> str:
    """The PodGroup NAME stands for: `ns/podgroup`, `ns/pod`, or a workload as
    `[ns/]kind/name` (`pytorchjob/bert`, the PodGroup made for that owner)."""
    parts = name.split("/")
    if len(parts) == 2 and cluster.get(PODGROUP, parts[0], parts[1]) is not None:
        return name
    if len(parts) == 2 and any(pod_facts(p).job == name for p in cluster.list(POD, parts[0])):
        return name         # a gang of another API (an upstream or KAI PodGroup, a Workload's)
    if len(parts) == 2:
        pod = cluster.get(POD, parts[0], parts[1])
        if pod is not None:
            facts = pod_facts(pod)
            if facts.gang.source in _OTHER_APIS:
                return facts.job
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
        raise InputError(f"no PodGroup made for {parts[-2]} {owner} in namespace {namespace}"
                         f"{_did_you_mean(cluster, name)}")
    raise InputError(f"no PodGroup, pod or workload {name} (a workload is KIND/NAME, "
                     f"e.g. pytorchjob/bert){_did_you_mean(cluster, name)}")


def _did_you_mean(cluster: MemoryCluster, name: str) -> str:
    """The closest PodGroup, pod and workload names: a workload of the very name first
    (`research/big-pretrain` -> `pytorchjob/big-pretrain`), then the most alike."""
    groups = cluster.list(PODGROUP)
    workloads = sorted({f"{str(ref.get('kind', '')).lower()}/{ref.get('name')}"
                        for pg in groups for ref in pg["metadata"].get("ownerReferences") or ()
                        if ref.get("kind") and ref.get("name")})
    names = [*(f"{o['metadata'].get('namespace')}/{o['metadata']['name']}"
               for o in (*groups, *cluster.list(POD))), *workloads]
    same = [w for w in workloads if w.split("/")[-1] == name.split("/")[-1]]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    picks = list(dict.fromkeys([*same, *close]))[:3]
    return f"; did you mean {' or '.join(picks)}?" if picks else ""


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
    if info.usage is not None and info.usage.normalized:
        # Fair share with memory: what the Queue's status says it used over the window.
        used_over = ", ".join(f"{name} {value:.2f}" for name, value in info.usage.normalized)
        lines.append(f"    usage over the window (share of what the cluster offered): {used_over}")
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
        # Each node's GPUs, one by one, where some are shared or the pod asks for a share.
        shows = task.gpu is not None or bool(ssn.cluster.gpus)
        return [line for reason, names in reasons.items() for name in names
                for line in [f"    {name}: {reason}",
                             *(gpu_lines(ssn, NodeName(name), "      ") if shows else [])]]
    return [f"    {len(names)} node(s): {reason} (e.g. {', '.join(names[:3])})"
            for reason, names in sorted(reasons.items(), key=lambda kv: -len(kv[1]))]


def gpu_lines(ssn: Session, node: NodeName, indent: str) -> list[str]:
    """A node's GPUs, each shared one with what it holds and by whom
    ("gpu-0: 0.75 used by 2 pods"), then those whole-GPU pods hold, then the
    free ones. The numbers are positions in this list, not the GPUs'
    indices on the node (which only the device plugin knows)."""
    cluster = ssn.cluster
    gpus = NodeGpus.of(cluster.nodes[node].spec)
    if not gpus.count:
        return []
    devices = sorted(cluster.gpus.on(node).values(), key=lambda d: d.group)
    col = cluster.table.dim_index.get(GPU)
    row = cluster.table.index[node]
    used = cluster.table.amount(col, cluster.table.used[row, col]) if col is not None else 0.0
    holds = sum(1 for d in devices if d.whole_gpu() is not None and d.whole_gpu() is not WholeGpu.PIPELINED)
    whole = max(int(round(used)) - holds, 0)
    lines = []
    for i, device in enumerate(devices):
        share = device.taken_now / device.units
        pods = device.holders()
        names = ", ".join(f"{key} {units / device.units:.3g}" + ("" if how == "live" else f" ({how})")
                          for key, units, how in pods)
        what = f"{share:.3g} used by {len(pods)} pod{'s' if len(pods) != 1 else ''}"
        if gpus.memory:
            what += f" ({device.taken_now} of {device.units} MiB)"
        if names:
            what += f": {names}"
        if device.reservation is None:
            what += "; no reservation pod yet"
        elif device.orphaned():
            what += f"; its reservation pod {device.reservation} is being deleted"
        lines.append(f"{indent}gpu-{i} (shared, {device.group}): {what}")
    first = len(devices)
    if whole:
        lines.append(f"{indent}{_span(first, whole)}: whole, held by pods that ask for nvidia.com/gpu")
    free = gpus.count - first - whole
    if free > 0:
        lines.append(f"{indent}{_span(first + whole, free)}: free")
    return lines


def _span(first: int, count: int) -> str:
    return f"gpu-{first}" if count == 1 else f"gpu-{first}..{first + count - 1}"
def _subgroup_state(job: JobInfo) -> str | None:
    """Which subtree of the gang's subgroups is short, in numbers: pods
    placed or running of each subgroup's minimum, and how many exist."""
    if not job.spec.subgroups:
        return None
    have = job.leaf_counts(READY_STATUSES)
    if job.tree.met(have):
        return None
    return job.tree.shortfall(have, job.alive_counts())


def _gang_lines(ssn: Session, job: JobInfo, fields: dict[str, Any]) -> list[str]:
    """The pods that must be placed together (the missing part of minMember,
    in the order allocate places them), how many of them each node could hold
    on its own and what runs out there first, and the shortfall in total."""
    table = ssn.cluster.table
    if job.minimum_met(READY_STATUSES):
        return []
    tasks = ssn.minimum_tasks(job, [t for t in job.tasks.values()
                                    if t.status is TaskStatus.PENDING])
    if not tasks or not len(table):
        return []
    vectors = [table.vector(t.resreq) for t in tasks]
    masks: dict[Any, np.ndarray] = {}
    for t in tasks:     # all filters but resources, once per kind of pod
        if (t.resreq, t.placement) not in masks:
            masks[(t.resreq, t.placement)] = ssn.static_mask(t)
    allowed = [masks[(t.resreq, t.placement)] for t in tasks]
    per_node: list[dict[str, Any]] = []
    lines = [f"  the gang as the scheduler tried it: {len(tasks)} pod(s) to place together "
             f"(minMember {job.min_member}, {job.ready_count()} placed already)"]
    held_total, eligible = 0, []
    by_reason: dict[str, list[str]] = {}
    for row, name in enumerate(table.names):
        runs_out: list[dict[str, Any]] = []
        if not any(mask[row] for mask in allowed):
            reason = "could hold none: " + (ssn.explain_node(tasks[0], name) or "filtered out")
            refusal = ssn.explanation.refusal(tasks[0], NodeName(name))
            per_node.append({"node": name, "holds": 0,
                             "code": refusal.code.value if refusal else None,
                             "filter": refusal.filter if refusal else None, "runsOut": []})
        else:
            eligible.append(row)
            if any(t.gpu is not None for t in tasks):
                held, reason = _node_holds_shares(ssn, name, tasks, [m[row] for m in allowed])
            else:
                held, reason = _node_holds(table, row, vectors, [m[row] for m in allowed],
                                           runs_out)
            held_total += held
            per_node.append({"node": name, "holds": held, "code": None, "filter": None,
                             "runsOut": runs_out})
        by_reason.setdefault(reason, []).append(name)
    if len(table) <= MAX_NODES:
        lines += [f"    {name}: {reason}" for row, name in enumerate(table.names)
                  for reason, names in by_reason.items() if name in names]
    else:
        lines += [f"    {len(names)} node(s): {reason} (e.g. {', '.join(names[:3])})"
                  for reason, names in sorted(by_reason.items(), key=lambda kv: -len(kv[1]))]
    could = min(held_total, len(tasks))
    fields.update({"pods": len(tasks), "couldHold": could, "short": len(tasks) - could,
                   "nodes": per_node if len(table) <= MAX_NODES else None, "resources": []})
    if could >= len(tasks):
        lines.append(f"  in total: the nodes could hold all {len(tasks)} pods; "
                     "room on the nodes is not what it waits for")
        return lines
    lines.append(f"  in total: the nodes could hold {could} of the {len(tasks)} pods: "
                 f"{len(tasks) - could} short")
    if any(t.gpu is not None for t in tasks):
        lines.append("    too few GPUs with room for their shares (each node's GPUs are listed "
                     "with its pods below)")
    else:
        lines.extend(_shortfall(table, np.sum(vectors, axis=0), eligible, fields["resources"]))
    return lines


def _node_holds_shares(ssn: Session, node: NodeName, tasks: list[TaskInfo],
                       allowed: list[bool]) -> tuple[int, str]:
    """How many of the pods (in order) this node alone takes, their shares of
    GPUs included: placed one after another as a statement would, then undone."""
    stmt = ssn.statement()
    held = 0
    reason = ""
    try:
        for task, ok in zip(tasks, allowed, strict=True):
            if not ok:
                continue
            why = ssn.explain_node(task, node)
            if why is not None:
                reason = why
                break
            stmt.pipeline(task, node)
            held += 1
    finally:
        stmt.discard()
    if not reason:
        return held, f"could hold all {held} of them"
    return held, f"could hold {held if held else 'none'} of them; then {reason}"


def _node_holds(table: Any, row: int, vectors: list[np.ndarray],
                allowed: list[bool], runs_out: list[dict[str, Any]]) -> tuple[int, str]:
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
            runs_out.extend({"resource": table.dims[d],
                             "free": _number(table.dims[d], table.amount(d, free[d])),
                             "perPod": _number(table.dims[d], table.amount(d, vector[d]))}
                            for d in map(int, short))
            out = "; ".join(
                f"{table.dims[d]} runs out first ({amount(d, free[d])} free, "
                f"{amount(d, vector[d])} per pod" + (f": {amount(d, room[d])} left)" if held else ")")
                for d in map(int, short))
            return held, f"could hold {held if held else 'none'} of them; {out}"
        room = room - vector
        held += 1
    return held, f"could hold all {held} of them"


def _shortfall(table: Any, need: np.ndarray, rows: list[int],
               fields: list[dict[str, Any]]) -> list[str]:
    """Per resource the gang needs more of than the nodes that could take it
    hold in all: "needs 4 nvidia.com/gpu on 2 nodes holding 1 each: 2 short"."""
    free = np.maximum(table.future[rows], 0.0) if rows else np.zeros((0, len(table.dims)))
    lines = []
    for d, name in enumerate(table.dims):
        total = float(free[:, d].sum())
        if need[d] <= total + EPSILON:
            continue
        amount = functools.partial(_amount, table, d, name)
        fields.append({"resource": name, "need": _number(name, table.amount(d, need[d])),
                       "free": _number(name, table.amount(d, total)), "nodes": len(rows),
                       "short": _number(name, table.amount(d, need[d] - total))})
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
