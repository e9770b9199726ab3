"""nodeaffinity: preferred node affinity as a score.

A node scores the weights of the preferred terms it matches, over the sum of
all the pod's weights, scaled to 0..100 and times the plugin's `weight`
argument, so it adds to nodeorder's binpack/spread score (also 0..100) in a
proportion the config sets. Terms depend only on node labels: computed once
per placement and group of alike nodes.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from kaisched.api.constraints import Placement
from kaisched.api.task import TaskInfo
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.registry import weight_argument


class NodeAffinityPlugin(PluginBase):
    name = "nodeaffinity"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.weight = weight_argument(arguments)

    def on_session_open(self, ssn: Session) -> None:
        shapes = ssn.cluster.node_shapes()       # the weights matched, per group of alike nodes
        cache: dict[Placement, np.ndarray] = {}
        zeros = np.zeros(len(ssn.cluster.table))

        def scores(placement: Placement) -> np.ndarray:
            found = cache.get(placement)
            if found is None:
                total = sum(abs(w) for w, _ in placement.preferred) or 1
                found = shapes.preferred(placement) * (100.0 * self.weight / total)
                cache[placement] = found
            return found

        def score(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
            placement = task.placement
            if not placement.preferred or not self.weight:
                return zeros[rows]
            return scores(placement)[rows]

        def score_one(task: TaskInfo, row: int) -> float:
            placement = task.placement
            if not placement.preferred or not self.weight:
                return 0.0
            return float(scores(placement)[row])

        ssn.register(Hook.NODE_ORDER, score, one=score_one)
