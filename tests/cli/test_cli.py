"""The command line: replay and bench end to end; every error is one line."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from kaisched.cli import main
from tests.builders import ROOT

EXAMPLE = ROOT / "config" / "examples" / "gang.yaml"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result, *parts: str) -> None:
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output + result.stderr
    for part in parts:
        assert part in lines[0]


def test_replay_example_text() -> None:
    result = invoke("replay", str(EXAMPLE))
    assert result.exit_code == 0, result.output
    assert "research/bert-master-0 -> gpu-node-1" in result.output
    assert "research/llm  Pending" in result.output


def test_replay_text_shows_an_upstream_podgroups_condition() -> None:
    """An upstream PodGroup has no phase: its own condition is printed."""
    path = ROOT / "tests" / "scenarios" / "upstream-podgroup-claims.yaml"
    result = invoke("replay", str(path), "--kube-version", "1.37")
    assert result.exit_code == 0, result.output + result.stderr
    assert "default/train  scheduling.k8s.io/v1beta1  minCount=4  " \
           "PodGroupInitiallyScheduled=True Scheduled: 4/4 tasks scheduled" in result.output
    assert "default/wide  scheduling.k8s.io/v1beta1  minCount=3  " \
           "PodGroupInitiallyScheduled=False Unschedulable: 2/3 tasks placed" in result.output


def test_replay_json_shape() -> None:
    result = invoke("replay", str(EXAMPLE), "--output", "json")
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.output)
    assert set(data) >= {"sessions", "bindings", "evictions", "pipelined", "podGroups"}
    assert data["bindings"]["research/bert-worker-2"] == "gpu-node-1"
    assert data["podGroups"]["research/llm"]["minMember"] == 2
    assert data["podGroups"]["research/llm"]["phase"] == "Pending"


@pytest.mark.parametrize("sessions", ["1", "3"])
def test_replay_is_deterministic(sessions: str) -> None:
    first = invoke("replay", str(EXAMPLE), "--output", "json", "--sessions", sessions)
    second = invoke("replay", str(EXAMPLE), "--output", "json", "--sessions", sessions)
    assert first.exit_code == 0
    assert first.stdout_bytes == second.stdout_bytes


def test_replay_every_example() -> None:
    for path in sorted((ROOT / "config" / "examples").glob("*.yaml")):
        if "apiVersion" not in path.read_text():
            continue        # a simulate scenario, not objects
        result = invoke("replay", str(path), "--output", "json")
        assert result.exit_code == 0, (path, result.stderr)


def test_missing_file(tmp_path: Path) -> None:
    assert_one_line_error(invoke("replay", str(tmp_path / "nope.yaml")), "nope.yaml", "no such file")


def test_invalid_yaml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n")
    assert_one_line_error(invoke("replay", str(bad)), "invalid YAML", "line")


@pytest.mark.parametrize("doc, part", [
    ("kind: Pod\nmetadata: {name: x}\n", "needs apiVersion and kind"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {}\n", "no metadata.name"),
    ("- just\n- a list\n", "not a Kubernetes object"),
])
def test_bad_objects(tmp_path: Path, doc: str, part: str) -> None:
    path = tmp_path / "objects.yaml"
    path.write_text(doc)
    assert_one_line_error(invoke("replay", str(path)), part)


@pytest.mark.parametrize("config, part", [
    ("actions: [allocate, shuffle]\n", "actions[1]: unknown action 'shuffle'"),
    ("tiers: [{plugins: [{name: gang}, {name: magic}]}]\n", "tiers[0].plugins[1]: unknown plugin 'magic'"),
    ("schedulePeriod: soon\n", "schedulePeriod"),
    ("colour: blue\n", "unknown key 'colour'"),
    ("tiers: [{plugins: [{name: nodeorder, arguments: {strategy: random}}]}]\n", "strategy"),
    ("actions: [allocate\n", "invalid YAML"),
])
def test_bad_config(tmp_path: Path, config: str, part: str) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(config)
    assert_one_line_error(invoke("replay", str(EXAMPLE), "--config", str(path)), part)


def test_shipped_config_is_the_builtin_default() -> None:
    result = invoke("replay", str(EXAMPLE), "--output", "json",
                    "--config", str(ROOT / "config" / "scheduler.yaml"))
    default = invoke("replay", str(EXAMPLE), "--output", "json")
    assert result.stdout_bytes == default.stdout_bytes


def test_bad_flag() -> None:
    assert_one_line_error(invoke("replay", str(EXAMPLE), "--sesions", "2"), "--sesions")


def test_bad_output_format() -> None:
    assert_one_line_error(invoke("replay", str(EXAMPLE), "--output", "xml"), "xml")


@pytest.mark.parametrize("scenario", ["basic-5k", "gang-5k", "preempt-1k"])
def test_bench_runs(scenario: str) -> None:
    result = invoke("bench", scenario, "--scale", "0.01")
    assert result.exit_code == 0, result.stderr
    figures = orjson.loads(result.output)
    assert figures["scenario"] == scenario
    assert figures["nodes"] > 0 and figures["pods"] > 0
    for key in ("session_seconds", "pods_per_second", "snapshot_seconds", "peak_memory_mib"):
        assert figures[key] >= 0
    if scenario == "preempt-1k":
        assert figures["evicted"] > 0
    else:
        assert figures["placed"] == figures["pods"]


def test_explain_pending_gang() -> None:
    result = invoke("explain", "research/llm", "--snapshot", str(EXAMPLE))
    assert result.exit_code == 0, result.stderr
    out = result.output
    assert "waiting: 1/2 tasks placed, minMember 2" in out
    assert "queue team-b: quota nvidia.com/gpu=4; limits nvidia.com/gpu=12" in out
    assert "gpu-node-1: insufficient nvidia.com/gpu (need 4, 1 free)" in out


def test_explain_scheduled_gang() -> None:
    result = invoke("explain", "research/bert", "--snapshot", str(EXAMPLE))
    assert result.exit_code == 0, result.stderr
    assert "research/bert-master-0: would bind to gpu-node-1" in result.output


@pytest.mark.parametrize("name, part", [("research/none", "no PodGroup"), ("noslash", "NAMESPACE/NAME")])
def test_explain_errors(name: str, part: str) -> None:
    assert_one_line_error(invoke("explain", name, "--snapshot", str(EXAMPLE)), part)
