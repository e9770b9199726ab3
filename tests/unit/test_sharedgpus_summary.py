"""A node's summary of its shared GPUs (the most free units of a used device
now and later, and of a releasing one) is what the device model says of
each device, taken whole.

The summary is worked out once a placement with SharedDevice.hold() and the
free units inlined; on random devices -- sharers live, releasing and
pipelined, a reservation pod or none, pods labelled and waiting -- it must
equal the summary read through hold(), free_now and free_later, device by
device.
"""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kaisched.api.sharedgpus import NONE, Hold, SharedDevice, Summary, _summary
from kaisched.api.types import PodKey


def reference(devices: list[SharedDevice]) -> Summary:
    used_now = used_later = releasing_now = releasing_later = NONE
    for device in devices:
        hold = device.hold()
        if hold is Hold.RELEASING:
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
