"""What every reader shares: the raw object type, metadata and quantity maps."""
from __future__ import annotations

import functools
import math
from typing import Any

import orjson

from kaisched.api.resource import Resource

Obj = dict[str, Any]
# What reading a malformed object raises: the cache keeps it as unusable, with why.
MALFORMED = (AttributeError, TypeError, ValueError, KeyError)


def metadata(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def label(obj: Obj, key: str) -> str | None:
    """The value of one of the object's labels (None: absent or empty)."""
    labels = metadata(obj).get("labels")
    value = labels.get(key) if isinstance(labels, dict) else None
    return str(value) if value else None


def quantities(raw: Any, where: str, problems: list[str]) -> Resource:
    """A map of resource name to quantity; a bad one adds a problem and counts
    as empty. Read once per distinct map (the nodes of a pool report alike)."""
    if not raw:
        return Resource()
    if not isinstance(raw, dict):
        problems.append(f"{where}: expected a map of quantities")
        return Resource()
    key = json_key(raw)
    if key is None:
        return _quantities(raw, where, problems)
    res, found = _quantities_of(key, where)
    problems.extend(found)
    return res


@functools.lru_cache(maxsize=4096)
def _quantities_of(key: bytes, where: str) -> tuple[Resource, tuple[str, ...]]:
    problems: list[str] = []
    return _quantities(orjson.loads(key), where, problems), tuple(problems)


def _quantities(raw: Obj, where: str, problems: list[str]) -> Resource:
    try:
        res = Resource.from_quantities(raw)
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return Resource()
    # A negative amount would hand room back to the node it lands on.
    negative = next((name for name, value in res.items if value < 0), None)
    if negative is not None:
        problems.append(f"{where}: {negative}: negative quantity {raw[negative]!r}")
        return Resource()
    return res


def json_key(value: object) -> bytes | None:
    """The value's JSON text, as the key of what is read of it, or None when
    no key stands for it alone: a value JSON cannot hold, or a number JSON
    writes as null (only a hand-written file has either)."""
    try:
        key = orjson.dumps(value)
    except TypeError:
        return None
    if key.find(b"null") != -1 and not finite(value):
        return None
    return key


def finite(value: object) -> bool:
    """Whether no number in the value is infinite or NaN. orjson writes one as
    null, so a JSON key with a null may stand for another value too (only a
    hand-written file holds such a number): asked only of a key with a null."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(finite(v) for v in value)
    return True
