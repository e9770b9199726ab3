"""The allocator alone: selectors, counts, All, firstAvailable, matchAttribute."""
from __future__ import annotations

from kaisched.api.cel import Selector
from kaisched.api.draallocator import Eligibility, allocate
from kaisched.api.dradevices import Claim, Constraint, Device, DeviceClass, DeviceRequest
from kaisched.api.drainventory import Devices
from kaisched.api.types import NodeName

D = "gpu.io"


def gpu(name: str, model: str = "A100", numa: int = 0, memory_gi: int = 40) -> Device:
    from decimal import Decimal
    return Device(D, "n1", name, NodeName("n1"), (), ((D, "model", model), (D, "numa", numa)),
                  ((D, "memory", Decimal(memory_gi * 2**30)),))


def inventory(*devices: Device) -> Devices:
    return Devices(devices, {"gpu": DeviceClass("gpu", (Selector.of(f'device.driver == "{D}"'),))})


def names(results) -> list[str]:
    return [f"{r.request}:{r.device}" for r in results]


def test_selectors_and_counts() -> None:
    inv = inventory(gpu("a", "A100"), gpu("b", "H100", memory_gi=80), gpu("c", "H100", memory_gi=80))
    el = Eligibility(inv)
    big = DeviceRequest("r", "gpu", (Selector.of(
        f'device.capacity["{D}"].memory.compareTo(quantity("64Gi")) >= 0'),), count=2)
    found = allocate(Claim("ns/c", requests=(big,)), range(3), lambda i: False, el)
    assert names(found) == ["r:b", "r:c"]
    assert allocate(Claim("ns/c", requests=(big,)), range(3), lambda i: i == 1, el) is None


def test_all_mode_needs_every_matching_device_free() -> None:
    inv = inventory(gpu("a"), gpu("b"))
    el = Eligibility(inv)
    every = Claim("ns/c", requests=(DeviceRequest("r", "gpu", all=True),))
    assert names(allocate(every, range(2), lambda i: False, el)) == ["r:a", "r:b"]
    assert allocate(every, range(2), lambda i: i == 0, el) is None


def test_first_available_in_order() -> None:
    inv = inventory(gpu("a", "A100"), gpu("b", "A100"))
    el = Eligibility(inv)
    h100 = DeviceRequest("h100", "gpu", (Selector.of(f'device.attributes["{D}"].model == "H100"'),))
    two = DeviceRequest("two", "gpu", count=2)
    claim = Claim("ns/c", requests=(DeviceRequest("r", alternatives=(h100, two)),))
    assert names(allocate(claim, range(2), lambda i: False, el)) == ["r/two:a", "r/two:b"]


def test_match_attribute_across_requests() -> None:
    inv = inventory(gpu("a", numa=0), gpu("b", numa=1), gpu("c", numa=1))
    el = Eligibility(inv)
    claim = Claim("ns/c", requests=(DeviceRequest("x", "gpu"), DeviceRequest("y", "gpu")),
                  constraints=(Constraint((), f"{D}/numa"),))
    assert names(allocate(claim, range(3), lambda i: False, el)) == ["x:b", "y:c"]
    assert allocate(claim, range(3), lambda i: i == 2, el) is None


def test_problems_name_the_request() -> None:
    inv = inventory(gpu("a"))
    el = Eligibility(inv)
    missing = Claim("ns/c", requests=(DeviceRequest("r", "tpu"),))
    assert el.problem(missing) == "request r: DeviceClass tpu does not exist"
    bad = Claim("ns/c", requests=(DeviceRequest("r", "gpu", (Selector.of("device.driver =="),)),))
    assert "selector 'device.driver ==' does not compile" in el.problem(bad)


def test_a_selector_is_evaluated_once_per_distinct_view() -> None:
    devices = [Device(D, "p", f"g{i}", NodeName("n1"), (), ((D, "model", "A100"), (D, "uuid", f"u{i}")))
               for i in range(50)]
    selector = Selector.of(f'device.attributes["{D}"].model == "A100" && device.driver == "{D}"')
    assert all(selector.matches(d)[0] for d in devices)
    from kaisched.api.cel import _compile
    assert len(_compile(selector.expression).answers) == 1     # uuid is never read
