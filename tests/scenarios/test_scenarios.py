"""Scenario tests: plain Kubernetes YAML under tests/scenarios/, each with a
sibling NAME.expect.yaml of the decisions expected, run through the same code
as `kaisched replay`.

Expectation keys (all optional): kubeVersion (the objects are first checked
as `kaisched replay --kube-version` does, against that version's API: what it
would refuse is skipped), refused (substrings, one per object that version
refuses; none may be refused otherwise), sessions, bindings (exact map),
evictions (exact set), pipelined (exact map), podGroups (per PodGroup: phase,
minMember, `reason` of the Scheduled condition, `message`: substrings of its
message, `status`: fields of the status, each exactly, and `condition`: the
condition of that type -- an upstream PodGroup's -- with its status and
reason, and substrings of its message),
podMessages (per pod: substrings of its PodScheduled=False message),
podReasons (per pod: the reason of its PodScheduled=False condition),
evictionReasons (per pod: substring of the eviction message), staleSince
and lastMovedTime (per PodGroup: the status timers), volumeClaims (per PVC: selectedNode, its
volume.kubernetes.io/selected-node annotation, and volumeName; null: unset),
claims (per ResourceClaim: its allocated devices as driver/pool/device and the
pods it is reserved for -- a PodGroup as podgroups/<name> -- or null when it is
not allocated; `nodes`, when given: the node selector of its allocation, as
`node/<name>` or `label-key In v1,v2` terms), sharedGpus (per node: the pods
that share each of its GPUs, as their runai-gpu-group labels say, each GPU's
pods sorted), reservations (per node: how many reservation pods hold its shared
GPUs; each must hold a GPU some pod there shares), gpuQueues (per Queue: its
status's allocated nvidia.com/gpu).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kaisched.api.gpuask import GPU_GROUP, RESERVATION_APP, RESERVATION_NAMESPACE, groups_of
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD, PODGROUP, PVC, QUEUE, RESOURCE_CLAIMS
from kaisched.cluster.snapshot import load_file
from kaisched.framework import default_config, load_config
from kaisched.tools.replay import replay
from kaisched.validation import KUBERNETES_VERSION, partition, summarize, use_kube_version
from tests.builders import SCENARIOS

CASES = sorted(p for p in SCENARIOS.glob("*.yaml") if not p.name.endswith(".expect.yaml"))
# Scenarios written for what kaisched does not do yet, and why (strict: once
# they pass, the mark must go).
PENDING: dict[str, str] = {}


def run(path: Path, sessions: int = 1):
    loaded = load_file(path)
    registry = register_builtins()
    config = load_config(loaded.config, registry) if loaded.config else default_config(registry)
    return replay(loaded.objects, config, registry, sessions)


def admitted(path: Path, kube_version: str) -> tuple[list[dict], list[str]]:
    """The objects that version's API server accepts, and a line per one it refuses."""
    use_kube_version(kube_version)
    try:
        kept, problems = partition(load_file(path, check_kinds=False).objects)
    finally:
        use_kube_version(KUBERNETES_VERSION)
    return kept, summarize(problems)


def _substrings(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=PENDING[p.stem]))
    if p.stem in PENDING else p for p in CASES], ids=[p.stem for p in CASES])
def test_scenario(path: Path) -> None:
    expect = yaml.safe_load(path.with_name(path.stem + ".expect.yaml").read_text())
    if "kubeVersion" in expect:
        objects, refused = admitted(path, str(expect["kubeVersion"]))
        wanted = expect.get("refused") or []
        assert len(refused) == len(wanted), refused
        for part in wanted:
            assert any(part in line for line in refused), (part, refused)
        registry = register_builtins()
        own = load_file(path, check_kinds=False).config     # a Snapshot's config, if it has one
        config = load_config(own, registry) if own else default_config(registry)
        result = replay(objects, config, registry, expect.get("sessions", 1))
    else:
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
        if "condition" in want:
            said = want["condition"]
            cond = next((c for c in got["conditions"] if c["type"] == said["type"]), {})
            for field in ("status", "reason"):
                if field in said:
                    assert cond.get(field) == said[field], f"{key}: {cond}"
            for part in _substrings(said.get("message", [])):
                assert part in cond.get("message", ""), f"{key}: {cond}"
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
    for field in ("staleSince", "lastMovedTime"):
        for key, since in (expect.get(field) or {}).items():
            ns, name = key.split("/")
            assert (result.cluster.get(PODGROUP, ns, name).get("status") or {}).get(field) == since, key
    for key, want in (expect.get("claims") or {}).items():
        nodes = want.pop("nodes", None) if isinstance(want, dict) else None
        assert claim_state(result.cluster, key) == want, key
        if nodes is not None:
            assert allocation_nodes(result.cluster, key) == nodes, key
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
            "reservedFor": sorted(r["name"] if r.get("resource", "pods") == "pods"
                                  else f"{r['resource']}/{r['name']}"
                                  for r in status.get("reservedFor") or [])}


def allocation_nodes(cluster, key: str) -> list[str]:
    """Where a claim's allocation lets its pods run: node/<name>, or one line
    per selector term ("rack In r1"); [] for anywhere."""
    ns, name = key.split("/")
    claim = next(c for c in (cluster.get(k, ns, name) for k in RESOURCE_CLAIMS) if c)
    terms = (((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
             or {}).get("nodeSelectorTerms") or []
    out = []
    for term in terms:
        fields = term.get("matchFields") or []
        if len(fields) == 1 and fields[0]["key"] == "metadata.name" and not term.get("matchExpressions"):
            out += [f"node/{v}" for v in fields[0]["values"]]
        else:
            out.append(", ".join(f"{r['key']} {r['operator']} {','.join(r.get('values') or [])}"
                                 for r in term.get("matchExpressions") or []))
    return out


def test_every_scenario_has_expectations() -> None:
    assert CASES, "no scenarios found"
    for path in CASES:
        assert path.with_name(path.stem + ".expect.yaml").exists(), path
