"""Devices: every device the drivers publish, the device classes, the claims,
and which claim holds which device.

The cache keeps one, changed as events arrive; a session changes its claims
(allocates, reserves) through put(), which journals the move while the
inventory is lent, so rewind() hands the cache its own back, as with the
node table.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

import numpy as np

from kaisched.api.dradevices import Claim, Consumer, Device, DeviceClass, DeviceKey
from kaisched.api.resource import Resource
from kaisched.api.types import NodeName


class Devices:
    def __init__(self, devices: Iterable[Device] = (), classes: Mapping[str, DeviceClass] | None = None,
                 claims: Mapping[str, Claim] | None = None) -> None:
        self.devices: tuple[Device, ...] = tuple(sorted(devices, key=lambda d: d.key))
        self.index: dict[DeviceKey, int] = {}
        self.by_node: dict[NodeName, list[int]] = {}
        self.anywhere: list[int] = []          # devices a node selector places (or none)
        for i, device in enumerate(self.devices):
            if device.key in self.index:
                continue                       # published twice: the first counts
            self.index[device.key] = i
            if device.node is not None:
                self.by_node.setdefault(device.node, []).append(i)
            else:
                self.anywhere.append(i)
        self.classes: dict[str, DeviceClass] = dict(classes or {})
        # Per class the quota resource its devices count as, and per such
        # resource how many there are (kaisched.api.claimquota, worked out once).
        self.quota_map: tuple[dict[str, str], Resource] | None = None
        self.claims: dict[str, Claim] = {}
        self.holder: dict[int, str] = {}       # device -> the claim allocated it
        self.taken = np.zeros(len(self.devices), dtype=bool)    # the same, as a mask
        self._rows: tuple[object, np.ndarray] | None = None
        # Reservations of pods that are gone or finished, per claim (the cache
        # knows the pods); the scheduler takes them back.
        self.gone: dict[str, tuple[Consumer, ...]] = {}
        self.journal: list[tuple[Claim | None, Claim | None]] | None = None
        # Told of devices taken (True) or given back (False): a session's
        # counts per node follow the moves instead of counting again.
        self.watchers: list[Callable[[list[int], bool], None]] = []
        for claim in (claims or {}).values():
            self._set(None, claim)

    def __bool__(self) -> bool:
        return bool(self.devices or self.claims)

    def holds(self, claim: Claim) -> list[int]:
        """The devices the claim's allocation names that this inventory knows."""
        if claim.allocation is None:
            return []
        found = (self.index.get(r.key) for r in claim.allocation.results)
        return [i for i in found if i is not None]

    def put(self, old: Claim | None, new: Claim | None) -> None:
        """A claim changed (or came, or went): journaled while lent."""
        self._set(old, new)
        if self.journal is not None:
            self.journal.append((old, new))

    def rewind(self) -> None:
        if not self.journal:
            return
        for old, new in reversed(self.journal):
            self._set(new, old)
        self.journal = []

    def _set(self, old: Claim | None, new: Claim | None) -> None:
        freed: list[int] = []
        if old is not None:
            for i in self.holds(old):
                if self.holder.get(i) == old.key:
                    del self.holder[i]
                    self.taken[i] = False
                    freed.append(i)
            self.claims.pop(old.key, None)
        taken: list[int] = []
        if new is not None:
            self.claims[new.key] = new
            for i in self.holds(new):
                if self.holder.setdefault(i, new.key) == new.key and not self.taken[i]:
                    self.taken[i] = True
                    taken.append(i)
        for watcher in self.watchers:
            if freed:
                watcher(freed, False)
            if taken:
                watcher(taken, True)

    def copy(self) -> Devices:
        """A copy whose claims may change apart (devices and classes shared)."""
        other = object.__new__(Devices)
        other.__dict__.update(self.__dict__)
        other.claims, other.holder, other.taken = dict(self.claims), dict(self.holder), self.taken.copy()
        other.journal, other.watchers = None, []
        return other

    def replace_claims(self, claims: Mapping[str, Claim]) -> None:
        """Take the claims anew (the cache, between sessions)."""
        self.claims, self.holder = {}, {}
        self.taken[:] = False
        for claim in claims.values():
            self._set(None, claim)

    def rows(self, index: Mapping[NodeName, int]) -> np.ndarray:
        """Per device, the table row of its node (-1: not node-local, or no
        such node); kept while the table's layout is the same."""
        if self._rows is None or self._rows[0] is not index:
            self._rows = (index, np.array([index.get(d.node, -1) if d.node is not None else -1
                                           for d in self.devices], dtype=np.int64))
        return self._rows[1]

    def with_inventory(self, devices: Iterable[Device], classes: Mapping[str, DeviceClass]) -> Devices:
        """The same claims over other devices and classes."""
        return Devices(devices, classes, self.claims)
