"""The simulated autoscaler over a scenario's node groups: it scales pod by pod for
Unschedulable pods no request covers, answers a ProvisioningRequest all or nothing (Failed,
saying why, when the max leaves too little; a check-capacity one only from the free room),
lets a booking expire, removes a node once it has been unneeded for scaleDownUnneededTime
but never below the group's min, and counts node-hours, cost and the GPU-hours it bought
idle. Node groups are checked key by key like the rest of a scenario."""
from __future__ import annotations

import pytest

from kaisched.api.clock import ManualClock
from kaisched.api.provisioning import ATOMIC_CLASS
from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import NODE, PROVISIONING_REQUEST
from kaisched.cluster.memory import MemoryCluster
from kaisched.framework import SchedulerConfig, parse_config
from kaisched.sim.meter import Meter
from kaisched.sim.nodegroups import NodeGroups
from kaisched.sim.report import build_report
from kaisched.sim.scenario import ScenarioError, parse_scenario
from kaisched.sim.simulation import Simulation

GROUPS = """
nodeGroups:
  - name: gpu
    template: {capacity: {cpu: 32, memory: 256Gi, nvidia.com/gpu: 8}, labels: {tier: a100}}
    min: 1
    max: 4
    provisioningDelay: DELAY
    costPerHour: 10
autoscaler: {scaleDownUnneededTime: 10m}
queues: [{name: team}]
jobs:
"""


def job(name: str, workers: int = 2, arrival: str = "0s", duration: str = "1h") -> str:
    """A PyTorchJob of 8-GPU pods: a master and the workers."""
    return f"""  - name: {name}
    kind: PyTorchJob
    queue: team
    arrival: {arrival}
    duration: {duration}
    roles:
      master: {{replicas: 1, requests: {{cpu: 4, memory: 16Gi, nvidia.com/gpu: 8}}}}
      worker: {{replicas: {workers}, requests: {{cpu: 4, memory: 16Gi, nvidia.com/gpu: 8}}}}
"""


def scenario(workers: int = 2, delay: str = "2m", *more: str) -> str:
    return GROUPS.replace("DELAY", delay) + job("train", workers) + "".join(more)


def config(autoscaling: bool) -> SchedulerConfig:
    return parse_config("autoscaling: {}\n" if autoscaling else "schedulePeriod: 1s\n",
                        register_builtins())


def run(text: str, autoscaling: bool) -> dict:
    return build_report(Simulation(parse_scenario(text, "s.yaml"), config(autoscaling)).run(), "c")


@pytest.mark.parametrize("autoscaling", [False, True], ids=["pod-by-pod", "requests"])
def test_a_gang_gets_the_nodes_it_lacks(autoscaling: bool) -> None:
    report = run(scenario(), autoscaling)
    a = report["autoscaler"]
    [job] = report["jobs"]
    assert job["state"] == "succeeded" and 120 <= job["firstWait"] <= 125   # the nodes' delay
    assert (a["scaleUps"], a["nodesAdded"], a["nodesRemoved"]) == (1, 2, 0)
    assert a["requestsProvisioned"] == int(autoscaling)
    # The min node all along, the two bought from their coming up (the run ends with the job).
    hours = report["virtualSeconds"] / 3600
    assert a["nodeHours"] == pytest.approx(3 * hours - 2 * job["firstWait"] / 3600, abs=0.01)
    assert a["cost"] == pytest.approx(10 * a["nodeHours"], abs=0.1)
    assert a["idleGpuHoursBought"] < 0.01           # taken as they came


def test_a_node_unneeded_for_long_enough_goes_but_not_below_the_min() -> None:
    """A second job an hour after the first: the two nodes bought for the first go 10 min
    after it ends, the min node stays, and two are bought again."""
    text = scenario(2, "2m", job("again", arrival="2h", duration="10m"))
    a = run(text, False)["autoscaler"]
    assert (a["scaleUps"], a["nodesAdded"], a["nodesRemoved"]) == (2, 4, 2)
    assert a["idleGpuHoursBought"] == pytest.approx(2 * 8 * 10 / 60, abs=0.1)


def test_the_max_bounds_what_pod_by_pod_buys_and_a_request_is_failed_saying_why() -> None:
    # Room for the gang only once a 2-node job ends: its 4 pods need all 4 nodes.
    text = GROUPS.replace("DELAY", "2m") + job("first", 1) + job("train", 3, arrival="10m")
    pod_by_pod, requests = run(text, False), run(text, True)
    # Pod by pod: the two nodes left under the max are bought and stand idle ~50 min.
    assert pod_by_pod["autoscaler"]["idleGpuHoursBought"] > 2 * 8 * 0.75
    # Asked for whole: 4 nodes needed, the max leaves 2: Failed, nothing bought for it.
    assert requests["autoscaler"]["requestsFailed"] >= 1
    assert requests["autoscaler"]["idleGpuHoursBought"] < 2 * 8 * 0.3
    for report in (pod_by_pod, requests):
        assert all(j["state"] == "succeeded" for j in report["jobs"])


def test_a_booking_that_runs_out_before_the_nodes_come_is_said_and_the_gang_still_starts() -> None:
    report = run(scenario(delay="15m"), True)
    a = report["autoscaler"]
    assert a["bookingsExpired"] == 1
    [job] = report["jobs"]
    assert job["state"] == "succeeded" and 900 <= job["firstWait"] <= 960


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("min: 1", "min: 5", "nodeGroups[0] (gpu).min: 5 is more than max (4)"),
    ("provisioningDelay: 2m", "provisioningDelay: 120", "nodeGroups[0] (gpu).provisioningDelay: "
                                                       "a duration needs a unit"),
    ("labels: {tier: a100}", "labels: {tier: a100}, count: 3",
     "nodeGroups[0] (gpu).template.count: unknown key"),
    ("costPerHour: 10", "costPerHour: -1", "nodeGroups[0] (gpu).costPerHour: expected a number >= 0"),
    ("scaleDownUnneededTime: 10m", "scaleDown: 10m", "autoscaler.scaleDown: unknown key"),
])
def test_bad_node_groups_name_the_field(old: str, new: str, expected: str) -> None:
    text = scenario()
    assert old in text
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text.replace(old, new, 1), "bad.yaml")
    assert expected in str(caught.value), str(caught.value)


def test_a_pod_no_group_template_takes_never_fits() -> None:
    text = scenario().replace("nvidia.com/gpu: 8}}\n      worker", "nvidia.com/gpu: 16}}\n      worker")
    [job] = run(text, True)["jobs"]
    assert job["state"] == "never fits" and "fits no node" in job["reason"]


def _request(cluster: MemoryCluster, name: str, count: int, class_name: str = ATOMIC_CLASS) -> None:
    cluster.create({"apiVersion": "v1", "kind": "PodTemplate",
                    "metadata": {"name": f"{name}-0", "namespace": "default"},
                    "template": {"spec": {"containers": [{"name": "main", "resources": {
                        "requests": {"cpu": "4", "nvidia.com/gpu": "8"}}}]}}})
    cluster.create({"apiVersion": PROVISIONING_REQUEST.api_version, "kind": "ProvisioningRequest",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"provisioningClassName": class_name,
                             "podSets": [{"podTemplateRef": {"name": f"{name}-0"}, "count": count}]}})


def _answer(cluster: MemoryCluster, name: str) -> dict[str, str]:
    obj = cluster.get(PROVISIONING_REQUEST, "default", name) or {}
    return {c["type"]: c.get("message", "") for c in (obj.get("status") or {}).get("conditions", [])}


def test_requests_are_answered_all_or_nothing_and_bookings_expire() -> None:
    clock = ManualClock()
    cluster = MemoryCluster(clock)
    [group] = parse_scenario(scenario(), "s.yaml").node_groups        # 1 node at first, max 4
    groups = NodeGroups(cluster, Meter(cluster), [group], 600.0)
    groups.start()
    _request(cluster, "four", 4)
    _request(cluster, "three", 3)
    _request(cluster, "check", 1, "check-capacity.autoscaling.x-k8s.io")
    groups.step(clock.now())
    assert _answer(cluster, "four")["Failed"] == "gpu: 4 node(s) needed, max 4 leaves 3"
    assert set(_answer(cluster, "three")) == {"Accepted", "Provisioned"}
    assert "Provisioned" in _answer(cluster, "check")      # the free min node holds it; nothing bought
    assert len(cluster.list(NODE)) == 1
    clock.advance(120.0)                                    # the group's provisioning delay
    groups.step(clock.now())
    assert len(cluster.list(NODE)) == 4
    clock.advance(600.0)
    groups.step(clock.now())
    assert set(_answer(cluster, "three")) == {"Accepted", "Provisioned", "BookingExpired"}
    assert groups.counts["bookingsExpired"] == 1
