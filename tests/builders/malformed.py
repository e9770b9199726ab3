"""Objects with fields of the wrong shape (which only hand-written files get past an API
server with): one of each kind, beside a node and a pod that are well formed."""
from __future__ import annotations

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


def pod(name: str, **overrides: object) -> dict:
    """A well-formed pod but for its overrides: `metadata__labels=[...]` replaces
    metadata.labels, `status=[...]` the whole status."""
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
