"""Consolidation for a pending share of a GPU: the part of a shared GPU that
moving some of its sharers would free.

A share that fits on no GPU as they stand need not have a whole GPU freed
for it: when a shared GPU lacks only part of what the share asks (its
fraction, or its MiB), moving some of its sharers off it frees that part,
and the pending share sits beside those that stay -- fewer moves than
emptying a GPU, and one shared GPU fuller rather than a new one opened (as
KAI's consolidation does: it tries victims in turn and keeps the first
arrangement that places the pending pod, shared GPUs first). The sharers
that go are the fewest, and of those the first in KAI's victim order.
"""
from __future__ import annotations

from itertools import combinations
from typing import Callable, Sequence

import attrs
import numpy as np

from kaisched.api.gpudevices import WholeGpu
from kaisched.api.task import TaskInfo
from kaisched.framework import Session

EXHAUSTIVE = 12     # sharers of one GPU, at most, whose every choice is weighed


@attrs.frozen(slots=True)
class PartOption:
    """Moving `pods` (largest first) off shared GPU `group` on row `row`
    frees the part of it a pending share lacks; `cost`: the moves, as
    estimated (a pod's job may have to move whole)."""

    cost: float
    row: int
    group: str
    pods: tuple[TaskInfo, ...]


def part_options(ssn: Session, task: TaskInfo, on_row: dict[int, list[TaskInfo]],
                 within: np.ndarray | None, may_move: Callable[[TaskInfo], bool],
                 cost: Callable[[TaskInfo], float],
                 rank: Callable[[TaskInfo], tuple[int, ...]]) -> list[PartOption]:
    """For a pending share of one GPU: each shared GPU (on a node the task
    may go to, with room for its other requests) that some of its movable
    sharers would leave room on, with the fewest of them (of equal ones,
    those first in the victim order: rank); the cheapest first, then the
    one whose sharers come first in the victim order, then in table order.
    A GPU every sharer would have to leave is not among them (that frees it
    whole: the caller's other way)."""
    share, gpus, table = task.gpu, ssn.cluster.gpus, ssn.cluster.table
    if share is None or share.devices != 1 or not gpus:
        return []
    mask = ssn.static_mask(task) & table.fits(table.vector(task.resreq), table.future)
    if within is not None:
        mask &= within
    out: list[tuple[float, tuple[tuple[int, ...], ...], int, str, tuple[TaskInfo, ...]]] = []
    for node, devices in gpus.devices.items():
        row = table.index.get(node)
        info = gpus.gpus(node)
        if row is None or not mask[row] or info is None:
            continue
        units = share.units(info.memory)
        if units is None or units > info.units:
            continue
        pods = [p for p in _current(ssn, on_row.get(row, [])) if p.gpu is not None and may_move(p)]
        for group, device in devices.items():
            if device.whole_gpu() not in (WholeGpu.USED, WholeGpu.PIPELINED) or device.free_later >= units:
                continue
            here = sorted((p for p in pods if p.key in device.live),
                          key=lambda p: (-device.live[p.key], -p.creation, p.key))
            chosen = _fewest(here, [device.live[p.key] for p in here], units - device.free_later,
                             [rank(p) for p in here])
            if chosen is None or len(chosen) >= device.sharers:
                continue
            first = tuple(sorted(rank(p) for p in chosen))
            out.append((sum(cost(p) for p in chosen), first, row, group, chosen))
    out.sort(key=lambda o: (o[0], o[1], o[2], o[3]))
    return [PartOption(c, row, group, pods) for c, _, row, group, pods in out]


def _fewest(pods: Sequence[TaskInfo], held: Sequence[int], lacking: int,
            ranks: Sequence[tuple[int, ...]]) -> tuple[TaskInfo, ...] | None:
    """The fewest pods that together hold what is lacking (as many as the
    largest first take), of those the ones first in the victim order
    (ranks): every choice of that many, for a GPU of few sharers."""
    freed, count = 0, None
    for i, units in enumerate(held):
        freed += units
        if freed >= lacking:
            count = i + 1
            break
    if count is None:
        return None
    if len(pods) > EXHAUSTIVE:
        return tuple(pods[:count])
    best = min((c for c in combinations(range(len(pods)), count)
                if sum(held[i] for i in c) >= lacking),
               key=lambda c: (sorted(ranks[i] for i in c), c))
    return tuple(pods[i] for i in best)


def _current(ssn: Session, pods: Sequence[TaskInfo]) -> list[TaskInfo]:
    """The pods as the session has them now (a pod moved already is not on its GPU)."""
    jobs = ssn.cluster.jobs
    found = (jobs[p.job].tasks.get(p.key) for p in pods)
    return [p for p in found if p is not None and p.node_name is not None]
