"""Resource: the immutable vector of named amounts (kaisched.api.resource)."""
from __future__ import annotations

import attrs
import pytest

from kaisched.api.resource import (
    CPU,
    GPU,
    MEMORY,
    PODS,
    Resource,
    format_amount,
    format_resource,
    sum_resources,
)

GI = 2**30


def res(**amounts: float) -> Resource:
    """Resource with the well-known names spelled as keywords (gpu, fpga)."""
    names = {"cpu": CPU, "memory": MEMORY, "gpu": GPU, "pods": PODS, "fpga": "example.com/fpga"}
    return Resource.of({names[k]: v for k, v in amounts.items()})


@pytest.mark.parametrize(("raw", "expected"), [
    ({"cpu": "500m"}, res(cpu=500)),
    ({"cpu": "2"}, res(cpu=2000)),
    ({"cpu": 1}, res(cpu=1000)),
    ({"memory": "1Gi"}, res(memory=GI)),
    ({"memory": "1G"}, res(memory=10**9)),
    ({"nvidia.com/gpu": "0.5"}, res(gpu=0.5)),
    ({"example.com/fpga": "1"}, res(fpga=1)),
    ({"cpu": "0", "memory": "0"}, Resource()),
    ({}, Resource()),
])
def test_from_quantities(raw: dict, expected: Resource) -> None:
    assert Resource.from_quantities(raw) == expected


def test_from_quantities_names_the_bad_resource() -> None:
    with pytest.raises(ValueError, match="memory"):
        Resource.from_quantities({"cpu": "1", "memory": "lots"})


def test_zero_amounts_are_not_stored() -> None:
    assert Resource.of(cpu=0, memory=0).is_empty()
    assert list(res(cpu=1, gpu=0).names()) == [CPU]


def test_absent_name_counts_as_zero() -> None:
    assert res(cpu=1).get(GPU) == 0.0


def test_is_frozen() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        res(cpu=1).items = ()  # type: ignore[misc]


def test_equal_values_hash_equal() -> None:
    assert {res(cpu=1, memory=2): "x"}[res(memory=2, cpu=1)] == "x"


@pytest.mark.parametrize(("a", "b", "total"), [
    (res(cpu=1000), res(cpu=500), res(cpu=1500)),
    (res(cpu=1000), res(gpu=2), res(cpu=1000, gpu=2)),
    (res(), res(memory=GI), res(memory=GI)),
    (res(cpu=1000), res(), res(cpu=1000)),
    (res(gpu=0.5), res(gpu=0.25), res(gpu=0.75)),
])
def test_add(a: Resource, b: Resource, total: Resource) -> None:
    assert a + b == total
    assert b + a == total


@pytest.mark.parametrize(("a", "b", "diff"), [
    (res(cpu=1500), res(cpu=500), res(cpu=1000)),
    (res(cpu=1000), res(cpu=1000), res()),
    (res(cpu=1000, gpu=2), res(gpu=2), res(cpu=1000)),
    (res(cpu=1000), res(cpu=1500), res(cpu=-500)),
    (res(cpu=1000), res(), res(cpu=1000)),
])
def test_sub(a: Resource, b: Resource, diff: Resource) -> None:
    assert a - b == diff


def test_sub_then_add_round_trips() -> None:
    a, b = res(cpu=1500, memory=3 * GI, gpu=2), res(cpu=500, gpu=1)
    assert (a - b) + b == a


def test_sum_resources() -> None:
    assert sum_resources([res(cpu=1), res(cpu=2, gpu=1), res()]) == res(cpu=3, gpu=1)
    assert sum_resources([]) == Resource()


@pytest.mark.parametrize(("request_", "room", "fits"), [
    (res(cpu=1000), res(cpu=1000), True),
    (res(cpu=1000), res(cpu=999), False),
    (res(cpu=1000), res(cpu=4000, memory=GI), True),
    (res(gpu=1), res(cpu=4000), False),                  # absent counts as zero
    (res(), res(), True),
    (res(), res(cpu=1), True),
    (res(fpga=1), res(cpu=4000, gpu=8), False),
    (res(gpu=0.5), res(gpu=0.5), True),
    (res(cpu=1000, gpu=1), res(cpu=1000, gpu=0.5), False),
])
def test_fits_in(request_: Resource, room: Resource, fits: bool) -> None:
    assert request_.fits_in(room) is fits
    assert request_.less_equal(room) is fits


def test_fits_in_tolerates_float_rounding() -> None:
    assert res(gpu=0.1 + 0.2).fits_in(res(gpu=0.3))


@pytest.mark.parametrize(("a", "b", "over"), [
    (res(cpu=2000), res(cpu=1000), [CPU]),
    (res(cpu=1000), res(cpu=1000), []),
    (res(cpu=1000, gpu=2), res(cpu=4000, gpu=1), [GPU]),
    (res(cpu=5000, memory=GI), res(), [CPU, MEMORY]),
    (res(), res(cpu=1), []),
])
def test_exceeding(a: Resource, b: Resource, over: list[str]) -> None:
    assert sorted(a.exceeding(b)) == sorted(over)


@pytest.mark.parametrize(("used", "total", "share"), [
    (res(cpu=1000), res(cpu=4000), 0.25),
    (res(cpu=1000, gpu=4), res(cpu=4000, gpu=8), 0.5),
    (res(cpu=3000, gpu=1), res(cpu=4000, gpu=8), 0.75),
    (res(pods=100), res(cpu=4000, pods=110), 0.0),       # pods never dominate
    (res(), res(cpu=4000), 0.0),
    (res(gpu=1), res(cpu=4000), float("inf")),           # nothing of it to share
])
def test_dominant_share(used: Resource, total: Resource, share: float) -> None:
    assert used.dominant_share(total) == share


@pytest.mark.parametrize(("name", "value", "text"), [
    (CPU, 1500, "1.5"),
    (CPU, 250, "0.25"),
    (MEMORY, GI, "1Gi"),
    (MEMORY, 512 * 2**20, "512Mi"),
    (MEMORY, 0, "0Gi"),
    (GPU, 2, "2"),
    (GPU, 0.5, "0.5"),
    (PODS, 110, "110"),
])
def test_format_amount(name: str, value: float, text: str) -> None:
    assert format_amount(name, value) == text


def test_format_resource_puts_well_known_first() -> None:
    text = format_resource(res(fpga=1, pods=1, gpu=2, memory=GI, cpu=1500))
    assert text == "cpu=1.5, memory=1Gi, nvidia.com/gpu=2, pods=1, example.com/fpga=1"


def test_format_resource_of_nothing() -> None:
    assert format_resource(Resource()) == "none"
    assert repr(res(cpu=1000)) == "Resource(cpu=1)"
