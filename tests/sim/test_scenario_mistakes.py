"""Mistakes that are easy to make in a scenario, each one line naming the
field: a duration or memory without a unit, a resource no pool offers, an
extended resource with a suffix, a queue limit below its quota, and more
nodes or generated jobs than the cap."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.sim.scenario import MAX_OBJECTS, ScenarioError, parse_scenario
from tests.builders.sim import SMALL


def _with(old: str, new: str) -> str:
    assert old in SMALL
    return SMALL.replace(old, new, 1)


@pytest.mark.parametrize(("text", "expected"), [
    (_with("duration: 5m", "duration: 300"),
     "jobs[1] (second).duration: a duration needs a unit: 300 could mean seconds or minutes "
     "(write e.g. 300s or 300m)"),
    (_with("arrival: 1m", "arrival: 60"), "jobs[1] (second).arrival: a duration needs a unit"),
    (_with("{cpu: 2, memory: 8Gi, gpu: 4}}\n      worker: {replicas: 1",
           "{cpu: 2, memory: 8, gpu: 4}}\n      worker: {replicas: 1"),
     "jobs[0] (first).roles.master.requests.memory: memory needs a unit: 8 would be 8 bytes "
     "(write e.g. 64Gi)"),
    (_with("capacity: {cpu: 32, memory: 256Gi,", "capacity: {cpu: 32, memory: 256,"),
     "nodePools[0] (gpu).capacity.memory: memory needs a unit"),
    (_with("{cpu: 2, memory: 8Gi, gpu: 4}}\n      worker: {replicas: 1",
           "{cpu: 2, memory: 8Gi, nvidia.com/gpus: 4}}\n      worker: {replicas: 1"),
     "jobs[0] (first).roles.master.requests.nvidia.com/gpus: no node pool offers "
     "nvidia.com/gpus (they offer cpu, ephemeral-storage, memory, nvidia.com/gpu)"),
    (_with("{name: team-b, resources: {nvidia.com/gpu:", "{name: team-b, resources: {nvidia.com/gpus:"),
     "queues[1] (team-b).resources.nvidia.com/gpus: no node pool offers nvidia.com/gpus"),
    (_with("{cpu: 2, memory: 8Gi, gpu: 4}}\n      worker: {replicas: 1",
           "{cpu: 2, memory: 8Gi, gpu: 4Gi}}\n      worker: {replicas: 1"),
     "jobs[0] (first).roles.master.requests.gpu: nvidia.com/gpu is a count, not a quantity "
     "with a suffix: '4Gi' (write e.g. 4)"),
    (_with("{quota: 8, limit: 16}", "{quota: 8, limit: 4}"),
     "queues[0] (team-a).resources.nvidia.com/gpu.limit: 4 is below the quota of 8"),
    (_with("{name: gpu, count: 2,", "{name: gpu, count: 200000,"),
     f"nodePools: 200000 nodes in all, more than the cap of {MAX_OBJECTS} "
     "(--max-objects raises it)"),
])
def test_easy_mistakes_name_the_field(text: str, expected: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, "bad.yaml")
    message = str(caught.value)
    assert message.startswith("bad.yaml: ") and "\n" not in message
    assert expected in message, message


GENERATED = """
nodePools: [{name: gpu, count: 4, capacity: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}}]
queues: [{name: team-a}]
generate:
  jobs: 50000
  meanInterarrival: 30s
  gpus: {1: 1}
  duration: {median: 10m}
  queues: {team-a: {kinds: {Job: 1}}}
"""


def test_generated_jobs_have_a_cap_that_max_objects_raises(tmp_path) -> None:
    with pytest.raises(ScenarioError, match="generate.jobs: 50000 is more than the cap of 20000"):
        parse_scenario(GENERATED, "gen.yaml")
    assert len(parse_scenario(GENERATED, "gen.yaml", max_objects=50_000).jobs) == 50_000
    path = tmp_path / "gen.yaml"
    path.write_text(GENERATED)
    result = CliRunner().invoke(main, ["simulate", str(path)])
    assert result.exit_code != 0
    assert result.stderr.strip() == (
        f"error: {path}: generate.jobs: 50000 is more than the cap of 20000 "
        "(--max-objects raises it)")


def test_zero_needs_no_unit() -> None:
    scenario = parse_scenario(_with("arrival: 1m", "arrival: 0"), "ok.yaml")
    assert min(j.arrival for j in scenario.jobs) == 0


def test_a_run_that_lasts_shows_a_progress_bar_on_a_terminal(config) -> None:
    import io

    from kaisched.sim.runner import ProgressBar, bundled
    from kaisched.sim.scenario import load_scenario
    from kaisched.sim.simulation import Simulation

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Terminal()
    with ProgressBar(err, "demo (built-in)", delay=0.0) as bar:
        Simulation(load_scenario(bundled()), config, progress=bar).run()
    assert bar.bar is not None and bar.bar.tasks[0].completed == 6
    quiet = Terminal()
    with ProgressBar(quiet, "demo", delay=3600.0) as bar:
        Simulation(load_scenario(bundled()), config, progress=bar).run()
    assert bar.bar is None and quiet.getvalue() == ""
