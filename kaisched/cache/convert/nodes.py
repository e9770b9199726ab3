"""Nodes: allocatable room, labels, taints and whether a pod may land there."""
from __future__ import annotations

from kaisched.api.constraints import Taint
from kaisched.api.gpuask import gpu_count_label
from kaisched.api.node import NodeSpec
from kaisched.api.resource import GPU, PODS, Resource
from kaisched.api.types import NodeName
from kaisched.cache.convert.common import Obj, metadata, quantities

DEFAULT_MAX_PODS = 110


def node_spec(node: Obj) -> NodeSpec:
    return node_spec_and_problem(node)[0]


def node_spec_and_problem(node: Obj) -> tuple[NodeSpec, str | None]:
    """The node, and why no pod can be placed on it when it cannot be used at
    all (no allocatable reported, or one that does not parse): such a node is
    no candidate, and the cache says so once, as a warning Event."""
    meta, spec, status = metadata(node), node.get("spec") or {}, node.get("status") or {}
    problems: list[str] = []
    raw_alloc = status.get("allocatable") or status.get("capacity") or {}
    if not raw_alloc:
        # Not yet reported by a kubelet (or written by hand without it).
        problems.append("status.allocatable: none reported (nor status.capacity)")
    alloc = quantities(raw_alloc, "status.allocatable", problems)
    if not isinstance(raw_alloc, dict) or PODS not in raw_alloc:
        alloc = alloc + Resource.of({PODS: DEFAULT_MAX_PODS})   # hand-written nodes omit it
    count = gpu_count_label(meta.get("labels") or {})
    if count and not alloc.get(GPU):
        # GPU feature discovery's count, where no device plugin reports them (yet).
        alloc = alloc + Resource.of({GPU: count})
    conditions = status.get("conditions")
    # A node written by hand without conditions is taken as Ready.
    ready = not conditions or any(c.get("type") == "Ready" and c.get("status") == "True"
                                  for c in conditions)
    taints = tuple(Taint(str(t.get("key", "")), str(t.get("value") or ""),
                         str(t.get("effect") or "NoSchedule"))
                   for t in spec.get("taints") or () if isinstance(t, dict))
    node_info = NodeSpec(NodeName(meta.get("name", "")), alloc, dict(meta.get("labels") or {}),
                         taints, ready and not problems, bool(spec.get("unschedulable")),
                         str(meta.get("creationTimestamp") or ""))
    return node_info, "; ".join(problems) or None
