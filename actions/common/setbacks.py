"""What moved a reservation's start later since the session before.

A reservation's start is a ceiling while the cluster under it stays as it
was; when it changes (a node it held fails or is cordoned, a pod lands on its
nodes that ends later, another gang's reservation takes them), the
reservation is worked out again and its new start is the bound. The gang's
condition says which, read off the cluster: the nodes it held and the pods
that were on them are kept with the reservation."""
from __future__ import annotations

import attrs

from kaisched.api.clock import clock_text
from kaisched.api.types import LIVE_READY_STATUSES
from kaisched.framework import Session
from kaisched.framework.reservation import Reservation

# Starts within this many seconds count as the same (a pod not started yet
# is counted from "now", which moves with every session).
SAME = 1.0


def setback(ssn: Session, before: Reservation, now: Reservation) -> Reservation:
    """now, with the start before and what moved it, when it starts later."""
    if before.start is None or (now.start is not None and now.start <= before.start + SAME):
        return now
    return attrs.evolve(now, was=before.start, moved=_cause(ssn, before))


def _cause(ssn: Session, before: Reservation) -> str:
    nodes = ssn.cluster.nodes
    for name in before.nodes:
        node = nodes.get(name)
        if node is None:
            return f"node {name} is gone"
        if not node.spec.ready:
            return f"node {name} is not ready"
        if node.spec.unschedulable:
            return f"node {name} was cordoned"
    assert before.start is not None
    for name in before.nodes:
        late = sorted((end is not None, end or 0.0, key) for key, task in nodes[name].tasks.items()
                      if key not in before.pods and task.status in LIVE_READY_STATUSES
                      and ((end := task.ends_by(ssn.now)) is None or end > before.start + SAME))
        if late:
            _, end, key = late[0]
            task = nodes[name].tasks[key]
            ends = "has no enforced limit" if task.ends_by(ssn.now) is None \
                else f"ends by {clock_text(end, ssn.now)}"
            return f"pod {key} (priority {task.priority}) came to node {name} and {ends}"
    for name in before.nodes:
        for key, task in sorted(nodes[name].tasks.items()):
            # Its limit counts from its start: while its kubelet has not
            # started it, when it ends moves on with the clock.
            if task.started is None and task.status in LIVE_READY_STATUSES \
                    and (end := task.ends_by(ssn.now)) is not None and end > before.start + SAME:
                return f"pod {key} on node {name} has not started yet (its limit counts from then)"
    for pod in ssn.cluster.foreign:
        if pod.node_name in before.nodes and pod.key not in before.pods and not pod.releasing:
            return f"pod {pod.key} of another scheduler came to node {pod.node_name}"
    for name in before.nodes:
        row = ssn.cluster.table.index[name]
        for other in ssn.starving.reservations:
            if row in ssn.starving.rows_of(other):
                return f"gang {other}, waiting longer, holds node {name} now"
    return "its nodes were chosen again"
