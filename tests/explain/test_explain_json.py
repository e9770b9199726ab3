"""`explain -o json` is structure, not prose: per gang its counts and reasons as {code,
node_count, need, best_free, resource}; per node fits or the first filter that refuses, in
numbers; per queue quota, use, fair share and what is missing. The fields are read from what
the cycle recorded (rewording every message changes none of them), and docs/explain-json.md
lists exactly the fields printed."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.framework.explanation import Explanation
from tests.builders import ROOT

GANG = str(ROOT / "config" / "examples" / "gang.yaml")
SUBGROUPS = str(ROOT / "tests" / "scenarios" / "subgroups-tree-short.yaml")
INVALID_SHARE = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {nvidia.com/gpu.count: "1"}}
status:
  allocatable: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "1", pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: default, annotations: {gpu-fraction: "1.5"}}
spec:
  schedulerName: kaisched
  containers: [{name: c, image: i, resources: {requests: {cpu: "1"}}}]
"""


def explain(name: str, snapshot: str, *more: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["explain", name, "--snapshot", snapshot, "-o", "json", *more])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def test_a_gang_that_does_not_fit_in_numbers() -> None:
    data = explain("research/llm", GANG)
    assert data["schema"] == "kaisched.io/explain/v1"
    gang = data["gang"]
    assert (gang["minMember"], gang["pods"], gang["placed"], gang["wouldBind"],
            gang["pipelined"], gang["waiting"], gang["blocker"]) == (2, 2, 0, 0, 0, True,
                                                                     "resources")
    assert gang["reasons"] == [{"code": "resources", "filter": "resources", "node_count": 1,
                                "resource": "nvidia.com/gpu", "need": 4, "best_free": 5,
                                "pods": 2}]
    together = gang["together"]
    assert (together["pods"], together["couldHold"], together["short"]) == (2, 1, 1)
    assert [(n["node"], n["holds"], n["runsOut"]) for n in together["nodes"]] == [
        ("gpu-node-1", 0, [{"resource": "nvidia.com/gpu", "free": 1, "perPod": 4}]),
        ("gpu-node-2", 1, [{"resource": "nvidia.com/gpu", "free": 5, "perPod": 4}])]
    assert together["resources"] == [{"resource": "nvidia.com/gpu", "need": 8, "free": 6,
                                      "nodes": 2, "short": 2}]
    queue = data["queueStatus"]
    assert queue["quota"] == {"nvidia.com/gpu": 4} and queue["limits"] == {"nvidia.com/gpu": 12}
    assert queue["fairShare"]["nvidia.com/gpu"] == 6 and queue["inUse"]["cpu"] == 2
    assert queue["waitingNeeds"] == {"cpu": 16, "memory": 128 << 30, "nvidia.com/gpu": 8}
    assert queue["missing"] == {"overFairShare": {"nvidia.com/gpu": 2}, "overLimits": {}}
    pod = data["pods"][0]
    assert pod["requests"] == {"cpu": 8, "memory": 64 << 30, "nvidia.com/gpu": 4}
    assert pod["nodes"] == [
        {"node": "gpu-node-1", "fits": False, "code": "resources", "filter": "resources",
         "short": [{"resource": "nvidia.com/gpu", "need": 4, "free": 1}]},
        {"node": "gpu-node-2", "fits": True, "code": None, "filter": None, "short": []}]
    assert [(s["fits"], s["count"], s["examples"]) for s in pod["nodeSummary"]] == [
        (False, 1, ["gpu-node-1"]), (True, 1, ["gpu-node-2"])]


def test_a_placed_gang_has_no_reasons() -> None:
    gang = explain("research/bert", GANG)["gang"]
    assert (gang["waiting"], gang["wouldBind"], gang["reasons"], gang["together"]) == \
        (False, 4, [], None)


def test_an_invalid_gpu_share_is_refused_not_fitted(tmp_path: Path) -> None:
    """replay says InvalidPodGroup; explain says the same, and no node 'fits'."""
    path = tmp_path / "share.yaml"
    path.write_text(INVALID_SHARE)
    data = explain("default/p", str(path))
    assert data["gang"]["invalid"] and not data["gang"]["waiting"]
    assert data["gang"]["blocker"] == "invalid"
    assert "gpu-fraction '1.5': must be in (0, 1]" in data["gang"]["message"]
    assert [(p["refused"], p["nodes"]) for p in data["pods"]] == [(True, None)]
    text = CliRunner().invoke(main, ["explain", "default/p", "--snapshot", str(path)]).stdout
    assert "  refused (InvalidPodGroup): pod default/p: annotation gpu-fraction '1.5': " \
           "must be in (0, 1], the part of one GPU" in text
    assert "pod default/p: Pending, refused (InvalidPodGroup: see above); no node is tried" in text
    assert "fits" not in text


def test_rewording_every_message_changes_no_field(monkeypatch: pytest.MonkeyPatch) -> None:
    before = explain("research/llm", GANG)
    monkeypatch.setattr(Explanation, "_explain", lambda self, task: "reworded")
    monkeypatch.setattr(Explanation, "node", lambda self, task, node: "reworded")
    after = explain("research/llm", GANG)
    assert before["gang"].pop("message") != after["gang"].pop("message")
    assert before == after


def _paths(value: Any, prefix: str) -> set[str]:
    if isinstance(value, dict) and not prefix.rstrip(".").endswith(("quota", "limits", "fairShare", "inUse",
                                                        "usageOverWindow", "waitingNeeds",
                                                        "requests", "overFairShare",
                                                        "overLimits")):
        return {f"{prefix}{k}" for k in value} | {
            p for k, v in value.items() for p in _paths(v, f"{prefix}{k}.")}
    if isinstance(value, list):
        return {p for item in value for p in _paths(item, prefix[:-1] + "[].")}
    return set()


def test_the_documented_schema_is_the_printed_one(tmp_path: Path) -> None:
    share = tmp_path / "share.yaml"
    share.write_text(INVALID_SHARE)
    printed: set[str] = set()
    for name, snapshot in [("research/llm", GANG), ("research/bert", GANG),
                           ("default/serve", SUBGROUPS), ("default/p", str(share))]:
        printed |= _paths(explain(name, snapshot), "")
    page = (ROOT / "docs" / "explain-json.md").read_text()
    documented = set(re.findall(r"^\| `([\w.\[\]]+)` \|", page, flags=re.M))
    assert printed == documented


def test_a_reservation_in_numbers() -> None:
    """The starvation guard's reservation: its nodes, when its room is sure to be free (a
    Job's deadline) and likely free (a pod's estimate)."""
    data = explain("default/big", str(ROOT / "tests" / "scenarios"
                                      / "reservation-start-by-a-jobs-deadline.yaml"))
    gang = data["gang"]
    assert {k: v for k, v in gang.items() if k.startswith("reserv")} == {
        "reserved": True, "reservationNodes": ["n1"],
        "reservationStart": "2026-01-01T00:31:00Z",
        "reservationLikelyStart": "2026-01-01T00:10:05Z", "reservationMoved": None}
    assert explain("research/llm", GANG)["gang"]["reserved"] is False
