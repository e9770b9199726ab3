"""The text of a queue, of the running jobs min-runtime protects, of the nodes a
pod fits or not, and of a node's GPUs, one line each."""
from __future__ import annotations

from kaisched.api.gpudevices import NodeGpus, WholeGpu
from kaisched.api.job import JobInfo
from kaisched.api.resource import GPU, PODS, Resource, format_amount, format_resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import NodeName, QueueName
from kaisched.cache.convert.queues import queue_status
from kaisched.cluster.kinds import QUEUE
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import Session
from kaisched.framework.effects import Cause
from kaisched.tools.explain.fields import MAX_NODES


def queue_lines(cluster: MemoryCluster, ssn: Session, queue: QueueName) -> list[str]:
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


def protection_lines(ssn: Session, job: JobInfo, most: int = 5) -> list[str]:
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


def node_lines(ssn: Session, task: TaskInfo, fits: str = "fits") -> list[str]:
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
