"""The scale scenarios of the simulator.

`kaisched bench simulate`: a generated cluster of 1,000 eight-GPU nodes shared
by four teams, and 2,000 jobs of mixed kinds and 1-64 GPUs arriving over
about four hours, run to the end in virtual time.

`kaisched bench what-if-10k`: `kaisched simulate --from-snapshot` on the
scale-10k cluster (10,000 nodes, 300,000 pods) for an hour of virtual time,
the running jobs' remaining run times drawn from a distribution; timed from
reading the snapshot file to the end of the run."""
from __future__ import annotations

import resource
import time
from typing import Any

from kaisched.builtins.catalog import register_builtins
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


WHAT_IF = """
name: what-if-10k
until: 1h
remaining: {median: 2h, sigma: 1.0, min: 5m, max: 12h}
"""


def bench_what_if(scale: float = 1.0) -> dict[str, Any]:
    import tempfile
    from pathlib import Path

    import orjson

    from kaisched.bench.scale10k import scale_10k
    from kaisched.cluster.snapshot import build_snapshot, load_file
    from kaisched.sim.start import adopt, read_start
    from kaisched.validation import partition

    config = default_config(register_builtins())
    nodes, others = scale_10k(scale)
    # As an API server keeps them: extended resources carry limits equal to requests.
    objects = nodes + [_with_gpu_limits(o) for o in others]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scale-10k.json"
        path.write_bytes(orjson.dumps(build_snapshot(objects, config.to_dict(),
                                                     taken=1_767_247_200.0)))
        del nodes, others, objects
        started = time.perf_counter()
        loaded = load_file(path, check_kinds=False)
    kept, problems = partition(loaded.objects)
    read = time.perf_counter()
    start = read_start(kept, "scale-10k", config.scheduler_name, loaded.taken)
    scenario = parse_scenario(WHAT_IF, "what-if-10k", base=start.base)
    adopted, _ = adopt(start, None, scenario.remaining, 1)
    simulation = Simulation(scenario, config, start=start, adopted=adopted)
    ready = time.perf_counter()
    result = simulation.run()
    done = time.perf_counter()
    return {
        "scenario": "what-if-10k", "nodes": sum(p.count for p in scenario.pools),
        "pods": sum(1 for o in kept if o.get("kind") == "Pod"), "skipped": len(problems),
        "jobs": len(adopted), "jobs_finished": sum(1 for r in result.runs if r.finished),
        "virtual_hours": round(result.end / 3600, 2), "sessions": result.sessions,
        "read_seconds": round(read - started, 1), "setup_seconds": round(ready - read, 1),
        "run_seconds": round(done - ready, 1), "wall_seconds": round(done - started, 1),
        "peak_memory_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _with_gpu_limits(obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("kind") != "Pod":
        return obj
    containers = []
    for c in obj["spec"]["containers"]:
        requests = (c.get("resources") or {}).get("requests") or {}
        if "nvidia.com/gpu" in requests:
            c = {**c, "resources": {**c["resources"],
                                    "limits": {"nvidia.com/gpu": requests["nvidia.com/gpu"]}}}
        containers.append(c)
    return {**obj, "spec": {**obj["spec"], "containers": containers}}


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
