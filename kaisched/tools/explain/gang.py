"""A gang that does not fit as a whole (each pod would fit on its own), as allocate
tries it: per node, how many of the pods that must go together it could hold and
what runs out first; then the shortfall in total."""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.resource import format_amount
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, NodeName, TaskStatus
from kaisched.framework import Session
from kaisched.tools.explain.fields import MAX_NODES, number


def gang_lines(ssn: Session, job: JobInfo, fields: dict[str, Any]) -> list[str]:
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
                             "free": number(table.dims[d], table.amount(d, free[d])),
                             "perPod": number(table.dims[d], table.amount(d, vector[d]))}
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
        fields.append({"resource": name, "need": number(name, table.amount(d, need[d])),
                       "free": number(name, table.amount(d, total)), "nodes": len(rows),
                       "short": number(name, table.amount(d, need[d] - total))})
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
