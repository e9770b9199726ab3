"""The status kaisched writes on each Queue, built from a session's numbers.

A pure function of the queues, the jobs as the session leaves them, and the
fair shares and allocations the proportion plugin computed; no I/O.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import networkx as nx

from kaisched.api.job import JobInfo
from kaisched.api.queue import ROOT, Amounts, QueueInfo, QueueStatus
from kaisched.api.resource import CPU, MEMORY, PODS
from kaisched.api.types import QueueName, TaskStatus

_ALLOCATED, _BINDING, _BOUND, _RUNNING, _SUCCEEDED, _PENDING, _PIPELINED = (
    TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING,
    TaskStatus.SUCCEEDED, TaskStatus.PENDING, TaskStatus.PIPELINED)


def canonical(name: str, value: float) -> float:
    """The amount as a quantity can carry it: whole millicores (cpu is held in
    millicores) and bytes, thousandths of anything else (a GPU may be split)."""
    if name == CPU or name == MEMORY or name.startswith(("ephemeral-storage", "hugepages")):
        return float(round(value))
    return round(value * 1000) / 1000


def amounts(values: Mapping[str, float], names: Iterable[str]) -> Amounts:
    return tuple(sorted((n, canonical(n, values.get(n, 0.0))) for n in set(names) if n != PODS))


def job_state(job: JobInfo) -> str | None:
    """running (its gang is met and some pod runs or binds), pending (it waits
    for room), or None (done, or nothing of it left to place). Read from the
    job's counts by status: this runs for every job, every cycle."""
    get = job.totals().get
    active = get(_RUNNING, 0) + get(_BOUND, 0) + get(_ALLOCATED, 0) + get(_BINDING, 0)
    if active and active + get(_SUCCEEDED, 0) >= job.spec.min_member:
        return "running"
    return "pending" if get(_PENDING, 0) or get(_PIPELINED, 0) else None


def queue_statuses(queues: Mapping[QueueName, QueueInfo], tree: nx.DiGraph,
                   jobs: Iterable[JobInfo],
                   fair_share: Mapping[QueueName, Mapping[str, float]],
                   allocated: Mapping[QueueName, Mapping[str, float]]) -> dict[QueueName, QueueStatus]:
    """Every queue's status. A parent queue counts its children's jobs; its
    allocation already includes theirs. Amounts cover every resource the queue
    has a fair share, quota or use of (zeros included), limits only where set."""
    # Jobs by (queue, state) first: a big cluster has many jobs and few queues,
    # and this runs every cycle.
    tally: dict[tuple[QueueName, str | None], int] = {}
    for job in jobs:
        key = (job.spec.queue, job_state(job))
        tally[key] = tally.get(key, 0) + 1
    counts = {"running": dict.fromkeys(queues, 0), "pending": dict.fromkeys(queues, 0)}
    for (leaf, state), count in tally.items():
        if state is None or leaf not in queues:
            continue        # done, or a job of a queue that does not exist: counted nowhere
        for name in (leaf, *(a for a in nx.ancestors(tree, leaf) if a != ROOT)):
            counts[state][name] += count
    out = {}
    for name, queue in queues.items():
        fair, used = fair_share.get(name, {}), allocated.get(name, {})
        names = {*fair, *queue.quota.names(), *(n for n, v in used.items() if v)}
        out[name] = QueueStatus(
            allocated=amounts(used, names),
            fair_share=amounts(fair, names),
            quota=amounts(queue.quota.as_dict(), names),
            limit=amounts(dict(queue.limits), (n for n, _ in queue.limits)),
            running_jobs=counts["running"][name],
            pending_jobs=counts["pending"][name],
        )
    return out
