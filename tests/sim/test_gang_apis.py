"""Simulated jobs whose gang is declared in another API (a PodGroup job's
gangApi): the upstream Workload API of the Kubernetes version simulated, or
KAI's PodGroup. Each runs as a gang and finishes; the simulator's invariants
watch it like kaisched's own; a version that does not serve the API refuses
the job, saying so, as a cluster would."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import attrs
import pytest

from kaisched.framework import SchedulerConfig
from kaisched.sim.admission import refusals
from kaisched.sim.report import build_report
from kaisched.sim.scenario import ScenarioError, parse_scenario
from kaisched.sim.simulation import Simulation
from kaisched.sim.specs import GANG_APIS
from kaisched.validation import KUBERNETES_VERSION, use_kube_version
from kaisched.validation.schemas import available_versions


@pytest.fixture(autouse=True)
def default_version_after() -> Iterator[None]:
    yield
    use_kube_version(KUBERNETES_VERSION)


def scenario(api: str) -> str:
    return f"""
nodePools: [{{name: gpu, count: 1, capacity: {{cpu: 16, memory: 64Gi, nvidia.com/gpu: 4}}}}]
queues: [{{name: team-a}}]
jobs:
  - name: first
    kind: PodGroup
    gangApi: {api}
    queue: team-a
    duration: 5m
    roles:
      leader: {{replicas: 1, requests: {{cpu: 1, memory: 1Gi, gpu: 1}}}}
      worker: {{replicas: 2, requests: {{cpu: 1, memory: 1Gi, gpu: 1}}}}
  - name: second
    kind: PodGroup
    gangApi: {api}
    queue: team-a
    arrival: 10s
    duration: 5m
    roles:
      worker: {{replicas: 3, requests: {{cpu: 1, memory: 1Gi, gpu: 1}}}}
"""


@pytest.mark.parametrize("api, version", [
    ("scheduling.k8s.io/v1alpha1", "1.35"), ("scheduling.k8s.io/v1alpha2", "1.36"),
    ("scheduling.k8s.io/v1beta1", "1.37"), ("scheduling.run.ai/v2alpha2", "1.37"),
])
def test_gangs_of_each_api_run_whole_and_finish(api: str, version: str,
                                                config: SchedulerConfig) -> None:
    use_kube_version(version)
    report = build_report(Simulation(parse_scenario(scenario(api), "s.yaml"), config).run(), "c")
    assert report["stopped"] == "every job finished"
    jobs = {j["name"]: j for j in report["jobs"]}
    assert {j["state"] for j in jobs.values()} == {"succeeded"}
    # Read as gangs of 3 (the meter knows each API), placed whole; with 4 GPUs
    # the second waits for the first to finish.
    assert all(j["minMember"] == 3 and j["placedWhole"] for j in jobs.values())
    assert jobs["team-a/second"]["wait"] >= 290


def test_a_version_that_does_not_serve_the_api_refuses_the_job(config: SchedulerConfig) -> None:
    use_kube_version("1.37")
    report = build_report(Simulation(parse_scenario(scenario("scheduling.k8s.io/v1alpha1"), "s.yaml"),
                                     config).run(), "c")
    failures = {j["name"]: j["reason"] or "" for j in report["jobs"]}
    assert all("Kubernetes 1.37 serves no such kind" in f for f in failures.values()), failures


def test_only_a_podgroup_job_names_its_gang_api() -> None:
    text = scenario("scheduling.k8s.io/v1beta1").replace("kind: PodGroup", "kind: PyTorchJob", 1) \
        .replace("leader:", "master:", 1)
    with pytest.raises(ScenarioError, match=r"jobs\[0\] \(first\)\.gangApi: only a PodGroup job"):
        parse_scenario(text, "s.yaml")
    with pytest.raises(ScenarioError, match="is not a gang API kaisched reads"):
        parse_scenario(scenario("scheduling.volcano.sh/v1beta1"), "s.yaml")


def documented_versions() -> dict[str, str]:
    """gangApi -> the --kube-version docs/simulate.md's table gives for it."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "simulate.md").read_text()
    rows = re.findall(r"^\| `([^`]+)`(?: \(default\))? \| .* \| (any|[\d.]+) \|$", page, re.M)
    return dict(rows)


def test_the_documented_gang_apis_and_versions_are_what_the_api_servers_take() -> None:
    """docs/simulate.md names every gangApi the scenario takes, each with the
    versions that serve it: there the job's objects are accepted, elsewhere
    (for an upstream API) refused."""
    documented = documented_versions()
    assert list(documented) == list(GANG_APIS)
    job = parse_scenario(scenario(GANG_APIS[0]), "s.yaml").jobs[0]
    for api, version in documented.items():
        spec = attrs.evolve(job, gang_api=api)
        served = available_versions() if version == "any" else [version]
        for each in ("1.35", "1.36", "1.37"):
            use_kube_version(each)
            refused = refusals(spec, "kaisched", {})
            assert (refused == []) == (each in served), (api, each, refused)
