"""The status kaisched writes on each Queue, built from a session's numbers.

A pure function of the queues, the jobs as the session leaves them, and the
fair shares and allocations the proportion plugin computed; no I/O.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from kaisched.api.clusterinfo import ClusterInfo
from kaisched.api.ledger import job_state
from kaisched.api.queue import ROOT, Amounts, QueueInfo, QueueStatus
from kaisched.api.queuetree import QueueTree
from kaisched.api.resource import CPU, MEMORY, PODS
from kaisched.api.types import QueueName


def canonical(name: str, value: float) -> float:
    """The amount as a quantity can carry it: whole millicores (cpu is held in
    millicores) and bytes, thousandths of anything else (a GPU may be split)."""
    if name == CPU or name == MEMORY or name.startswith(("ephemeral-storage", "hugepages")):
        return float(round(value))
    return round(value * 1000) / 1000


def amounts(values: Mapping[str, float], names: Iterable[str]) -> Amounts:
    return tuple(sorted((n, canonical(n, values.get(n, 0.0))) for n in set(names) if n != PODS))


def job_states(cluster: ClusterInfo) -> dict[tuple[QueueName, str | None], int]:
    """Jobs by (queue, running/pending/None) as the session leaves them: the
    ledger's count from before the session, with the jobs it moved counted again."""
    ledger = cluster.ledger()
    tally = dict(ledger.states)
    for key in cluster.moved:
        entry = ledger.entries.get(key)
        if entry is not None:
            tally[(entry.queue, entry.state)] -= 1
        job = cluster.jobs[key]
        state = (job.queue, job_state(job))
        tally[state] = tally.get(state, 0) + 1
    return tally


def queue_statuses(queues: Mapping[QueueName, QueueInfo], tree: QueueTree,
                   states: Mapping[tuple[QueueName, str | None], int],
                   fair_share: Mapping[QueueName, Mapping[str, float]],
                   allocated: Mapping[QueueName, Mapping[str, float]]) -> dict[QueueName, QueueStatus]:
    """Every queue's status. A parent queue counts its children's jobs; its
    allocation already includes theirs. Amounts cover every resource the queue
    has a fair share, quota or use of (zeros included), limits only where set."""
    counts = {"running": dict.fromkeys(queues, 0), "pending": dict.fromkeys(queues, 0)}
    for (leaf, state), count in states.items():
        if state is None or leaf not in queues:
            continue        # done, or a job of a queue that does not exist: counted nowhere
        for name in (leaf, *(a for a in tree.ancestors(leaf) if a != ROOT)):
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
