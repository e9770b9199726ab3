"""Capacity an autoscaler provisioned for a gang, held for it while the
booking lasts, so that no other gang takes the nodes bought for it.

A ProvisioningRequest names no nodes: it answers Provisioned, and nodes
appear. So the booked nodes are told apart by a rule: the Nodes created after
the request (in a later second: timestamps have no finer grain, and no
autoscaler brings a node up within the second it was asked) that the gang's
pods may use (they pass its pods' node rules:
selectors, affinity, taints, as the request's PodTemplates do). On them, room
for as many of the gang's still-needed pods as the request counts is held,
largest first, each on the node it fits most tightly. It is held as room for
a starving gang is: other gangs may use those nodes only beyond it.

The rule is read afresh every session from the cluster's objects, so a
restarted scheduler holds the same. It lasts while the request says
Provisioned and the autoscaler's booking runs (BOOKING after Provisioned),
and ends as the gang is placed (allocate releases held room then, and the
autoscale action deletes the request). Its limits: a node another autoscaler
or an operator adds meanwhile, matching the gang's pods, may be held instead
of a bought one; and while several provisioned gangs could use the same new
nodes, the oldest request is served first.
"""
from __future__ import annotations

import numpy as np

from kaisched.api.clock import from_rfc3339
from kaisched.api.job import JobInfo
from kaisched.api.node import tightest
from kaisched.api.provisioning import CapacityRequest, CapacityState
from kaisched.framework.session import Session

BOOKING = 600.0     # seconds cluster-autoscaler books provisioned capacity for


def apply_bookings(ssn: Session) -> None:
    """Hold room on the nodes provisioned for each gang whose request says
    Provisioned, oldest request first (each gang under its own guard)."""
    booked = sorted((r for r in ssn.cluster.capacity_requests.values()
                     if r.state is CapacityState.PROVISIONED and ssn.now - r.since < BOOKING),
                    key=lambda r: (r.creation, r.key))
    if not booked:
        return
    nodes, table = ssn.cluster.nodes, ssn.cluster.table
    created = np.fromiter((from_rfc3339(nodes[name].spec.created) or 0.0 for name in table.names),
                          dtype=np.float64, count=len(table))
    usable = ssn.cluster.usable_nodes()
    weights = table.weights()
    for request in booked:
        job = ssn.cluster.jobs.get(request.job)
        if job is not None and job.key not in ssn.starving.rooms:
            fresh = np.flatnonzero((created > request.creation) & usable)
            if len(fresh):
                ssn.decide(job, _book, ssn, request, job, fresh, weights)


def _book(ssn: Session, request: CapacityRequest, job: JobInfo, fresh: np.ndarray,
          weights: np.ndarray) -> None:
    """Room on the fresh rows (usable, created after the request) for as
    many of the gang's still-needed pods as the request counts."""
    table = ssn.cluster.table
    # What is left on them (less room held for others), as the gang packs.
    free = table.future[fresh] - ssn.starving.total[fresh]
    needed = ssn.minimum_tasks(job, ssn.pending(job))
    vecs = {t.key: table.vector(t.resreq) for t in needed}
    room = np.zeros(table.alloc.shape)     # zeroed lazily: only its rows are written
    taken: list[int] = []
    placed = 0
    for task in sorted(needed, key=lambda t: (-float((vecs[t.key] / weights).sum()), t.key)):
        if placed >= request.pods:
            break
        vec = vecs[task.key]
        allowed = np.flatnonzero(ssn.static_mask(task)[fresh])
        found = tightest(free[allowed], vec, weights)
        if found is None:
            continue
        best = allowed[found]
        free[best] -= vec
        room[fresh[best]] += vec
        taken.append(int(fresh[best]))
        placed += 1
    if placed:
        ssn.starving.reserve(job.key, room, np.unique(taken))
