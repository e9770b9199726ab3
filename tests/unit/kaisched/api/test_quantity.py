"""Kubernetes quantities and Go durations (kaisched.api.quantity)."""
from __future__ import annotations

from decimal import Decimal

import pytest

from kaisched.api.quantity import parse_duration, parse_quantity


@pytest.mark.parametrize(("text", "expected"), [
    ("1", Decimal(1)),
    ("0", Decimal(0)),
    ("100m", Decimal("0.1")),
    ("1500m", Decimal("1.5")),
    ("1.5", Decimal("1.5")),
    (".5", Decimal("0.5")),
    ("1k", Decimal(1000)),
    ("1M", Decimal(10**6)),
    ("2G", Decimal(2 * 10**9)),
    ("1Ki", Decimal(1024)),
    ("1Mi", Decimal(2**20)),
    ("1.5Gi", Decimal(3 * 2**29)),
    ("2Ti", Decimal(2 * 2**40)),
    ("2e3", Decimal(2000)),
    ("1E2", Decimal(100)),
    ("5n", Decimal("5e-9")),
    ("7u", Decimal("7e-6")),
    ("+3", Decimal(3)),
    (" 2 ", Decimal(2)),
    (4, Decimal(4)),
    (0.25, Decimal("0.25")),
])
def test_parses_quantity(text: object, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("bad", [
    "", "abc", "1.2.3", "1Gib", "1 Gi", "Gi", "1KI", "1ki", "m", "--1", "1e", None, True,
    [1], {"cpu": 1},
    "1e3m", "2e3Ki", "\u0661",
])
def test_bad_quantity_raises_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


@pytest.mark.parametrize(("text", "seconds"), [
    ("1s", 1.0),
    ("500ms", 0.5),
    ("1m30s", 90.0),
    ("2h", 7200.0),
    ("1h1m1s", 3661.0),
    ("1.5s", 1.5),
    ("250us", 250e-6),
    ("10ns", 10e-9),
    ("0s", 0.0),
    ("0", 0.0),
    (".5s", 0.5),
    (0, 0.0),
])
def test_parses_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", [
    "", "1", 3, 2.5, "60", "s", "1x", "1 s", "-1s", "1s garbage", "abc", "1d", None, True, -1, [1],
    "\u0661s",
])
def test_bad_duration_raises_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize("bare", [60, 60.0, "60", 2.5])
def test_a_bare_number_is_refused_with_the_one_message(bare: object) -> None:
    shown = "2.5" if bare == 2.5 else "60"
    with pytest.raises(ValueError, match=rf"^a duration needs a unit: {shown} could mean seconds "
                                         rf"or minutes \(write e.g. {shown}s or {shown}m\)$"):
        parse_duration(bare)
