"""Objects a cluster would refuse: the emulated operators make only pods an API
server accepts, and make nothing of a job it would refuse (the report says
why, stderr names the object and rule, --strict refuses to run)."""
from __future__ import annotations

import io
from pathlib import Path

import attrs
import orjson
import pytest
from click.testing import CliRunner

from kaisched.api.clock import ManualClock
from kaisched.cli import main
from kaisched.cluster.kinds import POD
from kaisched.cluster.memory import MemoryCluster
from kaisched.errors import InputError
from kaisched.sim.admission import refusals
from kaisched.sim.controllers import Controllers, JobRun, JobState
from kaisched.sim.runner import report_refusals
from kaisched.sim.scenario import parse_scenario
from tests.builders.sim import SMALL

# A job asking for an extended resource besides GPUs, and hugepages: the
# operators must give both limits equal to their requests.
EXTENDED = SMALL.replace(
    "capacity: {cpu: 32, memory: 256Gi, nvidia.com/gpu: 8}",
    "capacity: {cpu: 32, memory: 256Gi, nvidia.com/gpu: 8, example.com/fpga: 4, hugepages-2Mi: 4Gi}",
).replace("main: {replicas: 2, requests: {cpu: 1, memory: 1Gi, gpu: 1}}",
          "main: {replicas: 2, requests: {cpu: 1, memory: 1Gi, gpu: 1, example.com/fpga: 1, "
          "hugepages-2Mi: 1Gi}}")


def test_pods_with_extended_resources_are_accepted(tmp_path: Path) -> None:
    assert EXTENDED != SMALL
    scenario = parse_scenario(EXTENDED, "x.yaml")
    assert all(refusals(job, "kaisched", {}) == [] for job in scenario.jobs)
    path = tmp_path / "scenario.yaml"
    path.write_text(EXTENDED)
    result = CliRunner().invoke(main, ["simulate", str(path), "--strict", "--output", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert {j["state"] for j in orjson.loads(result.stdout)["jobs"]} == {"succeeded"}


@pytest.fixture
def bad_job():  # type: ignore[no-untyped-def]
    """A job no scenario file can give (the loader checks names): its objects
    would carry a name the API server refuses."""
    scenario = parse_scenario(SMALL, "x.yaml")
    return scenario, attrs.evolve(scenario.jobs[2], name="Third_Job")


def test_a_refused_job_is_made_of_nothing(bad_job) -> None:  # type: ignore[no-untyped-def]
    _, job = bad_job
    lines = refusals(job, "kaisched", {})
    assert lines and "Third_Job" in lines[0] and "metadata.name" in lines[0]
    cluster = MemoryCluster(ManualClock())
    controllers = Controllers(cluster, "kaisched", {})
    run = JobRun(job)
    controllers.submit(run, 0.0)
    assert run.state is JobState.FAILED
    assert run.failure == f"the API server refuses it: {lines[0]}"
    assert cluster.list(POD) == []


def test_refused_jobs_are_named_on_stderr_and_strict_stops(bad_job) -> None:  # type: ignore[no-untyped-def]
    scenario, job = bad_job
    scenario = attrs.evolve(scenario, jobs=(*scenario.jobs[:2], job))
    err = io.StringIO()
    report_refusals(scenario, "kaisched", "x.yaml", False, err)
    lines = err.getvalue().splitlines()
    assert lines and all(line.startswith("skipped: job Third_Job: ") for line in lines)
    with pytest.raises(InputError, match=r"x.yaml: 1 job\(s\) a cluster would refuse \(--strict\)"):
        report_refusals(scenario, "kaisched", "x.yaml", True, io.StringIO())
