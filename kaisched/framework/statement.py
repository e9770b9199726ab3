"""Statement: typed operations on a session, each with its own undo.

Gang all-or-nothing reads as: open a statement, place tasks, then commit
(effects), reserve (keep the room for this session, no binds) or discard
(undo everything, in reverse). checkpoint/rollback undo part of it.

A placed task may need work done before its bind (its volumes bound, its
devices allocated): plugins hand it as Prebind values, which join the statement
beside the allocation, are committed before any bind of the statement (a
gang whose volumes are not bound yet is held, not bound in part), and are
dropped with a reservation or a discard.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import attrs

from kaisched.api.dradevices import Claim
from kaisched.api.task import TaskInfo
from kaisched.api.types import NodeName, PodKey, TaskStatus
from kaisched.framework.effects import Bind, Cause, Evict, Prebind, Preemptor, SetClaimStatus

if TYPE_CHECKING:
    from kaisched.framework.session import Session


class Operation(Protocol):
    def undo(self, ssn: Session) -> None: ...

    def commit(self, ssn: Session) -> None: ...


@attrs.frozen(slots=True)
class AllocateOp:
    task: TaskInfo          # as placed (Allocated)
    previous: TaskInfo      # as it was (Pending)

    def undo(self, ssn: Session) -> None:
        ssn.unassign(self.task, self.previous)

    def commit(self, ssn: Session) -> None:
        node = self.task.node_name
        assert node is not None
        if self.task.job in ssn.binding_waits:
            # Its gang waits for something before binding (volumes being
            # provisioned): the room is held this session, the bind comes later.
            ssn.reservations[self.task.key] = node
            return
        ssn.emit(Bind(self.task.key, self.task.uid, node, self.task.job))
        ssn.placed[self.task.key] = node


@attrs.frozen(slots=True)
class PrebindOp:
    """A plugin's Prebind for an allocated task: its writes go before every
    bind of the statement, since they decide whether the gang waits."""

    prebind: Prebind

    def undo(self, ssn: Session) -> None:
        """Nothing held here: the decisions go with the placement's own undo."""

    def commit(self, ssn: Session) -> None:
        for effect in self.prebind.effects:
            ssn.emit(effect)
        if self.prebind.waiting:
            ssn.wait_for_binding(self.prebind.job, self.prebind.waiting)


@attrs.frozen(slots=True)
class PipelineOp:
    task: TaskInfo          # as placed (Pipelined): waits for releasing room
    previous: TaskInfo

    def undo(self, ssn: Session) -> None:
        ssn.unassign(self.task, self.previous)

    def commit(self, ssn: Session) -> None:
        node = self.task.node_name
        assert node is not None
        ssn.reservations[self.task.key] = node


@attrs.frozen(slots=True)
class EvictOp:
    task: TaskInfo          # as evicted (Releasing)
    previous: TaskInfo
    cause: Cause
    by: Preemptor | None
    detail: str

    def undo(self, ssn: Session) -> None:
        ssn.unrelease(self.task, self.previous)

    def commit(self, ssn: Session) -> None:
        ssn.emit(Evict(self.task.key, self.task.uid, self.task.node_name, self.task.job,
                       self.cause, self.by, self.detail, ssn.moves.successors.get(self.task.key)))
        if self.by is not None:
            ssn.evicted_for(self.by.job)


@attrs.frozen(slots=True)
class MoveOp:
    """A moved pod's successor held on its new node (Pipelined): the pod its
    controller makes again once the evicted one is gone takes the room."""

    task: TaskInfo          # the successor, as placed
    previous: TaskInfo      # the successor, not placed

    def undo(self, ssn: Session) -> None:
        ssn.unassign(self.task, self.previous)
        if self.previous.successor_of is not None:
            ssn.moves.successor_undone(self.previous.successor_of)

    def commit(self, ssn: Session) -> None:
        node, pod = self.task.node_name, self.task.successor_of
        assert node is not None and pod is not None
        ssn.reservations[pod] = node


@attrs.frozen(slots=True)
class ClaimOp:
    """A ResourceClaim allocated or reserved for a placed pod; its status is
    written before the pod's bind."""

    old: Claim
    new: Claim
    pod: PodKey
    pipelined: bool = False     # for a pod that waits for room: nothing is written

    def undo(self, ssn: Session) -> None:
        ssn.cluster.devices.put(self.new, self.old)

    def commit(self, ssn: Session) -> None:
        if self.pipelined:
            return
        new = self.new
        ssn.emit(SetClaimStatus(new.key, new.uid, new.api_version, new.allocation,
                                new.reserved_for, self.pod))


class Statement:
    def __init__(self, ssn: Session) -> None:
        self._ssn = ssn
        self.ops: list[Operation] = []
        self._prebind = False           # some op is a PrebindOp

    def allocate(self, task: TaskInfo, node: NodeName,
                 gpu_groups: tuple[str, ...] | None = None) -> TaskInfo:
        """Place the task on the node (a sharer on the GPUs given, else on
        those the model prefers there)."""
        ssn = self._ssn
        placed = ssn.assign(task, TaskStatus.ALLOCATED, node, gpu_groups)
        if placed.claims:               # most pods name none: no call to find that out
            self._claims(placed)
        self.ops.append(AllocateOp(placed, task))
        if ssn.prebinds:                # some plugin may need work done before binds
            found = ssn.prebind(placed)
            if found:
                for p in found:
                    self.ops.append(PrebindOp(p))
                self._prebind = True
        return placed

    def pipeline(self, task: TaskInfo, node: NodeName,
                 gpu_groups: tuple[str, ...] | None = None) -> TaskInfo:
        placed = self._ssn.assign(task, TaskStatus.PIPELINED, node, gpu_groups)
        self._claims(placed)
        self.ops.append(PipelineOp(placed, task))
        return placed

    def evict(self, task: TaskInfo, cause: Cause, by: Preemptor | None = None,
              detail: str = "") -> TaskInfo:
        released = self._ssn.release(task)
        self.ops.append(EvictOp(released, task, cause, by, detail))
        return released

    def move(self, released: TaskInfo, node: NodeName,
             gpu_groups: tuple[str, ...] | None = None) -> TaskInfo:
        """Hold room on node for the pod an eviction in this statement
        released (its controller makes it again): its successor is pipelined
        there (a sharer on the GPUs given, else on the node's best for it),
        and the eviction says where it goes."""
        assert released.status is TaskStatus.RELEASING, "only an evicted pod moves"
        successor = released.successor()
        placed = self._ssn.assign(successor, TaskStatus.PIPELINED, node, gpu_groups)
        self._ssn.moves.successor_placed(released.key, node)
        self.ops.append(MoveOp(placed, successor))
        return placed

    def _claims(self, placed: TaskInfo) -> None:
        """The placed pod's ResourceClaims, allocated on its node (none: nothing to do)."""
        if placed.claims:
            pipelined = placed.status is TaskStatus.PIPELINED
            for old, new in self._ssn.claim_moves(placed):
                self.ops.append(ClaimOp(old, new, placed.key, pipelined))

    def checkpoint(self) -> int:
        return len(self.ops)

    def rollback(self, mark: int) -> None:
        while len(self.ops) > mark:
            self.ops.pop().undo(self._ssn)

    def discard(self) -> None:
        self.rollback(0)

    def commit(self) -> None:
        """Turn every operation into its effect; the statement is then empty.
        What must precede the binds goes first: it decides whether they wait.
        The effects are handed over together once every operation is done:
        one that raises leaves none of them made (no gang bound in part),
        and the statement whole, for the caller to discard."""
        ssn = self._ssn
        # As Session.together() does, inline: a commit is made per placement.
        out, ssn.effects = ssn.effects, []
        try:
            if self._prebind:
                for op in self.ops:
                    if isinstance(op, PrebindOp):
                        op.commit(ssn)
            for op in self.ops:
                if not (self._prebind and isinstance(op, PrebindOp)):
                    op.commit(ssn)
        except Exception:
            ssn.effects = out
            for op in self.ops:         # what the commits noted of the pods they placed
                if isinstance(op, (AllocateOp, PipelineOp, MoveOp)):
                    key = op.task.successor_of or op.task.key
                    ssn.placed.pop(key, None)
                    ssn.reservations.pop(key, None)
            raise
        made, ssn.effects = ssn.effects, out
        for effect in made:
            out.append(effect)          # (an outbox hands each to the binder)
        self.ops = []
        self._prebind = False

    def reserve(self) -> None:
        """Keep the placements as reservations for this session only: no binds,
        but no later job of this session can take the room. Evictions cannot be
        held back, so any in the statement are committed."""
        for op in self.ops:
            if isinstance(op, AllocateOp):
                node = op.task.node_name
                assert node is not None
                self._ssn.reservations[op.task.key] = node
            elif isinstance(op, (PrebindOp, ClaimOp)):
                pass        # nothing is written for a reservation; its devices stay taken
            else:
                op.commit(self._ssn)
        self.ops = []