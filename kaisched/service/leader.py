"""Leader election on a coordination.k8s.io Lease, as client-go does it, so
two replicas never schedule at once.

The Lease is renewed on its own thread every retry period, whatever the
scheduling cycle is doing. A leader that has not renewed within the renew
deadline (shorter than the lease duration) stops leading at once -- its cycle
and its binder check is_leading() before every step -- and says so. A
candidate takes the Lease only after it has seen the holder's record unchanged
for a whole lease duration on its own clock (so clock skew between replicas
does not matter), or at once when the holder released it. Writes are a
compare-and-swap on the Lease's resourceVersion. Time comes from the injected
clock.
"""
from __future__ import annotations

import logging
import threading
import time

import attrs

from kaisched.api.clock import Clock
from kaisched.cluster.client import ClusterClient, Obj
from kaisched.cluster.events import micro_time
from kaisched.cluster.kinds import LEASE
from kaisched.errors import (
    ApiError,
    ConflictError,
    NotFoundError,
    PermanentApiError,
    TransientApiError,
    UnreachableError,
)

log = logging.getLogger(__name__)

LEASE_SECONDS = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
MAX_RETRY = 60.0            # a Lease that cannot be written at all: tried this rarely
REMIND = 60.0


class LeaderElector:
    def __init__(self, client: ClusterClient, clock: Clock, identity: str,
                 namespace: str = "kaisched-system", name: str = "kaisched",
                 lease_seconds: float = LEASE_SECONDS, renew_deadline: float = RENEW_DEADLINE,
                 retry_period: float = RETRY_PERIOD) -> None:
        if not retry_period < renew_deadline < lease_seconds:
            raise ValueError("leader election needs retry period < renew deadline < lease duration")
        self.client = client
        self.clock = clock
        self.identity = identity
        self.namespace = namespace
        self.name = name
        self.lease_seconds = lease_seconds
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.elected = threading.Event()        # set while leading: the loop wakes on it
        self.tried = threading.Event()          # set once the first try is over
        self.term = 0                           # times this replica has taken the Lease
        self._held = False
        self._renewed_at = 0.0
        self._seen: tuple[object, ...] | None = None    # the holder's record, as last read
        self._seen_at = 0.0
        self._delay = retry_period
        self._problem = ""                      # why the Lease cannot be written, if it cannot
        self._said_at = 0.0
        self._thread: threading.Thread | None = None

    @property
    def leading(self) -> bool:
        return self.is_leading()

    def is_leading(self) -> bool:
        """True while this replica holds the Lease and renewed it within the renew
        deadline. Read on the clock, not left to the renew thread: a thread stuck
        in a request cannot keep a replica leading past its deadline."""
        if self._held and self.clock.now() - self._renewed_at >= self.renew_deadline:
            self._lose(f"not renewed for {self.renew_deadline:.0f}s")
        return self._held

    # -- the renew thread --------------------------------------------------------
    def start(self, stop: threading.Event) -> None:
        """Try and renew every retry period on a daemon thread, until stop."""
        def run() -> None:
            while not stop.is_set():
                self.tick()
                stop.wait(self.retry_period if self._held else self._delay)
        self._thread = threading.Thread(target=run, name="lease", daemon=True)
        self._thread.start()

    def lead(self) -> bool:
        """One try to take or renew the Lease; True while this replica leads."""
        self.tick()
        return self.is_leading()

    def tick(self) -> None:
        try:
            self._tick()
        finally:
            # Only once its outcome is recorded: the loop's first pass, which
            # waits for the first try, reads whether this replica leads.
            self.tried.set()

    def _tick(self) -> None:
        try:
            taken = self._try()
        except ApiError as exc:
            self._failed(exc)
            return
        if self._problem:
            log.info("lease %s/%s can be written again", self.namespace, self.name)
            self._problem = ""
        self._delay = self.retry_period
        if taken:
            if not self._held:
                log.info("%s now holds the lease %s/%s", self.identity, self.namespace, self.name)
                self.term += 1
            self._held = True
            self._renewed_at = self.clock.now()
            self.elected.set()
        elif self._held:
            self._lose("another replica holds it")

    def _failed(self, exc: ApiError) -> None:
        """Cannot tell who leads: keep leading only until the renew deadline."""
        if self._held:
            self.is_leading()
        if isinstance(exc, (UnreachableError, TransientApiError)):
            # The API is away or busy: try every retry period, as client-go does,
            # so the Lease is written again as soon as the API answers (a backoff
            # grown during an outage would keep every replica idle long after).
            self._delay = self.retry_period
        else:
            # A Lease this replica may not write (RBAC, no namespace): no use asking often.
            self._delay = min(self._delay * 2, MAX_RETRY)
        problem = self._explain(exc)
        now = self.clock.now()
        if problem != self._problem or now - self._said_at >= REMIND:
            level = logging.DEBUG if isinstance(exc, UnreachableError) else logging.WARNING
            again = "still: " if problem == self._problem else ""
            log.log(level, "lease %s/%s: %s%s; retrying with backoff", self.namespace, self.name,
                    again, problem)
            self._said_at = now
        self._problem = problem

    def _explain(self, exc: ApiError) -> str:
        if isinstance(exc, NotFoundError):
            return (f"the namespace {self.namespace} does not exist, so no replica can lead "
                    f"and nothing is scheduled. Create it, pass --lease-namespace NAMESPACE, "
                    f"or --no-leader-elect to run a single replica without a Lease ({exc})")
        if isinstance(exc, PermanentApiError) and exc.status in (401, 403):
            return (f"not allowed to read and write Leases in {self.namespace}: check the RBAC "
                    f"of this service account ({exc})")
        return str(exc)

    def _lose(self, why: str) -> None:
        if not self._held:
            return
        self._held = False
        self.elected.clear()
        log.warning("%s lost the lease %s/%s (%s): stops applying decisions at once",
                    self.identity, self.namespace, self.name, why)

    def _try(self) -> bool:
        now = self.clock.now()
        lease = self.client.get(LEASE, self.namespace, self.name)
        if lease is None:
            try:
                self.client.create(self._lease(now))
            except ConflictError:
                return False        # another candidate created it first
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        record = (holder, spec.get("renewTime"), lease["metadata"].get("resourceVersion"))
        if record != self._seen:
            self._seen, self._seen_at = record, now
        duration = float(spec.get("leaseDurationSeconds") or self.lease_seconds)
        if holder and holder != self.identity and now < self._seen_at + duration:
            return False            # held, and renewed within a lease duration we watched
        patch: Obj = {"metadata": {"resourceVersion": lease["metadata"].get("resourceVersion")},
                      "spec": {"holderIdentity": self.identity, "renewTime": micro_time(now),
                               "leaseDurationSeconds": int(self.lease_seconds)}}
        if holder != self.identity:
            patch["spec"]["acquireTime"] = micro_time(now)
            patch["spec"]["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        try:
            self.client.patch(LEASE, self.namespace, self.name, patch)
        except ConflictError:
            return False            # changed under us: someone else got there first
        return True

    def _lease(self, now: float) -> Obj:
        return {"apiVersion": LEASE.api_version, "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity,
                         "leaseDurationSeconds": int(self.lease_seconds),
                         "acquireTime": micro_time(now), "renewTime": micro_time(now),
                         "leaseTransitions": 0}}

    def stand_by(self, stop: threading.Event, seconds: float) -> None:
        """A standby's wait between passes: the seconds given, or less when this
        replica becomes leader meanwhile (or stop is set)."""
        deadline = time.monotonic() + seconds
        while not stop.is_set() and not self.elected.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            stop.wait(min(left, 0.05))

    def release(self) -> None:
        """Give the Lease up on shutdown, so a standby takes over at once."""
        if self._thread is not None:
            self._thread.join(self.retry_period + 1.0)     # its stop event is set: one last tick
        if not self._held:
            return
        self._held = False
        self.elected.clear()
        try:
            lease = self.client.get(LEASE, self.namespace, self.name)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                self.client.patch(LEASE, self.namespace, self.name, {
                    "metadata": {"resourceVersion": lease["metadata"].get("resourceVersion")},
                    "spec": {"holderIdentity": None}})
        except ApiError as exc:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)


@attrs.frozen
class LeaseOptions:
    """A replica's part in leader election, as its command line gives it:
    elect (False: a single replica, without a Lease), the Lease's namespace
    and name (None: the command's own), and this replica's name on it."""

    elect: bool
    namespace: str
    identity: str
    name: str | None = None

    def elector(self, client: ClusterClient, clock: Clock, name: str) -> LeaderElector | None:
        """The elector of these options (None without election); name: the
        Lease's when the options name none."""
        if not self.elect:
            return None
        return LeaderElector(client, clock, self.identity, self.namespace, self.name or name)
