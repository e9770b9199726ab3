"""What every reader shares (kaisched.cache.convert.common): a map of
quantities is read once per distinct one, and reads as itself every time."""
from __future__ import annotations

import math
from typing import Any

from kaisched.api.resource import CPU, MEMORY, Resource
from kaisched.cache.convert.common import quantities


def read(raw: Any, where: str = "status.allocatable") -> tuple[Resource, list[str]]:
    problems: list[str] = []
    return quantities(raw, where, problems), problems


def test_a_map_read_again_reads_the_same_and_says_its_problems_again() -> None:
    good = {"cpu": "4", "memory": "8Gi"}
    assert read(good) == read(dict(good)) == (Resource.of({CPU: 4000, MEMORY: 8 * 2**30}), [])
    for _ in range(2):
        assert read({"cpu": "-1"}) == (Resource(), ["status.allocatable: cpu: negative quantity '-1'"])
    # Where the map stands is part of what is said.
    assert read({"cpu": "lots"}, "spec.minResources")[1] == [
        "spec.minResources: cpu: not a quantity: 'lots'"]
    assert read({"cpu": "lots"}, "overhead")[1] == ["overhead: cpu: not a quantity: 'lots'"]


def test_a_null_and_an_infinite_number_read_as_themselves() -> None:
    # JSON writes an infinite number as null: neither stands for the other, in either order.
    for first, second in ((None, math.inf), (math.inf, None), (None, math.nan)):
        read({"cpu": first})
        got, problems = read({"cpu": second})
        if second is None:
            assert got == Resource() and problems == ["status.allocatable: cpu: not a quantity: None"]
        else:
            value = got.get(CPU)
            assert (math.isnan(value) if math.isnan(second) else value == second) and not problems


def test_a_map_json_cannot_hold_is_read_as_it_is() -> None:
    assert read({"cpu": "1", 2: "x"})[1] != [] and read({"cpu": 2**70})[0].get(CPU) == 2**70 * 1000
