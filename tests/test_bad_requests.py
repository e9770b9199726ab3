"""Scheduling-side bad input: a pod asking for a negative amount is refused like
any malformed object (a condition and an Event that say why), and every other
pod is still scheduled."""
from __future__ import annotations

import pytest

from kaisched.builtins import register_builtins
from kaisched.cluster.kinds import EVENT, POD
from kaisched.framework import default_config
from kaisched.replay import replay

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
