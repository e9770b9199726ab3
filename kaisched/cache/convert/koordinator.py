"""Koordinator's gang annotations: the optional ones fall back to their
defaults when they do not parse, as Koordinator does, with a warning naming
the bad value; min-available is required to parse (the caller refuses it)."""
from __future__ import annotations

from typing import Callable

import orjson

from kaisched.api import labels as L
from kaisched.api.quantity import parse_duration
from kaisched.api.types import GangMode, JobKey

Get = Callable[[str], "str | None"]


def optional_settings(get: Get) -> tuple[GangMode, tuple[JobKey, ...], float | None, list[str]]:
    """(mode, gang group, waiting time, warnings) from the optional annotations."""
    warnings: list[str] = []
    mode = GangMode.STRICT
    raw_mode = get(L.KOORD_MODE)
    if raw_mode == "NonStrict":
        mode = GangMode.NON_STRICT
    elif raw_mode not in (None, "", "Strict"):
        warnings.append(f"{L.KOORD_MODE} {raw_mode!r} is neither Strict nor NonStrict; using Strict")
    groups: tuple[JobKey, ...] = ()
    raw_groups = get(L.KOORD_GROUPS)
    if raw_groups:
        try:
            parsed = orjson.loads(raw_groups)
            if not isinstance(parsed, list) or not all(isinstance(g, str) for g in parsed):
                raise TypeError
            groups = tuple(JobKey(g) for g in parsed)
        except (orjson.JSONDecodeError, TypeError):
            warnings.append(f"{L.KOORD_GROUPS} {raw_groups!r} is not a JSON list of "
                            f"namespace/name; ignored")
    wait = None
    raw_wait = get(L.KOORD_WAITING_TIME)
    if raw_wait:
        try:
            wait = parse_duration(raw_wait)
        except ValueError:
            warnings.append(f"{L.KOORD_WAITING_TIME} {raw_wait!r} is not a duration; "
                            f"using the default")
    raw_total = get(L.KOORD_TOTAL)
    if raw_total:
        try:
            if int(raw_total) < 1:
                raise ValueError
        except ValueError:
            warnings.append(f"{L.KOORD_TOTAL} {raw_total!r} is not a positive integer; ignored")
    return mode, groups, wait, warnings
