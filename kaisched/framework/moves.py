"""The room consolidation made, carried from one session to the next (as
NonStrict holds are): for the pods it moved, which their controller makes
again (under the same name or a new one), on the nodes it chose for them;
and for the job it made room for, on the nodes its tasks were pipelined to.

The scheduler carries them: apply_moves puts them back when a session
opens, before any action runs. The job's pending pods are placed on the
room held for it (pods alike to the ones it was held for), under a statement
kept as the job's hold, which allocate finishes or keeps; what no pod of it
takes yet stays reserved for it, so that no other job takes it. A hold ends
once pods of its job sit on all of its room, or are placed elsewhere (for
moved pods: as many pods made since the move are placed as were moved; for
the job room was made for: none of it waits any more), when the job is gone,
or after HOLD_LIMIT. A moved pod's controller may take a while to make it
again: its room is held meanwhile.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.resource import Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import READY_STATUSES, JobKey, NodeName, PodKey, TaskStatus
from kaisched.framework.effects import CarriedMove
from kaisched.framework.session import Session

HOLD_LIMIT = 300.0      # seconds the room is held for pods that do not come


def apply_moves(ssn: Session, moves: Mapping[JobKey, CarriedMove]) -> None:
    """Put the held room back for each job that has not taken all of it
    (each job's under its own guard: one that raises holds nothing)."""
    for key in sorted(moves):
        hold, job = moves[key], ssn.cluster.jobs.get(key)
        if ssn.now - hold.since >= HOLD_LIMIT or (job is None and not hold.awaited):
            continue
        if job is None:
            _put_back(ssn, key, hold, None)
        else:
            ssn.decide(job, _put_back, ssn, key, hold, job)


def _put_back(ssn: Session, key: JobKey, hold: CarriedMove, job: JobInfo | None) -> None:
    if job is None:
        # Its pods are gone and none is made again yet: the room waits for them.
        slots = list(hold.slots)
        sharers = list(hold.sharers)
        room = _room(ssn, slots)
    else:
        slots = open_slots(job, hold)
        if not slots or placed_elsewhere(ssn, job, hold):
            return          # its pods sit on all of the room, or are placed anyway: done
        sharers = _open_sharers(hold, slots)
        room = _place(ssn, job, slots, sharers)
    ssn.moves.carry(key, hold)      # carried on to the next session
    room = _hold_gpus(ssn, sharers, room)
    if room.any():
        ssn.starving.reserve(key, room)


def hold_of(job: JobInfo, slots: tuple[tuple[NodeName, Resource], ...], since: float,
            awaited: tuple[PodKey, ...] = (), sharers: tuple[TaskInfo, ...] = ()) -> CarriedMove:
    """A hold of this room for the job, as its pods stand now (those already
    on a node of the room take none of it); awaited: the pods it moved;
    sharers: the successors of those sharing GPUs, as placed."""
    nodes = {node for node, _ in slots}
    settled = tuple(sorted(t.key for t in job.tasks.values()
                           if t.node_name in nodes and t.status in READY_STATUSES))
    return CarriedMove(slots, since, settled, awaited, sharers)


def open_slots(job: JobInfo, hold: CarriedMove) -> list[tuple[NodeName, Resource]]:
    """The room no pod of the job has taken yet: each of its pods placed on
    a node of the room since the hold began takes a slot alike to it there."""
    slots = list(hold.slots)
    for task in job.tasks.values():
        if task.status in READY_STATUSES and task.key not in hold.settled \
                and task.node_name is not None:
            found = (task.node_name, task.resreq)
            if found in slots:
                slots.remove(found)
    return slots


def placed_elsewhere(ssn: Session, job: JobInfo, hold: CarriedMove) -> bool:
    """The pods the room is held for are placed, wherever: as many pods of
    the job made since the move run as were moved; or, for the job the
    room was made for, none of it waits."""
    if not hold.awaited:
        return not ssn.pending(job)
    made = sum(1 for t in job.tasks.values()
               if t.status in READY_STATUSES and t.creation >= hold.since)
    return made >= len(hold.awaited)


def _place(ssn: Session, job: JobInfo, slots: list[tuple[NodeName, Resource]],
           sharers: list[TaskInfo]) -> np.ndarray:
    """Place the job's pending pods on the slots alike to them (a sharer on
    the GPUs planned for it, while they have room for it); the room of the
    slots left over (rows x resources of the node table). The sharers'
    successors a pod took are taken out of sharers."""
    table = ssn.cluster.table
    room = _room(ssn, slots)
    if job.key in ssn.holds.held:
        return room             # a NonStrict hold of its own places it
    stmt = ssn.statement()
    for task in ssn.ordered_tasks(job, ssn.pending(job)):
        slot = next((s for s in slots if s[1] == task.resreq), None)
        row = table.index.get(slot[0]) if slot is not None else None
        if slot is None or row is None:
            continue
        vec = table.vector(task.resreq)
        if not ssn.static_mask(task)[row] or not table.fits(vec, table.future[row:row + 1])[0]:
            continue
        planned = next((s for s in sharers if s.node_name == slot[0] and _alike(s, task)), None)
        groups, now = _planned_gpus(ssn, task, planned) if planned is not None else (None, True)
        if planned is not None:
            sharers.remove(planned)
        if now and table.fits(vec, table.idle[row:row + 1])[0] \
                and ssn.free_beyond_resources(task, slot[0]):
            stmt.allocate(task, slot[0], groups)
        else:
            stmt.pipeline(task, slot[0], groups)
        slots.remove(slot)
        room[row] -= vec
    if stmt.ops:
        ssn.holds.put_back(job.key, stmt)
    return room


def _open_sharers(hold: CarriedMove, slots: list[tuple[NodeName, Resource]]) -> list[TaskInfo]:
    """The sharers' successors whose slot no pod of the job has taken yet."""
    left = list(slots)
    out = []
    for successor in hold.sharers:
        slot = (successor.node_name, successor.resreq)
        if slot in left:
            left.remove(slot)
            out.append(successor)
    return out


def _alike(successor: TaskInfo, task: TaskInfo) -> bool:
    """The pending pod asks for the share the successor was planned with."""
    a, b = successor.gpu, task.gpu
    return a is not None and b is not None and \
        (a.fraction, a.memory, a.devices) == (b.fraction, b.memory, b.devices)


def _units(ssn: Session, task: TaskInfo, node: NodeName) -> int | None:
    gpus = ssn.cluster.gpus.gpus(node)
    return task.gpu.units(gpus.memory) if gpus is not None and task.gpu is not None else None


def _planned_gpus(ssn: Session, task: TaskInfo,
                  planned: TaskInfo) -> tuple[tuple[str, ...] | None, bool]:
    """The GPUs planned for the pod, if each still has room for its share
    once pods on their way out are gone (else None: the node's best), and
    whether they have it now."""
    node, share = planned.node_name, planned.gpu
    assert node is not None and share is not None
    units = _units(ssn, task, node)
    devices = ssn.cluster.gpus.on(node)
    found = [devices.get(g) for g in share.groups]
    if units is None or any(d is None or d.free_later < units for d in found):
        return None, True
    return share.groups, all(d is not None and d.free_now >= units for d in found)


def _hold_gpus(ssn: Session, sharers: list[TaskInfo], room: np.ndarray) -> np.ndarray:
    """Hold the part of each GPU planned for a sharer not made again yet (or
    not placed yet) as the planning session did: its successor pipelined
    there, for this session (the session's end undoes it, as every move in
    it); the room it takes so leaves the job's reserved room."""
    table = ssn.cluster.table
    for successor in sharers:
        node = successor.node_name
        assert node is not None and successor.gpu is not None
        row = table.index.get(node)
        pending = successor.evolve(status=TaskStatus.PENDING, node_name=None,
                                   gpu=successor.gpu.ask)
        if row is None or successor.key in ssn.cluster.nodes[node].tasks \
                or _planned_gpus(ssn, pending, successor)[0] is None:
            continue
        vec = table.vector(successor.resreq)
        if not table.fits(vec, table.future[row:row + 1])[0]:
            continue
        ssn.cluster.assign(pending, TaskStatus.PIPELINED, node, successor.gpu.groups)
        room[row] = np.clip(room[row] - vec, 0, None)
    return room


def _room(ssn: Session, slots: list[tuple[NodeName, Resource]]) -> np.ndarray:
    """The slots as room (rows x resources of the node table)."""
    table = ssn.cluster.table
    room = np.zeros_like(table.alloc)
    for node, res in slots:
        row = table.index.get(node)
        if row is not None:
            room[row] += table.vector(res)
    return room
