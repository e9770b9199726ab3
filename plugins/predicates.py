"""predicates: which nodes may take a task.

Static filters (node condition, unschedulable, nodeSelector, required node
affinity, taints) depend only on the pod's Placement, so they are computed
once per placement over all nodes; the resource fit (max pods included, as the
pods resource) is computed against future idle room on the rows asked for.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from kaisched.api.constraints import Placement
from kaisched.api.node import NodeSpec
from kaisched.api.task import TaskInfo
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.selection import RESOURCE_FIT

StaticTest = Callable[[Placement, NodeSpec], bool]


class PredicatesPlugin(PluginBase):
    name = "predicates"

    def on_session_open(self, ssn: Session) -> None:
        specs = [n.spec for n in ssn.cluster.nodes.values()]
        table = ssn.cluster.table
        ready = np.array([s.ready for s in specs], dtype=bool)
        schedulable = np.array([not s.unschedulable for s in specs], dtype=bool)
        ssn.register(Hook.PREDICATE, lambda task, rows: ready[rows], "node(s) not Ready")
        ssn.register(Hook.PREDICATE, lambda task, rows: schedulable[rows],
                     "node(s) unschedulable")
        ssn.register(Hook.PREDICATE, _per_placement(specs, _labels_match),
                     "node(s) didn't match node selector/affinity")
        ssn.register(Hook.PREDICATE, _per_placement(specs, _taints_tolerated),
                     "node(s) had untolerated taints")

        def resources(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
            return table.fits(table.vector(task.resreq), table.future[rows])

        ssn.register(Hook.PREDICATE, resources, RESOURCE_FIT)


def _labels_match(placement: Placement, spec: NodeSpec) -> bool:
    return placement.matches_labels(spec.labels, spec.name)


def _taints_tolerated(placement: Placement, spec: NodeSpec) -> bool:
    return placement.untolerated(spec.taints) is None


def _per_placement(specs: list[NodeSpec], test: StaticTest) -> Callable[[TaskInfo, np.ndarray], np.ndarray]:
    """A filter over all nodes, computed once per distinct placement.

    Nodes are grouped by what the test reads (labels or taints), so a class of
    pods costs one test per distinct node shape, not one per node.
    """
    shapes: dict[object, list[int]] = {}
    for i, spec in enumerate(specs):
        shape = tuple(sorted(spec.labels.items())) if test is _labels_match else spec.taints
        shapes.setdefault(shape, []).append(i)
    grouped = [(specs[idx[0]], np.array(idx)) for idx in shapes.values()]
    cache: dict[Placement, np.ndarray] = {}
    everyone = np.ones(len(specs), dtype=bool)

    def predicate(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        placement = task.placement
        mask = cache.get(placement)
        if mask is None:
            if test is _labels_match and not placement.node_selector and not placement.affinity:
                mask = everyone
            elif any(term.fields for term in placement.affinity):   # names differ per node
                mask = np.array([test(placement, spec) for spec in specs], dtype=bool)
            else:
                mask = np.zeros(len(specs), dtype=bool)
                for spec, idx in grouped:
                    if test(placement, spec):
                        mask[idx] = True
            cache[placement] = mask
        return mask[rows]

    return predicate
