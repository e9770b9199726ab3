"""Shares of GPUs in `kaisched simulate`: a role asks for gpuFraction or
gpuMemory (KAI's annotations on its pods), the bundled gpu-sharing scenario
runs with every invariant (no GPU shared beyond its whole) checked each
session, and the report says how many GPUs were shared and how full."""
from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.sim.operators import pod_template
from kaisched.sim.scenario import ScenarioError, parse_scenario

SCENARIO = """
nodePools:
  - {name: a100, count: 1, capacity: {cpu: 16, memory: 64Gi, nvidia.com/gpu: 2},
     labels: {nvidia.com/gpu.memory: "40960"}}
queues: [{name: q}]
jobs:
  - {name: nb, kind: Job, queue: q, duration: 10m,
     roles: {main: {replicas: 1, requests: {cpu: 1}, %s}}}
"""


@pytest.fixture(scope="module")
def report() -> dict:
    result = CliRunner().invoke(main, ["simulate", "gpu-sharing", "--output", "json"])
    assert result.exit_code == 0, result.output + result.stderr
    return orjson.loads(result.stdout)


def test_a_role_shares_gpus_by_kais_annotations() -> None:
    job = parse_scenario(SCENARIO % "gpuFraction: 0.25, gpuDevices: 2").jobs[0]
    template = pod_template(job, job.roles[0], "kaisched")
    assert template["metadata"]["annotations"]["gpu-fraction"] == "0.25"
    assert template["metadata"]["annotations"]["gpu-fraction-num-devices"] == "2"
    assert "nvidia.com/gpu" not in template["spec"]["containers"][0]["resources"]["requests"]
    job = parse_scenario(SCENARIO % "gpuMemory: 20480").jobs[0]
    assert pod_template(job, job.roles[0], "kaisched")["metadata"]["annotations"]["gpu-memory"] \
        == "20480"


@pytest.mark.parametrize(("share", "said"), [
    ("gpuFraction: 1.5", "gpuFraction: must be in (0, 1]"),
    ("gpuFraction: 0.5, gpuMemory: 100", "gpuFraction or gpuMemory, not both"),
    ("gpuDevices: 2", "gpuDevices: only with gpuFraction or gpuMemory"),
    ("gpuMemory: 20Gi", "gpuMemory: expected an integer"),
])
def test_a_share_that_cannot_be_is_one_line(share: str, said: str) -> None:
    with pytest.raises(ScenarioError, match=said.replace("(", r"\(").replace(")", r"\)")):
        parse_scenario(SCENARIO % share)


def test_gpu_memory_needs_a_pool_that_labels_it() -> None:
    text = (SCENARIO % "gpuMemory: 1000").replace('labels: {nvidia.com/gpu.memory: "40960"}', "")
    with pytest.raises(ScenarioError, match="no node pool labels its GPUs' memory"):
        parse_scenario(text)
    with pytest.raises(ScenarioError, match="also request nvidia.com/gpu"):
        parse_scenario((SCENARIO % "gpuFraction: 0.5").replace("{cpu: 1}", "{cpu: 1, nvidia.com/gpu: 1}"))


def test_the_bundled_scenario_shares_gpus_beside_training_gangs(report: dict) -> None:
    assert all(j["state"] == "succeeded" for j in report["jobs"])
    assert report["invariantChecks"] == report["sessions"] > 0      # no GPU over its whole
    shared = report["sharedGpus"]
    # Fractions pack onto few GPUs: 1.75 GPUs of notebooks and 2.5 of inference at most,
    # never spread one to a GPU.
    assert 0 < shared["avg"] <= shared["peak"] <= 6
    assert 0.5 < shared["fill"] <= 1.0
    assert shared["gpuInUse"] <= report["cluster"]["gpuUtilisation"]
    shares = {j["name"]: j["gpuShare"] for j in report["jobs"] if j["gpuShare"]}
    assert shares["notebooks/nb-ada"] == "0.25" and shares["inference/chat-serve"] == "10240 MiB"
    gangs = [j for j in report["jobs"] if j["kind"] == "PyTorchJob"]
    assert all(j["placedWhole"] for j in gangs)
