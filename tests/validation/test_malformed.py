"""Objects with fields of the wrong shape (which only hand-written files get
past an API server with) never stop a replay: each broken object says what is
wrong and every other job is still scheduled."""
from __future__ import annotations

import pytest

from kaisched.builtins.catalog import register_builtins
from kaisched.cluster.kinds import POD
from kaisched.framework import default_config
from kaisched.tools.replay import replay

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


def pod(name: str, **overrides: object) -> dict:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"schedulerName": "kaisched",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    for path, value in overrides.items():
        section, _, key = path.partition("__")
        obj[section] = {**obj.get(section, {}), key: value} if key else value
    return obj


BROKEN = [
    pod("labels-list", metadata__labels=["a", "b"]),
    pod("containers-dict", spec__containers={"name": "c"}),
    pod("requests-list", spec__containers=[{"name": "c", "resources": {"requests": ["1"]}}]),
    pod("bad-quantity", spec__containers=[{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]),
    pod("tolerations-str", spec__tolerations="all"),
    pod("selector-list", spec__nodeSelector=["x"]),
    pod("affinity-str", spec__affinity="near"),
    pod("status-list", status=["Running"]),
    pod("annotations-str", metadata__annotations="kaisched.io/pod-group"),
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-broken"}, "status": ["Ready"]},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-taints"}, "spec": {"taints": "x"}},
    {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "PodGroup",
     "metadata": {"name": "pg-list", "namespace": "default"}, "spec": ["minMember", 2]},
    {"apiVersion": "scheduling.kaisched.io/v1alpha1", "kind": "Queue",
     "metadata": {"name": "q-broken"}, "spec": {"resources": {"cpu": ["quota", 2]}}},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"},
     "value": "high"},
]


@pytest.mark.parametrize("broken", BROKEN, ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_one_broken_object_does_not_stop_the_rest(broken: dict) -> None:
    registry = register_builtins()
    result = replay([NODE, broken, pod("healthy")], default_config(registry), registry, 2)
    assert result.bindings.get("default/healthy") == "node-a"


def test_a_broken_pod_says_what_is_wrong() -> None:
    registry = register_builtins()
    result = replay([NODE, pod("labels-list", metadata__labels=["a"])],
                    default_config(registry), registry, 1)
    assert result.bindings == {}
    status = result.cluster.get(POD, "default", "labels-list").get("status") or {}
    message = next(c["message"] for c in status["conditions"] if c["type"] == "PodScheduled")
    assert "malformed Pod" in message
