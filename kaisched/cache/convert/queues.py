"""Queues: spec as QueueInfo, the status kaisched last wrote, and the status it writes back."""
from __future__ import annotations

from typing import Any

from kaisched.api.clock import from_rfc3339, to_rfc3339
from kaisched.api.quantity import parse_duration, parse_quantity
from kaisched.api.queue import Amounts, Bucket, QueueInfo, QueueStatus, UsageRecord
from kaisched.api.queue_status import canonical
from kaisched.api.types import QueueName
from kaisched.cache.convert.common import Obj, metadata, quantities

# Queue.status field -> QueueStatus attribute, for the amount maps.
_QUEUE_AMOUNTS = (("allocated", "allocated"), ("fairShare", "fair_share"), ("quota", "quota"),
                  ("limit", "limit"))


def queue(obj: Obj) -> QueueInfo:
    meta, spec = metadata(obj), obj.get("spec") or {}
    problems: list[str] = []
    quota: dict[str, Any] = {}
    limits: list[tuple[str, float]] = []
    weights: list[tuple[str, float]] = []
    resources = spec.get("resources") or {}
    if not isinstance(resources, dict):
        problems.append("spec.resources must be a map of resource name to {quota, limit, overQuotaWeight}")
        resources = {}
    for name, entry in sorted(resources.items()):
        if not isinstance(entry, dict):
            problems.append(f"spec.resources.{name} must be a map")
            continue
        if "quota" in entry:
            quota[name] = entry["quota"]
        if "limit" in entry:
            got = quantities({name: entry["limit"]}, f"spec.resources.{name}.limit", problems)
            limits.append((name, got.get(name)))
        if "overQuotaWeight" in entry:
            weight = entry["overQuotaWeight"]
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                problems.append(f"spec.resources.{name}.overQuotaWeight must be a number >= 0")
            else:
                weights.append((name, float(weight)))
    autoscaling = spec.get("autoscaling")
    if autoscaling is not None and not isinstance(autoscaling, bool):
        problems.append(f"spec.autoscaling must be true or false, not {autoscaling!r}")
        autoscaling = None
    expected = min_runtime(spec, "expectedRuntime", problems)
    return QueueInfo(
        **queue_basics(meta, spec, problems),
        autoscaling=autoscaling,
        expected_runtime=expected or None,
        quota=quantities(quota, "spec.resources.*.quota", problems),
        limits=tuple(limits), weights=tuple(weights),
        problem="; ".join(problems) or None,
        declared=True,
        status=queue_status(obj.get("status")),
        usage=usage_record((obj.get("status") or {}).get("usage")),
    )


def queue_basics(meta: Obj, spec: Obj, problems: list[str]) -> dict[str, Any]:
    """What a kaisched Queue and a KAI Queue say alike: name, parent,
    priority (default 100), creation and the min-runtimes. Its problems are
    added to problems, which must be read after this is called."""
    priority = spec.get("priority", 100)
    preempt_min, reclaim_min = (min_runtime(spec, key, problems)
                                for key in ("preemptMinRuntime", "reclaimMinRuntime"))
    return {
        "name": QueueName(meta.get("name", "")),
        "parent": QueueName(spec["parentQueue"]) if spec.get("parentQueue") else None,
        "priority": priority if isinstance(priority, int) and not isinstance(priority, bool) else 100,
        "creation": from_rfc3339(meta.get("creationTimestamp")) or 0.0,
        "preempt_min_runtime": preempt_min, "reclaim_min_runtime": reclaim_min,
    }


def min_runtime(spec: Obj, key: str, problems: list[str]) -> float | None:
    """spec.preemptMinRuntime / reclaimMinRuntime / expectedRuntime: a duration
    ("10m"); absent, None."""
    if spec.get(key) is None:
        return None
    try:
        return parse_duration(spec[key])
    except ValueError as exc:
        problems.append(f"spec.{key}: {exc}")
        return None


def queue_status(raw: Any) -> QueueStatus | None:
    """The Queue status kaisched wrote last; None when there is none or it is
    not one kaisched could have written (it is then written again)."""
    if not isinstance(raw, dict) or not raw:
        return None
    fields: dict[str, Any] = {}
    try:
        for key, attr in _QUEUE_AMOUNTS:
            entries = raw.get(key) or {}
            values = []
            for name, quantity in entries.items():
                amount = parse_quantity(quantity) * (1000 if name == "cpu" else 1)
                values.append((str(name), canonical(str(name), float(amount))))
            fields[attr] = tuple(sorted(values))
    except (AttributeError, ValueError):
        return None
    for key, attr in (("runningJobs", "running_jobs"), ("pendingJobs", "pending_jobs")):
        count = raw.get(key, 0)
        if isinstance(count, bool) or not isinstance(count, int):
            return None
        fields[attr] = count
    return QueueStatus(**fields)


def quantity_text(name: str, value: float) -> str:
    """An amount as a Kubernetes quantity: "4", "2500m", "16Gi", "1536Mi";
    a share of GPUs as a decimal ("1.5"), as `kubectl get queues` shows it."""
    if name == "cpu":                      # held in millicores
        milli = round(value)
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    amount = canonical(name, value)
    if amount != int(amount):
        return f"{amount:.3f}".rstrip("0")
    whole = int(amount)
    for suffix, unit in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if name == "memory" and whole and whole % unit == 0:
            return f"{whole // unit}{suffix}"
    return str(whole)


def queue_status_dict(status: QueueStatus, previous: QueueStatus | None) -> Obj:
    """The Queue status as written back (a merge patch): amounts the previous
    status had and this one has not are cleared."""
    def amounts(new: Amounts, old: Amounts) -> Obj:
        out: Obj = {name: None for name, _ in old}
        out.update({name: quantity_text(name, value) for name, value in new})
        return out
    out: Obj = {key: amounts(getattr(status, attr), getattr(previous, attr) if previous else ())
                for key, attr in _QUEUE_AMOUNTS}
    out["runningJobs"] = status.running_jobs
    out["pendingJobs"] = status.pending_jobs
    return out


# status.usage holds cpu in cores (as the metrics do), everything else in its own unit.
def _to_status(name: str, value: float) -> float:
    return value / 1000 if name == "cpu" else value


def _from_status(name: str, value: float) -> float:
    return value * 1000 if name == "cpu" else value


def usage_record(raw: Any) -> UsageRecord | None:
    """status.usage as kaisched wrote it; None when absent or not of its shape
    (a queue's usage then starts afresh, which is also how it is reset)."""
    if not isinstance(raw, dict) or not raw:
        return None
    try:
        updated = from_rfc3339(raw.get("updated"))
        buckets = tuple(
            Bucket(float(b["start"]), float(b["seconds"]), _amounts(b.get("held")),
                   _amounts(b.get("capacity")))
            for b in raw.get("buckets") or ())
        normalized = tuple(sorted((str(n), float(v)) for n, v in
                                  (raw.get("normalized") or {}).items()))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    if updated is None:
        return None
    return UsageRecord(buckets, normalized, updated)


def _amounts(raw: Any) -> Amounts:
    return tuple(sorted((str(n), _from_status(str(n), float(v))) for n, v in (raw or {}).items()))


def usage_status_dict(usage: UsageRecord, previous: UsageRecord | None) -> Obj:
    """status.usage as written back (a merge patch: the bucket list is
    replaced whole, resources no longer normalised are cleared)."""
    normalized: Obj = {name: None for name, _ in (previous.normalized if previous else ())}
    normalized.update({name: value for name, value in usage.normalized})
    return {
        "updated": to_rfc3339(usage.updated),
        "normalized": normalized,
        "buckets": [{"start": round(b.start, 3), "seconds": round(b.seconds, 3),
                     "held": {n: _to_status(n, v) for n, v in b.held},
                     "capacity": {n: _to_status(n, v) for n, v in b.offered}}
                    for b in usage.buckets],
    }
