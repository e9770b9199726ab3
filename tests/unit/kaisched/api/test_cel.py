"""Device selectors' CEL as Kubernetes runs it: the semver library (as CEL
extension functions), version attributes as versions, expressions that read a
domain's attributes whole, and runtime errors told apart from mismatches."""
from __future__ import annotations

from decimal import Decimal

import pytest

from kaisched.api import cel
from kaisched.api.cel import Selector, Version
from kaisched.api.dradevices import Device

D = "gpu.example.com"


def device(**attributes: object) -> Device:
    return Device(D, "node-a", "gpu-0", attributes=tuple(sorted(
        (D, name, value) for name, value in attributes.items())),
        capacity=((D, "memory", Decimal(40 * 2**30)),))


@pytest.mark.parametrize("expression, expected", [
    ('semver("1.10.0").isGreaterThan(semver("1.9.0"))', True),
    ('semver("1.2.3-rc.1").isLessThan(semver("1.2.3"))', True),     # a pre-release is older
    ('semver("2.0.0").compareTo(semver("2.0.0")) == 0', True),
    ('semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && '
     'semver("1.2.3").patch() == 3', True),
    ('isSemver("1.2.3")', True),
    ('isSemver("v1.2")', False),
    # a version attribute is a version: 1.10.0 > 1.9.0, as text it would not be
    (f'device.attributes["{D}"].driver.isGreaterThan(semver("1.9.0"))', True),
    (f'device.attributes["{D}"].driver == semver("1.10.0")', True),
    # quantities keep their own comparisons
    (f'device.capacity["{D}"].memory.compareTo(quantity("40Gi")) == 0', True),
    (f'device.capacity["{D}"].memory.isGreaterThan(quantity("32Gi"))', True),
])
def test_kubernetes_functions(expression: str, expected: bool) -> None:
    selector = Selector.of(expression)
    assert selector.error is None
    assert selector.matches(device(driver=Version("1.10.0"), model="A100")) == (expected, None)


def test_a_bad_version_is_a_runtime_error() -> None:
    matches, error = Selector.of('semver("one.two").major() == 1').matches(device())
    assert not matches and error is not None and "one.two" in error


def test_a_missing_attribute_is_a_runtime_error_not_a_mismatch() -> None:
    selector = Selector.of(f'device.attributes["{D}"].model == "H100"')
    assert selector.matches(device(model="A100")) == (False, None)          # no
    matches, error = selector.matches(device(uuid="x"))                    # cannot tell
    assert not matches and error == "no such member in mapping: 'model'"


@pytest.mark.parametrize("expression", [
    f'size(device.attributes["{D}"]) == 3',
    f'"numa" in device.attributes["{D}"]',
    f'device.attributes["{D}"].exists(name, name == "numa")',
])
def test_an_expression_reading_a_whole_domain_sees_every_attribute(expression: str) -> None:
    """The answers are remembered per view of a device; a view must not drop
    attributes such an expression reads without naming them."""
    selector = Selector.of(expression)
    assert selector.matches(device(model="A100", numa=0, uuid="a")) == (True, None)
    assert selector.matches(device(model="A100", uuid="b")) == (False, None)


def test_answers_are_shared_by_devices_alike_in_what_is_read() -> None:
    selector = Selector.of(f'device.attributes["{D}"].model == "A100"')
    assert selector.matches(device(model="A100", uuid="a")) == (True, None)
    assert selector.matches(device(model="A100", uuid="b")) == (True, None)
    program = cel._compile(selector.expression)
    assert len(program.answers) == 1        # the uuid is not read: one view


def test_a_version_is_not_a_string_of_the_same_text() -> None:
    assert Version("1.2.3") == Version("1.2.3")
    assert Version("1.2.3") != "1.2.3" and "1.2.3" != Version("1.2.3")
    assert len({Version("1.2.3"), "1.2.3"}) == 2
