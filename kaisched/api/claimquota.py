"""Devices allocated through ResourceClaims, in queue quota.

A pod's claims count against its queue like the resources it requests: each
device as one of a quota resource its DeviceClass maps to -- the class's
`kaisched.io/quota-resource` annotation; else `nvidia.com/gpu` for a class
whose devices come from a GPU driver (gpu.nvidia.com, gpu.amd.com, ...); else
`deviceclass/<name>`. A claim several pods share counts once, against the pod
it is reserved for first (the first of them placed, while none is). An
allocated claim counts the devices it was given; one not allocated yet, what
it asks for (a count; one device for a request of all, and the first choice
of a firstAvailable request, until the allocation says). What the cluster
could give of each such resource is the count of its devices in
ResourceSlices, added to what nodes offer.
"""
from __future__ import annotations

import numpy as np

from kaisched.api.draallocator import Eligibility
from kaisched.api.dradevices import Claim, DeviceClass, DeviceRequest
from kaisched.api.drainventory import Devices
from kaisched.api.resource import GPU, Resource
from kaisched.api.task import TaskInfo

QUOTA_RESOURCE_ANNOTATION = "kaisched.io/quota-resource"
DEVICE_CLASS_PREFIX = "deviceclass/"


def _gpu_driver(driver: str) -> bool:
    return driver.split(".", 1)[0] == "gpu"


def quota_names(devices: Devices) -> dict[str, str]:
    """Per DeviceClass, the quota resource its devices count as."""
    return _quotas(devices)[0]


def quota_totals(devices: Devices) -> Resource:
    """Per quota resource, how many devices the drivers publish (each once)."""
    return _quotas(devices)[1]


def _quotas(devices: Devices) -> tuple[dict[str, str], Resource]:
    """Worked out once per inventory (devices and classes), kept with it."""
    if devices.quota_map is None:
        eligible = Eligibility(devices)
        names: dict[str, str] = {}
        masks: dict[str, np.ndarray] = {}
        for cls in devices.classes.values():
            mask = eligible.mask(DeviceRequest("", cls.name))
            name = names[cls.name] = _name_of(
                cls, [devices.devices[i].driver for i in np.flatnonzero(mask)])
            masks[name] = mask | masks[name] if name in masks else mask
        counted = {name: float(mask.sum()) for name, mask in masks.items()}
        devices.quota_map = (names, Resource.of(counted))
    return devices.quota_map


def _name_of(cls: DeviceClass, drivers: list[str]) -> str:
    if cls.quota_resource:
        return cls.quota_resource
    if any(_gpu_driver(d) for d in drivers) or (not drivers and _gpu_driver(cls.name)):
        return GPU
    return DEVICE_CLASS_PREFIX + cls.name


def claim_charge(task: TaskInfo, devices: Devices) -> Resource:
    """What the task's ResourceClaims count against its queue."""
    names = quota_names(devices)
    counts: dict[str, float] = {}
    for key in task.claims:
        claim = devices.claims.get(key)
        if claim is None or not _charged_to(claim, task):
            continue
        for cls, count in _devices_of(claim):
            name = names.get(cls, DEVICE_CLASS_PREFIX + cls)
            counts[name] = counts.get(name, 0.0) + count
    return Resource.of(counts) if counts else Resource()


def _charged_to(claim: Claim, task: TaskInfo) -> bool:
    """The claim counts for the pod it is reserved for first; while it is
    reserved for nobody, for any pod that names it (the first placed takes it)."""
    if not claim.reserved_for:
        return True
    return claim.reserved_for[0].name == task.name


def _devices_of(claim: Claim) -> list[tuple[str, int]]:
    """(device class, how many) of what the claim holds, or asks for."""
    by_request = {r.name: r for r in claim.requests}
    if claim.allocation is not None:
        out: dict[str, int] = {}
        for result in claim.allocation.results:
            top, _, sub = result.request.partition("/")
            request = by_request.get(top)
            if request is None:
                continue
            if sub:
                request = next((a for a in request.alternatives if a.name == sub), request)
            out[request.device_class] = out.get(request.device_class, 0) + 1
        return list(out.items())
    asked = []
    for request in claim.requests:
        first = request.alternatives[0] if request.alternatives else request
        asked.append((first.device_class, 1 if first.all else first.count))
    return asked
