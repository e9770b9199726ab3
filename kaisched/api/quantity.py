"""Kubernetes quantities ("100m", "1.5Gi", "2e3") and Go durations ("1m30s")."""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIX: dict[str, Decimal | int] = {
    "": 1, "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}
# A number with either a decimal exponent or a suffix, never both; ASCII digits only.
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))"
                       r"(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")
_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_NUMBER = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)$")
_DURATION_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_quantity(value: object) -> Decimal:
    """A Kubernetes quantity as a Decimal; ValueError when it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise ValueError(f"not a quantity: {value!r}")
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        return Decimal(number + (exponent or "")) * Decimal(_SUFFIX[suffix or ""])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"not a quantity: {value!r}") from exc


def format_duration(seconds: float) -> str:
    """Seconds as a Go duration, shortest first: 600 -> "10m", 5400 -> "1h30m", 0.5 -> "500ms"."""
    if seconds < 1 and seconds > 0:
        return f"{round(seconds * 1000)}ms"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + \
        (f"{secs}s" if secs else "")
    return text or "0s"


def parse_duration(value: object) -> float:
    """A Go duration ("1s", "1m30s", "500ms") as seconds. A number without a unit is
    refused with one message wherever a duration is read (config, scenario, flags,
    annotations): 60 could mean seconds or minutes. Zero alone is Go's one unitless duration."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float, str)) and (not isinstance(value, str) or _NUMBER.match(value)):
        if float(value) == 0:
            return 0.0
        raise ValueError(unit_missing(value))
    if not isinstance(value, str) or not value:
        raise ValueError(f"not a duration: {value!r}")
    pos, total = 0, 0.0
    for match in _DURATION.finditer(value):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNIT[match.group(2)]
        pos = match.end()
    if pos != len(value):
        raise ValueError(f"not a duration: {value!r} (use e.g. 1s, 500ms, 1m30s)")
    return total


def unit_missing(value: int | float | str) -> str:
    """The one message for a duration written as a bare number."""
    shown = f"{float(value):g}" if not isinstance(value, str) else value.lstrip("+")
    return (f"a duration needs a unit: {shown} could mean seconds or minutes "
            f"(write e.g. {shown}s or {shown}m)")
