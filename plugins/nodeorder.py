"""nodeorder: score nodes by how full they would be (binpack) or how empty
(spread), over cpu, memory and GPUs, weighted.

Binpack fills nodes before opening new ones, which keeps whole nodes free for
the next gang; spread evens the load out.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from kaisched.api.resource import CPU, GPU, MEMORY
from kaisched.api.task import TaskInfo
from kaisched.errors import ConfigError
from kaisched.framework import Hook, PluginBase, Session

STRATEGIES = ("binpack", "spread")
DEFAULT_WEIGHTS = {CPU: 1.0, MEMORY: 1.0, GPU: 2.0}


class NodeOrderPlugin(PluginBase):
    name = "nodeorder"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        arguments = dict(arguments or {})
        unknown = sorted(set(arguments) - {"strategy", "weights"})
        if unknown:
            raise ConfigError(f"unknown argument {unknown[0]!r} (known: strategy, weights)")
        self.strategy = arguments.get("strategy", "binpack")
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"strategy: must be one of {', '.join(STRATEGIES)}, "
                              f"not {self.strategy!r}")
        weights = arguments.get("weights", {})
        if not isinstance(weights, dict):
            raise ConfigError("weights: expected a mapping of resource name to weight")
        self.weights = dict(DEFAULT_WEIGHTS)
        for name, weight in weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                raise ConfigError(f"weights.{name}: expected a number >= 0, not {weight!r}")
            self.weights[str(name)] = float(weight)

    def on_session_open(self, ssn: Session) -> None:
        table = ssn.cluster.table
        cols = [table.dim_index[d] for d in self.weights if d in table.dim_index]
        weights = np.array([self.weights[table.dims[c]] for c in cols])
        spread = self.strategy == "spread"

        def score(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
            vec = table.vector(task.resreq)[cols]
            alloc = table.alloc[rows][:, cols]
            after = table.used[rows][:, cols] + vec
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(alloc > 0, after / alloc, 0.0)
            active = alloc > 0          # a resource the node lacks says nothing
            fill = (np.clip(ratio, 0.0, 1.0) * weights * active).sum(axis=1)
            total = (weights * active).sum(axis=1)
            fill = np.divide(fill, total, out=np.zeros_like(fill), where=total > 0)
            return (1.0 - fill if spread else fill) * 100.0

        ssn.register(Hook.NODE_ORDER, score)
