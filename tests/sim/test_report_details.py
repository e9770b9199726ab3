"""The report hides nothing: every wait of a job evicted and started again,
evictions and evicted pods apart, GPU-hours lost to evictions, the sizes an
elastic job ran at, a parent queue's use as the sum of its children's, and
tables that fit the terminal without dropping columns silently."""
from __future__ import annotations

import io

import orjson
import pytest
from click.testing import CliRunner
from rich.console import Console

from kaisched.cli import main
from kaisched.framework import SchedulerConfig
from kaisched.sim.report import build_report, render
from kaisched.sim.scenario import parse_scenario
from kaisched.sim.simulation import Simulation


@pytest.fixture(scope="module")
def demo() -> dict:
    result = CliRunner().invoke(main, ["simulate", "--output", "json"])
    assert result.exit_code == 0, result.stderr
    return orjson.loads(result.stdout)


def test_a_job_evicted_and_started_again_shows_each_wait(demo: dict) -> None:
    resnet = next(j for j in demo["jobs"] if j["name"] == "team-a/resnet")
    # Started at once at 0:01:00, reclaimed whole at 0:05:00, made again, started at 0:35:11.
    assert resnet["firstWait"] == 0.0
    assert resnet["waits"] == [[300.0, 2111.0]]
    assert resnet["wait"] == 1811.0
    assert resnet["starts"] == 2
    assert [s for _, s in resnet["history"]] == ["waiting", "running", "evicted", "waiting",
                                                 "running", "done"]
    assert resnet["evictions"] == 1 and resnet["podsEvicted"] == 2
    # Its 8 GPUs had run 4 minutes when it was reclaimed: that work is lost.
    assert resnet["gpuHoursLost"] == pytest.approx(8 * 240 / 3600, abs=0.01)


def test_gang_wait_counts_re_waits(demo: dict) -> None:
    bert = next(j for j in demo["jobs"] if j["name"] == "team-a/bert")
    assert demo["gangWait"]["max"] == bert["wait"] == 1831.0
    assert demo["gangWait"]["waited"] == 4      # the two reclaimed gangs waited again


def test_gpu_hours_lost_per_queue(demo: dict) -> None:
    lost = {q["name"]: q["gpuHoursLost"] for q in demo["queues"]}
    assert lost == {"team-a": pytest.approx(8 * (240 + 210) / 3600, abs=0.01), "team-b": 0.0}


ELASTIC = """
name: elastic
nodePools:
  - {name: gpu, count: 4, capacity: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}}
queues:
  - {name: ml, resources: {nvidia.com/gpu: {quota: 32}}}
priorityClasses: {low: 100, urgent: 10000}
jobs:
  - {name: sweep-1, kind: PyTorchJob, queue: ml, priorityClass: low, duration: 1h,
     roles: {master: {replicas: 1, requests: {cpu: 8, memory: 64Gi, gpu: 4}},
             worker: {replicas: 1, requests: {cpu: 8, memory: 64Gi, gpu: 4}}}}
  - {name: sweep-2, kind: PyTorchJob, queue: ml, priorityClass: low, duration: 1h, arrival: 1m,
     roles: {master: {replicas: 1, requests: {cpu: 8, memory: 64Gi, gpu: 4}},
             worker: {replicas: 1, requests: {cpu: 8, memory: 64Gi, gpu: 4}}}}
  - {name: elastic, kind: PyTorchJob, queue: ml, priorityClass: low, duration: 50m, arrival: 2m,
     elastic: {minReplicas: 1},
     roles: {master: {replicas: 1, requests: {cpu: 8, memory: 64Gi, gpu: 4}},
             worker: {replicas: 3, requests: {cpu: 8, memory: 64Gi, gpu: 4}}}}
  - {name: urgent, kind: PyTorchJob, queue: ml, priorityClass: urgent, duration: 30m, arrival: 20m,
     roles: {master: {replicas: 1, requests: {cpu: 8, memory: 64Gi, gpu: 4}},
             worker: {replicas: 1, requests: {cpu: 8, memory: 64Gi, gpu: 4}}}}
"""


def test_an_elastic_job_shows_the_sizes_it_ran_at(config: SchedulerConfig) -> None:
    report = build_report(Simulation(parse_scenario(ELASTIC), config).run(), "built-in")
    job = next(j for j in report["jobs"] if j["name"] == "ml/elastic")
    assert job["gpus"] == 16.0
    # Preempted at 0:20:00, it came back at its minimum (master and one worker)
    # while the urgent job ran, and grew to its full size when that ended.
    assert job["ranAt"] == {"pods": [2, 4], "gpus": [8.0, 16.0]}
    sizes = [(p, g) for _, p, g in job["sizes"]]
    assert sizes[0] == (4, 16.0) and (2, 8.0) in sizes and sizes[-1] == (4, 16.0)
    out = io.StringIO()
    render(report, Console(file=out, width=1000, force_terminal=False), "lines")
    line = next(x for x in out.getvalue().splitlines() if "ml/elastic" in x)
    assert "16 (ran 8-16)" in line


PARENTS = """
name: parents
nodePools:
  - {name: gpu, count: 2, capacity: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}}
queues:
  - {name: org, resources: {nvidia.com/gpu: {quota: 16}}}
  - {name: team-a, parent: org, resources: {nvidia.com/gpu: {quota: 8}}}
  - {name: team-b, parent: org, resources: {nvidia.com/gpu: {quota: 8}}}
jobs:
  - {name: a, kind: Job, queue: team-a, duration: 10m,
     roles: {main: {replicas: 1, requests: {cpu: 1, memory: 1Gi, gpu: 4}}}}
  - {name: b, kind: Job, queue: team-b, duration: 20m, arrival: 1m,
     roles: {main: {replicas: 1, requests: {cpu: 1, memory: 1Gi, gpu: 8}}}}
"""


def test_a_parent_queue_uses_what_its_children_use(config: SchedulerConfig) -> None:
    result = Simulation(parse_scenario(PARENTS), config).run()
    tl = result.timeline
    for i in range(len(tl.times)):
        assert tl.queue_used["org"][i] == tl.queue_used["team-a"][i] + tl.queue_used["team-b"][i]
    assert max(tl.queue_used["org"]) == 12.0
    org = next(q for q in build_report(result, "x")["queues"] if q["name"] == "org")
    assert org["usagePeak"] == 12.0


def _text(report: dict, width: int, terminal: bool, layout: str) -> list[str]:
    out = io.StringIO()
    render(report, Console(file=out, width=width, force_terminal=terminal,
                           color_system=None), layout)
    return out.getvalue().splitlines()


def test_a_narrow_terminal_gets_a_narrow_table_and_is_told(demo: dict) -> None:
    lines = _text(demo, 120, True, "full")
    text = " ".join(lines)
    assert "(a 120-column terminal: the jobs table leaves out" in text
    note = text[text.index("(a 120-column"):]
    dropped = ("GPU-h lost", "turnaround", "finished", "arrived")     # the least needed first
    assert all(col in note[:200] for col in dropped) and "--wide" in note[:200]
    header = next(x for x in lines if x.strip().startswith("job "))
    assert "turnaround" not in header and "evicted" in header and "wait" in header
    assert all(len(x) <= 120 for x in lines[lines.index(header):lines.index(header) + 8])
    rows = [x for x in lines if x.strip().startswith("team-")]
    assert len([r for r in rows if "/resnet" in r]) == 1       # one line per job


def test_piped_output_keeps_every_column_one_job_per_line(config: SchedulerConfig) -> None:
    scenario = parse_scenario(ELASTIC.replace("gpu: 4}}}}\n  - {name: urgent",
                                              "gpu: 4}}}}\n  - {name: huge, kind: Job, queue: ml, "
                                              "duration: 1m, roles: {main: {replicas: 1, requests: "
                                              "{cpu: 1, memory: 1Gi, gpu: 9}}}}\n  - {name: urgent"))
    report = build_report(Simulation(scenario, config).run(), "built-in")
    lines = _text(report, 1000, False, "lines")
    header = next(x for x in lines if x.strip().startswith("job "))
    assert "turnaround" in header and "GPU-h lost" in header
    huge = [x for x in lines if "ml/huge" in x]
    assert len(huge) == 1 and "never fits (a main pod" in huge[0]


def test_wide_keeps_every_column_on_a_terminal(demo: dict, tmp_path) -> None:
    lines = _text(demo, 1000, True, "full")
    assert not any("leaves out" in x for x in lines)
    assert "turnaround" in next(x for x in lines if x.strip().startswith("job "))
