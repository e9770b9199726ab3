"""The binder applies a session's effects through a ClusterClient.

Inline (workers=0), for replays that must be deterministic: apply() runs each
effect in the caller's thread. Live (workers>=1): one bounded pool of worker
threads and one rate limit for every write. Binds and evictions are taken
first, as the session commits them; PodGroup status, pod conditions and
Events queue behind them, the newer replacing the older for the same object,
so a cycle's decisions never wait for them.

Transient failures are retried with backoff, within a total time budget; a
409 is final (the pod is already bound: retrying cannot help, the scheduler
re-reads it). Before each request the binder checks that this replica still
leads; when it no longer does, what is queued is dropped. Every failure is
reported and each failed bind logged, never swallowed; every bind dropped
unsent is told to the scheduler too (take_unsent), which then no longer
counts its pod as bound: a bind is confirmed, failed or unsent, never lost.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable, Hashable, Protocol, Sequence

import attrs

from kaisched.api.clock import to_rfc3339
from kaisched.api.types import JobKey, PodKey, Reason
from kaisched.api.volumes import SELECTED_NODE
from kaisched.cache.convert import (
    queue_status_dict,
    status_dict,
    upstream_status_dict,
    usage_status_dict,
)
from kaisched.cache.convert.draobjects import allocation_dict, reserved_dict
from kaisched.cache.convert.reservations import reservation_pod, sharer_patch
from kaisched.cluster.client import ClusterClient
from kaisched.cluster.events import event_object, micro_time
from kaisched.cluster.kinds import EVENT, POD, PODGROUP, PV, PVC, QUEUE, kind_for
from kaisched.errors import (
    ApiError,
    ConflictError,
    NotFoundError,
    TransientApiError,
    UnreachableError,
)
from kaisched.framework.effects import (
    VOLUME_EFFECTS,
    AskCapacity,
    Bind,
    Effect,
    Evict,
    PrebindVolume,
    RecordEvent,
    ReleaseGpu,
    Reservation,
    ReserveGpu,
    SelectClaimNode,
    SetClaimStatus,
    SetPodCondition,
    SetPodGroupStatus,
    SetQueueStatus,
    SetQueueUsage,
    ShareGpu,
    WithdrawCapacity,
)
from kaisched.runtime.capacitywrites import ask_capacity, withdraw_capacity
from kaisched.runtime.throttle import Admission, Verdict, WriteThrottle

COMPONENT = "kaisched"
RETRY_BUDGET = 15.0         # seconds one effect may take, retries included
STOP_GRACE = 3.0            # after stop(), retries end this soon

log = logging.getLogger(__name__)

# Decisions, taken first and never coalesced: binds, evictions, and the
# writes a pod's volumes need before its bind.
_URGENT = (Bind, Evict, *VOLUME_EFFECTS)


@attrs.frozen
class Failure:
    effect: Effect
    error: str


@attrs.define
class BindReport:
    applied: list[Effect] = attrs.field(factory=list)
    failed: list[Failure] = attrs.field(factory=list)


class BindObserver(Protocol):
    """Told of every outcome as it happens (metrics count binds as they go)."""

    def applied(self, effect: Effect, seconds: float) -> None:
        """effect is done, seconds after the session decided it."""
        ...

    def failed(self, effect: Effect, error: str) -> None: ...


class RateLimit:
    """A token bucket: qps requests a second on average, burst at once; 0: none."""

    def __init__(self, qps: float = 0.0, burst: int = 0) -> None:
        self.qps = qps
        self.burst = max(burst, 1)
        self._tokens = float(self.burst)
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        if self.qps <= 0:
            return
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait:
            time.sleep(wait)


@attrs.frozen
class _Write:
    effect: Effect
    admission: Admission | None = None
    reported: bool = True           # False: an Event that follows a bind or an eviction
    queued: float = attrs.field(factory=time.monotonic)     # when the session decided it


class Binder:
    def __init__(self, client: ClusterClient, now: Callable[[], float], workers: int = 0,
                 retries: int = 3, backoff: float = 0.2, budget: float = RETRY_BUDGET,
                 sleep: Callable[[float], None] = time.sleep, qps: float = 0.0, burst: int = 0,
                 throttle: WriteThrottle | None = None,
                 leading: Callable[[], bool] | None = None,
                 observer: BindObserver | None = None,
                 halted: Callable[[], bool] | None = None) -> None:
        self.client = client
        self.now = now
        self.workers = workers
        self.retries = retries
        self.backoff = backoff
        self.budget = budget
        self.sleep = sleep
        self.limit = RateLimit(qps, burst)
        self.throttle = throttle
        self.leading = leading
        self.observer = observer
        self.halted = halted        # a stop was asked for (SIGTERM): seen before each effect
        self._cond = threading.Condition()
        self._urgent: collections.deque[_Write] = collections.deque()      # binds, evictions
        self._writes: dict[Hashable, _Write] = {}                          # the rest, by target
        self._busy = 0              # urgent effects being applied
        self._active = 0            # effects of any kind being applied
        self._threads: list[threading.Thread] = []
        self._idle = 0              # workers waiting for an effect
        self._begun: set[JobKey] = set()        # gangs with a bind sent
        self._stopping: float | None = None
        self._closed = False
        self._report = BindReport()
        self._bound: dict[PodKey, str] = {}     # pod -> node, bound since last taken
        self._resync: set[PodKey] = set()       # pods whose bind failed: read them again
        self._unsent: set[PodKey] = set()       # pods whose bind was dropped before it was sent
        # ResourceClaim writes that must land before a pod's bind: the claims
        # per pod, and the newest status decided for each claim.
        self._claims_of: dict[PodKey, list[str]] = {}
        self._claim_status: dict[str, SetClaimStatus] = {}
        self._claims_written: dict[str, SetClaimStatus] = {}    # since last taken
        # A sharer's devices, recorded (and their reservation pods made) just
        # before its bind, in the worker that binds it.
        self._shares: dict[PodKey, ShareGpu] = {}

    @property
    def live(self) -> bool:
        return self.workers >= 1

    # -- handing effects over ------------------------------------------------------
    def apply(self, effects: Sequence[Effect]) -> BindReport:
        """Apply effects and wait for all of them (a replay's cycle, a test's)."""
        for effect in effects:
            self.submit(effect)
        self.wait(writes=True)
        return self.take_report()

    def submit(self, effect: Effect, reported: bool = True) -> None:
        """Queue an effect (live) or apply it now (inline)."""
        admission = None
        if self.throttle is not None and isinstance(
                effect, (SetPodCondition, SetPodGroupStatus, RecordEvent)):
            admission = self.throttle.admit(effect, self.now())
            if admission.verdict is Verdict.SKIP:
                return
        write = _Write(effect, admission, reported)
        if not self.live:
            self._run(write)
            return
        if self._before_bind(effect):
            return
        with self._cond:
            if self._closed or (self._stopping is not None and not self._finishing(effect)):
                self._drop(write)
                return
            if isinstance(effect, _URGENT):
                self._urgent.append(write)
            else:
                self._writes[_target(write)] = write
            self._add_worker()
            self._cond.notify()

    def wait(self, writes: bool = False, cancel: Callable[[], bool] = lambda: False) -> None:
        """Until the binds and evictions (and, with writes, everything) are done,
        or cancel() says to stop waiting."""
        if not self.live:
            return
        with self._cond:
            while (self._urgent or self._busy
                   or (writes and (self._writes or self._active))) and not cancel():
                self._cond.wait(0.05)

    def take_report(self) -> BindReport:
        with self._cond:
            report, self._report = self._report, BindReport()
        return report

    def take_bound(self) -> dict[PodKey, str]:
        """Pods bound since the last call: the cache should show them soon."""
        with self._cond:
            bound, self._bound = self._bound, {}
            if not self._urgent and not self._busy:
                self._begun.clear()     # between cycles, with no bind left: none is mid-gang
        return bound

    def take_resync(self) -> set[PodKey]:
        """Pods whose bind failed: what the cache holds of them may be stale."""
        with self._cond:
            pods, self._resync = self._resync, set()
        return pods

    def take_unsent(self) -> set[PodKey]:
        """Pods whose bind was dropped unsent (the lease lost, a stop): not bound
        by this replica, whatever the session that decided the bind assumed."""
        with self._cond:
            pods, self._unsent = self._unsent, set()
        return pods

    @property
    def idle(self) -> bool:
        """No bind or eviction queued or in flight."""
        with self._cond:
            return not self._urgent and not self._busy

    # -- standing down -----------------------------------------------------------------
    def abandon(self, why: str) -> None:
        """Drop everything queued (this replica lost the lease)."""
        with self._cond:
            dropped = [*self._urgent, *self._writes.values()]
            self._urgent.clear()
            self._writes.clear()
            self._begun.clear()
            self._cond.notify_all()
        for write in dropped:
            self._drop(write)
        if dropped:
            binds = sum(isinstance(w.effect, Bind) for w in dropped)
            log.warning("%s: dropped %d queued binds and %d other writes",
                        why, binds, len(dropped) - binds)

    def _halt(self) -> None:
        """Keep only the binds of gangs already binding."""
        with self._cond:
            first = self._stopping is None
            if first:
                self._stopping = time.monotonic()
            kept = [w for w in self._urgent if self._finishing(w.effect)]
            left = [w for w in self._urgent if not self._finishing(w.effect)]
            left += self._writes.values()
            dropped = len(left)
            self._urgent = collections.deque(kept)
            self._writes.clear()
            for write in left:
                self._drop(write)
            self._cond.notify_all()
        if first or dropped:
            log.info("stopping: finishing %d binds of gangs already binding; %d effects not "
                     "started are left to the next leader", len(kept), dropped)

    def stop(self, timeout: float = 5.0) -> None:
        """Finish only the gangs whose binds already began, then end the workers."""
        self._halt()
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._urgent or self._busy) and time.monotonic() < deadline:
                self._cond.wait(0.05)
            self._closed = True
            for write in self._urgent:
                self._drop(write)
            self._urgent.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _finishing(self, effect: Effect) -> bool:
        return isinstance(effect, Bind) and effect.job in self._begun

    # -- the workers ---------------------------------------------------------------------
    def _add_worker(self) -> None:
        """One more worker when more is queued than idle workers will take, up
        to the count: started as work comes, not all at the first effect (128
        threads take 13 ms to start, which the first bind would wait on)."""
        if (len(self._threads) < self.workers
                and len(self._urgent) + len(self._writes) > self._idle):
            thread = threading.Thread(target=self._work, name=f"binder-{len(self._threads)}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not (self._urgent or self._writes or self._closed):
                    self._idle += 1
                    try:
                        self._cond.wait()
                    finally:
                        self._idle -= 1
                if self._closed:
                    return
                urgent = bool(self._urgent)
                if urgent:
                    write = self._urgent.popleft()
                    self._busy += 1
                    if isinstance(write.effect, Bind):
                        self._begun.add(write.effect.job)
                else:
                    write = self._writes.pop(next(iter(self._writes)))
                self._active += 1
            try:
                if self.leading is not None and not self.leading():
                    self._drop(write)
                    self.abandon("this replica no longer holds the lease")
                elif self.halted is not None and self.halted() and not self._finishing(write.effect):
                    # Stopping: nothing new starts; gangs already binding go on.
                    self._drop(write)
                    self._halt()
                else:
                    self.limit.take()
                    self._run(write)
            finally:
                with self._cond:
                    self._busy -= urgent
                    self._active -= 1
                    self._cond.notify_all()

    # -- one effect ----------------------------------------------------------------------
    def _run(self, write: _Write) -> None:
        effect = write.effect
        error = self._attempt(write)
        if error is None:
            if isinstance(effect, Bind):
                with self._cond:
                    self._bound[effect.pod] = effect.node
                self.submit(RecordEvent("Pod", effect.pod, "Normal", Reason.SCHEDULED.value,
                                        f"Successfully assigned {effect.pod} to {effect.node}"),
                            reported=False)
            elif isinstance(effect, Evict):
                self.submit(RecordEvent("Pod", effect.pod, "Warning", effect.reason,
                                        effect.message), reported=False)
            if write.reported:
                with self._cond:
                    self._report.applied.append(effect)
            if self.observer is not None:
                self.observer.applied(effect, time.monotonic() - write.queued)
            return
        self._forget(write)
        if isinstance(effect, Bind):
            log.warning("bind %s to %s failed: %s", effect.pod, effect.node, error)
            with self._cond:
                self._resync.add(effect.pod)
        elif isinstance(effect, Evict):
            log.warning("eviction of %s failed: %s", effect.pod, error)
        else:
            log.debug("%s failed: %s", effect.__class__.__name__, error)
        if write.reported:
            with self._cond:
                self._report.failed.append(Failure(effect, error))
        if self.observer is not None:
            self.observer.failed(effect, error)

    def _attempt(self, write: _Write) -> str | None:
        """None once applied, else why not: retried while transient, within the
        budget (shorter once stopping)."""
        delay = self.backoff
        deadline = time.monotonic() + self.budget
        unanswered = False      # an attempt may have landed without us hearing so
        for attempt in range(self.retries + 1):
            try:
                self._call(write)
                return None
            except ConflictError as exc:
                if unanswered and self._landed(write.effect):
                    return None     # our own earlier attempt bound it
                return _short(exc)
            except TransientApiError as exc:
                unanswered = True
                limit = deadline if self._stopping is None else min(
                    deadline, self._stopping + STOP_GRACE)
                if attempt == self.retries or time.monotonic() + delay > limit or self._closed:
                    return _short(exc)
                self.sleep(delay)
                delay *= 2
            except ApiError as exc:
                return _short(exc)
        return "not applied"   # pragma: no cover - the loop always returns

    def _landed(self, effect: Effect) -> bool:
        """A bind whose answer was lost, then refused with 409: ours, if the pod
        is on the node we asked for."""
        if not isinstance(effect, Bind):
            return False
        ns, name = effect.pod.split("/", 1)
        try:
            pod = self.client.get(POD, ns, name)
        except ApiError:
            return False
        return pod is not None and (pod.get("spec") or {}).get("nodeName") == effect.node

    def _call(self, write: _Write) -> None:
        effect = write.effect
        if isinstance(effect, Bind):
            ns, name = effect.pod.split("/", 1)
            self._share_first(effect.pod)
            self._claims_first(effect.pod)
            self.client.bind(ns, name, effect.uid, effect.node)
        elif isinstance(effect, ShareGpu):
            self._share(effect)
        elif isinstance(effect, ReserveGpu):
            self._reserve(effect.reservation)
        elif isinstance(effect, ReleaseGpu):
            ns, name = effect.pod.split("/", 1)
            try:
                if effect.kai:      # KAI's own, in its namespace: evicted, as any pod may be
                    self.client.evict(ns, name)
                else:
                    self.client.delete(POD, ns, name)
            except NotFoundError:
                pass                # gone already
        elif isinstance(effect, SetClaimStatus):
            self._write_claim(effect)
        elif isinstance(effect, Evict):
            ns, name = effect.pod.split("/", 1)
            self.client.evict(ns, name)
        elif isinstance(effect, SetPodGroupStatus):
            ns, name = effect.job.split("/", 1)
            if effect.api_version:      # the status subresource of the version it was read in
                self.client.patch_status(kind_for(effect.api_version, "PodGroup"), ns, name,
                                         upstream_status_dict(effect.status))
            else:
                self.client.patch_status(PODGROUP, ns, name, status_dict(effect.status))
        elif isinstance(effect, SetQueueStatus):
            self.client.patch_status(QUEUE, "", effect.queue,
                                     queue_status_dict(effect.status, effect.previous))
        elif isinstance(effect, SetQueueUsage):
            self.client.patch_status(QUEUE, "", effect.queue,
                                     {"usage": usage_status_dict(effect.usage, effect.previous)})
        elif isinstance(effect, SetPodCondition):
            ns, name = effect.pod.split("/", 1)
            pod = self.client.get(POD, ns, name)
            if pod is None:
                return      # gone meanwhile: nothing to say about it
            c = effect.condition
            cond = {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                    "lastTransitionTime": c.last_transition_time}
            status = pod.get("status")
            conditions = status.get("conditions") if isinstance(status, dict) else None
            kept = [x for x in conditions if isinstance(x, dict) and x.get("type") != c.type] \
                if isinstance(conditions, list) else []
            self.client.patch_status(POD, ns, name, {"conditions": kept + [cond]})
        elif isinstance(effect, RecordEvent):
            self._event(effect, write.admission)
        elif isinstance(effect, VOLUME_EFFECTS):
            write_volume(self.client, effect)
        elif isinstance(effect, AskCapacity):
            ask_capacity(self.client, effect)
        elif isinstance(effect, WithdrawCapacity):
            withdraw_capacity(self.client, effect)

    def _event(self, effect: RecordEvent, admission: Admission | None) -> None:
        ns, _, name = effect.key.rpartition("/")      # a Node's key has no namespace
        ns = ns or "default"                            # where cluster objects' Events go
        now = self.now()
        if admission is not None and admission.verdict is Verdict.REPEAT and admission.name:
            # The same Event again: count it on the one written, as kubectl shows it.
            self.client.patch(EVENT, ns, admission.name, {
                "count": admission.count, "lastTimestamp": to_rfc3339(now),
                "series": {"count": admission.count, "lastObservedTime": micro_time(now)}})
            return
        api = PODGROUP.api_version if effect.kind == PODGROUP.kind else "v1"
        ref = {"apiVersion": api, "kind": effect.kind, "name": name}
        if effect.kind != "Node":
            ref["namespace"] = ns
        event = event_object(ref, effect.type, effect.reason, effect.message, COMPONENT, now)
        if admission is not None and admission.count > 1:
            event["count"] = admission.count
        created = self.client.create(event)
        if self.throttle is not None and admission is not None:
            self.throttle.named(admission.target, (created.get("metadata") or {}).get("name", ""))

    # -- ResourceClaims, written before the bind of the pod they are for ------------------
    def _before_bind(self, effect: Effect) -> bool:
        """Hold a claim's status, or a sharer's devices, for its pod's bind to
        write first (True); the newest status decided for a claim is the one
        written."""
        if isinstance(effect, ShareGpu):
            with self._cond:
                self._shares[effect.pod] = effect
            return True
        if not isinstance(effect, SetClaimStatus) or effect.pod is None:
            return False
        with self._cond:
            self._claims_of.setdefault(effect.pod, []).append(effect.claim)
            self._claim_status[effect.claim] = effect
        return True

    def _claims_first(self, pod: PodKey) -> None:
        with self._cond:
            claims = self._claims_of.pop(pod, [])
            writes = [self._claim_status[c] for c in claims if c in self._claim_status]
        for effect in writes:
            self._write_claim(effect)
            with self._cond:
                if self._claim_status.get(effect.claim) is effect:
                    del self._claim_status[effect.claim]

    def _write_claim(self, effect: SetClaimStatus) -> None:
        ns, name = effect.claim.split("/", 1)
        kind = kind_for(effect.api_version, "ResourceClaim")
        self.client.patch_status(kind, ns, name, {
            "allocation": allocation_dict(effect.allocation),
            "reservedFor": reserved_dict(effect.reserved_for) or None})
        with self._cond:
            self._claims_written[effect.claim] = effect

    # -- GPU sharing: reservation pods and what a sharer records -------------------------
    def _share_first(self, pod: PodKey) -> None:
        with self._cond:
            effect = self._shares.get(pod)
        if effect is not None:
            self._share(effect)         # a failure leaves it for the bind's retry
            with self._cond:
                if self._shares.get(pod) is effect:
                    del self._shares[pod]

    def _share(self, effect: ShareGpu) -> None:
        """Each device's reservation pod made first (bound to the node at
        once), then the devices recorded on the sharer."""
        for reservation in effect.reserve:
            self._reserve(reservation)
        ns, name = effect.pod.split("/", 1)
        self.client.patch(POD, ns, name, sharer_patch(effect))

    def _reserve(self, reservation: Reservation) -> None:
        try:
            self.client.create(reservation_pod(reservation))
        except ConflictError:
            pass        # made already (by another sharer of the device, or an earlier try)

    def take_claims(self) -> dict[str, SetClaimStatus]:
        """Claim statuses written since the last call: the cache should show
        them before the next cycle counts their devices free."""
        with self._cond:
            written, self._claims_written = self._claims_written, {}
        return written

    def _forget(self, write: _Write) -> None:
        """A status-like write that was not made: the next one must not wait."""
        if self.throttle is not None and write.admission is not None:
            self.throttle.forget(write.admission.target)

    def _drop(self, write: _Write) -> None:
        """A write dropped before it was sent; a bind's pod is told (take_unsent)."""
        self._forget(write)
        if isinstance(write.effect, Bind):
            with self._cond:
                self._unsent.add(write.effect.pod)


def write_volume(client: ClusterClient, effect: SelectClaimNode | PrebindVolume) -> None:
    """A claim's selected node, or a static volume pre-bound to its claim.
    The volume is read first and written with its resourceVersion: if another
    claim took it meanwhile, the write is refused (and the next session picks
    again) rather than taking it from that claim."""
    ns, name = effect.claim.split("/", 1)
    if isinstance(effect, SelectClaimNode):
        claim = client.get(PVC, ns, name)
        if claim is None:
            raise NotFoundError(f"PersistentVolumeClaim {effect.claim} not found")
        meta = claim.get("metadata") or {}
        selected = (meta.get("annotations") or {}).get(SELECTED_NODE)
        if selected == effect.node:
            return
        if selected or (claim.get("spec") or {}).get("volumeName"):
            raise ConflictError(f"PersistentVolumeClaim {effect.claim} already has a volume "
                                f"or a node ({selected}): not moved to {effect.node}")
        client.patch(PVC, ns, name, {"metadata": {
            "resourceVersion": meta.get("resourceVersion"),
            "annotations": {SELECTED_NODE: effect.node}}})
        return
    volume = client.get(PV, "", effect.volume)
    if volume is None:
        raise NotFoundError(f"PersistentVolume {effect.volume} not found")
    ref = (volume.get("spec") or {}).get("claimRef") or {}
    if ref:
        if (ref.get("namespace"), ref.get("name")) == (ns, name):
            return          # already ours
        raise ConflictError(f"PersistentVolume {effect.volume} was taken by "
                            f"{ref.get('namespace')}/{ref.get('name')} meanwhile")
    claim_ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns,
                 "name": name, **({"uid": effect.claim_uid} if effect.claim_uid else {})}
    client.patch(PV, "", effect.volume, {
        "metadata": {"resourceVersion": (volume.get("metadata") or {}).get("resourceVersion"),
                     "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"claimRef": claim_ref}})


def _target(write: _Write) -> Hashable:
    """What a queued write replaces: the older write to the same object."""
    if write.admission is not None:
        return write.admission.target
    effect = write.effect
    if isinstance(effect, SetPodCondition):
        return ("condition", effect.pod, effect.condition.type)
    if isinstance(effect, SetPodGroupStatus):
        return ("status", effect.job)
    if isinstance(effect, SetQueueStatus):
        return ("queue status", effect.queue)
    if isinstance(effect, SetQueueUsage):
        return ("queue usage", effect.queue)
    if isinstance(effect, SetClaimStatus):
        return ("claim status", effect.claim)
    if isinstance(effect, ReleaseGpu):
        return ("reservation", effect.pod)
    if isinstance(effect, ReserveGpu):
        return ("reservation", effect.reservation.pod)
    if isinstance(effect, AskCapacity):
        return ("capacity", effect.job, effect.name)
    if isinstance(effect, WithdrawCapacity):
        return ("capacity withdrawn", effect.request)
    return ("event", id(write))         # Events unthrottled: every one is written


def _short(exc: ApiError) -> str:
    text = str(exc)
    return text if not isinstance(exc, UnreachableError) else text[:300]
