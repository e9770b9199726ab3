"""The scale scenario of `kaisched bench simulate`: a generated cluster of
1,000 eight-GPU nodes shared by four teams, and 2,000 jobs of mixed kinds and
1-64 GPUs arriving over about four hours, run to the end in virtual time."""
from __future__ import annotations

import resource
import time
from typing import Any

from kaisched.builtins import register_builtins
from kaisched.framework import default_config
from kaisched.sim.scenario import Scenario, parse_scenario
from kaisched.sim.simulation import Simulation

_TEMPLATE = """
name: simulate-scale
description: {nodes} nodes, {jobs} generated jobs of 1-64 GPUs, four teams
nodePools:
  - name: gpu
    count: {nodes}
    capacity: {{cpu: 128, memory: 1Ti, nvidia.com/gpu: 8}}
queues:
  - {{name: team-a, resources: {{nvidia.com/gpu: {{quota: {quota}, overQuotaWeight: 2}}}}}}
  - {{name: team-b, resources: {{nvidia.com/gpu: {{quota: {quota}}}}}}}
  - {{name: team-c, resources: {{nvidia.com/gpu: {{quota: {quota}}}}}}}
  - {{name: team-d, resources: {{nvidia.com/gpu: {{quota: {quota}, limit: {limit}}}}}}}
priorityClasses: {{batch: 100, prod: 1000}}
generate:
  seed: 7
  jobs: {jobs}
  meanInterarrival: {gap}s
  gpus: {{1: 30, 2: 15, 4: 15, 8: 20, 16: 10, 32: 6, 64: 4}}
  duration: {{median: 45m, sigma: 1.0, min: 2m, max: 8h}}
  perGpu: {{cpu: 8, memory: 64Gi}}
  queues:
    team-a: {{weight: 3, kinds: {{PyTorchJob: 3, MPIJob: 2, JobSet: 1}}, priorityClass: prod}}
    team-b: {{weight: 2, kinds: {{PyTorchJob: 1, RayJob: 1, TFJob: 1}}, priorityClass: batch}}
    team-c: {{weight: 2, kinds: {{MPIJob: 1, Job: 2, PodGroup: 1}}, priorityClass: batch}}
    team-d: {{weight: 1, kinds: {{PyTorchJob: 1, JobSet: 1, RayJob: 1}}, priorityClass: batch}}
"""


def scale_scenario(scale: float = 1.0) -> Scenario:
    nodes = max(2, int(1000 * scale))
    jobs = max(4, int(2000 * scale))
    gpus = nodes * 8
    text = _TEMPLATE.format(nodes=nodes, jobs=jobs, quota=gpus // 5, limit=gpus // 2,
                            gap=round(7.2 / scale, 2))
    return parse_scenario(text, "simulate-scale")


def bench(scale: float = 1.0) -> dict[str, Any]:
    scenario = scale_scenario(scale)
    config = default_config(register_builtins())
    started = time.perf_counter()
    result = Simulation(scenario, config).run()
    wall = time.perf_counter() - started
    done = sum(1 for r in result.runs if r.finished is not None)
    return {
        "scenario": "simulate", "nodes": sum(p.count for p in scenario.node_pools),
        "jobs": len(scenario.jobs), "pods": sum(j.pods for j in scenario.jobs),
        "jobs_finished": done, "virtual_hours": round(result.end / 3600, 2),
        "sessions": result.sessions, "wall_seconds": round(wall, 1),
        "virtual_seconds_per_wall_second": round(result.end / wall, 1) if wall else 0.0,
        "peak_memory_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
