"""ProvisioningRequests the scheduler made: read back from their PodGroup
owner, their pod sets and the autoscaler's conditions."""
from __future__ import annotations

from typing import Any

from kaisched.api.clock import from_rfc3339
from kaisched.api.provisioning import ATTEMPT_ANNOTATION, CapacityRequest, CapacityState, PodSet
from kaisched.api.types import JobKey
from kaisched.cache.convert.common import Obj, metadata

# The condition that decides the state, strongest first.
_ORDER = (CapacityState.CAPACITY_REVOKED, CapacityState.BOOKING_EXPIRED, CapacityState.FAILED,
          CapacityState.PROVISIONED, CapacityState.ACCEPTED)


def capacity_request(obj: Obj) -> CapacityRequest | None:
    """The request, or None when no PodGroup of this scheduler owns it (a
    request of a user's, or of another tool, is none of its business)."""
    meta = metadata(obj)
    namespace = str(meta.get("namespace") or "default")
    owner = next((ref for ref in meta.get("ownerReferences") or ()
                  if isinstance(ref, dict) and ref.get("kind") == "PodGroup"
                  and str(ref.get("apiVersion", "")).startswith("scheduling.kaisched.io/")), None)
    if owner is None:
        return None
    spec, status = _mapping(obj.get("spec")), _mapping(obj.get("status"))
    sets = []
    for item in spec.get("podSets") or ():
        if isinstance(item, dict):
            ref = _mapping(item.get("podTemplateRef"))
            count = item.get("count")
            sets.append(PodSet(str(ref.get("name", "")),
                               count if isinstance(count, int) and not isinstance(count, bool) else 0))
    holding = {c.get("type"): c for c in status.get("conditions") or ()
               if isinstance(c, dict) and c.get("status") == "True"}
    creation = from_rfc3339(meta.get("creationTimestamp")) or 0.0
    state, since, message = CapacityState.WAITING, creation, ""
    for candidate in _ORDER:
        cond = holding.get(candidate.value)
        if cond is not None:
            state = candidate
            since = from_rfc3339(cond.get("lastTransitionTime")) or creation
            message = str(cond.get("message") or cond.get("reason") or "")
            break
    attempt = _int((meta.get("annotations") or {}).get(ATTEMPT_ANNOTATION), 1)
    return CapacityRequest(
        namespace=namespace, name=str(meta.get("name", "")),
        job=JobKey(f"{namespace}/{owner.get('name', '')}"),
        class_name=str(spec.get("provisioningClassName", "")), pod_sets=tuple(sets),
        state=state, since=since, message=message, attempt=attempt, creation=creation)


def _int(raw: Any, default: int) -> int:
    try:
        return max(1, int(str(raw)))
    except ValueError:
        return default


def _mapping(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}
