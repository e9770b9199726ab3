"""What the config's nested sections (usageDBConfig, autoscaling) check alike:
unknown keys, and durations, each refused naming the key where it stands."""
from __future__ import annotations

from typing import Any

from kaisched.api.quantity import parse_duration
from kaisched.errors import ConfigError


def known(raw: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(keys)})")


def duration(raw: dict[str, Any], key: str, default: float, where: str) -> float:
    """raw[key] as seconds (a duration never negative), or default when left out."""
    if key not in raw:
        return default
    try:
        return parse_duration(raw[key])
    except ValueError as exc:
        raise ConfigError(f"{where}.{key}: {exc}") from None
