"""`kaisched simulate` end to end: the demo shows a gang waiting, gangs placed
whole and a reclaim between queues; runs are byte-identical; skipping quiet
ticks changes nothing; plots are PNGs; bad input is one line."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.framework import SchedulerConfig
from kaisched.sim.report import build_report
from kaisched.sim.runner import bundled
from kaisched.sim.scenario import parse_scenario
from kaisched.sim.simulation import Simulation
from tests.builders.sim import SMALL

EXAMPLES = Path(__file__).resolve().parents[2] / "kaisched" / "examples"


def invoke(*args: str):
    return CliRunner().invoke(main, ["simulate", *args])


@pytest.fixture(scope="module")
def demo() -> dict:
    result = invoke("--output", "json")
    assert result.exit_code == 0, result.output + result.stderr
    return orjson.loads(result.stdout)


def test_the_demo_is_the_default() -> None:
    assert bundled() == EXAMPLES / "demo.yaml"


def test_demo_shows_a_gang_waiting(demo: dict) -> None:
    waited = [j for j in demo["jobs"] if j["minMember"] and j["minMember"] > 1 and j["wait"] > 0]
    assert waited, "no gang waited"
    assert demo["gangWait"]["waited"] >= 1 and demo["gangWait"]["max"] > 0


def test_demo_places_gangs_whole(demo: dict) -> None:
    gangs = [j for j in demo["jobs"] if j["minMember"] and j["minMember"] > 1]
    assert len(gangs) >= 4
    assert all(j["placedWhole"] for j in gangs)
    assert all(j["state"] == "succeeded" for j in demo["jobs"])
    assert demo["invariantChecks"] == demo["sessions"] > 0


def test_demo_shows_a_reclaim_between_queues(demo: dict) -> None:
    # team-b, below its fair share, takes room back from team-a, above its own
    reclaims = [e for e in demo["evictions"]["events"] if e["cause"] == "reclaim"]
    assert reclaims, demo["evictions"]
    assert all(e["queue"] == "team-a" and e["byQueue"] == "team-b" for e in reclaims)
    queues = {q["name"]: q for q in demo["queues"]}
    assert queues["team-b"]["podsReclaimedBy"] == queues["team-a"]["podsReclaimedFrom"] > 0


def test_text_report_tables(demo: dict) -> None:
    result = invoke()
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    for part in ("jobs", "queues (nvidia.com/gpu)", "evictions", "gang wait:",
                 "GPU utilisation", "team-a/resnet", "PyTorchJob", "MPIJob", "reclaim"):
        assert part in text
    assert result.stderr == ""          # no progress bar when stderr is not a terminal


def test_same_scenario_same_bytes(tmp_path: Path) -> None:
    for args in ((), ("--output", "json")):
        first, second = invoke(*args), invoke(*args)
        assert first.exit_code == second.exit_code == 0
        assert first.stdout == second.stdout
    scenario = tmp_path / "gen.yaml"
    scenario.write_text(GENERATED)
    runs = [invoke(str(scenario), "--seed", seed, "--output", "json").stdout
            for seed in ("5", "5", "6")]
    assert runs[0] == runs[1] != runs[2]
    assert orjson.loads(runs[0])["seed"] == 5


GENERATED = """
nodePools: [{name: gpu, count: 3, capacity: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}}]
queues: [{name: team-a, resources: {gpu: {quota: 12}}}, {name: team-b, resources: {gpu: {quota: 12, limit: 16}}}]
generate:
  jobs: 24
  meanInterarrival: 2m
  gpus: {1: 4, 4: 2, 8: 2, 16: 1, 32: 1}
  duration: {median: 10m, sigma: 0.6}
  queues:
    team-a: {kinds: {PyTorchJob: 1, MPIJob: 1, JobSet: 1, TFJob: 1}}
    team-b: {kinds: {RayJob: 1, Job: 1, PodGroup: 1}}
"""


def _figures(result) -> dict:   # type: ignore[no-untyped-def]
    """Every figure of the report but how many sessions it took."""
    report = build_report(result, "c")
    del report["sessions"], report["invariantChecks"]
    return report


SHORT = (GENERATED.replace("jobs: 24", "jobs: 10").replace("meanInterarrival: 2m", "meanInterarrival: 40s")
         .replace("{median: 10m, sigma: 0.6}", "{median: 2m, sigma: 0.6, min: 1m, max: 4m}"))


def _until(text: str, until: str) -> str:
    return f"until: {until}\n{text}"


# A session every period is slow: the runs are cut short, past the reclaim and the preemption.
@pytest.mark.parametrize("text", [SMALL, SHORT,
                                  _until((EXAMPLES / "demo.yaml").read_text(), "12m"),
                                  _until((EXAMPLES / "preemption.yaml").read_text(), "22m")],
                         ids=["small", "generated", "demo", "preemption"])
def test_skipping_quiet_ticks_changes_nothing(text: str, config: SchedulerConfig) -> None:
    scenario = parse_scenario(text, "s.yaml")
    jumping = Simulation(scenario, config).run()
    every = Simulation(scenario, config, every_period=True).run()
    assert jumping.sessions < every.sessions
    assert _figures(jumping) == _figures(every)


def test_jobs_that_can_never_fit_are_reported(config: SchedulerConfig) -> None:
    scenario = parse_scenario(GENERATED, "gen.yaml", seed=5)
    report = build_report(Simulation(scenario, config).run(), "c")
    never = [j for j in report["jobs"] if j["state"] == "never fits"]
    assert never and {j["gpus"] for j in never} == {32.0}      # the cluster has 24 GPUs
    for job in never:
        assert job["reason"] == "needs 32 nvidia.com/gpu at once, the nodes it may use have 24"
        assert job["started"] is None
    assert report["stopped"] == "every job finished"
    assert all(j["state"] in ("succeeded", "never fits") for j in report["jobs"])


def test_a_job_over_its_queue_limit_never_fits(config: SchedulerConfig) -> None:
    text = SMALL.replace("worker: {replicas: 1, requests: {cpu: 2, memory: 8Gi, gpu: 4}}\n"
                         "  - name: second",
                         "worker: {replicas: 3, requests: {cpu: 2, memory: 8Gi, gpu: 4}}\n"
                         "  - name: second", 1)
    text = text.replace("{quota: 8, limit: 16}", "{quota: 8, limit: 12}")
    report = build_report(Simulation(parse_scenario(text, "s.yaml"), config).run(), "c")
    first = next(j for j in report["jobs"] if j["name"] == "team-a/first")
    assert first["state"] == "never fits"
    assert first["reason"] == "needs 16 nvidia.com/gpu at once, over queue team-a's limit of 12"


def test_plot_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "sim.png"
    result = invoke("--plot", str(path))
    assert result.exit_code == 0, result.stderr
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    assert f"plot written to {path}" in result.stdout


def test_compare_two_configs(tmp_path: Path) -> None:
    spread = tmp_path / "spread.yaml"
    spread.write_text("tiers:\n  - plugins: [{name: priority}, {name: gang}]\n"
                      "  - plugins: [{name: proportion}, {name: predicates}, "
                      "{name: nodeorder, arguments: {strategy: spread}}]\n")
    plot = tmp_path / "both.png"
    text = invoke(str(EXAMPLES / "preemption.yaml"), "--compare", str(spread), "--plot", str(plot))
    assert text.exit_code == 0, text.stderr
    assert "built-in" in text.stdout and str(spread) in text.stdout
    assert "gang wait p90" in text.stdout and "pods evicted: preempt" in text.stdout
    assert plot.read_bytes()[:4] == b"\x89PNG"
    data = orjson.loads(invoke(str(EXAMPLES / "preemption.yaml"), "--compare", str(spread),
                               "--output", "json").stdout)
    assert [r["config"] for r in data["compare"]] == ["built-in", str(spread)]


@pytest.mark.parametrize(("content", "expected"), [
    (SMALL.replace("kind: MPIJob", "kind: SparkJob"), "jobs[1] (second).kind: unknown kind 'SparkJob'"),
    (SMALL.replace("duration: 10m", "duration: 10 minutes"),
     "jobs[0] (first).duration: not a duration"),
])
def test_bad_scenarios_are_one_line(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    result = invoke(str(path))
    assert result.exit_code != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]
    assert "Traceback" not in result.output


def test_missing_scenario_and_bad_config_are_one_line(tmp_path: Path) -> None:
    result = invoke(str(tmp_path / "nope.yaml"))
    assert result.exit_code != 0 and f"{tmp_path / 'nope.yaml'}: no such file\n" == result.stderr[7:]
    named = invoke("nope")
    assert named.stderr == ("error: nope: no such file, nor a bundled scenario of that "
                            "name; bundled scenarios: autoscaling, consolidation, consolidation-fractions, demo, fair-share-memory, "
                            "gpu-sharing, "
                            "preemption, reservations, starvation, volumes, workloads-2026 (kaisched simulate --list)\n")
    config = tmp_path / "c.yaml"
    config.write_text("actionz: []\n")
    result = invoke("--config", str(config))
    assert result.exit_code != 0 and result.stderr.startswith("error: ")


def test_bench_simulate_runs() -> None:
    result = CliRunner().invoke(main, ["bench", "simulate", "--scale", "0.01"])
    assert result.exit_code == 0, result.stderr
    figures = orjson.loads(result.stdout)
    assert figures["scenario"] == "simulate" and figures["nodes"] == 10 and figures["jobs"] == 20
    assert figures["jobs_finished"] == 20 and figures["sessions"] > 0
