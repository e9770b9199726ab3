"""The cache's part for Dynamic Resource Allocation: DeviceClasses,
ResourceSlices and ResourceClaims as converted, per API version, and the
model's device inventory made from them.

A cluster may serve one object under two versions (v1 and v1beta1 in 1.34);
each is kept under the version it came in, and the newest version read is
the one that counts. The inventory (devices and classes) is laid out again
only when a slice or class changes; claims are taken anew when one changes.
"""
from __future__ import annotations

from typing import Callable, Mapping, TypeVar

from kaisched.api.dradevices import Claim, Consumer, Device, DeviceClass
from kaisched.api.drainventory import Devices
from kaisched.api.types import PodKey, TaskStatus
from kaisched.cache import convert
from kaisched.cache.convert import draobjects as dra
from kaisched.cluster.client import WatchEvent
from kaisched.cluster.kinds import DEVICE_CLASSES, DRA_VERSIONS, RESOURCE_CLAIMS, RESOURCE_SLICES, object_key

T = TypeVar("T")
_DONE = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


def _newest(versions: Mapping[str, T]) -> T:
    return next(versions[v] for v in DRA_VERSIONS if v in versions)


class DeviceStore:
    def __init__(self) -> None:
        self.classes: dict[str, dict[str, DeviceClass]] = {}
        self.slices: dict[str, dict[str, tuple[tuple[str, str, int], tuple[Device, ...]]]] = {}
        self.claims: dict[str, dict[str, Claim]] = {}
        self.devices = Devices()
        self._inventory_changed = False
        self._claims_changed = False

    def apply(self, event: WatchEvent) -> bool:
        """Take the event if it is of a DRA kind (True), else leave it (False)."""
        kind, obj = event.kind, event.obj
        gone = event.type == "DELETED"
        namespace, name = object_key(obj)
        version = kind.api_version
        if kind in DEVICE_CLASSES:
            _put(self.classes, name, version, None if gone else dra.device_class(obj))
            self._inventory_changed = True
        elif kind in RESOURCE_SLICES:
            _put(self.slices, name, version,
                 None if gone else (dra.slice_pool(obj), dra.slice_devices(obj)))
            self._inventory_changed = True
        elif kind in RESOURCE_CLAIMS:
            _put(self.claims, f"{namespace}/{name}", version, None if gone else dra.claim(obj))
            self._claims_changed = True
        else:
            return False
        return True

    def shows(self, key: str, allocation: object, reserved_for: tuple[Consumer, ...]) -> bool:
        """The claim as read holds this allocation and these reservations (or is gone)."""
        versions = self.claims.get(key)
        if not versions:
            return True
        claim = _newest(versions)
        return claim.allocation == allocation and claim.reserved_for == reserved_for

    def lend(self, pods: Mapping[PodKey, convert.PodFacts],
             group_uid: Callable[[str], str | None] = lambda key: None) -> Devices:
        """The inventory for the next session, brought up to date. group_uid:
        the uid of an upstream PodGroup by namespace/name (None: there is none),
        for claims reserved for a group, which hold them until it is gone."""
        if self._inventory_changed:
            self.devices = Devices(self._devices(), {n: _newest(v) for n, v in self.classes.items()},
                                   self.devices.claims)
            self._inventory_changed = False
        if self._claims_changed:
            self.devices.replace_claims({k: _newest(v) for k, v in self.claims.items()})
            self._claims_changed = False
        devices = self.devices
        devices.gone, devices.watchers = {}, []
        for claim in devices.claims.values():
            if not claim.reserved_for:
                continue
            namespace = claim.namespace
            gone = tuple(c for c in claim.reserved_for
                         if not _alive(pods, group_uid, f"{namespace}/{c.name}", c))
            if gone:
                devices.gone[claim.key] = gone
        devices.journal = []
        return devices

    def _devices(self) -> list[Device]:
        """Devices of every pool's newest generation."""
        slices = [_newest(v) for v in self.slices.values()]
        newest: dict[tuple[str, str], int] = {}
        for (driver, pool, generation), _ in slices:
            newest[(driver, pool)] = max(newest.get((driver, pool), generation), generation)
        return [d for (driver, pool, generation), found in slices
                if newest[(driver, pool)] == generation for d in found]


def _alive(pods: Mapping[PodKey, convert.PodFacts], group_uid: Callable[[str], str | None],
           key: str, consumer: Consumer) -> bool:
    if not consumer.is_pod:
        uid = group_uid(key)
        return uid is not None and (not consumer.uid or not uid or uid == consumer.uid)
    facts = pods.get(PodKey(key))
    return (facts is not None and (not consumer.uid or facts.uid == consumer.uid)
            and facts.status not in _DONE and facts.status is not None)


def _put(store: dict[str, dict[str, T]], key: str, version: str, value: T | None) -> None:
    versions = store.setdefault(key, {})
    if value is None:
        versions.pop(version, None)
        if not versions:
            del store[key]
    else:
        versions[version] = value
