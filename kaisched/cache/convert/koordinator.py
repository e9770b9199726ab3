"""Koordinator's gang annotations: the optional ones fall back to their
defaults when they do not parse, as Koordinator does, with a warning naming
the bad value (a waiting-time of 0 or below, too); min-available must parse
(an integer, 0 included), on at least one pod of the gang: the gang takes its
settings from the first such pod, by name, and the others belong to it all
the same (Koordinator's gang cache tests). A Koordinator PodGroup carries the
same optional annotations, read alike."""
from __future__ import annotations

from typing import Callable

import orjson

from kaisched.api import labels as L
from kaisched.api.quantity import parse_duration
from kaisched.api.types import GangMode, JobKey

Get = Callable[[str], "str | None"]


def min_available(raw: str | None) -> int | None:
    """min-available as Koordinator parses it (strconv.ParseInt): any integer;
    0 or below asks for no gang at all, a gang of one here. None: it does not parse."""
    if raw is None:
        return None
    try:
        return max(int(raw.strip()), 1)
    except ValueError:
        return None


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
        if wait is not None and wait < 0:
            warnings.append(f"{L.KOORD_WAITING_TIME} {raw_wait!r} is negative; using the default")
        if wait is not None and wait <= 0:
            wait = None         # 0 asks for the default, as in Koordinator
    raw_total = get(L.KOORD_TOTAL)
    if raw_total:
        try:
            if int(raw_total) < 1:
                raise ValueError
        except ValueError:
            warnings.append(f"{L.KOORD_TOTAL} {raw_total!r} is not a positive integer; ignored")
    return mode, groups, wait, warnings
