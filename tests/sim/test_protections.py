"""Min-runtime and the preemption delay in `kaisched simulate`: one node, a
low-priority job running from the start, an urgent one arriving at 2m. Plain,
the urgent job preempts at once; with a preemption delay of 5m it waits 5m
first (its clock starts when it arrives); with a min-runtime of 10m on
preemption it waits until the low job has run 10m. The simulated clock, which
skips quiet ticks, wakes for both."""
from __future__ import annotations

import pytest

from kaisched.builtins.catalog import register_builtins
from kaisched.framework import parse_config
from kaisched.sim.report import build_report
from kaisched.sim.scenario import parse_scenario
from kaisched.sim.simulation import Simulation

SCENARIO = """
name: protections
nodePools:
  - {name: gpu, count: 1, capacity: {cpu: 32, memory: 256Gi, nvidia.com/gpu: 8}}
queues:
  - {name: ml, resources: {nvidia.com/gpu: {quota: 8}}}
priorityClasses: {low: 100, urgent: 10000}
jobs:
  - name: long
    kind: Job
    queue: ml
    priorityClass: low
    duration: 2h
    roles:
      main: {replicas: 1, requests: {cpu: 4, memory: 8Gi, gpu: 8}}
  - name: urgent
    kind: Job
    queue: ml
    priorityClass: urgent
    arrival: 2m
    duration: 10m
    roles:
      main: {replicas: 1, requests: {cpu: 4, memory: 8Gi, gpu: 8}}
"""
TIERS = """
tiers:
  - plugins: [{name: priority}, {name: gang}, {name: podgroupstatus}]
  - plugins: [{name: proportion}, {name: predicates}, {name: nodeorder}%s]
"""


@pytest.mark.parametrize("extra,earliest,latest", [
    ("", 120, 180),                                                          # preempts at once
    ("preemptionDelay: 5m\n", 420, 480),                                     # 2m + 5m
    (TIERS % ", {name: minruntime, arguments: {defaultPreemptMinRuntime: 10m}}", 600, 660),
], ids=["plain", "preemption-delay", "min-runtime"])
def test_the_urgent_job_starts_when_its_protections_allow(extra: str, earliest: float,
                                                          latest: float) -> None:
    registry = register_builtins()
    config = parse_config(extra or "{}", registry)
    report = build_report(Simulation(parse_scenario(SCENARIO, "p.yaml"), config).run(), "c")
    assert earliest <= _urgent_start(report) < latest, report["jobs"]
    # The clock skips quiet ticks but wakes when a delay or a min-runtime runs
    # out: a session every period starts the urgent job at the same moment.
    short = parse_scenario("until: 20m\n" + SCENARIO, "p.yaml")
    assert _urgent_start(build_report(Simulation(short, config, every_period=True).run(), "c")) \
        == _urgent_start(build_report(Simulation(short, config).run(), "c"))


def _urgent_start(report: dict) -> float:
    urgent = next(j for j in report["jobs"] if j["name"].endswith("/urgent"))
    assert urgent["started"] is not None, urgent
    return float(urgent["started"])
