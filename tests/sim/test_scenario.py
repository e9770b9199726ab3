"""Scenario files: what they hold, and every bad one refused in one line that
names the job and the field."""
from __future__ import annotations

from pathlib import Path

import pytest

from kaisched.api.resource import GPU
from kaisched.sim.scenario import JobKind, ScenarioError, load_scenario, parse_scenario
from tests.builders.sim import SMALL

EXAMPLES = Path(__file__).resolve().parents[2] / "kaisched" / "examples"


def test_small_scenario_is_read() -> None:
    scenario = parse_scenario(SMALL, "small.yaml")
    assert [j.name for j in scenario.jobs] == ["first", "second", "third"]
    first = scenario.jobs[0]
    assert first.kind is JobKind.PYTORCH and first.namespace == "team-a"
    assert first.duration == 600 and first.total(GPU) == 8 and first.gang_min() == 2
    assert scenario.capacity(GPU) == 16
    assert scenario.queue("team-a").limit(GPU) == 16      # type: ignore[union-attr]
    assert scenario.jobs[2].gang_min() == 1               # a batch Job is no gang


@pytest.mark.parametrize("name", ["demo.yaml", "preemption.yaml", "starvation.yaml"])
def test_bundled_examples_load(name: str) -> None:
    scenario = load_scenario(EXAMPLES / name)
    assert scenario.jobs and scenario.node_pools


def _with(old: str, new: str) -> str:
    assert old in SMALL
    return SMALL.replace(old, new, 1)


@pytest.mark.parametrize(("text", "expected"), [
    (_with("kind: PyTorchJob", "kind: SparkJob"),
     "jobs[0] (first).kind: unknown kind 'SparkJob'"),
    (_with("master: {replicas: 1,", "master: {replicas: -1,"),
     "jobs[0] (first).roles.master.replicas: must be at least 1, got -1"),
    (_with("worker: {replicas: 1, requests: {cpu: 2, memory: 8Gi, gpu: 4}}",
           "worker: {replicas: 9, requests: {cpu: 2, memory: 8Gi, gpu: 4}}"),
     "jobs[0] (first).roles: needs 40 nvidia.com/gpu, the whole cluster has 16"),
    (_with("queue: team-b\n    arrival: 1m", "queue: team-z\n    arrival: 1m"),
     "jobs[1] (second).queue: no queue named 'team-z'"),
    (_with("duration: 5m", "duration: soon"),
     "jobs[1] (second).duration: not a duration: 'soon'"),
    (_with("duration: 5m", "duration: 5m\n    retries: 3"),
     "jobs[1] (second).retries: unknown key"),
    (_with("launcher: {replicas: 1, requests: {cpu: 1, memory: 1Gi}}",
           "launcher: {replicas: 1, request: {cpu: 1}}"),
     "jobs[1] (second).roles.launcher.request: unknown key"),
    (_with("{name: gpu, count: 2,", "{name: gpu, count: 2, zone: a,"),
     "nodePools[0] (gpu).zone: unknown key"),
    (_with("{quota: 8, limit: 16}", "{quota: 8, limt: 16}"),
     "queues[0] (team-a).resources.nvidia.com/gpu.limt: unknown key"),
    (_with("name: first", "name: First_Job"),
     "jobs[0] (First_Job).name: 'First_Job' is not a DNS-1123 label"),
    (_with("{cpu: 2, memory: 8Gi, gpu: 4}}\n      worker: {replicas: 1",
           "{cpu: 2, memory: 8Gi, gpu: 0.5}}\n      worker: {replicas: 1"),
     "jobs[0] (first).roles.master.requests.gpu: nvidia.com/gpu is counted in whole units"),
    (_with("master: {replicas: 1, requests: {cpu: 2, memory: 8Gi, gpu: 4}}",
           "launcher: {replicas: 1, requests: {cpu: 2, memory: 8Gi, gpu: 4}}"),
     "jobs[0] (first).roles.launcher: PyTorchJob has no role 'launcher'"),
    (_with("duration: 3m", "duration: 3m\n    elastic: {minReplicas: 1}"),
     "jobs[2] (third).elastic: only PyTorchJob and RayJob are elastic"),
    ("nodePools: []\njobs: []", "nodePools: at least one pool is needed (or a node group)"),
    ("name: x\nextra: 1\nnodePools: []", "extra: unknown key"),
    ("nodePools: [\n", "invalid YAML"),
])
def test_bad_scenarios_name_the_field(text: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "bad.yaml")
    message = str(caught.value)
    assert message.startswith("bad.yaml: ")
    assert expected in message, message
    assert "\n" not in message


GENERATED = """
nodePools: [{name: gpu, count: 4, capacity: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}}]
queues: [{name: team-a}, {name: team-b}]
generate:
  seed: 3
  jobs: 40
  meanInterarrival: 30s
  gpus: {1: 3, 8: 1, 64: 1}
  duration: {median: 10m, sigma: 0.5}
  queues:
    team-a: {weight: 2, kinds: {PyTorchJob: 1, MPIJob: 1, JobSet: 1}}
    team-b: {kinds: {RayJob: 1, Job: 1, PodGroup: 1, TFJob: 1}}
"""


def test_generated_jobs_follow_the_seed() -> None:
    one = parse_scenario(GENERATED, "gen.yaml")
    assert one == parse_scenario(GENERATED, "gen.yaml")
    assert one.seed == 3 and len(one.jobs) == 40
    other = parse_scenario(GENERATED, "gen.yaml", seed=4)
    assert other.seed == 4 and other.jobs != one.jobs
    assert {j.queue for j in one.jobs} == {"team-a", "team-b"}
    assert {j.total(GPU) for j in one.jobs} <= {1, 8, 64}
    arrivals = [j.arrival for j in one.jobs]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0
    assert all(60 <= j.duration for j in one.jobs)
    # a generated job bigger than the cluster is no error: it is reported as never fitting
    assert any(j.total(GPU) == 64 for j in one.jobs)


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("jobs: 40", "jobs: 0", "generate.jobs: must be at least 1"),
    ("team-b: {kinds", "team-c: {kinds", "generate.queues.team-c: no queue named 'team-c'"),
    ("RayJob: 1", "Slurm: 1", "generate.queues.team-b.kinds.Slurm: unknown kind"),
    ("median: 10m", "median: ten", "generate.duration.median: not a duration"),
    ("seed: 3", "seed: 3\n  burst: 2", "generate.burst: unknown key"),
])
def test_bad_generate_blocks(old: str, new: str, expected: str) -> None:
    with pytest.raises(ScenarioError, match=expected.replace(".", r"\.")):
        parse_scenario(GENERATED.replace(old, new), "gen.yaml")


def test_the_documented_scenario_example_is_valid() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "simulate.md").read_text()
    block = page[page.index("## Writing a scenario"):].split("```yaml\n", 1)[1].split("```", 1)[0]
    scenario = parse_scenario(block, "docs/simulate.md")
    bert = next(j for j in scenario.jobs if j.name == "bert")
    assert bert.elastic_min == 1 and bert.min_available == 3 and bert.total(GPU) == 32
    assert len(scenario.jobs) == 501 and scenario.until == 8 * 3600
