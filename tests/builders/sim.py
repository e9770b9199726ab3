"""A small scenario for `kaisched simulate`, as YAML text; and a run of a scenario both
ways, jumping over quiet ticks and a session every period."""
from __future__ import annotations

from typing import Any

import orjson
from click.testing import CliRunner

from kaisched.cli import main
from kaisched.framework import SchedulerConfig
from kaisched.sim.report import build_report
from kaisched.sim.scenario import Scenario
from kaisched.sim.simulation import Simulation

SMALL = """
name: small
nodePools:
  - {name: gpu, count: 2, capacity: {cpu: 32, memory: 256Gi, nvidia.com/gpu: 8}}
queues:
  - {name: team-a, resources: {nvidia.com/gpu: {quota: 8, limit: 16}}}
  - {name: team-b, resources: {nvidia.com/gpu: {quota: 8}}}
jobs:
  - name: first
    kind: PyTorchJob
    queue: team-a
    duration: 10m
    roles:
      master: {replicas: 1, requests: {cpu: 2, memory: 8Gi, gpu: 4}}
      worker: {replicas: 1, requests: {cpu: 2, memory: 8Gi, gpu: 4}}
  - name: second
    kind: MPIJob
    queue: team-b
    arrival: 1m
    duration: 5m
    roles:
      launcher: {replicas: 1, requests: {cpu: 1, memory: 1Gi}}
      worker: {replicas: 2, requests: {cpu: 2, memory: 8Gi, gpu: 4}}
  - name: third
    kind: Job
    queue: team-b
    arrival: 2m
    duration: 3m
    roles:
      main: {replicas: 2, requests: {cpu: 1, memory: 1Gi, gpu: 1}}
"""


def both_ways(scenario: Scenario, config: SchedulerConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reports of a run that jumps over quiet ticks and of one with a session every
    period (which must have run more sessions), less the counts of sessions and checks."""
    jumping = Simulation(scenario, config).run()
    every = Simulation(scenario, config, every_period=True).run()
    assert jumping.sessions < every.sessions
    reports = build_report(jumping, "c"), build_report(every, "c")
    for report in reports:
        del report["sessions"], report["invariantChecks"]
    return reports


def compared(scenario: str, config: str) -> list[dict[str, Any]]:
    """`kaisched simulate SCENARIO --compare CONFIG --output json`: the two reports."""
    result = CliRunner().invoke(main, ["simulate", scenario, "--compare", config,
                                       "--output", "json"])
    assert result.exit_code == 0, result.stderr
    return list(orjson.loads(result.stdout)["compare"])


def job_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    """A job's entry in a report."""
    return next(j for j in report["jobs"] if j["name"] == name)
