"""What the device model works out per placement with SharedDevice.whole_gpu()
and the free units inlined is what it says through them.

A node's summary of its shared GPUs (the most free units of a used device
now and later, and of a releasing one) and the kind of option each device
is for a share: on random devices -- sharers live, releasing and pipelined,
a reservation pod or none, pods labelled and waiting -- each must equal the
answer read through hold(), free_now and free_later, device by device.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.gpudevices import (
    ABANDONED_NOW,
    NONE,
    RELEASED_LATER,
    USED_LATER,
    USED_NOW,
    SharedDevice,
    SharedGpus,
    Summary,
    WholeGpu,
    _summary,
)
from kaisched.api.types import PodKey


def reference(devices: list[SharedDevice]) -> Summary:
    used_now = used_later = releasing_now = releasing_later = NONE
    for device in devices:
        hold = device.whole_gpu()
        if hold is WholeGpu.RELEASING:
            releasing_now = max(releasing_now, device.free_now)
            releasing_later = max(releasing_later, device.free_later)
        elif hold is not None:
            used_now = max(used_now, device.free_now)
            used_later = max(used_later, device.free_later)
    return Summary(used_now, used_later, releasing_now, releasing_later)


@st.composite
def devices(draw: st.DrawFn) -> SharedDevice:
    units = draw(st.sampled_from([1000, 40960]))
    device = SharedDevice("n0", f"g{draw(st.integers(0, 99))}", units)
    for kind in ("live", "releasing", "pipelined"):
        for i in range(draw(st.integers(0, 2))):
            share = draw(st.integers(1, units // 2))
            getattr(device, kind)[PodKey(f"default/{kind}-{i}")] = share
            device.taken_now += share
            if kind != "releasing":
                device.taken_later += share
    if draw(st.booleans()):
        device.reservation = PodKey("kaisched-system/gpu-reservation-g")
    if draw(st.integers(0, 3)) == 0:
        device.waiting.add(PodKey("default/labelled"))
    return device


@settings(max_examples=400, deadline=None)
@given(st.lists(devices(), max_size=8))
def test_summary_reads_each_device_as_its_hold_says(found: list[SharedDevice]) -> None:
    assert _summary(found) == reference(found)


def reference_option(device: SharedDevice, units: int, whole_later: int) -> int | None:
    if device.whole_gpu() is WholeGpu.RELEASING:
        if whole_later < 1:
            return None
        if device.free_now >= units:
            return ABANDONED_NOW
        return RELEASED_LATER if device.free_later >= units else None
    if device.free_now >= units:
        return USED_NOW
    return USED_LATER if device.free_later >= units else None


@settings(max_examples=400, deadline=None)
@given(devices(), st.integers(1, 1000), st.integers(0, 2))
def test_a_device_is_the_option_its_hold_says(device: SharedDevice, units: int,
                                              whole_later: int) -> None:
    assert SharedGpus._option(device, units, whole_later) == reference_option(device, units, whole_later)
