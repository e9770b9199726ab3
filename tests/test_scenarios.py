"""Scenario tests: plain Kubernetes YAML under tests/scenarios/, each with a
sibling NAME.expect.yaml of the decisions expected, run through the same code
as `kaisched replay`.

Expectation keys (all optional): sessions, bindings (exact map),
evictions (exact set), pipelined (exact map), podGroups (per PodGroup: phase,
minMember, and `message`: substrings of the Scheduled condition's message),
podMessages (per pod: substrings of its PodScheduled=False message),
evictionReasons (per pod: substring of the eviction message), staleSince
(per PodGroup: the status timer), volumeClaims (per PVC: selectedNode, its
volume.kubernetes.io/selected-node annotation, and volumeName; null: unset),
claims (per ResourceClaim: its allocated devices as driver/pool/device and the
pods it is reserved for, or null when it is not allocated), sharedGpus (per
node: the pods that share each of its GPUs, as their runai-gpu-group labels
say, each GPU's pods sorted), reservations (per node: how many reservation pods
hold its shared GPUs; each must hold a GPU some pod there shares), gpuQueues
(per Queue: its status's allocated nvidia.com/gpu).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kaisched.api.gpushare import GPU_GROUP, RESERVATION_APP, RESERVATION_NAMESPACE, groups_of
from kaisched.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP, PVC, QUEUE, RESOURCE_CLAIMS
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
        for part in _substrings(want.get("message", [])):
            assert part in cond.get("message", ""), f"{key}: {cond}"
    for key, parts in (expect.get("podMessages") or {}).items():
        ns, name = key.split("/")
        pod = result.cluster.get(POD, ns, name)
        cond = next((c for c in (pod.get("status") or {}).get("conditions", [])
                     if c["type"] == "PodScheduled"), {})
        assert cond.get("status") == "False", f"{key}: {cond}"
        for part in _substrings(parts):
            assert part in cond.get("message", ""), f"{key}: {cond}"
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
    shared = shared_gpus(result.cluster)
    for node, want in (expect.get("sharedGpus") or {}).items():
        assert shared.get(node, []) == sorted(sorted(g) for g in want), f"{node}: {shared}"
    if "reservations" in expect:
        held = reservations(result.cluster)
        for node, count in (expect["reservations"] or {}).items():
            assert len(held.get(node, [])) == count, f"{node}: {held}"
        for node, groups in held.items():
            sharing = {g for pod in result.cluster.list(POD) if pod["spec"].get("nodeName") == node
                       for g in groups_of(pod["metadata"].get("labels") or {})}
            assert set(groups) <= sharing, f"{node}: reservation pods of GPUs nobody shares"
    for name, want in (expect.get("gpuQueues") or {}).items():
        status = result.cluster.get(QUEUE, "", name).get("status") or {}
        assert (status.get("allocated") or {}).get("nvidia.com/gpu") == want, f"{name}: {status}"


def shared_gpus(cluster) -> dict[str, list[list[str]]]:
    """Per node, the pods sharing each GPU (by their group labels)."""
    by_group: dict[tuple[str, str], list[str]] = {}
    for pod in cluster.list(POD):
        meta, node = pod["metadata"], pod["spec"].get("nodeName")
        labels = meta.get("labels") or {}
        if not node or meta["namespace"] == RESERVATION_NAMESPACE or labels.get("app"):
            continue
        for group in groups_of(labels):
            by_group.setdefault((node, group), []).append(f"{meta['namespace']}/{meta['name']}")
    out: dict[str, list[list[str]]] = {}
    for (node, _), pods in sorted(by_group.items()):
        out.setdefault(node, []).append(sorted(pods))
    return {node: sorted(groups) for node, groups in out.items()}


def reservations(cluster) -> dict[str, list[str]]:
    """Per node, the groups kaisched's reservation pods (not being deleted) hold."""
    out: dict[str, list[str]] = {}
    for pod in cluster.list(POD, RESERVATION_NAMESPACE):
        meta = pod["metadata"]
        if (meta.get("labels") or {}).get("app") == RESERVATION_APP and not meta.get("deletionTimestamp"):
            out.setdefault(pod["spec"]["nodeName"], []).append(meta["labels"][GPU_GROUP])
    return out


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
