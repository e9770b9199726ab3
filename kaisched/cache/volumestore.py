"""The storage part of the cache: claims, volumes, classes and attach limits
as converted from their watch events, and which pods use each claim.

Most clusters have few claims next to their pods, and most pods mount none:
a pod event touches this only when the pod mounts a claim, and the Storage
value a session reads is made again only when something here changed.
"""
from __future__ import annotations

from typing import Iterable

import attrs

from kaisched.api.types import NodeName, PodKey, TaskStatus
from kaisched.api.volumes import NO_STORAGE, ClaimInfo, ClaimKey, Storage, StorageClassInfo, VolumeInfo
from kaisched.cache.convert import PodFacts
from kaisched.cache.convert.volumes import claim, csi_limits, provisioning_failure, storage_class, volume
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import CSI_NODE, EVENT, PV, PVC, STORAGE_CLASS, object_key

_DONE = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


class VolumeStore:
    def __init__(self) -> None:
        self.claims: dict[ClaimKey, ClaimInfo] = {}
        self.volumes: dict[str, VolumeInfo] = {}
        self.classes: dict[str, StorageClassInfo] = {}
        self.limits: dict[str, dict[str, int]] = {}
        self.failures: dict[ClaimKey, str] = {}           # the last ProvisioningFailed message
        self.users: dict[ClaimKey, dict[PodKey, NodeName | None]] = {}
        self._unplaced = 0          # uses of a claim (in users) by a pod not placed yet
        self._current: Storage | None = NO_STORAGE

    def apply(self, event: WatchEvent) -> bool:
        """Take a storage event; False if the event is of another kind."""
        obj, gone = event.obj, event.type == "DELETED"
        namespace, name = object_key(obj)
        if event.kind == PVC:
            key = f"{namespace or 'default'}/{name}"
            if gone:
                self.claims.pop(key, None)
                self.failures.pop(key, None)
            else:
                self.claims[key] = claim(obj)
        elif event.kind == PV:
            if gone:
                self.volumes.pop(name, None)
            else:
                self.volumes[name] = volume(obj)
        elif event.kind == STORAGE_CLASS:
            if gone:
                self.classes.pop(name, None)
            else:
                self.classes[name] = storage_class(obj)
        elif event.kind == CSI_NODE:
            node, limits = csi_limits(obj)
            if gone or not limits:
                self.limits.pop(node, None)
            else:
                self.limits[node] = limits
        elif event.kind == EVENT:
            found = None if gone else provisioning_failure(obj)
            if found is None:
                return True
            self.failures[found[0]] = found[1]
        else:
            return False
        self._current = None
        return True

    def broken(self, event: WatchEvent, problem: str) -> None:
        """A claim that cannot be read is kept, saying why (its pods wait);
        any other storage object that cannot be read is left out."""
        if event.kind == PVC and event.type != "DELETED":
            namespace, name = object_key(event.obj)
            key = f"{namespace or 'default'}/{name}"
            self.claims[key] = ClaimInfo(key, problem=problem)
            self._current = None

    def put_pod(self, before: PodFacts | None, after: PodFacts | None) -> None:
        """A pod changed: the claims it mounts are used by it (or no longer)."""
        if not (before is not None and before.pvcs) and not (after is not None and after.pvcs):
            return
        if before is not None:
            for c in before.pvcs:
                users = self.users.get(c.key)
                if users is not None and before.key in users:
                    self._unplaced -= users.pop(before.key) is None
                    if not users:
                        del self.users[c.key]
        if after is not None and after.status is not None and after.status not in _DONE:
            for c in after.pvcs:
                users = self.users.setdefault(c.key, {})
                if after.key in users:
                    self._unplaced -= users[after.key] is None
                users[after.key] = after.node_name
                self._unplaced += after.node_name is None
        self._current = None

    def awaited(self) -> bool:
        """Some pod not placed yet mounts a claim: why it waits may be a failed
        provisioning of its claim, which an Event says."""
        return self._unplaced > 0      # counted as pods come and go: asked at every sync

    def rebuilt(self, pods: Iterable[PodFacts]) -> Storage:
        """The same value made from scratch from every pod: what the
        incremental one must equal."""
        fresh = VolumeStore()
        fresh.claims, fresh.volumes, fresh.classes = self.claims, self.volumes, self.classes
        fresh.limits, fresh.failures = self.limits, self.failures
        for facts in pods:
            fresh.put_pod(None, facts)
        return fresh.storage()

    def storage(self) -> Storage:
        """The value a session reads: made again only after a change."""
        if self._current is None:
            claims = self.claims
            if self.failures:
                claims = {k: attrs.evolve(c, failure=self.failures[k]) if k in self.failures else c
                          for k, c in claims.items()}
            self._current = Storage(
                dict(claims), dict(self.volumes), dict(self.classes),
                {n: dict(lim) for n, lim in self.limits.items()},
                {k: tuple(sorted(users.items())) for k, users in self.users.items()})
        return self._current
