"""Scheduling-side bad input: a pod asking for a negative amount is refused like
any malformed object (a condition and an Event that say why), and every other
pod is still scheduled."""
from __future__ import annotations

import pytest

from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import EVENT, POD
from kaisched.framework import default_config
from kaisched.tools.replay import replay

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


def pod(name: str, requests: dict[str, object], init: bool = False) -> dict:
    container = {"name": "c", "resources": {"requests": requests}}
    spec: dict = {"schedulerName": "kaisched", "containers": [{"name": "main"}]}
    if init:
        spec["initContainers"] = [container]
    else:
        spec["containers"] = [container]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


@pytest.mark.parametrize(("requests", "init"), [
    ({"cpu": "-1"}, False),
    ({"cpu": "1", "memory": "-2Gi"}, False),
    ({"nvidia.com/gpu": -4}, False),
    ({"cpu": "-500m"}, True),
], ids=["cpu", "memory", "gpu-number", "init-container"])
def test_a_negative_request_is_refused_with_a_condition_and_an_event(
        requests: dict[str, object], init: bool) -> None:
    registry = register_builtins()
    result = replay([NODE, pod("negative", requests, init), pod("healthy", {"cpu": "1"})],
                    default_config(registry), registry, 2)
    assert result.bindings == {"default/healthy": "node-a"}
    status = result.cluster.get(POD, "default", "negative").get("status") or {}
    (condition,) = [c for c in status["conditions"] if c["type"] == "PodScheduled"]
    assert condition["status"] == "False"
    assert "negative quantity" in condition["message"]
    # The Event is on the pod's gang: the PodGroup the PodGrouper made for it.
    events = [e for e in result.cluster.list(EVENT) if "negative" in e["involvedObject"]["name"]]
    assert [e["reason"] for e in events] == ["FailedScheduling"]     # once, not every session
    assert events[0]["type"] == "Warning" and "negative quantity" in events[0]["message"]


# -- a node with no allocatable ----------------------------------------------------------

def node_events(cluster) -> list[dict]:
    return [e for e in cluster.list(EVENT) if e["involvedObject"]["kind"] == "Node"]


def test_a_node_with_no_allocatable_gets_one_warning_event() -> None:
    registry = register_builtins()
    bare = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-bare"}}
    best_effort = pod("best-effort", {})
    result = replay([bare, NODE, pod("healthy", {"cpu": "1"}), best_effort],
                    default_config(registry), registry, 3)
    # Not a candidate, not even for a pod that asks for nothing.
    assert result.bindings == {"default/healthy": "node-a", "default/best-effort": "node-a"}
    (event,) = node_events(result.cluster)                           # once, over 3 sessions
    assert event["type"] == "Warning" and event["reason"] == "NodeNotUsable"
    assert event["involvedObject"]["name"] == "node-bare"
    assert "status.allocatable: none reported" in event["message"]


def test_a_node_is_warned_about_again_only_when_it_breaks_again() -> None:
    from kaisched.api.clock import ManualClock
    from kaisched.cluster.kinds import NODE as NODE_KIND
    from kaisched.cluster.memory import MemoryCluster
    from kaisched.runtime.binder import Binder
    from kaisched.runtime.scheduler import Scheduler

    clock = ManualClock()
    cluster = MemoryCluster(clock)
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"},
                    "status": {"allocatable": {"cpu": "bad"}}})
    registry = register_builtins()
    scheduler = Scheduler(cluster, default_config(registry), registry, clock,
                          Binder(cluster, clock.now))
    scheduler.run_once()
    scheduler.run_once()
    assert [e["message"].split(": ", 1)[1] for e in node_events(cluster)] == [
        "status.allocatable: cpu: not a quantity: 'bad'"]
    current = cluster.get(NODE_KIND, "", "node-b")
    cluster.replace({**current, "status": {"allocatable": {"cpu": "4"}}})     # fixed
    scheduler.run_once()
    cluster.replace({**current, "status": {}})                                # broken again
    scheduler.run_once()
    scheduler.run_once()
    assert len(node_events(cluster)) == 2
