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

import attrs
import numpy as np

from kaisched.api.job import JobInfo
from kaisched.api.node import NodeSpec
from kaisched.api.podindex import present
from kaisched.api.task import TaskInfo
from kaisched.api.types import Blocker, JobKey, NodeName, PodKey, TaskStatus
from kaisched.api.volumepools import NodeMasks, VolumePools
from kaisched.api.volumes import READ_WRITE_ONCE_POD, BindingMode, ClaimInfo, ClaimKey, PodClaim
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.effects import Prebind, PrebindVolume, SelectClaimNode

IN_USE = "node(s) unavailable due to a ReadWriteOncePod PVC used by another pod"
AFFINITY = "node(s) had volume node affinity conflict"
UNBOUND = "node(s) didn't find available persistent volumes to bind"
LIMITS = "node(s) exceed max volume count"
TOGETHER = 1000.0       # above any node score: room for every pod a shared claim pins


def mounts_claims(task: TaskInfo) -> bool:
    return bool(task.pvcs)


@attrs.frozen(slots=True)
class Decision:
    """An unbound claim decided this session by the first pod placed with it."""
    node: NodeName
    volume: str | None          # the static volume picked; None: provisioned on node
    by: PodKey


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
        self.mask = NodeMasks(self.specs, cluster.domains)
        self.pools = VolumePools(storage, self.mask)     # static volumes, and those picked
        self.decided: dict[ClaimKey, Decision] = {}
        self.users: dict[ClaimKey, dict[PodKey, int]] = {}  # pods on nodes (row), per claim
        self.placed: dict[PodKey, int] = {}                 # tasks counted here, with their row
        self._invalid: dict[JobKey, str | None] = {}
        # Attach limits: per driver, each row's limit (inf: none) and volumes attached.
        self.limit: dict[str, np.ndarray] = {}
        for node, drivers in storage.limits.items():
            row = self.index.get(NodeName(node))
            for driver, count in drivers.items():
                if row is not None:
                    self.limit.setdefault(driver, np.full(len(self.specs), np.inf))[row] = count
        self.attached = {d: np.zeros(len(self.specs)) for d in self.limit}
        for claim, users in storage.users.items():
            for pod, at in users:
                row = self.index.get(at) if at is not None else None
                if row is not None:
                    self._use(claim, pod, row)
        ssn.register(Hook.JOB_VALID, self.job_invalid)
        # Asked only about pods that mount claims: the others keep the cached path.
        # A gang these filters keep off every node waits for its volumes (the
        # pending-gangs metric).
        volumes = Blocker.VOLUMES
        ssn.register(Hook.POD_PREDICATE, self.not_in_use, IN_USE, blocker=volumes, when=mounts_claims)
        ssn.register(Hook.POD_PREDICATE, self.affinity, AFFINITY, blocker=volumes, when=mounts_claims)
        ssn.register(Hook.POD_PREDICATE, self.bindable, UNBOUND, blocker=volumes, when=mounts_claims)
        if self.limit:
            ssn.register(Hook.POD_PREDICATE, self.within_limits, LIMITS, blocker=volumes,
                         when=mounts_claims)
        ssn.register(Hook.POD_ORDER, self.together, when=mounts_claims)
        ssn.register(Hook.ON_ALLOCATE, self._allocated)
        ssn.register(Hook.ON_DEALLOCATE, self._deallocated)
        ssn.register(Hook.PREBIND, self.prebind)

    # -- whether a pod can use its claims at all ----------------------------------------
    def job_invalid(self, job: JobInfo) -> str | None:
        """Asked by several actions: answered once a session (what it reads,
        the pending pods' claims and the storage, does not change in one)."""
        if job.key in self._invalid:
            return self._invalid[job.key]
        why = None
        for task in job.tasks.values():
            if task.pvcs and task.status is TaskStatus.PENDING:
                problem = next(filter(None, (self.problem(task, c) for c in task.pvcs)), None)
                if problem:
                    why = f"pod {task.key}: {problem}"
                    break
        self._invalid[job.key] = why
        return why

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
        """Unbound WaitForFirstConsumer claims not decided yet: a free matching
        volume for each, reachable from the node (as many as it has claims of
        one shape), or provisioning there."""
        if not task.pvcs:
            return None
        open_claims = [c for c in (self.storage.claims.get(r.key) for r in task.pvcs)
                       if c is not None and self._undecided(c)]
        if not open_claims:
            return None
        out = np.ones(len(rows), dtype=bool)
        alike: dict[object, int] = {}
        for claim in open_claims:
            mine = self.pools.prebound(claim)
            if mine is not None:
                found = self.mask(mine.node_affinity)[rows]
            else:
                shape = self.pools.shape(claim)
                alike[shape] = alike.get(shape, 0) + 1
                found = self.pools.reach(claim)[rows] >= alike[shape]
            cls = self.storage.classes.get(self.storage.class_of(claim))
            if cls is not None and cls.provisions:
                found = found | self.mask(cls.allowed_topologies)[rows]
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

    def together(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray | None:
        """A claim decided where its first pod goes pins the gang mates that
        share it to that node: prefer a node with room for all of them, or the
        first pod's choice could leave no room for the rest."""
        if not task.pvcs:
            return None
        job = self.cluster.jobs[task.job]
        mates: dict[PodKey, TaskInfo] = {}
        for ref in task.pvcs:
            claim = self.storage.claims.get(ref.key)
            if claim is None or not self._undecided(claim):
                continue
            for pod, node in self.storage.users.get(ref.key, ()):
                mate = job.tasks.get(pod)
                if node is None and pod != task.key and mate is not None \
                        and mate.status is TaskStatus.PENDING:
                    mates[pod] = mate
        if not mates:
            return None
        table = self.cluster.table
        need = table.vector(task.resreq) + sum(table.vector(m.resreq) for m in mates.values())
        return np.where(table.fits(need, table.future[rows]), TOGETHER, 0.0)

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
                    self.pools.give_back(self.storage.volumes[decision.volume])

    def prebind(self, placed: TaskInfo) -> list[Prebind]:
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
        return [Prebind(tuple(effects), placed.job, why)]

    # -- internals ----------------------------------------------------------------------
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

    def _decide(self, claim: ClaimInfo, node: NodeName, row: int, pod: PodKey) -> None:
        volume = self.pools.pick(claim, row)
        self.decided[claim.key] = Decision(node, volume.name if volume else None, pod)
        if volume is not None:
            self.pools.take(volume, claim.key)

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
