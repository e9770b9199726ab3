"""NonStrict holds (as Koordinator's NonStrict gangs): a NonStrict gang's placements are
kept from one session to the next until it is ready or its waiting time ends.

The scheduler carries them: it puts last session's holds back when a session
opens (apply_holds), before any action runs, and has those that deadlock
released before the session closes (release_deadlocks). So this module sits
above the session and names it; the session only keeps the holds' state
(ssn.holds, kaisched.framework.parts.holds).

Holds of several gangs can block each other — each waits for room another
holds — which Koordinator's design leaves unsolved. Here they form a wait-for graph; a
cycle releases its youngest gang's hold, so the older one can finish.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.types import GangMode, JobKey, TaskStatus
from kaisched.framework.effects import CarriedGang
from kaisched.framework.session import Session

if TYPE_CHECKING:
    import networkx as nx

DEFAULT_WAIT = 600.0    # seconds a NonStrict gang may hold room without starting


def apply_holds(ssn: Session, holds: Mapping[JobKey, CarriedGang]) -> None:
    """Put last session's holds back (ssn.holds) before any action runs, so no
    other job takes their room; an expired hold is dropped and may not re-hold
    now. Each job's under its own guard: one that raises holds nothing."""
    for key in sorted(holds):
        job = ssn.cluster.jobs.get(key)
        if job is not None:
            ssn.decide(job, _put_back, ssn, holds[key], job)


def _put_back(ssn: Session, hold: CarriedGang, job: JobInfo) -> None:
    key, table = job.key, ssn.cluster.table
    if job.spec.mode is not GangMode.NON_STRICT or ssn.job_invalid(job):
        return
    wait = job.spec.wait_time or DEFAULT_WAIT
    if ssn.now - hold.since >= wait:
        ssn.holds.expire(key)
        return
    stmt = ssn.statement()
    for pod, node in hold.tasks:
        task = job.tasks.get(pod)
        row = table.index.get(node)
        if task is None or task.status is not TaskStatus.PENDING or row is None:
            continue
        vec = table.vector(task.resreq)
        if not ssn.static_mask(task)[row] or not table.fits(vec, table.future[row:row + 1])[0] \
                or not ssn.pod_fits(task, node) or not ssn.devices_fit(task, node):
            continue
        if table.fits(vec, table.idle[row:row + 1])[0] and ssn.free_beyond_resources(task, node):
            stmt.allocate(task, node)
        else:
            stmt.pipeline(task, node)
    if stmt.ops:
        ssn.holds.put_back(key, stmt, hold.since)


def hold_of(ssn: Session, job: JobInfo) -> CarriedGang:
    """The job's current placements that are not bound, as a hold to carry on."""
    tasks = tuple(sorted((t.key, t.node_name) for t in job.tasks.values()
                         if t.status in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED)
                         and t.node_name is not None and t.key not in ssn.placed))
    return CarriedGang(tasks, ssn.holds.since(job.key, ssn.now))


def release_deadlocks(ssn: Session) -> None:
    """Drop from the holds to carry on (ssn.holds.carried) the youngest gang
    of every cycle of gangs waiting on each other's holds; before the session
    closes, so that what it says of them is written."""
    if not ssn.holds.carried:
        return
    # Loaded only when some gang holds room: a start before its first bind
    # does not wait for networkx (0.1 s) to load.
    import networkx as nx

    graph = wait_for_graph(ssn, ssn.holds.carried)
    jobs = ssn.cluster.jobs
    while True:
        try:
            cycle = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            return
        members = sorted({u for u, _ in cycle})
        youngest = max(members, key=lambda k: (jobs[k].creation, k))
        others = ", ".join(m for m in members if m != youngest)
        ssn.holds.drop(youngest)
        graph.remove_node(youngest)
        ssn.record_unschedulable(jobs[youngest], (
            f"NonStrict reservations released: they deadlocked with {others}, "
            f"which is older"))


def wait_for_graph(ssn: Session, holds: Mapping[JobKey, CarriedGang]) -> nx.DiGraph:
    """An edge a -> b when a task a still waits for fits where b holds room."""
    table = ssn.cluster.table
    jobs = ssn.cluster.jobs
    held_room: dict[JobKey, dict[int, np.ndarray]] = {}
    for key, hold in holds.items():
        rows: dict[int, np.ndarray] = {}
        for pod, node in hold.tasks:
            row = table.index[node]
            rows[row] = rows.get(row, 0) + table.vector(jobs[key].tasks[pod].resreq)
        held_room[key] = rows
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(holds)
    for a in holds:
        waiting = {(t.resreq, t.placement): t for t in ssn.pending(jobs[a])}
        for b, rows in held_room.items():
            if a == b:
                continue
            for task in waiting.values():
                vec, mask = table.vector(task.resreq), ssn.static_mask(task)
                if any(mask[row] and table.fits(vec, table.future[row:row + 1] + room)[0]
                       for row, room in rows.items()):
                    graph.add_edge(a, b)
                    break
    return graph
