"""GPU sharing as KAI's users ask for it: part of a GPU, by pod annotation
instead of an `nvidia.com/gpu` request.

- `gpu-fraction: "0.5"`: half of one GPU (its memory and its time, as the
  pods agree to use it: nothing enforces it);
- `gpu-memory: "20000"`: that many MiB of one GPU;
- `gpu-fraction-num-devices: "2"`: the same share of that many GPUs.

The value here is what a pod asks (GpuShare), and, once it is placed, which
shared devices it holds: KAI's `runai-gpu-group` label names each, on the
pod and on the reservation pod that holds the device from the kubelet's view.
The devices themselves, per node, are kept in kaisched.api.gpudevices.
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
from typing import Mapping

import attrs

from kaisched.api.resource import GPU, Resource

# KAI's names, so that KAI users' pods run unchanged and kaisched reads what KAI wrote.
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
GPU_DEVICES = "gpu-fraction-num-devices"
GPU_GROUP = "runai-gpu-group"                   # label: the shared device a pod uses
GPU_GROUP_PREFIX = GPU_GROUP + "/"              # label per device, for a share of several
RECEIVED_TYPE = "received-resource-type"        # annotation KAI's binder writes on a sharer
RECEIVED_FRACTION = "Fraction"
# GPU feature discovery's node labels.
MEMORY_LABEL = "nvidia.com/gpu.memory"          # MiB per GPU (read floored, see gpu_memory_label)
COUNT_LABEL = "nvidia.com/gpu.count"
# Reservation pods: kaisched's own, and those KAI made (recognised when taking over).
RESERVATION_NAMESPACE = "kaisched-system"
RESERVATION_APP = "kaisched-gpu-reservation"
KAI_RESERVATION_NAMESPACE = "kai-resource-reservation"
KAI_RESERVATION_APP = "runai-reservation"
# A GPU whose memory no label tells is split in thousandths.
FRACTION_UNITS = 1000
# A quota resource only a pending gpu-memory pod carries: MiB it asks of each
# GPU, until a device is chosen and its share of that device is known.
MEMORY_ASK = "kaisched.io/gpu-memory-mib"
# GPU feature discovery once wrote bytes; KAI reads a value this large as bytes.
_MIB_LIMIT = 1024 * 1024
# KAI floors a GPU's memory to a multiple of this many MiB (getNodeGpuMemory),
# so that shares of it are counted alike on every node of one model.
MEMORY_STEP = 100

_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


@attrs.frozen(slots=True, cache_hash=True)      # a key of per-class caches
class GpuShare:
    """A pod's share of GPUs: a fraction or MiB of each of `devices` GPUs.

    groups: the shared devices it holds, one per GPU (none while pending,
    unless a label read back names them); portion: its share of each device
    as its queue is charged (the fraction; for gpu-memory, its part of the
    device it holds, rounded up to a hundredth, as KAI charges it)."""

    fraction: float | None = None
    memory: int | None = None
    devices: int = 1
    groups: tuple[str, ...] = ()
    portion: float | None = None

    @property
    def ask(self) -> GpuShare:
        """The request alone, without where it was placed: pods that ask alike."""
        if not self.groups and self.portion == self.fraction:
            return self         # a pending pod's share is its ask (most are asked of)
        return GpuShare(self.fraction, self.memory, self.devices, portion=self.fraction)

    @property
    def charge(self) -> Resource:
        """What its queue is charged in GPUs; a pending gpu-memory pod, whose
        device is not chosen yet, in MiB asked (see MEMORY_ASK)."""
        return _charge(self.portion, self.memory, self.devices)

    def units(self, memory: int | None) -> int | None:
        """What it takes of one device of this memory (MiB; None: unlabelled),
        in the device's units (MiB, or thousandths without a label): a
        fraction rounded up to whole units (0.3335 of an unlabelled GPU is
        334 thousandths: three never share one), a float's noise aside. None
        when no such device can hold it."""
        if self.memory is not None:
            return self.memory if memory is not None and self.memory <= memory else None
        assert self.fraction is not None
        capacity = memory if memory is not None else FRACTION_UNITS
        return max(1, math.ceil(self.fraction * capacity - 1e-9))

    def portion_on(self, memory: int | None) -> float:
        """Its share of one device of this memory, as quota counts it."""
        if self.memory is None or not memory:
            return self.fraction if self.fraction is not None else 1.0
        return math.ceil(self.memory / memory * 100 - 1e-9) / 100

    def at(self, memory: int | None) -> GpuShare:
        """The share as its queue would be charged for it on GPUs of this
        memory: a gpu-memory share's portion of such a GPU (a fraction is
        charged alike everywhere)."""
        if self.memory is None:
            return self
        return attrs.evolve(self, portion=self.portion_on(memory))

    def describe(self) -> str:
        what = f"gpu-fraction {self.fraction:g}" if self.fraction is not None \
            else f"gpu-memory {self.memory} MiB"
        return what if self.devices == 1 else f"{what} of each of {self.devices} GPUs"


@functools.lru_cache(maxsize=4096)
def _charge(portion: float | None, memory: int | None, devices: int) -> Resource:
    """Charges asked for per placement: few distinct ones, made once."""
    if portion is not None:
        return Resource.of({GPU: portion * devices})
    assert memory is not None
    return Resource.of({MEMORY_ASK: float(memory * devices)})


@functools.lru_cache(maxsize=4096)
def charged(requests: Resource, share: Resource) -> Resource:
    """A sharer's requests and its share of GPUs, as one amount its queue is charged."""
    return requests + share


def device_units(memory: int | None) -> int:
    """How many units one device holds: its MiB, or thousandths."""
    return memory if memory is not None else FRACTION_UNITS


def gpu_memory_label(labels: Mapping[str, str]) -> int | None:
    """MiB per GPU from GPU feature discovery's label, as KAI reads it: in
    MiB (a value of a TiB or more is bytes, as an old GFD wrote them), floored
    to a multiple of 100 MiB (a GPU labelled 40960 holds 40900 MiB of
    shares); None when absent, not a number, or less than 100 MiB."""
    raw = labels.get(MEMORY_LABEL)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        return None
    if value >= _MIB_LIMIT:
        value //= 1024 * 1024
    value -= value % MEMORY_STEP
    return value if value > 0 else None


def gpu_count_label(labels: Mapping[str, str]) -> int | None:
    raw = labels.get(COUNT_LABEL)
    try:
        value = int(str(raw).strip()) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def parse_share(annotations: Mapping[str, object], labels: Mapping[str, str],
                gpu_request: float) -> tuple[GpuShare | None, str | None]:
    """The pod's share of GPUs from its annotations (and the devices its
    labels say it holds), or why they are refused (KAI ignores such values;
    kaisched makes the pod wait, saying why). gpu_request: its
    nvidia.com/gpu request, which a share must not be mixed with."""
    fraction_raw, memory_raw = annotations.get(GPU_FRACTION), annotations.get(GPU_MEMORY)
    devices_raw = annotations.get(GPU_DEVICES)
    if fraction_raw is None and memory_raw is None:
        if devices_raw is not None:
            return None, (f"annotation {GPU_DEVICES} {str(devices_raw)!r}: only with "
                          f"{GPU_FRACTION} or {GPU_MEMORY}")
        return None, None
    if fraction_raw is not None and memory_raw is not None:
        return None, (f"annotations {GPU_FRACTION} and {GPU_MEMORY}: a pod asks for one "
                      f"or the other, not both")
    if gpu_request:
        which = GPU_FRACTION if fraction_raw is not None else GPU_MEMORY
        return None, (f"annotation {which}: a pod that shares a GPU does not also request "
                      f"nvidia.com/gpu (it asks for {gpu_request:g}); ask for one or the other")
    devices = 1
    if devices_raw is not None:
        try:
            devices = int(str(devices_raw).strip())
        except ValueError:
            devices = 0
        if devices < 1:
            return None, (f"annotation {GPU_DEVICES} {str(devices_raw)!r}: must be an "
                          f"integer >= 1")
    fraction = memory = None
    if fraction_raw is not None:
        try:
            fraction = float(str(fraction_raw).strip())
        except ValueError:
            return None, (f"annotation {GPU_FRACTION} {str(fraction_raw)!r}: must be a number "
                          f"in (0, 1], the part of one GPU")
        if not 0 < fraction <= 1 or math.isnan(fraction):
            return None, (f"annotation {GPU_FRACTION} {str(fraction_raw)!r}: must be in (0, 1], "
                          f"the part of one GPU")
    else:
        text = str(memory_raw).strip()
        if not text.isdigit() or int(text) < 1:
            return None, (f"annotation {GPU_MEMORY} {str(memory_raw)!r}: must be an integer "
                          f"number of MiB (as KAI reads it), e.g. \"20480\"")
        memory = int(text)
    groups = groups_of(labels, devices)
    return GpuShare(fraction, memory, devices, groups, fraction), None


def groups_of(labels: Mapping[str, str], devices: int = 1) -> tuple[str, ...]:
    """The shared devices a pod's labels say it holds: one per device, by
    KAI's per-device labels for a share of several, else the one label."""
    several = sorted(v for k, v in labels.items() if k.startswith(GPU_GROUP_PREFIX) and v)
    if several:
        return tuple(several)
    one = labels.get(GPU_GROUP)
    return (one,) if one and devices == 1 else ()


def group_labels(groups: tuple[str, ...], previous: tuple[str, ...] = ()) -> dict[str, str | None]:
    """The labels that record these devices on a pod (a merge patch: those
    of devices it no longer holds are removed)."""
    out: dict[str, str | None] = {f"{GPU_GROUP_PREFIX}{g}": None for g in previous}
    out[GPU_GROUP] = groups[0]
    if len(groups) > 1:
        out.update({f"{GPU_GROUP_PREFIX}{g}": g for g in groups})
    return out


def new_group(node: str, uid: str, pod: str, index: int) -> str:
    """A name for a device shared anew: from the first sharer's identity, so
    the same decision names it alike (replays agree) and no later device
    reuses it. A label value: at most 63 characters."""
    digest = hashlib.sha1(f"{node}/{pod}/{uid}".encode()).hexdigest()[:10]
    name = f"{_stem(node)}-{digest}-{index}"
    assert _NAME.match(name), name
    return name


@functools.lru_cache(maxsize=4096)     # a node's devices are named as they open
def _stem(node: str) -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", node)[:40].strip("-") or "gpu"


@functools.lru_cache(maxsize=4096)     # asked for each sharer placed while its device has none
def reservation_name(group: str) -> str:
    """The reservation pod's name for a device (a DNS label)."""
    name = f"gpu-reservation-{group}".lower().replace("_", "-").replace(".", "-")
    return name[:63].rstrip("-")
