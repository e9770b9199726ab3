"""Consolidation's search: where a pending job's tasks go once running pods
move out of their way. A bounded greedy search, the fewest pods moved first
(FewestMoves):

For each task the job still needs, in task order: a node where it fits as
the cluster stands (room free now, or freed by the plan so far) takes it.
Else room is made on a node by moving pods off it. The candidate nodes are
those where the task would fit once their movable pods were gone, those
needing the fewest moves first (estimated by taking their largest pods
first), of equal ones the node whose first pod in the victim order
(actions/common/movable.py) comes first, at most NODES_TRIED of them; the
first whose moves are as few as estimated is taken, else the one that
moved the fewest. On a node, of the sets of its blocks that free what the
task lacks, the one moving the fewest pods goes, of equal ones the one
whose pods come first in the victim order (actions/common/moveset.py);
beyond its bound, the largest blocks first. Each pod goes with its unit (the
pod alone, or a group disrupted only whole): the unit is evicted and each of
its pods placed again elsewhere (never on the node being cleared, nor inside
the domain a topology-bound job is given), on room free now or freed by the
plan; a set whose units cannot all be placed again is put back and the next
one tried. A node where the task still does not fit is put back as it was
and the next candidate tried; a task no candidate takes fails the plan. At
most `budget` pods move. A share of a GPU has one more kind of candidate: a
shared GPU some of whose sharers moving leaves room for it
(actions/common/sharepart.py); candidates of both kinds are tried by their
estimated moves.

A job that requires a topology domain gets one domain at a time (those
missing the least room first, at most DOMAINS_TRIED): its tasks go inside
it, and the pods moved for them leave it; a subgroup that requires one, the
same, inside the job's.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from actions.common.movable import Movable, protected, unit_of, why_unmovable
from actions.common.moveset import Block, move_sets
from actions.common.sharepart import PartOption, part_options
from kaisched.api.gpudevices import ONE_GPU, WholeGpu
from kaisched.api.job import JobInfo
from kaisched.api.node import EPSILON
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES, Disruption, JobKey, NodeName
from kaisched.framework import Session, Statement
from kaisched.framework.effects import Cause, Preemptor

NODES_TRIED = 8         # nodes cleared, at most, for one task
DOMAINS_TRIED = 4       # domains tried, at most, for a gang that requires one


class FewestMoves:
    """One pending job's plan: build() returns the statement that moves the
    pods and pipelines the job's tasks, or None; moved lists the pods moved."""

    def __init__(self, ssn: Session, job: JobInfo, tasks: Sequence[TaskInfo], movable: Movable,
                 max_pods: int, cooldown: float,
                 taken: Sequence[TaskInfo], verdicts: dict[JobKey, str | None]) -> None:
        self.ssn = ssn
        self.job = job
        self.tasks = list(tasks)
        self.movable = movable
        self.budget = max_pods          # pods the session may move, those taken included
        self.cooldown = cooldown
        self.taken = taken              # moved earlier in this session: max_pods counts them
        self.verdicts = verdicts
        self.moved: list[TaskInfo] = []
        self.protected: dict[JobKey, str] = {}     # jobs in the way kept by their min-runtime
        self._rows = np.arange(len(ssn.cluster.table))

    def build(self) -> Statement | None:
        if not self.room_enough():
            return None         # moving pods makes no room: the cluster lacks it
        required = self.job.spec.topology.required
        for within in self._domains(required) if required else [None]:
            stmt = self.ssn.statement()
            self.moved = []
            if self._place_all(stmt, within):
                return stmt
            stmt.discard()
        self.moved = []
        return None

    # -- the job's tasks -------------------------------------------------------------------
    def _place_all(self, stmt: Statement, within: np.ndarray | None) -> bool:
        """Every task placed, subgroup by subgroup; one that requires a domain
        inside the one it runs in already, else in one domain at a time (the
        least missing first, the pods moved for it leaving the domain). The
        subgroups with a task that fits nowhere as things stand go first: as
        KAI's solver places the job only once its victims are out, a task
        that fits anyway does not take the room a moved pod could have gone
        to."""
        groups: dict[str | None, list[TaskInfo]] = {}
        for task in self.tasks:
            groups.setdefault(task.subgroup, []).append(task)
        seen: dict[tuple[object, ...], bool] = {}

        def fits_now(task: TaskInfo) -> bool:
            like = self.ssn.class_key(task)     # alike tasks get the same answer
            if like not in seen:
                seen[like] = self.ssn.select_node(task, within=within) is not None
            return seen[like]
        ordered = sorted(groups.values(), key=lambda ts: all(fits_now(t) for t in ts)) \
            if len(groups) > 1 else list(groups.values())
        for tasks in ordered:
            key = self._subgroup_key(tasks[0])
            here = self._subgroup_domain(tasks[0])
            choices: list[np.ndarray | None] = [here] if key is None or here is not None \
                else list(self._domains(key, tasks))
            for domain in choices:
                mask = within if domain is None else domain if within is None else within & domain
                mark, count = stmt.checkpoint(), len(self.moved)
                if all(self._place(stmt, task, mask) for task in tasks):
                    break
                stmt.rollback(mark)
                del self.moved[count:]
            else:
                return False
        return self.ssn.job_pipelined(self.job)

    def _subgroup_key(self, task: TaskInfo) -> str | None:
        """The node label the task's subgroup must sit inside one domain of, if any."""
        sg = next((g for g in self.job.spec.subgroups if g.name == task.subgroup), None)
        return sg.topology.required if sg is not None else None

    def _subgroup_domain(self, task: TaskInfo) -> np.ndarray | None:
        """Where the task's subgroup already runs, when it requires a domain."""
        key = self._subgroup_key(task)
        if key is None:
            return None
        there = next((t.node_name for t in self.job.tasks.values()
                      if t.subgroup == task.subgroup and t.node_name is not None), None)
        return self._domain_of(key, there) if there is not None else None

    def _domain_of(self, key: str, node: NodeName | None) -> np.ndarray:
        """The nodes in the node's domain of the key (none, for a node without it)."""
        table = self.ssn.cluster.table
        domains = self.ssn.cluster.domains(key)
        here = domains.ids[table.index[node]] if node in table.index else -1
        return domains.ids == here if here >= 0 else np.zeros(len(table), dtype=bool)

    def _place(self, stmt: Statement, task: TaskInfo, within: np.ndarray | None) -> bool:
        """Pipeline the task where it fits, making room if need be. Its gang
        starts only once the moved pods are gone: no task of it is bound now."""
        ssn = self.ssn
        refusal, rows = ssn.allocatable_on(self.job, task)
        if refusal is not None:
            return False        # its queue's quota or limit: no move helps
        if rows is not None:    # ... but on these nodes
            within = rows if within is None else within & rows
        choice = ssn.select_node(task, within=within)
        if choice is not None:
            stmt.pipeline(task, choice.node)
            return True
        by = Preemptor(task.key, self.job.key, self.job.priority, self.job.queue)
        # Nodes to clear, and for a share shared GPUs to free part of: the
        # fewest moves first (a part first of equal ones: it opens no GPU).
        options: list[tuple[float, int, int, PartOption | None]] = [
            (cost, 1, row, None) for cost, row in self._candidates(task, within)[:NODES_TRIED]]
        if task.gpu is not None:
            costs = dict(zip((p.key for p in self.movable.pods), self._costs().tolist(), strict=True))
            parts = part_options(ssn, task, self.movable.on_row, within, self._movable_now,
                                 lambda p: costs[p.key], self.movable.order.of)
            options += [(o.cost, 0, o.row, o) for o in parts[:NODES_TRIED]]
        best: tuple[int, int, PartOption | None] | None = None      # fewest moved so far
        for cost, _, row, part in sorted(options, key=lambda o: o[:2]):    # stable: rows keep their order
            if best is not None and cost >= best[0] - EPSILON:
                break       # estimated at least as many moves as one already made
            mark, count = stmt.checkpoint(), len(self.moved)
            if self._make_room(stmt, task, row, part, within, by):
                moved = len(self.moved) - count
                if moved <= cost + EPSILON:
                    return True     # as few as estimated: no candidate after it moves fewer
                best = (moved, row, part) if best is None or moved < best[0] else best
            stmt.rollback(mark)
            del self.moved[count:]
        return best is not None and self._make_room(stmt, task, best[1], best[2], within, by)

    def _make_room(self, stmt: Statement, task: TaskInfo, row: int, part: PartOption | None,
                   within: np.ndarray | None, by: Preemptor) -> bool:
        """Clear the node (or part of a shared GPU) and pipeline the task
        there; False (the caller rolls back) when it does not fit then."""
        avoid = within if within is not None else self._rows == row
        cleared = self._clear(stmt, task, row, avoid, by) if part is None \
            else self._move_block(stmt, list(part.pods), np.zeros(0, dtype=bool), row, avoid, by)
        if not cleared:
            return False
        choice = self.ssn.select_node(task, within=self._rows == row)
        if choice is None:
            return False
        stmt.pipeline(task, choice.node)
        return True

    def _candidates(self, task: TaskInfo, within: np.ndarray | None) -> list[tuple[float, int]]:
        """Rows where the task would fit once the pods that might move were
        gone, with their moves, fewest moves first (as estimated: taking
        each row's largest pods first, in what the task lacks there), then
        the row whose first pod in the victim order (of those holding what
        it lacks) comes first, then least missing, then in table order.
        Worked out over all rows at once."""
        table = self.ssn.cluster.table
        vec = self._need(task)
        pods = self.movable
        alive = np.array([self._movable_now(p) for p in pods.pods], dtype=bool)
        rows, vecs = pods.rows[alive], pods.vecs[alive]
        costs, created = self._costs()[alive], pods.created[alive]
        ranks = pods.job_ranks[alive]
        movable = np.zeros_like(table.alloc)
        np.add.at(movable, rows, vecs)
        mask = self.ssn.static_mask(task) & table.fits(vec, table.future + movable)
        if within is not None:
            mask &= within
        lacking = np.clip(vec - table.future, 0, None)              # rows x resources
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(table.alloc > 0, 1.0 / table.alloc, 0.0)
        missing = (lacking * share).sum(axis=1)
        moves = np.where(mask & (missing > 0), np.inf, 0.0)
        first = np.full(len(table), len(pods.pods), dtype=np.int64)   # per row, its first victim's job
        within_job = np.zeros(len(table), dtype=np.int64)
        if len(rows):
            # Each pod's size in what its row lacks; largest first within each row.
            short = lacking[rows] > EPSILON
            size = (vecs * share[rows] * short).sum(axis=1)
            useful = size > 0
            np.minimum.at(first, rows[useful], ranks[useful])
            within_job = self._first_in_job(first, mask, alive, rows, useful)
            order = np.lexsort((-created, -size, rows))     # as _blocks orders them
            rows, vecs, costs = rows[order], vecs[order], costs[order]
            starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
            group = np.repeat(starts, np.diff(np.r_[starts, len(rows)]))
            freed = np.cumsum(vecs, axis=0)
            freed -= (freed - vecs)[group]                          # per row, from its first pod
            spent = np.cumsum(costs)
            spent -= (spent - costs)[group]
            covered = (freed >= lacking[rows] - EPSILON).all(axis=1)
            firsts = np.unique(rows[covered], return_index=True)
            found = rows[covered][firsts[1]]
            moves[found] = np.where(missing[found] > 0, spent[covered][firsts[1]], 0.0)
        ranked = sorted(zip(moves[mask].tolist(), first[mask].tolist(), within_job[mask].tolist(),
                            missing[mask].tolist(), np.flatnonzero(mask).tolist(), strict=True))
        return [(cost, row) for cost, _, _, _, row in ranked if cost != np.inf]

    def _first_in_job(self, first: np.ndarray, mask: np.ndarray, alive: np.ndarray,
                      rows: np.ndarray, useful: np.ndarray) -> np.ndarray:
        """Per row, the place in its job of the row's first victim, where one
        job is first on several rows: its task order decides between them
        (elsewhere 0). rows and useful: of the alive pods, in their order."""
        out = np.zeros(len(first), dtype=np.int64)
        jobs, counts = np.unique(first[mask & (first < len(self.movable.pods))], return_counts=True)
        shared = set(jobs[counts > 1].tolist())
        if not shared:
            return out
        order = self.movable.order
        best: dict[int, int] = {}
        alive_pods = (p for p, a in zip(self.movable.pods, alive.tolist(), strict=True) if a)
        for pod, row, use in zip(alive_pods, rows.tolist(), useful.tolist(), strict=True):
            job = order.job[pod.job]
            if use and job in shared and job == first[row]:
                place = order.of(pod)[1]
                best[row] = min(best.get(row, place), place)
        for row, place in best.items():
            out[row] = place
        return out

    def _movable_now(self, pod: TaskInfo) -> bool:
        current = self.ssn.cluster.jobs[pod.job].tasks.get(pod.key)
        return current is not None and current.status in EVICTABLE_STATUSES \
            and self._may_move(pod)

    def _costs(self) -> np.ndarray:
        """Each pod's estimated moves (see _unit_cost), worked out once per job."""
        per_job: dict[JobKey, float] = {}
        out = []
        for pod in self.movable.pods:
            if pod.job not in per_job:
                per_job[pod.job] = self._unit_cost(pod)
            out.append(per_job[pod.job])
        return np.array(out, dtype=np.float64)

    # -- making room on one node ------------------------------------------------------------
    def _clear(self, stmt: Statement, task: TaskInfo, row: int, avoid: np.ndarray,
               by: Preemptor) -> bool:
        """Move pods off the node until the task fits there: the set of its
        blocks (see _blocks) that moves the fewest pods, of equal ones the
        victims first (see moveset); else (none weighed could all be placed
        again) a block at a time, largest first (a block that frees nothing
        the task lacks is put back)."""
        table = self.ssn.cluster.table
        vec = self._need(task)
        lacking = np.clip(vec - table.future[row], 0, None)
        pods = self._current(self.movable.on_row.get(row, []))
        blocks = self._blocks(pods, row, lacking)
        if self._fewest(stmt, task, row, blocks, lacking, avoid, by):
            return True
        for block in blocks:
            short = vec > table.future[row] + EPSILON
            if not short.any():
                break
            mark, count, before = stmt.checkpoint(), len(self.moved), table.future[row].copy()
            if not self._move_block(stmt, block, short, row, avoid, by) \
                    or not (table.future[row][short] > before[short] + EPSILON).any():
                stmt.rollback(mark)
                del self.moved[count:]
        return bool(table.fits(vec, table.future[row:row + 1])[0])

    def _fewest(self, stmt: Statement, task: TaskInfo, row: int, blocks: list[list[TaskInfo]],
                lacking: np.ndarray, avoid: np.ndarray, by: Preemptor) -> bool:
        """Try the sets of blocks that free what the task lacks, fewest pods
        first; True once one clears the node, else False with nothing moved
        (the caller goes on block by block)."""
        table = self.ssn.cluster.table
        vec = self._need(task)
        order = self.movable.order
        weighed = [Block(i, np.asarray(sum(self.ssn.cluster.freed_by(p) for p in block)),
                         self._pods_moved(block), min(order.of(p) for p in block))
                   for i, block in enumerate(blocks)]
        sets = move_sets(weighed, lacking)
        short = vec > table.future[row] + EPSILON
        for chosen in sets:
            mark, count = stmt.checkpoint(), len(self.moved)
            if all(self._move_block(stmt, blocks[i], short, row, avoid, by) for i in chosen) \
                    and table.fits(vec, table.future[row:row + 1])[0]:
                return True
            stmt.rollback(mark)
            del self.moved[count:]
        return False

    def _pods_moved(self, block: list[TaskInfo]) -> int:
        """The pods moving the block moves: its own, or all of a group that
        moves only whole."""
        jobs = self.ssn.cluster.jobs
        out = 0
        for pod in block:
            job = jobs[pod.job]
            out += job.ready_count() if job.spec.disruption is Disruption.ALL else 1
        return out

    def _move_block(self, stmt: Statement, block: list[TaskInfo], short: np.ndarray, row: int,
                    avoid: np.ndarray, by: Preemptor) -> bool:
        """Move each pod of the block with its unit (those gone with an earlier
        unit skipped); False when one may not move or finds no place."""
        ssn, table = self.ssn, self.ssn.cluster.table
        sharers = len(block) > 1 or block[0].gpu is not None
        for pod in block:
            current = ssn.cluster.jobs[pod.job].tasks.get(pod.key)
            if current is None or current.status not in EVICTABLE_STATUSES:
                continue        # gone with an earlier unit
            if not sharers and not (table.vector(current.resreq)[short] > 0).any():
                return False    # frees nothing the task lacks
            unit = unit_of(ssn, current, self.cooldown, self.verdicts, self.job)
            if unit is None or len(self.taken) + len(self.moved) + len(unit) > self.budget:
                return False
            if ssn.disruptions.refusing(unit) is not None:
                return False    # a PodDisruptionBudget forbids it (the session counts what it moved)
            if not self._move(stmt, unit, avoid, by, row if sharers else None):
                return False
        return True

    def _move(self, stmt: Statement, unit: list[TaskInfo], avoid: np.ndarray,
              by: Preemptor, repack: int | None = None) -> bool:
        """Evict the unit and place each of its pods again outside avoid, all
        or nothing (the caller rolls back a failure). repack: the node whose
        shared GPUs are being emptied; a sharer of it that finds no place
        elsewhere goes onto another of its GPUs with room (fractions packed
        onto fewer GPUs)."""
        released = [stmt.evict(pod, Cause.CONSOLIDATION, by) for pod in unit]
        for pod in released:
            within = ~avoid
            stay = self._stay(pod)
            if stay is not None:
                within &= stay
            choice = self.ssn.select_node(pod.successor(), within=within)
            if choice is not None:
                stmt.move(pod, choice.node)
                continue
            # Another GPU of the node being emptied, last: the room it takes
            # there could have been freed too.
            groups = self._other_gpu(pod) if repack is not None \
                and pod.node_name == self.ssn.cluster.table.names[repack] else None
            if groups is None or pod.node_name is None or self.ssn.select_node(
                    pod.successor(), within=self._rows == repack) is None:
                return False
            stmt.move(pod, pod.node_name, groups)
        self.moved.extend(unit)
        return True

    def _other_gpu(self, pod: TaskInfo) -> tuple[str, ...] | None:
        """Another shared GPU of the sharer's node that its share fits on
        (the fullest), not one being emptied; None if none (or it takes
        several GPUs)."""
        share, node = pod.gpu, pod.node_name
        gpus = self.ssn.cluster.gpus
        if share is None or node is None or share.devices != 1:
            return None
        info = gpus.gpus(node)
        units = share.units(info.memory) if info is not None else None
        if units is None:
            return None
        found = [(device.free_later, group) for group, device in gpus.on(node).items()
                 if group not in share.groups and device.free_later >= units
                 and device.whole_gpu() in (WholeGpu.USED, WholeGpu.PIPELINED) and device.live]
        return (min(found)[1],) if found else None

    def _blocks(self, pods: list[TaskInfo], row: int, lacking: np.ndarray) -> list[list[TaskInfo]]:
        """The node's movable pods in blocks that free room together: a pod
        alone, or every sharer of one shared GPU (its whole GPU is free only
        once they all go; a GPU some pod that may not move shares is left
        out). Largest first: in what they hold of what the task lacks on the
        node, as shares of the node; of equal ones the block of fewer pods,
        then the most recently started (it loses the least work), then by name."""
        table = self.ssn.cluster.table
        devices = self.ssn.cluster.gpus.on(table.names[row]) if self.ssn.cluster.gpus else {}
        alone: list[list[TaskInfo]] = []
        shared: dict[tuple[str, ...], list[TaskInfo]] = {}
        for pod in pods:
            if pod.gpu is not None and pod.gpu.groups:
                shared.setdefault(pod.gpu.groups, []).append(pod)
            else:
                alone.append([pod])
        for groups, sharers in shared.items():
            if all(g in devices and devices[g].sharers == len(sharers) for g in groups):
                alone.append(sharers)
        alloc = table.alloc[row]
        cols = np.flatnonzero((lacking > EPSILON) & (alloc > 0))

        def size(block: list[TaskInfo]) -> float:
            held = sum(self.ssn.cluster.freed_by(p) for p in block)
            return float((np.asarray(held)[cols] / alloc[cols]).sum())
        return sorted(alone, key=lambda b: (-size(b), len(b), -max(p.creation for p in b),
                                            b[0].key))

    # -- helpers ----------------------------------------------------------------------------
    def _current(self, pods: list[TaskInfo]) -> list[TaskInfo]:
        """The pods as the session has them now, without those gone."""
        jobs = self.ssn.cluster.jobs
        found = (jobs[p.job].tasks.get(p.key) for p in pods)
        return [p for p in found if p is not None and p.status in EVICTABLE_STATUSES]

    def _may_move(self, pod: TaskInfo) -> bool:
        """The pod's job may be moved (its unit is asked when it is tried)."""
        if pod.job == self.job.key:
            return False
        verdicts = self.verdicts
        if pod.job not in verdicts:
            verdicts[pod.job] = why_unmovable(self.ssn, self.ssn.cluster.jobs[pod.job], self.cooldown)
        if verdicts[pod.job] is not None or pod.claims:
            return False
        why = protected(self.ssn, self.ssn.cluster.jobs[pod.job], self.job)
        if why is not None:
            self.protected.setdefault(pod.job, why)
        return why is None

    def _unit_cost(self, pod: TaskInfo) -> float:
        """Pods that would move with it: itself, or all of a group that moves
        only whole, shared among the nodes they would leave (moving it clears
        each of its nodes at once)."""
        job = self.ssn.cluster.jobs[pod.job]
        if job.spec.disruption is not Disruption.ALL:
            return 1.0
        nodes = {t.node_name for t in job.tasks.values() if t.status in EVICTABLE_STATUSES}
        return max(job.ready_count(), 1) / max(len(nodes), 1)

    def _stay(self, pod: TaskInfo) -> np.ndarray | None:
        """The nodes a moved pod may go to: inside the domain it is in now,
        for each topology its job (or its subgroup) requires."""
        job = self.ssn.cluster.jobs[pod.job]
        keys = [job.spec.topology.required] + [sg.topology.required for sg in job.spec.subgroups
                                                if sg.name == pod.subgroup]
        mask = None
        for key in filter(None, keys):
            inside = self._domain_of(key, pod.node_name)
            mask = inside if mask is None else mask & inside
        return mask

    def room_enough(self) -> bool:
        """Usable nodes have, in all, the room the tasks need (free now or
        being freed, shared GPUs' spare parts included): moving pods only
        moves room around."""
        table = self.ssn.cluster.table
        need = np.sum([self._ask(t) for t in self.tasks], axis=0)
        usable = self.ssn.cluster.usable_nodes()
        have = table.future[usable].sum(axis=0) + self._spare_shares(usable)
        return bool((have >= need - EPSILON).all())

    def _need(self, task: TaskInfo) -> np.ndarray:
        """What the task needs of a node a plan clears: its requests, and for
        a share of GPUs a whole GPU for each it takes (a plan frees whole
        GPUs; a share that fits on a shared GPU as things stand needs none)."""
        table = self.ssn.cluster.table
        vec = table.vector(task.resreq)
        gpu = table.known_vector(ONE_GPU) if task.gpu is not None else None
        return vec if gpu is None or task.gpu is None else vec + gpu * task.gpu.devices

    def _ask(self, task: TaskInfo) -> np.ndarray:
        """What the task takes in all: its requests and its share of GPUs
        (a gpu-memory share counted as nothing: its part depends on the GPU)."""
        table = self.ssn.cluster.table
        vec = table.vector(task.resreq)
        share = task.gpu
        gpu = table.known_vector(ONE_GPU) if share is not None else None
        if gpu is None or share is None or share.fraction is None:
            return vec
        return vec + gpu * share.fraction * share.devices

    def _spare_shares(self, usable: np.ndarray) -> np.ndarray:
        """The parts of shared GPUs no sharer takes, on the usable nodes, as
        GPUs (a table row)."""
        table = self.ssn.cluster.table
        gpus = self.ssn.cluster.gpus
        gpu = table.known_vector(ONE_GPU) if gpus else None
        spare = np.zeros(len(table.dims))
        if gpu is None:
            return spare
        for node, devices in gpus.devices.items():
            row = table.index.get(node)
            if row is None or not usable[row]:
                continue
            for device in devices.values():
                if device.whole_gpu() in (WholeGpu.USED, WholeGpu.PIPELINED):
                    spare += gpu * max(device.free_later, 0) / device.units
        return spare

    def _domains(self, key: str, tasks: Sequence[TaskInfo] | None = None) -> list[np.ndarray]:
        """The domains of the key to try, least room missing first (the room
        free now, or being freed, against what the tasks need: all of the
        job's, by default)."""
        table = self.ssn.cluster.table
        domains = self.ssn.cluster.domains(key)
        need = np.sum([table.vector(t.resreq) for t in tasks or self.tasks], axis=0)
        free = domains.totals(np.clip(table.future, 0, None))
        with np.errstate(divide="ignore", invalid="ignore"):
            missing = np.where(need > 0, np.clip(need - free, 0, None) / need, 0).sum(axis=1)
        order = sorted(range(len(domains)), key=lambda d: (missing[d], domains.names[d]))
        return [domains.ids == d for d in order[:DOMAINS_TRIED]]
