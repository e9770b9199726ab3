"""Leader election on a coordination.k8s.io Lease, as client-go does it, so
two replicas never schedule at once (DESIGN 10).

Every cycle the candidate tries to take or renew the Lease with a
compare-and-swap on its resourceVersion; a holder that has not renewed for
leaseDurationSeconds may be replaced. Time comes from the injected clock.
"""
from __future__ import annotations

import datetime as _dt
import logging

from kaisched.api.clock import Clock
from kaisched.cluster.client import ClusterClient, Obj
from kaisched.cluster.kinds import LEASE
from kaisched.errors import ApiError, ConflictError

log = logging.getLogger(__name__)


def micro_time(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class LeaderElector:
    def __init__(self, client: ClusterClient, clock: Clock, identity: str,
                 namespace: str = "kaisched-system", name: str = "kaisched",
                 lease_seconds: int = 15) -> None:
        self.client = client
        self.clock = clock
        self.identity = identity
        self.namespace = namespace
        self.name = name
        self.lease_seconds = lease_seconds
        self.leading = False

    def lead(self) -> bool:
        """Take or renew the Lease; True while this candidate holds it."""
        try:
            leading = self._try()
        except ApiError as exc:
            # Cannot tell who leads: stand down rather than risk two leaders.
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            leading = False
        if leading != self.leading:
            log.info("%s %s the lease %s/%s", self.identity,
                     "now holds" if leading else "no longer holds", self.namespace, self.name)
        self.leading = leading
        return leading

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
        renewed = parse_micro_time(spec.get("renewTime")) or 0.0
        duration = spec.get("leaseDurationSeconds") or self.lease_seconds
        if holder != self.identity and holder and now < renewed + duration:
            return False            # someone else holds it, and recently renewed
        patch: Obj = {"metadata": {"resourceVersion": lease["metadata"].get("resourceVersion")},
                      "spec": {"holderIdentity": self.identity, "renewTime": micro_time(now),
                               "leaseDurationSeconds": self.lease_seconds}}
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
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": self.lease_seconds,
                         "acquireTime": micro_time(now), "renewTime": micro_time(now),
                         "leaseTransitions": 0}}

    def release(self) -> None:
        """Give the Lease up on shutdown, so a standby takes over at once."""
        if not self.leading:
            return
        try:
            lease = self.client.get(LEASE, self.namespace, self.name)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                self.client.patch(LEASE, self.namespace, self.name, {
                    "metadata": {"resourceVersion": lease["metadata"].get("resourceVersion")},
                    "spec": {"holderIdentity": None}})
        except ApiError as exc:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, exc)
        self.leading = False
