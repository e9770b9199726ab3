"""Checked fields of a scenario file: each helper takes a value and the path
of its key, and either returns the value in the simulator's terms or raises
a FieldError whose message starts with that path (`jobs[2] (bert).duration:
not a duration: 'soon'`). The scenario loader and the workload generator
share them.
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Mapping

from kaisched.api.quantity import parse_duration, parse_quantity
from kaisched.api.resource import CPU, GPU, MEMORY
from kaisched.validation.rules import dns_label

ALIASES = {"gpu": GPU}
INTEGER_RESOURCES = (GPU,)       # extended resources: whole units only
# Resources nodes offer beyond those a pool names.
ALWAYS_OFFERED = (CPU, MEMORY, "pods", "ephemeral-storage")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?")


def _has_units(name: str) -> bool:
    """cpu, memory, storage and hugepages take suffixes; extended resources are counts."""
    return name in (CPU, MEMORY, "ephemeral-storage", "storage") or name.startswith("hugepages-")


class FieldError(Exception):
    """A problem at a path; the loader makes it a ScenarioError naming the file."""


def fields(data: Any, where: str, known: tuple[str, ...], required: tuple[str, ...] = ()
           ) -> Mapping[str, Any]:
    """A mapping with only known keys and every required one."""
    if not isinstance(data, dict):
        raise FieldError(f"{where}: expected a mapping with keys {', '.join(known)}")
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise FieldError(f"{join(where, unknown[0])}: unknown key (known: {', '.join(known)})")
    for key in required:
        if data.get(key) is None:
            raise FieldError(f"{join(where, key)}: required")
    return data


def join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key



def items(parent: Mapping[str, Any], key: str, where: str) -> list[Any]:
    return listed(parent.get(key), join(where, key))


def listed(value: Any, where: str, shape: str = "") -> list[Any]:
    """A list field's entries: none when it is absent, one line naming it when
    it is not a list (shape: what an entry holds, for that line)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(f"{where}: expected a list" + (f" of {shape}" if shape else ""))
    return value


def unique(names: list[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for i, name in enumerate(names):
        if name in seen:
            raise FieldError(f"{where}[{i}].name: a {what} named {name!r} is listed twice")
        seen.add(name)


def text(value: Any, where: str) -> str:
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise FieldError(f"{where}: expected a string, got {value!r}")
    return str(value)


def dns(value: Any, where: str) -> str:
    """A DNS-1123 label, as the API server wants names, namespaces and role names."""
    if dns_label(value) is not None:
        raise FieldError(f"{where}: {value!r} is not a DNS-1123 label (lower-case letters, digits "
                   "and '-', at most 63)")
    return value


def integer(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise FieldError(f"{where}: must be at least {minimum}, got {value}")
    return value


def duration(value: Any, where: str, positive: bool = False) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise FieldError(f"{where}: {exc}") from None
    if positive and seconds <= 0:
        raise FieldError(f"{where}: must be more than zero")
    return seconds


def labels(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    if data is None:
        return ()
    if not isinstance(data, dict):
        raise FieldError(f"{where}: expected a mapping of strings")
    return tuple(sorted((text(k, where), text(v, f"{where}.{k}")) for k, v in data.items()))


def resources(data: Any, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(data, dict) or not data:
        raise FieldError(f"{where}: expected a mapping of resource to quantity (cpu, memory, "
                   "nvidia.com/gpu)")
    out = {}
    for raw_name, value in data.items():
        name = ALIASES.get(str(raw_name), str(raw_name))
        checked_amount(name, value, f"{where}.{raw_name}")
        out[name] = str(value)
    return tuple(sorted(out.items()))


def checked_amount(name: str, value: Any, where: str) -> Decimal:
    try:
        amount = parse_quantity(value)
    except ValueError as exc:
        raise FieldError(f"{where}: {exc}") from None
    if amount < 0:
        raise FieldError(f"{where}: must not be negative, got {value!r}")
    text = str(value).strip()
    if name == MEMORY and amount and _NUMBER.fullmatch(text):
        raise FieldError(f"{where}: memory needs a unit: {value!r} would be {text} bytes "
                         "(write e.g. 64Gi)")
    if not _has_units(name) and not _NUMBER.fullmatch(text):
        raise FieldError(f"{where}: {name} is a count, not a quantity with a suffix: "
                         f"{value!r} (write e.g. 4)")
    if name in INTEGER_RESOURCES and amount != amount.to_integral_value():
        raise FieldError(f"{where}: {name} is counted in whole units, got {value!r}")
    return amount


def amount(name: str, value: Any) -> float:
    """In the scheduler's units: cpu in millicores, the rest as given."""
    amount = float(parse_quantity(value))
    return amount * 1000 if name == CPU else amount


def show(name: str, value: float) -> str:
    if name == CPU:
        return f"{value / 1000:g}"
    if name == MEMORY:
        return f"{value / 2**30:g}Gi"
    return f"{value:g}"


def number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise FieldError(f"{where}: expected a number >= 0, got {value!r}")
    return float(value)
