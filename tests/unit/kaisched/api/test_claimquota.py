"""Devices of ResourceClaims in queue quota: which quota resource a class's
devices count as, how many the cluster has of each, and what a pod's claims
count against its queue (allocated or not yet, shared once)."""
from __future__ import annotations

from kaisched.api.cel import Selector
from kaisched.api.claimquota import claim_charge, quota_names, quota_totals
from kaisched.api.dradevices import (
    Allocation,
    Claim,
    Consumer,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
)
from kaisched.api.drainventory import Devices
from kaisched.api.resource import PODS, Resource
from kaisched.api.task import TaskInfo
from kaisched.api.types import JobKey, NodeName, PodKey, TaskStatus


def device(driver: str, name: str) -> Device:
    return Device(driver, "n1", name, NodeName("n1"))


def cls(name: str, driver: str, quota: str | None = None) -> DeviceClass:
    return DeviceClass(name, (Selector.of(f'device.driver == "{driver}"'),), quota_resource=quota)


def inventory(claims: dict[str, Claim] | None = None) -> Devices:
    devices = [device("gpu.nvidia.com", f"g{i}") for i in range(4)]
    devices += [device("nic.example.com", f"n{i}") for i in range(2)]
    devices += [device("fpga.example.com", "f0")]
    classes = {"gpu": cls("gpu", "gpu.nvidia.com"), "a100": cls("a100", "gpu.nvidia.com"),
               "nic": cls("nic", "nic.example.com"),
               "fpga": cls("fpga", "fpga.example.com", "example.com/fpga")}
    return Devices(devices, classes, claims)


def task(name: str, *claims: str) -> TaskInfo:
    return TaskInfo(PodKey(f"ns/{name}"), f"uid-{name}", JobKey(f"ns/{name}"), TaskStatus.PENDING,
                    Resource.of({PODS: 1}), claims=tuple(f"ns/{c}" for c in claims))


def test_each_class_counts_as_its_quota_resource() -> None:
    assert quota_names(inventory()) == {"gpu": "nvidia.com/gpu", "a100": "nvidia.com/gpu",
                                        "nic": "deviceclass/nic", "fpga": "example.com/fpga"}


def test_the_cluster_has_each_device_once() -> None:
    """Two GPU classes select the same four GPUs: four, not eight."""
    assert quota_totals(inventory()) == Resource.of(
        {"nvidia.com/gpu": 4, "deviceclass/nic": 2, "example.com/fpga": 1})


def test_a_class_with_no_device_yet_goes_by_its_name() -> None:
    devices = Devices([], {"gpu.nvidia.com": cls("gpu.nvidia.com", "gpu.nvidia.com"),
                           "tpu": cls("tpu", "tpu.example.com")})
    assert quota_names(devices) == {"gpu.nvidia.com": "nvidia.com/gpu", "tpu": "deviceclass/tpu"}


def test_a_pending_claim_counts_what_it_asks_for() -> None:
    claims = {"ns/two": Claim("ns/two", requests=(DeviceRequest("r", "gpu", count=2),)),
              "ns/nic": Claim("ns/nic", requests=(DeviceRequest("r", "nic", all=True),)),
              "ns/choice": Claim("ns/choice", requests=(DeviceRequest("r", alternatives=(
                  DeviceRequest("big", "fpga"), DeviceRequest("small", "gpu", count=3))),))}
    got = claim_charge(task("p", "two", "nic", "choice"), inventory(claims))
    assert got == Resource.of({"nvidia.com/gpu": 2, "deviceclass/nic": 1, "example.com/fpga": 1})


def test_an_allocated_claim_counts_what_it_was_given() -> None:
    given = Allocation((DeviceResult("r/small", "gpu.nvidia.com", "n1", "g0"),
                        DeviceResult("r/small", "gpu.nvidia.com", "n1", "g1"),
                        DeviceResult("r/small", "gpu.nvidia.com", "n1", "g2")), NodeName("n1"))
    claim = Claim("ns/choice", requests=(DeviceRequest("r", alternatives=(
        DeviceRequest("big", "fpga"), DeviceRequest("small", "gpu", count=3))),),
        allocation=given, reserved_for=(Consumer("p", "uid-p"),))
    assert claim_charge(task("p", "choice"), inventory({"ns/choice": claim})) == \
        Resource.of({"nvidia.com/gpu": 3})


def test_a_shared_claim_counts_once_for_the_pod_it_was_reserved_for_first() -> None:
    claim = Claim("ns/shared", requests=(DeviceRequest("r", "gpu", count=2),),
                  reserved_for=(Consumer("a", "uid-a"), Consumer("b", "uid-b")))
    devices = inventory({"ns/shared": claim})
    assert claim_charge(task("a", "shared"), devices) == Resource.of({"nvidia.com/gpu": 2})
    assert claim_charge(task("b", "shared"), devices) == Resource()
