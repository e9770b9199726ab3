"""Core v1 Event objects, as the binder and the PodGrouper write them."""
from __future__ import annotations

import datetime as _dt

from kaisched.api.clock import to_rfc3339
from kaisched.cluster.client import Obj


def micro_time(ts: float) -> str:
    """A MicroTime (Lease renewals, an Event series' lastObservedTime)."""
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def object_reference(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    ref = {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", ""),
           "name": meta.get("name", ""), "uid": meta.get("uid", "")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    return ref


def event_object(involved: Obj, type_: str, reason: str, message: str,
                 component: str, now: float) -> Obj:
    """A v1 Event about involved (an object reference), named the way kubectl expects."""
    namespace = involved.get("namespace") or "default"
    stamp = to_rfc3339(now)
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{involved.get('name', 'object')}.", "namespace": namespace},
        "involvedObject": involved, "type": type_, "reason": reason, "message": message,
        "source": {"component": component}, "firstTimestamp": stamp, "lastTimestamp": stamp,
        "count": 1, "reportingComponent": component,
    }
