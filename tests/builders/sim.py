"""A small scenario for `kaisched simulate`, as YAML text; a run of a scenario both
ways, jumping over quiet ticks and a session every period; and a memory backend with
one node and one pod for the simulated kubelet."""
from __future__ import annotations

from typing import Any

import orjson
from click.testing import CliRunner

from kaisched.api.clock import ManualClock
from kaisched.cli import main
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import SchedulerConfig
from kaisched.sim.operators import DURATION_ANNOTATION
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


def one_pod(duration: str = "90s", spec: dict[str, Any] | None = None
            ) -> tuple[ManualClock, MemoryCluster]:
    """A node n1 and a pending pod ns/p whose work takes duration, with spec's
    fields in its spec (terminationGracePeriodSeconds, activeDeadlineSeconds)."""
    clock = ManualClock(1000.0)
    cluster = MemoryCluster(clock)
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                    "status": {"allocatable": {"cpu": "4"}}})
    cluster.create({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "namespace": "ns",
                                 "annotations": {DURATION_ANNOTATION: duration}},
                    "spec": {"containers": [{"name": "main", "image": "x"}], **(spec or {})},
                    "status": {"phase": "Pending"}})
    return clock, cluster
