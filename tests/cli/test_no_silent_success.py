"""Never a silent success: what looks like it worked but did not is said, in one line that
names the cause -- queue cycles in a scenario, owners with no pods to group, a memory size
without a unit, a scenario given as a config (or a config that is not there), a GPU share
out of range -- and a program whose API server is down says so in its own words."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kaisched.cli import inputs, main
from kaisched.sim.bundled import bundled_examples
from podgrouper.cli import main as podgrouper
from tests.builders import ROOT

PYTORCHJOB = ROOT / "tests" / "podgrouper" / "manifests" / "pytorchjob.yaml"
UNREACHABLE = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
SCENARIO = """\
nodePools: [{{name: n, count: 1, capacity: {{cpu: 8, memory: 32Gi}}}}]
queues:
{queues}
jobs: []
"""


@pytest.mark.parametrize("queues,cycle", [
    ("  - {name: q, parent: q2}\n  - {name: q2, parent: q}", "queues[0] (q).parent: queue cycle: q -> q2 -> q"),
    ("  - {name: q, parent: q}", "queues[0] (q).parent: queue cycle: q -> q"),
    ("  - {name: top}\n  - {name: q, parent: q3}\n  - {name: q2, parent: q}\n  - {name: q3, parent: q2}",
     "queues[1] (q).parent: queue cycle: q -> q3 -> q2 -> q"),
], ids=["two", "itself", "three"])
def test_a_queue_cycle_in_a_scenario_is_refused(tmp_path: Path, queues: str, cycle: str) -> None:
    path = tmp_path / "cycle.yaml"
    path.write_text(SCENARIO.format(queues=queues))
    result = CliRunner().invoke(main, ["simulate", str(path)])
    assert (result.exit_code, result.stderr) == (1, f"error: {path}: {cycle}\n")
    assert result.stdout == ""


def test_podgrouper_sync_says_why_an_owner_made_no_podgroup(tmp_path: Path) -> None:
    owner = tmp_path / "owner.yaml"
    owner.write_text("""\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {name: x, namespace: default}
spec:
  pytorchReplicaSpecs:
    Master: {replicas: 1, template: {spec: {containers: [{name: c, image: i}]}}}
""")
    result = CliRunner().invoke(podgrouper, ["sync", str(owner)])
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "note: PyTorchJob default/x: no PodGroup made: no pods in the file; the PodGrouper "
        "groups pods by their top owner (an operator makes the pods: `kaisched simulate` "
        "emulates operators)",
        "0 PodGroup(s) made"]
    other = CliRunner().invoke(podgrouper, ["sync", str(PYTORCHJOB), "--scheduler-name", "foo"])
    assert other.stderr.splitlines() == [
        "note: PyTorchJob kubeflow/pytorch-simple: no PodGroup made: its 4 pod(s) have "
        "schedulerName kaisched, not foo (--scheduler-name)",
        "0 PodGroup(s) made"]
    made = CliRunner().invoke(podgrouper, ["sync", str(PYTORCHJOB)])
    assert "note:" not in made.stderr and made.stderr.endswith("1 PodGroup(s) made\n")


@pytest.mark.parametrize("size", ["6", "1000000", "0.5"])
def test_a_memory_limit_without_a_unit_is_refused(size: str) -> None:
    result = CliRunner().invoke(main, ["run", "--memory-limit", size, "--kubeconfig",
                                       "/nonexistent/kubeconfig"])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: Invalid value for '--memory-limit': {size} could "
                                    f"mean bytes or GiB; give a unit, e.g. {size}Gi")
    assert result.stderr.count("\n") == 1


def _configs() -> str:
    return ", ".join(b.name for b in bundled_examples() if b.kind == "config")


@pytest.mark.parametrize("args", [["simulate", "--config", "demo"],
                                  ["simulate", "--compare", "demo", "--until", "1m"],
                                  ["replay", str(ROOT / "config/examples/gang.yaml"), "--config", "demo"]])
def test_a_scenario_given_as_a_config_says_it_is_a_scenario(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2            # the command line names the wrong file
    assert result.stderr == ("error: demo is a bundled scenario, not a config: give it as "
                             f"`kaisched simulate demo`; bundled configs: {_configs()} "
                             "(kaisched simulate --list)\n")


def test_a_config_given_as_a_scenario_says_it_is_a_config() -> None:
    result = CliRunner().invoke(main, ["simulate", "usage-on"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: usage-on is a bundled config, not a scenario: give "
                                    "it as `kaisched simulate --config usage-on`; bundled "
                                    "scenarios: ")


@pytest.mark.parametrize("command", ["simulate", "replay"])
def test_a_config_not_found_lists_the_bundled_configs(command: str) -> None:
    args = ["simulate", "--config", "nofile.yaml"] if command == "simulate" else \
        ["replay", str(ROOT / "config/examples/gang.yaml"), "--config", "nofile.yaml"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "bundled configs: " + _configs() in result.stderr
    assert "bundled scenarios" not in result.stderr


@pytest.mark.parametrize("fraction", ["-0.5", "0", "1.5", '"0.5"'])
def test_a_gpu_fraction_out_of_range_says_its_range(tmp_path: Path, fraction: str) -> None:
    path = tmp_path / "share.yaml"
    path.write_text(f"""\
nodePools: [{{name: n, count: 1, capacity: {{cpu: 8, memory: 32Gi, nvidia.com/gpu: 1}}}}]
jobs:
  - {{name: j, kind: Job, queue: default, arrival: 0s, duration: 1m, roles: {{worker: {{replicas: 1, requests: {{cpu: 1}}, gpuFraction: {fraction}}}}}}}
""")
    result = CliRunner().invoke(main, ["simulate", str(path)])
    assert result.exit_code == 1, result.output
    assert "gpuFraction: must be in (0, 1], the part of one GPU; got" in result.stderr
    assert ">= 0" not in result.stderr


def test_snapshot_dump_says_the_api_server_is_down_in_its_own_words(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE)
    monkeypatch.setattr(inputs, "READ_RETRIES", (0.01, 0.01))
    result = CliRunner().invoke(main, ["snapshot-dump", "--kubeconfig", str(kubeconfig), "-f",
                                       str(tmp_path / "now.json")])
    assert result.exit_code == 1
    assert "snapshot-dump is retrying for 0.02s; nothing is written until it answers" in result.stderr
    assert "scheduling pauses" not in result.stderr
    assert result.stderr.splitlines()[-1].endswith("gave up after retrying for 0.02s")
    assert not (tmp_path / "now.json").exists()


def test_podgrouper_run_says_the_api_server_is_down_in_its_own_words(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE)
    proc = subprocess.Popen([sys.executable, "-m", "podgrouper", "run", "--kubeconfig",
                             str(kubeconfig), "--no-leader-elect", "--metrics-port", "0"],
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline, said = time.monotonic() + 60, ""
        while time.monotonic() < deadline and "cannot be reached" not in said:
            said += proc.stderr.readline() if proc.stderr else ""
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "grouping pauses and is retried; the PodGroups made are kept" in said
    assert "scheduling pauses" not in said
