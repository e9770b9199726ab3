"""Scenario tests: plain Kubernetes YAML under tests/scenarios/, each with a
sibling NAME.expect.yaml of the decisions expected, run through the same code
as `kaisched replay`.

Expectation keys (all optional): sessions, bindings (exact map),
evictions (exact set), pipelined (exact map), podGroups (per PodGroup: phase,
minMember, `reason` of the Scheduled condition, `message`: substrings of its
message, and `status`: fields of the status, each exactly),
podMessages (per pod: substrings of its PodScheduled=False message),
podReasons (per pod: the reason of its PodScheduled=False condition),
evictionReasons (per pod: substring of the eviction message), staleSince
(per PodGroup: the status timer), volumeClaims (per PVC: selectedNode, its
volume.kubernetes.io/selected-node annotation, and volumeName; null: unset),
claims (per ResourceClaim: its allocated devices as driver/pool/device and the
pods it is reserved for, or null when it is not allocated).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kaisched.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP, PVC, RESOURCE_CLAIMS
from kaisched.cluster.snapshot import load_file
from kaisched.framework import default_config, load_config
from kaisched.tools.replay import replay

SCENARIOS = Path(__file__).parent / "scenarios"
CASES = sorted(p for p in SCENARIOS.glob("*.yaml") if not p.name.endswith(".expect.yaml"))


def run(path: Path, sessions: int = 1):
    loaded = load_file(path)
    registry = register_builtins()
    config = load_config(loaded.config, registry) if loaded.config else default_config(registry)
    return replay(loaded.objects, config, registry, sessions)


def _substrings(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_scenario(path: Path) -> None:
    expect = yaml.safe_load(path.with_name(path.stem + ".expect.yaml").read_text())
    result = run(path, expect.get("sessions", 1))
    if "bindings" in expect:
        assert result.bindings == (expect["bindings"] or {})
    if "evictions" in expect:
        assert sorted(result.evictions) == sorted(expect["evictions"] or [])
        assert len(result.evictions) == len(set(result.evictions)), "a pod was evicted twice"
    if "pipelined" in expect:
        assert result.pipelined == (expect["pipelined"] or {})
    for key, want in (expect.get("podGroups") or {}).items():
        got = result.pod_groups[key]
        for field in ("phase", "minMember"):
            if field in want:
                assert got[field] == want[field], f"{key}.{field}"
        cond = next((c for c in got["conditions"] if c["type"] == "Scheduled"), {})
        if "reason" in want:
            assert cond.get("reason") == want["reason"], f"{key}: {cond}"
        for part in _substrings(want.get("message", [])):
            assert part in cond.get("message", ""), f"{key}: {cond}"
        if "status" in want:
            ns, name = key.split("/")
            status = result.cluster.get(PODGROUP, ns, name).get("status") or {}
            assert {k: status.get(k) for k in want["status"]} == want["status"], f"{key}: {status}"
    for key, parts in (expect.get("podMessages") or {}).items():
        ns, name = key.split("/")
        pod = result.cluster.get(POD, ns, name)
        cond = next((c for c in (pod.get("status") or {}).get("conditions", [])
                     if c["type"] == "PodScheduled"), {})
        assert cond.get("status") == "False", f"{key}: {cond}"
        for part in _substrings(parts):
            assert part in cond.get("message", ""), f"{key}: {cond}"
    for key, reason in (expect.get("podReasons") or {}).items():
        ns, name = key.split("/")
        pod = result.cluster.get(POD, ns, name)
        cond = next((c for c in (pod.get("status") or {}).get("conditions", [])
                     if c["type"] == "PodScheduled"), {})
        assert (cond.get("status"), cond.get("reason")) == ("False", reason), f"{key}: {cond}"
    for key, part in (expect.get("evictionReasons") or {}).items():
        assert part in result.eviction_reasons[key], result.eviction_reasons
    for key, want in (expect.get("volumeClaims") or {}).items():
        ns, name = key.split("/")
        pvc = result.cluster.get(PVC, ns, name)
        got = {"selectedNode": (pvc["metadata"].get("annotations") or {}).get(
                   "volume.kubernetes.io/selected-node"),
               "volumeName": (pvc.get("spec") or {}).get("volumeName")}
        assert {k: got[k] for k in want} == want, f"{key}: {got}"
    for key, since in (expect.get("staleSince") or {}).items():
        ns, name = key.split("/")
        assert (result.cluster.get(PODGROUP, ns, name).get("status") or {}).get("staleSince") == since
    for key, want in (expect.get("claims") or {}).items():
        assert claim_state(result.cluster, key) == want, key


def claim_state(cluster, key: str) -> dict | None:
    """A ResourceClaim's allocated devices and reservations, as expectations name them."""
    ns, name = key.split("/")
    claim = next(c for c in (cluster.get(k, ns, name) for k in RESOURCE_CLAIMS) if c)
    status = claim.get("status") or {}
    if not status.get("allocation"):
        assert not status.get("reservedFor"), f"{key}: reserved but not allocated"
        return None
    results = status["allocation"]["devices"]["results"]
    return {"devices": sorted(f"{r['driver']}/{r['pool']}/{r['device']}" for r in results),
            "reservedFor": sorted(r["name"] for r in status.get("reservedFor") or [])}


def test_every_scenario_has_expectations() -> None:
    assert CASES, "no scenarios found"
    for path in CASES:
        assert path.with_name(path.stem + ".expect.yaml").exists(), path
