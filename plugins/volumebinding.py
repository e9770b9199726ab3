"""volumebinding: where a pod's PersistentVolumeClaims let it go, and what
must be written before it is bound (kube-scheduler's VolumeBinding,
VolumeRestrictions and NodeVolumeLimits).

- A claim that cannot be used at all (missing, being deleted, bound to a
  volume that is gone or bound elsewhere, an unbound Immediate claim, a class
  that does not exist, a ReadWriteOncePod claim another pod runs with) makes
  its job wait, saying so: no node and no eviction could help.
- A bound claim: its volume's node affinity filters the nodes.
- An unbound WaitForFirstConsumer claim: a node passes if a static volume that
  matches (class, size, access modes, mode, selector) can be reached from it,
  or the class provisions there (its allowedTopologies). When the pod is
  placed, the claim is decided for the session (the smallest volume that fits,
  as the PV controller picks, or provisioning on that node), so gang mates and
  other pods see it; the commit writes the decision (the volume's claimRef,
  or the claim's selected-node annotation) and the gang is held, not bound,
  until a later session finds its claims bound.
- CSI attach limits (CSINode allocatable counts) per node and driver.

Everything is registered only when some pod mounts a claim, and every check
answers None at once for a pod that mounts none: such pods pay nothing.
"""
from __future__ import annotations

from typing import Sequence

import attrs
import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.node import NodeSpec
from kaisched.api.placement import HOSTNAME_KEY, SelectorTerm
from kaisched.api.podindex import present
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, JobKey, NodeName, PodKey, TaskStatus
from kaisched.api.volumes import (
    READ_WRITE_ONCE_POD, BindingMode, ClaimInfo, ClaimKey, PodClaim, VolumeInfo,
)
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import PrebindVolume, SelectClaimNode
from kaisched.framework.selection import FILTER_BLOCKERS
from kaisched.framework.statement import PrebindOp

IN_USE = "node(s) unavailable due to a ReadWriteOncePod PVC used by another pod"
AFFINITY = "node(s) had volume node affinity conflict"
UNBOUND = "node(s) didn't find available persistent volumes to bind"
LIMITS = "node(s) exceed max volume count"
# A gang these filters keep off every node waits for its volumes (the pending-gangs metric).
FILTER_BLOCKERS.update(dict.fromkeys((IN_USE, AFFINITY, UNBOUND, LIMITS), Blocker.VOLUMES))


@attrs.frozen(slots=True)
class Decision:
    """An unbound claim decided this session by the first pod placed with it."""
    node: NodeName
    volume: str | None          # the static volume picked; None: provisioned on node
    by: PodKey


@attrs.frozen(slots=True)
class VolumeBindingOp(PrebindOp):
    """The writes a placed pod's claims need, and what its gang then waits for."""
    effects: tuple[SelectClaimNode | PrebindVolume, ...]
    job: JobKey
    waiting: str | None

    def undo(self, ssn: Session) -> None:
        """Nothing held here: the decisions go with the placement's own undo."""

    def commit(self, ssn: Session) -> None:
        for effect in self.effects:
            ssn.emit(effect)
        if self.waiting:
            ssn.wait_for_binding(self.job, self.waiting)


class VolumeBindingPlugin(PluginBase):
    name = "volumebinding"

    def on_session_open(self, ssn: Session) -> None:
        storage = ssn.cluster.storage
        if not storage:
            return              # no pod mounts a claim
        cluster = ssn.cluster
        self.ssn, self.storage, self.cluster = ssn, storage, cluster
        self.specs: list[NodeSpec] = [n.spec for n in cluster.nodes.values()]
        self.index = cluster.table.index
        self._masks: dict[tuple[SelectorTerm, ...], np.ndarray] = {}
        self.decided: dict[ClaimKey, Decision] = {}
        self.taken: dict[str, ClaimKey] = {}                # static volumes picked this session
        self.users: dict[ClaimKey, dict[PodKey, int]] = {}  # pods on nodes (row), per claim
        self.placed: dict[PodKey, int] = {}                 # tasks counted here, with their row
        # Attach limits: per driver, each row's limit (inf: none) and volumes attached.
        self.limit: dict[str, np.ndarray] = {}
        for node, drivers in storage.limits.items():
            row = self.index.get(NodeName(node))
            for driver, count in drivers.items():
                if row is not None:
                    self.limit.setdefault(driver, np.full(len(self.specs), np.inf))[row] = count
        self.attached = {d: np.zeros(len(self.specs)) for d in self.limit}
        for claim, users in storage.users.items():
            for pod, node in users:
                row = self.index.get(node) if node is not None else None
                if row is not None:
                    self._use(claim, pod, row)
        ssn.register(Hook.JOB_VALID, self.job_invalid)
        ssn.register(Hook.POD_PREDICATE, self.not_in_use, IN_USE)
        ssn.register(Hook.POD_PREDICATE, self.affinity, AFFINITY)
        ssn.register(Hook.POD_PREDICATE, self.bindable, UNBOUND)
        if self.limit:
            ssn.register(Hook.POD_PREDICATE, self.within_limits, LIMITS)
        ssn.register(Hook.ON_ALLOCATE, self._allocated)
        ssn.register(Hook.ON_DEALLOCATE, self._deallocated)
        ssn.register(Hook.PREBIND, self.prebind)

    # -- whether a pod can use its claims at all ----------------------------------------
    def job_invalid(self, job: JobInfo) -> str | None:
        for task in job.tasks.values():
            if task.pvcs and task.status is TaskStatus.PENDING:
                for claim in task.pvcs:
                    why = self.problem(task, claim)
                    if why:
                        return f"pod {task.key}: {why}"
        return None

    def problem(self, task: TaskInfo, ref: PodClaim) -> str | None:
        """Why the claim keeps the pod from being placed anywhere, or None."""
        storage = self.storage
        claim = storage.claims.get(ref.key)
        if claim is None:
            if ref.ephemeral:
                return f"waiting for PVC {ref.key} of its ephemeral volume to be created"
            return f"PVC {ref.key} does not exist"
        if claim.problem:
            return f"PVC {ref.key}: {claim.problem}"
        if claim.deleting:
            return f"PVC {ref.key} is being deleted"
        if READ_WRITE_ONCE_POD in claim.access_modes:
            other = next((p for p, node in storage.users.get(ref.key, ())
                          if node is not None and p != task.key), None)
            if other is not None:
                return f"PVC {ref.key} is ReadWriteOncePod and in use by pod {other}"
        if claim.bound:
            volume = storage.volumes.get(claim.volume_name)
            if volume is None:
                return f"PVC {ref.key} is bound to PV {claim.volume_name}, which does not exist"
            if volume.claim != ref.key:
                owner = f"bound to PVC {volume.claim}" if volume.claim else "not bound to it yet"
                return f"PVC {ref.key} is bound to PV {claim.volume_name}, which is {owner}"
            return None
        class_name = storage.class_of(claim)
        cls = storage.classes.get(class_name)
        if class_name and cls is None:
            return f"PVC {ref.key} names StorageClass {class_name}, which does not exist"
        if cls is None or cls.mode is BindingMode.IMMEDIATE:
            binder = f"StorageClass {class_name} binds Immediate" if cls else "it has no StorageClass"
            failed = f"; provisioning failed: {claim.failure}" if claim.failure else ""
            return f"PVC {ref.key} not bound yet ({binder}: the PV controller binds it){failed}"
        return None

    # -- node filters (POD_PREDICATE: asked afresh, None for a pod with no claims) -------
    def not_in_use(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """A ReadWriteOncePod claim another pod placed this session already uses."""
        if not task.pvcs:
            return None
        for ref in task.pvcs:
            claim = self.storage.claims.get(ref.key)
            if claim is not None and READ_WRITE_ONCE_POD in claim.access_modes \
                    and any(p != task.key for p in self.users.get(ref.key, ())):
                return np.zeros(len(rows), dtype=bool)
        return None

    def affinity(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """Bound claims follow their volume; decided ones their decision; a
        claim whose selected node is set waits for its volume there."""
        if not task.pvcs:
            return None
        out = None
        for ref in task.pvcs:
            mask = self._fixed(ref.key)
            if mask is not None:
                out = mask[rows] if out is None else out & mask[rows]
        return out

    def bindable(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """Unbound WaitForFirstConsumer claims not decided yet: a distinct
        matching volume for each, reachable from the node, or provisioning
        there. The same volume is not counted for two claims on one node."""
        if not task.pvcs:
            return None
        open_claims = [c for c in (self.storage.claims.get(r.key) for r in task.pvcs)
                       if c is not None and self._undecided(c)]
        if not open_claims:
            return None
        out = np.ones(len(rows), dtype=bool)
        none = np.zeros(len(rows), dtype=bool)
        used: dict[str, np.ndarray] = {}    # volumes counted for an earlier claim, per row
        for claim in open_claims:
            found = none.copy()
            for volume in self._free_candidates(claim):
                taken = used.get(volume.name, none)
                reach = self.mask(volume.node_affinity)[rows] & ~found & ~taken
                if reach.any():
                    used[volume.name] = taken | reach
                    found |= reach
            cls = self.storage.classes.get(self.storage.class_of(claim))
            if cls is not None and cls.provisions:
                found |= self.mask(cls.allowed_topologies)[rows]
            out &= found
        return out

    def within_limits(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """Each CSI driver's attach limit, counting volumes not on the node yet."""
        if not task.pvcs:
            return None
        out = None
        by_driver: dict[str, list[ClaimKey]] = {}
        for ref in task.pvcs:
            claim = self.storage.claims.get(ref.key)
            driver = self._driver(claim) if claim is not None else ""
            if driver in self.limit:
                by_driver.setdefault(driver, []).append(ref.key)
        for driver, keys in by_driver.items():
            new = np.full(len(self.specs), float(len(keys)))
            for key in keys:
                for row, count in self._rows_of(key).items():
                    if count:
                        new[row] -= 1.0         # already attached there
            fits = (self.attached[driver] + new <= self.limit[driver])[rows]
            out = fits if out is None else out & fits
        return out

    # -- following the session's placements ---------------------------------------------
    def _allocated(self, task: TaskInfo) -> None:
        if not task.pvcs or task.key in self.placed or task.node_name is None:
            return
        row = self.index.get(task.node_name)
        if row is None:
            return
        for ref in task.pvcs:
            claim = self.storage.claims.get(ref.key)
            if claim is not None and self._undecided(claim):
                self._decide(claim, task.node_name, row, task.key)
            self._use(ref.key, task.key, row)

    def _deallocated(self, task: TaskInfo) -> None:
        if task.key not in self.placed or present(self.cluster, task):
            return              # still on its node (evicted: its volumes stay attached)
        row = self.placed[task.key]
        for ref in task.pvcs:
            self._unuse(ref.key, task.key, row)
            decision = self.decided.get(ref.key)
            if decision is not None and decision.by == task.key:
                del self.decided[ref.key]
                if decision.volume is not None:
                    self.taken.pop(decision.volume, None)

    def prebind(self, placed: TaskInfo) -> list[PrebindOp]:
        """The claims' writes this pod's placement made, and what its gang waits for."""
        if not placed.pvcs:
            return []
        effects: list[SelectClaimNode | PrebindVolume] = []
        waiting: list[str] = []
        for ref in placed.pvcs:
            claim = self.storage.claims.get(ref.key)
            if claim is None or claim.bound:
                continue
            decision = self.decided.get(ref.key)
            if decision is not None and decision.volume is not None:
                volume = self.storage.volumes[decision.volume]
                if decision.by == placed.key and volume.claim is None:
                    effects.append(PrebindVolume(volume.name, claim.key, claim.uid, placed.key,
                                                 placed.job))
                waiting.append(f"PVC {claim.key} to be bound to PV {volume.name}")
                continue
            node = claim.selected_node or (decision.node if decision is not None else None)
            if node is None:
                continue
            if decision is not None and decision.by == placed.key and claim.selected_node is None:
                effects.append(SelectClaimNode(claim.key, node, placed.key, placed.job))
            failed = f" (provisioning failed: {claim.failure})" if claim.failure else ""
            waiting.append(f"PVC {claim.key} to be provisioned on node {node}{failed}")
        if not effects and not waiting:
            return []
        why = None
        if waiting:
            more = f" and {len(waiting) - 1} more" if len(waiting) > 1 else ""
            why = (f"placed, to be bound once its volumes are: pod {placed.key} waits for "
                   f"{waiting[0]}{more}")
        return [VolumeBindingOp(tuple(effects), placed.job, why)]

    # -- internals ----------------------------------------------------------------------
    def mask(self, terms: Sequence[SelectorTerm]) -> np.ndarray:
        """Nodes matching any of the terms (all nodes for none), once per term set."""
        key = tuple(terms)
        found = self._masks.get(key)
        if found is None:
            if not key:
                found = np.ones(len(self.specs), dtype=bool)
            else:
                # The kubelet sets the hostname label; nodes written by hand may lack it.
                found = np.array([any(t.matches({HOSTNAME_KEY: s.name, **s.labels}, s.name)
                                      for t in key) for s in self.specs], dtype=bool)
            self._masks[key] = found
        return found

    def _undecided(self, claim: ClaimInfo) -> bool:
        """Unbound, WaitForFirstConsumer, no node selected, not decided this session."""
        if claim.bound or claim.selected_node is not None or claim.key in self.decided:
            return False
        cls = self.storage.classes.get(self.storage.class_of(claim))
        return cls is not None and cls.mode is BindingMode.WAIT

    def _fixed(self, key: ClaimKey) -> np.ndarray | None:
        """The nodes a claim already ties its pods to, or None if it does not."""
        storage = self.storage
        claim = storage.claims.get(key)
        if claim is None:
            return None
        if claim.bound:
            volume = storage.volumes.get(claim.volume_name)
            return self.mask(volume.node_affinity) if volume is not None else None
        decision = self.decided.get(key)
        if decision is not None and decision.volume is not None:
            return self.mask(storage.volumes[decision.volume].node_affinity)
        node = claim.selected_node or (decision.node if decision is not None else None)
        if node is None:
            return None
        out = np.zeros(len(self.specs), dtype=bool)
        row = self.index.get(node)
        if row is not None:
            out[row] = True
        return out

    def _free_candidates(self, claim: ClaimInfo) -> list[VolumeInfo]:
        return [v for v in self.storage.candidates(claim)
                if self.taken.get(v.name, claim.key) == claim.key]

    def _decide(self, claim: ClaimInfo, node: NodeName, row: int, pod: PodKey) -> None:
        volume = next((v for v in self._free_candidates(claim)
                       if self.mask(v.node_affinity)[row]), None)
        self.decided[claim.key] = Decision(node, volume.name if volume else None, pod)
        if volume is not None:
            self.taken[volume.name] = claim.key

    def _driver(self, claim: ClaimInfo) -> str:
        decision = self.decided.get(claim.key)
        if decision is not None and decision.volume is not None:
            return self.storage.volumes[decision.volume].driver
        return self.storage.driver_of(claim)

    def _rows_of(self, key: ClaimKey) -> dict[int, int]:
        """Per row, how many placed pods use the claim there."""
        rows: dict[int, int] = {}
        for row in self.users.get(key, {}).values():
            rows[row] = rows.get(row, 0) + 1
        return rows

    def _use(self, key: ClaimKey, pod: PodKey, row: int) -> None:
        users = self.users.setdefault(key, {})
        if row not in users.values():
            self._attach(key, row, 1.0)
        users[pod] = row
        self.placed[pod] = row

    def _unuse(self, key: ClaimKey, pod: PodKey, row: int) -> None:
        users = self.users.get(key, {})
        users.pop(pod, None)
        self.placed.pop(pod, None)
        if row not in users.values():
            self._attach(key, row, -1.0)
        if not users:
            self.users.pop(key, None)

    def _attach(self, key: ClaimKey, row: int, sign: float) -> None:
        claim = self.storage.claims.get(key)
        driver = self._driver(claim) if claim is not None else ""
        if driver in self.attached:
            self.attached[driver][row] += sign
