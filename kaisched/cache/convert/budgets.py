"""PodDisruptionBudgets (policy/v1): what a planned eviction may not break."""
from __future__ import annotations

from typing import Any

from kaisched.api.budgets import Amount, DisruptionBudget
from kaisched.cache.convert.common import Obj, metadata
from kaisched.cache.convert.rules import label_selector


def disruption_budget(obj: Obj) -> DisruptionBudget:
    meta = metadata(obj)
    spec, status = _mapping(obj.get("spec")), _mapping(obj.get("status"))
    namespace = str(meta.get("namespace") or "default")
    problems: list[str] = []
    minimum = _amount(spec.get("minAvailable"), "spec.minAvailable", problems)
    maximum = _amount(spec.get("maxUnavailable"), "spec.maxUnavailable", problems)
    allowed = status.get("disruptionsAllowed")
    raw = spec.get("selector")
    return DisruptionBudget(
        key=f"{namespace}/{meta.get('name', '')}", namespace=namespace,
        selector=label_selector(raw) if raw is not None else None,
        min_available=minimum, max_unavailable=maximum,
        status_allowed=allowed if isinstance(allowed, int) and not isinstance(allowed, bool)
        else None,
        problem="; ".join(problems) or None)


def _amount(raw: Any, where: str, problems: list[str]) -> Amount | None:
    """An int-or-string ("50%"); anything else is a problem."""
    if raw is None:
        return None
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return Amount(raw)
    if isinstance(raw, str):
        text = raw.strip()
        number = text[:-1] if text.endswith("%") else text
        if number.isdigit():
            return Amount(int(number), text.endswith("%"))
    problems.append(f"{where}: expected a count or a percentage, got {raw!r}")
    return None


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}
