"""Devices in simulate: a scenario declares a DRA driver's devices per node
pool and device claims per role; the simulated cluster publishes the slices,
makes each pod its claim from the role's template, and the scheduler places
gangs on the devices. A claim no node can meet is reported with its request
and selector; declaration mistakes are one line naming the field."""
from __future__ import annotations

import pytest

from kaisched.framework import SchedulerConfig
from kaisched.sim.report import build_report
from kaisched.sim.scenario import ScenarioError, parse_scenario
from kaisched.sim.simulation import Simulation

SELECTOR = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100"'
SCENARIO = f"""
name: devices
nodePools:
  - name: a100
    count: 2
    capacity: {{cpu: 64, memory: 512Gi}}
    devices:
      - {{driver: gpu.nvidia.com, count: 4, attributes: {{productName: NVIDIA A100}}, capacity: {{memory: 80Gi}}}}
  - name: l4
    count: 1
    capacity: {{cpu: 64, memory: 512Gi}}
    devices:
      - {{driver: gpu.nvidia.com, count: 4, attributes: {{productName: NVIDIA L4}}}}
      - {{driver: gpu.nvidia.com, count: 7, attributes: {{productName: NVIDIA A100 MIG 1g.10gb, mig: 1g.10gb}}}}
queues:
  - {{name: research}}
jobs:
  - name: train
    kind: PyTorchJob
    queue: research
    duration: 10m
    roles:
      master: {{replicas: 1, requests: {{cpu: 2, memory: 8Gi}}, claims: [{{name: gpu, driver: gpu.nvidia.com, count: 2, selector: '{SELECTOR}'}}]}}
      worker: {{replicas: 3, requests: {{cpu: 2, memory: 8Gi}}, claims: [{{name: gpu, driver: gpu.nvidia.com, count: 2, selector: '{SELECTOR}'}}]}}
  - name: eval
    kind: Job
    queue: research
    arrival: 1m
    duration: 5m
    roles:
      main: {{replicas: 1, requests: {{cpu: 1, memory: 1Gi}}, claims: [{{name: gpu, driver: gpu.nvidia.com, selector: 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA L4"'}}]}}
  - name: slice
    kind: Job
    queue: research
    duration: 5m
    roles:
      main: {{replicas: 3, requests: {{cpu: 1, memory: 1Gi}}, claims: [{{name: mig, driver: gpu.nvidia.com, selector: 'has(device.attributes["gpu.nvidia.com"].mig)'}}]}}
  - name: huge
    kind: Job
    queue: research
    duration: 5m
    roles:
      main: {{replicas: 1, requests: {{cpu: 1, memory: 1Gi}}, claims: [{{name: gpu, driver: gpu.nvidia.com, count: 8, selector: '{SELECTOR}'}}]}}
"""


def test_gangs_run_on_devices_and_a_claim_no_node_meets_is_named(config: SchedulerConfig) -> None:
    scenario = parse_scenario(f"until: 30m\n{SCENARIO}", "devices.yaml")
    report = build_report(Simulation(scenario, config).run(), "c")
    jobs = {j["name"].split("/")[-1]: j for j in report["jobs"]}
    assert jobs["train"]["state"] == "succeeded" and jobs["eval"]["state"] == "succeeded"
    assert jobs["slice"]["state"] == "succeeded"        # on MIG slices of the l4 node's pool
    assert jobs["huge"]["started"] is None
    reason = jobs["huge"]["reason"]
    assert "request gpu" in reason and SELECTOR in reason, reason
    assert "no node has 8 matching device(s) free (the best has 4)" in reason


@pytest.mark.parametrize("change, into, message", [
    ("count: 4, attributes", "count: 0, attributes",
     "devices.yaml: nodePools[0] (a100).devices[0].count: must be at least 1, got 0"),
    ("driver: gpu.nvidia.com, count: 4, attributes: {productName: NVIDIA L4}",
     "driver: gpu, count: 4, attributes: {productName: NVIDIA L4}",
     "devices.yaml: nodePools[1] (l4).devices[0].driver: a driver is a DNS subdomain"),
    ("claims: [{name: gpu, driver: gpu.nvidia.com, selector", "claims: [{name: gpu, selector",
     "devices.yaml: jobs[1] (eval).roles.main.claims[0].driver: required"),
])
def test_declaration_mistakes_name_the_field(change: str, into: str, message: str) -> None:
    with pytest.raises(ScenarioError) as found:
        parse_scenario(SCENARIO.replace(change, into, 1), "devices.yaml")
    assert str(found.value).startswith(message), str(found.value)
