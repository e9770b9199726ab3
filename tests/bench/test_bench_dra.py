"""dra-1k builds what it claims and places every gang (at a tiny scale; the
figure is `kaisched bench dra-1k`)."""
from __future__ import annotations

from kaisched.bench.dra import GPUS, dra_1k
from kaisched.bench.scenarios import run


def test_dra_1k_builds_nodes_slices_and_claimed_gangs() -> None:
    nodes, objs = dra_1k(0.01)
    kinds = [o["kind"] for o in objs]
    assert len(nodes) == 10
    assert kinds.count("ResourceSlice") == 10 and kinds.count("DeviceClass") == 1
    slices = [o for o in objs if o["kind"] == "ResourceSlice"]
    assert all(len(s["spec"]["devices"]) == GPUS for s in slices)
    pods = [o for o in objs if o["kind"] == "Pod"]
    claims = {o["metadata"]["name"] for o in objs if o["kind"] == "ResourceClaim"}
    assert len(pods) == 80
    for pod in pods:
        made = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        assert made in claims


def test_dra_1k_places_every_gang() -> None:
    figures = run("dra-1k", 0.01)
    assert figures["placed"] == figures["pods"] == 80
