"""nodeorder: score nodes by how full they would be (binpack) or how empty
(spread), over cpu, memory and GPUs, weighted.

Binpack fills nodes before opening new ones, which keeps whole nodes free for
the next gang; spread evens the load out.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from kaisched.api.resource import CPU, GPU, MEMORY, Resource
from kaisched.api.task import TaskInfo
from kaisched.errors import ConfigError
from kaisched.framework import Hook, PluginBase, Session
from kaisched.framework.registry import plugin_arguments

STRATEGIES = ("binpack", "spread")
DEFAULT_WEIGHTS = {CPU: 1.0, MEMORY: 1.0, GPU: 2.0}


class NodeOrderPlugin(PluginBase):
    name = "nodeorder"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        arguments = plugin_arguments(arguments, "strategy", "weights")
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
        cols = np.array([table.dim_index[d] for d in self.weights if d in table.dim_index],
                        dtype=np.intp)
        weights = np.array([self.weights[table.dims[c]] for c in cols])
        spread = self.strategy == "spread"
        # What reads only allocatable is worked out once: a score is asked for
        # every placement, mostly over one changed row, where numpy's per-call
        # cost is all there is.
        alloc = table.alloc[:, cols]
        active = alloc > 0              # a resource the node lacks says nothing
        divisor = np.where(active, alloc, 1.0)
        weighted = weights * active
        total = weighted.sum(axis=1)
        total = np.where(total > 0, total, 1.0)     # no weighted resource: fill 0
        column = cols[None, :]
        vectors: dict[Resource, np.ndarray] = {}

        def score(task: TaskInfo, rows: np.ndarray) -> np.ndarray:
            vec = vectors.get(task.resreq)
            if vec is None:
                vec = vectors[task.resreq] = table.vector(task.resreq)[cols]
            ratio = (table.used[rows[:, None], column] + vec) / divisor[rows]
            fill = (np.minimum(np.maximum(ratio, 0.0), 1.0) * weighted[rows]).sum(axis=1)
            fill /= total[rows]
            return (1.0 - fill if spread else fill) * 100.0

        # The same for one row in plain Python, term by term as numpy sums
        # fewer than eight terms (from 0.0, left to right): bit for bit equal.
        # With eight or more, numpy sums pairwise: the array form answers.
        col_list = cols.tolist()
        pairs: dict[Resource, list[tuple[int, float]]] = {}
        # Per row asked, what reads only allocatable: (divisor, weight) per
        # column, and the total weight.
        static: dict[int, tuple[list[tuple[float, float]], float]] = {}

        def score_one(task: TaskInfo, row: int) -> float:
            if len(col_list) >= 8:
                return float(score(task, np.array([row], dtype=np.intp))[0])
            terms = pairs.get(task.resreq)
            if terms is None:
                vec = table.vector(task.resreq)
                terms = pairs[task.resreq] = [(c, float(vec[c])) for c in col_list]
            known = static.get(row)
            if known is None:
                known = static[row] = (list(zip(divisor[row].tolist(), weighted[row].tolist(),
                                                strict=True)), float(total[row]))
            used = table.used[row].tolist()
            fill = 0.0
            for (col, ask), (div, weight) in zip(terms, known[0], strict=True):
                # min(max(ratio, 0.0), 1.0) as comparisons: what the builtins
                # answer (NaN and -0.0 too), without two calls a term.
                ratio = (used[col] + ask) / div
                fill += (0.0 if ratio < 0.0 else 1.0 if ratio > 1.0 else ratio) * weight
            fill /= known[1]
            return (1.0 - fill if spread else fill) * 100.0

        ssn.register(Hook.NODE_ORDER, score, one=score_one)
