"""ProvisioningRequests read back: only those a kaisched PodGroup owns, their pod sets, the
try they are, and the state the autoscaler's strongest holding condition gives."""
from __future__ import annotations

from typing import Any

import pytest

from kaisched.api.clock import from_rfc3339
from kaisched.api.provisioning import CapacityState, PodSet
from kaisched.cache.convert.provisioning import capacity_request

OWNER = {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup", "name": "big",
         "uid": "u1"}


def request(conditions: list[dict[str, Any]] = (), owner: dict | None = OWNER,  # type: ignore[assignment]
            attempt: str | None = "2") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "big-ab12cd34", "namespace": "team-a",
                            "creationTimestamp": "2026-01-01T00:00:00Z"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    if attempt is not None:
        meta["annotations"] = {"kaisched.io/provisioning-attempt": attempt}
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": meta,
            "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                     "podSets": [{"podTemplateRef": {"name": "big-t-0"}, "count": 2},
                                 {"podTemplateRef": {"name": "big-t-1"}, "count": 1}]},
            "status": {"conditions": list(conditions)}}


def cond(kind: str, status: str = "True", when: str = "2026-01-01T00:05:00Z",
         message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": kind, "message": message,
            "lastTransitionTime": when}


def test_a_request_reads_back() -> None:
    got = capacity_request(request())
    assert got is not None
    assert (got.key, got.job, got.attempt) == ("team-a/big-ab12cd34", "team-a/big", 2)
    assert got.pod_sets == (PodSet("big-t-0", 2), PodSet("big-t-1", 1)) and got.pods == 3
    assert got.state is CapacityState.WAITING and got.since == got.creation


@pytest.mark.parametrize(("conditions", "state"), [
    ([cond("Accepted")], CapacityState.ACCEPTED),
    ([cond("Accepted"), cond("Provisioned")], CapacityState.PROVISIONED),
    ([cond("Accepted"), cond("Provisioned", "False")], CapacityState.ACCEPTED),
    ([cond("Provisioned"), cond("BookingExpired")], CapacityState.BOOKING_EXPIRED),
    ([cond("Failed", message="no node group fits")], CapacityState.FAILED),
    ([cond("Provisioned"), cond("CapacityRevoked")], CapacityState.CAPACITY_REVOKED),
])
def test_the_strongest_holding_condition_gives_the_state(conditions: list, state: CapacityState) -> None:
    got = capacity_request(request(conditions))
    assert got is not None and got.state is state
    assert got.since == from_rfc3339("2026-01-01T00:05:00Z") or state is CapacityState.WAITING


def test_only_a_kaisched_podgroup_s_request_is_read() -> None:
    assert capacity_request(request(owner=None)) is None
    assert capacity_request(request(owner={**OWNER, "apiVersion": "kueue.x-k8s.io/v1beta1",
                                           "kind": "Workload"})) is None


def test_a_missing_or_bad_attempt_is_the_first() -> None:
    assert capacity_request(request(attempt=None)).attempt == 1      # type: ignore[union-attr]
    assert capacity_request(request(attempt="x")).attempt == 1       # type: ignore[union-attr]
