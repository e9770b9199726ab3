"""dra: Dynamic Resource Allocation with structured parameters, as
kube-scheduler's DynamicResources plugin.

A pod naming ResourceClaims goes only to a node where each claim is (or can
be) allocated: its devices free, of the request's class, passing the class's
and the request's CEL selectors, in the count asked (or all of them), under
the claim's matchAttribute constraints. When a pod is placed its claims are
allocated there and reserved for it, as statement operations a gang's
rollback undoes; their status is written before the pod's bind. Nodes whose
devices are already partly taken score higher (packing), so whole nodes stay
free for the next gang. Reservations of pods that are gone or finished are
taken back; a claim reserved by nobody is deallocated, as the resource-claim
controller does.

A claim an upstream PodGroup shares with its pods (its spec.resourceClaims)
is allocated for the first of them placed and reserved for the PodGroup, not
for each pod: the gang's other pods go where that allocation lets them, and
their going away frees nothing (the group holds it until it is gone).

An allocation of devices on one node keeps the claim's pods on that node; of
devices a slice offers to a set of nodes (its node selector: a rack's
fabric), on those nodes; of devices offered everywhere, anywhere.

The filter is asked afresh at each placement (a gang mate's allocation
changes it), only for pods that name claims: with none in the cluster the
plugin registers nothing, and other pods never reach it.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from kaisched.api.draallocator import Eligibility, allocate, leaves
from kaisched.api.dradevices import Allocation, Claim, Consumer, DeviceRequest, DeviceResult
from kaisched.api.drainventory import Devices
from kaisched.api.job import JobInfo
from kaisched.api.task import TaskInfo
from kaisched.api.types import EVICTABLE_STATUSES, Blocker, NodeName, TaskStatus
from kaisched.errors import ConfigError
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import SetClaimStatus
from kaisched.framework.registry import plugin_arguments

UNSATISFIED = "node(s) cannot allocate the pod's ResourceClaims"


def _plain(claim: Claim) -> bool:
    """One request for a count of devices of a class, no constraint: counted, not searched."""
    if len(claim.requests) != 1 or claim.constraints:
        return False
    request = claim.requests[0]
    return not request.alternatives and not request.all


def _unmet(claim: str, name: str, request: DeviceRequest, devices: Devices, have: int,
           need: int) -> str:
    cls = devices.classes.get(request.device_class)
    selectors = [*(cls.selectors if cls else ()), *request.selectors]
    what = f"DeviceClass {request.device_class}" + "".join(
        f", selector {s.expression!r}" for s in selectors)
    if request.all:
        return (f"ResourceClaim {claim} request {name} ({what}, all of them): "
                f"no node has every matching device free")
    return (f"ResourceClaim {claim} request {name} ({what}): no node has {need} matching "
            f"device(s) free (the best has {have})")


class DraPlugin(PluginBase):
    name = "dra"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        arguments = plugin_arguments(arguments, "packWeight")
        weight = arguments.get("packWeight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ConfigError(f"packWeight: expected a number >= 0, not {weight!r}")
        self.weight = float(weight)

    def on_session_open(self, ssn: Session) -> None:
        cluster = ssn.cluster
        self.ssn = ssn
        self.devices: Devices = cluster.devices
        self.active = cluster.claimants() or bool(self.devices.gone)
        if not cluster.claimants():
            return
        self.eligible = Eligibility(self.devices)
        table = cluster.table
        self.rows = self.devices.rows(table.index)
        local = self.rows >= 0
        self.per_row = np.bincount(self.rows[local], minlength=len(table)).astype(np.float64)
        self._by_row: tuple[np.ndarray, np.ndarray] | None = None
        # Per node: devices held, and free devices each request may take,
        # kept as claims move (the devices' watcher), not counted per question.
        self.held_row = np.bincount(self.rows[local & self.devices.taken],
                                    minlength=len(table)).astype(np.float64)
        self.free_counts: dict[DeviceRequest, np.ndarray] = {}
        self.devices.watchers = [self._moved]
        self.labels = [n.spec.labels for n in cluster.nodes.values()]
        # Pods whose room is on its way back (evicted, terminating), and the
        # devices of their claims promised to pods that wait for them (pipelined).
        self.releasing: set[str] = {t.key for job in cluster.jobs.values() for t in job.tasks.values()
                                    if t.claims and t.status is TaskStatus.RELEASING}
        for key, gone in self.devices.gone.items():     # pods gone: their reservations go at close
            self.releasing.update(f"{key.split('/', 1)[0]}/{c.name}" for c in gone if c.is_pod)
        # Pods an eviction could remove: when the session plans evictions, the
        # devices only such pods hold count as freed.
        self.evictable: set[str] = {t.key for job in cluster.jobs.values() for t in job.tasks.values()
                                    if t.claims and t.status in EVICTABLE_STATUSES}
        self.promised: dict[str, list[int]] = {}
        ssn.register(Hook.JOB_VALID, self.job_invalid)
        # Devices are resources: a gang this filter keeps off every node waits for room.
        # While an eviction is planned, devices only evictable pods hold count as freed.
        ssn.register(Hook.POD_PREDICATE, self.fits, UNSATISFIED, blocker=Blocker.RESOURCES,
                     evicting=self.fits_evicting)
        ssn.register(Hook.POD_IDLE, self.free_now)
        ssn.register(Hook.ON_ALLOCATE, self._allocated)
        ssn.register(Hook.ON_DEALLOCATE, self._deallocated)
        ssn.register(Hook.POD_ORDER, self.packing)
        ssn.register(Hook.CLAIMS, self.claim)
        ssn.register(Hook.EXPLAIN, self.explain)

    # -- what a job may not do --------------------------------------------------------
    def job_invalid(self, job: JobInfo) -> str | None:
        """A pending pod's claim that is missing, or can never be allocated."""
        for task in job.tasks.values():
            if not task.claims or task.status is not TaskStatus.PENDING:
                continue
            for key in task.claims:
                claim = self.devices.claims.get(key)
                if claim is None:
                    return f"pod {task.key}: ResourceClaim {key} does not exist"
                if claim.allocation is None:
                    problem = self.eligible.problem(claim)
                    if problem:
                        return f"pod {task.key}: ResourceClaim {key}: {problem}"
                if key not in task.shared and not claim.reserved(task.key) and claim.pods() >= 256:
                    return f"pod {task.key}: ResourceClaim {key} is reserved for 256 pods already"
        return None

    # -- where a pod may go -----------------------------------------------------------
    def fits(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """Nodes where the claims can be allocated once devices of pods that are
        going away are free (the choice is pipelined if it needs them)."""
        if not task.claims:
            return None
        return self._fits(task, rows, self._unavailable(True))

    def fits_evicting(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """fits(), counting as free the devices of pods an eviction could remove."""
        if not task.claims:
            return None
        return self._fits(task, rows, self._unavailable(True, True))

    def free_now(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """Of those, the nodes where the devices are free now."""
        if not task.claims or not self.releasing:
            return None         # no device is on its way back: as fits() said
        return self._fits(task, rows, self.devices.taken)

    def _unavailable(self, future: bool, evicting: bool = False) -> np.ndarray:
        """Devices no claim may take: held by a claim, except (in the future)
        those of claims only pods going away hold, not promised to a waiting
        pod; and, when evictions are planned, those only evictable pods hold."""
        taken = self.devices.taken
        going = self.releasing | self.evictable if evicting else self.releasing
        if not future or not going:
            return taken
        out = taken.copy()
        for i, key in self.devices.holder.items():
            claim = self.devices.claims.get(key)
            if claim is not None and claim.reserved_for and all(
                    c.is_pod and f"{claim.namespace}/{c.name}" in going for c in claim.reserved_for):
                out[i] = False
        for held in self.promised.values():
            out[held] = True
        return out

    def _fits(self, task: TaskInfo, rows: np.ndarray, taken: np.ndarray) -> np.ndarray:
        claims = self.devices.claims
        out = np.ones(len(rows), dtype=bool)
        pending: list[Claim] = []
        names = self.ssn.cluster.table.names
        for key in task.claims:
            claim = claims.get(key)
            if claim is None:
                return np.zeros(len(rows), dtype=bool)
            found = claim.allocation
            if found is not None:
                if found.node is not None or found.terms:
                    out &= np.array([found.admits(names[r], self.labels[r]) for r in rows], dtype=bool)
            else:
                pending.append(claim)
        if not pending or not out.any():
            return out
        if len(pending) == 1 and not self.devices.anywhere:
            quick = self._counted(pending[0], rows, taken)
            if quick is not None:
                return out & quick
        for j in np.flatnonzero(out):
            out[j] = self._allocate(pending, int(rows[j]), taken) is not None
        return out

    def _counted(self, claim: Claim, rows: np.ndarray, taken: np.ndarray) -> np.ndarray | None:
        """For a claim of one plain request: nodes with enough free matching
        devices, counted over the whole inventory at once (None: not plain)."""
        if not _plain(claim):
            return None
        request = claim.requests[0]
        if taken is not self.devices.taken:         # a view of its own: counted for it
            usable = self.eligible.mask(request) & ~taken & (self.rows >= 0)
            return np.bincount(self.rows[usable], minlength=len(self.per_row))[rows] >= request.count
        counts = self.free_counts.get(request)
        if counts is None:
            usable = self.eligible.mask(request) & ~taken & (self.rows >= 0)
            counts = self.free_counts[request] = np.bincount(self.rows[usable],
                                                             minlength=len(self.per_row))
        return counts[rows] >= request.count

    def _moved(self, devices: list[int], taken: bool) -> None:
        """Devices taken or given back: the per-node counts follow."""
        rows = self.rows[devices]
        local = rows >= 0
        if not local.any():
            return
        sign = 1 if taken else -1
        np.add.at(self.held_row, rows[local], sign)
        picked = np.asarray(devices)[local]
        for request, counts in self.free_counts.items():
            hit = self.eligible.mask(request)[picked]
            if hit.any():
                np.add.at(counts, rows[local][hit], -sign)

    def _allocate(self, claims: list[Claim], row: int, taken: np.ndarray) -> list[Claim] | None:
        """The claims allocated on the node at row, one after another (None:
        the node cannot hold them all)."""
        name = self.ssn.cluster.table.names[row]
        if len(claims) == 1 and _plain(claims[0]) and not self.devices.anywhere:
            return self._take_plain(claims[0], row, name, taken)
        candidates = self._on_row(row).tolist()
        labels = self.labels[row]
        candidates += [i for i in self.devices.anywhere if self.devices.devices[i].on_node(name, labels)]
        mine: set[int] = set()
        out = []
        for claim in claims:
            results = allocate(claim, candidates, lambda i: bool(taken[i]) or i in mine,
                               self.eligible)
            if results is None:
                return None
            mine.update(self.devices.index[r.key] for r in results)
            out.append(claim.allocated(self._where(results, name)))
        return out

    def _where(self, results: tuple[DeviceResult, ...], name: NodeName) -> Allocation:
        """Where the claim's pods may run, as kube-scheduler's allocator says it:
        the node, when a device is on it alone; else the nodes of the slice
        selector the devices share; else anywhere. Devices of slices with
        different selectors keep it on the node chosen."""
        devices = [self.devices.devices[self.devices.index[r.key]] for r in results]
        if any(d.node is not None for d in devices):
            return Allocation(results, name)
        selectors = {d.node_terms for d in devices if d.node_terms}
        if not selectors:
            return Allocation(results)
        if len(selectors) == 1:
            return Allocation(results, None, selectors.pop())
        return Allocation(results, name)

    def _take_plain(self, claim: Claim, row: int, name: NodeName,
                    taken: np.ndarray) -> list[Claim] | None:
        """A claim of one plain request: the node's first free matching devices."""
        request = claim.requests[0]
        here = self._on_row(row)
        free = here[self.eligible.mask(request)[here] & ~taken[here]]
        if len(free) < request.count:
            return None
        devices = self.devices.devices
        results = tuple(DeviceResult(request.name, devices[i].driver, devices[i].pool, devices[i].name)
                        for i in free[:request.count].tolist())
        return [claim.allocated(Allocation(results, name))]

    def _on_row(self, row: int) -> np.ndarray:
        """The node-local devices of the node at row (indexed once per session)."""
        if self._by_row is None:
            order = np.argsort(self.rows, kind="stable")
            bounds = np.searchsorted(self.rows[order], np.arange(len(self.per_row) + 1))
            self._by_row = (order, bounds)
        order, bounds = self._by_row
        return order[bounds[row]:bounds[row + 1]]

    def packing(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """Nodes whose devices are partly taken first: whole nodes stay free."""
        if not task.claims or not self.weight:
            return None
        total = np.maximum(self.per_row[rows], 1.0)
        return self.held_row[rows] / total * 100.0 * self.weight

    def explain(self, task: TaskInfo) -> str | None:
        """The first request of the task's claims that no node can meet, with
        its class and selectors; or that each can, but not all on one node."""
        if not task.claims:
            return None
        usable = ~self.devices.taken & (self.rows >= 0)
        pending = []
        for key in task.claims:
            claim = self.devices.claims.get(key)
            if claim is None or claim.allocation is not None:
                continue
            pending.append(key)
            for request in claim.requests:
                best = []
                for name, leaf in leaves(request):
                    mask = self.eligible.mask(leaf)
                    free = np.bincount(self.rows[mask & usable], minlength=len(self.per_row))
                    if leaf.all:
                        every = np.bincount(self.rows[mask & (self.rows >= 0)], minlength=len(self.per_row))
                        have, need = int(((every > 0) & (free == every)).sum()), 1
                    else:
                        have, need = int(free.max(initial=0)), leaf.count
                    if have >= need:
                        break
                    best.append(_unmet(key, name, leaf, self.devices, have, need))
                else:
                    return "; ".join(best)
        if not pending:
            return None
        return (f"ResourceClaim(s) {', '.join(pending)}: each request can be met on some node, "
                f"but not all of them on one (constraints, or devices shared between requests)")

    # -- placing a pod ----------------------------------------------------------------
    def claim(self, task: TaskInfo) -> list[tuple[Claim, Claim]]:
        """The placed pod's claims allocated on its node and reserved for it
        (its PodGroup's shared claims: for the PodGroup)."""
        claims = self.devices.claims
        consumer = Consumer(task.name, task.uid)
        holder = self.ssn.cluster.jobs[task.job].spec.claim_holder if task.shared else None
        found = [claims[key] for key in task.claims]
        row = self.ssn.cluster.table.index[task.node_name]  # type: ignore[index]  # placed: on a node
        waits = task.status is TaskStatus.PIPELINED
        fresh = self._allocate([c for c in found if c.allocation is None], row,
                               self._unavailable(future=waits)) or []
        if len(fresh) != sum(c.allocation is None for c in found):
            raise AssertionError(f"{task.key}: placed where its claims cannot be allocated")
        allocated = {c.key: c for c in fresh}
        if waits:       # devices still held by pods going away: promised to this one
            held = [self.devices.index[r.key] for c in fresh for r in c.allocation.results]  # type: ignore[union-attr]  # fresh: allocated
            self.promised[task.key] = [i for i in held if self.devices.taken[i]]
        moves = []
        for claim in found:
            new = allocated.get(claim.key, claim)
            if holder is not None and claim.key in task.shared:
                if holder not in claim.reserved_for:
                    new = new.reserved_by((*new.reserved_for, holder))
            elif not claim.reserved(task.key):
                new = new.reserved_by((*new.reserved_for, consumer))
            if new != claim:
                moves.append((claim, new))
        return moves

    def _allocated(self, task: TaskInfo) -> None:
        """An eviction undone: the pod holds its devices again."""
        if task.claims and task.status is not TaskStatus.ALLOCATED \
                and task.status is not TaskStatus.PIPELINED:
            self.releasing.discard(task.key)

    def _deallocated(self, task: TaskInfo) -> None:
        """A placement undone (its promise goes), or a pod evicted (its devices
        come back once it is gone)."""
        if not task.claims:
            return
        if task.status is TaskStatus.ALLOCATED or task.status is TaskStatus.PIPELINED:
            self.promised.pop(task.key, None)
        else:
            self.releasing.add(task.key)

    # -- reservations of pods gone -------------------------------------------------------
    def on_session_close(self, ssn: Session) -> None:
        if not self.active:
            return
        self.devices.watchers = []
        for key, gone in sorted(self.devices.gone.items()):
            claim = self.devices.claims.get(key)
            if claim is None:
                continue
            left = tuple(c for c in claim.reserved_for if c not in gone)
            ssn.report(SetClaimStatus(claim.key, claim.uid, claim.api_version,
                                    claim.allocation if left else None, left))

